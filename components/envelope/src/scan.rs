//! Finding `<tool>...</tool>` envelopes in the agent's output.
//!
//! The rule, left to right:
//! - outside an envelope, every exact `<tool>` opens one and every exact `</tool>` is a stray
//!   closing tag (tags are case-sensitive literals; `<Tool>` or `<tool >` are plain text),
//!   except inside a Markdown code fence (see [`Fences`]): there a tag is quoted text;
//! - inside an envelope the scanner tracks JSON strings (a `"` opens or closes one, a backslash
//!   escapes the next byte) and the first `</tool>` outside a string closes the envelope. A
//!   `</tool>` or `<tool>` inside a JSON string value is therefore just text;
//! - a `<tool>` inside an envelope and outside its strings is an envelope opening inside another
//!   one: [`envelopes`] refuses it;
//! - if the output ends before a closing tag, the envelope is unclosed: its body is the rest of
//!   the output, and the caller decides whether it is one complete JSON object. Nothing can
//!   follow it, so an unclosed envelope is always the last.
//!
//! Tags are found with `memchr` (one vectorised search for `<` outside envelopes, for `"` and
//! `<` inside one, for `"` and `\` inside a string), so a long output without tags costs one
//! fast pass; fences are looked for only once a tag has been found, each line at most once. The
//! tags and the JSON delimiters are ASCII and UTF-8 continuation bytes never look like ASCII,
//! so every offset recorded here is a char boundary.

use crate::failure;
use devin_bridge_types::Failure;
use memchr::{memchr, memchr2};
use std::ops::Range;

pub(crate) const OPEN: &[u8] = b"<tool>";
pub(crate) const CLOSE: &[u8] = b"</tool>";

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

/// The Markdown code fences of the text outside envelopes, found line by line as the scan moves
/// forward: a tag inside a fence is quoted text, never an envelope.
///
/// A fence opens on a line that starts, after at most three spaces, with three or more
/// backticks (whose info string holds no backtick) or tildes, and closes on a line of at least
/// as many of the same character and nothing else but whitespace; one never closed runs to the
/// end of the output (as CommonMark has it). Lines inside an envelope's body are not looked
/// at: a fence inside an envelope is the envelope's (see `recover.rs`).
struct Fences<'a> {
    bytes: &'a [u8],
    /// The start of the next line not yet examined (meaningless while `skip_from` is set).
    next_line: usize,
    /// After an envelope: the offset from which the next line start is still to be found.
    skip_from: Option<usize>,
    /// The open fence: its character and length.
    open: Option<(u8, usize)>,
}

impl<'a> Fences<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            next_line: 0,
            skip_from: None,
            open: None,
        }
    }

    /// Whether offset `at` is inside a fence (or on its opening line). Offsets are asked in
    /// increasing order, never inside an envelope, so each line is examined once.
    fn covers(&mut self, at: usize) -> bool {
        if let Some(from) = self.skip_from {
            match memchr(b'\n', &self.bytes[from..at]) {
                Some(offset) => {
                    self.next_line = from + offset + 1;
                    self.skip_from = None;
                }
                // Still on the line the envelope ended on: no new line to examine.
                None => {
                    self.skip_from = Some(at);
                    return self.open.is_some();
                }
            }
        }
        while self.next_line <= at {
            let start = self.next_line;
            let end = memchr(b'\n', &self.bytes[start..]).map_or(self.bytes.len(), |o| start + o);
            self.examine(&self.bytes[start..end]);
            self.next_line = end + 1;
        }
        self.open.is_some()
    }

    /// The lines up to `end` (an envelope's end) belong to the envelope, not to the prose.
    fn skip_envelope(&mut self, end: usize) {
        self.skip_from = Some(end);
    }

    fn examine(&mut self, line: &[u8]) {
        self.open = fence_after(self.open, line);
    }
}

/// The open fence (its character and length) after `line` (without its line break), given the
/// one open before it: the one rule of [`Fences`], shared with the streaming parser.
pub(crate) fn fence_after(open: Option<(u8, usize)>, line: &[u8]) -> Option<(u8, usize)> {
    let Some((marker, run, rest)) = fence_marks(line) else {
        return open;
    };
    match open {
        Some((open_marker, length)) => {
            if marker == open_marker && run >= length && rest.iter().all(u8::is_ascii_whitespace) {
                None
            } else {
                open
            }
        }
        None => {
            if marker == b'~' || !rest.contains(&b'`') {
                Some((marker, run))
            } else {
                None
            }
        }
    }
}

/// A line that may open or close a fence: after at most three spaces, a run of three or more
/// backticks or tildes. Its marker, the run's length and the rest of the line.
pub(crate) fn fence_marks(line: &[u8]) -> Option<(u8, usize, &[u8])> {
    let indent = line.iter().take(4).take_while(|&&b| b == b' ').count();
    if indent > 3 {
        return None;
    }
    let line = &line[indent..];
    let &marker = line.first().filter(|&&b| b == b'`' || b == b'~')?;
    let run = line.iter().take_while(|&&b| b == marker).count();
    if run < 3 {
        return None;
    }
    Some((marker, run, &line[run..]))
}

/// How an envelope body that starts at some offset ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BodyEnd {
    /// Offset of the closing `</tool>`, if there is one outside the body's strings.
    close: Option<usize>,
    /// Whether a `<tool>` shows up outside the body's strings before that.
    nested: bool,
}

/// Follows a body from `from` to its closing tag; stops at a `<tool>` outside a string (the
/// caller refuses the output there, so reading on is wasted work).
fn body_end(bytes: &[u8], from: usize) -> BodyEnd {
    #[cfg(test)]
    tests::BODIES_READ.with(|read| read.set(read.get() + 1));
    let mut at = from;
    // Outside strings: the next `"` or `<`.
    while let Some(offset) = bytes.get(at..).and_then(|rest| memchr2(b'"', b'<', rest)) {
        let found = at + offset;
        if bytes[found] == b'<' {
            let rest = &bytes[found..];
            if rest.starts_with(CLOSE) {
                return BodyEnd {
                    close: Some(found),
                    nested: false,
                };
            }
            if rest.starts_with(OPEN) {
                return BodyEnd {
                    close: None,
                    nested: true,
                };
            }
            at = found + 1;
            continue;
        }
        // Inside a string: the next `"` not escaped by a backslash.
        at = found + 1;
        loop {
            let Some(offset) = bytes.get(at..).and_then(|rest| memchr2(b'"', b'\\', rest)) else {
                // The output ends inside the string.
                return BodyEnd {
                    close: None,
                    nested: false,
                };
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
    BodyEnd {
        close: None,
        nested: false,
    }
}

/// One piece of an output that holds envelopes, in output order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    /// Text outside the envelopes, verbatim (fenced envelopes included).
    Text(&'a str),
    /// An envelope's body.
    Envelope(Body<'a>),
}

/// The body of an envelope, between its tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Body<'a> {
    pub(crate) text: &'a str,
    /// The output ended before its closing tag: the body is the rest of the output.
    pub(crate) unclosed: bool,
}

/// The structure of the output for `parse`, checked in the order the crate documentation gives
/// (rules 1 to 4): `None` when the output holds no tag outside code fences, else its pieces in
/// order, with at least one and at most `limit` envelopes.
///
/// The scan stops at the `limit + 1`-th opening tag, so an output of thousands of envelopes
/// costs as much as `limit + 1` of them, and no body is parsed before the count is known.
pub(crate) fn envelopes(text: &str, limit: usize) -> Result<Option<Vec<Piece<'_>>>, Failure> {
    let bytes = text.as_bytes();
    let mut fences = Fences::new(bytes);
    let mut pieces = Vec::new();
    let mut count = 0;
    let mut stray_close = false;
    let mut nested = None;
    // Where the current stretch of outside text starts.
    let mut outside_from = 0;
    let mut at = 0;
    while let Some((tag, kind)) = next_tag(bytes, at) {
        if fences.covers(tag) {
            at = tag + 1;
            continue;
        }
        if kind == Tag::Close {
            stray_close = true;
            at = tag + CLOSE.len();
            continue;
        }
        if count >= limit {
            return Err(failure::excessive(limit));
        }
        count += 1;
        let body_start = tag + OPEN.len();
        let end = body_end(bytes, body_start);
        if end.nested {
            nested = Some(count);
            break;
        }
        push_text(&mut pieces, &text[outside_from..tag]);
        let Some(close) = end.close else {
            pieces.push(Piece::Envelope(Body {
                text: &text[body_start..],
                unclosed: true,
            }));
            outside_from = text.len();
            break;
        };
        pieces.push(Piece::Envelope(Body {
            text: &text[body_start..close],
            unclosed: false,
        }));
        at = close + CLOSE.len();
        outside_from = at;
        fences.skip_envelope(at);
    }
    if stray_close {
        return Err(failure::closing_without_opening());
    }
    if let Some(envelope) = nested {
        return Err(failure::nested(envelope));
    }
    if count == 0 {
        return Ok(None);
    }
    push_text(&mut pieces, &text[outside_from..]);
    Ok(Some(pieces))
}

fn push_text<'a>(pieces: &mut Vec<Piece<'a>>, text: &'a str) {
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
}

/// Whether the output requests a tool: a `<tool>` tag outside code fences. The narration
/// check judges only outputs that do not.
pub(crate) fn requests_a_tool(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut fences = Fences::new(bytes);
    let mut at = 0;
    while let Some((tag, kind)) = next_tag(bytes, at) {
        if kind == Tag::Open && !fences.covers(tag) {
            return true;
        }
        at = tag + 1;
    }
    false
}

/// The byte range of `text` inside its outermost code fence, when `text` (trimmed) is one
/// fenced block and nothing else: the opening line (its info string, `json` or any, holding
/// no `{`) and the closing fence are left out.
pub(crate) fn fenced_content(text: &str) -> Option<Range<usize>> {
    let trimmed_start = text.len() - text.trim_start().len();
    let trimmed = text.trim();
    let marker = *trimmed.as_bytes().first()?;
    if marker != b'`' && marker != b'~' {
        return None;
    }
    let run = trimmed.bytes().take_while(|&b| b == marker).count();
    if run < 3 {
        return None;
    }
    let newline = trimmed.find('\n')?;
    if trimmed[run..newline].contains(['{', '`']) {
        return None;
    }
    let closing = trimmed.bytes().rev().take_while(|&b| b == marker).count();
    if closing < run || trimmed.len() - closing <= newline {
        return None;
    }
    let start = trimmed_start + newline + 1;
    let end = trimmed_start + trimmed.len() - closing;
    Some(start..end)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// How many envelope bodies this thread's scans have followed.
        pub(crate) static BODIES_READ: Cell<usize> = const { Cell::new(0) };
    }

    pub(crate) fn bodies_read() -> usize {
        BODIES_READ.with(Cell::get)
    }

    fn pieces(text: &str) -> Vec<Piece<'_>> {
        match envelopes(text, usize::MAX) {
            Ok(Some(pieces)) => pieces,
            other => panic!("{text:?}: {other:?}"),
        }
    }

    fn bodies(text: &str) -> Vec<&str> {
        pieces(text)
            .into_iter()
            .filter_map(|piece| match piece {
                Piece::Envelope(body) => Some(body.text),
                Piece::Text(_) => None,
            })
            .collect()
    }

    fn code(text: &str, limit: usize) -> String {
        envelopes(text, limit).expect_err(text).code
    }

    fn closed(text: &str) -> Piece<'_> {
        Piece::Envelope(Body {
            text,
            unclosed: false,
        })
    }

    #[test]
    fn plain_text_has_no_envelope() {
        assert_eq!(envelopes("hello <b>world</b> a < b <", 1), Ok(None));
        assert_eq!(envelopes("", 1), Ok(None));
        assert!(!requests_a_tool("hello <b>"));
    }

    #[test]
    fn finds_envelopes_and_the_text_around_them_in_order() {
        let text = "\n <tool>{\"name\":\"Read\"}</tool>\n<tool>{}</tool> ";
        assert_eq!(
            pieces(text),
            [
                Piece::Text("\n "),
                closed("{\"name\":\"Read\"}"),
                Piece::Text("\n"),
                closed("{}"),
                Piece::Text(" "),
            ]
        );
        assert!(requests_a_tool(text));
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
    fn an_unclosed_envelope_is_the_rest_of_the_output() {
        assert_eq!(
            pieces("a <tool>{\"name\":\"Bash}</tool>"),
            [
                Piece::Text("a "),
                Piece::Envelope(Body {
                    text: "{\"name\":\"Bash}</tool>",
                    unclosed: true
                })
            ]
        );
        assert_eq!(
            pieces("<tool>{}</tool><tool>{"),
            [
                closed("{}"),
                Piece::Envelope(Body {
                    text: "{",
                    unclosed: true
                })
            ]
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
    fn an_envelope_inside_another_is_refused() {
        let text = r#"<tool>{"name":"A" <tool>{"name":"B"}</tool>}</tool>"#;
        let failure = envelopes(text, 8).expect_err("nested");
        assert_eq!(failure.code, "malformed_tool_json");
        assert!(
            failure.message.contains("must not nest"),
            "{}",
            failure.message
        );
        // Without a closing tag the nesting is still what is reported.
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
        assert_eq!(code("<tool>{}</tool></tool>", 1), "malformed_tool_json");
        assert_eq!(
            code("<tool>{}</tool></tool><tool>{}</tool>", 2),
            "malformed_tool_json"
        );
        assert!(!requests_a_tool("a</tool>b"));
    }

    #[test]
    fn tags_are_exact_lowercase_literals() {
        assert_eq!(envelopes("<Tool>{}</Tool> <tool >{}</tool >", 1), Ok(None));
    }

    #[test]
    fn tags_in_code_fences_are_text() {
        let fenced = "x\n```json\n<tool>{}</tool>\n</tool>\n```\ny";
        assert_eq!(envelopes(fenced, 1), Ok(None));
        assert!(!requests_a_tool(fenced));
        // After the fence closes, tags count again.
        let after = format!("{fenced}\n<tool>{{}}</tool>");
        assert_eq!(bodies(&after), ["{}"]);
        assert!(requests_a_tool(&after));
        // An info string with a backtick makes no fence; tildes take any info string.
        assert_eq!(bodies("``` a`b\n<tool>{}</tool>"), ["{}"]);
        assert_eq!(envelopes("~~~ a`b\n<tool>{}</tool>", 1), Ok(None));
        // The opening line itself is in the fence.
        assert_eq!(envelopes("```<tool>{}</tool>", 1), Ok(None));
    }

    #[test]
    fn lines_inside_an_envelope_open_no_fence() {
        let text = "<tool>{\"a\":\n```\n\"b\"}</tool> x <tool>{}</tool>\n```\n<tool>{}</tool>";
        // The fence line after the second envelope opens a fence that is never closed.
        assert_eq!(bodies(text), ["{\"a\":\n```\n\"b\"}", "{}"]);
        // Many envelopes on one line after a multi-line one: the line is looked at once.
        let line = format!("<tool>{{\n}}</tool>{}", " <tool>{}</tool>".repeat(1_000));
        assert_eq!(bodies(&line).len(), 1_001);
    }

    #[test]
    fn the_content_of_one_fenced_block() {
        fn content(text: &str) -> Option<&str> {
            fenced_content(text).map(|range| &text[range])
        }
        assert_eq!(content("```json\n{}\n```"), Some("{}\n"));
        assert_eq!(content("\n ~~~\n{}\n~~~ \n"), Some("{}\n"));
        assert_eq!(content("```\n{}````"), Some("{}"));
        assert_eq!(content("``\n{}\n``"), None);
        assert_eq!(content("```{}\n```"), None);
        assert_eq!(content("```json\n{}\n``"), None);
        assert_eq!(content("```json {}```"), None);
        assert_eq!(content("x ```\n{}\n```"), None);
    }

    #[test]
    fn multibyte_text_around_tags_is_sliced_on_boundaries() {
        let text = "é<tool>{\"k\":\"ü</tool>\\\"é\"}</tool>ß";
        assert_eq!(
            pieces(text),
            [
                Piece::Text("é"),
                closed("{\"k\":\"ü</tool>\\\"é\"}"),
                Piece::Text("ß")
            ]
        );
    }

    #[test]
    fn trailing_backslash_does_not_overrun() {
        for text in ["<tool>\"\\", "<tool>\"", "<tool>"] {
            assert!(
                matches!(
                    pieces(text).as_slice(),
                    [Piece::Envelope(Body { unclosed: true, .. })]
                ),
                "{text:?}"
            );
        }
    }
}
