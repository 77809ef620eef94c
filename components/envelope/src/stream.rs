//! The streaming reply parser: the agent's output read chunk by chunk as it arrives, releasing
//! the text a client can be shown as soon as it is certain, and giving at the end exactly what
//! [`parse_span`](crate::parse_span) gives for the whole output.
//!
//! # What is shown
//!
//! The *shown text* of a reply is [`Reply::shown_text`](devin_bridge_types::Reply::shown_text):
//! a text reply's text (trailing whitespace and leading blank lines removed, as `parse` has it),
//! or the text blocks of a reply that calls tools, in order, joined by
//! [`TEXT_BLOCK_SEPARATOR`]. A streamed message carries that text as one text block and the
//! calls after it, because a call is known only at the end: a later envelope may exceed the
//! limit or fail its checks, and then no call of the reply is run.
//!
//! [`ReplyStream::push`] returns the next piece of the shown text; the pieces of all pushes,
//! followed by the `tail` of [`ReplyStream::finish`], are the shown text of `parse`'s answer for
//! the concatenated chunks, whatever the chunks were. Released text is never taken back.
//!
//! # What is held back
//!
//! Only what could still turn out not to be shown, or to be shown otherwise:
//! - an envelope, from its `<tool>` to its `</tool>` (or to the end, when it is unclosed): it
//!   is never text;
//! - a `<` followed by a proper prefix of `<tool>` or `</tool>` at the end of what arrived: the
//!   next chunk may complete the tag;
//! - a tag on a line that starts with three or more backticks while no fence is open, until a
//!   backtick after them or the end of the line says whether the line opens a fence (a tag in a
//!   fence is quoted text, outside one it opens an envelope);
//! - whitespace at the end of what arrived: a text block ends without it, so it is shown only
//!   once something visible follows in the same stretch of prose; and the whitespace at the
//!   start of a stretch, until its first visible character says which line the block starts on
//!   (leading blank lines are dropped, the first line's indentation kept);
//! - the separator before a later text block, until that block has a visible character (a
//!   stretch of whitespace between two envelopes is no block);
//! - everything after the point where the reply is certain to fail (a `</tool>` without its
//!   opening tag, an envelope opening inside another, one envelope more than the limit): such a
//!   reply is repaired, and nothing more of it is worth showing.
//!
//! Nothing else is held back. The narration rule removes no text: it judges a finished text
//! reply as a whole and, when it fires, asks for the single repair, whose calls the host
//! appends to the message that already shows the text (what was shown stays shown; a sentence
//! announcing an action, followed by the call that performs it, is what a good reply looks
//! like). So text is released as it arrives whatever the narration verdict will be, and
//! [`ReplyStream::narrates`] gives that verdict at the end without sending the text again. The
//! parse has no other rule that hides text (no echo of the prompt or transcript is removed),
//! so there is nothing else to hold back; a rule that hid text would have to be mirrored here,
//! and the property tests (`stream/tests.rs`) compare every released byte with the one-shot
//! answer.
//!
//! A failure (a repairable rejection of the reply, or the host's broken tools) does not take
//! back what was released: the host keeps it on screen and appends the repair's calls.
//! [`ReplyStream::push`] reports a failure as soon as it is certain and final: one envelope
//! over the limit, or an envelope opening inside another (each wins over anything after it, so
//! the answer is `parse`'s, the tools list checked first as `parse` checks it); the host may end
//! the agent's turn there. Every other failure is known at [`ReplyStream::finish`].
//!
//! # Work and memory
//!
//! The stream keeps the output (the final checks need it, as the one-shot parse has it) and a
//! few offsets into it: the held-back text is a range of that buffer, never a copy. Each push
//! looks at the new bytes once, plus at most the few bytes of a tag it stopped at (`memchr`
//! searches for `<` outside envelopes, for `"` and `<` inside one), and the lines are looked
//! at for fences only as far as a tag asks, as the one-shot scan does (a line is searched at
//! most twice: for its end, and on a line of backticks for a backtick after them). The
//! end does not scan the output again: the structure the pushes found (the stretches of text
//! and the envelope bodies, exactly what the one-shot scan finds) goes to the same checks of
//! the envelopes `parse` runs; only a reply the scan saw failing is parsed whole, to report
//! `parse`'s exact failure. So a turn costs one pass over its output plus the checks of its
//! envelopes, however it was cut. The limits are the one-shot parse's: a text reply whose offsets
//! do not fit in 32 bits is `output_too_large` at the end, and the host's store caps the
//! memory. The buffer doubles from the first chunk's size while the output is at most 64 KiB,
//! jumps to 4 MiB once it outgrows that and doubles past it (see `ReplyStream::reserve`), so it
//! may reserve up to 4 MiB for an output a little over 64 KiB (reserved, not touched) and twice
//! a very large one's bytes, where the one-shot call receives the output in one allocation of
//! its size.
//!
//! Every offset kept is a character boundary: chunks are whole strings, and the stream stops
//! only at the end of a chunk, before an ASCII byte (`<`), after a line break, or after a
//! visible character, so no released piece splits a character.
//!
//! # A resource, not a state record
//!
//! The WIT exports the stream as a resource (`reply-stream`) that lives in the component's
//! store for one turn. A state record passed in and out would cross the boundary twice per
//! push with the whole buffered output (the final parse needs it), turning a turn into
//! quadratic copying; the resource keeps the buffer in the guest, so a push copies only its
//! chunk in and its released text out. It also makes the turn the unit of cost: one instance
//! serves the pushes, the final parse and the narration verdict of a turn.

use devin_bridge_types::{Failure, ParsedReply, Reply, ShownPiece, StreamEnd, TextSpan};
use memchr::{memchr, memchr2};

pub use devin_bridge_types::TEXT_BLOCK_SEPARATOR;

use std::ops::{ControlFlow, Range};

use crate::scan::{self, fence_after, fence_marks, CLOSE, OPEN};
use crate::{failure, narrates_unexecuted_action, parse_scanned, parse_span, tools};

/// The longest output the stream buffer holds while it grows by doubling: most replies (see
/// `ReplyStream::reserve`).
const SHORT_OUTPUT: usize = 64 << 10;
/// The room an output that outgrew [`SHORT_OUTPUT`] gets at once (see `ReplyStream::reserve`).
const LONG_ROOM: usize = 4 << 20;

/// One turn's output, parsed as it arrives. See the module documentation.
pub struct ReplyStream {
    tools: String,
    id_seed: String,
    max_calls: u32,
    /// Every chunk pushed, in order.
    output: String,
    scanner: Scanner,
    release: Release,
    /// A failure that is certain and final, once found.
    failure: Option<Failure>,
    /// `parse`'s answer, once finished.
    finished: Option<Result<ParsedReply, Failure>>,
}

impl ReplyStream {
    /// A stream for one turn, with the inputs `parse` takes besides the output.
    pub fn new(tools: &str, id_seed: &str, max_calls: u32) -> Self {
        Self {
            tools: tools.to_owned(),
            id_seed: id_seed.to_owned(),
            max_calls,
            output: String::new(),
            scanner: Scanner::new(usize::try_from(max_calls.max(1)).unwrap_or(usize::MAX)),
            release: Release::default(),
            failure: None,
            finished: None,
        }
    }

    /// Appends `chunk` to the output and returns the shown text it made certain (often empty).
    /// A failure is returned once the reply is certain to fail with it (and again on every
    /// later push); `stream_finished` after [`ReplyStream::finish`].
    pub fn push(&mut self, chunk: &str) -> Result<String, Failure> {
        let pieces = self.push_pieces(chunk)?;
        // The pieces are spans of the output they were cut from, so they resolve against it.
        Ok(ShownPiece::resolve(&pieces, &self.output).unwrap_or_default())
    }

    /// [`ReplyStream::push`], with the shown text answered as pieces: spans of the output
    /// pushed so far and separators (what the component answers, so the text a push releases
    /// does not cross the boundary twice). An output whose offsets do not fit in 32 bits is
    /// `output_too_large` (only possible natively: a component's memory is smaller).
    pub fn push_pieces(&mut self, chunk: &str) -> Result<Vec<ShownPiece>, Failure> {
        if self.finished.is_some() {
            return Err(failure::stream_finished());
        }
        if let Some(failure) = &self.failure {
            return Err(failure.clone());
        }
        self.reserve(chunk.len());
        self.output.push_str(chunk);
        if u32::try_from(self.output.len()).is_err() {
            let failure = failure::output_too_large(self.output.len());
            self.failure = Some(failure.clone());
            return Err(failure);
        }
        let mut shown = Released::default();
        match self
            .scanner
            .advance(&self.output, false, &mut self.release, &mut shown)
        {
            Some(certain) => {
                // The push fails, so the text it found before the failure is not released.
                self.release.total -= shown.bytes;
                // `parse` checks the tools first, whatever the output holds.
                let failure = tools::Catalog::parse(&self.tools)
                    .err()
                    .unwrap_or_else(|| certain.failure(self.scanner.limit));
                self.failure = Some(failure.clone());
                Err(failure)
            }
            None => Ok(shown.pieces),
        }
    }

    /// Room for `more` bytes of output, in three steps: doubling while the output is at most
    /// [`SHORT_OUTPUT`], then [`LONG_ROOM`] at once, then doubling.
    ///
    /// A short output asks for no room ahead: a large first room does not fit in the memory a
    /// fresh instance starts with, and growing the instance's linear memory (and resetting it
    /// when the turn's store is dropped) cost every stream about 18 µs, more than the one-shot
    /// parse of a short tool reply spends on its envelope (`cargo xtask bench transforms`).
    /// Doubling up to 64 KiB copies less than 64 KiB in all. An output that outgrows that is a
    /// long reply, and one jump to the long room copies at most 64 KiB, where growing fourfold
    /// copied a 1 MB reply three times over (the 64 KiB, 256 KiB and 1 MiB buffers) and faulted
    /// in every page of each. Room reserved but never written is never touched. A room the
    /// memory cap refuses is not an error: the buffer then grows by what this chunk needs.
    fn reserve(&mut self, more: usize) {
        let len = self.output.len();
        if self.output.capacity() - len >= more {
            return;
        }
        let needed = len.saturating_add(more);
        if needed <= SHORT_OUTPUT {
            self.output.reserve(more);
            return;
        }
        let room = if needed <= LONG_ROOM {
            LONG_ROOM
        } else {
            needed.max(len.saturating_mul(2))
        };
        if self.output.try_reserve(room - len).is_err() {
            self.output.reserve(more);
        }
    }

    /// The end of the output: `parse`'s answer for all of it, with the shown text not released
    /// yet. A second call answers the same.
    pub fn finish(&mut self) -> Result<StreamEnd, Failure> {
        let reply = match &self.finished {
            Some(reply) => reply.clone(),
            None => {
                let reply = self.end();
                self.finished = Some(reply.clone());
                reply
            }
        }?;
        // What was released is a prefix of the shown text (the module's invariant, which the
        // tests check on every cut); were it ever not, nothing more is shown rather than a
        // piece from the middle of a character.
        let released = self.release.total;
        let tail = match &reply {
            ParsedReply::Text(span) => span
                .of(&self.output)
                .and_then(|text| text.get(released..))
                .unwrap_or_default()
                .to_owned(),
            ParsedReply::Tools(tools) => Reply::shown_text_of_blocks(&tools.blocks)
                .get(released..)
                .unwrap_or_default()
                .to_owned(),
        };
        Ok(StreamEnd { tail, reply })
    }

    /// `parse`'s answer for the whole output. The scan reads the rest of the output as
    /// complete (a partial tag at the end is text, the last line ends there) and hands its
    /// structure to the checks of the envelopes, so the output is not scanned again; a reply
    /// the scan found failing is parsed whole, which finds its exact failure.
    fn end(&mut self) -> Result<ParsedReply, Failure> {
        if let Some(failure) = &self.failure {
            return Err(failure.clone());
        }
        // The end's own text is the tail, cut from the answer: nothing is released here.
        let released = self.release.total;
        let mut unreleased = Released::default();
        let certain = self
            .scanner
            .advance(&self.output, true, &mut self.release, &mut unreleased);
        self.release.total = released;
        match self.scanner.structure(&self.output) {
            Some(pieces) if certain.is_none() => {
                parse_scanned(&self.output, pieces, &self.tools, &self.id_seed)
            }
            _ => parse_span(&self.output, &self.tools, &self.id_seed, self.max_calls),
        }
    }

    /// The narration verdict of a finished text reply ([`narrates_unexecuted_action`] of its
    /// text, as the host judges it); false before [`ReplyStream::finish`], for a reply that
    /// calls tools and for a failure.
    pub fn narrates(&self) -> bool {
        match &self.finished {
            Some(Ok(ParsedReply::Text(span))) => span
                .of(&self.output)
                .is_some_and(narrates_unexecuted_action),
            _ => false,
        }
    }

    /// Bytes of shown text released so far (after `finish`, the tail's length is what was held
    /// back at the end of the turn).
    pub fn released_bytes(&self) -> usize {
        self.release.total
    }
}

/// A failure the scan found that nothing after it can change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Certain {
    /// An opening tag past the limit.
    Excessive,
    /// An opening tag inside envelope number `envelope` (1-based), outside its strings.
    Nested(usize),
}

impl Certain {
    fn failure(self, limit: usize) -> Failure {
        match self {
            Certain::Excessive => failure::excessive(limit),
            Certain::Nested(envelope) => failure::nested(envelope),
        }
    }
}

/// Where the scan is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// In the text outside envelopes.
    Outside,
    /// In the body of an envelope that starts at `body`; `string` inside one of its JSON
    /// strings.
    Body { body: usize, string: bool },
    /// The reply fails whatever follows: nothing more is read.
    Failed,
    /// The output is complete and its structure known.
    Ended,
}

/// One piece of the output's structure, as [`scan::Piece`] has it, by offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Span {
    Text(Range<usize>),
    Envelope { body: Range<usize>, unclosed: bool },
}

/// The structure of the output so far: [`crate::scan::envelopes`]' rules, resumable at any
/// chunk boundary. At the end of the output it holds what `envelopes` answers (unless the
/// reply failed, which the final parse then finds again).
struct Scanner {
    mode: Mode,
    /// The next byte to look at; one past the end after a backslash that ended the output.
    at: usize,
    /// Where the current stretch of text outside envelopes starts.
    outside_from: usize,
    /// The pieces before it.
    pieces: Vec<Span>,
    /// Envelopes opened so far, and the most a reply may hold.
    envelopes: usize,
    limit: usize,
    lines: Lines,
}

/// The Markdown fences of the text outside envelopes, examined line by line only as far as a
/// tag asks, as [`crate::scan`]'s `Fences` does.
struct Lines {
    /// The open fence after the lines examined.
    fence: Option<(u8, usize)>,
    cursor: Cursor,
}

/// The next line to examine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cursor {
    /// After an envelope: the next line starts after the first line break at or after `from`
    /// (the rest of the line the envelope ended on is never examined).
    Skip(usize),
    /// The line that starts at `start`: no line break in `start..searched`, and what a tag on
    /// it found out while the line was not complete.
    Line {
        start: usize,
        searched: usize,
        opens: Opens,
    },
}

/// Whether a line that is not complete yet opens a fence, as far as a tag on it needed to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opens {
    /// Not asked yet.
    Unknown,
    /// Three or more backticks start it, and none follows them up to `searched`.
    Pending {
        searched: usize,
    },
    Known(bool),
}

impl Lines {
    fn new() -> Self {
        Self {
            fence: None,
            cursor: Cursor::line(0),
        }
    }

    /// Whether a tag at `tag` (outside envelopes) is inside a fence, examining the lines up to
    /// it; `None` while the output so far cannot tell (`end`: the output is complete).
    fn covers(&mut self, bytes: &[u8], tag: usize, end: bool) -> Option<bool> {
        loop {
            match self.cursor {
                Cursor::Skip(from) => match bytes.get(from..tag).and_then(|gap| memchr(b'\n', gap))
                {
                    Some(offset) => self.cursor = Cursor::line(from + offset + 1),
                    None => {
                        // Still on the line the envelope ended on.
                        self.cursor = Cursor::Skip(tag.max(from));
                        return Some(self.fence.is_some());
                    }
                },
                Cursor::Line { start, .. } if start > tag => return Some(self.fence.is_some()),
                Cursor::Line {
                    start,
                    searched,
                    opens,
                } => {
                    let line_end = bytes
                        .get(searched..)
                        .and_then(|rest| memchr(b'\n', rest))
                        .map(|offset| searched + offset)
                        .or(end.then_some(bytes.len()));
                    if let Some(line_end) = line_end {
                        self.fence = fence_after(self.fence, &bytes[start..line_end]);
                        self.cursor = Cursor::line(line_end + 1);
                        continue;
                    }
                    // The tag's line goes on past what has arrived.
                    if self.fence.is_some() {
                        // A tag after the marks keeps a fence from closing on this line.
                        return Some(true);
                    }
                    let (opens, verdict) = line_opens(bytes, start, tag, opens);
                    self.cursor = Cursor::Line {
                        start,
                        searched: bytes.len(),
                        opens,
                    };
                    return verdict;
                }
            }
        }
    }

    /// An envelope ended at `end`.
    fn skip_envelope(&mut self, end: usize) {
        self.cursor = Cursor::Skip(end);
    }
}

impl Cursor {
    fn line(start: usize) -> Self {
        Cursor::Line {
            start,
            searched: start,
            opens: Opens::Unknown,
        }
    }
}

/// Whether the line at `start`, not complete yet, opens a fence (no fence being open), as the
/// one-shot scan decides on the whole line; `None` while the output so far cannot tell. Asked
/// for a tag at `tag` on the line, so the line's marks (before the tag) are all there.
fn line_opens(bytes: &[u8], start: usize, tag: usize, opens: Opens) -> (Opens, Option<bool>) {
    let searched = match opens {
        Opens::Known(known) => return (opens, Some(known)),
        Opens::Pending { searched } => searched,
        Opens::Unknown => match fence_marks(&bytes[start..tag]) {
            None => return (Opens::Known(false), Some(false)),
            Some((b'~', _, _)) => return (Opens::Known(true), Some(true)),
            Some((_, _, rest)) if rest.contains(&b'`') => {
                return (Opens::Known(false), Some(false))
            }
            Some(_) => tag,
        },
    };
    // A backtick after the marks makes it no fence line; the line break ends the question.
    match bytes
        .get(searched..)
        .and_then(|rest| memchr2(b'`', b'\n', rest))
    {
        Some(offset) => {
            let opens = bytes[searched + offset] == b'\n';
            (Opens::Known(opens), Some(opens))
        }
        None => (
            Opens::Pending {
                searched: bytes.len(),
            },
            None,
        ),
    }
}

/// A `<` with the bytes after it: a tag, or possibly one once more arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Angle {
    Open,
    Close,
    /// What follows is a proper prefix of a tag and reaches the end of what has arrived.
    Partial,
    Other,
}

/// `end`: the output is complete, so a partial tag is none.
fn angle(rest: &[u8], end: bool) -> Angle {
    if rest.starts_with(OPEN) {
        Angle::Open
    } else if rest.starts_with(CLOSE) {
        Angle::Close
    } else if !end && (OPEN.starts_with(rest) || CLOSE.starts_with(rest)) {
        Angle::Partial
    } else {
        Angle::Other
    }
}

impl Scanner {
    fn new(limit: usize) -> Self {
        Self {
            mode: Mode::Outside,
            at: 0,
            outside_from: 0,
            pieces: Vec::new(),
            envelopes: 0,
            limit,
            lines: Lines::new(),
        }
    }

    /// Reads as far as the output can be read (all of it when `end`: the output is complete),
    /// releasing the certain text into `shown`.
    fn advance(
        &mut self,
        output: &str,
        end: bool,
        release: &mut Release,
        shown: &mut Released,
    ) -> Option<Certain> {
        let bytes = output.as_bytes();
        loop {
            let step = match self.mode {
                Mode::Failed | Mode::Ended => return None,
                Mode::Outside => self.outside(output, end, release, shown),
                Mode::Body { body, string: true } => self.in_string(bytes, body, end),
                Mode::Body {
                    body,
                    string: false,
                } => self.in_body(bytes, body, end, release),
            };
            if let ControlFlow::Break(certain) = step {
                return certain;
            }
        }
    }

    /// One step outside envelopes: to the next `<`, which is text, a tag still arriving, a tag
    /// a fence quotes, a stray closing tag, or the opening of an envelope.
    #[inline]
    fn outside(
        &mut self,
        output: &str,
        end: bool,
        release: &mut Release,
        shown: &mut Released,
    ) -> ControlFlow<Option<Certain>> {
        let bytes = output.as_bytes();
        let Some(found) = bytes
            .get(self.at..)
            .and_then(|rest| memchr(b'<', rest))
            .map(|offset| self.at + offset)
        else {
            self.at = bytes.len();
            release.grow(output, bytes.len(), shown);
            if end {
                self.end_outside(bytes.len());
                self.mode = Mode::Ended;
            }
            return ControlFlow::Break(None);
        };
        let tag = match angle(&bytes[found..], end) {
            Angle::Other => {
                self.at = found + 1;
                return ControlFlow::Continue(());
            }
            Angle::Partial => return ControlFlow::Break(self.wait(output, found, release, shown)),
            tag => tag,
        };
        let Some(covered) = self.lines.covers(bytes, found, end) else {
            return ControlFlow::Break(self.wait(output, found, release, shown));
        };
        if covered {
            self.at = found + 1;
            return ControlFlow::Continue(());
        }
        if tag == Angle::Close {
            // A closing tag without its opening one: `malformed_tool_json`, unless a later
            // excess wins; the final parse says which.
            release.grow(output, found, shown);
            self.mode = Mode::Failed;
            return ControlFlow::Break(None);
        }
        if self.envelopes >= self.limit {
            self.mode = Mode::Failed;
            return ControlFlow::Break(Some(Certain::Excessive));
        }
        self.envelopes += 1;
        release.grow(output, found, shown);
        release.end_piece();
        self.end_outside(found);
        self.at = found + OPEN.len();
        self.mode = Mode::Body {
            body: self.at,
            string: false,
        };
        ControlFlow::Continue(())
    }

    /// One step inside a JSON string of the envelope whose body starts at `body`: to its
    /// closing quote, skipping escaped bytes.
    #[inline]
    fn in_string(&mut self, bytes: &[u8], body: usize, end: bool) -> ControlFlow<Option<Certain>> {
        match bytes
            .get(self.at..)
            .and_then(|rest| memchr2(b'"', b'\\', rest))
        {
            Some(offset) => {
                let found = self.at + offset;
                if bytes[found] == b'\\' {
                    // The escaped byte, whatever it is, is skipped (maybe not here yet).
                    self.at = found + 2;
                } else {
                    self.at = found + 1;
                    self.mode = Mode::Body {
                        body,
                        string: false,
                    };
                }
                ControlFlow::Continue(())
            }
            None => ControlFlow::Break(self.body_waits(bytes.len(), body, end)),
        }
    }

    /// One step in the body of the envelope that starts at `body`, outside its strings: to
    /// the next quote (a string opens) or `<` (its closing tag, a nested opening, or neither).
    #[inline]
    fn in_body(
        &mut self,
        bytes: &[u8],
        body: usize,
        end: bool,
        release: &mut Release,
    ) -> ControlFlow<Option<Certain>> {
        let Some(found) = bytes
            .get(self.at..)
            .and_then(|rest| memchr2(b'"', b'<', rest))
            .map(|offset| self.at + offset)
        else {
            return ControlFlow::Break(self.body_waits(bytes.len(), body, end));
        };
        if bytes[found] == b'"' {
            self.at = found + 1;
            self.mode = Mode::Body { body, string: true };
            return ControlFlow::Continue(());
        }
        match angle(&bytes[found..], end) {
            Angle::Close => {
                self.pieces.push(Span::Envelope {
                    body: body..found,
                    unclosed: false,
                });
                self.at = found + CLOSE.len();
                self.outside_from = self.at;
                self.lines.skip_envelope(self.at);
                release.start_piece(self.at);
                self.mode = Mode::Outside;
            }
            Angle::Open => {
                self.mode = Mode::Failed;
                return ControlFlow::Break(Some(Certain::Nested(self.envelopes)));
            }
            Angle::Partial => {
                self.at = found;
                return ControlFlow::Break(None);
            }
            Angle::Other => self.at = found + 1,
        }
        ControlFlow::Continue(())
    }

    /// Stops before the `<` at `at` until more of the output arrives; the text before it is
    /// certain.
    fn wait(
        &mut self,
        output: &str,
        at: usize,
        release: &mut Release,
        shown: &mut Released,
    ) -> Option<Certain> {
        self.at = at;
        release.grow(output, at, shown);
        None
    }

    /// The body that starts at `body` runs to the end of what arrived (`len`); at the end of
    /// the output it is the last, unclosed envelope.
    fn body_waits(&mut self, len: usize, body: usize, end: bool) -> Option<Certain> {
        self.at = self.at.max(len);
        if end {
            self.pieces.push(Span::Envelope {
                body: body..len,
                unclosed: true,
            });
            self.outside_from = len;
            self.mode = Mode::Ended;
        }
        None
    }

    /// The stretch of text outside envelopes ends at `at`.
    fn end_outside(&mut self, at: usize) {
        if at > self.outside_from {
            self.pieces.push(Span::Text(self.outside_from..at));
        }
        self.outside_from = at;
    }

    /// Once [`Mode::Ended`]: what [`scan::envelopes`] answers (`Some(None)` for an output with
    /// no envelope); `None` before (or were a piece ever not a slice of `output`).
    fn structure<'a>(&self, output: &'a str) -> Option<Option<Vec<scan::Piece<'a>>>> {
        if self.mode != Mode::Ended {
            return None;
        }
        if self.envelopes == 0 {
            return Some(None);
        }
        self.pieces
            .iter()
            .map(|span| match span {
                Span::Text(range) => output.get(range.clone()).map(scan::Piece::Text),
                Span::Envelope { body, unclosed } => output.get(body.clone()).map(|text| {
                    scan::Piece::Envelope(scan::Body {
                        text,
                        unclosed: *unclosed,
                    })
                }),
            })
            .collect::<Option<Vec<_>>>()
            .map(Some)
    }
}

/// The shown text one push (or the end) released: spans of the output and separators.
#[derive(Debug, Default)]
struct Released {
    pieces: Vec<ShownPiece>,
    /// The bytes of shown text they stand for.
    bytes: usize,
}

impl Released {
    fn separator(&mut self) {
        self.pieces.push(ShownPiece::Separator);
        self.bytes += TEXT_BLOCK_SEPARATOR.len();
    }

    /// Bytes `range` of the output, joined to the piece before when they follow it. The
    /// output's length fits in 32 bits (`push_pieces` checks it), so every span does.
    fn output(&mut self, range: Range<usize>) {
        let Some(span) = TextSpan::of_range(range.clone()) else {
            return;
        };
        self.bytes += range.len();
        if let Some(ShownPiece::Output(last)) = self.pieces.last_mut() {
            if last.start.checked_add(last.length) == Some(span.start) {
                last.length += span.length;
                return;
            }
        }
        self.pieces.push(ShownPiece::Output(span));
    }
}

/// The shown text released so far, and where the current stretch of prose stands.
#[derive(Debug, Default)]
struct Release {
    /// Bytes released in total (separators included).
    total: usize,
    /// Stretches of prose that had something visible, before the current one.
    blocks: usize,
    /// Where the current stretch starts.
    piece_start: usize,
    /// The current stretch: where its shown text starts, once its first visible character
    /// has arrived; until then, how far its whitespace has been looked at.
    start: Option<usize>,
    searched: usize,
    /// How far its shown text is released, and how far it has been looked at for a visible
    /// character to release up to.
    released: usize,
    looked: usize,
}

impl Release {
    /// The current stretch of prose is known up to `known` (it may go on): release it, short
    /// of its trailing whitespace and, until its first visible character, of its leading
    /// whitespace.
    fn grow(&mut self, output: &str, known: usize, shown: &mut Released) {
        let start = match self.start {
            Some(start) => start,
            None => {
                let from = self.searched.max(self.piece_start);
                let Some(text) = output.get(from..known) else {
                    return;
                };
                let Some(offset) = text.find(|c: char| !c.is_whitespace()) else {
                    self.searched = known;
                    return;
                };
                let visible = from + offset;
                // Leading blank lines are dropped; the first line keeps its indentation.
                let start = output
                    .get(self.piece_start..visible)
                    .and_then(|lead| lead.rfind('\n'))
                    .map_or(self.piece_start, |newline| self.piece_start + newline + 1);
                if self.blocks > 0 {
                    shown.separator();
                    self.total += TEXT_BLOCK_SEPARATOR.len();
                }
                self.start = Some(start);
                self.released = start;
                self.looked = start;
                start
            }
        };
        debug_assert!(start <= known);
        let Some(new) = output.get(self.looked..known) else {
            return;
        };
        let visible = new.trim_end().len();
        let end = self.looked + visible;
        // Only a visible character makes the whitespace before it certain.
        if visible > 0 && end > self.released && output.is_char_boundary(end) {
            shown.output(self.released..end);
            self.total += end - self.released;
            self.released = end;
        }
        self.looked = known;
    }

    /// The current stretch ended (at an envelope).
    fn end_piece(&mut self) {
        if self.start.is_some() {
            self.blocks += 1;
        }
        self.start = None;
    }

    /// A new stretch starts at `at` (after an envelope).
    fn start_piece(&mut self, at: usize) {
        self.piece_start = at;
        self.searched = at;
        self.start = None;
    }
}

#[cfg(test)]
mod tests;
