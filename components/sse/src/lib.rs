//! Rendering of finished replies and failures in the Anthropic Messages wire formats, the
//! cleaning of agent error text before it goes into an error body, and the framing of event
//! streams read from untrusted servers (`parse_events`).
//!
//! The bridge collects a whole agent turn before it answers, so a reply is always complete
//! when it reaches this crate: a streamed answer is `message_start` (sent early by the host,
//! with `ping`s while the turn runs), then exactly one content block (start, one delta, stop),
//! `message_delta` and `message_stop`. A non-streaming answer is one Messages JSON body.
//!
//! Every function is total: no input makes it panic, and all JSON goes through `serde_json`
//! so strings are escaped correctly. Output buffers are sized from the reply up front, so
//! rendering is linear in the size of the reply.

mod agent_error;
mod errors;
mod events;
mod frame;
mod tool_input;
/// The component export (a thin shell); off when another component embeds this library.
#[cfg(all(target_arch = "wasm32", feature = "export"))]
mod wasm;
mod wire;

pub use agent_error::agent_error_message;
pub use devin_bridge_types::{error_type, Failure, Reply, ToolCall, Usage};
pub use events::{codes, parse_events, SseEvent, SseFrames};

use frame::Frame;
use tool_input::ToolInput;

/// What `message_start` and the JSON body say about the message as a whole.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MessageHead {
    pub id: String,
    pub model: String,
    pub usage: Usage,
}

/// Room for the fixed parts of an event stream or a body (event names, keys, ids).
const FRAME_OVERHEAD: usize = 768;

/// The `message_start` event; the host sends it as soon as the turn starts.
pub fn stream_start(head: &MessageHead) -> String {
    let mut frame = Frame::with_capacity(head.id.len() + head.model.len() + FRAME_OVERHEAD);
    write_start(&mut frame, head);
    frame.into_string()
}

/// A `ping` event, sent while the agent turn runs so idle timeouts do not trip.
pub fn stream_ping() -> String {
    let mut frame = Frame::with_capacity(64);
    frame.event("ping", &wire::Ping::new());
    frame.into_string()
}

/// The events that follow `message_start` for a finished reply: one content block (start,
/// a single delta carrying the whole content, stop), `message_delta` and `message_stop`.
pub fn stream_finish(reply: &Reply, usage: &Usage) -> String {
    let mut frame = Frame::with_capacity(reply_size(reply) + FRAME_OVERHEAD);
    write_finish(&mut frame, reply, usage);
    frame.into_string()
}

/// The whole SSE body: `stream_start(head)` followed by `stream_finish(reply, &head.usage)`.
pub fn render_stream(head: &MessageHead, reply: &Reply) -> String {
    let capacity = head.id.len() + head.model.len() + reply_size(reply) + 2 * FRAME_OVERHEAD;
    let mut frame = Frame::with_capacity(capacity);
    write_start(&mut frame, head);
    write_finish(&mut frame, reply, &head.usage);
    frame.into_string()
}

/// A non-streaming Messages response body.
///
/// A tool call's `input` is embedded as the JSON object it holds (compacted, key order
/// kept). Input that is not a JSON object becomes `{}`: the envelope parser only produces
/// objects, and an object is the only shape Anthropic clients accept there.
pub fn render_json(head: &MessageHead, reply: &Reply) -> String {
    let capacity = head.id.len() + head.model.len() + reply_size(reply) + FRAME_OVERHEAD;
    let mut frame = Frame::with_capacity(capacity);
    match reply {
        Reply::Text(text) => {
            let block = wire::BodyBlock::Text { text };
            frame.json(&wire::Body::new(head, block, wire::StopReason::EndTurn));
        }
        Reply::Tool(call) => {
            let input = ToolInput::parse(&call.input);
            let block = wire::BodyBlock::ToolUse {
                id: &call.id,
                name: &call.name,
                input: &input,
            };
            frame.json(&wire::Body::new(head, block, wire::StopReason::ToolUse));
        }
    }
    frame.into_string()
}

/// An SSE `error` event, for a failure after the stream has started.
pub fn error_event(failure: &Failure) -> String {
    let mut frame = Frame::with_capacity(failure.message.len() + 128);
    frame.event("error", &errors::wire_error(failure));
    frame.into_string()
}

/// An Anthropic error body, for a failure before any byte of the answer was sent.
pub fn error_body(failure: &Failure) -> String {
    let mut frame = Frame::with_capacity(failure.message.len() + 96);
    frame.json(&errors::wire_error(failure));
    frame.into_string()
}

/// Bytes of reply content, before JSON escaping; the buffers grow if escaping needs more.
fn reply_size(reply: &Reply) -> usize {
    match reply {
        Reply::Text(text) => text.len(),
        // The input appears once in the delta (escaped as a string) and the id/name once.
        Reply::Tool(call) => call.input.len() + call.id.len() + call.name.len(),
    }
}

fn write_start(frame: &mut Frame, head: &MessageHead) {
    frame.event("message_start", &wire::MessageStart::new(head));
}

fn write_finish(frame: &mut Frame, reply: &Reply, usage: &Usage) {
    let stop_reason = match reply {
        Reply::Text(text) => {
            frame.event("content_block_start", &wire::BlockStart::text());
            frame.event("content_block_delta", &wire::BlockDelta::text(text));
            wire::StopReason::EndTurn
        }
        Reply::Tool(call) => {
            let input = ToolInput::parse(&call.input);
            frame.event(
                "content_block_start",
                &wire::BlockStart::tool_use(&call.id, &call.name),
            );
            frame.event(
                "content_block_delta",
                &wire::BlockDelta::input_json(input.json_text()),
            );
            wire::StopReason::ToolUse
        }
    };
    frame.event("content_block_stop", &wire::BlockStop::new());
    frame.event(
        "message_delta",
        &wire::MessageDelta::new(stop_reason, usage.output_tokens),
    );
    frame.event("message_stop", &wire::MessageStop::new());
}

#[cfg(test)]
mod tests;
