//! Entry points for the fuzz targets in `fuzz/`: thin wrappers over the crate-private ACP
//! frame parser, with plain return types the targets can compare. Built only with the
//! `fuzzing` feature (and in this crate's tests): not an API.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use serde_json::Value;

/// One ACP frame, as the reader classified it.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A response: its id, and `Ok(result)` or `Err(error)`.
    Response(Value, Result<Value, Value>),
    /// A request from the agent: id and method.
    Request(Value, String),
    /// A notification: method and params.
    Notification(String, Value),
    /// A refusal: the error code.
    Error(&'static str),
}

fn frame(result: Result<crate::acp::frame::Incoming, crate::acp::AcpError>) -> Frame {
    use crate::acp::frame::Incoming;
    match result {
        Ok(Incoming::Response { id, outcome }) => Frame::Response(id, outcome),
        Ok(Incoming::Request { id, method, .. }) => Frame::Request(id, method),
        Ok(Incoming::Notification { method, params }) => Frame::Notification(method, params),
        Err(e) => Frame::Error(e.code()),
    }
}

/// Parse one line (without its newline) as an ACP frame.
pub fn acp_frame(line: &[u8]) -> Frame {
    frame(crate::acp::frame::parse(line))
}

/// Read every frame of `input` with a line cap of `max_line`, until end of input or the first
/// refusal (which ends the list).
pub fn acp_frames(input: &[u8], max_line: usize) -> Vec<Frame> {
    let mut reader = crate::acp::frame::FrameReader::new(input, max_line);
    let mut frames = Vec::new();
    loop {
        match ready(reader.next()) {
            Some(Ok(Some(incoming))) => frames.push(frame(Ok(incoming))),
            Some(Ok(None)) => return frames,
            Some(Err(e)) => {
                frames.push(frame(Err(e)));
                return frames;
            }
            None => {
                frames.push(Frame::Error("pending"));
                return frames;
            }
        }
    }
}

/// Poll a future once: an in-memory reader is always ready, so `None` would itself be a bug.
fn ready<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facade_answers_like_the_parser() {
        let frames = acp_frames(b"{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n\nxyz\n", 100);
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0], Frame::Notification("m".into(), Value::Null));
        assert_eq!(frames[1], Frame::Error("agent_malformed_frame"));
        assert_eq!(
            acp_frames(&[b'x'; 20], 10),
            [Frame::Error("agent_output_too_large")]
        );
    }
}
