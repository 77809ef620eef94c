//! Response bodies: a whole body, or one fed by a channel (watch streams).
//!
//! The channel body is http-body-util's `StreamBody` over tokio-stream's `ReceiverStream`, the
//! same as the bridge's streamed answers.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt as _;

pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// A response body fed by `frames`: it ends when the sender is dropped.
pub(crate) fn channel(frames: mpsc::Receiver<Bytes>) -> Body {
    StreamBody::new(ReceiverStream::new(frames).map(|bytes| Ok(Frame::data(bytes)))).boxed()
}

pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}
