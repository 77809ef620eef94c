//! Golden fixtures: every case in `tests/fixtures/serializer/` (format in
//! `tests/fixtures/README.md`) must produce exactly its `expect`.
//!
//! To add a case, write the file without `expect` and run
//! `cargo run -p devin-bridge-serializer --example bless`: it fills in the missing
//! expectations (and never touches existing ones). Read the result before committing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{fixture_dir, fixtures, run};

use std::fs;

use devin_bridge_serializer::Failure;
use serde_json::Value;

#[test]
fn every_fixture_matches() {
    let cases = fixtures();
    assert!(cases.len() >= 25, "only {} fixtures", cases.len());
    for (path, _, case) in &cases {
        let name = path.display();
        let expect = case
            .get("expect")
            .unwrap_or_else(|| panic!("{name}: no expect (bless it)"));
        let actual = run(case);
        if let Some(err) = expect.get("err") {
            let expected: Failure = serde_json::from_value(err.clone())
                .unwrap_or_else(|error| panic!("{name}: expect.err is not a failure: {error}"));
            let actual: Failure = serde_json::from_value(actual["err"].clone())
                .unwrap_or_else(|_| panic!("{name}: expected {expected}, got {actual}"));
            assert_eq!(actual, expected, "{name}");
        } else {
            assert_eq!(actual.get("ok"), expect.get("ok"), "{name}");
        }
    }
}

/// Every code the serializer can return has a fixture.
#[test]
fn fixtures_cover_every_error_code() {
    let codes: Vec<String> = fixtures()
        .iter()
        .filter_map(|(_, _, case)| case["expect"]["err"]["code"].as_str().map(str::to_owned))
        .collect();
    for code in [
        "invalid_json",
        "invalid_request",
        "missing_model",
        "invalid_stream",
        "invalid_system",
        "invalid_tools",
        "invalid_tool",
        "duplicate_tool_name",
        "invalid_tool_choice",
        "unknown_tool_choice",
        "invalid_messages",
        "invalid_message",
        "unsupported_role",
        "invalid_content_block",
        "unsupported_content_block",
        "unsupported_visual_block",
        "missing_tool_use_id",
        "duplicate_tool_use_id",
        "undeclared_tool",
        "orphan_tool_result",
        "empty_messages",
    ] {
        assert!(codes.iter().any(|c| c == code), "no fixture for {code}");
    }
}

/// Fixture files are in serde_json's canonical pretty form (sorted keys). A harness that
/// re-serialises `args.request` then sends the same bytes whatever serde_json's features,
/// and key order is part of the prompt.
#[test]
fn fixtures_are_canonical() {
    for (path, text, case) in fixtures() {
        let canonical = serde_json::to_string_pretty(&case).expect("serializable") + "\n";
        assert!(
            text == canonical,
            "{}: not in canonical form (bless rewrites it)",
            path.display()
        );
    }
}

/// The realistic request's snapshot embeds the request file verbatim; keep them in step.
#[test]
fn claude_code_snapshot_uses_the_request_file() {
    let request = fs::read_to_string(fixture_dir().join("../requests/claude-code.json"))
        .expect("the realistic request exists");
    let snapshots: Vec<Value> = fixtures()
        .into_iter()
        .filter(|(path, _, _)| path.to_string_lossy().contains("claude_code"))
        .map(|(_, _, case)| case)
        .collect();
    assert_eq!(snapshots.len(), 1);
    assert_eq!(
        snapshots[0]["args"]["request_raw"].as_str(),
        Some(request.as_str())
    );
}
