//! A strict JSON parser for the request body, accepting exactly what serde_json accepts.
//!
//! Why not serde_json's `Deserializer`: it unescapes every string into a scratch buffer and then
//! hands it over for a second copy, and on wasm32 it scans for quotes and escapes four bytes at a
//! time. A long conversation is mostly escaped text (tool results full of line breaks), so those
//! copies and that scan were most of the serializer's time. This parser scans eight bytes at a
//! time and unescapes each string once, straight into the string it returns; a string without
//! escapes is borrowed from the request.
//!
//! The grammar and the limits are serde_json's, so a body is accepted here exactly when it is
//! accepted there (the tests compare the two on many inputs): RFC 8259 values, whitespace of
//! space, tab, line feed and carriage return, no control character inside a string, surrogate
//! escapes only in pairs, numbers that fit an f64, at most 127 nested arrays and objects, and
//! nothing after the value. Numbers go through serde_json's own `Number` parser (they are rare
//! and short), so their values print as serde_json prints them. The message of a rejected body
//! is serde_json's own, produced by parsing the body again with it: rejections are rare and their
//! wording is part of the failure clients see.

use std::borrow::Cow;
use std::fmt;

use super::{first_escape, Json, Literal, ObjectBuilder};

/// serde_json's recursion limit: 127 nested arrays or objects parse, 128 do not.
const MAX_DEPTH: usize = 127;

/// Why a body is not JSON (serde_json's wording, with line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError(String);

impl fmt::Display for SyntaxError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for SyntaxError {}

/// Parses `text` as one JSON value.
#[cfg(test)]
pub(crate) fn parse(text: &str) -> Result<Json<'_>, SyntaxError> {
    parse_request(text).map(|(value, _)| value)
}

/// Parses `text` as one JSON value, and says where each element of the root object's
/// `messages` array ends (the byte offset just after it). When the root repeats the key, the
/// offsets are those of its last value, the one that counts; none when that value is not an
/// array.
pub(crate) fn parse_request(text: &str) -> Result<(Json<'_>, Vec<usize>), SyntaxError> {
    let mut parser = Parser::new(text);
    let value = parser
        .document()
        .ok_or_else(|| SyntaxError(reference_error(text)))?;
    Ok((value, parser.message_ends))
}

/// Parses `text` as the rest of an array after one of its elements, up to (not including) its
/// closing bracket: `(ws "," ws value)* ws`, each value nested `depth` containers deep. Returns
/// the values and where each ends.
///
/// Such a text, put after an element of an array, leaves the parser where it was before it:
/// after an element of the same array. So a document whose bytes before and after this text
/// are those of a document already parsed parses exactly as that one did, with these
/// elements in place of its own.
pub(crate) fn parse_elements(
    text: &str,
    depth: usize,
) -> Result<(Vec<Json<'_>>, Vec<usize>), SyntaxError> {
    let mut parser = Parser::new(text);
    let mut values = Vec::new();
    let mut ends = Vec::new();
    loop {
        match parser.peek() {
            None if parser.at == text.len() => return Ok((values, ends)),
            Some(b',') => parser.at += 1,
            _ => return Err(SyntaxError(ELEMENTS_ERROR.to_owned())),
        }
        let value = parser
            .value(depth)
            .ok_or_else(|| SyntaxError(ELEMENTS_ERROR.to_owned()))?;
        values.push(value);
        ends.push(parser.at);
    }
}

/// Why a text is not the rest of an array (its position means little outside the document).
const ELEMENTS_ERROR: &str = "the continuation is not a sequence of comma-led JSON values";

/// serde_json's message for a body this parser rejected.
fn reference_error(text: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(text) {
        Err(error) => error.to_string(),
        // Unreachable while the two grammars agree; say something true if they ever do not.
        Ok(_) => "the body is not JSON this bridge accepts".to_owned(),
    }
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    /// Where the elements of the root object's `messages` array end.
    message_ends: Vec<usize>,
}

/// `None` means "rejected"; the caller asks serde_json why.
type Parsed<T> = Option<T>;

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            text,
            bytes: text.as_bytes(),
            at: 0,
            message_ends: Vec::new(),
        }
    }

    fn document(&mut self) -> Parsed<Json<'a>> {
        let value = self.value(0)?;
        self.skip_whitespace();
        (self.at == self.bytes.len()).then_some(value)
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    fn peek(&mut self) -> Parsed<u8> {
        self.skip_whitespace();
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Parsed<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn literal(&mut self, word: &[u8]) -> Parsed<()> {
        let end = self.at.checked_add(word.len())?;
        (self.bytes.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// `depth`: arrays and objects this value is nested in.
    fn value(&mut self, depth: usize) -> Parsed<Json<'a>> {
        match self.peek()? {
            b'n' => self.literal(b"null").map(|()| Json::Null),
            b't' => self.literal(b"true").map(|()| Json::Bool(true)),
            b'f' => self.literal(b"false").map(|()| Json::Bool(false)),
            b'"' => {
                self.at += 1;
                self.string().map(Json::String)
            }
            b'[' if depth < MAX_DEPTH => {
                self.at += 1;
                self.array(depth + 1)
            }
            b'{' if depth < MAX_DEPTH => {
                self.at += 1;
                self.object(depth + 1)
            }
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// After `[`.
    fn array(&mut self, depth: usize) -> Parsed<Json<'a>> {
        self.array_recording(depth, false)
    }

    /// After `[`; with `record`, where each element ends goes to `message_ends`.
    fn array_recording(&mut self, depth: usize, record: bool) -> Parsed<Json<'a>> {
        let mut items = Vec::new();
        if self.peek()? == b']' {
            self.at += 1;
            return Some(Json::Array(items));
        }
        loop {
            items.push(self.value(depth)?);
            if record {
                self.message_ends.push(self.at);
            }
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Some(Json::Array(items));
                }
                _ => return None,
            }
        }
    }

    /// After `{`.
    fn object(&mut self, depth: usize) -> Parsed<Json<'a>> {
        let mut object = ObjectBuilder::default();
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(Json::Object(object.entries));
        }
        loop {
            self.eat(b'"')?;
            let key = self.string()?;
            self.eat(b':')?;
            let value = if depth == 1 && key == "messages" {
                self.messages(depth)?
            } else {
                self.value(depth)?
            };
            object.insert(key, value);
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(Json::Object(object.entries));
                }
                _ => return None,
            }
        }
    }

    /// The value of the root object's `messages` key (at `depth` 1): an array records where
    /// its elements end, replacing what an earlier `messages` key recorded.
    fn messages(&mut self, depth: usize) -> Parsed<Json<'a>> {
        self.message_ends.clear();
        if self.peek()? == b'[' && depth < MAX_DEPTH {
            self.at += 1;
            return self.array_recording(depth + 1, true);
        }
        self.value(depth)
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, valued by serde_json.
    fn number(&mut self) -> Parsed<Json<'a>> {
        let start = self.at;
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        match self.bytes.get(self.at)? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            self.one_or_more_digits()?;
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.at) {
                self.at += 1;
            }
            self.one_or_more_digits()?;
        }
        Literal::new(Cow::Borrowed(self.text.get(start..self.at)?)).map(Json::Number)
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    fn one_or_more_digits(&mut self) -> Parsed<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }

    /// After the opening quote; consumes the closing one.
    fn string(&mut self) -> Parsed<Cow<'a, str>> {
        let start = self.at;
        let stop = start + first_escape(self.bytes.get(start..)?)?;
        if self.bytes.get(stop) == Some(&b'"') {
            self.at = stop + 1;
            return Some(Cow::Borrowed(self.text.get(start..stop)?));
        }
        // An escape (a control character is rejected below). The run before it is copied, then
        // escapes and the runs between them, until the closing quote.
        let mut owned = String::with_capacity(stop - start + 16);
        let mut run_start = start;
        let mut at = stop;
        loop {
            owned.push_str(self.text.get(run_start..at)?);
            match self.bytes.get(at)? {
                b'"' => {
                    self.at = at + 1;
                    return Some(Cow::Owned(owned));
                }
                b'\\' => {
                    at = self.escape(at + 1, &mut owned)?;
                    run_start = at;
                    at += first_escape(self.bytes.get(at..)?)?;
                }
                _ => return None, // a control character
            }
        }
    }

    /// Decodes the escape whose letter is at `at` into `out`; returns where the text resumes.
    fn escape(&self, at: usize, out: &mut String) -> Parsed<usize> {
        let decoded = match self.bytes.get(at)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4(at + 1)?;
                return match unit {
                    0xD800..=0xDBFF => {
                        // A leading surrogate must be followed by an escaped trailing one.
                        if self.bytes.get(at + 5..at + 7)? != b"\\u" {
                            return None;
                        }
                        let trailing = self.hex4(at + 7)?;
                        if !(0xDC00..=0xDFFF).contains(&trailing) {
                            return None;
                        }
                        let scalar = 0x10000 + ((unit - 0xD800) << 10) + (trailing - 0xDC00);
                        out.push(char::from_u32(scalar)?);
                        Some(at + 11)
                    }
                    _ => {
                        out.push(char::from_u32(unit)?);
                        Some(at + 5)
                    }
                };
            }
            _ => return None,
        };
        out.push(decoded);
        Some(at + 1)
    }

    /// Four hex digits at `at`.
    fn hex4(&self, at: usize) -> Parsed<u32> {
        let digits = self.bytes.get(at..at.checked_add(4)?)?;
        digits.iter().try_fold(0u32, |value, &digit| {
            let nibble = char::from(digit).to_digit(16)?;
            Some(value << 4 | nibble)
        })
    }
}
