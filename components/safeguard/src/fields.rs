//! The fields of a known tool's input: every one is known and judged, not only the one that
//! names a command or a path.
//!
//! Invariants:
//! - A known tool's input may hold only the fields Claude Code's schema gives that tool; any
//!   other field is flagged, naming it (a field the judge does not know may change what the
//!   call does).
//! - `Bash`: `dangerouslyDisableSandbox: true` is flagged (it asks to run outside the
//!   sandbox); `timeout` must be a number from 0 to [`MAX_TIMEOUT_MS`] (Claude Code's own
//!   bound); `run_in_background` must be a boolean, and when it is `true` the line is judged
//!   as a background run ([`crate::line`]).
//! - Tools the judge does not know are not checked here: they are flagged unless an
//!   `auto_mode.allow` rule names them, whatever their fields.

use serde_json::{Map, Value};

use crate::verdict::{show, Decision};

/// The longest `timeout` of a `Bash` call Claude Code accepts, in milliseconds.
pub(crate) const MAX_TIMEOUT_MS: f64 = 600_000.0;

/// The fields of each known tool's input, as Claude Code's tool schemas give them.
const FIELDS: [(&str, &[&str]); 20] = [
    (
        "Bash",
        &[
            "command",
            "description",
            "timeout",
            "run_in_background",
            "dangerouslyDisableSandbox",
        ],
    ),
    ("Read", &["file_path", "offset", "limit", "pages"]),
    ("NotebookRead", &["notebook_path", "cell_id"]),
    ("LS", &["path", "ignore"]),
    ("Glob", &["pattern", "path"]),
    (
        "Grep",
        &[
            "pattern",
            "path",
            "glob",
            "output_mode",
            "-B",
            "-A",
            "-C",
            "-n",
            "-i",
            "type",
            "head_limit",
            "offset",
            "multiline",
        ],
    ),
    (
        "Edit",
        &["file_path", "old_string", "new_string", "replace_all"],
    ),
    ("MultiEdit", &["file_path", "edits"]),
    ("Write", &["file_path", "content"]),
    (
        "NotebookEdit",
        &[
            "notebook_path",
            "cell_id",
            "new_source",
            "cell_type",
            "edit_mode",
        ],
    ),
    ("WebFetch", &["url", "prompt"]),
    (
        "WebSearch",
        &["query", "allowed_domains", "blocked_domains"],
    ),
    ("TodoWrite", &["todos"]),
    ("TodoRead", &[]),
    ("AskUserQuestion", &["questions", "answers"]),
    ("EnterPlanMode", &[]),
    ("ExitPlanMode", &["plan"]),
    ("BashOutput", &["bash_id", "filter"]),
    ("KillShell", &["shell_id"]),
    ("KillBash", &["shell_id"]),
];

/// The subagent tools share one schema.
const TASK_FIELDS: [&str; 4] = ["description", "prompt", "subagent_type", "model"];

/// Flags a field the tool's schema does not have. Unknown tools pass here.
pub(crate) fn check_known(tool: &str, input: &Map<String, Value>) -> Result<(), Decision> {
    let known: &[&str] = match tool {
        "Task" | "Agent" => &TASK_FIELDS,
        _ => match FIELDS.iter().find(|(name, _)| *name == tool) {
            Some((_, fields)) => fields,
            None => return Ok(()),
        },
    };
    match input.keys().find(|key| !known.contains(&key.as_str())) {
        None => Ok(()),
        Some(key) => Err(Decision::flag(format!(
            "the `{tool}` call has the field `{}`, which the judge does not know",
            show(key)
        ))),
    }
}

/// What the other fields of a `Bash` call ask for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct BashFields {
    /// `run_in_background: true`.
    pub(crate) background: bool,
}

/// Judges `dangerouslyDisableSandbox`, `timeout` and `run_in_background`.
pub(crate) fn bash(input: &Map<String, Value>) -> Result<BashFields, Decision> {
    match input.get("dangerouslyDisableSandbox") {
        None | Some(Value::Null | Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            return Err(Decision::flag(
                "asks to run the command outside the sandbox (dangerouslyDisableSandbox)",
            ))
        }
        Some(_) => {
            return Err(Decision::flag(
                "the call's `dangerouslyDisableSandbox` is not a boolean",
            ))
        }
    }
    match input.get("timeout") {
        None | Some(Value::Null) => {}
        Some(Value::Number(ms)) => match ms.as_f64() {
            Some(ms) if (0.0..=MAX_TIMEOUT_MS).contains(&ms) => {}
            _ => {
                return Err(Decision::flag(
                    "the call's `timeout` is outside 0 to 600000 milliseconds",
                ))
            }
        },
        Some(_) => return Err(Decision::flag("the call's `timeout` is not a number")),
    }
    let background = match input.get("run_in_background") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => {
            return Err(Decision::flag(
                "the call's `run_in_background` is not a boolean",
            ))
        }
    };
    Ok(BashFields { background })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => unreachable!("an object literal"),
        }
    }

    #[test]
    fn known_fields_pass_and_others_are_named() {
        let ok = object(json!({"command": "ls", "description": "x", "timeout": 5000}));
        assert!(check_known("Bash", &ok).is_ok());
        let odd = object(json!({"command": "ls", "cwd": "/tmp"}));
        let flagged = check_known("Bash", &odd).unwrap_err();
        assert!(flagged.flagged && flagged.explanation.contains("`cwd`"));
        assert!(
            check_known("mcp__x__y", &odd).is_ok(),
            "unknown tools pass here"
        );
        let task = object(json!({"description": "x", "prompt": "y", "subagent_type": "z"}));
        assert!(check_known("Agent", &task).is_ok());
        assert!(check_known("EnterPlanMode", &object(json!({"x": 1}))).is_err());
    }

    #[test]
    fn bash_fields() {
        let fields = |value| bash(&object(value));
        assert_eq!(
            fields(json!({"command": "ls"})).unwrap(),
            BashFields::default()
        );
        assert!(
            fields(json!({"run_in_background": true}))
                .unwrap()
                .background
        );
        assert!(fields(json!({"dangerouslyDisableSandbox": false})).is_ok());
        assert!(fields(json!({"dangerouslyDisableSandbox": true})).is_err());
        assert!(fields(json!({"dangerouslyDisableSandbox": "true"})).is_err());
        assert!(fields(json!({"timeout": 600000})).is_ok());
        assert!(fields(json!({"timeout": 600001})).is_err());
        assert!(fields(json!({"timeout": -1})).is_err());
        assert!(fields(json!({"timeout": "60"})).is_err());
        assert!(fields(json!({"run_in_background": "yes"})).is_err());
    }
}
