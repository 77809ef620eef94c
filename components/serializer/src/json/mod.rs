//! An order-preserving JSON tree and the two printers the prompt needs.
//!
//! Why not `serde_json::Value`: the order of its maps depends on serde_json's `preserve_order`
//! feature, and cargo unifies features across everything in one build. Tool schemas are echoed
//! into the prompt and hashed into the id seed, so their key order must not change with what else
//! happens to be compiled alongside us (the host, the envelope crate, a wasm build on its own).
//! This tree keeps keys in request order, always; the printers emit exactly serde_json's compact
//! and pretty formats, so the output reads like any other JSON the project prints.
//!
//! The parser (`parser`) accepts exactly serde_json's grammar with its recursion limit (127
//! nested containers): a deeply nested request is an error, not a stack overflow. Every
//! recursive function below is therefore bounded by that depth too. The tests keep a serde-based
//! reading of the same tree to check the parser against.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Number;

mod parser;

#[cfg(test)]
pub(crate) use parser::SyntaxError;
pub(crate) use parser::{parse_elements, parse_request};

/// A parsed JSON value. Objects keep their keys in document order; a repeated key keeps its
/// first position and its last value, as `JSON.parse` and serde_json do.
///
/// Strings and keys borrow from the request text when they hold no escape, so parsing a large
/// request allocates only for the strings it had to unescape and for the containers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json<'a> {
    Null,
    Bool(bool),
    /// The literal as the request wrote it, already checked to be a number serde_json reads
    /// (finite as an f64). It is valued only when printed: a request's numbers are few, and a
    /// text slice keeps the tree's nodes small.
    Number(Literal<'a>),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl<'a> Json<'a> {
    /// Parses `text` as one JSON value (serde_json's grammar and recursion limit).
    #[cfg(test)]
    pub(crate) fn parse(text: &'a str) -> Result<Self, SyntaxError> {
        parser::parse(text)
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

/// A number literal (see [`Json::Number`]).
#[derive(Debug, Clone)]
pub(crate) struct Literal<'a>(Cow<'a, str>);

impl<'a> Literal<'a> {
    /// `text` when serde_json reads it as a number, `None` otherwise.
    pub(crate) fn new(text: Cow<'a, str>) -> Option<Self> {
        text.parse::<Number>().ok().map(|_| Self(text))
    }

    fn value(&self) -> Option<Number> {
        self.0.parse().ok()
    }

    /// The number when it is a non-negative integer that fits a `u64` (`31999`, not `31999.0`).
    pub(crate) fn as_u64(&self) -> Option<u64> {
        self.value().and_then(|number| number.as_u64())
    }

    /// Appends the number as serde_json prints it (`Number`'s Display is the digit writer its
    /// serializer uses).
    fn write(&self, out: &mut String) {
        match self.value() {
            Some(number) => {
                let _ = write!(out, "{number}");
            }
            // Unreachable: `new` admits only literals that parse.
            None => out.push_str(&self.0),
        }
    }
}

/// Two literals are equal when they denote the same number (`1e2` and `100.0` do).
impl PartialEq for Literal<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
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
        Json::Number(literal) => literal.write(out),
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

/// The position of the first byte that needs an escape (in a string literal: the first byte that
/// ends a run of plain text).
pub(crate) fn first_escape(bytes: &[u8]) -> Option<usize> {
    devin_bridge_types::text::plain_run(bytes)
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

/// Small objects are searched linearly for repeated keys; past this size an index keeps an
/// object with many keys from costing quadratic time.
const INDEX_FROM: usize = 16;

#[derive(Default)]
struct ObjectBuilder<'a> {
    entries: Vec<(Cow<'a, str>, Json<'a>)>,
    /// One bit per key seen, chosen by [`key_bit`]: a key whose bit is clear is new, so most
    /// keys skip the search for a repeat.
    seen: u64,
    index: Option<BTreeMap<Cow<'a, str>, usize>>,
}

/// A key's bit in [`ObjectBuilder::seen`]: from its length and its last byte, which tell
/// apart the keys of a typical object (`type`, `properties`, `required`, `description`...).
fn key_bit(key: &str) -> u64 {
    let last = key.as_bytes().last().copied().unwrap_or(0);
    1 << ((key.len() as u32)
        .wrapping_mul(7)
        .wrapping_add(u32::from(last))
        % 64)
}

impl<'a> ObjectBuilder<'a> {
    fn insert(&mut self, key: Cow<'a, str>, value: Json<'a>) {
        let bit = key_bit(&key);
        let maybe_repeated = self.seen & bit != 0;
        self.seen |= bit;
        let existing = match &self.index {
            Some(index) => index.get(&key).copied(),
            None if maybe_repeated => self.entries.iter().position(|(name, _)| *name == key),
            None => None,
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

/// The tree as serde_json's deserializer reads it: the reference the parser is tested against.
#[cfg(test)]
pub(crate) mod reference {
    use std::borrow::Cow;
    use std::fmt;

    use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
    use serde_json::Number;

    use super::{Json, Literal, ObjectBuilder};

    fn number<'a, E: de::Error>(value: Number) -> Result<Json<'a>, E> {
        Literal::new(Cow::Owned(value.to_string()))
            .map(Json::Number)
            .ok_or_else(|| E::custom("number does not print as a number"))
    }

    /// `text` read through serde_json.
    pub(crate) fn parse(text: &str) -> Result<Json<'_>, serde_json::Error> {
        serde_json::from_str::<Reference<'_>>(text).map(|reference| reference.0)
    }

    struct Reference<'a>(Json<'a>);

    impl<'de> Deserialize<'de> for Reference<'de> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_any(JsonVisitor).map(Reference)
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

        fn visit_i64<E: de::Error>(self, value: i64) -> Result<Json<'de>, E> {
            number(value.into())
        }

        fn visit_u64<E: de::Error>(self, value: u64) -> Result<Json<'de>, E> {
            number(value.into())
        }

        fn visit_f64<E: de::Error>(self, value: f64) -> Result<Json<'de>, E> {
            // serde_json rejects out-of-range literals itself; this guards the type's contract.
            Number::from_f64(value)
                .ok_or_else(|| E::custom("number is not finite"))
                .and_then(number)
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
            while let Some(Reference(item)) = seq.next_element()? {
                items.push(item);
            }
            Ok(Json::Array(items))
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
            let mut object = ObjectBuilder::default();
            while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                let Reference(value) = map.next_value()?;
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

    /// The parser and serde_json agree on `text`: the same tree, or the same rejection.
    fn assert_agrees(text: &str) {
        match (Json::parse(text), reference::parse(text)) {
            (Ok(ours), Ok(theirs)) => assert_eq!(ours, theirs, "{text:?}"),
            (Err(ours), Err(theirs)) => assert_eq!(ours.to_string(), theirs.to_string()),
            (ours, theirs) => panic!("{text:?}: parser {ours:?}, serde_json {theirs:?}"),
        }
    }

    #[test]
    fn the_parser_agrees_with_serde_json_on_edge_cases() {
        let samples = [
            "",
            " ",
            "null",
            " true ",
            "false",
            "nul",
            "tru",
            "nulls",
            "1 2",
            "[1,]",
            "{\"a\":1,}",
            "[,1]",
            "{,}",
            "{\"a\"}",
            "{\"a\":}",
            "{1:2}",
            "{\"a\" : 1 , \"b\":[ ]}",
            "[\t\n\r 1]",
            "\u{c}1",
            "0",
            "-0",
            "-0.0",
            "01",
            "-",
            "-a",
            "1.",
            ".5",
            "1e",
            "1e+",
            "1E-2",
            "1.5e3",
            "12345678901234567890",
            "123456789012345678901",
            "-9223372036854775808",
            "-9223372036854775809",
            "1e308",
            "1e309",
            "-1e400",
            "0e999999",
            "2.2250738585072014e-308",
            "0.1",
            "1.7976931348623157e308",
            r#""""#,
            r#""a"#,
            r#""\""#,
            r#""\x""#,
            r#""\/""#,
            r#""\b\f\n\r\t\"\\""#,
            r#""\u0041\u00e9\u2028""#,
            r#""\u004""#,
            r#""\u00g1""#,
            r#""\ud83d\ude00""#,
            r#""\uD83D\uDE00 tail""#,
            r#""\ud800""#,
            r#""\udc00""#,
            r#""\ud800\u0041""#,
            r#""\ud800x""#,
            r#""\ud800\ud800""#,
            r#""\udbff\udfff""#,
            "\"raw\u{1}control\"",
            "\"raw\u{7f}del é ✓ 𝄞\"",
            "\"tab\tinside\"",
            r#"{"a":1,"b":2,"a":3}"#,
            r#"{"\u0061":1,"a":2}"#,
            r#"[{"k":"v\n"},{"k":"v"}]"#,
            "[1]x",
            "{} {}",
            "[[[[]]]]",
        ];
        for sample in samples {
            assert_agrees(sample);
        }
        for depth in [1, 126, 127, 128, 129, 1000] {
            assert_agrees(&format!("{}{}", "[".repeat(depth), "]".repeat(depth)));
            assert_agrees(&format!("{}1{}", "[".repeat(depth), "]".repeat(depth)));
            assert_agrees(&format!(
                "{}{}",
                r#"{"a":"#.repeat(depth),
                "}".repeat(depth)
            ));
        }
    }

    #[test]
    fn the_parser_agrees_with_serde_json_on_mutated_requests() {
        let requests = [
            include_str!("../../../../tests/fixtures/requests/claude-code.json").to_owned(),
            r#"{"s":"line\none\ttab \"q\" \\ \u00e9 \ud83d\ude00 end","n":[0,-1.5e3,7],"o":{"k":null}}"#
                .to_owned(),
        ];
        let alphabet = b"{}[]\":,0123456789eE.-+ \\ntrufalsud8c0\x00\x1f\t\xc3\xa9";
        let mut outcomes = [0usize; 2];
        for request in &requests {
            for text in crate::tests::mutations(request, 0x9e37_79b9_7f4a_7c15, 1500, 3, alphabet) {
                assert_agrees(&text);
                outcomes[usize::from(Json::parse(&text).is_ok())] += 1;
            }
        }
        assert!(outcomes[0] > 100 && outcomes[1] > 100, "{outcomes:?}");
    }

    #[test]
    fn strings_without_escapes_are_borrowed_and_escaped_ones_decoded() {
        let value = parse(r#"{"plain":"abc","escaped":"a\nb","key\u0021":1}"#);
        let Json::Object(entries) = value else {
            panic!("object expected")
        };
        assert!(matches!(entries[0].0, Cow::Borrowed("plain")));
        assert!(matches!(entries[0].1, Json::String(Cow::Borrowed("abc"))));
        assert!(matches!(&entries[1].1, Json::String(Cow::Owned(text)) if text == "a\nb"));
        assert!(matches!(&entries[2].0, Cow::Owned(key) if key == "key!"));
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
