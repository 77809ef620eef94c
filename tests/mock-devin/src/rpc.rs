//! JSON-RPC 2.0 over newline-delimited stdio: bounded line reading, classification of what
//! the client sent, and a shared writer that puts exactly one message on each stdout line.

use std::io::{self, BufRead, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

pub(crate) const PARSE_ERROR: i64 = -32700;
pub(crate) const INVALID_REQUEST: i64 = -32600;
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
pub(crate) const INVALID_PARAMS: i64 = -32602;
pub(crate) const INTERNAL_ERROR: i64 = -32603;

/// The longest input line accepted (64 MiB); longer lines are discarded and answered with a
/// parse error.
pub(crate) const MAX_LINE: usize = 64 * 1024 * 1024;

/// One read from the input stream.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    /// End of input; no partial line was pending.
    Eof,
    /// One line, without its terminator (`\n` or `\r\n`).
    Complete(Vec<u8>),
    /// A line longer than the limit; its bytes were discarded. Carries its length.
    TooLong(usize),
}

/// Reads one line of at most `limit` bytes into `buf` (reused between calls). A last line
/// without a terminator still counts as a line.
pub(crate) fn read_line<R: BufRead>(
    reader: &mut R,
    limit: usize,
    buf: &mut Vec<u8>,
) -> io::Result<Line> {
    buf.clear();
    let mut length = 0usize;
    let mut too_long = false;
    let mut seen_any = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if available.is_empty() {
            return Ok(if too_long {
                Line::TooLong(length)
            } else if seen_any {
                Line::Complete(std::mem::take(buf))
            } else {
                Line::Eof
            });
        }
        seen_any = true;
        let (take, consumed, complete) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (at, at + 1, true),
            None => (available.len(), available.len(), false),
        };
        length = length.saturating_add(take);
        if !too_long && length <= limit {
            buf.extend_from_slice(&available[..take]);
        } else if !too_long {
            too_long = true;
            buf.clear();
            buf.shrink_to(64 * 1024);
        }
        reader.consume(consumed);
        if complete {
            if too_long {
                return Ok(Line::TooLong(length));
            }
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(Line::Complete(std::mem::take(buf)));
        }
    }
}

/// What one input line was.
#[derive(Debug, PartialEq)]
pub(crate) enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// An answer to a request this agent sent: `Ok(result)` or `Err(error object)`.
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
    /// Not a JSON-RPC 2.0 message; to be answered with this error (id null when unknown).
    Invalid {
        id: Value,
        code: i64,
        message: String,
    },
}

fn invalid(id: Value, code: i64, message: impl Into<String>) -> Incoming {
    Incoming::Invalid {
        id,
        code,
        message: message.into(),
    }
}

/// Classifies one input line.
pub(crate) fn classify(line: &[u8]) -> Incoming {
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(err) => return invalid(Value::Null, PARSE_ERROR, format!("Parse error: {err}")),
    };
    let Value::Object(mut object) = value else {
        return invalid(
            Value::Null,
            INVALID_REQUEST,
            "Invalid Request: a message must be a JSON object (batches are not supported)",
        );
    };
    let id = match object.remove("id") {
        None => None,
        Some(id @ (Value::Null | Value::Number(_) | Value::String(_))) => Some(id),
        Some(_) => {
            return invalid(
                Value::Null,
                INVALID_REQUEST,
                "Invalid Request: id must be a string, a number or null",
            )
        }
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(
            id.unwrap_or(Value::Null),
            INVALID_REQUEST,
            "Invalid Request: jsonrpc must be \"2.0\"",
        );
    }
    match object.remove("method") {
        Some(Value::String(method)) => {
            let params = object.remove("params").unwrap_or(Value::Null);
            match id {
                Some(id) => Incoming::Request { id, method, params },
                None => Incoming::Notification { method, params },
            }
        }
        Some(_) => invalid(
            id.unwrap_or(Value::Null),
            INVALID_REQUEST,
            "Invalid Request: method must be a string",
        ),
        None => match (id, object.remove("result"), object.remove("error")) {
            (Some(id), Some(result), None) => Incoming::Response {
                id,
                outcome: Ok(result),
            },
            (Some(id), None, Some(error)) => Incoming::Response {
                id,
                outcome: Err(error),
            },
            (id, _, _) => invalid(
                id.unwrap_or(Value::Null),
                INVALID_REQUEST,
                "Invalid Request: neither a request nor a response",
            ),
        },
    }
}

/// An error object, with `data` when given.
pub(crate) fn error_object(code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = Map::new();
    error.insert("code".into(), json!(code));
    error.insert("message".into(), json!(message));
    if let Some(data) = data {
        error.insert("data".into(), data);
    }
    Value::Object(error)
}

/// The writer shared by the reading loop and the turn: one message per line, flushed at once.
#[derive(Clone)]
pub(crate) struct Output {
    sink: Arc<Mutex<Box<dyn Write + Send>>>,
    next_id: Arc<AtomicU64>,
}

impl Output {
    pub(crate) fn stdout() -> Self {
        Self::new(Box::new(io::stdout()))
    }

    pub(crate) fn new(sink: Box<dyn Write + Send>) -> Self {
        Self {
            sink: Arc::new(Mutex::new(sink)),
            next_id: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Writes `line` and a newline, as one write, and flushes. A client that closed our stdout
    /// is gone: there is nobody left to talk to, so the process ends.
    pub(crate) fn line(&self, line: &[u8]) {
        let mut frame = Vec::with_capacity(line.len() + 1);
        frame.extend_from_slice(line);
        frame.push(b'\n');
        let mut sink = self
            .sink
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(err) = sink.write_all(&frame).and_then(|()| sink.flush()) {
            eprintln!("mock-devin: cannot write to stdout ({err}); exiting");
            std::process::exit(1);
        }
    }

    pub(crate) fn send(&self, message: &Value) {
        match serde_json::to_vec(message) {
            Ok(bytes) => self.line(&bytes),
            // Values built from serde_json::Value always serialize; keep going if not.
            Err(err) => eprintln!("mock-devin: cannot serialize a message: {err}"),
        }
    }

    pub(crate) fn respond(&self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    pub(crate) fn error(&self, id: &Value, code: i64, message: &str, data: Option<Value>) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "error": error_object(code, message, data)}));
    }

    pub(crate) fn notify(&self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request with a fresh numeric id and returns that id.
    pub(crate) fn request(&self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id.fetch_add(1, Ordering::Relaxed));
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }
}

/// Reads messages until `input` ends (or fails) and hands each to `handle`; blank lines are
/// skipped and a line over [`MAX_LINE`] is discarded with a parse error, as the CLI does.
pub(crate) fn serve_lines<R: BufRead>(
    input: &mut R,
    out: &Output,
    mut handle: impl FnMut(Incoming),
) {
    let mut buf = Vec::new();
    loop {
        match read_line(input, MAX_LINE, &mut buf) {
            Ok(Line::Eof) => return,
            Ok(Line::Complete(line)) => {
                if !line.iter().all(u8::is_ascii_whitespace) {
                    handle(classify(&line));
                }
                buf = line;
            }
            Ok(Line::TooLong(length)) => {
                eprintln!(
                    "mock-devin: discarded an input line of {length} bytes (limit {MAX_LINE})"
                );
                out.error(
                    &Value::Null,
                    PARSE_ERROR,
                    "Parse error: message exceeds the 64 MiB line limit",
                    None,
                );
            }
            Err(err) => {
                eprintln!("mock-devin: cannot read stdin: {err}");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn lines(input: &[u8], limit: usize) -> Vec<Line> {
        let mut reader = io::BufReader::with_capacity(4, Cursor::new(input.to_vec()));
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let line = read_line(&mut reader, limit, &mut buf).expect("read");
            let eof = line == Line::Eof;
            out.push(line);
            if eof {
                return out;
            }
        }
    }

    #[test]
    fn reads_lines_with_a_bound() {
        assert_eq!(
            lines(b"ab\r\n0123456789\nxyz", 8),
            vec![
                Line::Complete(b"ab".to_vec()),
                Line::TooLong(10),
                Line::Complete(b"xyz".to_vec()),
                Line::Eof
            ]
        );
        assert_eq!(lines(b"", 8), vec![Line::Eof]);
        assert_eq!(
            lines(b"\n12345678\n", 8),
            vec![
                Line::Complete(vec![]),
                Line::Complete(b"12345678".to_vec()),
                Line::Eof
            ]
        );
        assert_eq!(lines(b"123456789", 8), vec![Line::TooLong(9), Line::Eof]);
    }

    #[test]
    fn classifies_messages() {
        assert!(matches!(
            classify(b"this is not json"),
            Incoming::Invalid {
                id: Value::Null,
                code: PARSE_ERROR,
                ..
            }
        ));
        assert!(matches!(
            classify(b"[1]"),
            Incoming::Invalid {
                code: INVALID_REQUEST,
                ..
            }
        ));
        assert!(matches!(
            classify(br#"{"id":3,"method":"x"}"#),
            Incoming::Invalid {
                id: Value::Number(_),
                code: INVALID_REQUEST,
                ..
            }
        ));
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":"a","method":"m","params":{"k":1}}"#),
            Incoming::Request {
                id: json!("a"),
                method: "m".into(),
                params: json!({"k": 1})
            }
        );
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","method":"n"}"#),
            Incoming::Notification {
                method: "n".into(),
                params: Value::Null
            }
        );
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":7,"error":{"code":1}}"#),
            Incoming::Response {
                id: json!(7),
                outcome: Err(json!({"code": 1}))
            }
        );
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","id":{},"method":"m"}"#),
            Incoming::Invalid {
                id: Value::Null,
                code: INVALID_REQUEST,
                ..
            }
        ));
    }

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| io::ErrorKind::Other)?
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn one_message_per_line_and_fresh_ids() {
        let buffer = Shared::default();
        let out = Output::new(Box::new(buffer.clone()));
        assert_eq!(out.request("a", json!({"text": "x\ny"})), json!(0));
        assert_eq!(out.request("b", json!({})), json!(1));
        out.error(&Value::Null, PARSE_ERROR, "Parse error", None);
        let text = String::from_utf8(buffer.0.lock().expect("lock").clone()).expect("utf8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        for line in lines {
            let value: Value = serde_json::from_str(line).expect("json");
            assert_eq!(value["jsonrpc"], "2.0");
        }
    }
}
