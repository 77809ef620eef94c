#![no_main]
//! SSE: the first byte picks text or tool reply and the status of an error; the rest is the
//! text (or the tool input, or the agent error text); native vs wasm for every function.
//! The raw bytes after the first are also an event stream for `parse_events` (the first byte
//! picks the size limit and where the stream is cut in two): native vs wasm on the whole
//! buffer, and natively the promise that the cut changes nothing.

use devin_bridge_engine::{Call, MessageHead};
use devin_bridge_fuzz::{differential, outcome};
use devin_bridge_types::{Failure, Reply, ToolCall, Usage};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(init: devin_bridge_fuzz::prepare(devin_bridge_engine::TransformKind::Sse), |data: &[u8]| {
    let Some((selector, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest).into_owned();
    let reply = if selector & 1 == 0 {
        Reply::Text(text.clone())
    } else {
        Reply::Tool(ToolCall { id: "devin_call_0123456789abcdef".into(), name: "Bash".into(), input: text.clone() })
    };
    let usage = Usage { input_tokens: u32::from(*selector) * 7, output_tokens: u32::from(*selector) };
    let head = MessageHead { id: "msg_fuzz".into(), model: text.chars().take(40).collect(), usage };
    let native_head = devin_bridge_sse::MessageHead { id: head.id.clone(), model: head.model.clone(), usage };
    let statuses = [400u16, 401, 403, 404, 413, 429, 499, 500, 502, 504, 529, 0, 600];
    let failure = Failure { code: "fuzz".into(), message: text.clone(), status: statuses[usize::from(*selector >> 1) % statuses.len()], repairable: false };

    differential(Call::RenderStream { head: head.clone(), reply: reply.clone() }, json!({ "ok": devin_bridge_sse::render_stream(&native_head, &reply) }));
    differential(Call::RenderJson { head: head.clone(), reply: reply.clone() }, json!({ "ok": devin_bridge_sse::render_json(&native_head, &reply) }));
    differential(Call::StreamFinish { reply: reply.clone(), usage }, json!({ "ok": devin_bridge_sse::stream_finish(&reply, &usage) }));
    differential(Call::ErrorEvent { failure: failure.clone() }, json!({ "ok": devin_bridge_sse::error_event(&failure) }));
    differential(Call::ErrorBody { failure: failure.clone() }, json!({ "ok": devin_bridge_sse::error_body(&failure) }));
    differential(Call::AgentErrorMessage { raw: text.clone() }, json!({ "ok": devin_bridge_sse::agent_error_message(&text) }));

    let limit = [16u32, 256, 4096, u32::MAX][usize::from(*selector & 3)];
    let whole = devin_bridge_sse::parse_events(rest, limit);
    differential(Call::ParseEvents { buffer: rest.to_vec(), max_event_bytes: limit }, outcome(&whole));
    let (first, second) = rest.split_at(usize::from(*selector) % (rest.len() + 1));
    let split = devin_bridge_sse::parse_events(first, limit).and_then(|head| {
        let mut buffer = head.tail;
        buffer.extend_from_slice(second);
        devin_bridge_sse::parse_events(&buffer, limit).map(|tail| {
            let mut events = head.events;
            events.extend(tail.events);
            devin_bridge_sse::SseFrames { events, tail: tail.tail }
        })
    });
    assert_eq!(whole.map_err(|f| f.code), split.map_err(|f| f.code), "a cut at byte {} changed the framing", first.len());
});
