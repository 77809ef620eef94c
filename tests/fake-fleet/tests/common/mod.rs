//! A tiny raw HTTP/1.1 client for the tests: one request per connection, and an incremental
//! reader of `text/event-stream` answers.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub(crate) fn addr(url: &str) -> String {
    url.trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned()
}

async fn send(
    base: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> TcpStream {
    let mut stream = TcpStream::connect(addr(base)).await.expect("connect");
    let body = body.map(Value::to_string).unwrap_or_default();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: fleet\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    stream
}

/// Splits a complete answer into status, headers and the (de-chunked) body.
fn parse(raw: &[u8]) -> (u16, String, Vec<u8>) {
    let split = find(raw, b"\r\n\r\n").expect("complete headers");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut body = raw[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut decoded = Vec::new();
        let mut rest = &body[..];
        while let Some(line) = find(rest, b"\r\n") {
            let size =
                usize::from_str_radix(std::str::from_utf8(&rest[..line]).unwrap().trim(), 16)
                    .unwrap();
            if size == 0 {
                break;
            }
            decoded.extend_from_slice(&rest[line + 2..line + 2 + size]);
            rest = &rest[line + 2 + size + 2..];
        }
        body = decoded;
    }
    (status, head, body)
}

pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One request; the status and the body as JSON (a JSON string if it is not JSON).
pub(crate) async fn call(
    base: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (u16, Value) {
    let (status, bytes) = call_raw(base, method, path, token, body).await;
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

pub(crate) async fn call_raw(
    base: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (u16, Vec<u8>) {
    let mut stream = send(base, method, path, token, body).await;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .expect("answer in time")
        .expect("read");
    let (status, _, body) = parse(&raw);
    (status, body)
}

/// An open watch stream.
pub(crate) struct Sse {
    stream: TcpStream,
    pub status: u16,
    raw: Vec<u8>,
    /// De-chunked body bytes not yet consumed.
    pub text: Vec<u8>,
    pub ended: bool,
}

impl Sse {
    pub(crate) async fn open(base: &str, path: &str, token: &str) -> Sse {
        let mut stream = send(base, "GET", path, Some(token), None).await;
        let mut raw = Vec::new();
        while find(&raw, b"\r\n\r\n").is_none() {
            let mut buf = [0; 4096];
            let n = stream.read(&mut buf).await.expect("read");
            assert!(n > 0, "closed before headers");
            raw.extend_from_slice(&buf[..n]);
        }
        let split = find(&raw, b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        let mut sse = Sse {
            stream,
            status,
            raw: raw[split + 4..].to_vec(),
            text: Vec::new(),
            ended: false,
        };
        if status != 200 {
            let mut rest = Vec::new();
            let _ = sse.stream.read_to_end(&mut rest).await;
            sse.raw.extend_from_slice(&rest);
        }
        sse.dechunk();
        sse
    }

    fn dechunk(&mut self) {
        while let Some(line) = find(&self.raw, b"\r\n") {
            let Ok(size) =
                usize::from_str_radix(std::str::from_utf8(&self.raw[..line]).unwrap().trim(), 16)
            else {
                // Not chunked (an error answer with a length): take it as is.
                self.text.append(&mut self.raw);
                return;
            };
            if size == 0 {
                self.ended = true;
                self.raw.clear();
                return;
            }
            if self.raw.len() < line + 2 + size + 2 {
                return;
            }
            self.text
                .extend_from_slice(&self.raw[line + 2..line + 2 + size]);
            self.raw.drain(..line + 2 + size + 2);
        }
    }

    /// Reads more bytes; false on timeout or end.
    async fn fill(&mut self, timeout: Duration) -> bool {
        let mut buf = [0; 8192];
        match tokio::time::timeout(timeout, self.stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                self.ended = true;
                false
            }
            Ok(Ok(n)) => {
                self.raw.extend_from_slice(&buf[..n]);
                self.dechunk();
                true
            }
            Err(_) => false,
        }
    }

    /// The next `data:` event, skipping comments; `None` on timeout or the end of the stream.
    pub(crate) async fn next(&mut self, timeout: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            while let Some(end) = find(&self.text, b"\n\n") {
                let block: Vec<u8> = self.text.drain(..end + 2).collect();
                let block = String::from_utf8(block).unwrap();
                if let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) {
                    return Some(serde_json::from_str(data).expect("event JSON"));
                }
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if self.ended || left.is_zero() || !self.fill(left).await {
                return None;
            }
        }
    }

    /// Waits for more bytes for `timeout`; true if the stream stayed silent and open.
    pub(crate) async fn silent_for(&mut self, timeout: Duration) -> bool {
        let before = self.text.len();
        let got = self.fill(timeout).await;
        !got && !self.ended && self.text.len() == before
    }
}
