//! Reading one HTTP/1.x request head from a client, bounded in size and time, and writing the
//! guard's own short answers.

use std::time::Duration;

use bytes::BufMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Most headers accepted in one request or response head.
pub(crate) const MAX_HEADERS: usize = 64;

/// A parsed request head.
#[derive(Debug, Clone)]
pub(crate) struct RequestHead {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, Vec<u8>)>,
}

/// Why no request head could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadError {
    /// More than the cap, or too many headers.
    TooLarge,
    /// Not received within the deadline.
    Timeout,
    /// Not HTTP/1.x.
    Malformed,
    /// The client closed; `empty` when it sent nothing at all.
    Closed { empty: bool },
    /// Read error.
    Io,
}

impl HeadError {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            HeadError::TooLarge => "header_too_large",
            HeadError::Timeout => "header_timeout",
            HeadError::Malformed => "bad_request",
            HeadError::Closed { .. } => "client_closed",
            HeadError::Io => "client_read_error",
        }
    }

    /// The answer owed to the client, if any.
    pub(crate) fn status(self) -> Option<(u16, &'static str)> {
        match self {
            HeadError::TooLarge => Some((431, "Request Header Fields Too Large")),
            HeadError::Timeout => Some((408, "Request Timeout")),
            HeadError::Malformed => Some((400, "Bad Request")),
            HeadError::Closed { .. } | HeadError::Io => None,
        }
    }
}

/// Scan the head bytes of `buf` from `*scanned` on, as they arrive. Returns the end of the head
/// (just after its `\r\n\r\n`) once present. Framing errors that no further byte could repair
/// are refused at once instead of waiting for the header timeout: a bare LF or CR, NUL and other
/// control bytes (HT excepted), and obs-fold (a line starting with SP or HT). `*scanned` only
/// advances over bytes already judged, so a CR at the end of `buf` is looked at again with the
/// byte that follows it.
pub(crate) fn scan_head(buf: &[u8], scanned: &mut usize) -> Result<Option<usize>, HeadError> {
    while let Some(&b) = buf.get(*scanned) {
        let i = *scanned;
        let prev = |back: usize| i.checked_sub(back).and_then(|j| buf.get(j)).copied();
        match b {
            b'\r' => match buf.get(i + 1) {
                None => return Ok(None),
                Some(b'\n') => {}
                Some(_) => return Err(HeadError::Malformed),
            },
            b'\n' => {
                if prev(1) != Some(b'\r') {
                    return Err(HeadError::Malformed);
                }
                if prev(2) == Some(b'\n') && prev(3) == Some(b'\r') {
                    return Ok(Some(i + 1));
                }
            }
            b' ' | b'\t' if prev(1) == Some(b'\n') => return Err(HeadError::Malformed),
            b'\t' => {}
            0..=0x1f | 0x7f => return Err(HeadError::Malformed),
            _ => {}
        }
        *scanned = i + 1;
    }
    Ok(None)
}

/// Read until the end of the head (`\r\n\r\n`). Returns the head and the bytes that followed it.
pub(crate) async fn read_request_head<R: AsyncRead + Unpin>(
    io: &mut R,
    max: usize,
    timeout: Duration,
) -> Result<(RequestHead, Vec<u8>), HeadError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut buf: Vec<u8> = Vec::new();
    let mut scanned = 0usize;
    loop {
        if let Some(first) = buf.first() {
            // Methods are upper-case tokens: fail fast on anything else.
            if !first.is_ascii_uppercase() {
                return Err(HeadError::Malformed);
            }
        }
        if let Some(end) = scan_head(&buf, &mut scanned)? {
            let head = parse_request(buf.get(..end).unwrap_or_default())?;
            let rest = buf.split_off(end);
            return Ok((head, rest));
        }
        let room = max.saturating_sub(buf.len());
        if room == 0 {
            return Err(HeadError::TooLarge);
        }
        buf.reserve(room.min(2048));
        let read = {
            let mut limited = BufMut::limit(&mut buf, room);
            tokio::time::timeout_at(deadline, io.read_buf(&mut limited)).await
        };
        match read {
            Err(_) => return Err(HeadError::Timeout),
            Ok(Ok(0)) => {
                return Err(HeadError::Closed {
                    empty: buf.is_empty(),
                })
            }
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return Err(HeadError::Io),
        }
    }
}

pub(crate) fn parse_request(bytes: &[u8]) -> Result<RequestHead, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(bytes) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(HeadError::Malformed),
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
        Err(_) => return Err(HeadError::Malformed),
    }
    let (Some(method), Some(target)) = (req.method, req.path) else {
        return Err(HeadError::Malformed);
    };
    Ok(RequestHead {
        method: method.to_owned(),
        target: target.to_owned(),
        headers: req
            .headers
            .iter()
            .map(|h| (h.name.to_owned(), h.value.to_vec()))
            .collect(),
    })
}

/// Write a short plain-text answer and close the write side. Bounded by one second.
pub(crate) async fn respond<W: AsyncWrite + Unpin>(
    io: &mut W,
    status: u16,
    text: &str,
    reason: &str,
) {
    let body = format!("egress guard: {reason}\n");
    let msg = format!(
        "HTTP/1.1 {status} {text}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        io.write_all(msg.as_bytes()).await?;
        io.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

/// Hop-by-hop header names (RFC 9110 section 7.6.1 and the historic ones).
pub(crate) const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The header names listed in `Connection` headers, lower-cased.
pub(crate) fn connection_tokens(headers: &[(String, Vec<u8>)]) -> Vec<String> {
    headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, value)| {
            String::from_utf8_lossy(value)
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(input: &[u8], max: usize) -> Result<(RequestHead, Vec<u8>), HeadError> {
        let mut io = input;
        read_request_head(&mut io, max, Duration::from_secs(1)).await
    }

    #[tokio::test]
    async fn reads_a_head_and_keeps_the_rest() {
        let (head, rest) = read(
            b"CONNECT a.b:443 HTTP/1.1\r\nHost: a.b:443\r\n\r\n\x16\x03",
            1024,
        )
        .await
        .unwrap();
        assert_eq!(head.method, "CONNECT");
        assert_eq!(head.target, "a.b:443");
        assert_eq!(head.headers.len(), 1);
        assert_eq!(rest, b"\x16\x03");
    }

    #[tokio::test]
    async fn refusals() {
        assert_eq!(
            read(b"\x16\x03\x01", 1024).await.unwrap_err(),
            HeadError::Malformed
        );
        assert_eq!(
            read(b"GARBAGE\r\n\r\n", 1024).await.unwrap_err(),
            HeadError::Malformed
        );
        assert_eq!(
            read(b"CONNECT a b c d\r\n\r\n", 1024).await.unwrap_err(),
            HeadError::Malformed
        );
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(2000));
        assert_eq!(
            read(big.as_bytes(), 1024).await.unwrap_err(),
            HeadError::TooLarge
        );
        let many: String = (0..100).map(|i| format!("X{i}: y\r\n")).collect();
        let many = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(
            read(many.as_bytes(), 8192).await.unwrap_err(),
            HeadError::TooLarge
        );
        assert_eq!(
            read(b"", 1024).await.unwrap_err(),
            HeadError::Closed { empty: true }
        );
        assert_eq!(
            read(b"GET / HT", 1024).await.unwrap_err(),
            HeadError::Closed { empty: false }
        );
    }

    #[tokio::test]
    async fn malformed_framing_is_refused_without_waiting_for_more_bytes() {
        for bad in [
            &b"CONNECT a.b:443 HTTP/1.1\nHost: a.b\n\n"[..],
            b"CONNECT a.b:443 HTTP/1.1\r\nHost: a.b\n",
            b"CONNECT a.b:443 HTTP/1.1\r\nHost: a.b\r\n folded\r\n",
            b"CONNECT a.b:443 HTTP/1.1\r\nHost:\ta.b\r\n\tfolded",
            b"CONNECT a.b:443 HTTP/1.1\r\nHost: a\0b\r\n",
            b"CONNECT a.b:443 HTTP/1.1\rHost: a.b",
            b"GET / HTTP/1.1\r\nX: \x1b[31m\r\n",
        ] {
            // The writer stays open: only the bytes themselves can end the wait.
            let (mut client, mut server) = tokio::io::duplex(4096);
            client.write_all(bad).await.unwrap();
            let read = tokio::time::timeout(
                Duration::from_secs(5),
                read_request_head(&mut server, 1024, Duration::from_secs(600)),
            )
            .await
            .unwrap_or_else(|_| panic!("waited on {:?}", String::from_utf8_lossy(bad)));
            assert_eq!(
                read.unwrap_err(),
                HeadError::Malformed,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
            drop(client);
        }
    }

    #[test]
    fn scan_head_waits_on_a_trailing_cr_and_accepts_tabs_in_values() {
        let mut scanned = 0;
        assert_eq!(scan_head(b"GET / HTTP/1.1\r", &mut scanned), Ok(None));
        assert_eq!(scanned, 14);
        let full = b"GET / HTTP/1.1\r\nX:\ta\r\n\r\nrest";
        assert_eq!(scan_head(full, &mut scanned), Ok(Some(full.len() - 4)));
    }

    #[test]
    fn connection_tokens_are_collected() {
        let h = vec![
            ("Connection".to_owned(), b"close, X-Secret".to_vec()),
            ("connection".to_owned(), b"  Foo ".to_vec()),
        ];
        assert_eq!(connection_tokens(&h), vec!["close", "x-secret", "foo"]);
    }
}
