//! A minimal HTTP proxy client: open a `CONNECT` tunnel, or send one plain request, and read
//! the proxy's answer. Used by `verify-isolation`, the tests and the benchmark.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};

/// Largest response head accepted from a proxy.
const MAX_HEAD: usize = 16 * 1024;

/// The proxy's answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyReply {
    /// The status code, e.g. 200 or 403.
    pub status: u16,
    /// The response head, lossily decoded (status line and headers).
    pub head: String,
    /// Bytes read after the head (part of a body, for a refusal).
    pub rest: Vec<u8>,
}

/// Send `CONNECT authority HTTP/1.1` to the proxy at `proxy` and read its answer. On `200` the
/// returned stream is the tunnel.
pub async fn connect<A: ToSocketAddrs>(
    proxy: A,
    authority: &str,
) -> io::Result<(TcpStream, ProxyReply)> {
    let mut stream = TcpStream::connect(proxy).await?;
    stream.set_nodelay(true)?;
    let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let reply = read_reply(&mut stream).await?;
    Ok((stream, reply))
}

/// Send raw request bytes to the proxy, then read its answer.
pub async fn send_raw<A: ToSocketAddrs>(
    proxy: A,
    request: &[u8],
) -> io::Result<(TcpStream, ProxyReply)> {
    let mut stream = TcpStream::connect(proxy).await?;
    stream.set_nodelay(true)?;
    stream.write_all(request).await?;
    let reply = read_reply(&mut stream).await?;
    Ok((stream, reply))
}

/// Like [`connect`], bounded by `timeout`.
pub async fn connect_timeout<A: ToSocketAddrs>(
    proxy: A,
    authority: &str,
    timeout: Duration,
) -> io::Result<(TcpStream, ProxyReply)> {
    tokio::time::timeout(timeout, connect(proxy, authority))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "proxy did not answer in time"))?
}

/// Read one response head (up to the blank line). Anything read beyond it is in `rest`.
pub async fn read_reply(stream: &mut TcpStream) -> io::Result<ProxyReply> {
    let mut buf = Vec::with_capacity(256);
    loop {
        if let Some(end) = find_head_end(&buf) {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let status = parse_status(&head).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "not an HTTP status line")
            })?;
            let rest = buf.split_off(end);
            return Ok(ProxyReply { status, head, rest });
        }
        if buf.len() >= MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "response head too large",
            ));
        }
        buf.reserve(1024);
        let n = stream.read_buf(&mut buf).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "proxy closed the connection before answering",
            ));
        }
    }
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

fn parse_status(head: &str) -> Option<u16> {
    let line = head.lines().next()?;
    let mut parts = line.split(' ');
    let version = parts.next()?;
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    parts.next()?.parse().ok()
}
