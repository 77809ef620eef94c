//! Shared by the table tests: the contexts they judge against and one call's evaluation.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unreachable_pub)]

use devin_bridge_safeguard::judge;
use devin_bridge_types::{CallVerdict, Evaluation, SafeguardOutcome, SafeguardStatus, ToolCall};
use serde_json::{json, Value};

/// The project is `/proj` (also the working directory), with `/shared/lib` trusted too. The
/// user has rules of every kind; prose entries sit first so that indexes are not all 0.
pub fn context() -> Value {
    json!({
        "v": 1,
        "permission_mode": "auto",
        "platform": "linux",
        "live_cwd": "/proj",
        "home_dir": "/home/u",
        "trusted_directories": {
            "primary": {"path": "/proj"},
            "additional": ["/shared/lib", {"path": "relative/ignored"}],
            "network": [],
            "block_reads_outside_working_directories": false
        },
        "rules": {
            "allow": [{"rule": "Bash(curl:*)", "source": "userSettings"}],
            "deny": [{"rule": "Bash(docker:*)", "source": "userSettings"}, "Read(~/secret-notes/**)"],
            "ask": [{"rule": "Edit(./docs/**)", "source": "projectSettings"}]
        },
        "auto_mode": {
            "allow": [
                "Allow the usual deploy flow",
                "Bash(make deploy:*)",
                "WebFetch(domain:docs.rs)",
                "mcp__github",
                "Edit(./generated/**)",
                "Bash(docker ps)"
            ],
            "soft_deny": ["Never touch production", "Bash(terraform apply:*)", "Read(./private/**)"],
            "hard_deny": ["Bash(git push:*)", "Edit(./vendor/**)"],
            "environment": ["A developer laptop"]
        },
        "classify_all_shell": false,
        "restricted": false,
        "is_remote_mode": false
    })
}

/// The context with one top-level field changed.
pub fn context_with(key: &str, value: Value) -> Value {
    let mut ctx = context();
    ctx[key] = value;
    ctx
}

/// The offline agent's demo: `/w` is the working directory and the only trusted directory.
pub fn demo_context() -> Value {
    json!({
        "v": 1,
        "permission_mode": "auto",
        "live_cwd": "/w",
        "home_dir": "/home/agent",
        "trusted_directories": {"primary": {"path": "/w"}, "additional": []},
        "rules": {"allow": [], "deny": [], "ask": []},
        "auto_mode": {"allow": [], "soft_deny": [], "hard_deny": []},
        "classify_all_shell": false,
        "restricted": false
    })
}

/// Judges one call and returns its evaluation.
pub fn evaluate(tool: &str, input: &Value, ctx: &Value) -> Evaluation {
    let calls = [ToolCall {
        id: "toolu_01".to_owned(),
        name: tool.to_owned(),
        input: input.to_string(),
    }];
    match judge(&calls, &ctx.to_string()) {
        SafeguardStatus::Available(verdicts) => {
            assert_eq!(verdicts.len(), 1);
            assert_eq!(verdicts[0].id, "toolu_01");
            match &verdicts[0].verdict {
                CallVerdict::Evaluated(evaluation) => evaluation.clone(),
                other => panic!("not evaluated: {other:?}"),
            }
        }
        other => panic!("not available: {other:?}"),
    }
}

/// One row of a table: a named call, the context it is judged in, and the citation expected
/// (`None`: no citation).
pub struct Row {
    pub name: String,
    pub tool: String,
    pub input: Value,
    pub ctx: Value,
    pub cites: Option<String>,
}

impl Row {
    pub fn in_ctx(mut self, ctx: Value) -> Row {
        self.ctx = ctx;
        self
    }

    pub fn cites(mut self, path: &str) -> Row {
        self.cites = Some(path.to_owned());
        self
    }
}

pub fn bash(name: &str, command: &str) -> Row {
    tool(
        name,
        "Bash",
        json!({"command": command, "description": "x"}),
    )
}

pub fn tool(name: &str, tool: &str, input: Value) -> Row {
    Row {
        name: name.to_owned(),
        tool: tool.to_owned(),
        input,
        ctx: context(),
        cites: None,
    }
}

/// Judges every row; returns one line per row whose outcome or citation is not the expected
/// one (empty when all are right). Every explanation must be non-empty and at most 200
/// characters.
pub fn check(rows: &[Row], want: SafeguardOutcome) -> Vec<String> {
    let mut failures = Vec::new();
    for row in rows {
        let evaluation = evaluate(&row.tool, &row.input, &row.ctx);
        let explanation_ok =
            !evaluation.explanation.is_empty() && evaluation.explanation.chars().count() <= 200;
        let cite_ok = row.cites.is_none() || evaluation.cited_rule == row.cites;
        if evaluation.outcome != want || !cite_ok || !explanation_ok {
            failures.push(format!(
                "{}: {:?} (cited {:?}, wanted {:?}): {}",
                row.name,
                evaluation.outcome,
                evaluation.cited_rule,
                row.cites,
                evaluation.explanation
            ));
        }
    }
    failures
}

/// One `Bash` row per command, each named by its class and command.
pub fn bashes(class: &str, commands: &[&str]) -> Vec<Row> {
    commands
        .iter()
        .map(|command| bash(&format!("{class}: {command}"), command))
        .collect()
}

/// One `Bash` row per command with the other fields of the call given.
pub fn bash_with(class: &str, fields: &[(&str, Value)]) -> Vec<Row> {
    fields
        .iter()
        .map(|(command, extra)| {
            let mut input = json!({"command": command});
            if let (Some(input), Value::Object(extra)) = (input.as_object_mut(), extra) {
                input.extend(extra.clone());
            }
            tool(&format!("{class}: {command} {extra}"), "Bash", input)
        })
        .collect()
}

/// The context of a macOS client that names no shell: zsh runs the commands.
pub fn macos_context() -> Value {
    context_with("platform", json!("darwin"))
}

/// The context of a client whose shell is zsh, by path.
pub fn zsh_context() -> Value {
    context_with("shell", json!("/bin/zsh"))
}
