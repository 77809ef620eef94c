//! Judging one tool call by its Claude Code tool name.
//!
//! Invariants:
//! - The order of decision is the same for every tool: the user's `auto_mode.hard_deny`,
//!   then `auto_mode.soft_deny` (flagged, citing the entry), then `rules.deny` and
//!   `rules.ask` (flagged, naming the rule), then `restricted` (only reads pass), then
//!   `auto_mode.allow` (passes, citing the entry), then the judge's own rules.
//! - A call whose input is not a JSON object, lacks the field the judge needs, or has a field
//!   its tool's schema does not have ([`crate::fields`]) is flagged.
//! - Any tool the judge does not know (including every `mcp__*` tool) is flagged unless an
//!   `auto_mode.allow` rule names it.

use devin_bridge_types::ToolCall;
use serde_json::{Map, Value};

use crate::context::Context;
use crate::decisive;
use crate::fields;
use crate::filters;
use crate::line;
use crate::paths::{self, Access, Problem};
use crate::rules::{may_climb, url_host, Facts};
use crate::user_rules::{allow_side, deny_side, ALL_ONLY_READS};
use crate::verdict::{show, Decision};

/// Tools that change nothing outside the client's own state (asking the user a question and
/// entering or leaving plan mode included).
const CLIENT_STATE: [&str; 10] = [
    "TodoWrite",
    "TodoRead",
    "AskUserQuestion",
    "EnterPlanMode",
    "ExitPlanMode",
    "Task",
    "Agent",
    "BashOutput",
    "KillShell",
    "KillBash",
];

pub(crate) fn judge_call(call: &ToolCall, ctx: &Context) -> Decision {
    let input = match serde_json::from_str::<Value>(&call.input) {
        Ok(Value::Object(input)) => input,
        _ => return Decision::flag("the call's input is not a JSON object"),
    };
    let tool = call.name.as_str();
    if let Err(decision) = fields::check_known(tool, &input) {
        return decision;
    }
    match tool {
        "Bash" => match (text(&input, "command"), fields::bash(&input)) {
            (None, _) => Decision::flag("the shell call has no `command` string"),
            (Some(_), Err(decision)) => decision,
            (Some(command), Ok(fields)) => line::judge(command, ctx, fields),
        },
        "Read" => read_tool(tool, &input, &["file_path"], &[], ctx),
        "NotebookRead" => read_tool(tool, &input, &["notebook_path"], &[], ctx),
        "LS" => read_tool(tool, &input, &[], &["path"], ctx),
        "Glob" => glob(&input, ctx),
        "Grep" => grep(&input, ctx),
        "Edit" | "MultiEdit" | "Write" => edit_tool(tool, text(&input, "file_path"), ctx),
        "NotebookEdit" => edit_tool(tool, text(&input, "notebook_path"), ctx),
        "WebFetch" => {
            let url = text(&input, "url");
            let host = url.and_then(url_host).unwrap_or_else(|| "an unreadable address".to_owned());
            other_tool(
                Facts { tool, url, ..Facts::default() },
                ctx,
                &format!("fetches from {}, which can send data off this machine", show(&host)),
            )
        }
        "WebSearch" => other_tool(
            Facts { tool, ..Facts::default() },
            ctx,
            "searches the web, which can send data off this machine",
        ),
        _ if CLIENT_STATE.contains(&tool) => {
            let facts = Facts { tool, ..Facts::default() };
            if let Some(decision) = deny_side(&facts, ctx) {
                return decision;
            }
            if ctx.restricted {
                return Decision::flag(format!("the session is restricted: {ALL_ONLY_READS}"));
            }
            if let Err(why) = decisive::check_tool(tool, &ctx.written) {
                // As for a shell command, the user's own rule still passes it.
                return allow_side(&facts, ctx).unwrap_or_else(|| Decision::flag(why));
            }
            Decision::pass(format!("`{tool}` changes only the client's own state"))
        }
        _ => other_tool(
            Facts { tool, ..Facts::default() },
            ctx,
            &format!(
                "uses the tool `{}`, which the judge does not know; an auto_mode.allow rule can allow it",
                show(tool)
            ),
        ),
    }
}

fn text<'v>(input: &'v Map<String, Value>, key: &str) -> Option<&'v str> {
    input.get(key).and_then(Value::as_str)
}

/// An optional path field: absent, `null` or empty means the working directory.
fn optional_path<'v>(input: &'v Map<String, Value>, key: &str) -> Result<&'v str, Decision> {
    match input.get(key) {
        None | Some(Value::Null) => Ok("."),
        Some(Value::String(path)) if path.is_empty() => Ok("."),
        Some(Value::String(path)) => Ok(path),
        Some(_) => Err(Decision::flag(format!(
            "the `{key}` of the call is not a string"
        ))),
    }
}

fn resolve(raw: &str, ctx: &Context, access: Access) -> Result<String, Decision> {
    paths::resolve_tool_path(raw, ctx).map_err(|problem| Decision::flag(problem.sentence(access)))
}

/// Read, NotebookRead, LS: files are read exactly, directories are listed.
fn read_tool(
    tool: &str,
    input: &Map<String, Value>,
    file_keys: &[&str],
    dir_keys: &[&str],
    ctx: &Context,
) -> Decision {
    let mut facts = Facts {
        tool,
        ..Facts::default()
    };
    for key in file_keys {
        let Some(raw) = text(input, key) else {
            return Decision::flag(format!("the call has no `{key}` string"));
        };
        match resolve(raw, ctx, Access::Read) {
            Ok(path) => facts.read_files.push(path),
            Err(decision) => return decision,
        }
    }
    for key in dir_keys {
        let Some(raw) = text(input, key) else {
            return Decision::flag(format!("the call has no `{key}` string"));
        };
        match resolve(raw, ctx, Access::Read) {
            Ok(path) => facts.read_dirs.push(path),
            Err(decision) => return decision,
        }
    }
    judge_reads(&facts, ctx, Ok(()))
}

/// The common end of every read tool; `extra` is a tool-specific problem found on the way.
fn judge_reads(facts: &Facts<'_>, ctx: &Context, extra: Result<(), String>) -> Decision {
    if let Some(decision) = deny_side(facts, ctx) {
        return decision;
    }
    if let Some(decision) = allow_side(facts, ctx) {
        return decision;
    }
    if let Err(why) = extra {
        return Decision::flag(why);
    }
    for path in facts.read_files.iter().chain(&facts.read_dirs) {
        if let Err(problem) = paths::check_read(ctx, path) {
            return Decision::flag(problem.sentence(Access::Read));
        }
    }
    Decision::pass("reads inside the trusted directories")
}

/// Glob: the search directory, and the fixed directory of an absolute or climbing pattern.
fn glob(input: &Map<String, Value>, ctx: &Context) -> Decision {
    let mut facts = Facts {
        tool: "Glob",
        ..Facts::default()
    };
    let Some(pattern) = text(input, "pattern") else {
        return Decision::flag("the call has no `pattern` string");
    };
    let base = match optional_path(input, "path").and_then(|raw| resolve(raw, ctx, Access::Read)) {
        Ok(base) => base,
        Err(decision) => return decision,
    };
    facts.read_dirs.push(base.clone());
    let extra = match pattern_dir(pattern) {
        Err(why) => Err(why),
        Ok(None) => Ok(()),
        Ok(Some(dir)) => {
            let joined = if dir.starts_with('/') || dir.starts_with('~') {
                dir
            } else {
                format!("{base}/{dir}")
            };
            match paths::resolve_tool_path(&joined, ctx) {
                Ok(dir) => {
                    facts.read_dirs.push(dir);
                    Ok(())
                }
                Err(problem) => Err(problem.sentence(Access::Read)),
            }
        }
    };
    judge_reads(&facts, ctx, extra)
}

/// The fixed directory part of a glob pattern (before the first wildcard), when there is one;
/// an error when the wildcard part could climb out of it.
fn pattern_dir(pattern: &str) -> Result<Option<String>, String> {
    if pattern.contains('$') || pattern.contains('`') || pattern.chars().any(char::is_control) {
        return Err(Problem::Unresolvable(
            "the pattern contains `$`, a backtick or a control character",
        )
        .sentence(Access::Read));
    }
    let wild = pattern.find(['*', '?', '[', '{']).unwrap_or(pattern.len());
    let (dir, tail) = match pattern[..wild].rfind('/') {
        Some(0) => ("/".to_owned(), &pattern[1..]),
        Some(slash) => (pattern[..slash].to_owned(), &pattern[slash + 1..]),
        None => (String::new(), pattern),
    };
    if may_climb(tail) {
        return Err(format!(
            "searches with a pattern that may reach outside its directory: {}",
            show(pattern)
        ));
    }
    Ok((!dir.is_empty()).then_some(dir))
}

/// Grep: the searched file or directory; a `glob` filter that could climb out or names
/// sensitive files.
fn grep(input: &Map<String, Value>, ctx: &Context) -> Decision {
    let mut facts = Facts {
        tool: "Grep",
        ..Facts::default()
    };
    match optional_path(input, "path").and_then(|raw| resolve(raw, ctx, Access::Read)) {
        Ok(path) => facts.read_dirs.push(path),
        Err(decision) => return decision,
    }
    let extra = match input.get("glob") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(filter)) => {
            if filter.starts_with('/') || may_climb(filter) {
                Err(format!(
                    "searches with a file filter that may reach outside: {}",
                    show(filter)
                ))
            } else {
                // A leading `!` leaves files out, as in `rg --glob`.
                let mut excluded = Vec::new();
                filters::rg_glob(filter, &mut excluded).and_then(|()| {
                    let excluded: Vec<&str> = excluded.iter().map(String::as_str).collect();
                    filters::excludes("Grep", &excluded)
                })
            }
        }
        Some(_) => Err("the `glob` of the call is not a string".to_owned()),
    };
    judge_reads(&facts, ctx, extra)
}

fn edit_tool(tool: &str, raw: Option<&str>, ctx: &Context) -> Decision {
    let Some(raw) = raw else {
        return Decision::flag("the call has no file path string");
    };
    let path = match resolve(raw, ctx, Access::Write) {
        Ok(path) => path,
        Err(decision) => return decision,
    };
    let facts = Facts {
        tool,
        writes: vec![path.clone()],
        ..Facts::default()
    };
    if let Some(decision) = deny_side(&facts, ctx) {
        return decision;
    }
    if ctx.restricted {
        return Decision::flag(format!("the session is restricted: {ALL_ONLY_READS}"));
    }
    if let Some(decision) = allow_side(&facts, ctx) {
        return decision;
    }
    match paths::check_write(ctx, &path) {
        Ok(()) => Decision::pass("edits a file inside the trusted directories"),
        Err(problem) => Decision::flag(problem.sentence(Access::Write)),
    }
}

/// Web tools and unknown tools: flagged unless an `auto_mode.allow` rule names them.
fn other_tool(facts: Facts<'_>, ctx: &Context, why: &str) -> Decision {
    if let Some(decision) = deny_side(&facts, ctx) {
        return decision;
    }
    if ctx.restricted {
        return Decision::flag(format!("the session is restricted: {ALL_ONLY_READS}"));
    }
    allow_side(&facts, ctx).unwrap_or_else(|| Decision::flag(why))
}
