//! Shared helpers of the guard integration tests: certificates, local TLS servers, the guard,
//! audit reading, and a stream that re-fragments the ClientHello. Loopback only.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use devin_bridge_guard::testkit;
use devin_bridge_guard::{ConnectionLimits, GuardPolicy};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The Devin allowlist, as in policies/guard-devin.toml.
pub(crate) const DEVIN_ALLOW: &[&str] = &[
    "devin.ai",
    "*.devin.ai",
    "cognition.ai",
    "*.cognition.ai",
    "server.codeium.com",
    "unleash.codeium.com",
];

/// A test CA and a leaf for `names`, with rustls configs for both ends.
pub(crate) struct Pki {
    pub ca_pem: String,
    pub server: Arc<rustls::ServerConfig>,
    pub client: Arc<rustls::ClientConfig>,
}

pub(crate) fn pki(names: &[&str]) -> Pki {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "devin-bridge guard test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf_params =
        rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &ca).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone(), ca.der().clone()], key)
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(ca.der().to_vec())).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Pki {
        ca_pem: ca.pem(),
        server: Arc::new(server),
        client: Arc::new(client),
    }
}

/// What a local TLS server does with each connection.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ServerMode {
    /// Echo every byte back until the client closes.
    Echo,
    /// Minimal HTTP/1.1: `GET /bytes/N` answers N pattern bytes, `POST` echoes the body.
    Http,
}

/// Start a TLS server on 127.0.0.1:0.
pub(crate) async fn tls_server(config: Arc<rustls::ServerConfig>, mode: ServerMode) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                match mode {
                    ServerMode::Echo => {
                        let (mut r, mut w) = tokio::io::split(tls);
                        let _ = tokio::io::copy(&mut r, &mut w).await;
                        let _ = w.shutdown().await;
                    }
                    ServerMode::Http => {
                        let _ = serve_http(tls).await;
                    }
                }
            });
        }
    });
    addr
}

/// Deterministic pattern bytes.
pub(crate) fn pattern(n: usize, seed: u8) -> Vec<u8> {
    let mut x: u32 = 0x1234_5678 ^ u32::from(seed);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

async fn serve_http<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let mut lines = head.lines();
    let request_line = lines.next().unwrap_or_default().to_owned();
    let content_length: usize = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = buf[end..].to_vec();
    while body.len() < content_length {
        let mut chunk = vec![0u8; 65536];
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default();
    let path = parts.next().unwrap_or_default();
    let reply = if method == "POST" {
        body
    } else if let Some(n) = path.strip_prefix("/bytes/") {
        pattern(n.parse().unwrap_or(0), 7)
    } else {
        b"hello from api.devin.ai\n".to_vec()
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reply.len()
    );
    s.write_all(head.as_bytes()).await?;
    s.write_all(&reply).await?;
    s.shutdown().await
}

/// A plain HTTP server (for the plain-forward path): answers the request head it received,
/// as its body, so the test can see exactly what the guard sent.
pub(crate) async fn plain_http_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let end = loop {
                    if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break p + 4;
                    }
                    let mut chunk = [0u8; 4096];
                    let Ok(n) = s.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                };
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                let cl: usize = head
                    .lines()
                    .filter_map(|l| l.split_once(':'))
                    .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v)| v.trim().parse().ok())
                    .unwrap_or(0);
                let mut body = buf[end..].to_vec();
                while body.len() < cl {
                    let mut chunk = [0u8; 4096];
                    let Ok(n) = s.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        break;
                    }
                    body.extend_from_slice(&chunk[..n]);
                }
                let mut reply = head.into_bytes();
                reply.extend_from_slice(&body);
                let out = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nX-Upstream: yes\r\n\r\n",
                    reply.len()
                );
                let _ = s.write_all(out.as_bytes()).await;
                let _ = s.write_all(&reply).await;
                let _ = s.shutdown().await;
            });
        }
    });
    addr
}

/// A guard policy for tests: the Devin allowlist, loopback allowed explicitly, `api.devin.ai`
/// (and any `extra` names) pinned, short timeouts.
pub(crate) fn test_policy(dir: &Path, pins: &[(&str, String)]) -> GuardPolicy {
    let resolve: BTreeMap<String, String> = pins
        .iter()
        .map(|(name, addr)| (name.to_string(), addr.clone()))
        .collect();
    GuardPolicy {
        listen: "127.0.0.1:0".parse().unwrap(),
        audit: Some(dir.join("audit.jsonl")),
        allow: DEVIN_ALLOW.iter().map(|s| s.to_string()).collect(),
        allow_ranges: vec!["127.0.0.0/8".into()],
        resolve,
        connection_limits: ConnectionLimits {
            header_timeout_ms: 2_000,
            client_hello_timeout_ms: 400,
            connect_timeout_ms: 2_000,
            idle_timeout_ms: 10_000,
            shutdown_grace_ms: 1_000,
            ..ConnectionLimits::default()
        },
        ..GuardPolicy::default()
    }
}

/// Every line of the audit file, parsed.
pub(crate) fn audit_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit line is JSON"))
        .collect()
}

/// Wait until the audit file has at least `n` lines (5 s at most), then return them all.
pub(crate) async fn wait_audit(path: &Path, n: usize) -> Vec<Value> {
    for _ in 0..500 {
        let lines = audit_lines(path);
        if lines.len() >= n {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let lines = audit_lines(path);
    panic!(
        "expected {n} audit lines, found {}: {lines:#?}",
        lines.len()
    );
}

/// CONNECT through the guard and do TLS for `sni`.
pub(crate) async fn tls_via_guard(
    guard: SocketAddr,
    authority: &str,
    sni: &str,
    client: Arc<rustls::ClientConfig>,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let (stream, reply) = devin_bridge_guard::client::connect(guard, authority).await?;
    assert_eq!(reply.status, 200, "{}", reply.head);
    let name = ServerName::try_from(sni.to_owned()).unwrap();
    TlsConnector::from(client).connect(name, stream).await
}

/// Send `data` through an echo TLS stream while reading the echo; return what came back.
pub(crate) async fn echo_roundtrip<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    tls: S,
    data: Vec<u8>,
) -> Vec<u8> {
    let (mut r, mut w) = tokio::io::split(tls);
    let len = data.len();
    let writer = tokio::spawn(async move {
        for chunk in data.chunks(50_000) {
            w.write_all(chunk).await.unwrap();
        }
        w.flush().await.unwrap();
        w
    });
    let mut back = Vec::with_capacity(len);
    while back.len() < len {
        let mut chunk = vec![0u8; 65536];
        let n = r.read(&mut chunk).await.unwrap();
        assert!(n > 0, "echo ended early after {} bytes", back.len());
        back.extend_from_slice(&chunk[..n]);
    }
    let mut w = writer.await.unwrap();
    let _ = w.shutdown().await;
    back
}

/// A stream that rewrites the first write (the ClientHello record(s)) into records of
/// `fragment` bytes, sent in TCP segments of `segment` bytes with a 2 ms pause between them.
pub(crate) struct Refragment<S> {
    inner: S,
    fragment: usize,
    segment: usize,
    state: FirstWrite,
}

enum FirstWrite {
    NotYet,
    Sending {
        queue: std::collections::VecDeque<Vec<u8>>,
        pause: Option<Pin<Box<tokio::time::Sleep>>>,
        consumed: usize,
    },
    Done,
}

impl<S> Refragment<S> {
    pub(crate) fn new(inner: S, fragment: usize, segment: usize) -> Self {
        Self {
            inner,
            fragment,
            segment,
            state: FirstWrite::NotYet,
        }
    }
}

/// Re-fragment leading handshake records; anything after them is appended unchanged.
pub(crate) fn refragment_records(bytes: &[u8], fragment: usize) -> Vec<u8> {
    let mut handshake = Vec::new();
    let mut pos = 0;
    while pos + 5 <= bytes.len() && bytes[pos] == 0x16 {
        let len = u16::from_be_bytes([bytes[pos + 3], bytes[pos + 4]]) as usize;
        handshake.extend_from_slice(&bytes[pos + 5..pos + 5 + len]);
        pos += 5 + len;
    }
    let mut out = testkit::records(&handshake, fragment);
    out.extend_from_slice(&bytes[pos..]);
    out
}

impl<S: AsyncRead + Unpin> AsyncRead for Refragment<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Refragment<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        if let FirstWrite::NotYet = this.state {
            let bytes = refragment_records(buf, this.fragment);
            let queue = bytes.chunks(this.segment).map(|c| c.to_vec()).collect();
            this.state = FirstWrite::Sending {
                queue,
                pause: None,
                consumed: buf.len(),
            };
        }
        if let FirstWrite::Sending {
            queue,
            pause,
            consumed,
        } = &mut this.state
        {
            loop {
                if let Some(p) = pause {
                    std::task::ready!(p.as_mut().poll(cx));
                    *pause = None;
                }
                let Some(front) = queue.front_mut() else {
                    let n = *consumed;
                    this.state = FirstWrite::Done;
                    return Poll::Ready(Ok(n));
                };
                let n = std::task::ready!(Pin::new(&mut this.inner).poll_write(cx, front))?;
                front.drain(..n);
                if front.is_empty() {
                    queue.pop_front();
                    std::task::ready!(Pin::new(&mut this.inner).poll_flush(cx))?;
                    *pause = Some(Box::pin(tokio::time::sleep(Duration::from_millis(2))));
                }
            }
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

use std::future::Future;

/// Resident set size of this process, from /proc/self/status, in KiB.
pub(crate) fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The repository root (for policies/).
pub(crate) fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .chain(Path::new(file!()).ancestors())
        .find(|p| p.join("policies/guard-devin.toml").is_file())
        .unwrap_or(manifest)
        .to_owned()
}
