//! Rendering of finished replies and failures in the Anthropic Messages wire formats, the
//! cleaning of agent error text before it goes into an error body, and the framing of event
//! streams read from untrusted servers (`parse_events`).
//!
//! The bridge collects a whole agent turn before it answers, so a reply is always complete
//! when it reaches this crate. A streamed answer is `message_start` (sent early by the host,
//! with `ping`s while the turn runs), then the content blocks, `message_delta` and
//! `message_stop`:
//! - a text reply is one text block at index 0 (start, one `text_delta` with the whole text,
//!   stop) and stops with `end_turn`;
//! - a reply that calls tools is one content block per reply block at indexes 0..n, in the
//!   reply's order, one block after the other: a text block (start, one `text_delta`, stop)
//!   for each stretch of prose, a `tool_use` block for each call (a start with an empty
//!   `input`, one `input_json_delta` with the whole compacted input, a stop); it stops with
//!   `tool_use`;
//! - a block list without a call (never produced by the envelope parser) stops with
//!   `end_turn`: there is nothing for the client to run.
//!
//! A non-streaming answer is one Messages JSON body whose `content` holds the same blocks.
//! When the request asked for a safeguard verdict, the judge's answer is the stream's
//! final `message_delta.delta.safeguard_results`, or the body's top-level
//! `safeguard_results` (see `safeguard` for the shape).
//! Every `usage` object carries all four counts (`input_tokens`,
//! `cache_creation_input_tokens`, `cache_read_input_tokens`, `output_tokens`).
//!
//! Every function is total: no input makes it panic. Strings are escaped exactly as
//! `serde_json` escapes them: the small events are written by `serde_json`, and the parts that
//! carry the reply's content by this crate's own escaper, which writes the same bytes without
//! `serde_json`'s byte-at-a-time loop. The output buffer is sized from the reply up front
//! (content plus room for escapes), so rendering is linear in the size of the reply and the
//! buffer is usually allocated once; it is a `String` from the start, so the answer is never
//! scanned again to check that it is UTF-8.

// The table of the transforms' functions names each library by its crate name, this one too
// (the component crate's exports are made from it).
extern crate self as devin_bridge_sse;

mod agent_error;
mod errors;
mod escape;
mod events;
mod frame;
mod safeguard;
mod tool_input;
mod wire;

pub use agent_error::agent_error_message;
pub use devin_bridge_types::{
    error_type, Failure, MessageHead, Reply, ReplyBlock, SafeguardStatus, SseEvent, SseFrames,
    ToolCall, Usage,
};
pub use events::{codes, parse_events};

use frame::Frame;
use tool_input::ToolInput;

/// Room for the fixed parts of an event stream or a body (event names, keys, ids).
const FRAME_OVERHEAD: usize = 768;

/// Room for the fixed parts of one tool block: its three events, or its object in a body.
const BLOCK_OVERHEAD: usize = 384;

/// The `message_start` event; the host sends it as soon as the turn starts.
pub fn stream_start(head: &MessageHead) -> String {
    let mut frame = Frame::with_capacity(head_size(head) + FRAME_OVERHEAD);
    write_start(&mut frame, head);
    frame.into_string()
}

/// A `ping` event, sent while the agent turn runs so idle timeouts do not trip.
pub fn stream_ping() -> String {
    let mut frame = Frame::with_capacity(64);
    frame.event("ping", &wire::Ping::new());
    frame.into_string()
}

/// The events that follow `message_start` for a finished reply: its content blocks (each a
/// start, a single delta carrying the whole content, a stop), `message_delta` with all four
/// counts of `usage` (and `safeguard_results` when there is a `safeguard`), and
/// `message_stop`.
pub fn stream_finish(reply: &Reply, usage: &Usage, safeguard: Option<&SafeguardStatus>) -> String {
    let capacity = content_size(reply)
        .saturating_add(safeguard_size(safeguard))
        .saturating_add(FRAME_OVERHEAD);
    let mut frame = Frame::with_capacity(capacity);
    write_finish(&mut frame, reply, usage, safeguard);
    frame.into_string()
}

/// The whole SSE body: `stream_start(head)` followed by
/// `stream_finish(reply, &head.usage, safeguard)`.
/// Text of a reply streamed as it is written, into its one text block (index 0): with `first`,
/// the block's `content_block_start` and then, for a non-empty `text`, one `text_delta`.
pub fn stream_text(first: bool, text: &str) -> String {
    let mut frame = Frame::with_capacity(text.len().saturating_add(text.len() / 16) + 256);
    if first {
        frame.event("content_block_start", &wire::BlockStart::text(0));
    }
    if !text.is_empty() {
        frame.open_event("content_block_delta");
        wire::text_delta(&mut frame, 0, text);
        frame.close_event();
    }
    frame.into_string()
}

/// The end of a reply whose text block [`stream_text`] opened: the `tail` (the text not
/// streamed yet) as a last `text_delta` when non-empty, the text block's stop, each of `calls`
/// as a tool_use block from index 1, `message_delta` (`tool_use` when there is a call,
/// `end_turn` otherwise; with `safeguard`, its `safeguard_results`) and `message_stop`.
pub fn stream_finish_after_text(
    tail: &str,
    calls: &[ToolCall],
    usage: &Usage,
    safeguard: Option<&SafeguardStatus>,
) -> String {
    let calls_size = calls
        .iter()
        .map(|call| {
            let bytes = call
                .input
                .len()
                .saturating_add(call.id.len() + call.name.len());
            bytes
                .saturating_add(bytes / 4)
                .saturating_add(BLOCK_OVERHEAD)
        })
        .fold(0, usize::saturating_add);
    let capacity = tail
        .len()
        .saturating_add(tail.len() / 16)
        .saturating_add(calls_size)
        .saturating_add(safeguard_size(safeguard))
        .saturating_add(FRAME_OVERHEAD);
    let mut frame = Frame::with_capacity(capacity);
    if !tail.is_empty() {
        frame.open_event("content_block_delta");
        wire::text_delta(&mut frame, 0, tail);
        frame.close_event();
    }
    frame.event("content_block_stop", &wire::BlockStop::new(0));
    for (offset, call) in calls.iter().enumerate() {
        write_tool_block(&mut frame, offset.saturating_add(1), call);
    }
    let stop = if calls.is_empty() {
        wire::StopReason::EndTurn
    } else {
        wire::StopReason::ToolUse
    };
    frame.event(
        "message_delta",
        &wire::MessageDelta::new(stop, usage, safeguard),
    );
    frame.event("message_stop", &wire::MessageStop::new());
    frame.into_string()
}

pub fn render_stream(
    head: &MessageHead,
    reply: &Reply,
    safeguard: Option<&SafeguardStatus>,
) -> String {
    let capacity = head_size(head)
        .saturating_add(content_size(reply))
        .saturating_add(safeguard_size(safeguard))
        .saturating_add(2 * FRAME_OVERHEAD);
    let mut frame = Frame::with_capacity(capacity);
    write_start(&mut frame, head);
    write_finish(&mut frame, reply, &head.usage, safeguard);
    frame.into_string()
}

/// A non-streaming Messages response body.
///
/// The content blocks are the reply's, in its order. Each tool call's `input` is embedded as the JSON object it holds (compacted, key order
/// kept). Input that is not a JSON object becomes `{}`: the envelope parser only produces
/// objects, and an object is the only shape Anthropic clients accept there.
pub fn render_json(
    head: &MessageHead,
    reply: &Reply,
    safeguard: Option<&SafeguardStatus>,
) -> String {
    let capacity = head_size(head)
        .saturating_add(content_size(reply))
        .saturating_add(safeguard_size(safeguard))
        .saturating_add(FRAME_OVERHEAD);
    let mut frame = Frame::with_capacity(capacity);
    wire::body(&mut frame, head, reply, safeguard);
    frame.into_string()
}

/// Room for `safeguard_results`: each verdict's id, explanation and rule, plus its keys.
fn safeguard_size(safeguard: Option<&SafeguardStatus>) -> usize {
    use devin_bridge_types::CallVerdict;
    match safeguard {
        None => 0,
        Some(SafeguardStatus::Unsupported) => 96,
        Some(SafeguardStatus::Unavailable(reason)) => reason.len().saturating_add(128),
        Some(SafeguardStatus::Available(verdicts)) => verdicts
            .iter()
            .map(|verdict| {
                let text = match &verdict.verdict {
                    CallVerdict::Evaluated(evaluation) => evaluation
                        .explanation
                        .len()
                        .saturating_add(evaluation.cited_rule.as_ref().map_or(0, String::len)),
                    CallVerdict::Skipped => 0,
                    CallVerdict::Unavailable(reason) => reason.len(),
                };
                verdict.id.len().saturating_add(text).saturating_add(160)
            })
            .fold(128, usize::saturating_add),
    }
}

/// An SSE `error` event, for a failure after the stream has started.
pub fn error_event(failure: &Failure) -> String {
    let mut frame = Frame::with_capacity(failure.message.len().saturating_add(128));
    frame.event("error", &errors::wire_error(failure));
    frame.into_string()
}

/// An Anthropic error body, for a failure before any byte of the answer was sent.
pub fn error_body(failure: &Failure) -> String {
    let mut frame = Frame::with_capacity(failure.message.len().saturating_add(96));
    frame.json(&errors::wire_error(failure));
    frame.into_string()
}

fn head_size(head: &MessageHead) -> usize {
    head.id.len().saturating_add(head.model.len())
}

/// Bytes to reserve for a reply's content: the content, room for its escapes and the fixed
/// parts of each block. A guess that falls short costs one reallocation, never correctness.
fn content_size(reply: &Reply) -> usize {
    let bytes = reply.content_bytes();
    match reply {
        // Prose needs an escape every few dozen bytes, each one to five bytes longer than
        // the character it stands for.
        Reply::Text(_) => bytes.saturating_add(bytes / 16),
        // JSON quotes every key and string, and in `partial_json` each quote gains a backslash.
        Reply::Tools(blocks) => bytes
            .saturating_add(bytes / 4)
            .saturating_add(blocks.len().saturating_mul(BLOCK_OVERHEAD)),
    }
}

fn write_start(frame: &mut Frame, head: &MessageHead) {
    frame.event("message_start", &wire::MessageStart::new(head));
}

fn write_finish(
    frame: &mut Frame,
    reply: &Reply,
    usage: &Usage,
    safeguard: Option<&SafeguardStatus>,
) {
    match reply {
        Reply::Text(text) => write_text_block(frame, 0, text),
        Reply::Tools(blocks) => {
            // One block after the other, each complete before the next starts: that is how
            // Anthropic streams text beside several tool calls, and clients assemble each
            // block from the deltas of its own index.
            for (index, block) in blocks.iter().enumerate() {
                match block {
                    ReplyBlock::Text(text) => write_text_block(frame, index, text),
                    ReplyBlock::Call(call) => write_tool_block(frame, index, call),
                }
            }
        }
    }
    frame.event(
        "message_delta",
        &wire::MessageDelta::new(wire::StopReason::of(reply), usage, safeguard),
    );
    frame.event("message_stop", &wire::MessageStop::new());
}

/// A tool_use block at `index`: its start, one `input_json_delta` with the whole input, its
/// stop.
fn write_tool_block(frame: &mut Frame, index: usize, call: &ToolCall) {
    let input = ToolInput::parse(&call.input);
    frame.event(
        "content_block_start",
        &wire::BlockStart::tool_use(index, &call.id, &call.name),
    );
    frame.open_event("content_block_delta");
    wire::input_json_delta(frame, index, input.json_text());
    frame.close_event();
    frame.event("content_block_stop", &wire::BlockStop::new(index));
}

/// A text block at `index`: its start, one `text_delta` with the whole text, its stop.
fn write_text_block(frame: &mut Frame, index: usize, text: &str) {
    frame.event("content_block_start", &wire::BlockStart::text(index));
    frame.open_event("content_block_delta");
    wire::text_delta(frame, index, text);
    frame.close_event();
    frame.event("content_block_stop", &wire::BlockStop::new(index));
}

#[cfg(test)]
mod tests;
