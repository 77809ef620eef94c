//! Opaque cursors: base64 of `v1:<resource_version>` (a watch position, and the final page of
//! a list) or `v1:<resource_version>:<row>` (a list page in the middle: the list's starting
//! resource version and the position of the next page's first row). Lists and watches take
//! either kind.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub rv: u64,
    pub row: Option<u64>,
}

impl Cursor {
    pub(crate) fn encode(self) -> String {
        let text = match self.row {
            Some(row) => format!("v1:{}:{row}", self.rv),
            None => format!("v1:{}", self.rv),
        };
        base64_encode(text.as_bytes())
    }

    /// `None` for anything this fleet did not issue in this format.
    pub(crate) fn decode(cursor: &str) -> Option<Cursor> {
        let text = String::from_utf8(base64_decode(cursor)?).ok()?;
        let mut parts = text.strip_prefix("v1:")?.split(':');
        let rv = parts.next()?.parse().ok()?;
        let row = match parts.next() {
            Some(row) => Some(row.parse().ok()?),
            None => None,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(Cursor { rv, row })
    }
}

fn base64_encode(input: &[u8]) -> String {
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(input: &str) -> Option<Vec<u8>> {
    let bytes = input.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in bytes {
        let value = ALPHABET.iter().position(|&a| a == c)? as u32;
        acc = (acc << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for cursor in [
            Cursor { rv: 0, row: None },
            Cursor {
                rv: 17,
                row: Some(3),
            },
            Cursor {
                rv: 123456,
                row: None,
            },
        ] {
            assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor));
        }
        assert_eq!(base64_encode(b"v1:5"), "djE6NQ==");
        assert_eq!(Cursor::decode("garbage!"), None);
        assert_eq!(Cursor::decode(&base64_encode(b"v2:5")), None);
    }
}
