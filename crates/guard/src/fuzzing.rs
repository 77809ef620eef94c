//! Entry points for the fuzz targets in `fuzz/`: thin wrappers over the crate-private parsers
//! of untrusted bytes (request heads, proxy targets), with plain return types the targets can
//! compare, and the ClientHello and host-name parsers themselves. Built only with the `fuzzing`
//! feature (and in this crate's tests): not an API.

pub use crate::client_hello::{parse_client_hello_body, HelloError, HelloParser};
pub use crate::handshake::{ClientWatch, ServerWatch};
pub use crate::hostmatch::{normalize_host, Allowlist, HostError};

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
    use crate::head::{parse_request, scan_head};
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
    crate::http::split_url(target)
        .map(|url| (url.host.to_owned(), url.port, url.path.to_owned()))
        .map_err(|e| e.reason())
}

/// A `CONNECT` authority split into host (as written) and port. `Err`: the audit reason.
pub fn split_authority(authority: &str) -> Result<(String, u16), &'static str> {
    crate::connect::split_authority(authority)
        .map(|(host, port)| (host.to_owned(), port))
        .map_err(|e| e.reason())
}

/// The host check of both paths (userinfo, then normalisation). `Err`: the audit reason.
pub fn check_host(host: &str) -> Result<String, &'static str> {
    crate::connect::check_host(host).map_err(|e| e.reason())
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
    }
}
