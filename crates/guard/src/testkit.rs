//! Synthetic TLS ClientHellos for tests, fuzzing and the benchmark.
//!
//! The guard never builds ClientHellos itself; these helpers produce well-formed (or
//! deliberately odd) ones so that tests can exercise the reader: duplicate SNI, several names,
//! encrypted-ClientHello extensions, padding to any size, and any fragmentation into records.

/// Builds a ClientHello handshake message (handshake header included, record layer excluded).
#[derive(Debug, Clone, Default)]
pub struct ClientHelloBuilder {
    extensions: Vec<(u16, Vec<u8>)>,
}

impl ClientHelloBuilder {
    /// No extension at all (so no SNI) until one is added.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a `server_name` extension carrying one host name.
    pub fn sni(self, host: &str) -> Self {
        self.sni_ext(&[host])
    }

    /// Add a `server_name` extension carrying these host names, in one list.
    pub fn sni_ext(mut self, hosts: &[&str]) -> Self {
        let mut list = Vec::new();
        for host in hosts {
            list.push(0u8);
            push_u16(&mut list, host.len());
            list.extend_from_slice(host.as_bytes());
        }
        let mut data = Vec::new();
        push_u16(&mut data, list.len());
        data.extend_from_slice(&list);
        self.extensions.push((0, data));
        self
    }

    /// Add any extension.
    pub fn extension(mut self, ext_type: u16, data: Vec<u8>) -> Self {
        self.extensions.push((ext_type, data));
        self
    }

    /// Add a `padding` extension (type 21) of `len` zero bytes (at most 65535).
    pub fn padding(self, len: usize) -> Self {
        self.extension(21, vec![0; len.min(usize::from(u16::MAX))])
    }

    /// The handshake message: type 1, 24-bit length, body.
    pub fn handshake(&self) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&[3, 3]);
        body.extend((0..32u8).map(|i| i.wrapping_mul(7)));
        body.push(32);
        body.extend((0..32u8).map(|i| i.wrapping_mul(13)));
        push_u16(&mut body, 8);
        body.extend_from_slice(&[0x13, 0x01, 0x13, 0x02, 0x13, 0x03, 0xc0, 0x2f]);
        body.extend_from_slice(&[1, 0]);
        if !self.extensions.is_empty() {
            let mut exts = Vec::new();
            for (ext_type, data) in &self.extensions {
                exts.extend_from_slice(&ext_type.to_be_bytes());
                push_u16(&mut exts, data.len());
                exts.extend_from_slice(data);
            }
            push_u16(&mut body, exts.len());
            body.extend_from_slice(&exts);
        }
        let mut msg = vec![1u8];
        let len = body.len();
        msg.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8]);
        msg.extend_from_slice(&body);
        msg
    }

    /// The handshake message in records of at most 16384 bytes.
    pub fn records(&self) -> Vec<u8> {
        records(&self.handshake(), 16_384)
    }
}

/// Wrap handshake bytes into TLS handshake records of at most `fragment` payload bytes each
/// (`fragment` is clamped to 1..=16384).
pub fn records(handshake: &[u8], fragment: usize) -> Vec<u8> {
    let fragment = fragment.clamp(1, 16_384);
    let mut out = Vec::with_capacity(handshake.len() + 5 * (handshake.len() / fragment + 1));
    for chunk in handshake.chunks(fragment) {
        out.extend_from_slice(&[0x16, 3, 1]);
        push_u16(&mut out, chunk.len());
        out.extend_from_slice(chunk);
    }
    out
}

fn push_u16(out: &mut Vec<u8>, n: usize) {
    let n = u16::try_from(n).unwrap_or(u16::MAX);
    out.extend_from_slice(&n.to_be_bytes());
}
