//! The serializer's fixtures: every error code shown, canonical files, the realistic request.

use devin_bridge_calls::TransformKind;

use crate::fixtures::{fixture_dir, fixtures};

/// Every code the serializer can return has a fixture.
#[test]
fn serializer_fixtures_cover_every_error_code() {
    let codes: Vec<String> = fixtures(TransformKind::Serializer)
        .iter()
        .filter_map(|fixture| {
            fixture.case.expect["err"]["code"]
                .as_str()
                .map(str::to_owned)
        })
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
fn serializer_fixtures_are_canonical() {
    for fixture in fixtures(TransformKind::Serializer) {
        let value: serde_json::Value = serde_json::from_str(&fixture.text).expect("JSON");
        let canonical = serde_json::to_string_pretty(&value).expect("serializable") + "\n";
        assert!(
            fixture.text == canonical,
            "{}: not in canonical form (bless rewrites it)",
            fixture.path.display()
        );
    }
}

/// The realistic request's snapshot embeds the request file verbatim; keep them in step.
#[test]
fn claude_code_snapshot_uses_the_request_file() {
    let request = std::fs::read_to_string(
        fixture_dir(TransformKind::Serializer).join("../requests/claude-code.json"),
    )
    .expect("the realistic request exists");
    let snapshots: Vec<_> = fixtures(TransformKind::Serializer)
        .into_iter()
        .filter(|fixture| fixture.path.to_string_lossy().contains("claude_code"))
        .collect();
    assert_eq!(snapshots.len(), 1);
    assert_eq!(
        snapshots[0].args["request_raw"].as_str(),
        Some(request.as_str())
    );
}
