//! Finding `<tool>...</tool>` envelopes in the agent's output.
//!
//! The rule, left to right:
//! - outside an envelope, every exact `<tool>` opens one and every exact `</tool>` is a stray
//!   closing tag (tags are case-sensitive literals; `<Tool>` or `<tool >` are plain text);
//! - inside an envelope the scanner tracks JSON strings (a `"` opens or closes one, a backslash
//!   escapes the next byte) and the first `</tool>` outside a string closes the envelope. A
//!   `</tool>` or `<tool>` inside a JSON string value is therefore just text;
//! - a `<tool>` inside an envelope and outside its strings is an envelope opening inside another
//!   one. [`envelopes`] (what `parse` reads) refuses it; [`outside_envelopes`] (what the
//!   narration check reads) ignores it, as it always has, so its verdicts do not move;
//! - if the output ends before a closing tag, the envelope is unclosed (cut off). Its body cannot
//!   be valid JSON either way (a JSON document cannot end inside a string), so it is malformed and
//!   the scan stops there.
//!
//! Tags are found with `memchr` (one vectorised search for `<` outside envelopes, for `"` and
//! `<` inside one, for `"` and `\` inside a string), so a long output without tags costs one
//! fast pass. The tags and the JSON delimiters are ASCII and UTF-8 continuation bytes never look
//! like ASCII, so every offset recorded here is a char boundary.

use crate::failure;
use devin_bridge_types::Failure;
use memchr::{memchr, memchr2};
use std::ops::Range;

const OPEN: &[u8] = b"<tool>";
const CLOSE: &[u8] = b"</tool>";

/// A tag found outside envelopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Open,
    Close,
}

/// The first `<tool>` or `</tool>` at or after `from`, with its offset.
fn next_tag(bytes: &[u8], from: usize) -> Option<(usize, Tag)> {
    let mut at = from;
    while let Some(offset) = bytes.get(at..).and_then(|rest| memchr(b'<', rest)) {
        let tag = at + offset;
        let rest = &bytes[tag..];
        if rest.starts_with(OPEN) {
            return Some((tag, Tag::Open));
        }
        if rest.starts_with(CLOSE) {
            return Some((tag, Tag::Close));
        }
        at = tag + 1;
    }
    None
}

/// How an envelope body that starts at some offset ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BodyEnd {
    /// Offset of the closing `</tool>`, if there is one outside the body's strings.
    close: Option<usize>,
    /// Offset of the first `<tool>` outside the body's strings before that, if any.
    nested: Option<usize>,
}

/// Follows a body from `from` to its closing tag. With `stop_at_nested`, returns as soon as a
/// `<tool>` shows up outside a string (the caller refuses the output there, so reading on is
/// wasted work); otherwise notes it and reads on.
fn body_end(bytes: &[u8], from: usize, stop_at_nested: bool) -> BodyEnd {
    #[cfg(test)]
    tests::BODIES_READ.with(|read| read.set(read.get() + 1));
    let mut end = BodyEnd {
        close: None,
        nested: None,
    };
    let mut at = from;
    // Outside strings: the next `"` or `<`.
    while let Some(offset) = bytes.get(at..).and_then(|rest| memchr2(b'"', b'<', rest)) {
        let found = at + offset;
        if bytes[found] == b'<' {
            let rest = &bytes[found..];
            if rest.starts_with(CLOSE) {
                end.close = Some(found);
                return end;
            }
            if end.nested.is_none() && rest.starts_with(OPEN) {
                end.nested = Some(found);
                if stop_at_nested {
                    return end;
                }
            }
            at = found + 1;
            continue;
        }
        // Inside a string: the next `"` not escaped by a backslash.
        at = found + 1;
        loop {
            let Some(offset) = bytes.get(at..).and_then(|rest| memchr2(b'"', b'\\', rest)) else {
                return end; // the output ends inside the string
            };
            let found = at + offset;
            if bytes[found] == b'\\' {
                at = found + 2; // the escaped byte, whatever it is, is skipped
            } else {
                at = found + 1;
                break;
            }
        }
    }
    end
}

/// What stopped the scan before the end of the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    /// A `<tool>` outside the strings of the body of the envelope at this 1-based position.
    Nested { envelope: usize },
    /// The envelope at this 1-based position has no closing tag.
    Unclosed { envelope: usize },
}

/// The structure of the output for `parse`, checked in the order the crate documentation gives
/// (rules 1 to 4): `None` when the output holds no tag at all, else the bodies of its envelopes
/// in order, at least one and at most `limit`.
///
/// The scan stops at the `limit + 1`-th opening tag, so an output of thousands of envelopes
/// costs as much as `limit + 1` of them, and no body is parsed before the count is known.
pub(crate) fn envelopes(text: &str, limit: usize) -> Result<Option<Vec<&str>>, Failure> {
    let bytes = text.as_bytes();
    let mut bodies: Vec<Range<usize>> = Vec::new();
    let mut stray_close = false;
    // Whether the text outside the envelopes read so far is only whitespace, and where the
    // current stretch of outside text starts.
    let mut only_whitespace = true;
    let mut outside_from = 0;
    let mut defect = None;
    let mut at = 0;
    while let Some((tag, kind)) = next_tag(bytes, at) {
        match kind {
            Tag::Close => {
                stray_close = true;
                at = tag + CLOSE.len();
            }
            Tag::Open => {
                if bodies.len() >= limit {
                    return Err(failure::excessive(limit));
                }
                only_whitespace &= is_whitespace(&text[outside_from..tag]);
                let envelope = bodies.len() + 1;
                let body_start = tag + OPEN.len();
                match body_end(bytes, body_start, true) {
                    BodyEnd {
                        nested: Some(_), ..
                    } => defect = Some(Defect::Nested { envelope }),
                    BodyEnd { close: None, .. } => defect = Some(Defect::Unclosed { envelope }),
                    BodyEnd {
                        close: Some(close),
                        nested: None,
                    } => {
                        bodies.push(body_start..close);
                        at = close + CLOSE.len();
                        outside_from = at;
                        continue;
                    }
                }
                break;
            }
        }
    }
    if bodies.is_empty() && defect.is_none() {
        // No opening tag anywhere (the scan stops only at one).
        return if stray_close {
            Err(failure::closing_without_opening())
        } else {
            Ok(None)
        };
    }
    if defect.is_none() {
        only_whitespace &= is_whitespace(&text[outside_from..]);
    }
    if !only_whitespace {
        return Err(failure::narrative_mismatch());
    }
    match defect {
        Some(Defect::Nested { envelope }) => Err(failure::nested(envelope)),
        Some(Defect::Unclosed { envelope }) => Err(failure::unclosed(envelope)),
        None => Ok(Some(bodies.into_iter().map(|body| &text[body]).collect())),
    }
}

/// The text outside closed envelopes, in order, for the narration check. An unclosed envelope is
/// not an envelope: its tag and everything after it are part of the last piece. A `<tool>`
/// inside an envelope's body is part of that body, as it always was for the guard.
pub(crate) fn outside_envelopes(text: &str) -> impl Iterator<Item = &str> + '_ {
    let bytes = text.as_bytes();
    // `None` once the last piece has been returned.
    let mut from = Some(0);
    let mut at = 0;
    std::iter::from_fn(move || {
        let start = from?;
        while let Some((tag, kind)) = next_tag(bytes, at) {
            if kind == Tag::Close {
                at = tag + CLOSE.len();
                continue;
            }
            if let Some(close) = body_end(bytes, tag + OPEN.len(), false).close {
                at = close + CLOSE.len();
                from = Some(at);
                return Some(&text[start..tag]);
            }
            break; // unclosed: the rest is text
        }
        from = None;
        Some(&text[start..])
    })
}

fn is_whitespace(piece: &str) -> bool {
    piece.trim_start().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// How many envelope bodies this thread's scans have followed.
        pub(super) static BODIES_READ: Cell<usize> = const { Cell::new(0) };
    }

    fn bodies_read() -> usize {
        BODIES_READ.with(Cell::get)
    }

    fn bodies(text: &str) -> Vec<&str> {
        match envelopes(text, usize::MAX) {
            Ok(Some(bodies)) => bodies,
            other => panic!("{text:?}: {other:?}"),
        }
    }

    fn code(text: &str, limit: usize) -> String {
        envelopes(text, limit).expect_err(text).code
    }

    #[test]
    fn plain_text_has_no_envelope() {
        assert_eq!(envelopes("hello <b>world</b> a < b <", 1), Ok(None));
        assert_eq!(envelopes("", 1), Ok(None));
        let pieces: Vec<_> = outside_envelopes("hello <b>").collect();
        assert_eq!(pieces, ["hello <b>"]);
    }

    #[test]
    fn finds_envelopes_and_their_bodies_in_order() {
        let text = "\n <tool>{\"name\":\"Read\"}</tool>\n<tool>{}</tool> ";
        assert_eq!(bodies(text), ["{\"name\":\"Read\"}", "{}"]);
        let pieces: Vec<_> = outside_envelopes(text).collect();
        assert_eq!(pieces, ["\n ", "\n", " "]);
    }

    #[test]
    fn closing_tag_inside_a_json_string_does_not_close() {
        let text =
            r#"<tool>{"name":"Bash","arguments":{"command":"echo '</tool>' \"<tool>\""}}</tool>"#;
        assert_eq!(
            bodies(text),
            [r#"{"name":"Bash","arguments":{"command":"echo '</tool>' \"<tool>\""}}"#]
        );
    }

    #[test]
    fn escaped_backslash_before_quote_ends_the_string() {
        let text = r#"<tool>{"a":"x\\"}</tool>"#;
        assert_eq!(bodies(text), [r#"{"a":"x\\"}"#]);
    }

    #[test]
    fn unterminated_string_leaves_the_envelope_unclosed() {
        let failure = envelopes(r#"<tool>{"name":"Bash}</tool>"#, 8).expect_err("unclosed");
        assert_eq!(failure.code, "malformed_tool_json");
        assert!(
            failure.message.contains("no closing"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn the_count_stops_at_the_limit() {
        assert_eq!(
            code("<tool>{}</tool><tool>{}</tool>", 1),
            "excessive_tool_requests"
        );
        assert_eq!(bodies("<tool>{}</tool><tool>{}</tool>").len(), 2);
        // The second opening tag exceeds a limit of one whatever follows it.
        assert_eq!(code("<tool>{}</tool><tool>{", 1), "excessive_tool_requests");
        assert_eq!(
            code("<tool>{}</tool>x<tool>{\"a\":<tool>", 1),
            "excessive_tool_requests"
        );
        // Within the limit, the cut-off second envelope is what is wrong.
        let failure = envelopes("<tool>{}</tool><tool>{", 2).expect_err("cut off");
        assert_eq!(failure.code, "malformed_tool_json");
        assert!(
            failure.message.contains("envelope 2"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn no_body_past_the_limit_is_read() {
        let many = "<tool>{\"a\":\"</tool>\"}</tool>".repeat(10_000);
        let before = bodies_read();
        assert_eq!(code(&many, 3), "excessive_tool_requests");
        assert_eq!(
            bodies_read() - before,
            3,
            "the fourth opening tag stops the scan"
        );
        let before = bodies_read();
        assert_eq!(bodies(&many).len(), 10_000);
        assert_eq!(bodies_read() - before, 10_000);
    }

    #[test]
    fn an_envelope_inside_another_is_refused_for_parse_but_read_through_for_the_guard() {
        let text = r#"<tool>{"name":"A" <tool>{"name":"B"}</tool>}</tool>"#;
        let failure = envelopes(text, 8).expect_err("nested");
        assert_eq!(failure.code, "malformed_tool_json");
        assert!(
            failure.message.contains("must not nest"),
            "{}",
            failure.message
        );
        let pieces: Vec<_> = outside_envelopes(text).collect();
        assert_eq!(pieces, ["", "}</tool>"]);
        // Without a closing tag the nesting is still what is reported: it comes first.
        let failure = envelopes(r#"<tool>{"a": <tool>"#, 8).expect_err("nested");
        assert!(
            failure.message.contains("must not nest"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn stray_closing_tags() {
        assert_eq!(code("done </tool>", 1), "malformed_tool_json");
        assert_eq!(
            code("<tool>{}</tool></tool>", 1),
            "action_narrative_mismatch"
        );
        assert_eq!(
            code("<tool>{}</tool></tool><tool>{}</tool>", 2),
            "action_narrative_mismatch"
        );
        let pieces: Vec<_> = outside_envelopes("a</tool>b").collect();
        assert_eq!(pieces, ["a</tool>b"]);
    }

    #[test]
    fn only_text_before_a_defect_counts_as_prose() {
        assert_eq!(code("x <tool>{", 8), "action_narrative_mismatch");
        assert_eq!(
            code("<tool>{}</tool> x <tool>{", 8),
            "action_narrative_mismatch"
        );
        assert_eq!(code("<tool>{\"a\" <tool> x", 8), "malformed_tool_json");
    }

    #[test]
    fn tags_are_exact_lowercase_literals() {
        assert_eq!(envelopes("<Tool>{}</Tool> <tool >{}</tool >", 1), Ok(None));
    }

    #[test]
    fn unclosed_envelopes_are_text_for_the_guard() {
        let text = "a<tool>{}</tool>b<tool>{}</tool>c";
        let pieces: Vec<_> = outside_envelopes(text).collect();
        assert_eq!(pieces, ["a", "b", "c"]);

        let unclosed = "x <tool>{\"a\":\"let me run\"";
        let pieces: Vec<_> = outside_envelopes(unclosed).collect();
        assert_eq!(pieces, [unclosed]);
        let pieces: Vec<_> = outside_envelopes("<tool>{}</tool>y<tool>{").collect();
        assert_eq!(pieces, ["", "y<tool>{"]);
    }

    #[test]
    fn multibyte_text_around_tags_is_sliced_on_boundaries() {
        let text = "é<tool>{\"k\":\"ü</tool>\\\"é\"}</tool>ß";
        let pieces: Vec<_> = outside_envelopes(text).collect();
        assert_eq!(pieces, ["é", "ß"]);
        let failure = envelopes(text, 1).expect_err("prose");
        assert_eq!(failure.code, "action_narrative_mismatch");
        assert_eq!(
            bodies(&text[2..text.len() - 2]),
            ["{\"k\":\"ü</tool>\\\"é\"}"]
        );
    }

    #[test]
    fn trailing_backslash_does_not_overrun() {
        assert_eq!(code("<tool>\"\\", 1), "malformed_tool_json");
        assert_eq!(code("<tool>\"", 1), "malformed_tool_json");
        assert_eq!(code("<tool>", 1), "malformed_tool_json");
        let pieces: Vec<_> = outside_envelopes("<tool>\"\\").collect();
        assert_eq!(pieces, ["<tool>\"\\"]);
    }
}
