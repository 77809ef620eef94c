//! The request's `classifier_context`, read into what the judge uses.
//!
//! Invariants:
//! - A context larger than [`MAX_CONTEXT_BYTES`], not JSON, not an object, or with a
//!   known field of the wrong type is an error (the whole answer becomes `unavailable`); the
//!   error names the field and what it held, never its value (the context is private).
//! - Unknown fields are ignored; a missing or `null` field takes its default (no directory,
//!   no rules, `false`).
//! - `live_cwd` and `home_dir` must be absolute POSIX paths when present (a Windows client
//!   sends `C:\...`: the judge reads POSIX shells only, so it steps aside). Trusted directories
//!   are normalized; a non-absolute one is ignored.
//! - Rule entries keep their index: a citation is `auto_mode.allow.<index in that list>`.
//! - The shell is zsh when `shell` names zsh (a name or a path), or when no `shell` is given and
//!   `platform` is macOS (`darwin`); another named shell than bash, sh, dash or zsh is kept by
//!   name (the judge then flags every `Bash` call); otherwise it is sh.

use serde_json::{Map, Value};

use crate::decisive::Written;
use crate::pathname::normalize;
use crate::rule::{Rule, RuleEntry};

/// Largest `classifier_context` read, in bytes; a larger one makes the answer `Unavailable`.
pub(crate) const MAX_CONTEXT_BYTES: usize = 256 * 1024;

/// What the judge reads from the context.
#[derive(Debug, Default, Clone)]
pub(crate) struct Context {
    /// `live_cwd`, normalized.
    pub(crate) cwd: Option<String>,
    /// `home_dir`, normalized.
    pub(crate) home: Option<String>,
    /// `trusted_directories.primary.path`, normalized.
    pub(crate) primary: Option<String>,
    /// The primary directory and every absolute additional one, normalized.
    pub(crate) trusted: Vec<String>,
    /// `rules.deny`.
    pub(crate) deny: Vec<RuleEntry>,
    /// `rules.ask`.
    pub(crate) ask: Vec<RuleEntry>,
    /// `auto_mode.allow`.
    pub(crate) allow: Vec<RuleEntry>,
    /// `auto_mode.soft_deny`.
    pub(crate) soft_deny: Vec<RuleEntry>,
    /// `auto_mode.hard_deny`.
    pub(crate) hard_deny: Vec<RuleEntry>,
    pub(crate) classify_all_shell: bool,
    /// `restricted`, or `permission_mode` `plan`: only reads pass.
    pub(crate) restricted: bool,
    /// The shell `Bash` commands run in, from `shell` and `platform`.
    pub(crate) shell: Shell,
    /// What the conversation's earlier calls wrote: not part of the classifier context, it is
    /// filled in from the earlier calls ([`crate::history`]) after the context is read.
    pub(crate) written: Written,
}

/// The shell the client runs `Bash` commands in.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) enum Shell {
    /// bash, sh or dash; also when neither `shell` nor a macOS `platform` says otherwise.
    #[default]
    Sh,
    /// `shell` names zsh, or no `shell` is named and `platform` is macOS (`darwin`), whose
    /// default shell is zsh.
    Zsh,
    /// `shell` names another shell (fish, nu, ...), whose syntax the judge does not read.
    Other(String),
}

/// The shell named by the context's `shell` (a name or a path) and `platform`.
fn shell_of(shell: Option<&str>, platform: Option<&str>) -> Shell {
    match shell {
        Some(shell) => {
            let name = shell.rsplit('/').next().unwrap_or(shell);
            match name {
                "zsh" => Shell::Zsh,
                "bash" | "sh" | "dash" => Shell::Sh,
                other => Shell::Other(other.to_owned()),
            }
        }
        None if platform.is_some_and(|p| matches!(p, "darwin" | "macos")) => Shell::Zsh,
        None => Shell::Sh,
    }
}

/// Reads the context; the error is the reason of an `unavailable` answer.
pub(crate) fn parse(text: &str) -> Result<Context, String> {
    if text.len() > MAX_CONTEXT_BYTES {
        return Err(format!(
            "classifier_context is {} bytes, more than the judge's limit of {}",
            text.len(),
            MAX_CONTEXT_BYTES
        ));
    }
    let value: Value = serde_json::from_str(text).map_err(|error| {
        format!(
            "classifier_context is not JSON (line {}, column {})",
            error.line(),
            error.column()
        )
    })?;
    let Value::Object(root) = value else {
        return Err(format!(
            "classifier_context is {}, not an object",
            kind(&value)
        ));
    };
    let mut ctx = Context {
        cwd: absolute(&root, "live_cwd")?,
        home: absolute(&root, "home_dir")?,
        ..Context::default()
    };
    if let Some(dirs) = object(&root, "trusted_directories", "trusted_directories")? {
        read_trusted(&mut ctx, dirs)?;
    }
    if let Some(rules) = object(&root, "rules", "rules")? {
        // `rules.allow` never makes a call pass (only `auto_mode.allow` does); it is still
        // type-checked so that a malformed context is reported whatever part is broken.
        rule_list(rules, "allow", "rules.allow")?;
        ctx.deny = rule_list(rules, "deny", "rules.deny")?;
        ctx.ask = rule_list(rules, "ask", "rules.ask")?;
    }
    if let Some(auto) = object(&root, "auto_mode", "auto_mode")? {
        ctx.allow = rule_list(auto, "allow", "auto_mode.allow")?;
        ctx.soft_deny = rule_list(auto, "soft_deny", "auto_mode.soft_deny")?;
        ctx.hard_deny = rule_list(auto, "hard_deny", "auto_mode.hard_deny")?;
        // `environment` is prose about the user's setup: type-checked, never matched.
        rule_list(auto, "environment", "auto_mode.environment")?;
    }
    ctx.shell = shell_of(
        string(&root, "shell", "shell")?,
        string(&root, "platform", "platform")?,
    );
    ctx.classify_all_shell = boolean(&root, "classify_all_shell")?.unwrap_or(false);
    ctx.restricted = boolean(&root, "restricted")?.unwrap_or(false);
    if let Some(mode) = string(&root, "permission_mode", "permission_mode")? {
        if mode == "plan" {
            ctx.restricted = true;
        }
    }
    Ok(ctx)
}

fn read_trusted(ctx: &mut Context, dirs: &Map<String, Value>) -> Result<(), String> {
    let name = "trusted_directories";
    if let Some(primary) = object(dirs, "primary", "trusted_directories.primary")? {
        if let Some(path) = string(primary, "path", "trusted_directories.primary.path")? {
            ctx.primary = trusted_path(path);
        }
    }
    ctx.trusted.extend(ctx.primary.clone());
    match dirs.get("additional") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let path = match item {
                    Value::String(path) => path.as_str(),
                    Value::Object(entry) => {
                        let field = format!("{name}.additional[{i}].path");
                        string(entry, "path", &field)?.unwrap_or("")
                    }
                    other => {
                        return Err(format!(
                        "{name}.additional[{i}] is {}, expected a string or an object with `path`",
                        kind(other)
                    ))
                    }
                };
                ctx.trusted.extend(trusted_path(path));
            }
        }
        Some(other) => {
            return Err(format!(
                "{name}.additional is {}, expected an array",
                kind(other)
            ))
        }
    }
    boolean(dirs, "block_reads_outside_working_directories")?;
    ctx.trusted.sort();
    ctx.trusted.dedup();
    Ok(())
}

/// A trusted directory as the judge compares it: absolute and normalized, or nothing.
fn trusted_path(path: &str) -> Option<String> {
    if path.starts_with('/') && !path.chars().any(char::is_control) {
        Some(normalize(path))
    } else {
        None
    }
}

fn rule_list(map: &Map<String, Value>, key: &str, field: &str) -> Result<Vec<RuleEntry>, String> {
    let items = match map.get(key) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(format!("{field} is {}, expected an array", kind(other))),
    };
    let mut entries = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let text = match item {
            Value::String(text) => text.as_str(),
            Value::Object(entry) => {
                string(entry, "source", &format!("{field}[{i}].source"))?;
                string(entry, "rule", &format!("{field}[{i}].rule"))?
                    .ok_or_else(|| format!("{field}[{i}] has no `rule` string"))?
            }
            other => {
                return Err(format!(
                    "{field}[{i}] is {}, expected a string or an object with `rule`",
                    kind(other)
                ))
            }
        };
        entries.push(RuleEntry {
            path: format!("{field}.{i}"),
            text: text.to_owned(),
            rule: Rule::parse(text),
        });
    }
    Ok(entries)
}

fn absolute(map: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match string(map, key, key)? {
        None => Ok(None),
        Some(path) if path.starts_with('/') => Ok(Some(normalize(path))),
        Some(_) => Err(format!("{key} is not an absolute POSIX path")),
    }
}

fn object<'v>(
    map: &'v Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<&'v Map<String, Value>>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(inner)) => Ok(Some(inner)),
        Some(other) => Err(format!("{field} is {}, expected an object", kind(other))),
    }
}

fn string<'v>(
    map: &'v Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<&'v str>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(format!("{field} is {}, expected a string", kind(other))),
    }
}

fn boolean(map: &Map<String, Value>, key: &str) -> Result<Option<bool>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(other) => Err(format!("{key} is {}, expected a boolean", kind(other))),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_field() {
        let ctx = parse(
            r#"{"v":1,"permission_mode":"auto","live_cwd":"/proj/./sub/","home_dir":"/home/u",
                "trusted_directories":{"primary":{"path":"/proj"},
                    "additional":["/data//x", {"path":"/other"}, "relative/dir"],
                    "block_reads_outside_working_directories":true},
                "rules":{"allow":[{"rule":"Bash(ls:*)","source":"userSettings"}],
                         "deny":["Bash(rm:*)"],"ask":[{"rule":"Edit(./x)","source":"cliArg"}]},
                "auto_mode":{"allow":["Bash(make:*)","prose entry"],"soft_deny":[],
                             "hard_deny":["Bash(git push:*)"],"environment":["a laptop"]},
                "classify_all_shell":false,"restricted":false,"future_field":{"x":1}}"#,
        )
        .unwrap();
        assert_eq!(ctx.cwd.as_deref(), Some("/proj/sub"));
        assert_eq!(ctx.home.as_deref(), Some("/home/u"));
        assert_eq!(ctx.primary.as_deref(), Some("/proj"));
        assert_eq!(ctx.trusted, vec!["/data/x", "/other", "/proj"]);
        assert_eq!(ctx.deny.len(), 1);
        assert_eq!(ctx.ask[0].path, "rules.ask.0");
        assert_eq!(ctx.allow[1].path, "auto_mode.allow.1");
        assert!(ctx.allow[0].rule.is_some());
        assert!(ctx.allow[1].rule.is_none(), "prose is not a rule");
        assert_eq!(ctx.hard_deny[0].path, "auto_mode.hard_deny.0");
        assert!(!ctx.restricted);
    }

    #[test]
    fn defaults_when_missing() {
        let ctx = parse("{}").unwrap();
        assert!(ctx.cwd.is_none() && ctx.home.is_none() && ctx.trusted.is_empty());
        assert!(!ctx.restricted && !ctx.classify_all_shell);
        let ctx = parse(r#"{"live_cwd":null,"rules":null}"#).unwrap();
        assert!(ctx.cwd.is_none());
    }

    #[test]
    fn shell_from_shell_then_platform() {
        for (text, want) in [
            (r#"{}"#, Shell::Sh),
            (r#"{"platform":"linux"}"#, Shell::Sh),
            (r#"{"platform":"darwin"}"#, Shell::Zsh),
            (r#"{"platform":"darwin","shell":"/bin/bash"}"#, Shell::Sh),
            (r#"{"platform":"linux","shell":"/usr/bin/zsh"}"#, Shell::Zsh),
            (r#"{"shell":"zsh"}"#, Shell::Zsh),
            (
                r#"{"shell":"/usr/bin/fish"}"#,
                Shell::Other("fish".to_owned()),
            ),
        ] {
            assert_eq!(parse(text).unwrap().shell, want, "{text}");
        }
        assert!(parse(r#"{"platform":3}"#)
            .unwrap_err()
            .contains("platform is a number"));
        assert!(parse(r#"{"shell":true}"#)
            .unwrap_err()
            .contains("shell is a boolean"));
    }

    #[test]
    fn plan_mode_restricts() {
        assert!(parse(r#"{"permission_mode":"plan"}"#).unwrap().restricted);
        assert!(parse(r#"{"restricted":true}"#).unwrap().restricted);
    }

    #[test]
    fn malformed_contexts_name_the_problem() {
        let big = format!("{{\"x\":\"{}\"}}", "a".repeat(MAX_CONTEXT_BYTES));
        for (text, needle) in [
            ("not json", "not JSON"),
            ("[1,2]", "an array, not an object"),
            ("\"text\"", "a string, not an object"),
            (big.as_str(), "limit"),
            (r#"{"live_cwd":5}"#, "live_cwd is a number"),
            (r#"{"live_cwd":"relative"}"#, "live_cwd is not an absolute"),
            (
                r#"{"home_dir":"C:\\Users\\u"}"#,
                "home_dir is not an absolute",
            ),
            (
                r#"{"trusted_directories":[]}"#,
                "trusted_directories is an array",
            ),
            (
                r#"{"trusted_directories":{"primary":"/p"}}"#,
                "trusted_directories.primary is a string",
            ),
            (
                r#"{"trusted_directories":{"primary":{"path":1}}}"#,
                "primary.path is a number",
            ),
            (
                r#"{"trusted_directories":{"additional":"/p"}}"#,
                "additional is a string",
            ),
            (
                r#"{"trusted_directories":{"additional":[true]}}"#,
                "additional[0] is a boolean",
            ),
            (
                r#"{"trusted_directories":{"block_reads_outside_working_directories":"yes"}}"#,
                "block_reads_outside_working_directories is a string",
            ),
            (r#"{"rules":{"deny":"Bash"}}"#, "rules.deny is a string"),
            (r#"{"rules":{"ask":[3]}}"#, "rules.ask[0] is a number"),
            (
                r#"{"rules":{"allow":[{"source":"x"}]}}"#,
                "rules.allow[0] has no `rule`",
            ),
            (
                r#"{"rules":{"deny":[{"rule":"Bash","source":7}]}}"#,
                "rules.deny[0].source is a number",
            ),
            (
                r#"{"auto_mode":{"allow":[{"x":1}]}}"#,
                "auto_mode.allow[0] has no `rule`",
            ),
            (
                r#"{"auto_mode":{"hard_deny":{}}}"#,
                "auto_mode.hard_deny is an object",
            ),
            (
                r#"{"auto_mode":{"environment":[1]}}"#,
                "auto_mode.environment[0] is a number",
            ),
            (r#"{"auto_mode":true}"#, "auto_mode is a boolean"),
            (
                r#"{"classify_all_shell":"true"}"#,
                "classify_all_shell is a string",
            ),
            (r#"{"restricted":1}"#, "restricted is a number"),
            (
                r#"{"permission_mode":["auto"]}"#,
                "permission_mode is an array",
            ),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(needle), "{text}: {error}");
        }
    }
}
