//! The default scripted session: it leads a real Claude Code through fixing `add()` in the
//! end-to-end test's project (`math.js` subtracts instead of adding; `npm test` runs
//! `node math.test.js`), using only client-owned tools. Each answer is chosen from the tool
//! results already in the trace, so every turn is a pure function of the prompt:
//!
//! | results | answer |
//! |---|---|
//! | 0 | `Bash {"command":"pwd"}` |
//! | 1 | `Read {"file_path":"<pwd>/math.js"}` |
//! | 2 | `Edit` `return a - b;` -> `return a + b;` if the Read result shows the bug, else `Bash npm test` |
//! | 3 | `Bash {"command":"npm test"}` after an edit, else the final answer |
//! | 4+ | the final answer, from the last result (tests pass or still fail) |

use serde_json::{json, Value};

use crate::trace::{without_reminders, ToolResult};

/// The tools the script uses (Claude Code's names).
pub const REQUIRED_TOOLS: [&str; 3] = ["Bash", "Read", "Edit"];
const BUG: &str = "return a - b;";
const FIX: &str = "return a + b;";
pub const FIXED: &str =
    "Fixed add() in math.js: it subtracted instead of adding. npm test passes now.";
pub const ALREADY_RIGHT: &str = "add() in math.js already adds; npm test passes.";

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Tool {
        name: &'static str,
        arguments: Value,
    },
    Text(String),
}

fn bash(command: &str, description: &str) -> Action {
    Action::Tool {
        name: "Bash",
        arguments: json!({"command": command, "description": description}),
    }
}

/// The next answer, given the trace's tool results and the declared tool names.
pub fn next(results: &[ToolResult<'_>], tools: &[&str]) -> Action {
    let missing: Vec<&str> = REQUIRED_TOOLS
        .into_iter()
        .filter(|tool| !tools.contains(tool))
        .collect();
    if !missing.is_empty() {
        return Action::Text(format!(
            "The offline agent's scripted session needs the client tools Bash, Read and Edit, \
             but this request does not declare {}.",
            missing.join(", ")
        ));
    }
    let Some(first) = results.first() else {
        return bash("pwd", "Show the working directory");
    };
    let Some(dir) = working_directory(first) else {
        return Action::Text(format!(
            "The offline agent could not find the working directory in the pwd result: {}",
            first_line(first)
        ));
    };
    let file = if dir == "/" {
        "/math.js".to_owned()
    } else {
        format!("{}/math.js", dir.trim_end_matches('/'))
    };
    let Some(read) = results.get(1) else {
        return Action::Tool {
            name: "Read",
            arguments: json!({"file_path": file}),
        };
    };
    let has_bug = read.content.contains(BUG);
    match (results.len(), has_bug) {
        (2, true) => Action::Tool {
            name: "Edit",
            arguments: json!({"file_path": file, "old_string": BUG, "new_string": FIX}),
        },
        (2, false) | (3, true) => bash("npm test", "Run the tests"),
        _ => {
            // 3 results without an edit, or 4 and more: judge the last one.
            let last = results.last().unwrap_or(read);
            Action::Text(if passed(last) {
                if has_bug { FIXED } else { ALREADY_RIGHT }.to_owned()
            } else {
                format!("The tests still fail: {}", first_line(last))
            })
        }
    }
}

/// The first non-empty line of a result that is an absolute path.
fn working_directory(result: &ToolResult<'_>) -> Option<String> {
    if result.is_error {
        return None;
    }
    without_reminders(result.content)
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .filter(|line| line.starts_with('/') && !line.contains('\0'))
        .map(str::to_owned)
}

/// The first non-empty line of a result, at most 200 characters.
pub fn first_line(result: &ToolResult<'_>) -> String {
    let text = without_reminders(result.content);
    let line = text
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("(no output)");
    let mut out: String = line.chars().take(200).collect();
    if out.len() < line.len() {
        out.push('…');
    }
    out
}

/// Whether a test run succeeded: not an error, some word of success (`pass`, `passed`, `ok`,
/// ...), and no word of failure (`fail`, `failed`, `failing`, ... unless counted as zero, as
/// in `fail 0` or `0 failed`; `not ok` counts as a failure).
pub fn passed(result: &ToolResult<'_>) -> bool {
    if result.is_error {
        return false;
    }
    let text = without_reminders(result.content).to_lowercase();
    let words: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut success = false;
    for (index, word) in words.iter().enumerate() {
        let previous = index.checked_sub(1).and_then(|i| words.get(i)).copied();
        let following = words.get(index + 1).copied();
        if word.starts_with("fail") {
            let zero = previous == Some("0") || previous == Some("no") || following == Some("0");
            if !zero {
                return false;
            }
        }
        if *word == "ok" && previous == Some("not") {
            return false;
        }
        if matches!(
            *word,
            "pass" | "passed" | "passes" | "passing" | "ok" | "success" | "succeeded"
        ) {
            success = true;
        }
    }
    success
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOLS: [&str; 4] = ["Task", "Bash", "Read", "Edit"];

    fn ok(content: &str) -> ToolResult<'_> {
        ToolResult {
            tool_use_id: "t",
            is_error: false,
            content,
        }
    }

    fn err(content: &str) -> ToolResult<'_> {
        ToolResult {
            tool_use_id: "t",
            is_error: true,
            content,
        }
    }

    const READ: &str = "     1\tfunction add(a, b) {\n     2\t  return a - b;\n     3\t}\n";

    #[test]
    fn walks_the_coding_task() {
        assert_eq!(next(&[], &TOOLS), bash("pwd", "Show the working directory"));
        let pwd = ok("/tmp/.sandbox/project\n");
        assert_eq!(
            next(&[pwd], &TOOLS),
            Action::Tool {
                name: "Read",
                arguments: json!({"file_path": "/tmp/.sandbox/project/math.js"})
            }
        );
        let read = ok(READ);
        assert_eq!(
            next(&[pwd, read], &TOOLS),
            Action::Tool {
                name: "Edit",
                arguments: json!({
                    "file_path": "/tmp/.sandbox/project/math.js",
                    "old_string": "return a - b;",
                    "new_string": "return a + b;"
                })
            }
        );
        let edit = ok("The file /tmp/.sandbox/project/math.js has been updated.");
        assert_eq!(
            next(&[pwd, read, edit], &TOOLS),
            bash("npm test", "Run the tests")
        );
        let test = ok(
            "\n> demo@1.0.0 test\n> node math.test.js\n\nok - add(2, 3) === 5\nall tests passed\n",
        );
        assert_eq!(
            next(&[pwd, read, edit, test], &TOOLS),
            Action::Text(FIXED.into())
        );
        let failed = err("Error: Exit code 1\nnot ok - add(2, 3) === 5");
        assert_eq!(
            next(&[pwd, read, edit, failed], &TOOLS),
            Action::Text("The tests still fail: Error: Exit code 1".into())
        );
    }

    #[test]
    fn skips_the_edit_without_the_bug() {
        let pwd = ok("/w");
        let read = ok("     1→function add(a, b) {\n     2→  return a + b;\n");
        assert_eq!(
            next(&[pwd, read], &TOOLS),
            bash("npm test", "Run the tests")
        );
        let test = ok("ℹ tests 1\nℹ pass 1\nℹ fail 0");
        assert_eq!(
            next(&[pwd, read, test], &TOOLS),
            Action::Text(ALREADY_RIGHT.into())
        );
        // A leading arrow-prefixed Read still shows the bug.
        let buggy = ok("     2→  return a - b;");
        assert!(matches!(
            next(&[pwd, buggy], &TOOLS),
            Action::Tool { name: "Edit", .. }
        ));
    }

    #[test]
    fn explains_what_it_cannot_do() {
        assert_eq!(
            next(&[], &["Bash", "Read"]),
            Action::Text(
                "The offline agent's scripted session needs the client tools Bash, Read and \
                 Edit, but this request does not declare Edit."
                    .into()
            )
        );
        assert!(matches!(next(&[], &[]), Action::Text(text) if text.contains("Bash, Read, Edit.")));
        assert!(matches!(
            next(&[err("bash: pwd: not found")], &TOOLS),
            Action::Text(text) if text.ends_with("pwd result: bash: pwd: not found")
        ));
        assert_eq!(
            next(&[ok("/"), ok("x")], &TOOLS),
            bash("npm test", "Run the tests")
        );
    }

    #[test]
    fn judges_test_output() {
        assert!(passed(&ok("PASS math.test.js")));
        assert!(passed(&ok("1 passing, 0 failing")));
        assert!(passed(&ok("# pass 3\n# fail 0")));
        assert!(passed(&ok(
            "ok\n<system-reminder>\nfailures are bad\n</system-reminder>"
        )));
        assert!(!passed(&ok("tokens only")));
        assert!(!passed(&ok("1 passed, 1 failed")));
        assert!(!passed(&ok("ok 1\nnot ok 2")));
        assert!(!passed(&err("all tests passed")));
        assert!(!passed(&ok("")));
        assert_eq!(first_line(&ok("\n\n  a  \nb")), "a");
        assert_eq!(first_line(&ok("")), "(no output)");
        assert_eq!(first_line(&ok(&"x".repeat(300))).chars().count(), 201);
    }
}
