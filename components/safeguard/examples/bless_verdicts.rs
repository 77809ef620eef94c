//! Fills in the `expect` of every safeguard fixture that has none, from the native library:
//! `cargo run -p devin-bridge-safeguard --example bless_verdicts` (not `bless`: the serializer
//! has an example of that name, and two would write one file in `target/`). Read what it wrote
//! before you commit it: a fixture is a promise about the judge.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use devin_bridge_safeguard::judge_in_conversation;
use devin_bridge_types::ToolCall;
use serde_json::{json, Value};

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/safeguard");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixture directory")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    for path in paths {
        let mut case: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("readable")).expect("JSON");
        if case.get("expect").is_some() {
            continue;
        }
        let args = &case["args"];
        let calls: Vec<ToolCall> = serde_json::from_value(args["calls"].clone()).expect("calls");
        let context = match args.get("classifier_context_raw") {
            Some(Value::String(raw)) => raw.clone(),
            _ => args["classifier_context"].to_string(),
        };
        let earlier: Vec<ToolCall> = match args.get("earlier_calls") {
            Some(list) => serde_json::from_value(list.clone()).expect("earlier calls"),
            None => Vec::new(),
        };
        case["expect"] = json!({ "ok": judge_in_conversation(&calls, &context, &earlier) });
        let text = serde_json::to_string_pretty(&case).expect("JSON") + "\n";
        std::fs::write(&path, text).expect("writable");
        eprintln!("blessed {}", path.display());
    }
}
