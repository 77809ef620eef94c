#![no_main]
//! SSE: the first byte picks a text reply or 0..=4 blocks of a reply that calls tools (with its
//! top bit, every other one prose), the status of an error and the
//! usage counts; the rest is the text (or, cut at U+001E, the calls' inputs, or the agent
//! error text); native vs wasm for every function, and natively the shape of what a reply
//! renders to: one start, delta and stop per content block, indexes 0..n in order, and a JSON
//! body with n blocks.
//! The raw bytes after the first are also an event stream for `parse_events` (the first byte
//! picks the size limit and where the stream is cut in two): native vs wasm on the whole
//! buffer, and natively the promise that the cut changes nothing.

use devin_bridge_engine::{Call, MessageHead};
use devin_bridge_fuzz::differential;
use devin_bridge_types::{Failure, Reply, ReplyBlock, ToolCall, Usage};
use libfuzzer_sys::fuzz_target;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::HashMap;

/// The tool names the calls cycle through.
const NAMES: [&str; 4] = ["Bash", "Read", "Edit", "Grep"];

fuzz_target!(init: devin_bridge_fuzz::prepare(devin_bridge_engine::TransformKind::Sse), |data: &[u8]| {
    let Some((selector, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest).into_owned();
    let reply = if selector & 1 == 0 {
        Reply::Text(text.clone())
    } else {
        // Input i is the i-th piece of the text cut at U+001E, or the whole text when there
        // are fewer pieces: valid objects, broken JSON and non-objects all occur.
        let pieces: Vec<&str> = text.split('\u{1e}').collect();
        let count = usize::from(*selector >> 1) % 5;
        // With the top bit set, every other block is prose (the piece as text).
        let prose = selector & 0x80 != 0;
        Reply::Tools(
            (0..count)
                .map(|i| {
                    let piece = pieces.get(i).copied().unwrap_or(text.as_str()).to_owned();
                    if prose && i % 2 == 1 {
                        return ReplyBlock::Text(piece);
                    }
                    ReplyBlock::Call(ToolCall {
                        id: format!("devin_call_{i:016x}"),
                        name: NAMES[i % NAMES.len()].into(),
                        input: piece,
                    })
                })
                .collect(),
        )
    };
    let byte = u32::from(*selector);
    let usage = Usage { input_tokens: byte * 7, output_tokens: byte, cache_read_input_tokens: byte * 3, cache_creation_input_tokens: byte * 5 };
    let head = MessageHead { id: "msg_fuzz".into(), model: text.chars().take(40).collect(), usage };
    let statuses = [400u16, 401, 403, 404, 413, 429, 499, 500, 502, 504, 529, 0, 600];
    let failure = Failure { code: "fuzz".into(), message: text.clone(), status: statuses[usize::from(*selector >> 1) % statuses.len()], repairable: false };

    let stream = devin_bridge_sse::render_stream(&head, &reply, None);
    let body = devin_bridge_sse::render_json(&head, &reply, None);
    check_stream(&stream, &reply, &usage);
    check_body(&body, &reply, &usage);

    differential(Call::RenderStream { head: head.clone(), reply: reply.clone(), safeguard: None });
    differential(Call::RenderJson { head: head.clone(), reply: reply.clone(), safeguard: None });
    differential(Call::StreamFinish { reply: reply.clone(), usage, safeguard: None });
    differential(Call::ErrorEvent { failure: failure.clone() });
    differential(Call::ErrorBody { failure: failure.clone() });
    differential(Call::AgentErrorMessage { raw: text.clone() });

    let limit = [16u32, 256, 4096, u32::MAX][usize::from(*selector & 3)];
    let whole = devin_bridge_sse::parse_events(rest, limit);
    differential(Call::ParseEvents { buffer: rest.to_vec(), max_event_bytes: limit });
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

/// How many content blocks a reply renders to.
fn block_count(reply: &Reply) -> usize {
    match reply {
        Reply::Text(_) => 1,
        Reply::Tools(blocks) => blocks.len(),
    }
}

/// `end_turn` unless the reply asks for at least one tool.
fn stop_reason(reply: &Reply) -> &'static str {
    if reply.calls().next().is_some() {
        "tool_use"
    } else {
        "end_turn"
    }
}

/// The JSON text a tool block's input must be: the call's input compacted when it is exactly
/// one JSON object, else `{}`. Compared as text, not as `Value`: inputs may nest deeper than
/// `Value` parses, and the crate must keep key order and number spelling anyway.
fn expected_input(input: &str) -> String {
    serde_json::from_str::<&RawValue>(input)
        .ok()
        .filter(|raw| raw.get().starts_with('{'))
        .map_or_else(|| "{}".to_owned(), |raw| reference_compact(raw.get()))
}

/// A plain character-by-character removal of the whitespace between JSON tokens (valid JSON
/// only), the reference the crate's faster compaction is held to.
fn reference_compact(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for ch in json.chars() {
        if in_string {
            out.push(ch);
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == '"' {
                in_string = false;
            }
        } else if !matches!(ch, ' ' | '\t' | '\n' | '\r') {
            in_string = ch == '"';
            out.push(ch);
        }
    }
    out
}

/// All four counts, with `output_tokens` as given.
fn usage_json(usage: &Usage, output_tokens: u32) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": output_tokens,
    })
}

/// The SSE body: every event is `event:` + one `data:` line of JSON whose `type` is the event
/// name; `message_start`, then per block i (0..n, in order) a start, one delta and a stop,
/// then `message_delta` and `message_stop`; the deltas carry the reply.
fn check_stream(stream: &str, reply: &Reply, usage: &Usage) {
    let body = stream
        .strip_suffix("\n\n")
        .expect("the stream ends with a blank line");
    let events: Vec<(&str, Value)> = body
        .split("\n\n")
        .map(|event| {
            let (name, data) = event
                .split_once('\n')
                .expect("an event line and a data line");
            let name = name.strip_prefix("event: ").expect("event line");
            let data = data.strip_prefix("data: ").expect("data line");
            assert!(!data.contains('\n'), "data spans one line");
            let data: Value = serde_json::from_str(data).expect("data is JSON");
            assert_eq!(data["type"], name, "data type is the event name");
            (name, data)
        })
        .collect();
    let blocks = block_count(reply);
    assert_eq!(
        events.len(),
        3 * blocks + 3,
        "event count for {blocks} blocks"
    );
    assert_eq!(events[0].0, "message_start");
    assert_eq!(events[0].1["message"]["usage"], usage_json(usage, 1));
    for block in 0..blocks {
        let [start, delta, stop] = [
            &events[1 + 3 * block],
            &events[2 + 3 * block],
            &events[3 + 3 * block],
        ];
        assert_eq!(
            [start.0, delta.0, stop.0],
            [
                "content_block_start",
                "content_block_delta",
                "content_block_stop"
            ]
        );
        for (_, data) in [start, delta, stop] {
            assert_eq!(data["index"], block, "block index");
        }
        match reply {
            Reply::Text(text) => assert_eq!(delta.1["delta"]["text"].as_str(), Some(text.as_str())),
            Reply::Tools(blocks) => {
                let call = match &blocks[block] {
                    ReplyBlock::Text(text) => {
                        assert_eq!(delta.1["delta"]["text"].as_str(), Some(text.as_str()));
                        continue;
                    }
                    ReplyBlock::Call(call) => call,
                };
                assert_eq!(
                    start.1["content_block"]["id"].as_str(),
                    Some(call.id.as_str())
                );
                assert_eq!(start.1["content_block"]["input"], json!({}));
                let partial = delta.1["delta"]["partial_json"]
                    .as_str()
                    .expect("partial_json");
                assert_eq!(partial, expected_input(&call.input));
            }
        }
    }
    let (name, message_delta) = &events[events.len() - 2];
    assert_eq!(*name, "message_delta");
    assert_eq!(message_delta["delta"]["stop_reason"], stop_reason(reply));
    assert_eq!(
        message_delta["usage"],
        usage_json(usage, usage.output_tokens)
    );
    assert_eq!(events[events.len() - 1].0, "message_stop");
}

/// The JSON body: one content block per block of the stream, in order, and the same usage.
/// Read as maps of raw values, so an input nested deeper than `Value` parses stays checkable.
fn check_body(body: &str, reply: &Reply, usage: &Usage) {
    type Object<'a> = HashMap<String, &'a RawValue>;
    let value = |raw: Option<&&RawValue>| -> Value {
        serde_json::from_str(raw.expect("field present").get()).expect("field is JSON")
    };
    let body: Object = serde_json::from_str(body).expect("the body is a JSON object");
    let content: Vec<Object> = serde_json::from_str(body.get("content").expect("content").get())
        .expect("content is a list of objects");
    assert_eq!(content.len(), block_count(reply), "content blocks");
    match reply {
        Reply::Text(text) => assert_eq!(value(content[0].get("text")), json!(text)),
        Reply::Tools(blocks) => {
            for (block, expected) in content.iter().zip(blocks) {
                let call = match expected {
                    ReplyBlock::Text(text) => {
                        assert_eq!(value(block.get("type")), "text");
                        assert_eq!(value(block.get("text")), json!(text));
                        continue;
                    }
                    ReplyBlock::Call(call) => call,
                };
                assert_eq!(value(block.get("type")), "tool_use");
                assert_eq!(value(block.get("id")), json!(call.id));
                assert_eq!(
                    block.get("input").expect("input").get(),
                    expected_input(&call.input)
                );
            }
        }
    }
    assert_eq!(value(body.get("stop_reason")), stop_reason(reply));
    assert_eq!(
        value(body.get("usage")),
        usage_json(usage, usage.output_tokens)
    );
}
