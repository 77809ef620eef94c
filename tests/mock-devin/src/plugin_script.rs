//! The scripted session for the Claude Code plugin's slash commands (`plugins/devin`): when the
//! conversation holds a command expanded from the plugin (its raw arguments sit between the
//! `<<<DEVIN_RAW_ARGUMENTS` and `DEVIN_RAW_ARGUMENTS>>>` lines), the offline summarizer plays
//! the command's transport handshake with the client's own tools, as the command text asks:
//!
//! | results | answer |
//! |---|---|
//! | 0 | `Bash devin-bridge companion raw-args-create` |
//! | 1 | `Read {"file_path": <path>}` (the path the helper printed) |
//! | 2 | `Write {"file_path": <path>, "content": <raw arguments>}` |
//! | 3 | `Bash devin-bridge companion <subcommand> --raw-args-token <token>` (timeout 600000) |
//! | 4+ | the last result, verbatim, as the final answer |
//!
//! Any failed step ends the session with a text naming it, so a broken handshake is visible.

use serde_json::json;

use crate::script::Action;
use crate::trace::{without_reminders, ToolResult};

pub(crate) const OPEN: &str = "<<<DEVIN_RAW_ARGUMENTS\n";
pub(crate) const CLOSE: &str = "\nDEVIN_RAW_ARGUMENTS>>>";

/// The subcommand and raw arguments of the first `[User]` section of `prompt` that holds a
/// slash command of the Claude Code plugin.
pub(crate) fn command_in(prompt: &crate::trace::Prompt<'_>) -> Option<(String, String)> {
    prompt.user_bodies().find_map(command)
}

/// The subcommand and raw arguments of the plugin command in `user`, if it holds one.
pub(crate) fn command(user: &str) -> Option<(String, String)> {
    let start = user.find(OPEN)? + OPEN.len();
    let length = user[start..].find(CLOSE)?;
    let raw = user[start..start + length].to_owned();
    // The command text names its subcommand in its final step.
    const STEP: &str = "`devin-bridge companion ";
    let subcommand = user
        .match_indices(STEP)
        .filter_map(|(at, _)| {
            let rest = &user[at + STEP.len()..];
            let (name, tail) = rest.split_once(' ')?;
            tail.starts_with("--raw-args-token")
                .then(|| name.to_owned())
        })
        .next()?;
    Some((subcommand, raw))
}

/// The next answer of the plugin session.
pub(crate) fn next(subcommand: &str, raw: &str, results: &[ToolResult<'_>]) -> Action {
    let Some(created) = results.first() else {
        return Action::Tool {
            name: "Bash",
            arguments: json!({
                "command": "devin-bridge companion raw-args-create",
                "description": "Allocate a private raw-argument transport"
            }),
        };
    };
    let created_text = without_reminders(created.content);
    let (Some(token), Some(path)) = (
        field(&created_text, "token:"),
        field(&created_text, "path:"),
    ) else {
        return Action::Text(format!("raw-args-create failed: {}", created_text.trim()));
    };
    match results.len() {
        1 => Action::Tool {
            name: "Read",
            arguments: json!({ "file_path": path }),
        },
        2 => Action::Tool {
            name: "Write",
            arguments: json!({ "file_path": path, "content": raw }),
        },
        3 if results[2].is_error => Action::Text(format!(
            "writing the transport failed: {}",
            results[2].content.trim()
        )),
        3 => Action::Tool {
            name: "Bash",
            arguments: json!({
                "command": format!("devin-bridge companion {subcommand} --raw-args-token {token}"),
                "description": "Run the Devin companion helper",
                "timeout": 600000
            }),
        },
        _ => {
            let last = results.last().unwrap_or(created);
            Action::Text(without_reminders(last.content))
        }
    }
}

/// The value after `name` on its own line, e.g. `token: abc`.
fn field(text: &str, name: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .find_map(|line| line.strip_prefix(name))
        .map(str::trim)
        .filter(|value| !value.is_empty() && !value.contains(char::is_whitespace))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMAND: &str = "Run it.\n\n<<<DEVIN_RAW_ARGUMENTS\n--write -- fix \"it\"\nDEVIN_RAW_ARGUMENTS>>>\n\n4. Bash, with timeout 600000: `devin-bridge companion task --raw-args-token <T>`.";

    fn result(content: &str) -> ToolResult<'_> {
        ToolResult {
            tool_use_id: "t",
            is_error: false,
            content,
        }
    }

    #[test]
    fn the_command_and_its_raw_arguments_are_found() {
        assert_eq!(
            command(COMMAND),
            Some(("task".to_owned(), "--write -- fix \"it\"".to_owned()))
        );
        assert_eq!(command("no markers here"), None);
    }

    #[test]
    fn the_handshake_follows_the_helper_output() {
        let created = result("token: abc123\npath: /data/transport/abc123\n");
        assert!(matches!(
            next("task", "x", &[]),
            Action::Tool { name: "Bash", .. }
        ));
        match next("task", "x", &[created]) {
            Action::Tool {
                name: "Read",
                arguments,
            } => {
                assert_eq!(arguments["file_path"], "/data/transport/abc123");
            }
            other => panic!("{other:?}"),
        }
        match next("task", "raw args", &[created, result("")]) {
            Action::Tool {
                name: "Write",
                arguments,
            } => assert_eq!(arguments["content"], "raw args"),
            other => panic!("{other:?}"),
        }
        match next("task", "x", &[created, result(""), result("ok")]) {
            Action::Tool {
                name: "Bash",
                arguments,
            } => assert_eq!(
                arguments["command"],
                "devin-bridge companion task --raw-args-token abc123"
            ),
            other => panic!("{other:?}"),
        }
        let output = "answer\njob: job-1\nstate: done";
        assert_eq!(
            next(
                "task",
                "x",
                &[created, result(""), result("ok"), result(output)]
            ),
            Action::Text(output.to_owned())
        );
        assert!(matches!(
            next("task", "x", &[result("devin-bridge companion: no data dir")]),
            Action::Text(text) if text.starts_with("raw-args-create failed")
        ));
    }
}
