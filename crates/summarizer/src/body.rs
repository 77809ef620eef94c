//! Response bodies: a fixed one, and a streamed one fed by a task that dies with the body
//! (a client that goes away drops the body, which aborts the task, which drops the agent,
//! which kills its process group).

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt as _;

pub(crate) type ResponseBody = BoxBody<Bytes, Infallible>;

pub(crate) fn full(bytes: impl Into<Bytes>) -> ResponseBody {
    Full::new(bytes.into()).boxed()
}

/// A body whose frames come from `frames` (a channel body: http-body-util's `StreamBody` over
/// tokio-stream's `ReceiverStream`, as the fake fleet's watch streams are), owning `producer`,
/// the task that sends them: the body ends when the task drops its sender, and dropping the
/// body aborts the task.
pub(crate) fn streamed(frames: mpsc::Receiver<Bytes>, producer: JoinHandle<()>) -> ResponseBody {
    let producer = AbortOnDrop(producer);
    let frames = ReceiverStream::new(frames).map(move |bytes| {
        // The stream owns the guard: it is dropped, and the producer aborted, with the body.
        let _owner: &AbortOnDrop = &producer;
        Ok(Frame::data(bytes))
    });
    StreamBody::new(frames).boxed()
}

/// Aborts its task when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_streamed_body_passes_the_frames_and_dropping_it_aborts_the_producer() {
        let (sender, receiver) = mpsc::channel::<Bytes>(4);
        let (started, running) = tokio::sync::oneshot::channel::<()>();
        let producer = tokio::spawn(async move {
            let _ = sender.send(Bytes::from_static(b"one")).await;
            let _ = started.send(());
            // Holds the sender (the body stays open) until it is aborted.
            std::future::pending::<()>().await;
        });
        let abort = producer.abort_handle();
        let mut body = streamed(receiver, producer);
        let frame = body.frame().await.expect("a frame").expect("infallible");
        assert_eq!(frame.into_data().ok(), Some(Bytes::from_static(b"one")));
        running.await.expect("the producer runs");
        assert!(!abort.is_finished());
        drop(body);
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while !abort.is_finished() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the producer was aborted with the body");
    }

    #[tokio::test]
    async fn a_streamed_body_ends_when_its_producer_drops_the_sender() {
        let (sender, receiver) = mpsc::channel::<Bytes>(4);
        let producer = tokio::spawn(async move {
            let _ = sender.send(Bytes::from_static(b"last")).await;
        });
        let collected = streamed(receiver, producer)
            .collect()
            .await
            .expect("infallible")
            .to_bytes();
        assert_eq!(collected, Bytes::from_static(b"last"));
    }
}
