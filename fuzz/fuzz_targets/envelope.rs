#![no_main]
//! Envelope: the first byte picks a tool set and a call limit, the rest is agent output; native
//! vs wasm for `parse`, the narration heuristic and `parse_review` (the same text read as a
//! review reply).
//!
//! Beyond native and wasm agreeing, `parse` must keep its own promises: `parse_span` (what the
//! component answers) resolves against the output to the same answer, borrowed or owned, and a
//! reply that calls tools holds at least one call and never more than `max(1, max_calls)`,
//! distinct ids, only calls of declared tools with a JSON object as input, and text blocks
//! that are non-empty and never adjacent; a text reply reports no recovery.

use std::collections::BTreeSet;

use devin_bridge_engine::Call;
use devin_bridge_envelope::{Reply, ReplyBlock};
use devin_bridge_fuzz::differential;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fn tool_sets() -> [String; 3] {
    [
        "[]".to_owned(),
        json!([{"name":"Bash","input_schema":{"type":"object","properties":{"command":{"type":"string","minLength":1},"timeout":{"type":"integer","minimum":0,"maximum":600000}},"required":["command"],"additionalProperties":false}}]).to_string(),
        json!([
            {"name":"Read","input_schema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"file_path":{"type":"string","pattern":"^/"},"limit":{"type":"number"}},"required":["file_path"]}},
            {"name":"Edit","input_schema":{"type":"object","$defs":{"s":{"type":"string"}},"properties":{"old":{"$ref":"#/$defs/s"},"new":{"anyOf":[{"type":"string"},{"type":"null"}]},"mode":{"const":"replace"}},"required":["old","new"]}}
        ]).to_string(),
    ]
}

/// Names the tools text declares.
fn declared(tools: &str) -> BTreeSet<String> {
    let Ok(Value::Array(items)) = serde_json::from_str::<Value>(tools) else {
        return BTreeSet::new();
    };
    items
        .iter()
        .filter_map(|item| item.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

fuzz_target!(init: devin_bridge_fuzz::prepare(devin_bridge_engine::TransformKind::Envelope), |data: &[u8]| {
    let Some((selector, rest)) = data.split_first() else { return };
    let Ok(output) = std::str::from_utf8(rest) else { return };
    let tools = tool_sets()[usize::from(*selector) % 3].clone();
    // 0 to 5: 0 (read as 1) and 1 exercise the single-call limit, the rest several calls.
    let max_calls = u32::from(*selector / 3 % 6);
    let seed = "0123456789abcdef01234567";

    let parsed = devin_bridge_envelope::parse(output, &tools, seed, max_calls);
    let span = devin_bridge_envelope::parse_span(output, &tools, seed, max_calls);
    assert_eq!(
        span.clone().map(|span| span.resolve(output)),
        parsed.clone().map(Some),
        "parse_span differs from parse"
    );
    assert_eq!(
        span.map(|span| span.resolve_owned(output.to_owned())),
        parsed.clone().map(Some),
        "parse_span differs from parse (owned)"
    );
    if let Ok(Reply::Text(_)) = parsed.as_ref().map(|parsed| &parsed.reply) {
        assert!(parsed.as_ref().is_ok_and(|parsed| parsed.recoveries.is_empty()), "a text reply repairs nothing");
    }
    if let Ok(Reply::Tools(blocks)) = parsed.as_ref().map(|parsed| &parsed.reply) {
        assert!(
            blocks.windows(2).all(|pair| !matches!(pair, [ReplyBlock::Text(_), ReplyBlock::Text(_)])),
            "adjacent text blocks: {blocks:?}"
        );
        assert!(
            blocks.iter().all(|block| !matches!(block, ReplyBlock::Text(text) if text.trim().is_empty())),
            "an empty text block: {blocks:?}"
        );
        let calls: Vec<_> = blocks
            .iter()
            .filter_map(|block| match block {
                ReplyBlock::Call(call) => Some(call),
                ReplyBlock::Text(_) => None,
            })
            .collect();
        assert!(!calls.is_empty(), "a reply of calls holds at least one");
        let limit = usize::try_from(max_calls.max(1)).unwrap_or(usize::MAX);
        assert!(calls.len() <= limit, "{} calls over a limit of {limit}", calls.len());
        let ids: BTreeSet<&str> = calls.iter().map(|call| call.id.as_str()).collect();
        let calls = calls.into_iter();
        assert_eq!(ids.len(), calls.len(), "ids repeat within a reply: {calls:?}");
        let names = declared(&tools);
        for call in calls {
            assert!(names.contains(&call.name), "{} is not declared", call.name);
            assert!(
                matches!(serde_json::from_str::<Value>(&call.input), Ok(Value::Object(_))),
                "input is not a JSON object: {}",
                call.input
            );
        }
    }
    differential(Call::Parse { output: output.to_owned(), tools, id_seed: seed.to_owned(), max_calls });
    differential(Call::NarratesUnexecutedAction { output: output.to_owned() });
    differential(Call::ParseReview { output: output.to_owned() });
});
