//! Reading an envelope's body as JSON, with the few repairs of what models really write.
//!
//! A body that is strict JSON is read as it is and nothing here runs. Otherwise, in this
//! order, each step at most once:
//!
//! 1. a body that is one Markdown code fence (```` ```json ```` or ```` ``` ```` or `~~~` on its
//!    own line, the JSON, the closing fence) is read inside the fence: `fenced_json`;
//! 2. in a closed envelope only, a body that is not one JSON object from its first to its last
//!    visible character is cut to its first balanced `{...}` (braces inside JSON strings do
//!    not count): `stray_prose`. A `{` after that object means a second object, and a body
//!    with two candidate calls is refused as ambiguous (`ambiguous_tool_envelope`), never
//!    guessed at;
//! 3. a comma followed, after whitespace, by `}` or `]`, outside JSON strings, is dropped:
//!    `trailing_comma`.
//!
//! A step that does not make the body strict JSON is reported only if a later one does; a body
//! still not JSON after the three is refused with the error of the body as it was. An unclosed
//! envelope (the output ended before its `</tool>`) counts as closed only when its body, after
//! steps 1 and 3 and without the start of a closing tag it may end with, is one complete JSON
//! object: prose after it could be anything, the start of what was cut off included.
//!
//! # Work
//!
//! Each step is one forward pass over the body, and the strict parser runs at most four times
//! (the body, then after steps 1, 2 and 3), so a body costs a fixed multiple of its length
//! whatever it holds: no step searches from more than one starting point.

use devin_bridge_types::{Failure, Recovery};
use memchr::memchr;
use serde_json::Value;
use std::borrow::Cow;

use crate::{failure, json, scan};

/// The JSON value of a body and the repairs it needed; a failure names the body as it was.
pub(crate) fn read(body: &str, unclosed: bool) -> Result<(Value, Vec<Recovery>), Failure> {
    let original = match json::parse_strict(body) {
        Ok(value) => return Ok((value, Vec::new())),
        Err(error) => error,
    };
    let mut recoveries = Vec::new();
    let mut text = body.trim();
    if unclosed {
        text = without_partial_close(text).trim_end();
    }
    if let Some(inner) = scan::fenced_content(text) {
        text = text[inner].trim();
        recoveries.push(Recovery::FencedJson);
        if let Ok(value) = json::parse_strict(text) {
            return Ok((value, recoveries));
        }
    }
    if !unclosed {
        match one_object(text) {
            Object::Whole | Object::None => {}
            Object::Within(start, end) => {
                text = &text[start..end];
                recoveries.push(Recovery::StrayProse);
                if let Ok(value) = json::parse_strict(text) {
                    return Ok((value, recoveries));
                }
            }
            Object::Several => return Err(failure::ambiguous()),
        }
    }
    // The last parse: after the commas are dropped, or of the text as the steps above left
    // it (an unclosed body less the start of its closing tag is first parsed here).
    let fixed = without_trailing_commas(text);
    if let Ok(value) = json::parse_strict(&fixed) {
        if matches!(fixed, Cow::Owned(_)) {
            recoveries.push(Recovery::TrailingComma);
        }
        return Ok((value, recoveries));
    }
    Err(failure::malformed_json(&original))
}

/// `text` without a trailing proper prefix of `</tool>` (`<`, `</`, ..., `</tool`): the start
/// of a closing tag the output was cut in.
fn without_partial_close(text: &str) -> &str {
    const CLOSE: &str = "</tool>";
    (1..CLOSE.len())
        .rev()
        .find_map(|length| text.strip_suffix(&CLOSE[..length]))
        .unwrap_or(text)
}

/// Where the first balanced JSON object of a text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Object {
    /// The text is that object, from its first to its last character.
    Whole,
    /// The object is `start..end`, with other text around it and no `{` after it.
    Within(usize, usize),
    /// Another `{` follows the object: two candidates.
    Several,
    /// No `{`, or the first one is never balanced.
    None,
}

/// The bytes of `bytes` from `from` on that lie outside JSON strings, with their offsets. A
/// `"` opens or closes a string (the quotes are not yielded), and inside one a backslash
/// escapes the next byte. One pass, no allocation.
fn outside_strings(bytes: &[u8], from: usize) -> impl Iterator<Item = (usize, u8)> + '_ {
    let mut in_string = false;
    let mut at = from;
    std::iter::from_fn(move || {
        while let Some(&byte) = bytes.get(at) {
            let here = at;
            at += 1;
            if in_string {
                match byte {
                    b'\\' => at += 1,
                    b'"' => in_string = false,
                    _ => {}
                }
            } else if byte == b'"' {
                in_string = true;
            } else {
                return Some((here, byte));
            }
        }
        None
    })
}

/// One pass: from the first `{`, depth counted outside JSON strings until it is balanced.
fn one_object(text: &str) -> Object {
    let bytes = text.as_bytes();
    let Some(start) = memchr(b'{', bytes) else {
        return Object::None;
    };
    let mut depth = 0usize;
    for (at, byte) in outside_strings(bytes, start) {
        match byte {
            b'{' => depth += 1,
            b'}' => {
                // At least one: the scan starts at a `{`.
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    let end = at + 1;
                    return if start == 0 && end == bytes.len() {
                        Object::Whole
                    } else if memchr(b'{', &bytes[end..]).is_some() {
                        Object::Several
                    } else {
                        Object::Within(start, end)
                    };
                }
            }
            _ => {}
        }
    }
    Object::None
}

/// `text` without the commas that directly precede (whitespace aside) a `}` or `]`, outside
/// JSON strings; borrowed when there is none.
fn without_trailing_commas(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut kept = 0;
    let mut fixed = String::new();
    for (at, byte) in outside_strings(bytes, 0) {
        if byte != b',' {
            continue;
        }
        let next = bytes[at + 1..]
            .iter()
            .find(|byte| !byte.is_ascii_whitespace());
        if matches!(next, Some(b'}' | b']')) {
            fixed.push_str(&text[kept..at]);
            kept = at + 1;
        }
    }
    if kept == 0 {
        return Cow::Borrowed(text);
    }
    fixed.push_str(&text[kept..]);
    Cow::Owned(fixed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recovered(body: &str, unclosed: bool) -> (Value, Vec<Recovery>) {
        read(body, unclosed).unwrap_or_else(|failure| panic!("{body:?}: {failure}"))
    }

    #[test]
    fn strict_json_needs_no_recovery() {
        let (value, recoveries) = recovered(r#" {"name":"A"} "#, false);
        assert_eq!(value, serde_json::json!({"name": "A"}));
        assert!(recoveries.is_empty());
    }

    #[test]
    fn each_repair_is_reported_once_and_in_order() {
        let fenced = "\n```json\n{\"name\":\"A\"}\n```\n";
        assert_eq!(recovered(fenced, false).1, [Recovery::FencedJson]);
        assert_eq!(
            recovered("~~~\n{\"name\":\"A\"}\n~~~", false).1,
            [Recovery::FencedJson]
        );
        let comma = r#"{"name":"A","arguments":{"x":[1,2,],},}"#;
        let (value, recoveries) = recovered(comma, false);
        assert_eq!(
            value,
            serde_json::json!({"name":"A","arguments":{"x":[1,2]}})
        );
        assert_eq!(recoveries, [Recovery::TrailingComma]);
        let prose = r#"Calling it: {"name":"A"} as planned."#;
        assert_eq!(recovered(prose, false).1, [Recovery::StrayProse]);
        let all = "```json\nHere: {\"name\":\"A\",} done\n```";
        assert_eq!(
            recovered(all, false).1,
            [
                Recovery::FencedJson,
                Recovery::StrayProse,
                Recovery::TrailingComma
            ]
        );
    }

    #[test]
    fn commas_and_braces_inside_strings_are_content() {
        let body = r#"{"name":"A","arguments":{"s":",}","t":"\",]"},}"#;
        let (value, _) = recovered(body, false);
        assert_eq!(value["arguments"]["s"], ",}");
        assert_eq!(value["arguments"]["t"], "\",]");
        let prose = r#"see {"name":"A","arguments":{"s":"}{"}} ok"#;
        assert_eq!(recovered(prose, false).0["arguments"]["s"], "}{");
    }

    #[test]
    fn two_objects_are_ambiguous_and_unbalanced_ones_malformed() {
        let failure = read(r#"{"name":"A"} or {"name":"B"}"#, false).expect_err("two");
        assert_eq!(failure.code, "ambiguous_tool_envelope");
        assert!(failure.repairable);
        let failure = read(r#"say {"name":"A""#, false).expect_err("unbalanced");
        assert_eq!(failure.code, "malformed_tool_json");
        let failure = read("no json here", false).expect_err("none");
        assert_eq!(failure.code, "malformed_tool_json");
        // Duplicate keys stay refused whatever was repaired around them.
        let failure = read(r#"x {"name":"A","name":"B"} y"#, false).expect_err("dup");
        assert!(
            failure.message.contains("not valid JSON"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn an_unclosed_body_must_be_one_complete_object() {
        assert!(recovered("{\"name\":\"A\"}\n", true).1.is_empty());
        for cut in ["<", "</", "</to", "</tool"] {
            let body = format!("{{\"name\":\"A\"}}{cut}");
            assert!(recovered(&body, true).1.is_empty(), "{body}");
        }
        assert_eq!(
            recovered("```json\n{\"name\":\"A\",}\n```", true).1,
            [Recovery::FencedJson, Recovery::TrailingComma]
        );
        // Cut off inside the object, or prose after it: not a complete call.
        for body in [r#"{"name":"A","arguments":{"#, r#"{"name":"A"} and then"#] {
            assert_eq!(
                read(body, true).expect_err(body).code,
                "malformed_tool_json"
            );
        }
    }

    #[test]
    fn the_work_is_linear() {
        // Thousands of unbalanced braces: one pass finds no balanced object.
        let braces = format!("x{}", "{".repeat(200_000));
        assert_eq!(one_object(&braces), Object::None);
        assert_eq!(
            read(&braces, false).expect_err("unbalanced").code,
            "malformed_tool_json"
        );
        let commas = format!("{{\"a\":[{}0]}}", "1,".repeat(100_000));
        assert!(matches!(without_trailing_commas(&commas), Cow::Borrowed(_)));
    }
}
