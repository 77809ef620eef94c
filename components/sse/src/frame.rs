//! An output buffer that writes SSE events and JSON documents.

use serde::Serialize;

/// Bytes of output under construction. `serde_json` writes bytes, so the buffer is a
/// `Vec<u8>` and becomes a `String` once, at the end.
pub(crate) struct Frame {
    buf: Vec<u8>,
}

impl Frame {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            buf: Vec::with_capacity(capacity),
        }
    }

    /// Appends `event: <name>\ndata: <json>\n\n`.
    ///
    /// `serde_json` escapes every control character inside strings and writes compact JSON,
    /// so the data never contains a line break that would end the SSE field early.
    pub(crate) fn event<T: Serialize>(&mut self, name: &str, data: &T) {
        self.buf.extend_from_slice(b"event: ");
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.extend_from_slice(b"\ndata: ");
        self.json(data);
        self.buf.extend_from_slice(b"\n\n");
    }

    /// Appends the compact JSON of `value`.
    pub(crate) fn json<T: Serialize>(&mut self, value: &T) {
        let mark = self.buf.len();
        if serde_json::to_writer(&mut self.buf, value).is_err() {
            // Unreachable for this crate's wire types (serde_json fails only on non-string map
            // keys or a failing `Serialize` impl, and we have neither). Rolling back to a
            // well-formed `null` keeps every function total instead of panicking.
            self.buf.truncate(mark);
            self.buf.extend_from_slice(b"null");
        }
    }

    pub(crate) fn into_string(self) -> String {
        // Only UTF-8 is ever written (serde_json output and `&str` bytes), so the lossy
        // branch never runs; it exists so that this conversion cannot panic.
        String::from_utf8(self.buf)
            .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
    }
}
