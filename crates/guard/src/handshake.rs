//! After the first ClientHello: watching the rest of the plaintext TLS handshake.
//!
//! A client may send more than one ClientHello in one handshake: a TLS 1.3 server that cannot
//! use the first answers with a HelloRetryRequest and the client sends a second one. Nothing
//! but the guard stops a client from making that second ClientHello (or a third, sent right
//! after the first without waiting) name another host served at the same address, so every
//! ClientHello the client sends in plaintext is checked like the first: same checks (no
//! Encrypted ClientHello, exactly one SNI, no repeated extension) and the same host.
//!
//! [`ClientWatch`] reads the client's records until the handshake turns to encrypted records:
//! - handshake records are reassembled into messages; every ClientHello is checked, other
//!   messages (TLS 1.2 Certificate, ClientKeyExchange...) pass. Records are released to the
//!   server only once every message they carry is whole and checked, so a refused ClientHello
//!   never reaches the server. What is held back is bounded in bytes (`client_hello_max_bytes`)
//!   and in time (`client_hello_timeout_ms` while a message stays incomplete).
//! - change_cipher_spec, alert and application data records pass; any other record type, or a
//!   record that does not parse, ends the tunnel.
//! - the watch ends at the client's first change_cipher_spec or application data record sent
//!   after the server's ServerHello (a HelloRetryRequest does not count): from there, TLS 1.2
//!   handshake records are encrypted, and TLS 1.3 sends no more ClientHello. A client that sends
//!   change_cipher_spec (or 0-RTT data) before any ServerHello stays watched.
//!
//! [`ServerWatch`] observes the server's records, never holding a byte, until its first
//! handshake message that is a ServerHello and not a HelloRetryRequest. If the server sends
//! anything else first, the client stays watched for the life of the tunnel (fail closed).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use bytes::BytesMut;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use super::client_hello::{parse_client_hello_body, HelloError};
use super::hostmatch::normalize_host;
use super::policy::ConnectionLimits;
use super::splice::{direction, half_close, supervise, Activity, Close};

const RECORD_CHANGE_CIPHER_SPEC: u8 = 0x14;
const RECORD_HANDSHAKE: u8 = 0x16;
const RECORD_APPLICATION_DATA: u8 = 0x17;
const HANDSHAKE_CLIENT_HELLO: u8 = 0x01;
const HANDSHAKE_SERVER_HELLO: u8 = 0x02;
/// Largest plaintext record payload.
const MAX_PLAINTEXT: usize = 16_384;
/// Largest protected record payload (TLS 1.2 allows 2048 bytes of expansion).
const MAX_CIPHERTEXT: usize = 16_384 + 2_048;
/// `legacy_version` and `random` of a ServerHello.
const SERVER_HELLO_PREFIX: usize = 34;
/// The `random` that makes a ServerHello a HelloRetryRequest (RFC 8446, section 4.1.3).
const HRR_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// Why a tunnel was closed after its first ClientHello. Every variant has a stable audit reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LaterHelloError {
    /// A later ClientHello names another host than the CONNECT (and the first ClientHello).
    #[error("a later ClientHello names another host")]
    SniMismatch,
    /// A later ClientHello fails a check of the first.
    #[error("a later ClientHello is refused: {0}")]
    Hello(HelloError),
    /// A record type that has no place in a TLS handshake.
    #[error("not a TLS record during the handshake")]
    NotTlsRecord,
    /// A record or handshake message framing error.
    #[error("malformed TLS record during the handshake: {0}")]
    Malformed(&'static str),
    /// More than the cap held back while waiting for a whole message.
    #[error("handshake message larger than the cap")]
    TooLarge,
    /// A handshake message stayed incomplete for longer than the ClientHello timeout.
    #[error("handshake message not completed in time")]
    Timeout,
}

impl LaterHelloError {
    /// Stable audit reason.
    pub fn reason(self) -> &'static str {
        match self {
            LaterHelloError::SniMismatch => "later_hello_sni_mismatch",
            LaterHelloError::Hello(e) => match e {
                HelloError::MissingSni => "later_hello_missing_sni",
                HelloError::DuplicateSni => "later_hello_duplicate_sni",
                HelloError::DuplicateExtension => "later_hello_duplicate_extension",
                HelloError::EncryptedClientHello => "later_hello_encrypted_client_hello",
                HelloError::InvalidSni => "later_hello_invalid_sni",
                _ => "later_hello_malformed",
            },
            LaterHelloError::NotTlsRecord => "handshake_not_tls_record",
            LaterHelloError::Malformed(_) => "handshake_malformed_record",
            LaterHelloError::TooLarge => "handshake_message_too_large",
            LaterHelloError::Timeout => "handshake_message_timeout",
        }
    }
}

/// Inspects the client's records after its first ClientHello (see the module docs).
#[derive(Debug)]
pub struct ClientWatch {
    /// The normalised CONNECT host every ClientHello must name.
    host: String,
    /// Most bytes held back at once.
    max: usize,
    /// Raw bytes not yet released to the server.
    held: Vec<u8>,
    /// Offset in `held` of the next record header.
    parsed: usize,
    /// `held[..release]` may go to the server.
    release: usize,
    /// Handshake bytes of a message not yet whole.
    message: Vec<u8>,
    /// ClientHellos checked so far.
    hellos: u32,
    done: bool,
}

impl ClientWatch {
    /// A watch for a tunnel to `host` (normalised), holding back at most `max` bytes (at least
    /// one whole record).
    pub fn new(host: impl Into<String>, max: usize) -> Self {
        Self {
            host: host.into(),
            max: max.max(5 + MAX_CIPHERTEXT),
            held: Vec::new(),
            parsed: 0,
            release: 0,
            message: Vec::new(),
            hellos: 0,
            done: false,
        }
    }

    /// The handshake has turned to encrypted records: nothing more to inspect.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Bytes are held back (an incomplete record or handshake message).
    pub fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// How many later ClientHellos were checked (and passed).
    pub fn hellos(&self) -> u32 {
        self.hellos
    }

    /// Take `data` from the client; append what may go to the server to `out`.
    /// `server_hello_seen`: the server has sent its ServerHello (not a HelloRetryRequest).
    /// After an error nothing more may be forwarded.
    pub fn push(
        &mut self,
        data: &[u8],
        server_hello_seen: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), LaterHelloError> {
        if self.done {
            out.extend_from_slice(data);
            return Ok(());
        }
        self.held.extend_from_slice(data);
        self.parse(server_hello_seen)?;
        let release = if self.done {
            self.held.len()
        } else {
            self.release.min(self.held.len())
        };
        out.extend(self.held.drain(..release));
        self.parsed = self.parsed.saturating_sub(release);
        self.release = 0;
        if self.held.is_empty() {
            // Hold no capacity between handshake flights.
            self.held = Vec::new();
        }
        if self.held.len() > self.max {
            return Err(LaterHelloError::TooLarge);
        }
        Ok(())
    }

    fn parse(&mut self, server_hello_seen: bool) -> Result<(), LaterHelloError> {
        while !self.done {
            let rest = self.held.get(self.parsed..).unwrap_or_default();
            let Some(&[ctype, major, _, hi, lo]) = rest.get(..5) else {
                if let Some(&ctype) = rest.first() {
                    if !(RECORD_CHANGE_CIPHER_SPEC..=RECORD_APPLICATION_DATA).contains(&ctype) {
                        return Err(LaterHelloError::NotTlsRecord);
                    }
                }
                break;
            };
            if !(RECORD_CHANGE_CIPHER_SPEC..=RECORD_APPLICATION_DATA).contains(&ctype) {
                return Err(LaterHelloError::NotTlsRecord);
            }
            if major != 3 {
                return Err(LaterHelloError::Malformed("record version"));
            }
            let len = usize::from(u16::from_be_bytes([hi, lo]));
            let cap = if ctype == RECORD_HANDSHAKE {
                MAX_PLAINTEXT
            } else {
                MAX_CIPHERTEXT
            };
            if len > cap {
                return Err(LaterHelloError::Malformed("record too long"));
            }
            if len == 0 && ctype == RECORD_HANDSHAKE {
                return Err(LaterHelloError::Malformed("empty handshake record"));
            }
            let Some(payload) = rest.get(5..5 + len) else {
                break;
            };
            let end = self.parsed + 5 + len;
            if ctype == RECORD_HANDSHAKE {
                self.message.extend_from_slice(payload);
                self.parsed = end;
                self.messages()?;
            } else {
                // RFC 8446 5.1 / RFC 5246 6.2.1: a handshake message is never interleaved
                // with other records.
                if !self.message.is_empty() {
                    return Err(LaterHelloError::Malformed(
                        "record inside a fragmented handshake message",
                    ));
                }
                self.parsed = end;
                // Alerts pass and change nothing.
                let protected =
                    ctype == RECORD_CHANGE_CIPHER_SPEC || ctype == RECORD_APPLICATION_DATA;
                if server_hello_seen && protected {
                    self.done = true;
                }
            }
            if self.message.is_empty() {
                self.release = self.parsed;
            }
        }
        Ok(())
    }

    /// Check every whole message in `self.message`, keeping an incomplete tail.
    fn messages(&mut self) -> Result<(), LaterHelloError> {
        while let Some(&[msg_type, a, b, c]) = self.message.get(..4) {
            let len = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
            if len + 4 > self.max {
                return Err(LaterHelloError::TooLarge);
            }
            let Some(body) = self.message.get(4..4 + len) else {
                break;
            };
            if msg_type == HANDSHAKE_CLIENT_HELLO {
                let hello = parse_client_hello_body(body).map_err(LaterHelloError::Hello)?;
                match normalize_host(&hello.sni) {
                    Ok(sni) if sni == self.host => {}
                    Ok(_) => return Err(LaterHelloError::SniMismatch),
                    Err(_) => return Err(LaterHelloError::Hello(HelloError::InvalidSni)),
                }
                self.hellos += 1;
            }
            self.message.drain(..4 + len);
        }
        if self.message.is_empty() {
            self.message = Vec::new();
        }
        Ok(())
    }
}

/// What the server's first handshake messages said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerOutcome {
    /// A ServerHello that is not a HelloRetryRequest.
    ServerHello,
    /// Something else came first (an alert, not TLS...): no ServerHello will be recognised.
    NoServerHello,
}

impl Default for ServerWatch {
    fn default() -> Self {
        Self::new()
    }
}

/// Observes the server's records until its ServerHello (see the module docs). Holds at most a
/// record header and the start of one handshake message.
#[derive(Debug)]
pub struct ServerWatch {
    record_header: [u8; 5],
    record_header_len: usize,
    record_type: u8,
    record_left: usize,
    message_header: [u8; 4],
    message_header_len: usize,
    message_left: usize,
    prefix: [u8; SERVER_HELLO_PREFIX],
    prefix_len: usize,
    retries: u32,
    outcome: Option<ServerOutcome>,
}

impl ServerWatch {
    /// A watch that has seen nothing yet.
    pub fn new() -> Self {
        Self {
            record_header: [0; 5],
            record_header_len: 0,
            record_type: 0,
            record_left: 0,
            message_header: [0; 4],
            message_header_len: 0,
            message_left: 0,
            prefix: [0; SERVER_HELLO_PREFIX],
            prefix_len: 0,
            retries: 0,
            outcome: None,
        }
    }

    /// HelloRetryRequests seen.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Observe the next bytes from the server. Returns the outcome once known.
    pub fn observe(&mut self, mut data: &[u8]) -> Option<ServerOutcome> {
        while self.outcome.is_none() && !data.is_empty() {
            if self.record_left == 0 {
                let n = fill(&mut self.record_header, &mut self.record_header_len, data);
                data = data.get(n..).unwrap_or_default();
                if self.record_header_len < self.record_header.len() {
                    break;
                }
                self.record_header_len = 0;
                let [ctype, major, _, hi, lo] = self.record_header;
                if major != 3 || !(ctype == RECORD_HANDSHAKE || ctype == RECORD_CHANGE_CIPHER_SPEC)
                {
                    self.outcome = Some(ServerOutcome::NoServerHello);
                    break;
                }
                self.record_type = ctype;
                self.record_left = usize::from(u16::from_be_bytes([hi, lo]));
                continue;
            }
            let n = self.record_left.min(data.len());
            let (chunk, rest) = data.split_at(n);
            data = rest;
            self.record_left -= n;
            if self.record_type == RECORD_HANDSHAKE {
                self.handshake(chunk);
            }
        }
        self.outcome
    }

    fn handshake(&mut self, mut chunk: &[u8]) {
        while self.outcome.is_none() && !chunk.is_empty() {
            if self.message_header_len < self.message_header.len() {
                let n = fill(
                    &mut self.message_header,
                    &mut self.message_header_len,
                    chunk,
                );
                chunk = chunk.get(n..).unwrap_or_default();
                if self.message_header_len < self.message_header.len() {
                    break;
                }
                let [msg_type, a, b, c] = self.message_header;
                self.message_left = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
                self.prefix_len = 0;
                if msg_type != HANDSHAKE_SERVER_HELLO || self.message_left < SERVER_HELLO_PREFIX {
                    self.outcome = Some(ServerOutcome::NoServerHello);
                    break;
                }
                continue;
            }
            let n = self.message_left.min(chunk.len());
            let (body, rest) = chunk.split_at(n);
            chunk = rest;
            self.message_left -= n;
            if self.prefix_len < SERVER_HELLO_PREFIX {
                fill(&mut self.prefix, &mut self.prefix_len, body);
                if self.prefix_len == SERVER_HELLO_PREFIX {
                    if self.prefix.get(2..) == Some(&HRR_RANDOM[..]) {
                        self.retries += 1;
                    } else {
                        self.outcome = Some(ServerOutcome::ServerHello);
                        break;
                    }
                }
            }
            if self.message_left == 0 {
                self.message_header_len = 0;
            }
        }
    }
}

/// Copy from `data` into the free tail of `buf` (filled up to `*len`); returns bytes taken.
fn fill<const N: usize>(buf: &mut [u8; N], len: &mut usize, data: &[u8]) -> usize {
    let n = N.saturating_sub(*len).min(data.len());
    if let (Some(dst), Some(src)) = (buf.get_mut(*len..*len + n), data.get(..n)) {
        dst.copy_from_slice(src);
        *len += n;
        n
    } else {
        0
    }
}

/// How a watched tunnel ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TunnelEnd {
    /// It ran its course (see [`Close`]).
    Closed(Close),
    /// A later record was refused; the tunnel was closed.
    Refused(LaterHelloError),
}

/// Splice `client` and `upstream` both ways (bounded buffers, idle timeout, shutdown), with the
/// client's records inspected by `watch` and the server's observed until the handshake is
/// encrypted. `early`: client bytes already read after the first ClientHello. Returns bytes
/// client-to-upstream (excluding the first ClientHello), upstream-to-client, and how it ended.
pub(crate) async fn splice_watched(
    client: &TcpStream,
    upstream: &TcpStream,
    limits: &ConnectionLimits,
    shutdown: &mut watch::Receiver<bool>,
    watch: ClientWatch,
    early: &[u8],
) -> (u64, u64, TunnelEnd) {
    let up = AtomicU64::new(0);
    let down = AtomicU64::new(0);
    let activity = Activity::new();
    let server_hello = AtomicBool::new(false);
    let refused = OnceLock::new();
    let both = async {
        tokio::try_join!(
            watched_up(
                client,
                upstream,
                limits,
                Counters {
                    bytes: &up,
                    activity: &activity,
                },
                (watch, early),
                &server_hello,
                &refused,
            ),
            observed_down(
                upstream,
                client,
                limits.buffer_bytes,
                Counters {
                    bytes: &down,
                    activity: &activity,
                },
                &server_hello,
            ),
        )
        .map(|_| ())
    };
    let close = supervise(both, &activity, limits.idle_timeout(), shutdown).await;
    let end = match refused.get() {
        Some(e) => TunnelEnd::Refused(*e),
        None => TunnelEnd::Closed(close),
    };
    (
        up.load(Ordering::Relaxed),
        down.load(Ordering::Relaxed),
        end,
    )
}

#[derive(Clone, Copy)]
struct Counters<'a> {
    bytes: &'a AtomicU64,
    activity: &'a Activity,
}

async fn write_all(dst: &TcpStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        dst.writable().await?;
        match dst.try_write(data) {
            Ok(n) => data = data.get(n..).unwrap_or_default(),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Client to server: inspected until the watch is done, then a plain copy.
async fn watched_up(
    src: &TcpStream,
    dst: &TcpStream,
    limits: &ConnectionLimits,
    counters: Counters<'_>,
    (mut watch, early): (ClientWatch, &[u8]),
    server_hello: &AtomicBool,
    refused: &OnceLock<LaterHelloError>,
) -> io::Result<()> {
    let refuse = |e: LaterHelloError| {
        let _ = refused.set(e);
        tracing::info!(reason = e.reason(), error = %e, "later handshake record refused");
        io::Error::other(e)
    };
    let mut out = Vec::new();
    watch
        .push(early, server_hello.load(Ordering::Relaxed), &mut out)
        .map_err(refuse)?;
    let mut held_since: Option<Instant> = None;
    loop {
        if !out.is_empty() {
            write_all(dst, &out).await?;
            counters
                .bytes
                .fetch_add(out.len() as u64, Ordering::Relaxed);
            counters.activity.touch();
            out.clear();
        }
        if watch.is_done() {
            break;
        }
        // An incomplete record or message may be held for the ClientHello timeout at most.
        held_since = if watch.holding() {
            held_since.or_else(|| Some(Instant::now()))
        } else {
            None
        };
        match held_since {
            Some(since) => {
                tokio::time::timeout_at(since + limits.client_hello_timeout(), src.readable())
                    .await
                    .map_err(|_| refuse(LaterHelloError::Timeout))??;
            }
            None => src.readable().await?,
        }
        let mut buf = BytesMut::with_capacity(limits.buffer_bytes);
        match src.try_read_buf(&mut buf) {
            Ok(0) => {
                // Whatever is still held never reaches the server.
                half_close(dst);
                return Ok(());
            }
            Ok(_) => {
                counters.activity.touch();
                watch
                    .push(&buf, server_hello.load(Ordering::Relaxed), &mut out)
                    .map_err(refuse)?;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    drop(watch);
    drop(out);
    direction(
        src,
        dst,
        limits.buffer_bytes,
        counters.bytes,
        counters.activity,
    )
    .await
}

/// Server to client: observed (never held) until its ServerHello, then a plain copy.
async fn observed_down(
    src: &TcpStream,
    dst: &TcpStream,
    buffer_bytes: usize,
    counters: Counters<'_>,
    server_hello: &AtomicBool,
) -> io::Result<()> {
    let mut watch = ServerWatch::new();
    loop {
        src.readable().await?;
        let mut buf = BytesMut::with_capacity(buffer_bytes);
        match src.try_read_buf(&mut buf) {
            Ok(0) => {
                half_close(dst);
                return Ok(());
            }
            Ok(n) => {
                counters.activity.touch();
                let outcome = watch.observe(&buf);
                // Before the client can see the ServerHello, so that its answer to it is
                // judged with the flag set.
                if outcome == Some(ServerOutcome::ServerHello) {
                    server_hello.store(true, Ordering::Relaxed);
                }
                write_all(dst, &buf).await?;
                counters.bytes.fetch_add(n as u64, Ordering::Relaxed);
                counters.activity.touch();
                if outcome.is_some() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    direction(src, dst, buffer_bytes, counters.bytes, counters.activity).await
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{records, ClientHelloBuilder};
    use super::*;

    const HOST: &str = "api.devin.ai";

    fn watch() -> ClientWatch {
        ClientWatch::new(HOST, 64 * 1024)
    }

    fn push_all(w: &mut ClientWatch, data: &[u8], shs: bool) -> Result<Vec<u8>, LaterHelloError> {
        let mut out = Vec::new();
        w.push(data, shs, &mut out)?;
        Ok(out)
    }

    fn hello(sni: &str) -> Vec<u8> {
        ClientHelloBuilder::new().sni(sni).records()
    }

    /// A ServerHello (or HelloRetryRequest) handshake message in one record.
    fn server_hello(hrr: bool) -> Vec<u8> {
        let mut body = vec![3, 3];
        if hrr {
            body.extend_from_slice(&HRR_RANDOM);
        } else {
            body.extend((0..32u8).map(|i| i.wrapping_mul(3)));
        }
        body.extend_from_slice(&[0, 0x13, 0x01, 0, 0, 0]);
        let mut msg = vec![
            HANDSHAKE_SERVER_HELLO,
            0,
            (body.len() >> 8) as u8,
            body.len() as u8,
        ];
        msg.extend_from_slice(&body);
        records(&msg, 16_384)
    }

    const CCS: [u8; 6] = [0x14, 3, 3, 0, 1, 1];
    const APP: [u8; 8] = [0x17, 3, 3, 0, 3, 9, 9, 9];

    #[test]
    fn a_second_hello_naming_another_host_is_refused_and_never_released() {
        let mut w = watch();
        let mut out = Vec::new();
        let err = w.push(&hello("evil.example"), false, &mut out);
        assert_eq!(err, Err(LaterHelloError::SniMismatch));
        assert!(out.is_empty());
        // Same host, in any case or with a trailing dot: passes.
        let mut w = watch();
        assert_eq!(
            push_all(&mut w, &hello("API.devin.ai."), false)
                .unwrap()
                .len(),
            hello("API.devin.ai.").len()
        );
        assert_eq!(w.hellos(), 1);
    }

    #[test]
    fn later_hellos_get_the_first_hellos_checks() {
        let b = ClientHelloBuilder::new;
        for (bytes, reason) in [
            (
                b().sni(HOST).extension(0xfe0d, vec![0; 8]).records(),
                "later_hello_encrypted_client_hello",
            ),
            (
                b().sni(HOST).sni("evil.example").records(),
                "later_hello_duplicate_sni",
            ),
            (
                b().sni_ext(&[HOST, "evil.example"]).records(),
                "later_hello_duplicate_sni",
            ),
            (b().records(), "later_hello_missing_sni"),
            (vec![0x18, 3, 3, 0, 1, 0], "handshake_not_tls_record"),
            (b"GET / HTTP/1.1\r\n".to_vec(), "handshake_not_tls_record"),
        ] {
            let mut w = watch();
            let err = push_all(&mut w, &bytes, false).unwrap_err();
            assert_eq!(err.reason(), reason);
        }
    }

    #[test]
    fn a_hello_split_across_records_and_pushes_is_held_until_checked() {
        let hs = ClientHelloBuilder::new()
            .sni("evil.example")
            .padding(500)
            .handshake();
        let raw = records(&hs, 40);
        let mut w = watch();
        let mut out = Vec::new();
        let last = raw.len() - 1;
        for (i, byte) in raw.iter().enumerate() {
            let r = w.push(&[*byte], false, &mut out);
            if i < last {
                r.unwrap();
                assert!(out.is_empty(), "released before the message was whole");
                assert!(w.holding());
            } else {
                assert_eq!(r, Err(LaterHelloError::SniMismatch));
            }
        }
        assert!(out.is_empty());
    }

    #[test]
    fn the_watch_ends_at_encrypted_records_after_the_server_hello_only() {
        // Before any ServerHello, change_cipher_spec (TLS 1.3 compatibility) and early data
        // do not end the watch: a second ClientHello after them is still checked.
        let mut w = watch();
        let mut data = CCS.to_vec();
        data.extend_from_slice(&APP);
        data.extend_from_slice(&hello("evil.example"));
        assert_eq!(
            push_all(&mut w, &data, false),
            Err(LaterHelloError::SniMismatch)
        );

        let mut w = watch();
        let out = push_all(&mut w, &CCS, false).unwrap();
        assert_eq!(out, CCS);
        assert!(!w.is_done());
        // After the ServerHello: TLS 1.2 ClientKeyExchange passes, change_cipher_spec ends the
        // watch and what follows (an encrypted Finished in a handshake record) passes as is.
        let cke = records(&[16, 0, 0, 3, 2, 1, 1], 16_384);
        let encrypted_finished = vec![0x16, 3, 3, 0, 4, 0xde, 0xad, 0xbe, 0xef];
        let mut data = cke.clone();
        data.extend_from_slice(&CCS);
        data.extend_from_slice(&encrypted_finished);
        assert_eq!(push_all(&mut w, &data, true).unwrap(), data);
        assert!(w.is_done());
        assert_eq!(push_all(&mut w, b"anything", true).unwrap(), b"anything");
    }

    #[test]
    fn interleaving_and_oversized_records_are_refused() {
        let hs = ClientHelloBuilder::new().sni(HOST).handshake();
        let mut data = records(&hs[..10], 16_384);
        data.extend_from_slice(&CCS);
        assert!(matches!(
            push_all(&mut watch(), &data, false),
            Err(LaterHelloError::Malformed(_))
        ));
        assert!(matches!(
            push_all(&mut watch(), &[0x17, 3, 3, 0xff, 0xff], false),
            Err(LaterHelloError::Malformed(_))
        ));
        let mut small = ClientWatch::new(HOST, 100);
        let big = records(
            &ClientHelloBuilder::new()
                .sni(HOST)
                .padding(40_000)
                .handshake(),
            16_384,
        );
        assert_eq!(
            push_all(&mut small, &big, false),
            Err(LaterHelloError::TooLarge)
        );
    }

    #[test]
    fn server_watch_tells_a_retry_request_from_a_server_hello() {
        let mut s = ServerWatch::new();
        assert_eq!(s.observe(&server_hello(true)), None);
        assert_eq!(s.retries(), 1);
        assert_eq!(s.observe(&CCS), None);
        let sh = server_hello(false);
        // Byte by byte.
        for (i, b) in sh.iter().enumerate() {
            let got = s.observe(&[*b]);
            if got.is_some() {
                assert_eq!(got, Some(ServerOutcome::ServerHello));
                assert!(i >= 5 + 4 + SERVER_HELLO_PREFIX - 1);
                return;
            }
        }
        panic!("ServerHello not recognised");
    }

    #[test]
    fn server_watch_gives_up_on_anything_else() {
        for first in [
            vec![0x15, 3, 3, 0, 2, 2, 40],
            b"HTTP/1.1 200 OK\r\n".to_vec(),
            records(&[11, 0, 0, 1, 0], 16_384),
        ] {
            assert_eq!(
                ServerWatch::new().observe(&first),
                Some(ServerOutcome::NoServerHello)
            );
        }
    }
}
