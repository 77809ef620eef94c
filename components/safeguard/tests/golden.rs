//! Golden fixtures (`tests/fixtures/safeguard/*.json`) against the native library.
//!
//! Every case must match exactly; the same files drive the native-vs-wasm differential test
//! and the host's self-test of a swap candidate (which holds a candidate to "never more
//! lenient", see the engine's contract). `cargo run -p devin-bridge-safeguard --example bless`
//! fills in the `expect` of a new case from the library.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use devin_bridge_safeguard::judge_in_conversation;
use devin_bridge_types::{CallVerdict, SafeguardOutcome, SafeguardStatus, ToolCall};
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    call: String,
    args: serde_json::Map<String, Value>,
    expect: Value,
}

fn fixtures() -> Vec<(PathBuf, Case)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/safeguard");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("fixture directory")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("readable fixture");
            let case = serde_json::from_str(&text)
                .unwrap_or_else(|error| panic!("{}: bad fixture: {error}", path.display()));
            (path, case)
        })
        .collect()
}

/// The judge's answer to a case, in the fixtures' encoding. `classifier_context` is a JSON
/// value (serialised compactly) or `classifier_context_raw`, the exact text; `earlier_calls`
/// (optional) the conversation before the reply.
fn run(case: &Case) -> Value {
    assert_eq!(case.call, "judge", "{}: unknown call", case.name);
    let calls: Vec<ToolCall> =
        serde_json::from_value(case.args["calls"].clone()).expect("calls decode");
    let context = match (
        case.args.get("classifier_context_raw"),
        case.args.get("classifier_context"),
    ) {
        (Some(Value::String(raw)), _) => raw.clone(),
        (None, Some(value)) => value.to_string(),
        _ => panic!("{}: no classifier_context", case.name),
    };
    let earlier: Vec<ToolCall> = match case.args.get("earlier_calls") {
        Some(list) => serde_json::from_value(list.clone()).expect("earlier calls decode"),
        None => Vec::new(),
    };
    json!({ "ok": judge_in_conversation(&calls, &context, &earlier) })
}

#[test]
fn every_fixture_matches() {
    let cases = fixtures();
    assert!(cases.len() >= 12, "only {} fixtures", cases.len());
    for (path, case) in &cases {
        assert_eq!(
            run(case),
            case.expect,
            "{} ({}): the judge's answer differs from the fixture",
            path.display(),
            case.name
        );
    }
}

/// The corpus shows every kind of answer, so a swap candidate is held to each.
#[test]
fn the_fixtures_cover_flags_passes_citations_and_unavailable() {
    let mut flagged = 0;
    let mut passed = 0;
    let mut cited = 0;
    let mut unavailable = 0;
    for (_, case) in fixtures() {
        let status: SafeguardStatus =
            serde_json::from_value(case.expect["ok"].clone()).expect("a status");
        match status {
            SafeguardStatus::Available(verdicts) => {
                for verdict in verdicts {
                    if let CallVerdict::Evaluated(evaluation) = verdict.verdict {
                        match evaluation.outcome {
                            SafeguardOutcome::Flagged => flagged += 1,
                            SafeguardOutcome::NotFlagged => passed += 1,
                        }
                        cited += usize::from(evaluation.cited_rule.is_some());
                    }
                }
            }
            SafeguardStatus::Unavailable(_) => unavailable += 1,
            SafeguardStatus::Unsupported => {}
        }
    }
    assert!(flagged >= 8, "{flagged} flagged calls");
    assert!(passed >= 5, "{passed} passed calls");
    assert!(cited >= 2, "{cited} citations");
    assert!(unavailable >= 2, "{unavailable} unavailable answers");
}
