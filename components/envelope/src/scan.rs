//! Finding `<tool>...</tool>` envelopes in the agent's output.
//!
//! The rule, left to right:
//! - outside an envelope, every exact `<tool>` opens one and every exact `</tool>` is a stray
//!   closing tag (tags are case-sensitive literals; `<Tool>` or `<tool >` are plain text);
//! - inside an envelope the scanner tracks JSON strings (a `"` opens or closes one, a backslash
//!   escapes the next byte) and the first `</tool>` outside a string closes the envelope. A
//!   `</tool>` or `<tool>` inside a JSON string value is therefore just text;
//! - if the output ends before a closing tag, the envelope is unclosed. Its body cannot be valid
//!   JSON either way (a JSON document cannot end inside a string), so an unclosed envelope is a
//!   malformed one and the scan stops there.
//!
//! The scan is one pass over the bytes. The tags and the JSON delimiters are ASCII and UTF-8
//! continuation bytes never look like ASCII, so every offset recorded here is a char boundary.

use crate::failure;
use devin_bridge_types::Failure;
use std::ops::Range;

const OPEN: &[u8] = b"<tool>";
const CLOSE: &[u8] = b"</tool>";

/// What the scanner found, as byte offsets into the scanned text.
#[derive(Debug, Default)]
pub(crate) struct Scan<'a> {
    text: &'a str,
    /// Closed envelopes: the whole `<tool>...</tool>` range and the body between the tags.
    envelopes: Vec<Envelope>,
    /// Offset of an opening tag that has no closing tag.
    unclosed: Option<usize>,
    /// Number of `</tool>` tags found outside envelopes.
    stray_closes: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Envelope {
    whole: Range<usize>,
    body: Range<usize>,
}

/// Scans `text` once; never fails.
pub(crate) fn scan(text: &str) -> Scan<'_> {
    let bytes = text.as_bytes();
    let mut found = Scan {
        text,
        ..Scan::default()
    };
    let mut at = 0;
    while let Some(offset) = bytes[at..].iter().position(|&b| b == b'<') {
        let tag = at + offset;
        let rest = &bytes[tag..];
        if rest.starts_with(OPEN) {
            let body_start = tag + OPEN.len();
            match closing_tag(bytes, body_start) {
                Some(close) => {
                    let end = close + CLOSE.len();
                    found.envelopes.push(Envelope {
                        whole: tag..end,
                        body: body_start..close,
                    });
                    at = end;
                }
                None => {
                    found.unclosed = Some(tag);
                    break;
                }
            }
        } else if rest.starts_with(CLOSE) {
            found.stray_closes += 1;
            at = tag + CLOSE.len();
        } else {
            at = tag + 1;
        }
    }
    found
}

/// Offset of the first `</tool>` at or after `from` that is not inside a JSON string.
fn closing_tag(bytes: &[u8], from: usize) -> Option<usize> {
    let mut in_string = false;
    let mut at = from;
    while at < bytes.len() {
        match (in_string, bytes[at]) {
            (true, b'\\') => at += 1, // skip the escaped byte
            (true, b'"') => in_string = false,
            (false, b'"') => in_string = true,
            (false, b'<') if bytes[at..].starts_with(CLOSE) => return Some(at),
            _ => {}
        }
        at += 1;
    }
    None
}

impl<'a> Scan<'a> {
    /// Rules 1 to 4 (structure only): `None` when the output holds no tag at all, else the body of
    /// its single envelope, or the failure that the structure already implies.
    pub(crate) fn single_envelope(&self) -> Result<Option<&'a str>, Failure> {
        let attempts = self.envelopes.len() + usize::from(self.unclosed.is_some());
        if attempts == 0 {
            return if self.stray_closes == 0 {
                Ok(None)
            } else {
                Err(failure::closing_without_opening())
            };
        }
        if attempts > 1 {
            return Err(failure::excessive(attempts));
        }
        // Exactly one attempt: either one closed envelope or one unclosed opening tag, whose
        // "outside" is only what precedes it.
        let (before, after, body) = match (self.envelopes.first(), self.unclosed) {
            (Some(envelope), _) => (
                &self.text[..envelope.whole.start],
                &self.text[envelope.whole.end..],
                Some(&self.text[envelope.body.clone()]),
            ),
            (None, Some(tag)) => (&self.text[..tag], "", None),
            (None, None) => return Ok(None), // unreachable: attempts == 1
        };
        if has_visible_text(before) || has_visible_text(after) {
            return Err(failure::narrative_mismatch());
        }
        body.map(Some).ok_or_else(failure::unclosed)
    }

    /// The text outside closed envelopes, in order. An unclosed envelope is not an envelope: its
    /// tag and everything after it are part of the last piece.
    pub(crate) fn outside_envelopes(&self) -> impl Iterator<Item = &'a str> + '_ {
        let text = self.text;
        let starts = std::iter::once(0).chain(self.envelopes.iter().map(|e| e.whole.end));
        let ends = self
            .envelopes
            .iter()
            .map(|e| e.whole.start)
            .chain(std::iter::once(text.len()));
        starts.zip(ends).map(move |(start, end)| &text[start..end])
    }
}

fn has_visible_text(piece: &str) -> bool {
    !piece.trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies(text: &str) -> Vec<&str> {
        let found = scan(text);
        found
            .envelopes
            .iter()
            .map(|e| &text[e.body.clone()])
            .collect()
    }

    #[test]
    fn plain_text_has_no_envelope() {
        let found = scan("hello <b>world</b> a < b");
        assert!(found.envelopes.is_empty());
        assert_eq!(found.unclosed, None);
        assert_eq!(found.stray_closes, 0);
        assert_eq!(found.single_envelope(), Ok(None));
    }

    #[test]
    fn finds_one_envelope_and_its_body() {
        let text = "\n <tool>{\"name\":\"Read\"}</tool>\n";
        assert_eq!(bodies(text), ["{\"name\":\"Read\"}"]);
        assert_eq!(
            scan(text).single_envelope(),
            Ok(Some("{\"name\":\"Read\"}"))
        );
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
        let found = scan(r#"<tool>{"name":"Bash}</tool>"#);
        assert!(found.envelopes.is_empty());
        assert_eq!(found.unclosed, Some(0));
        let failure = found.single_envelope().expect_err("unclosed");
        assert_eq!(failure.code, "malformed_tool_json");
    }

    #[test]
    fn counts_every_envelope_and_an_unclosed_one() {
        let two = scan("<tool>{}</tool><tool>{}</tool>");
        assert_eq!(two.envelopes.len(), 2);
        let failure = two.single_envelope().expect_err("two");
        assert_eq!(failure.code, "excessive_tool_requests");

        let one_and_unclosed = scan("<tool>{}</tool><tool>{");
        assert_eq!(one_and_unclosed.envelopes.len(), 1);
        assert_eq!(one_and_unclosed.unclosed, Some(15));
        assert!(one_and_unclosed.single_envelope().is_err());
    }

    #[test]
    fn stray_closing_tags() {
        let only = scan("done </tool>");
        assert_eq!(only.stray_closes, 1);
        let failure = only.single_envelope().expect_err("stray");
        assert_eq!(failure.code, "malformed_tool_json");

        let after = scan("<tool>{}</tool></tool>");
        let failure = after.single_envelope().expect_err("stray after");
        assert_eq!(failure.code, "action_narrative_mismatch");
    }

    #[test]
    fn tags_are_exact_lowercase_literals() {
        let found = scan("<Tool>{}</Tool> <tool >{}</tool >");
        assert!(found.envelopes.is_empty());
        assert_eq!(found.unclosed, None);
        assert_eq!(found.stray_closes, 0);
    }

    #[test]
    fn outside_pieces_surround_envelopes() {
        let text = "a<tool>{}</tool>b<tool>{}</tool>c";
        let found = scan(text);
        let pieces: Vec<_> = found.outside_envelopes().collect();
        assert_eq!(pieces, ["a", "b", "c"]);

        let unclosed = scan("x <tool>{\"a\":\"let me run\"");
        let pieces: Vec<_> = unclosed.outside_envelopes().collect();
        assert_eq!(pieces, ["x <tool>{\"a\":\"let me run\""]);
    }

    #[test]
    fn multibyte_text_around_tags_is_sliced_on_boundaries() {
        let text = "é<tool>{\"k\":\"ü</tool>\\\"é\"}</tool>ß";
        let found = scan(text);
        let pieces: Vec<_> = found.outside_envelopes().collect();
        assert_eq!(pieces, ["é", "ß"]);
        assert_eq!(bodies(text), ["{\"k\":\"ü</tool>\\\"é\"}"]);
    }

    #[test]
    fn trailing_backslash_does_not_overrun() {
        let found = scan("<tool>\"\\");
        assert_eq!(found.unclosed, Some(0));
    }
}
