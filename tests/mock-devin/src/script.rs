//! The default scripted session: it leads a real Claude Code through fixing `add()` in the
//! end-to-end test's project (`math.js` subtracts instead of adding; `npm test` runs
//! `node math.test.js`), using only client-owned tools. Each answer is chosen from the tool
//! results already in the trace, so every turn is a pure function of the prompt:
//!
//! | results | answer |
//! |---|---|
//! | 0 | `Bash {"command":"pwd"}` |
//! | 1 | two independent reads in one answer: `Read <pwd>/math.js` and `Read <pwd>/math.test.js`; when the prompt says parallel tool use is disabled, `Read <pwd>/math.js` alone |
//! | 2 | (parallel tool use disabled) `Read <pwd>/math.test.js` |
//! | 3 | `Edit` `return a - b;` -> `return a + b;` if a Read result shows the bug (the client may return the two in either order), else `Bash npm test` |
//! | 4 | `Bash {"command":"npm test"}` after an edit, else the final answer |
//! | 5+ | the final answer, from the last result (tests pass or still fail) |
//!
//! So the task takes five agent turns when the agent may ask for independent actions together,
//! and six when it may not.

use serde_json::{json, Value};

use crate::trace::{without_reminders, ToolResult};

/// The tools the script uses (Claude Code's names).
pub(crate) const REQUIRED_TOOLS: [&str; 3] = ["Bash", "Read", "Edit"];
const BUG: &str = "return a - b;";
const FIX: &str = "return a + b;";
pub(crate) const FIXED: &str =
    "Fixed add() in math.js: it subtracted instead of adding. npm test passes now.";
pub(crate) const ALREADY_RIGHT: &str = "add() in math.js already adds; npm test passes.";

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Action {
    Tool {
        name: &'static str,
        arguments: Value,
    },
    /// Several independent calls in one answer, in order.
    Tools(Vec<(&'static str, Value)>),
    Text(String),
}

fn bash(command: &str, description: &str) -> Action {
    Action::Tool {
        name: "Bash",
        arguments: json!({"command": command, "description": description}),
    }
}

/// The next answer, given the trace's tool results, the declared tool names and whether the
/// agent may ask for several tools in one answer.
pub(crate) fn next(results: &[ToolResult<'_>], tools: &[&str], parallel: bool) -> Action {
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
    let in_dir = |name: &str| format!("{}/{name}", dir.trim_end_matches('/'));
    let (file, test_file) = (in_dir("math.js"), in_dir("math.test.js"));
    let read_file = |path: &str| Action::Tool {
        name: "Read",
        arguments: json!({"file_path": path}),
    };
    let Some(read) = results.get(1) else {
        return if parallel {
            Action::Tools(vec![
                ("Read", json!({"file_path": file})),
                ("Read", json!({"file_path": test_file})),
            ])
        } else {
            read_file(&file)
        };
    };
    if results.len() == 2 {
        return read_file(&test_file);
    }
    // Both reads come back together, in the order the client finished them: look at both.
    let has_bug = results
        .get(1..3)
        .is_some_and(|reads| reads.iter().any(|result| result.content.contains(BUG)));
    match (results.len(), has_bug) {
        (3, true) => Action::Tool {
            name: "Edit",
            arguments: json!({"file_path": file, "old_string": BUG, "new_string": FIX}),
        },
        (3, false) | (4, true) => bash("npm test", "Run the tests"),
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
pub(crate) fn working_directory(result: &ToolResult<'_>) -> Option<String> {
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
pub(crate) fn first_line(result: &ToolResult<'_>) -> String {
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
pub(crate) fn passed(result: &ToolResult<'_>) -> bool {
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

    fn next(results: &[ToolResult<'_>], tools: &[&str]) -> Action {
        super::next(results, tools, true)
    }

    #[test]
    fn reads_both_files_in_one_answer_unless_parallel_use_is_disabled() {
        let pwd = ok("/w\n");
        assert_eq!(
            next(&[pwd], &TOOLS),
            Action::Tools(vec![
                ("Read", json!({"file_path": "/w/math.js"})),
                ("Read", json!({"file_path": "/w/math.test.js"})),
            ])
        );
        let read_math = Action::Tool {
            name: "Read",
            arguments: json!({"file_path": "/w/math.js"}),
        };
        assert_eq!(super::next(&[pwd], &TOOLS, false), read_math);
        assert_eq!(
            super::next(&[pwd, ok(READ)], &TOOLS, false),
            Action::Tool {
                name: "Read",
                arguments: json!({"file_path": "/w/math.test.js"}),
            }
        );
        // The two results in the other order (the client finished the test file first).
        assert!(matches!(
            next(&[pwd, ok("assert"), ok(READ)], &TOOLS),
            Action::Tool { name: "Edit", .. }
        ));
        // Both ways, the same edit follows once both files were read.
        for parallel in [true, false] {
            assert!(matches!(
                super::next(&[pwd, ok(READ), ok("test")], &TOOLS, parallel),
                Action::Tool { name: "Edit", .. }
            ));
        }
    }

    #[test]
    fn walks_the_coding_task() {
        assert_eq!(next(&[], &TOOLS), bash("pwd", "Show the working directory"));
        let pwd = ok("/tmp/.sandbox/project\n");
        assert!(matches!(next(&[pwd], &TOOLS), Action::Tools(reads) if reads.len() == 2));
        let read = ok(READ);
        let test_source = ok("assert.strictEqual(add(2, 3), 5);");
        assert_eq!(
            next(&[pwd, read, test_source], &TOOLS),
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
            next(&[pwd, read, test_source, edit], &TOOLS),
            bash("npm test", "Run the tests")
        );
        let test = ok(
            "\n> demo@1.0.0 test\n> node math.test.js\n\nok - add(2, 3) === 5\nall tests passed\n",
        );
        assert_eq!(
            next(&[pwd, read, test_source, edit, test], &TOOLS),
            Action::Text(FIXED.into())
        );
        let failed = err("Error: Exit code 1\nnot ok - add(2, 3) === 5");
        assert_eq!(
            next(&[pwd, read, test_source, edit, failed], &TOOLS),
            Action::Text("The tests still fail: Error: Exit code 1".into())
        );
    }

    #[test]
    fn skips_the_edit_without_the_bug() {
        let pwd = ok("/w");
        let read = ok("     1→function add(a, b) {\n     2→  return a + b;\n");
        let test_source = ok("assert");
        assert_eq!(
            next(&[pwd, read, test_source], &TOOLS),
            bash("npm test", "Run the tests")
        );
        let test = ok("ℹ tests 1\nℹ pass 1\nℹ fail 0");
        assert_eq!(
            next(&[pwd, read, test_source, test], &TOOLS),
            Action::Text(ALREADY_RIGHT.into())
        );
        // A leading arrow-prefixed Read still shows the bug.
        let buggy = ok("     2→  return a - b;");
        assert!(matches!(
            next(&[pwd, buggy, test_source], &TOOLS),
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
            next(&[ok("/"), ok("x"), ok("y")], &TOOLS),
            bash("npm test", "Run the tests")
        );
        assert!(matches!(
            next(&[ok("/")], &TOOLS),
            Action::Tools(reads) if reads[0].1["file_path"] == "/math.js"
        ));
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
