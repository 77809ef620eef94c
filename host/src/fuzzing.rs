//! Entry points for the fuzz targets in `fuzz/`: thin wrappers over the crate-private parsers
//! of untrusted bytes (request heads, proxy targets, ACP frames), with plain return types the
//! targets can compare. Not an API: nothing outside `fuzz/` should use it.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use serde_json::Value;

/// A request head the guard's parser accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Bytes of the head, its final `\r\n\r\n` included.
    pub end: usize,
    /// The method.
    pub method: String,
    /// The request target.
    pub target: String,
    /// Header names, in order.
    pub names: Vec<String>,
}

/// Scan `chunks` (one request's bytes, as they arrive) for a head the way the guard does, and
/// parse it. `Ok(None)`: more bytes needed. `Err`: the audit reason.
pub fn request_head(chunks: &[&[u8]]) -> Result<Option<Head>, &'static str> {
    use crate::guard::head::{parse_request, scan_head};
    let mut buf = Vec::new();
    let mut scanned = 0;
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        if buf.first().is_some_and(|b| !b.is_ascii_uppercase()) {
            return Err("bad_request");
        }
        if let Some(end) = scan_head(&buf, &mut scanned).map_err(|e| e.reason())? {
            let head = parse_request(buf.get(..end).unwrap_or_default()).map_err(|e| e.reason())?;
            return Ok(Some(Head {
                end,
                method: head.method,
                target: head.target,
                names: head.headers.into_iter().map(|(name, _)| name).collect(),
            }));
        }
    }
    Ok(None)
}

/// An absolute-form `http:` URL, split as the plain-HTTP forwarder does: host as written, port,
/// origin-form path. `Err`: the audit reason.
pub fn split_url(target: &str) -> Result<(String, u16, String), &'static str> {
    crate::guard::http::split_url(target)
        .map(|url| (url.host.to_owned(), url.port, url.path.to_owned()))
        .map_err(|e| e.reason())
}

/// A `CONNECT` authority split into host (as written) and port. `Err`: the audit reason.
pub fn split_authority(authority: &str) -> Result<(String, u16), &'static str> {
    crate::guard::connect::split_authority(authority)
        .map(|(host, port)| (host.to_owned(), port))
        .map_err(|e| e.reason())
}

/// The host check of both paths (userinfo, then normalisation). `Err`: the audit reason.
pub fn check_host(host: &str) -> Result<String, &'static str> {
    crate::guard::connect::check_host(host).map_err(|e| e.reason())
}

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
        Ok(Incoming::Request { id, method }) => Frame::Request(id, method),
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
    fn facade_answers_like_the_parsers() {
        let head = request_head(&[b"CONNECT a.b:443 HTTP/1.1\r\nHo", b"st: a.b\r\n\r\nxx"])
            .unwrap()
            .unwrap();
        assert_eq!(head.method, "CONNECT");
        assert_eq!(head.names, ["Host"]);
        assert_eq!(head.end, 39);
        assert_eq!(request_head(&[b"GET / HTTP/1.1\n"]), Err("bad_request"));
        assert_eq!(
            split_url("http://a.b:81/x#f"),
            Ok(("a.b".into(), 81, "/x".into()))
        );
        assert_eq!(split_authority("a.b"), Err("bad_target"));
        assert_eq!(check_host("A.B."), Ok("a.b".into()));
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
