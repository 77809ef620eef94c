//! Response bodies: a fixed one, and a streamed one fed by a task that dies with the body
//! (a client that goes away drops the body, which aborts the task, which drops the agent,
//! which kills its process group).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub(crate) type ResponseBody = BoxBody<Bytes, Infallible>;

pub(crate) fn full(bytes: impl Into<Bytes>) -> ResponseBody {
    Full::new(bytes.into()).boxed()
}

/// A body whose frames come from a channel, owning the task that produces them.
pub(crate) struct Streamed {
    frames: mpsc::Receiver<Bytes>,
    producer: JoinHandle<()>,
}

impl Streamed {
    pub(crate) fn body(frames: mpsc::Receiver<Bytes>, producer: JoinHandle<()>) -> ResponseBody {
        Self { frames, producer }.boxed()
    }
}

impl Body for Streamed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.frames
            .poll_recv(cx)
            .map(|frame| frame.map(|bytes| Ok(Frame::data(bytes))))
    }
}

impl Drop for Streamed {
    fn drop(&mut self) {
        self.producer.abort();
    }
}
