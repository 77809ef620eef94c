//! `devin-bridge safeguard explain`: one call judged offline by the built-in safeguard
//! component, against the working directory, a classifier context or a request body Claude
//! Code sent; a flagged call comes with the `auto_mode.allow` entry that lets it run, and a
//! context the judge cannot read is refused with a message naming the file and the problem.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use crate::common;

fn explain(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_devin-bridge"))
        .args(["safeguard", "explain"])
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("XDG_CACHE_HOME", common::bridge_cache_home())
        .stdin(Stdio::null())
        .output()
        .expect("run safeguard explain")
}

/// `explain --command ls --context FILE`, run in `dir`.
fn explain_ls_in(dir: &Path, context: &Path) -> Output {
    explain(
        dir,
        &[
            "--command",
            "ls",
            "--context",
            context.to_str().expect("utf-8"),
        ],
    )
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn json_of(output: &Output) -> Value {
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

fn refused(output: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(output.stdout.is_empty(), "stdout: {}", stdout(output));
    for needle in needles {
        assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    }
}

fn project() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    (dir, root)
}

/// The classifier context of a project at `root`, with the user's `allow` entries.
fn context(root: &Path, allow: &[&str]) -> Value {
    json!({
        "v": 1,
        "permission_mode": "auto",
        "live_cwd": root,
        "home_dir": "/home/u",
        "trusted_directories": {"primary": {"path": root}},
        "auto_mode": {"allow": allow},
    })
}

#[test]
fn a_safe_call_passes_against_the_working_directory() {
    let (_dir, root) = project();
    let output = explain(&root, &["--command", "git status && ls -la"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = stdout(&output);
    assert!(text.contains("verdict: not flagged"), "{text}");
    assert!(text.contains("rule: the judge's own rules"), "{text}");
    assert!(
        text.contains(&format!("the working directory {}", root.display())),
        "{text}"
    );
    assert!(!text.contains("allow:"), "{text}");

    let answer = json_of(&explain(
        &root,
        &[
            "--tool",
            "Read",
            "--input",
            &json!({"file_path": root.join("src/main.rs")}).to_string(),
            "--json",
        ],
    ));
    assert_eq!(answer["outcome"], "not_flagged", "{answer}");
    assert_eq!(answer["tool"], "Read");
    assert!(answer["allow"].is_null(), "{answer}");
}

#[test]
fn a_flagged_call_comes_with_the_allow_entry_that_passes_it() {
    let (_dir, root) = project();
    let output = explain(
        &root,
        &["--command", "cd sub && docker ps -a 2>&1 | head -5"],
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = stdout(&output);
    assert!(text.contains("verdict: flagged"), "{text}");
    assert!(
        text.contains("add \"Bash(docker ps:*)\" to auto_mode.allow"),
        "{text}"
    );

    let answer = json_of(&explain(
        &root,
        &["--command", "curl -s https://example.com/x", "--json"],
    ));
    assert_eq!(answer["outcome"], "flagged", "{answer}");
    assert!(
        answer["explanation"]
            .as_str()
            .unwrap_or("")
            .contains("curl"),
        "{answer}"
    );
    assert_eq!(answer["allow"], json!(["Bash(curl:*)"]), "{answer}");

    // The suggested entry really passes the call: judged again with it in the context.
    let file = root.join("context.json");
    std::fs::write(&file, context(&root, &["Bash(curl:*)"]).to_string()).expect("context");
    let answer = json_of(&explain(
        &root,
        &[
            "--command",
            "curl -s https://example.com/x",
            "--context",
            file.to_str().expect("utf-8"),
            "--json",
        ],
    ));
    assert_eq!(answer["outcome"], "not_flagged", "{answer}");
    assert_eq!(answer["cited_rule"], "auto_mode.allow.0", "{answer}");

    // A write outside the project: an Edit entry for that file.
    let answer = json_of(&explain(
        &root,
        &[
            "--tool",
            "Write",
            "--input",
            r#"{"file_path":"/etc/hosts","content":"x"}"#,
            "--json",
        ],
    ));
    assert_eq!(answer["outcome"], "flagged", "{answer}");
    assert_eq!(answer["allow"], json!(["Edit(//etc/hosts)"]), "{answer}");
}

#[test]
fn a_request_body_brings_its_context_and_its_earlier_calls() {
    let (_dir, root) = project();
    let manifest = root.join("package.json");
    let request = json!({
        "model": "devin-cli-agentic/swe-1-7",
        "max_tokens": 1024,
        "tools": [{"name": "Edit", "description": "Edit", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "Make the tests fetch their fixtures."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Edit",
                "input": {"file_path": manifest, "old_string": "a", "new_string": "b"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
        ],
        "safeguards": [{"type": "dangerous_tool_use", "classifier_context": context(&root, &[])}],
    });
    let file = root.join("request.json");
    std::fs::write(&file, request.to_string()).expect("request");
    let file = file.to_str().expect("utf-8");

    let answer = json_of(&explain(
        &root,
        &["--command", "npm test", "--context", file, "--json"],
    ));
    assert_eq!(answer["outcome"], "flagged", "{answer}");
    assert_eq!(answer["earlier_calls"], 1, "{answer}");
    let why = answer["explanation"].as_str().unwrap_or("");
    assert!(
        why.contains("package.json") && why.contains("earlier Edit call"),
        "{answer}"
    );
    assert_eq!(answer["allow"], json!(["Bash(npm test:*)"]), "{answer}");

    // Without the conversation, the same run passes.
    let bare = root.join("bare.json");
    std::fs::write(&bare, context(&root, &[]).to_string()).expect("context");
    let answer = json_of(&explain(
        &root,
        &[
            "--command",
            "npm test",
            "--context",
            bare.to_str().expect("utf-8"),
            "--json",
        ],
    ));
    assert_eq!(answer["outcome"], "not_flagged", "{answer}");
}

#[test]
fn a_context_the_judge_cannot_read_is_refused_with_the_reason() {
    let (_dir, root) = project();
    let bad = root.join("bad.json");
    std::fs::write(&bad, "{ not json").expect("bad");
    refused(
        &explain_ls_in(&root, &bad),
        &["bad.json", "is not JSON (line 1, column 3)"],
    );
    let wrong = root.join("wrong.json");
    std::fs::write(&wrong, r#"{"live_cwd": 5}"#).expect("wrong");
    refused(
        &explain_ls_in(&root, &wrong),
        &["the judge cannot read the context", "live_cwd is a number"],
    );
    let missing = root.join("missing.json");
    refused(
        &explain_ls_in(&root, &missing),
        &["cannot read the context", "missing.json"],
    );
    let request = root.join("request.json");
    std::fs::write(
        &request,
        json!({"model": "devin-cli-agentic/swe-1-7", "max_tokens": 8,
               "messages": [{"role": "user", "content": "hi"}]})
        .to_string(),
    )
    .expect("request");
    refused(
        &explain(
            &root,
            &[
                "--command",
                "ls",
                "--context",
                request.to_str().expect("utf-8"),
            ],
        ),
        &["asks for no dangerous_tool_use safeguard"],
    );
    refused(
        &explain(&root, &["--tool", "Read", "--input", "[1]"]),
        &["--input is not a JSON object"],
    );
}
