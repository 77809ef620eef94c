//! Plain-HTTP forwarding (off unless the policy's `[http] enabled = true`).
//!
//! Only absolute-form `http://host[:port]/path` requests: no other scheme, no userinfo, the host
//! a DNS name on the allowlist, the port one of `http.ports`. The request head is rebuilt:
//! origin-form target, `Host` from the URL, hop-by-hop headers and those named in `Connection`
//! removed, `Connection: close` added (one request per client connection). A request body must
//! be `Content-Length` delimited (`Transfer-Encoding` is refused with `411`, which also closes
//! the door on CL/TE smuggling). The response head loses its hop-by-hop headers too, except
//! `Transfer-Encoding`/`Content-Length`, which describe the body relayed verbatim after it.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::BufMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::TcpStream;

use super::audit::{Decision, Pending};
use super::connect::{check_host, parse_port, TargetError};
use super::dial;
use super::head::{connection_tokens, RequestHead, HOP_BY_HOP, MAX_HEADERS};
use super::policy::Via;
use super::splice::{pump, supervise, Activity};
use super::state::Shared;

const FORBIDDEN: (u16, &str) = (403, "Forbidden");
const BAD_REQUEST: (u16, &str) = (400, "Bad Request");
const BAD_GATEWAY: (u16, &str) = (502, "Bad Gateway");
/// Largest upstream response head.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// An absolute-form `http:` URL, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AbsoluteUrl<'a> {
    pub host: &'a str,
    pub port: u16,
    /// Origin-form target: path and query, never empty, without fragment.
    pub path: &'a str,
}

/// Why an absolute-form URL was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestUrlError {
    NotAbsolute,
    Scheme,
    Target(TargetError),
}

impl RequestUrlError {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            RequestUrlError::NotAbsolute => "not_absolute_form",
            RequestUrlError::Scheme => "scheme_not_allowed",
            RequestUrlError::Target(e) => e.reason(),
        }
    }
    fn status(self) -> (u16, &'static str) {
        match self {
            RequestUrlError::NotAbsolute => BAD_REQUEST,
            RequestUrlError::Scheme => FORBIDDEN,
            RequestUrlError::Target(e) => e.status(),
        }
    }
}

/// Split an absolute-form URL. The host comes back as written (userinfo included, so that the
/// caller can refuse it).
pub(crate) fn split_url(target: &str) -> Result<AbsoluteUrl<'_>, RequestUrlError> {
    let (scheme, rest) = target
        .split_once("://")
        .ok_or(RequestUrlError::NotAbsolute)?;
    if scheme.is_empty()
        || !scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.')
    {
        return Err(RequestUrlError::NotAbsolute);
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(RequestUrlError::Scheme);
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    // Without the fragment; `http://h?q` has an empty path, completed by the caller.
    let path = tail.split('#').next().unwrap_or_default();
    if authority.is_empty() {
        return Err(RequestUrlError::Target(TargetError::Syntax));
    }
    if authority.contains('@') {
        // Userinfo is refused before anything is read out of the authority, a bracketed
        // literal included (an IPv6 address never holds an `@`).
        return Err(RequestUrlError::Target(TargetError::Userinfo));
    }
    let (host, port) = if authority.starts_with('[') {
        let close = authority
            .find(']')
            .ok_or(RequestUrlError::Target(TargetError::Syntax))?;
        let (host, rest) = authority.split_at(close + 1);
        let port = match rest.strip_prefix(':') {
            Some(p) => parse_port(p).map_err(RequestUrlError::Target)?,
            None if rest.is_empty() => 80,
            None => return Err(RequestUrlError::Target(TargetError::Syntax)),
        };
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, p)) => (host, parse_port(p).map_err(RequestUrlError::Target)?),
            None => (authority, 80),
        }
    };
    Ok(AbsoluteUrl { host, port, path })
}

pub(crate) async fn handle(
    shared: &Shared,
    mut stream: TcpStream,
    mut pending: Pending,
    request: RequestHead,
    early: Vec<u8>,
) {
    let parsed = split_url(&request.target);
    if let Ok(url) = &parsed {
        pending.set_host(url.host, check_host(url.host).ok().as_deref());
        pending.port = Some(url.port);
    }
    let policy = &shared.policy;
    if !policy.http.enabled {
        return shared
            .deny_with(&mut stream, &pending, FORBIDDEN, "plain_http_disabled")
            .await;
    }
    let url = match parsed {
        Ok(url) => url,
        Err(e) => {
            return shared
                .deny_with(&mut stream, &pending, e.status(), e.reason())
                .await
        }
    };
    let host = match check_host(url.host) {
        Ok(host) => host,
        Err(e) => {
            return shared
                .deny_with(&mut stream, &pending, e.status(), e.reason())
                .await
        }
    };
    if let Some(reason) = policy.destination_refusal(Via::PlainHttp, &host, url.port) {
        return shared
            .deny_with(&mut stream, &pending, FORBIDDEN, reason)
            .await;
    }
    let body_len = match body_length(&request.headers) {
        Ok(len) => len,
        Err((status, reason)) => {
            return shared
                .deny_with(&mut stream, &pending, status, reason)
                .await
        }
    };
    let upstream_head = rewrite_request(&request, &host, url.port, url.path);

    let (mut upstream, resolved) = match dial::resolve_and_dial(shared, &host, url.port).await {
        Ok(found) => found,
        Err((e, addr)) => {
            pending.resolved = addr;
            return shared
                .deny_with(&mut stream, &pending, BAD_GATEWAY, e.reason())
                .await;
        }
    };
    pending.resolved = Some(resolved);
    let _ = upstream.set_nodelay(true);

    let early_body = &early[..early
        .len()
        .min(usize::try_from(body_len).unwrap_or(usize::MAX))];
    let up = AtomicU64::new(0);
    let down = AtomicU64::new(0);
    let activity = Activity::new();
    let limits = policy.connection_limits;
    let mut shutdown = shared.shutdown.clone();
    let (mut client_read, mut client_write) = stream.split();
    let (mut upstream_read, mut upstream_write) = upstream.split();
    let work = async {
        let send = async {
            upstream_write.write_all(upstream_head.as_bytes()).await?;
            upstream_write.write_all(early_body).await?;
            up.fetch_add(early_body.len() as u64, Ordering::Relaxed);
            let remaining = body_len.saturating_sub(early_body.len() as u64);
            copy_exact(
                &mut client_read,
                &mut upstream_write,
                remaining,
                &up,
                &activity,
            )
            .await
        };
        let receive = relay_response(
            &mut upstream_read,
            &mut client_write,
            limits.buffer_bytes,
            &down,
            &activity,
        );
        tokio::try_join!(send, receive).map(|_| ())
    };
    let close = supervise(work, &activity, limits.idle_timeout(), &mut shutdown).await;
    shared.decide(
        &pending,
        Decision::Allow,
        "allowlisted",
        Some(close.as_str()),
        (up.load(Ordering::Relaxed), down.load(Ordering::Relaxed)),
    );
}

/// The request body length, from `Content-Length`; `Transfer-Encoding` is refused.
fn body_length(headers: &[(String, Vec<u8>)]) -> Result<u64, ((u16, &'static str), &'static str)> {
    if headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"))
    {
        return Err(((411, "Length Required"), "transfer_encoding_refused"));
    }
    let mut len: Option<u64> = None;
    for (_, value) in headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        let text = std::str::from_utf8(value).map_err(|_| (BAD_REQUEST, "bad_content_length"))?;
        let text = text.trim();
        if text.is_empty() || text.len() > 18 || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err((BAD_REQUEST, "bad_content_length"));
        }
        let v: u64 = text
            .parse()
            .map_err(|_| (BAD_REQUEST, "bad_content_length"))?;
        if len.is_some_and(|l| l != v) {
            return Err((BAD_REQUEST, "bad_content_length"));
        }
        len = Some(v);
    }
    Ok(len.unwrap_or(0))
}

/// Rebuild the request head for the upstream.
fn rewrite_request(request: &RequestHead, host: &str, port: u16, path: &str) -> String {
    let nominated = connection_tokens(&request.headers);
    let path = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    };
    let mut out = format!("{} {path} HTTP/1.1\r\n", request.method);
    if port == 80 {
        out.push_str(&format!("Host: {host}\r\n"));
    } else {
        out.push_str(&format!("Host: {host}:{port}\r\n"));
    }
    for (name, value) in &request.headers {
        let lower = name.to_ascii_lowercase();
        if lower == "host" || HOP_BY_HOP.contains(&lower.as_str()) || nominated.contains(&lower) {
            continue;
        }
        out.push_str(name);
        out.push_str(": ");
        out.push_str(&String::from_utf8_lossy(value));
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}

/// Copy exactly `n` bytes from `src` to `dst`.
async fn copy_exact(
    src: &mut ReadHalf<'_>,
    dst: &mut WriteHalf<'_>,
    n: u64,
    counter: &AtomicU64,
    activity: &Activity,
) -> std::io::Result<()> {
    if n == 0 {
        return Ok(());
    }
    let mut buf = vec![0u8; 16 * 1024];
    let mut left = n;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let got = src.read(buf.get_mut(..want).unwrap_or_default()).await?;
        if got == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        activity.touch();
        dst.write_all(buf.get(..got).unwrap_or_default()).await?;
        counter.fetch_add(got as u64, Ordering::Relaxed);
        left = left.saturating_sub(got as u64);
    }
    Ok(())
}

/// Read the upstream response head, rewrite it, then relay the rest verbatim to end of stream.
async fn relay_response(
    src: &mut ReadHalf<'_>,
    dst: &mut WriteHalf<'_>,
    buffer_bytes: usize,
    counter: &AtomicU64,
    activity: &Activity,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        let room = MAX_RESPONSE_HEAD.saturating_sub(buf.len());
        if room == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "upstream response head too large",
            ));
        }
        let mut limited = BufMut::limit(&mut buf, room);
        if src.read_buf(&mut limited).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        activity.touch();
    };
    let head = rewrite_response(buf.get(..end).unwrap_or_default())?;
    dst.write_all(head.as_bytes()).await?;
    let rest = buf.get(end..).unwrap_or_default();
    dst.write_all(rest).await?;
    counter.fetch_add((head.len() + rest.len()) as u64, Ordering::Relaxed);
    drop(buf);
    pump(src, dst, buffer_bytes, counter, activity).await
}

fn rewrite_response(head: &[u8]) -> std::io::Result<String> {
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "bad upstream response");
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(bad()),
    }
    let code = resp.code.ok_or_else(bad)?;
    let reason = resp.reason.unwrap_or("");
    let owned: Vec<(String, Vec<u8>)> = resp
        .headers
        .iter()
        .map(|h| (h.name.to_owned(), h.value.to_vec()))
        .collect();
    let nominated = connection_tokens(&owned);
    let keep = ["transfer-encoding", "content-length"];
    let mut out = format!("HTTP/1.1 {code} {reason}\r\n");
    for (name, value) in &owned {
        let lower = name.to_ascii_lowercase();
        let hop = HOP_BY_HOP.contains(&lower.as_str()) || nominated.contains(&lower);
        if hop && !keep.contains(&lower.as_str()) {
            continue;
        }
        out.push_str(name);
        out.push_str(": ");
        out.push_str(&String::from_utf8_lossy(value));
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_splitting() {
        let u = split_url("http://api.devin.ai/v1?x=1").unwrap();
        assert_eq!((u.host, u.port, u.path), ("api.devin.ai", 80, "/v1?x=1"));
        let u = split_url("HTTP://a.b:8080").unwrap();
        assert_eq!((u.host, u.port, u.path), ("a.b", 8080, ""));
        let u = split_url("http://a.b?q#frag").unwrap();
        assert_eq!(u.path, "?q");
        let u = split_url("http://[::1]:80/").unwrap();
        assert_eq!(u.host, "[::1]");
        assert_eq!(split_url("/path"), Err(RequestUrlError::NotAbsolute));
        assert_eq!(split_url("https://a.b/"), Err(RequestUrlError::Scheme));
        assert_eq!(split_url("ftp://a.b/"), Err(RequestUrlError::Scheme));
        assert_eq!(
            split_url("http://user:pw@a.b/"),
            Err(RequestUrlError::Target(TargetError::Userinfo))
        );
        // Found by the proxy-target fuzzer: an `@` inside a bracketed literal was kept in
        // the host.
        assert_eq!(
            split_url("http://[::1@evil.example]:80/"),
            Err(RequestUrlError::Target(TargetError::Userinfo))
        );
        assert_eq!(
            split_url("http://a.b:99999/"),
            Err(RequestUrlError::Target(TargetError::Port))
        );
        assert_eq!(
            split_url("http:///x"),
            Err(RequestUrlError::Target(TargetError::Syntax))
        );
    }

    #[test]
    fn request_rewrite_strips_hop_by_hop() {
        let req = RequestHead {
            method: "GET".into(),
            target: "http://a.b/x".into(),
            headers: vec![
                ("Host".into(), b"evil.example".to_vec()),
                ("Proxy-Authorization".into(), b"Basic c2VjcmV0".to_vec()),
                ("Connection".into(), b"keep-alive, X-Secret".to_vec()),
                ("X-Secret".into(), b"1".to_vec()),
                ("Keep-Alive".into(), b"timeout=5".to_vec()),
                ("TE".into(), b"trailers".to_vec()),
                ("Upgrade".into(), b"websocket".to_vec()),
                ("Accept".into(), b"*/*".to_vec()),
            ],
        };
        let out = rewrite_request(&req, "a.b", 80, "/x");
        assert_eq!(
            out,
            "GET /x HTTP/1.1\r\nHost: a.b\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        assert!(rewrite_request(&req, "a.b", 8080, "")
            .starts_with("GET / HTTP/1.1\r\nHost: a.b:8080\r\n"));
    }

    #[test]
    fn body_length_rules() {
        let h = |v: &[(&str, &str)]| -> Vec<(String, Vec<u8>)> {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.as_bytes().to_vec()))
                .collect()
        };
        assert_eq!(body_length(&h(&[])), Ok(0));
        assert_eq!(body_length(&h(&[("Content-Length", "12")])), Ok(12));
        assert_eq!(
            body_length(&h(&[("Content-Length", "12"), ("content-length", "12")])),
            Ok(12)
        );
        assert!(body_length(&h(&[("Content-Length", "12"), ("content-length", "13")])).is_err());
        assert!(body_length(&h(&[("Content-Length", "-1")])).is_err());
        assert!(body_length(&h(&[("Transfer-Encoding", "chunked")])).is_err());
    }

    #[test]
    fn response_rewrite() {
        let out = rewrite_response(
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nTransfer-Encoding: chunked\r\nKeep-Alive: 5\r\nX-Ok: 2\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            out,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Ok: 2\r\nConnection: close\r\n\r\n"
        );
    }
}
