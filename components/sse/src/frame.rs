//! An output buffer that writes SSE events and JSON documents.

use serde::Serialize;

use crate::escape;

/// Text under construction.
///
/// The buffer is a `String` so that the answer never has to be validated as UTF-8 at the
/// end: that check alone costs more than escaping a megabyte of prose. Everything appended
/// is already `str`: literals, escaped strings, and the small serde-written parts, which go
/// through `scratch` and are checked there while they are a few hundred bytes long.
pub(crate) struct Frame {
    buf: String,
    scratch: Vec<u8>,
}

impl Frame {
    /// A buffer with room for `capacity` bytes when the allocator grants it; when it does
    /// not (an absurd estimate), the buffer grows as it is written instead of failing here.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let mut buf = String::new();
        let _ = buf.try_reserve(capacity);
        Self {
            buf,
            scratch: Vec::new(),
        }
    }

    /// Appends `event: <name>\ndata: <json>\n\n`.
    ///
    /// The JSON is compact and every control character inside its strings is escaped, so the
    /// data never contains a line break that would end the SSE field early.
    pub(crate) fn event<T: Serialize>(&mut self, name: &str, data: &T) {
        self.open_event(name);
        self.json(data);
        self.close_event();
    }

    /// Appends `event: <name>\ndata: `; the caller writes one line of compact JSON and then
    /// calls [`Frame::close_event`].
    pub(crate) fn open_event(&mut self, name: &str) {
        self.buf.push_str("event: ");
        self.buf.push_str(name);
        self.buf.push_str("\ndata: ");
    }

    /// Ends the event opened by [`Frame::open_event`].
    pub(crate) fn close_event(&mut self) {
        self.buf.push_str("\n\n");
    }

    /// Appends the compact JSON of `value`, written by `serde_json`.
    pub(crate) fn json<T: Serialize>(&mut self, value: &T) {
        self.scratch.clear();
        let written = serde_json::to_writer(&mut self.scratch, value).is_ok();
        match std::str::from_utf8(&self.scratch) {
            Ok(json) if written => self.buf.push_str(json),
            // Unreachable for this crate's wire types (serde_json fails only on non-string map
            // keys or a failing `Serialize` impl, and writes only UTF-8). A well-formed `null`
            // keeps every function total instead of panicking.
            _ => self.buf.push_str("null"),
        }
    }

    /// Appends JSON text that is already well-formed and compact (literal punctuation and
    /// keys, or a validated tool input).
    pub(crate) fn raw(&mut self, json: &str) {
        self.buf.push_str(json);
    }

    /// Appends `text` as a JSON string literal, escaped exactly as `serde_json` escapes it.
    pub(crate) fn string(&mut self, text: &str) {
        escape::push_json_string(&mut self.buf, text);
    }

    /// Appends a JSON number.
    pub(crate) fn number(&mut self, value: usize) {
        use std::fmt::Write;
        // Writing to a `String` cannot fail.
        let _ = write!(self.buf, "{value}");
    }

    pub(crate) fn into_string(self) -> String {
        self.buf
    }
}
