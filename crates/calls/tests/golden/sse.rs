//! The event stream's fixtures cover every function and every way framing fails, and its
//! renderings, read back, follow the Messages API exactly.

use std::collections::BTreeSet;

use devin_bridge_calls::{Call, TransformKind};
use devin_bridge_types::{MessageHead, Reply, ReplyBlock, Usage};
use serde_json::{json, Value};

use crate::fixtures::{calls_of, error_codes_of, fixtures};
use crate::text_of;

const CALLS: [&str; 11] = [
    "stream_start",
    "stream_ping",
    "stream_finish",
    "stream_text",
    "stream_finish_after_text",
    "render_stream",
    "render_json",
    "error_event",
    "error_body",
    "agent_error_message",
    "parse_events",
];

#[test]
fn sse_fixtures_cover_every_function() {
    let cases = fixtures(TransformKind::Sse);
    let seen = calls_of(&cases);
    for call in CALLS {
        assert!(seen.contains(call), "no fixture calls `{call}`");
    }
    // A swapped-in component is held to these cases, so each way framing can fail is shown.
    let codes = error_codes_of(&cases);
    for code in [
        devin_bridge_sse::codes::SSE_EVENT_TOO_LARGE,
        devin_bridge_sse::codes::SSE_INVALID_UTF8,
    ] {
        assert!(codes.contains(code), "no fixture expects {code}");
    }
    assert!(
        cases.iter().any(|fixture| fixture.call == "parse_events"
            && fixture
                .case
                .expect
                .pointer("/ok/tail")
                .and_then(Value::as_array)
                .is_some_and(|tail| !tail.is_empty())),
        "no parse_events fixture leaves a tail"
    );
}

/// Every `render_stream` fixture, parsed back event by event: the `event:` name equals the
/// JSON `type`, and the events follow the Messages lifecycle exactly (one start, delta and stop
/// per content block, blocks numbered from 0 in order).
#[test]
fn streamed_fixtures_follow_the_lifecycle() {
    let mut checked = 0;
    let mut tool_blocks = BTreeSet::new();
    for fixture in fixtures(TransformKind::Sse) {
        let Call::RenderStream { head, reply, .. } = &fixture.case.call else {
            continue;
        };
        let path = fixture.path.display();
        let body = text_of(&fixture.case.call);
        let events = parse_events(&body).unwrap_or_else(|error| panic!("{path}: {error}"));
        let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, lifecycle(reply), "{path}");
        for (name, data) in &events {
            assert_eq!(data["type"].as_str(), Some(name.as_str()), "{path}");
        }
        check_content(&events, head, reply);
        if let Reply::Tools(_) = reply {
            tool_blocks.insert(reply.calls().count());
        }
        checked += 1;
    }
    assert!(
        checked >= 2,
        "expected render_stream fixtures for text and tool replies"
    );
    assert!(
        tool_blocks.iter().any(|&count| count > 1),
        "expected a render_stream fixture with several tool calls"
    );
}

/// Every `render_json` fixture: one content block per call (or one text block), in order.
#[test]
fn json_fixtures_hold_every_block() {
    let mut several = false;
    for fixture in fixtures(TransformKind::Sse) {
        let Call::RenderJson { head, reply, .. } = &fixture.case.call else {
            continue;
        };
        let path = fixture.path.display();
        let body: Value = serde_json::from_str(&text_of(&fixture.case.call)).expect("JSON body");
        let content = body["content"].as_array().expect("content list");
        match reply {
            Reply::Text(text) => {
                assert_eq!(content.len(), 1, "{path}");
                assert_eq!(content[0]["text"].as_str(), Some(text.as_str()));
                assert_eq!(body["stop_reason"], "end_turn");
            }
            Reply::Tools(blocks) => {
                several |= reply.calls().count() > 1;
                assert_eq!(content.len(), blocks.len(), "{path}");
                for (block, expected) in content.iter().zip(blocks) {
                    match expected {
                        ReplyBlock::Text(text) => {
                            assert_eq!(block["type"], "text");
                            assert_eq!(block["text"].as_str(), Some(text.as_str()));
                        }
                        ReplyBlock::Call(call) => {
                            assert_eq!(block["type"], "tool_use");
                            assert_eq!(block["id"].as_str(), Some(call.id.as_str()));
                            assert_eq!(block["name"].as_str(), Some(call.name.as_str()));
                            assert_eq!(block["input"], expected_input(&call.input));
                        }
                    }
                }
                let reason = if reply.calls().next().is_none() {
                    "end_turn"
                } else {
                    "tool_use"
                };
                assert_eq!(body["stop_reason"], reason, "{path}");
            }
        }
        assert_eq!(
            body["usage"],
            usage_json(&head.usage, head.usage.output_tokens)
        );
    }
    assert!(
        several,
        "expected a render_json fixture with several tool calls"
    );
}

/// The event names a reply streams as.
fn lifecycle(reply: &Reply) -> Vec<&'static str> {
    let blocks = match reply {
        Reply::Text(_) => 1,
        Reply::Tools(blocks) => blocks.len(),
    };
    let mut names = vec!["message_start"];
    for _ in 0..blocks {
        names.extend([
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
        ]);
    }
    names.extend(["message_delta", "message_stop"]);
    names
}

/// The input a tool block carries: the call's input when it is a JSON object, else `{}`.
fn expected_input(input: &str) -> Value {
    serde_json::from_str::<Value>(input)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}))
}

/// All four counts of `usage`, with `output_tokens` as given.
fn usage_json(usage: &Usage, output_tokens: u32) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": output_tokens,
    })
}

/// The deltas reproduce the reply block by block, and the usage and stop reason match it.
fn check_content(events: &[(String, Value)], head: &MessageHead, reply: &Reply) {
    let last = events.len() - 1;
    let stop_reason = &events[last - 1].1["delta"]["stop_reason"];
    match reply {
        Reply::Text(text) => {
            for (offset, (_, data)) in events[1..4].iter().enumerate() {
                assert_eq!(data["index"], 0, "event {}", offset + 1);
            }
            assert_eq!(events[2].1["delta"]["text"].as_str(), Some(text.as_str()));
            assert_eq!(stop_reason, "end_turn");
        }
        Reply::Tools(blocks) => {
            for (index, expected) in blocks.iter().enumerate() {
                let block = &events[1 + 3 * index..4 + 3 * index];
                for (_, data) in block {
                    assert_eq!(data["index"], index);
                }
                let start = &block[0].1["content_block"];
                let call = match expected {
                    ReplyBlock::Text(text) => {
                        assert_eq!(start["type"], "text");
                        assert_eq!(block[1].1["delta"]["text"].as_str(), Some(text.as_str()));
                        continue;
                    }
                    ReplyBlock::Call(call) => call,
                };
                assert_eq!(start["type"], "tool_use");
                assert_eq!(start["id"].as_str(), Some(call.id.as_str()));
                assert_eq!(start["name"].as_str(), Some(call.name.as_str()));
                assert_eq!(start["input"], json!({}));
                let partial = block[1].1["delta"]["partial_json"]
                    .as_str()
                    .expect("partial_json string");
                let input: Value = serde_json::from_str(partial).expect("partial_json parses");
                assert_eq!(input, expected_input(&call.input));
            }
            let reason = if reply.calls().next().is_none() {
                "end_turn"
            } else {
                "tool_use"
            };
            assert_eq!(stop_reason, reason);
        }
    }
    let start_usage = &events[0].1["message"]["usage"];
    assert_eq!(*start_usage, usage_json(&head.usage, 1));
    assert_eq!(
        events[last - 1].1["usage"],
        usage_json(&head.usage, head.usage.output_tokens)
    );
}

/// Splits an SSE body on blank lines into (event name, JSON data).
fn parse_events(body: &str) -> Result<Vec<(String, Value)>, String> {
    let body = body
        .strip_suffix("\n\n")
        .ok_or("the body does not end with a blank line")?;
    body.split("\n\n")
        .map(|event| {
            let mut lines = event.split('\n');
            let name = lines
                .next()
                .and_then(|line| line.strip_prefix("event: "))
                .ok_or_else(|| format!("no event line in {event:?}"))?;
            let data = lines
                .next()
                .and_then(|line| line.strip_prefix("data: "))
                .ok_or_else(|| format!("no data line in {event:?}"))?;
            if lines.next().is_some() {
                return Err(format!("extra lines in {event:?}"));
            }
            let data =
                serde_json::from_str(data).map_err(|error| format!("{error} in {data:?}"))?;
            Ok((name.to_owned(), data))
        })
        .collect()
}
