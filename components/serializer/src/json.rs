//! An order-preserving JSON tree and the two printers the prompt needs.
//!
//! Why not `serde_json::Value`: the order of its maps depends on serde_json's `preserve_order`
//! feature, and cargo unifies features across everything in one build. Tool schemas are echoed
//! into the prompt and hashed into the id seed, so their key order must not change with what else
//! happens to be compiled alongside us (the host, the envelope crate, a wasm build on its own).
//! This tree keeps keys in request order, always; the printers emit exactly serde_json's compact
//! and pretty formats, so the output reads like any other JSON the project prints.
//!
//! Parsing still goes through `serde_json::Deserializer`, which keeps its recursion limit
//! (128 levels): a deeply nested request is an error, not a stack overflow. Every recursive
//! function below is therefore bounded by that depth too.
//!
//! This relies on serde_json's `arbitrary_precision` feature staying off (it would hand numbers
//! to `visit_map`); `printers_match_serde_json_on_sorted_input` fails if anything turns it on.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

/// A parsed JSON value. Objects keep their keys in document order; a repeated key keeps its
/// first position and its last value, as `JSON.parse` and serde_json do.
///
/// Strings and keys borrow from the request text when they hold no escape, so parsing a large
/// request allocates only for the strings it had to unescape and for the containers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl<'a> Json<'a> {
    /// Parses `text` as one JSON value (serde_json's grammar and recursion limit).
    pub(crate) fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The member `key` of an object, treating an explicit `null` as absent: clients that build
    /// requests from optional values often send `"system": null` meaning "no system".
    pub(crate) fn field(&self, key: &str) -> Option<&Json<'a>> {
        match self {
            Json::Object(entries) => entries
                .iter()
                .find(|(name, _)| name == key)
                .map(|(_, value)| value)
                .filter(|value| !matches!(value, Json::Null)),
            _ => None,
        }
    }

    /// The member `key` when it is a string.
    pub(crate) fn str_field(&self, key: &str) -> Option<&str> {
        match self.field(key) {
            Some(Json::String(text)) => Some(text),
            _ => None,
        }
    }

    /// A short description of the value's kind, for error messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

/// Appends `value` as compact JSON (serde_json's `to_string` format).
pub(crate) fn write_compact(out: &mut String, value: &Json) {
    match value {
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_compact(out, item);
            }
            out.push(']');
        }
        Json::Object(entries) => {
            out.push('{');
            for (i, (key, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_compact(out, item);
            }
            out.push('}');
        }
        scalar => write_scalar(out, scalar),
    }
}

/// Appends `value` as pretty JSON (serde_json's `to_string_pretty` format: two-space indent,
/// `"key": value`, empty containers as `[]` and `{}`), starting at indentation `level`.
pub(crate) fn write_pretty(out: &mut String, value: &Json, level: usize) {
    match value {
        Json::Array(items) if items.is_empty() => out.push_str("[]"),
        Json::Object(entries) if entries.is_empty() => out.push_str("{}"),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i > 0 { ",\n" } else { "\n" });
                indent(out, level + 1);
                write_pretty(out, item, level + 1);
            }
            out.push('\n');
            indent(out, level);
            out.push(']');
        }
        Json::Object(entries) => {
            out.push('{');
            for (i, (key, item)) in entries.iter().enumerate() {
                out.push_str(if i > 0 { ",\n" } else { "\n" });
                indent(out, level + 1);
                write_string(out, key);
                out.push_str(": ");
                write_pretty(out, item, level + 1);
            }
            out.push('\n');
            indent(out, level);
            out.push('}');
        }
        scalar => write_scalar(out, scalar),
    }
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn write_scalar(out: &mut String, value: &Json) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        // `Number`'s Display is the same digit writer its serializer uses.
        Json::Number(number) => {
            let _ = write!(out, "{number}");
        }
        Json::String(text) => write_string(out, text),
        Json::Array(_) | Json::Object(_) => write_compact(out, value),
    }
}

/// Appends `text` as a JSON string literal with serde_json's escapes: `"`, `\` and the C0
/// controls (short forms where JSON has them, `\u00xx` otherwise); everything else verbatim.
///
/// A borrowed string is a literal the parser found without any escape, and JSON forbids raw
/// quotes, backslashes and controls inside a literal, so it is copied as it is.
#[expect(
    clippy::ptr_arg,
    reason = "the variant tells whether the text can hold a byte that needs an escape"
)]
pub(crate) fn write_string(out: &mut String, text: &Cow<'_, str>) {
    match text {
        Cow::Borrowed(raw) => {
            debug_assert_eq!(first_escape(raw.as_bytes()), None, "{raw:?}");
            out.push('"');
            out.push_str(raw);
            out.push('"');
        }
        Cow::Owned(text) => write_escaped(out, text),
    }
}

/// [`write_string`] for any text.
fn write_escaped(out: &mut String, text: &str) {
    out.push('"');
    let mut rest = text;
    // Copy unescaped runs in one go; the position found is always an ASCII byte, hence a char
    // boundary, so `split_at_checked` never declines in practice.
    while let Some(at) = first_escape(rest.as_bytes()) {
        let Some((run, tail)) = rest.split_at_checked(at) else {
            break;
        };
        out.push_str(run);
        let mut chars = tail.chars();
        if let Some(special) = chars.next() {
            push_escape(out, special);
        }
        rest = chars.as_str();
    }
    out.push_str(rest);
    out.push('"');
}

/// The position of the first byte that needs an escape. Eight bytes at a time: prompts echo
/// long descriptions whose escapes are a few line breaks far apart.
fn first_escape(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    // Nonzero exactly when some byte of `word` is zero (the classic "has zero byte" test).
    let has_zero = |word: u64| word.wrapping_sub(ONES) & !word & HIGHS;
    let mut chunks = bytes.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        // Some byte below 0x20 (exact for any threshold up to 0x80), a quote, a backslash.
        let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
        let quote = has_zero(word ^ (ONES * u64::from(b'"')));
        let backslash = has_zero(word ^ (ONES * u64::from(b'\\')));
        if control | quote | backslash != 0 {
            return chunk
                .iter()
                .position(|&byte| needs_escape(byte))
                .map(|at| offset + at);
        }
        offset += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&byte| needs_escape(byte))
        .map(|at| offset + at)
}

fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

fn push_escape(out: &mut String, special: char) {
    match special {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        other => {
            let _ = write!(out, "\\u{:04x}", u32::from(other));
        }
    }
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Json<'de>, E> {
        Ok(Json::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Json<'de>, E> {
        Ok(Json::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Json<'de>, E> {
        Ok(Json::Number(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Json<'de>, E> {
        // serde_json rejects out-of-range literals itself; this guards the type's contract.
        Number::from_f64(value)
            .map(Json::Number)
            .ok_or_else(|| E::custom("number is not finite"))
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(value)))
    }

    fn visit_unit<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_none<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        let mut object = ObjectBuilder::default();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let value = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Json::Object(object.entries))
    }
}

/// An object key, borrowed from the text unless it had to be unescaped (`Cow<str>`'s own
/// `Deserialize` always copies).
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(value)))
    }
}

/// Small objects are searched linearly for repeated keys; past this size an index keeps an
/// object with many keys from costing quadratic time.
const INDEX_FROM: usize = 16;

#[derive(Default)]
struct ObjectBuilder<'a> {
    entries: Vec<(Cow<'a, str>, Json<'a>)>,
    index: Option<BTreeMap<Cow<'a, str>, usize>>,
}

impl<'a> ObjectBuilder<'a> {
    fn insert(&mut self, key: Cow<'a, str>, value: Json<'a>) {
        let existing = match &self.index {
            Some(index) => index.get(&key).copied(),
            None => self.entries.iter().position(|(name, _)| *name == key),
        };
        if let Some(slot) = existing.and_then(|at| self.entries.get_mut(at)) {
            slot.1 = value;
            return;
        }
        let position = self.entries.len();
        match &mut self.index {
            Some(index) => {
                index.insert(key.clone(), position);
            }
            None if position + 1 >= INDEX_FROM => {
                let mut index: BTreeMap<Cow<'a, str>, usize> = self
                    .entries
                    .iter()
                    .enumerate()
                    .map(|(at, (name, _))| (name.clone(), at))
                    .collect();
                index.insert(key.clone(), position);
                self.index = Some(index);
            }
            None => {}
        }
        self.entries.push((key, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Json<'_> {
        Json::parse(text).expect("test input is valid JSON")
    }

    fn compact(text: &str) -> String {
        let mut out = String::new();
        write_compact(&mut out, &parse(text));
        out
    }

    fn pretty(text: &str) -> String {
        let mut out = String::new();
        write_pretty(&mut out, &parse(text), 0);
        out
    }

    #[test]
    fn keeps_key_order() {
        assert_eq!(
            compact(r#"{"b":1,"a":2,"c":{"z":0,"y":1}}"#),
            r#"{"b":1,"a":2,"c":{"z":0,"y":1}}"#
        );
    }

    #[test]
    fn repeated_key_keeps_first_position_and_last_value() {
        assert_eq!(compact(r#"{"a":1,"b":2,"a":3}"#), r#"{"a":3,"b":2}"#);
        let mut many = String::from("{");
        for i in 0..100 {
            let _ = write!(many, "\"k{i}\":{i},");
        }
        many.push_str("\"k3\":\"again\",\"k99\":null}");
        let Json::Object(entries) = parse(&many) else {
            panic!("object expected")
        };
        assert_eq!(entries.len(), 100);
        assert_eq!(
            entries[3],
            (Cow::Borrowed("k3"), Json::String(Cow::Borrowed("again")))
        );
        assert_eq!(entries[99], (Cow::Borrowed("k99"), Json::Null));
    }

    #[test]
    fn printers_match_serde_json_on_sorted_input() {
        // With sorted keys, serde_json's own output must be byte-identical to ours.
        let samples = [
            r#"{"a":[1,-2,3.5,1e3,0.1,1.7976931348623157e308,null,true,false],"b":{},"c":[],"d":{"e":[{}]}}"#,
            r#"["quote \" backslash \\ nl \n cr \r tab \t bs \b ff \f nul \u0000 us \u001f del \u007f", "é ✓ 𝄞 \u2028"]"#,
            r#""plain""#,
            r#"[[[]],[{"x":[1,{"y":{}}]}]]"#,
            "-0",
            "12345678901234567890",
            "-9223372036854775808",
        ];
        for sample in samples {
            let reference: serde_json::Value = serde_json::from_str(sample).expect("valid");
            assert_eq!(
                compact(sample),
                serde_json::to_string(&reference).expect("ser"),
                "{sample}"
            );
            assert_eq!(
                pretty(sample),
                serde_json::to_string_pretty(&reference).expect("ser"),
                "{sample}"
            );
        }
    }

    #[test]
    fn first_escape_finds_the_first_special_byte_in_any_position() {
        for len in 0..40 {
            let plain = "a".repeat(len);
            assert_eq!(first_escape(plain.as_bytes()), None);
            for at in 0..len {
                for special in [b'"', b'\\', b'\n', 0u8, 0x1f] {
                    let mut bytes = plain.clone().into_bytes();
                    bytes[at] = special;
                    assert_eq!(first_escape(&bytes), Some(at), "{len} {at} {special}");
                }
                // Bytes next to the special ones, and non-ASCII, are not escapes.
                let mut bytes = plain.clone().into_bytes();
                bytes[at] = [b' ', b'!', b'#', b'[', b']', 0x7f, 0x80, 0xff][at % 8];
                assert_eq!(first_escape(&bytes), None, "{len} {at}");
            }
        }
    }

    #[test]
    fn pretty_nests_with_two_spaces() {
        assert_eq!(
            pretty(r#"{"a":{"b":[1]}}"#),
            "{\n  \"a\": {\n    \"b\": [\n      1\n    ]\n  }\n}"
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = "[".repeat(100_000);
        assert!(Json::parse(&deep).is_err());
        let ok = format!("{}{}", "[".repeat(120), "]".repeat(120));
        assert!(Json::parse(&ok).is_ok());
    }

    #[test]
    fn field_treats_null_as_absent() {
        let value = parse(r#"{"a":null,"b":"x"}"#);
        assert!(value.field("a").is_none());
        assert_eq!(value.str_field("b"), Some("x"));
        assert!(value.field("missing").is_none());
        assert!(parse("[]").field("a").is_none());
    }
}
