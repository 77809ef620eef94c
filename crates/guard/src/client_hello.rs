//! Reading a TLS ClientHello without terminating TLS, to check its SNI.
//!
//! The reader is incremental and fails closed: records must be handshake records (`0x16`,
//! version major 3, 1..=16384 bytes); their payloads are reassembled until one whole
//! handshake message is present, which must be a ClientHello (`0x01`) ending exactly at a record
//! boundary. Records may be split anywhere across TCP segments and the message across any number
//! of records. The whole, raw, is bounded by a byte cap (64 KiB at most) and, in
//! [`read_client_hello`], a deadline. The raw bytes are kept so they can be replayed upstream.
//!
//! In the ClientHello, every length is checked against its container; a duplicate extension, a
//! `server_name` list with more than one host name, a missing or empty SNI, and an Encrypted
//! ClientHello (`encrypted_client_hello` / the old `encrypted_server_name`, which would hide
//! the real destination behind an allowed outer name) are refusals. No input can make it panic:
//! every slice access goes through [`Cursor`].

use std::collections::HashSet;
use std::time::Duration;

use bytes::BufMut;
use tokio::io::{AsyncRead, AsyncReadExt};

const RECORD_HANDSHAKE: u8 = 0x16;
const HANDSHAKE_CLIENT_HELLO: u8 = 0x01;
const MAX_RECORD_PAYLOAD: usize = 16_384;
const EXT_SERVER_NAME: u16 = 0x0000;
/// `encrypted_client_hello` (RFC 9849) and its drafts' code points `0xfe08..=0xfe0d`.
const EXT_ECH_RANGE: std::ops::RangeInclusive<u16> = 0xfe08..=0xfe0d;
/// The old `encrypted_server_name` draft.
const EXT_ESNI: u16 = 0xffce;
const SNI_HOST_NAME: u8 = 0;

/// Why a ClientHello was refused. Every variant has a stable audit reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    /// The first record is not a TLS handshake record.
    #[error("first record is not a TLS handshake record")]
    NotHandshakeRecord,
    /// The first handshake message is not a ClientHello.
    #[error("first handshake message is not a ClientHello")]
    NotClientHello,
    /// A length or field does not fit.
    #[error("malformed ClientHello: {0}")]
    Malformed(&'static str),
    /// More than the byte cap before a whole ClientHello.
    #[error("ClientHello larger than the cap")]
    TooLarge,
    /// No `server_name` extension, or no host name in it.
    #[error("ClientHello has no SNI")]
    MissingSni,
    /// Two `server_name` extensions, or two host names in one.
    #[error("ClientHello has more than one SNI")]
    DuplicateSni,
    /// Any other extension type present twice.
    #[error("ClientHello repeats an extension")]
    DuplicateExtension,
    /// Encrypted ClientHello / encrypted SNI: the real name would be hidden.
    #[error("ClientHello uses encrypted client hello")]
    EncryptedClientHello,
    /// The SNI host name is not printable ASCII.
    #[error("SNI is not an ASCII host name")]
    InvalidSni,
    /// The deadline passed before a whole ClientHello.
    #[error("ClientHello not received in time")]
    Timeout,
    /// The client closed the connection before a whole ClientHello.
    #[error("client closed before a whole ClientHello")]
    ClientClosed,
    /// Reading from the client failed.
    #[error("read error before a whole ClientHello")]
    Io,
}

impl HelloError {
    /// Stable audit reason.
    pub fn reason(self) -> &'static str {
        match self {
            HelloError::NotHandshakeRecord => "not_handshake_record",
            HelloError::NotClientHello => "not_client_hello",
            HelloError::Malformed(_) => "malformed_client_hello",
            HelloError::TooLarge => "client_hello_too_large",
            HelloError::MissingSni => "missing_sni",
            HelloError::DuplicateSni => "duplicate_sni",
            HelloError::DuplicateExtension => "duplicate_extension",
            HelloError::EncryptedClientHello => "encrypted_client_hello",
            HelloError::InvalidSni => "invalid_sni",
            HelloError::Timeout => "client_hello_timeout",
            HelloError::ClientClosed => "client_closed_before_hello",
            HelloError::Io => "client_read_error",
        }
    }
}

/// What the guard learns from a ClientHello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    /// The SNI host name, as sent (ASCII, not yet normalised).
    pub sni: String,
}

/// Incremental parser over a growing raw buffer.
#[derive(Debug)]
pub struct HelloParser {
    max: usize,
    /// Offset of the next unparsed record header in the raw buffer.
    pos: usize,
    /// Reassembled handshake bytes.
    handshake: Vec<u8>,
}

impl HelloParser {
    /// A parser that refuses more than `max` raw bytes.
    pub fn new(max: usize) -> Self {
        Self {
            max,
            pos: 0,
            handshake: Vec::new(),
        }
    }

    /// Raw bytes taken up by the records parsed so far: after a whole ClientHello, its length
    /// (anything beyond belongs to later records, which are not part of this ClientHello).
    pub fn consumed(&self) -> usize {
        self.pos
    }

    /// Parse what `raw` holds beyond what earlier calls saw. `raw` must only grow between calls.
    /// `Ok(None)`: need more bytes.
    pub fn advance(&mut self, raw: &[u8]) -> Result<Option<ClientHello>, HelloError> {
        loop {
            let rest = raw.get(self.pos..).unwrap_or_default();
            if let Some(&ctype) = rest.first() {
                if ctype != RECORD_HANDSHAKE {
                    return Err(HelloError::NotHandshakeRecord);
                }
            }
            if let Some(&major) = rest.get(1) {
                if major != 3 {
                    return Err(HelloError::Malformed("record version"));
                }
            }
            let Some(header) = rest.get(..5) else {
                break;
            };
            let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
            if len == 0 {
                return Err(HelloError::Malformed("empty handshake record"));
            }
            if len > MAX_RECORD_PAYLOAD {
                return Err(HelloError::Malformed("record too long"));
            }
            let Some(payload) = rest.get(5..5 + len) else {
                break;
            };
            self.handshake.extend_from_slice(payload);
            self.pos += 5 + len;
            if let Some(hello) = self.check_handshake()? {
                return Ok(Some(hello));
            }
        }
        if raw.len() >= self.max {
            return Err(HelloError::TooLarge);
        }
        Ok(None)
    }

    fn check_handshake(&mut self) -> Result<Option<ClientHello>, HelloError> {
        let hs = &self.handshake;
        if let Some(&msg_type) = hs.first() {
            if msg_type != HANDSHAKE_CLIENT_HELLO {
                return Err(HelloError::NotClientHello);
            }
        }
        let Some(header) = hs.get(..4) else {
            return Ok(None);
        };
        let len =
            usize::from(header[1]) << 16 | usize::from(header[2]) << 8 | usize::from(header[3]);
        if len + 4 > self.max {
            return Err(HelloError::TooLarge);
        }
        let Some(body) = hs.get(4..4 + len) else {
            return Ok(None);
        };
        if hs.len() > 4 + len {
            return Err(HelloError::Malformed(
                "data after the ClientHello in its records",
            ));
        }
        parse_client_hello_body(body).map(Some)
    }
}

/// A bounds-checked reader over a byte slice.
struct Cursor<'a> {
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn new(data: &'a [u8]) -> Self {
        Self { data }
    }
    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], HelloError> {
        if n > self.data.len() {
            return Err(HelloError::Malformed(what));
        }
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        Ok(head)
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, HelloError> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &'static str) -> Result<u16, HelloError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn vec_u8(&mut self, what: &'static str) -> Result<&'a [u8], HelloError> {
        let n = usize::from(self.u8(what)?);
        self.take(n, what)
    }
    fn vec_u16(&mut self, what: &'static str) -> Result<&'a [u8], HelloError> {
        let n = usize::from(self.u16(what)?);
        self.take(n, what)
    }
}

/// Parse a ClientHello body (after the 4-byte handshake header).
pub fn parse_client_hello_body(body: &[u8]) -> Result<ClientHello, HelloError> {
    let mut c = Cursor::new(body);
    let version = c.u16("legacy_version")?;
    if version >> 8 != 3 {
        return Err(HelloError::Malformed("legacy_version"));
    }
    c.take(32, "random")?;
    if c.vec_u8("session_id")?.len() > 32 {
        return Err(HelloError::Malformed("session_id"));
    }
    let suites = c.vec_u16("cipher_suites")?;
    if suites.is_empty() || suites.len() % 2 != 0 {
        return Err(HelloError::Malformed("cipher_suites"));
    }
    if c.vec_u8("compression_methods")?.is_empty() {
        return Err(HelloError::Malformed("compression_methods"));
    }
    if c.is_empty() {
        return Err(HelloError::MissingSni);
    }
    let mut exts = Cursor::new(c.vec_u16("extensions")?);
    if !c.is_empty() {
        return Err(HelloError::Malformed("data after extensions"));
    }
    let mut seen = HashSet::new();
    let mut sni: Option<String> = None;
    while !exts.is_empty() {
        let ext_type = exts.u16("extension type")?;
        let data = exts.vec_u16("extension data")?;
        if !seen.insert(ext_type) {
            return Err(if ext_type == EXT_SERVER_NAME {
                HelloError::DuplicateSni
            } else {
                HelloError::DuplicateExtension
            });
        }
        if EXT_ECH_RANGE.contains(&ext_type) || ext_type == EXT_ESNI {
            return Err(HelloError::EncryptedClientHello);
        }
        if ext_type == EXT_SERVER_NAME {
            sni = parse_server_name(data)?;
        }
    }
    sni.map(|sni| ClientHello { sni })
        .ok_or(HelloError::MissingSni)
}

fn parse_server_name(data: &[u8]) -> Result<Option<String>, HelloError> {
    let mut ext = Cursor::new(data);
    let mut list = Cursor::new(ext.vec_u16("server_name_list")?);
    if !ext.is_empty() {
        return Err(HelloError::Malformed("data after server_name_list"));
    }
    let mut host: Option<String> = None;
    while !list.is_empty() {
        let name_type = list.u8("server name type")?;
        let name = list.vec_u16("server name")?;
        if name_type != SNI_HOST_NAME {
            return Err(HelloError::Malformed("unknown server name type"));
        }
        if host.is_some() {
            return Err(HelloError::DuplicateSni);
        }
        if name.is_empty() {
            return Err(HelloError::MissingSni);
        }
        if !name.iter().all(|b| b.is_ascii_graphic()) {
            return Err(HelloError::InvalidSni);
        }
        host = Some(String::from_utf8_lossy(name).into_owned());
    }
    Ok(host)
}

/// Read from `io` until `raw` (which may already hold bytes the client sent early) contains a
/// whole ClientHello, within `timeout` and at most `max` bytes. Returns the ClientHello, its
/// raw records (to be replayed upstream) and any bytes read after them (later records, which
/// the caller must inspect before they go anywhere: they may hold another ClientHello).
pub(crate) async fn read_client_hello<R: AsyncRead + Unpin>(
    io: &mut R,
    mut raw: Vec<u8>,
    max: usize,
    timeout: Duration,
) -> Result<(ClientHello, Vec<u8>, Vec<u8>), HelloError> {
    let mut parser = HelloParser::new(max);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(hello) = parser.advance(&raw)? {
            let after = raw.split_off(parser.consumed().min(raw.len()));
            return Ok((hello, raw, after));
        }
        let room = max.saturating_sub(raw.len());
        if room == 0 {
            return Err(HelloError::TooLarge);
        }
        raw.reserve(room.min(4096));
        let read = {
            let mut limited = BufMut::limit(&mut raw, room);
            tokio::time::timeout_at(deadline, io.read_buf(&mut limited)).await
        };
        match read {
            Err(_) => return Err(HelloError::Timeout),
            Ok(Ok(0)) => return Err(HelloError::ClientClosed),
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return Err(HelloError::Io),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{records, ClientHelloBuilder};
    use super::*;

    fn parse_all(raw: &[u8]) -> Result<Option<ClientHello>, HelloError> {
        HelloParser::new(64 * 1024).advance(raw)
    }

    #[test]
    fn simple_hello() {
        let hs = ClientHelloBuilder::new().sni("api.devin.ai").handshake();
        let raw = records(&hs, 16_384);
        assert_eq!(parse_all(&raw).unwrap().unwrap().sni, "api.devin.ai");
    }

    #[test]
    fn byte_by_byte_and_many_records() {
        let hs = ClientHelloBuilder::new()
            .sni("api.devin.ai")
            .padding(3000)
            .handshake();
        for fragment in [1, 7, 100, 16_384] {
            let raw = records(&hs, fragment);
            let mut p = HelloParser::new(64 * 1024);
            let mut got = None;
            for end in 1..=raw.len() {
                match p.advance(&raw[..end]).unwrap() {
                    Some(h) => {
                        assert_eq!(end, raw.len());
                        got = Some(h);
                    }
                    None => assert!(end < raw.len()),
                }
            }
            assert_eq!(got.unwrap().sni, "api.devin.ai", "fragment {fragment}");
        }
    }

    #[test]
    fn refusals() {
        let b = || ClientHelloBuilder::new();
        let one = |hs: Vec<u8>| parse_all(&records(&hs, 16_384));
        assert_eq!(one(b().handshake()), Err(HelloError::MissingSni));
        assert_eq!(
            one(b().sni("a.devin.ai").sni_ext(&["b.devin.ai"]).handshake()),
            Err(HelloError::DuplicateSni)
        );
        assert_eq!(
            one(b().sni_ext(&["a.devin.ai", "b.devin.ai"]).handshake()),
            Err(HelloError::DuplicateSni)
        );
        assert_eq!(
            one(b()
                .sni("a.devin.ai")
                .extension(0xfe0d, vec![0; 8])
                .handshake()),
            Err(HelloError::EncryptedClientHello)
        );
        assert_eq!(
            one(b()
                .sni("a.devin.ai")
                .extension(10, vec![0, 0])
                .extension(10, vec![0, 0])
                .handshake()),
            Err(HelloError::DuplicateExtension)
        );
        assert_eq!(
            one(b().sni("bad\u{7f}.ai").handshake()),
            Err(HelloError::InvalidSni)
        );
        assert_eq!(
            parse_all(b"GET / HTTP/1.1\r\n"),
            Err(HelloError::NotHandshakeRecord)
        );
        assert_eq!(
            parse_all(&[0x17, 3, 3, 0, 1, 0]),
            Err(HelloError::NotHandshakeRecord)
        );
        assert_eq!(
            parse_all(&[0x16, 3, 1, 0, 0]),
            Err(HelloError::Malformed("empty handshake record"))
        );
        assert_eq!(
            parse_all(&[0x16, 3, 1, 0, 4, 2, 0, 0, 0]),
            Err(HelloError::NotClientHello)
        );
        let mut hs = b().sni("a.devin.ai").handshake();
        hs.extend_from_slice(&[0x10, 0, 0, 0]);
        assert!(matches!(one(hs), Err(HelloError::Malformed(_))));
        // A handshake header announcing more than the cap.
        assert_eq!(
            HelloParser::new(1000).advance(&[0x16, 3, 1, 0, 4, 1, 0, 0x10, 0]),
            Err(HelloError::TooLarge)
        );
        // Raw bytes reaching the cap without a whole message.
        let big = records(&b().sni("a.devin.ai").padding(5000).handshake(), 16_384);
        assert_eq!(
            HelloParser::new(1000).advance(&big[..1000]),
            Err(HelloError::TooLarge)
        );
    }

    #[test]
    fn never_panics_on_truncations_and_mutations() {
        let hs = ClientHelloBuilder::new()
            .sni("api.devin.ai")
            .extension(43, vec![2, 3, 4])
            .handshake();
        let raw = records(&hs, 50);
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for i in 0..20_000 {
            let mut m = raw.clone();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let idx = (seed as usize) % m.len();
            m[idx] = (seed >> 32) as u8;
            let cut = if i % 3 == 0 { idx + 1 } else { m.len() };
            let _ = HelloParser::new(64 * 1024).advance(&m[..cut]);
            let _ = parse_client_hello_body(&m[..cut]);
        }
    }
}
