//! The benchmarks' HTTP/1.1 client: requests back to back on one keep-alive connection, as a
//! client such as Claude Code sends them.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

pub type Sender = http1::SendRequest<Full<Bytes>>;

/// Opens a connection (no Nagle delay) and drives it on a task of its own.
pub async fn connect(addr: SocketAddr) -> Result<Sender, String> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// An answer, its body read whole.
pub struct Answer {
    pub status: hyper::StatusCode,
    pub headers: hyper::HeaderMap,
    pub body: String,
}

impl Answer {
    /// The body's first `chars` characters, for a failure message.
    pub fn short(&self, chars: usize) -> String {
        self.body.chars().take(chars).collect()
    }
}

/// One request on the connection: `Host`, a JSON content type and the length, then `headers`.
/// Every error leaves the connection unusable.
pub async fn round_trip(
    sender: &mut Sender,
    method: hyper::Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &Bytes,
) -> Result<Answer, String> {
    sender
        .ready()
        .await
        .map_err(|e| format!("connection: {e}"))?;
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, "127.0.0.1")
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::CONTENT_LENGTH, body.len());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(body.clone()))
        .map_err(|e| format!("request: {e}"))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("send: {e}"))?;
    let (parts, body) = response.into_parts();
    let bytes = body
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok(Answer {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    })
}
