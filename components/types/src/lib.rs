//! The one plain Rust definition of every record in `wit/transforms.wit`, the one table of its
//! functions ([`transform_functions!`], from which the host's calls, the calls' data form and
//! every component's exports are made), and the text scans the transforms share.
//!
//! Each transform's logic is an ordinary library that speaks these types. The same types cross
//! the WIT boundary on both sides: a component's exports take and return them directly
//! ([`guest_bindings!`] maps every WIT record onto them), and the host lifts and lowers them
//! directly too: the `wasmtime` feature (off by default, so a component never links wasmtime)
//! derives wasmtime's `ComponentType`, `Lift` and `Lower` on every WIT record. So a native
//! answer and a wasm answer are values of one type and compare directly.
//!
//! Invariant: every record here has exactly the fields of its WIT record, in Rust spelling
//! (`input-tokens` is `input_tokens`), with the Rust types the bindings generators use
//! (`list<T>` is `Vec<T>`, `option<T>` is `Option<T>`); variants have the WIT's cases. Under
//! the `wasmtime` feature each field and case whose WIT name is not its Rust name says its WIT
//! name (`component(name = "input-tokens")`); wasmtime checks the names and types against
//! the component's when the host loads it. The serde derives give the golden fixtures' JSON
//! encoding.

use serde::{Deserialize, Serialize};
#[cfg(feature = "wasmtime")]
use wasmtime::component::{ComponentType, Lift, Lower};

pub mod continuation;
mod errors;
mod exports;
mod functions;
mod guest;
mod kind;
mod model_alias;
mod safeguard;
mod serializer;
mod sse;
pub mod text;

pub use errors::error_type;
pub use exports::GuestParam;
pub use kind::{TransformKind, UnknownTransform};
pub use model_alias::ResolvedModel;
pub use safeguard::{CallVerdict, Evaluation, SafeguardOutcome, SafeguardStatus, ToolVerdict};
pub use serializer::{
    Image, ImageLimits, LocalAnswer, MessageMark, Prompt, PromptOptions, Resume, ResumedPrompt,
    UnseenPrompt,
};
pub use sse::{MessageHead, SseEvent, SseFrames};

/// A typed failure with a stable machine `code`, a human `message`, the HTTP `status` the
/// host answers with, and whether the host may spend its single repair attempt on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct Failure {
    pub code: String,
    pub message: String,
    pub status: u16,
    pub repairable: bool,
}

impl Failure {
    /// A client error (400) that a repair cannot fix.
    pub fn invalid(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            status: 400,
            repairable: false,
        }
    }

    /// A failure of the agent's output that one repair attempt may fix.
    pub fn repairable(code: &str, message: impl Into<String>, status: u16) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            status,
            repairable: true,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.status, self.message)
    }
}

impl std::error::Error for Failure {}

/// One client-owned tool invocation; `input` is the JSON text of an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub input: String,
}

/// One block of a reply that calls tools: prose the agent wrote, or one call it asked for.
///
/// Serialized untagged (the golden fixtures' encoding): prose is a JSON string, a call the
/// object `{id, name, input}`, so a list of calls alone reads as it always has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(variant)
)]
#[serde(untagged)]
pub enum ReplyBlock {
    #[cfg_attr(feature = "wasmtime", component(name = "text"))]
    Text(String),
    #[cfg_attr(feature = "wasmtime", component(name = "call"))]
    Call(ToolCall),
}

/// Final text, or a reply that calls tools: its blocks in the order the agent wrote them,
/// prose (`ReplyBlock::Text`) before, between and after the calls.
///
/// Where a transform produces `Tools`, it holds at least one call, and its text blocks are
/// non-empty and never adjacent; a renderer given a list without a call renders a message
/// that asks the client to run nothing rather than inventing a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(variant)
)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum Reply {
    #[cfg_attr(feature = "wasmtime", component(name = "text"))]
    Text(String),
    #[cfg_attr(feature = "wasmtime", component(name = "tools"))]
    Tools(Vec<ReplyBlock>),
}

impl Reply {
    /// Bytes of content a renderer has to write: the text, or every block's text and every
    /// call's id, name and input.
    pub fn content_bytes(&self) -> usize {
        match self {
            Reply::Text(text) => text.len(),
            Reply::Tools(blocks) => blocks
                .iter()
                .map(|block| match block {
                    ReplyBlock::Text(text) => text.len(),
                    ReplyBlock::Call(call) => call.id.len() + call.name.len() + call.input.len(),
                })
                .sum(),
        }
    }

    /// The tool calls of the reply, in order (none for a text reply): what the client runs
    /// and what a safeguard judges; the prose around them is neither.
    pub fn calls(&self) -> impl Iterator<Item = &ToolCall> {
        let blocks: &[ReplyBlock] = match self {
            Reply::Text(_) => &[],
            Reply::Tools(blocks) => blocks,
        };
        blocks.iter().filter_map(|block| match block {
            ReplyBlock::Call(call) => Some(call),
            ReplyBlock::Text(_) => None,
        })
    }

    /// The message a streamed reply is: its one text block (when it has text), then its calls;
    /// a reply without a call is a text reply.
    pub fn streamed_message(text: String, calls: Vec<ToolCall>) -> Self {
        if calls.is_empty() {
            return Reply::Text(text);
        }
        let mut blocks = Vec::with_capacity(calls.len() + 1);
        if !text.is_empty() {
            blocks.push(ReplyBlock::Text(text));
        }
        blocks.extend(calls.into_iter().map(ReplyBlock::Call));
        Reply::Tools(blocks)
    }

    /// A reply of `calls` alone, without prose.
    pub fn of_calls(calls: impl IntoIterator<Item = ToolCall>) -> Self {
        Reply::Tools(calls.into_iter().map(ReplyBlock::Call).collect())
    }

    /// The text a client is shown of the reply when it is streamed: a text reply's text, or
    /// the text blocks of a reply that calls tools, in order, joined by
    /// [`TEXT_BLOCK_SEPARATOR`] (a streamed message carries its prose as one text block, and
    /// its calls after it: a call is known only once the whole reply is). Empty when a reply
    /// that calls tools has no prose.
    pub fn shown_text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Reply::Text(text) => std::borrow::Cow::Borrowed(text),
            Reply::Tools(blocks) => Self::shown_text_of_blocks(blocks),
        }
    }

    /// [`Reply::shown_text`] of a reply that calls tools, from its blocks.
    pub fn shown_text_of_blocks(blocks: &[ReplyBlock]) -> std::borrow::Cow<'_, str> {
        use std::borrow::Cow;
        let mut texts = blocks.iter().filter_map(|block| match block {
            ReplyBlock::Text(text) => Some(text.as_str()),
            ReplyBlock::Call(_) => None,
        });
        let Some(first) = texts.next() else {
            return Cow::Borrowed("");
        };
        let Some(second) = texts.next() else {
            return Cow::Borrowed(first);
        };
        let mut shown = [first, TEXT_BLOCK_SEPARATOR, second].concat();
        for text in texts {
            shown.push_str(TEXT_BLOCK_SEPARATOR);
            shown.push_str(text);
        }
        Cow::Owned(shown)
    }
}

/// What separates two text blocks of a reply in its [`Reply::shown_text`]: a paragraph break.
pub const TEXT_BLOCK_SEPARATOR: &str = "\n\n";

/// A defect of an envelope that `envelope.parse` repaired instead of refusing the reply; the
/// host counts them by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(variant)
)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// The last envelope ran to the end of the output without its `</tool>`.
    #[cfg_attr(feature = "wasmtime", component(name = "unclosed-envelope"))]
    UnclosedEnvelope,
    /// The envelope's JSON was wrapped in a Markdown code fence.
    #[cfg_attr(feature = "wasmtime", component(name = "fenced-json"))]
    FencedJson,
    /// The envelope's JSON had a comma before a closing `}` or `]`.
    #[cfg_attr(feature = "wasmtime", component(name = "trailing-comma"))]
    TrailingComma,
    /// The envelope held prose around its one JSON object.
    #[cfg_attr(feature = "wasmtime", component(name = "stray-prose"))]
    StrayProse,
}

impl Recovery {
    /// Every kind, in declaration order.
    pub const ALL: [Recovery; 4] = [
        Recovery::UnclosedEnvelope,
        Recovery::FencedJson,
        Recovery::TrailingComma,
        Recovery::StrayProse,
    ];

    /// The kind's stable name (its serde spelling): a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Recovery::UnclosedEnvelope => "unclosed_envelope",
            Recovery::FencedJson => "fenced_json",
            Recovery::TrailingComma => "trailing_comma",
            Recovery::StrayProse => "stray_prose",
        }
    }
}

/// A reply that calls tools, as `envelope.parse` answers it: the blocks, and the defects it
/// repaired on the way (one entry per repair, in reply order; empty when the envelopes were
/// well-formed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct ToolReply {
    pub blocks: Vec<ReplyBlock>,
    pub recoveries: Vec<Recovery>,
}

/// What `envelope.parse` found, resolved against the output: the reply, and the recoveries
/// of a reply that calls tools (none for a text reply). Serialized as the reply with a
/// `recoveries` list beside `kind` and `value` when there is any (the fixtures' encoding).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parsed {
    #[serde(flatten)]
    pub reply: Reply,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recoveries: Vec<Recovery>,
}

/// `length` bytes of a text, from byte `start`: where `envelope.parse` found a text reply in
/// the output it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct TextSpan {
    pub start: u32,
    pub length: u32,
}

impl TextSpan {
    /// The span of the byte range `range`; `None` when its bounds do not fit in a `u32`.
    pub fn of_range(range: std::ops::Range<usize>) -> Option<Self> {
        Some(Self {
            start: u32::try_from(range.start).ok()?,
            length: u32::try_from(range.end.checked_sub(range.start)?).ok()?,
        })
    }

    /// The part of `text` this span covers; `None` when it is not a span of `text` (it ends
    /// past the end, or a bound is not on a character boundary).
    pub fn of(self, text: &str) -> Option<&str> {
        let start = usize::try_from(self.start).ok()?;
        let end = start.checked_add(usize::try_from(self.length).ok()?)?;
        text.get(start..end)
    }
}

/// [`Parsed`] as `envelope.parse` answers it across the boundary: the text as a span of the
/// output the caller already holds, or the reply that calls tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(variant)
)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum ParsedReply {
    #[cfg_attr(feature = "wasmtime", component(name = "text"))]
    Text(TextSpan),
    #[cfg_attr(feature = "wasmtime", component(name = "tools"))]
    Tools(ToolReply),
}

impl ParsedReply {
    /// The reply this answer stands for, given the output it was parsed from; `None` when the
    /// span is not a span of `output`.
    pub fn resolve(self, output: &str) -> Option<Parsed> {
        Some(match self {
            ParsedReply::Text(span) => Parsed::text(span.of(output)?.to_owned()),
            ParsedReply::Tools(tools) => tools.into(),
        })
    }

    /// [`ParsedReply::resolve`] of an output the caller owns: the text reply is cut from
    /// `output`'s buffer instead of copied out of it.
    pub fn resolve_owned(self, mut output: String) -> Option<Parsed> {
        Some(match self {
            ParsedReply::Text(span) => {
                let start = usize::try_from(span.start).ok()?;
                let end = start.checked_add(usize::try_from(span.length).ok()?)?;
                // Checked first: `truncate` and `drain` panic off a character boundary.
                output.get(start..end)?;
                output.truncate(end);
                output.drain(..start);
                Parsed::text(output)
            }
            ParsedReply::Tools(tools) => tools.into(),
        })
    }
}

/// One piece of the shown text a push into an `envelope` reply stream released, in order: the
/// separator between two text blocks, or a stretch of the output pushed so far. The stream
/// answers spans of the output rather than its bytes because the host holds the output
/// already: released text then crosses the boundary once, in the chunk, not a second time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(variant)
)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum ShownPiece {
    /// [`TEXT_BLOCK_SEPARATOR`].
    #[cfg_attr(feature = "wasmtime", component(name = "separator"))]
    Separator,
    /// A span of the concatenated chunks pushed so far.
    #[cfg_attr(feature = "wasmtime", component(name = "output"))]
    Output(TextSpan),
}

impl ShownPiece {
    /// The text `pieces` stand for, given the output pushed so far; `None` when a span is not
    /// a span of `output`.
    pub fn resolve(pieces: &[ShownPiece], output: &str) -> Option<String> {
        let mut text = String::new();
        for piece in pieces {
            match piece {
                ShownPiece::Separator => text.push_str(TEXT_BLOCK_SEPARATOR),
                ShownPiece::Output(span) => text.push_str(span.of(output)?),
            }
        }
        Some(text)
    }

    /// The bytes of shown text `pieces` stand for.
    pub fn length(pieces: &[ShownPiece]) -> usize {
        pieces
            .iter()
            .map(|piece| match piece {
                ShownPiece::Separator => TEXT_BLOCK_SEPARATOR.len(),
                ShownPiece::Output(span) => usize::try_from(span.length).unwrap_or(usize::MAX),
            })
            .fold(0, usize::saturating_add)
    }
}

/// What a finished `envelope` reply stream says: the shown text it had not released yet
/// (its released text followed by `tail` is the reply's [`Reply::shown_text`]) and `parse`'s
/// answer for the whole output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct StreamEnd {
    pub tail: String,
    pub reply: ParsedReply,
}

impl Parsed {
    /// A text reply (a text reply has no recoveries).
    pub fn text(text: String) -> Self {
        Self {
            reply: Reply::Text(text),
            recoveries: Vec::new(),
        }
    }
}

impl From<ToolReply> for Parsed {
    fn from(tools: ToolReply) -> Self {
        Self {
            reply: Reply::Tools(tools.blocks),
            recoveries: tools.recoveries,
        }
    }
}

/// Token counts, as Anthropic `usage` reports them: the agent's own counts when it reported
/// them, else the bridge's estimate. The cache fields are 0 when nothing was reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct Usage {
    #[cfg_attr(feature = "wasmtime", component(name = "input-tokens"))]
    pub input_tokens: u32,
    #[cfg_attr(feature = "wasmtime", component(name = "output-tokens"))]
    pub output_tokens: u32,
    #[serde(default)]
    #[cfg_attr(feature = "wasmtime", component(name = "cache-read-input-tokens"))]
    pub cache_read_input_tokens: u32,
    #[serde(default)]
    #[cfg_attr(feature = "wasmtime", component(name = "cache-creation-input-tokens"))]
    pub cache_creation_input_tokens: u32,
}

impl Usage {
    /// An estimate: input and output counts, nothing read from or written to a cache.
    pub fn estimated(input_tokens: u32, output_tokens: u32) -> Self {
        Self {
            input_tokens,
            output_tokens,
            cache_read_input_tokens: 0,
            cache_creation_input_tokens: 0,
        }
    }
}

/// The token estimate every transform uses: `max(1, ceil(chars / 4))`, chars counted as
/// Unicode scalar values.
pub fn estimate_tokens(text: &str) -> u32 {
    tokens_for_chars(text::count_chars(text) as u64)
}

/// [`estimate_tokens`] of a text of `chars` characters.
pub fn tokens_for_chars(chars: u64) -> u32 {
    u32::try_from(chars.div_ceil(4).max(1)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shown_text_joins_the_text_blocks_and_leaves_the_calls_out() {
        let call = |id: &str| {
            ReplyBlock::Call(ToolCall {
                id: id.into(),
                name: "Bash".into(),
                input: "{}".into(),
            })
        };
        assert_eq!(Reply::Text("  a\n".into()).shown_text(), "  a\n");
        assert_eq!(Reply::of_calls([]).shown_text(), "");
        let tools = Reply::Tools(vec![
            ReplyBlock::Text("Let me look.".into()),
            call("1"),
            ReplyBlock::Text("Then this.".into()),
            call("2"),
            ReplyBlock::Text("é".into()),
        ]);
        assert_eq!(tools.shown_text(), "Let me look.\n\nThen this.\n\né");
        assert_eq!(
            Reply::Tools(vec![call("1"), ReplyBlock::Text("After.".into())]).shown_text(),
            "After."
        );
    }

    #[test]
    fn a_text_span_resolves_only_within_its_text_and_on_character_boundaries() {
        let output = "  héllo  ";
        let span = |start, length| ParsedReply::Text(TextSpan { start, length });
        assert_eq!(
            span(2, 6).resolve(output),
            Some(Parsed::text("héllo".into()))
        );
        assert_eq!(
            span(2, 6).resolve_owned(output.to_owned()),
            Some(Parsed::text("héllo".into()))
        );
        // Past the end, overflowing, or inside the two bytes of `é`: not a span of the output.
        for (start, length) in [(2, 9), (u32::MAX, 2), (4, 1), (3, 1)] {
            assert_eq!(
                span(start, length).resolve(output),
                None,
                "{start}+{length}"
            );
            assert_eq!(
                span(start, length).resolve_owned(output.to_owned()),
                None,
                "{start}+{length}"
            );
        }
        assert_eq!(
            TextSpan::of_range(2..8),
            Some(TextSpan {
                start: 2,
                length: 6
            })
        );
    }

    #[test]
    fn reply_blocks_serialize_as_strings_and_calls_and_recoveries_sit_beside_the_reply() {
        let call = ToolCall {
            id: "devin_call_1".into(),
            name: "Bash".into(),
            input: "{}".into(),
        };
        let parsed = Parsed {
            reply: Reply::Tools(vec![
                ReplyBlock::Text("Let me look.".into()),
                ReplyBlock::Call(call.clone()),
            ]),
            recoveries: vec![Recovery::UnclosedEnvelope, Recovery::TrailingComma],
        };
        let json = serde_json::to_value(&parsed).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({
                "kind": "tools",
                "value": ["Let me look.", {"id": "devin_call_1", "name": "Bash", "input": "{}"}],
                "recoveries": ["unclosed_envelope", "trailing_comma"],
            })
        );
        assert_eq!(
            serde_json::from_value::<Parsed>(json).expect("deserializes"),
            parsed
        );
        // Without recoveries the encoding is the reply's alone.
        let plain = Parsed::text("hi".into());
        assert_eq!(
            serde_json::to_value(&plain).expect("serializes"),
            serde_json::json!({"kind": "text", "value": "hi"})
        );
        assert_eq!(parsed.reply.calls().collect::<Vec<_>>(), [&call]);
        assert_eq!(Reply::Text("x".into()).calls().count(), 0);
        for kind in Recovery::ALL {
            assert_eq!(
                serde_json::to_value(kind).expect("serializes"),
                serde_json::json!(kind.as_str())
            );
        }
    }

    #[test]
    fn estimate_is_ceiling_of_quarter_with_floor_one() {
        assert_eq!(estimate_tokens(""), 1);
        assert_eq!(estimate_tokens("abc"), 1);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens("ééééé"), 2, "counts chars, not bytes");
    }
}
