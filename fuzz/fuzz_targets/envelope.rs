#![no_main]
//! Envelope: the first byte picks a tool set, the rest is agent output; native vs wasm for
//! `parse`, the narration heuristic and `parse_review` (the same text read as a review reply).

use devin_bridge_engine::Call;
use devin_bridge_fuzz::{differential, outcome};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

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

fuzz_target!(init: devin_bridge_fuzz::prepare(devin_bridge_engine::TransformKind::Envelope), |data: &[u8]| {
    let Some((selector, rest)) = data.split_first() else { return };
    let Ok(output) = std::str::from_utf8(rest) else { return };
    let tools = tool_sets()[usize::from(*selector) % 3].clone();
    let seed = "0123456789abcdef01234567";
    let native = outcome(&devin_bridge_envelope::parse(output, &tools, seed));
    differential(Call::Parse { output: output.to_owned(), tools, id_seed: seed.to_owned() }, native);
    let narrates = devin_bridge_envelope::narrates_unexecuted_action(output);
    differential(Call::NarratesUnexecutedAction { output: output.to_owned() }, json!({ "ok": narrates }));
    let review = outcome(&devin_bridge_envelope::parse_review(output));
    differential(Call::ParseReview { output: output.to_owned() }, review);
});
