//! A tool call's input: JSON object text, checked once and compacted.
//!
//! The input is embedded as written rather than parsed into a map and serialised again:
//! that keeps the producer's key order and number spelling whatever `serde_json` features
//! the rest of a build enables, so the native and the wasm build render identical bytes.

use std::borrow::Cow;

use serde_json::value::RawValue;

use crate::escape;

/// The compact text of a tool input, or `{}` when the input is not a JSON object.
pub(crate) struct ToolInput<'a> {
    /// `None` stands for `{}`.
    object: Option<Cow<'a, str>>,
}

impl<'a> ToolInput<'a> {
    /// Accepts exactly one JSON object (surrounding whitespace allowed). Anything else
    /// (invalid JSON, an array, a string, trailing garbage) becomes `{}`: Anthropic clients
    /// require an object, and the envelope parser never produces anything else.
    pub(crate) fn parse(text: &'a str) -> Self {
        let object = serde_json::from_str::<&RawValue>(text)
            .ok()
            .map(RawValue::get)
            .filter(|raw| raw.starts_with('{'))
            .map(compact);
        Self { object }
    }

    /// The JSON text of the input: `partial_json` of the delta, `input` of a JSON body.
    pub(crate) fn json_text(&self) -> &str {
        self.object.as_deref().unwrap_or("{}")
    }
}

/// Removes the insignificant whitespace of valid JSON text in one pass, borrowing the text
/// when it has none (the usual case: the envelope parser's inputs are compact already).
///
/// Only called on text `serde_json` has accepted, so knowing where strings are is enough:
/// JSON allows whitespace outside strings only, and only these four bytes count as
/// whitespace. Strings, where nearly all of a large input's bytes are, are skipped a word at
/// a time. Every byte this stops at is ASCII, so the runs copied between removed bytes start
/// and end on character boundaries.
fn compact(json: &str) -> Cow<'_, str> {
    let bytes = json.as_bytes();
    let mut out: Option<String> = None;
    let mut run_start = 0;
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        match byte {
            b'"' => index = string_end(bytes, index + 1),
            b' ' | b'\t' | b'\n' | b'\r' => {
                let out = out.get_or_insert_with(|| String::with_capacity(json.len()));
                out.push_str(json.get(run_start..index).unwrap_or_default());
                run_start = index + 1;
            }
            _ => {}
        }
        index += 1;
    }
    match out {
        None => Cow::Borrowed(json),
        Some(mut out) => {
            out.push_str(json.get(run_start..).unwrap_or_default());
            Cow::Owned(out)
        }
    }
}

/// The index of the quote that closes the string whose contents start at `from` (the end of
/// the text if it never closes, which valid JSON rules out).
fn string_end(bytes: &[u8], mut from: usize) -> usize {
    loop {
        match escape::next_quote_or_backslash(bytes, from) {
            // An escape: the character after the backslash is ASCII and never closes the
            // string, so the scan resumes after it.
            Some(at) if bytes.get(at) == Some(&b'\\') => from = at + 2,
            Some(at) => return at,
            None => return bytes.len(),
        }
    }
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
    fn compact_input_is_borrowed_not_copied() {
        let text = r#"{"a":{"b":null},"s":"x y"}"#;
        let input = ToolInput::parse(text);
        assert!(matches!(input.object, Some(Cow::Borrowed(_))));
        assert_eq!(input.json_text(), text);
        let spaced = ToolInput::parse(" {\"a\": 1} ");
        assert!(matches!(spaced.object, Some(Cow::Owned(_))));
        assert_eq!(spaced.json_text(), r#"{"a":1}"#);
    }

    #[test]
    fn escaped_quotes_and_backslashes_do_not_end_strings() {
        for (input, compacted) in [
            (
                r#"{ "a" : [ 1 , { "b" : "\\" } ] }"#,
                r#"{"a":[1,{"b":"\\"}]}"#,
            ),
            (
                "{\"k\\\"ey\" :\n\"v\\\\\" , \"é\" : \"中 \\u00e9 \"}",
                r#"{"k\"ey":"v\\","é":"中 \u00e9 "}"#,
            ),
            ("\r\n\t{}\r\n", "{}"),
        ] {
            let text = text_of(input);
            assert_eq!(text, compacted, "input {input:?}");
            let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(
                parsed,
                serde_json::from_str::<serde_json::Value>(input).unwrap()
            );
        }
    }

    #[test]
    fn pretty_printed_values_compact_to_serde_compact_output() {
        // Strings of every length up to a few words, full of what could end a string early
        // (escaped quotes, backslashes, whitespace), between whitespace that must go.
        let pieces = [
            "a", " ", "\"", "\\", "\n", "\t", "é", "中", "😀", "\u{1}", "/", "\\\"",
        ];
        for round in 0..300 {
            let text: String = (0..round % 41)
                .map(|i| pieces[(i * 7 + round) % pieces.len()])
                .collect();
            let value = serde_json::json!({
                "text": text,
                "list": [text, 1, {"inner": text, "n": null}],
                "e": {},
                "z": [],
            });
            let pretty = serde_json::to_string_pretty(&value).unwrap();
            assert_eq!(
                text_of(&pretty),
                serde_json::to_string(&value).unwrap(),
                "{pretty}"
            );
        }
    }

    #[test]
    fn non_ascii_and_escapes_survive() {
        assert_eq!(
            text_of("{ \"k\" : \"é \\u00e9 \\n ✓\" }"),
            r#"{"k":"é \u00e9 \n ✓"}"#
        );
    }
}
