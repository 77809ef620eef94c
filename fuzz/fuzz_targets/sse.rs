#![no_main]
//! SSE: the first byte picks text or tool reply and the status of an error; the rest is the
//! text (or the tool input, or the agent error text); native vs wasm for every function.

use devin_bridge::engine::{Call, MessageHead};
use devin_bridge_fuzz::differential;
use devin_bridge_types::{Failure, Reply, ToolCall, Usage};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(init: devin_bridge_fuzz::prepare(devin_bridge::engine::TransformKind::Sse), |data: &[u8]| {
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
});
