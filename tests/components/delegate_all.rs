// Included with `include!` inside a test component whose world exports all four transform
// interfaces: the real envelope, sse and model-alias libraries, converted to and from the
// generated WIT types (the serializer's conversions are in `delegate.rs`, included as well).

use devin_bridge::transforms::types::{Reply, ToolCall, Usage};
use exports::devin_bridge::transforms::model_alias::ResolvedModel;
use exports::devin_bridge::transforms::sse::{MessageHead, SseEvent, SseFrames};

include!("delegate.rs");

fn wit_failure(f: devin_bridge_types::Failure) -> Failure {
    Failure { code: f.code, message: f.message, status: f.status, repairable: f.repairable }
}

fn plain_failure(f: &Failure) -> devin_bridge_types::Failure {
    devin_bridge_types::Failure {
        code: f.code.clone(),
        message: f.message.clone(),
        status: f.status,
        repairable: f.repairable,
    }
}

fn plain_reply(reply: &Reply) -> devin_bridge_types::Reply {
    match reply {
        Reply::Text(text) => devin_bridge_types::Reply::Text(text.clone()),
        Reply::Tools(calls) => devin_bridge_types::Reply::Tools(
            calls
                .iter()
                .map(|call| devin_bridge_types::ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                })
                .collect(),
        ),
    }
}

fn plain_usage(usage: &Usage) -> devin_bridge_types::Usage {
    devin_bridge_types::Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cache_read_input_tokens: usage.cache_read_input_tokens,
        cache_creation_input_tokens: usage.cache_creation_input_tokens,
    }
}

fn plain_head(head: &MessageHead) -> devin_bridge_sse::MessageHead {
    devin_bridge_sse::MessageHead {
        id: head.id.clone(),
        model: head.model.clone(),
        usage: plain_usage(&head.usage),
    }
}

fn real_parse(output: &str, tools: &str, id_seed: &str, max_calls: u32) -> Result<Reply, Failure> {
    match devin_bridge_envelope::parse(output, tools, id_seed, max_calls) {
        Ok(devin_bridge_types::Reply::Text(text)) => Ok(Reply::Text(text)),
        Ok(devin_bridge_types::Reply::Tools(calls)) => Ok(Reply::Tools(
            calls
                .into_iter()
                .map(|call| ToolCall { id: call.id, name: call.name, input: call.input })
                .collect(),
        )),
        Err(failure) => Err(wit_failure(failure)),
    }
}

fn real_parse_events(buffer: &[u8], max_event_bytes: u32) -> Result<SseFrames, Failure> {
    devin_bridge_sse::parse_events(buffer, max_event_bytes)
        .map(|frames| SseFrames {
            events: frames
                .events
                .into_iter()
                .map(|e| SseEvent { event: e.event, data: e.data, id: e.id })
                .collect(),
            tail: frames.tail,
        })
        .map_err(wit_failure)
}

fn real_resolve(requested: &str, catalog: &str) -> Result<ResolvedModel, Failure> {
    devin_bridge_model_alias::resolve(requested, catalog)
        .map(|m| ResolvedModel { family: m.family, model_uid: m.model_uid, label: m.label, acp_id: m.acp_id })
        .map_err(wit_failure)
}

/// `jsonschema` (inside the envelope library) reaches `getrandom`; the components are built
/// with `--cfg getrandom_backend="custom"`, and this is the backend the real envelope's export
/// shell would otherwise provide.
#[no_mangle]
unsafe extern "Rust" fn __getrandom_v03_custom(dest: *mut u8, len: usize) -> Result<(), getrandom::Error> {
    // SAFETY: getrandom guarantees `dest` is valid for writes of `len` bytes.
    unsafe { core::ptr::write_bytes(dest, 0x5a, len) };
    Ok(())
}
