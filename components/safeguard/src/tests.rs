//! Unit tests of the public function: the shape of the answer.

use super::*;
use devin_bridge_types::{Evaluation, SafeguardOutcome};

const CONTEXT: &str = r#"{"live_cwd":"/proj","home_dir":"/home/u","trusted_directories":{"primary":{"path":"/proj"}}}"#;

fn call(id: &str, name: &str, input: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        input: input.to_owned(),
    }
}

fn outcomes(status: &SafeguardStatus) -> Vec<(String, SafeguardOutcome)> {
    let SafeguardStatus::Available(verdicts) = status else {
        panic!("not available: {status:?}");
    };
    verdicts
        .iter()
        .map(|v| match &v.verdict {
            CallVerdict::Evaluated(Evaluation { outcome, .. }) => (v.id.clone(), *outcome),
            other => panic!("not evaluated: {other:?}"),
        })
        .collect()
}

#[test]
fn empty_call_list_is_available_and_empty() {
    assert_eq!(judge(&[], CONTEXT), SafeguardStatus::Available(Vec::new()));
    assert_eq!(
        judge(&[], "not json"),
        SafeguardStatus::Available(Vec::new())
    );
}

#[test]
fn one_verdict_per_call_in_order() {
    let calls = [
        call("c1", "Bash", r#"{"command":"pwd"}"#),
        call("c2", "Bash", r#"{"command":"rm -rf /"}"#),
        call("c3", "Read", r#"{"file_path":"/proj/a.rs"}"#),
        call("c1", "Read", r#"{"file_path":"/etc/passwd"}"#),
    ];
    assert_eq!(
        outcomes(&judge(&calls, CONTEXT)),
        vec![
            ("c1".to_owned(), SafeguardOutcome::NotFlagged),
            ("c2".to_owned(), SafeguardOutcome::Flagged),
            ("c3".to_owned(), SafeguardOutcome::NotFlagged),
            ("c1".to_owned(), SafeguardOutcome::Flagged),
        ]
    );
}

#[test]
fn a_broken_context_makes_the_whole_answer_unavailable() {
    let calls = [call("c1", "Bash", r#"{"command":"pwd"}"#)];
    for context in ["", "null", "[]", r#"{"restricted":"yes"}"#] {
        assert!(
            matches!(judge(&calls, context), SafeguardStatus::Unavailable(_)),
            "{context:?}"
        );
    }
}

#[test]
fn malformed_inputs_are_flagged() {
    let calls = [
        call("a", "Bash", "not json"),
        call("b", "Bash", "[]"),
        call("c", "Bash", r#"{"command":5}"#),
        call("d", "Read", r#"{}"#),
        call("e", "Edit", r#"{"file_path":null}"#),
    ];
    assert!(outcomes(&judge(&calls, CONTEXT))
        .iter()
        .all(|(_, outcome)| *outcome == SafeguardOutcome::Flagged));
}

#[test]
fn rule_checks_are_bounded() {
    let prose: Vec<String> = (0..5000).map(|i| format!("note {i}")).collect();
    let context = serde_json::json!({
        "live_cwd": "/proj",
        "trusted_directories": {"primary": {"path": "/proj"}},
        "auto_mode": {"soft_deny": prose},
    })
    .to_string();
    let few = format!("cat {}", vec!["a"; 150].join(" "));
    let many = format!(
        "cat {}",
        (0..250)
            .map(|i| format!("f{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let calls = [
        call(
            "few",
            "Bash",
            &serde_json::json!({ "command": few }).to_string(),
        ),
        call(
            "many",
            "Bash",
            &serde_json::json!({ "command": many }).to_string(),
        ),
    ];
    assert_eq!(
        outcomes(&judge(&calls, &context)),
        vec![
            ("few".to_owned(), SafeguardOutcome::NotFlagged),
            ("many".to_owned(), SafeguardOutcome::Flagged),
        ]
    );
}

#[test]
fn a_line_of_many_globs_stays_fast() {
    let line = format!("ls {}", vec!["./x*"; 3000].join(" "));
    assert!(line.len() < crate::MAX_COMMAND_BYTES);
    let calls = [call(
        "globs",
        "Bash",
        &serde_json::json!({ "command": line }).to_string(),
    )];
    let start = std::time::Instant::now();
    assert_eq!(
        outcomes(&judge(&calls, CONTEXT)),
        vec![("globs".to_owned(), SafeguardOutcome::NotFlagged)]
    );
    // Generous for a debug build on a shared machine; quadratic work would take seconds.
    assert!(
        start.elapsed() < std::time::Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
}
