//! Newline-delimited JSON-RPC frames with a bounded line length.

use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};

use super::AcpError;
use crate::transcript::{Direction, Recorder};

/// One message from the agent.
#[derive(Debug)]
pub(crate) enum Incoming {
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
}

/// Reads frames, refusing lines longer than `max_line` bytes.
pub(crate) struct FrameReader<R> {
    reader: BufReader<R>,
    max_line: usize,
    buffer: Vec<u8>,
    /// Where every line read is also recorded (a trace), when set.
    tap: Option<Recorder>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub(crate) fn new(inner: R, max_line: usize) -> Self {
        Self {
            reader: BufReader::with_capacity(64 << 10, inner),
            max_line,
            buffer: Vec::new(),
            tap: None,
        }
    }

    /// Records every line read from now on in `recorder`.
    pub(crate) fn tap(&mut self, recorder: Recorder) {
        self.tap = Some(recorder);
    }

    /// The next message; `Ok(None)` at end of stream. Blank lines are skipped.
    ///
    /// Cancel safe: a line cut short by a timeout stays buffered and is completed by the next
    /// call, so a connection stays in step after a caller stopped waiting.
    pub(crate) async fn next(&mut self) -> Result<Option<Incoming>, AcpError> {
        loop {
            let limit = u64::try_from(
                self.max_line
                    .saturating_add(1)
                    .saturating_sub(self.buffer.len()),
            )
            .unwrap_or(u64::MAX);
            let read = (&mut self.reader)
                .take(limit)
                .read_until(b'\n', &mut self.buffer)
                .await
                .map_err(AcpError::Io)?;
            if read == 0 && self.buffer.is_empty() {
                return Ok(None);
            }
            if self.buffer.last() != Some(&b'\n') && self.buffer.len() > self.max_line {
                self.buffer.clear();
                return Err(AcpError::OutputTooLarge(self.max_line));
            }
            let line = self.buffer.trim_ascii();
            if let Some(tap) = &self.tap {
                tap.record(Direction::FromAgent, line);
            }
            let parsed = (!line.is_empty()).then(|| parse(line));
            self.buffer.clear();
            if let Some(parsed) = parsed {
                return parsed.map(Some);
            }
        }
    }
}

pub(crate) fn parse(line: &[u8]) -> Result<Incoming, AcpError> {
    let value: Value = serde_json::from_slice(line).map_err(|_| AcpError::MalformedFrame)?;
    let Value::Object(mut object) = value else {
        return Err(AcpError::MalformedFrame);
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(AcpError::MalformedFrame);
    }
    let method = object.remove("method");
    let id = object.remove("id");
    match (method, id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request {
            id,
            method,
            params: object.remove("params").unwrap_or(Value::Null),
        }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification {
            method,
            params: object.remove("params").unwrap_or(Value::Null),
        }),
        (None, Some(id)) => match (object.remove("result"), object.remove("error")) {
            (Some(result), None) => Ok(Incoming::Response {
                id,
                outcome: Ok(result),
            }),
            (None, Some(error)) => Ok(Incoming::Response {
                id,
                outcome: Err(error),
            }),
            _ => Err(AcpError::MalformedFrame),
        },
        _ => Err(AcpError::MalformedFrame),
    }
}

/// A request frame, newline-terminated. The params are written straight into the frame
/// (a prompt can be megabytes: no intermediate `Value`, no second copy of its text).
pub(crate) fn request(id: u64, method: &str, params: &impl Serialize) -> Result<Vec<u8>, AcpError> {
    line(&Frame {
        jsonrpc: "2.0",
        id: Some(id),
        method: Some(method),
        params: Some(params),
    })
}

/// A notification frame, newline-terminated.
pub(crate) fn notification(method: &str, params: &impl Serialize) -> Result<Vec<u8>, AcpError> {
    line(&Frame {
        jsonrpc: "2.0",
        id: None,
        method: Some(method),
        params: Some(params),
    })
}

/// A response frame, newline-terminated.
pub(crate) fn response(id: &Value, outcome: Result<Value, Value>) -> Vec<u8> {
    let value = match outcome {
        Ok(result) => serde_json::json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err(error) => serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": error }),
    };
    // A `Value` always serializes.
    line(&value).unwrap_or_default()
}

/// The fields of an outgoing request or notification, in JSON-RPC's order.
#[derive(Serialize)]
struct Frame<'a, P: Serialize> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
}

/// `value` as compact JSON and a newline. Fails only for params that JSON cannot hold (a map
/// with keys that are not strings).
fn line(value: &impl Serialize) -> Result<Vec<u8>, AcpError> {
    let mut bytes = Vec::with_capacity(256);
    serde_json::to_writer(&mut bytes, value).map_err(|_| AcpError::MalformedFrame)?;
    bytes.push(b'\n');
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(input: &[u8], max: usize) -> Vec<Result<Option<Incoming>, AcpError>> {
        let mut reader = FrameReader::new(input, max);
        let mut out = Vec::new();
        loop {
            let next = reader.next().await;
            let stop = !matches!(next, Ok(Some(_)));
            out.push(next);
            if stop {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn frames_are_classified() {
        let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"y\",\"params\":[]}\n";
        let frames = read_all(input, 1024).await;
        assert!(matches!(frames[0], Ok(Some(Incoming::Response { .. }))));
        assert!(matches!(frames[1], Ok(Some(Incoming::Notification { .. }))));
        assert!(matches!(frames[2], Ok(Some(Incoming::Request { .. }))));
        assert!(matches!(frames[3], Ok(None)));
    }

    #[tokio::test]
    async fn a_read_cut_short_by_a_timeout_resumes_in_step() {
        let (mut writer, reader) = tokio::io::duplex(1024);
        let mut frames = FrameReader::new(reader, 1024);
        use tokio::io::AsyncWriteExt;
        writer
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":")
            .await
            .unwrap();
        let cut = tokio::time::timeout(std::time::Duration::from_millis(50), frames.next()).await;
        assert!(cut.is_err(), "half a line is not a frame");
        writer.write_all(b"\"late\"}\n").await.unwrap();
        match frames.next().await {
            Ok(Some(Incoming::Notification { method, .. })) => assert_eq!(method, "late"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn malformed_and_oversized_lines_are_errors() {
        for bad in [
            &b"not json\n"[..],
            b"[1,2]\n",
            b"{\"id\":1,\"result\":1}\n",
            b"{\"jsonrpc\":\"2.0\",\"id\":1}\n",
        ] {
            assert!(
                matches!(read_all(bad, 1024).await[0], Err(AcpError::MalformedFrame)),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"{}\"}}\n",
            "x".repeat(100)
        );
        assert!(matches!(
            read_all(long.as_bytes(), 50).await[0],
            Err(AcpError::OutputTooLarge(50))
        ));
    }

    #[test]
    fn outgoing_frames_are_one_compact_line_that_reads_back_as_sent() {
        let text = "line one\nquote \" and tab\t and \u{1f600}";
        let request = request(7, "session/prompt", &serde_json::json!({ "text": text }))
            .expect("serializable");
        assert_eq!(request.last(), Some(&b'\n'));
        assert_eq!(request.iter().filter(|&&b| b == b'\n').count(), 1);
        let value: Value = serde_json::from_slice(&request).expect("JSON");
        assert_eq!(
            value,
            serde_json::json!({
                "jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": { "text": text }
            })
        );
        let notification = notification("session/cancel", &serde_json::json!({ "sessionId": "s" }))
            .expect("serializable");
        let value: Value = serde_json::from_slice(&notification).expect("JSON");
        assert_eq!(
            value,
            serde_json::json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": "s" } })
        );
        assert!(matches!(
            parse(notification.trim_ascii()),
            Ok(Incoming::Notification { .. })
        ));
    }

    #[test]
    fn params_that_json_cannot_hold_are_refused_instead_of_sent() {
        let mut map = std::collections::BTreeMap::new();
        map.insert(vec![1u8], 1u8);
        assert!(matches!(
            request(1, "m", &map),
            Err(AcpError::MalformedFrame)
        ));
    }
}
