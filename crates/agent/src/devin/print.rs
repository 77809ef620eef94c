//! Print mode (`devin -p`): the permission values it takes and the failures it reports.
//!
//! `--permission-mode` takes `normal` (alias `auto`), `accept-edits`, `dangerous` (aliases
//! `yolo`, `bypass`) and `autonomous`, which needs `--sandbox`; any other value (`ask`) makes
//! the CLI exit 2 before it runs. The read-only choice is `normal`.
//!
//! An agent error exits 1 with stderr like
//!
//! ```text
//! Error: Agent error: Rate limit exceeded (trace ID: 0123abcd): {
//!   "cognition.ai/errorKind": "unavailable",
//!   "cognition.ai/retryable": true
//! }
//! ```
//!
//! The message comes from the `Error: Agent error:` line, the kind from the JSON tail, and
//! both go through the same classification as an ACP error ([`super::errors::classify`]).
//! A logged-out CLI prints `Error: Not logged in` and exits 1.

use serde_json::{json, Value};

use crate::error::AcpError;

/// How much a print run may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrintPermission {
    /// Read-only: the CLI asks before acting and nobody answers, so nothing is changed.
    Normal,
    /// Acts without asking.
    Dangerous,
    /// Acts without asking, inside the CLI's own sandbox.
    AutonomousSandboxed,
}

impl PrintPermission {
    /// The flags that select it.
    pub fn args(self) -> &'static [&'static str] {
        match self {
            PrintPermission::Normal => &["--permission-mode", "normal"],
            PrintPermission::Dangerous => &["--permission-mode", "dangerous"],
            PrintPermission::AutonomousSandboxed => {
                &["--permission-mode", "autonomous", "--sandbox"]
            }
        }
    }
}

/// Why a print run failed, read from its exit status and stderr.
#[derive(Debug)]
pub enum PrintFailure {
    /// `Error: Agent error: ...` with its JSON tail, classified like an ACP error.
    Agent(AcpError),
    /// `Error: Not logged in`.
    NotLoggedIn,
    /// Exit 2: the CLI refused its command line (a flag or value this CLI does not take).
    Usage(String),
    /// Anything else: the last meaningful line of stderr.
    Other(String),
}

const AGENT_ERROR: &str = "Error: Agent error:";
/// Longest line quoted from stderr (characters).
const MAX_LINE_CHARS: usize = 300;
/// Most lines of a JSON tail read.
const MAX_TAIL_LINES: usize = 64;

/// The failure a print run that exited with `exit_code` describes on `stderr`.
pub fn failure(stderr: &str, exit_code: Option<i32>) -> PrintFailure {
    let lines: Vec<&str> = stderr.lines().collect();
    if let Some(at) = lines
        .iter()
        .rposition(|line| line.trim_start().starts_with(AGENT_ERROR))
    {
        return PrintFailure::Agent(agent_error(&lines[at..]));
    }
    if lines
        .iter()
        .any(|line| line.trim().eq_ignore_ascii_case("Error: Not logged in"))
    {
        return PrintFailure::NotLoggedIn;
    }
    let meaningful = |line: &&&str| {
        let line = line.trim();
        !line.is_empty() && line != "}" && line != "{"
    };
    if exit_code == Some(2) {
        let first = lines
            .iter()
            .find(|line| line.trim_start().to_ascii_lowercase().starts_with("error:"))
            .or_else(|| lines.iter().find(meaningful))
            .map_or_else(String::new, |line| bounded(line.trim()));
        return PrintFailure::Usage(first);
    }
    PrintFailure::Other(
        lines
            .iter()
            .rev()
            .find(meaningful)
            .map_or_else(String::new, |line| bounded(line.trim())),
    )
}

/// `Error: Agent error: <message> (trace ID: <id>): {` and the JSON lines after it.
fn agent_error(lines: &[&str]) -> AcpError {
    let first = lines.first().map_or("", |line| line.trim());
    let rest = first.strip_prefix(AGENT_ERROR).unwrap_or(first).trim();
    let (head, opens_tail) = match rest.strip_suffix('{') {
        Some(head) => (head.trim_end().trim_end_matches(':').trim_end(), true),
        None => (rest, false),
    };
    let message = match head.rfind(" (trace ID:") {
        Some(at) => &head[..at],
        None => head,
    };
    let data = if opens_tail {
        let mut text = String::from("{");
        for line in lines.iter().skip(1).take(MAX_TAIL_LINES) {
            text.push_str(line);
            text.push('\n');
            if line.trim() == "}" {
                break;
            }
        }
        serde_json::from_str::<Value>(&text).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    super::errors::classify(&json!({ "code": 0, "message": message, "data": data }))
}

fn bounded(line: &str) -> String {
    line.chars().take(MAX_LINE_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(message: &str, kind: &str, retryable: bool) -> String {
        format!(
            "some progress\nError: Agent error: {message} (trace ID: 0123456789abcdef): {{\n  \"cognition.ai/errorKind\": \"{kind}\",\n  \"cognition.ai/retryable\": {retryable}\n}}\n"
        )
    }

    #[test]
    fn the_permission_values_are_the_ones_the_cli_takes() {
        assert_eq!(
            PrintPermission::Normal.args(),
            ["--permission-mode", "normal"]
        );
        assert_eq!(
            PrintPermission::Dangerous.args(),
            ["--permission-mode", "dangerous"]
        );
        assert_eq!(
            PrintPermission::AutonomousSandboxed.args(),
            ["--permission-mode", "autonomous", "--sandbox"]
        );
    }

    #[test]
    fn an_agent_error_takes_its_kind_from_the_json_tail() {
        match failure(&tail("Rate limit exceeded", "unavailable", true), Some(1)) {
            PrintFailure::Agent(AcpError::RateLimited {
                retryable: true, ..
            }) => {}
            other => panic!("{other:?}"),
        }
        match failure(
            &tail("out of credits", "resource_exhausted", false),
            Some(1),
        ) {
            PrintFailure::Agent(AcpError::QuotaExceeded { .. }) => {}
            other => panic!("{other:?}"),
        }
        match failure(
            &tail("Connection error: reset", "unavailable", true),
            Some(1),
        ) {
            PrintFailure::Agent(AcpError::Network {
                retryable: true, ..
            }) => {}
            other => panic!("{other:?}"),
        }
        match failure(&tail("Something broke", "internal", false), Some(1)) {
            PrintFailure::Agent(AcpError::Rpc {
                message,
                kind,
                retryable,
                ..
            }) => {
                assert_eq!(message, "Something broke");
                assert_eq!(kind.as_deref(), Some("internal"));
                assert!(!retryable);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_agent_error_without_a_readable_tail_keeps_its_message() {
        let stderr = "Error: Agent error: Something odd (trace ID: 1): {\n  not json\n}\n";
        match failure(stderr, Some(1)) {
            PrintFailure::Agent(AcpError::Rpc { message, kind, .. }) => {
                assert_eq!(message, "Something odd");
                assert_eq!(kind, None);
            }
            other => panic!("{other:?}"),
        }
        let unknown_model = "Error: Agent error: Model not found: adaptive. Available models: swe-2, glm-5-2 (trace ID: 1f): {\n  \"cognition.ai/errorKind\": \"invalid_argument\",\n  \"cognition.ai/retryable\": false\n}\n";
        match failure(unknown_model, Some(1)) {
            PrintFailure::Agent(AcpError::ModelNotOffered { model, offered }) => {
                assert_eq!(model, "adaptive");
                assert_eq!(offered, ["swe-2", "glm-5-2"]);
            }
            other => panic!("{other:?}"),
        }
        match failure("Error: Agent error: plain words\n", Some(1)) {
            PrintFailure::Agent(AcpError::Rpc { message, .. }) => {
                assert_eq!(message, "plain words");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn logged_out_usage_and_other_failures_are_told_apart() {
        assert!(matches!(
            failure("Error: Not logged in\n", Some(1)),
            PrintFailure::NotLoggedIn
        ));
        match failure(
            "error: invalid value 'ask' for '--permission-mode <PERMISSION_MODE>'\n  [possible values: normal]\n",
            Some(2),
        ) {
            PrintFailure::Usage(line) => assert!(line.contains("invalid value 'ask'"), "{line}"),
            other => panic!("{other:?}"),
        }
        match failure("first\nthe reason\n}\n\n", Some(3)) {
            PrintFailure::Other(line) => assert_eq!(line, "the reason"),
            other => panic!("{other:?}"),
        }
        match failure(&"x".repeat(10_000), Some(3)) {
            PrintFailure::Other(line) => assert_eq!(line.len(), MAX_LINE_CHARS),
            other => panic!("{other:?}"),
        }
    }
}
