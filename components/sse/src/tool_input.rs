//! A tool call's input: JSON object text, checked once and compacted.
//!
//! The input is embedded as written rather than parsed into a map and serialised again:
//! that keeps the producer's key order and number spelling whatever `serde_json` features
//! the rest of a build enables, so the native and the wasm build render identical bytes.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;

/// The compact text of a tool input, or `{}` when the input is not a JSON object.
pub(crate) struct ToolInput {
    /// `None` stands for `{}`.
    object: Option<Box<RawValue>>,
}

impl ToolInput {
    /// Accepts exactly one JSON object (surrounding whitespace allowed). Anything else
    /// (invalid JSON, an array, a string, trailing garbage) becomes `{}`: Anthropic clients
    /// require an object, and the envelope parser never produces anything else.
    pub(crate) fn parse(text: &str) -> Self {
        let object = serde_json::from_str::<&RawValue>(text)
            .ok()
            .filter(|raw| raw.get().starts_with('{'))
            .and_then(|raw| RawValue::from_string(compact(raw.get())).ok());
        Self { object }
    }

    /// The JSON text of the input, as sent in `input_json_delta.partial_json`.
    pub(crate) fn json_text(&self) -> &str {
        self.object.as_deref().map_or("{}", RawValue::get)
    }
}

impl Serialize for ToolInput {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.object {
            Some(raw) => raw.serialize(serializer),
            None => serializer.serialize_map(Some(0))?.end(),
        }
    }
}

/// Removes the insignificant whitespace of valid JSON text in one pass.
///
/// Only called on text `serde_json` has accepted, so tracking "inside a string" and "after a
/// backslash" is enough: JSON allows whitespace outside strings only, and only these four
/// characters count as whitespace.
fn compact(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut in_string = false;
    let mut escaped = false;
    for ch in json.chars() {
        if in_string {
            out.push(ch);
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == '"' {
                in_string = false;
            }
        } else if !matches!(ch, ' ' | '\t' | '\n' | '\r') {
            in_string = ch == '"';
            out.push(ch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(input: &str) -> String {
        ToolInput::parse(input).json_text().to_owned()
    }

    #[test]
    fn object_is_compacted_keeping_key_order() {
        assert_eq!(
            text_of("  {\n \"z\" : 1,\t\"a\" : [ 1 , 2 ] }\n"),
            r#"{"z":1,"a":[1,2]}"#
        );
    }

    #[test]
    fn whitespace_inside_strings_is_kept() {
        assert_eq!(
            text_of(r#"{ "cmd" : "npm  test\t-- x", "q" : "a \" b \\" }"#),
            r#"{"cmd":"npm  test\t-- x","q":"a \" b \\"}"#
        );
    }

    #[test]
    fn numbers_keep_their_spelling() {
        assert_eq!(
            text_of(r#"{"big": 12345678901234567890123, "f": 1.50}"#),
            r#"{"big":12345678901234567890123,"f":1.50}"#
        );
    }

    #[test]
    fn non_objects_become_empty_object() {
        for input in [
            "",
            "   ",
            "[1,2]",
            "\"{}\"",
            "42",
            "null",
            "{",
            "{\"a\":1} trailing",
            "{\"a\":1}{}",
            "not json",
        ] {
            assert_eq!(text_of(input), "{}", "input {input:?}");
        }
    }

    #[test]
    fn serialises_as_object() {
        let input = ToolInput::parse(r#"{"a": {"b": null}}"#);
        let json = serde_json::to_string(&input).unwrap();
        assert_eq!(json, r#"{"a":{"b":null}}"#);
        let empty = ToolInput::parse("oops");
        assert_eq!(serde_json::to_string(&empty).unwrap(), "{}");
    }

    #[test]
    fn non_ascii_and_escapes_survive() {
        assert_eq!(
            text_of("{ \"k\" : \"é \\u00e9 \\n ✓\" }"),
            r#"{"k":"é \u00e9 \n ✓"}"#
        );
    }
}
