//! End-to-end with the real Claude Code CLI and the plugin in `plugins/devin`.
//!
//! The pinned Claude Code validates the plugin, then runs `/devin:task` against the offline
//! summarizer bridge, once with `--plugin-dir plugins/devin` and once with the plugin installed
//! from the repository's marketplace (`claude plugin marketplace add`, `claude plugin install
//! devin@devin-bridge`) into a fresh HOME. The offline summarizer plays the
//! command's raw-args handshake with Claude Code's own tools (Bash `raw-args-create`, Read,
//! Write, Bash `task --raw-args-token`); the helper runs the task on the offline full agent
//! (`DEVIN_BIN` = `mock-devin`). The test checks every step from Claude Code's stream-json
//! events, that the helper's output reached the user unchanged, that the raw arguments never
//! appeared in a Bash command, that the raw-args file was consumed, and that the job record
//! says `done`.
//!
//! Needs node and npm. The Claude Code executable is `DEVIN_BRIDGE_CLAUDE_CODE` when set
//! (`cargo xtask test` sets it); otherwise the support crate installs the pinned version into
//! `target/claude-code/` on first use.

use crate::common;

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use common::bridge::mock_devin;
use common::claude::{
    claude_code, claude_version, offline_policy, run_claude, ClaudeInvocation, ServedBridge,
};

/// The raw arguments typed after `/devin:task`: quotes, `$`, backticks and a `;` that a shell
/// would act on, so a test can see they reached the helper as text.
const RAW_ARGUMENTS: &str = r#"--model swe-2 -- explain "this repo" for $HOME `id`; echo pwned"#;

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned()
}

fn plugin_dir() -> PathBuf {
    repository_root().join("plugins/devin")
}

#[test]
fn the_pinned_claude_code_validates_the_plugin() {
    let claude = claude_code();
    let output = Command::new(&claude)
        .args(["plugin", "validate", "--strict"])
        .arg(plugin_dir())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", tempfile::tempdir().expect("home").path())
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run claude plugin validate");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "validation failed:\n{text}");
    for part in [
        "devin:task",
        "devin:review",
        "devin:status",
        "devin:result",
        "devin:cancel",
        "devin:history",
        "devin:models",
        "devin:setup",
        "devin-rescue",
        "SessionEnd",
    ] {
        assert!(text.contains(part), "{part} missing from:\n{text}");
    }
}

/// Where Claude Code finds the plugin.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PluginSource {
    /// `--plugin-dir plugins/devin`.
    Directory,
    /// Installed into the user's HOME from this repository's marketplace
    /// (`.claude-plugin/marketplace.json`), as a Claude Code user installs it.
    Marketplace,
}

#[test]
fn slash_task_runs_through_the_raw_args_handshake() {
    slash_task(PluginSource::Directory);
}

#[test]
fn the_plugin_installs_from_the_repository_marketplace_and_runs_slash_task() {
    slash_task(PluginSource::Marketplace);
}

/// `claude plugin <args>` with the private HOME `home` and nothing else inherited but PATH.
fn claude_plugin(claude: &Path, home: &Path, args: &[&std::ffi::OsStr]) -> String {
    let output = Command::new(claude)
        .arg("plugin")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run claude plugin");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "claude plugin {args:?} failed:\n{text}"
    );
    text
}

fn slash_task(source: PluginSource) {
    let claude = claude_code();
    eprintln!("claude {} ({})", claude.display(), claude_version(&claude));
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical tempdir");
    let home = root.join(".sandbox").join("home");
    let project = root.join("project");
    let data = root.join("companion-data");
    for path in [&project, &root.join("claude-home"), &root.join("tmp")] {
        std::fs::create_dir_all(path).expect("create dir");
    }
    std::fs::write(project.join("README.md"), "A small project.\n").expect("readme");
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&project)
        .status()
        .expect("git init");
    assert!(git.success());
    let key = format!("e2e-local-key-{}", std::process::id());
    let key_file = root.join("bridge.key");
    std::fs::write(&key_file, &key).expect("key file");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");

    let policy = offline_policy(&root, &home, &key_file);
    let bridge = ServedBridge::start(&policy, &root, &home, &root.join("summarizer.jsonl"));

    // The helper the commands call is this build's `devin-bridge`, found on PATH.
    let helper_dir = Path::new(env!("CARGO_BIN_EXE_devin-bridge"))
        .parent()
        .expect("binary dir")
        .to_owned();
    let mut path = vec![helper_dir];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let mut extra_args = vec![OsString::from("--add-dir"), data.clone().into_os_string()];
    match source {
        PluginSource::Directory => {
            extra_args.extend([
                OsString::from("--plugin-dir"),
                plugin_dir().into_os_string(),
            ]);
        }
        PluginSource::Marketplace => {
            // The same HOME the run below uses: the plugin is installed for that user only.
            let home = root.join("claude-home");
            let added = claude_plugin(
                &claude,
                &home,
                &[
                    "marketplace".as_ref(),
                    "add".as_ref(),
                    repository_root().as_os_str(),
                ],
            );
            assert!(added.contains("devin-bridge"), "{added}");
            let installed = claude_plugin(
                &claude,
                &home,
                &["install".as_ref(), "devin@devin-bridge".as_ref()],
            );
            assert!(installed.contains("devin@devin-bridge"), "{installed}");
            let listed = claude_plugin(&claude, &home, &["list".as_ref()]);
            assert!(listed.contains("devin@devin-bridge"), "{listed}");
        }
    }
    let prompt = format!("/devin:task {RAW_ARGUMENTS}");
    let invocation = ClaudeInvocation {
        prompt: &prompt,
        allowed_tools: "Bash(devin-bridge companion:*),Read,Write",
        extra_args,
        extra_env: vec![
            ("PATH", std::env::join_paths(path).expect("PATH")),
            ("DEVIN_BIN", mock_devin().into_os_string()),
            ("DEVIN_COMPANION_DATA", data.clone().into_os_string()),
            ("WINDSURF_API_KEY", OsString::from("e2e-windsurf-key")),
        ],
    };
    let run = run_claude(&claude, &project, &root, &bridge.addr, &key, &invocation);
    let context = || run.context(&bridge.tail());
    assert!(run.status.success(), "claude failed\n{}", context());

    let uses = run.tool_uses();
    let names: Vec<&str> = uses.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["Bash", "Read", "Write", "Bash"], "{}", context());
    assert_eq!(
        uses[0].input["command"],
        "devin-bridge companion raw-args-create",
        "{}",
        context()
    );
    let created = run.tool_result(&uses[0]).expect("raw-args-create result");
    let transport = created
        .text
        .lines()
        .find_map(|line| line.strip_prefix("path:"))
        .map(|path| PathBuf::from(path.trim()))
        .unwrap_or_else(|| panic!("no path in {:?}\n{}", created.text, context()));
    assert!(transport.starts_with(&data), "{}", context());
    assert_eq!(uses[2].input["content"], RAW_ARGUMENTS, "{}", context());
    let command = uses[3].input["command"].as_str().unwrap_or_default();
    assert!(
        command.starts_with("devin-bridge companion task --raw-args-token "),
        "{command}\n{}",
        context()
    );
    for tool_use in &uses {
        if let Some(command) = tool_use.input["command"].as_str() {
            assert!(
                !command.contains("pwned") && !command.contains("this repo"),
                "raw arguments reached a shell: {command}"
            );
        }
    }
    let helper_output = run.tool_result(&uses[3]).expect("task result");
    assert!(!helper_output.is_error, "{}", context());
    assert!(
        helper_output.text.contains("\nstate: done"),
        "{}",
        context()
    );
    // The helper's output reaches the user unchanged.
    let result = run.result().expect("result event");
    assert_eq!(
        result["result"].as_str().map(str::trim),
        Some(helper_output.text.trim()),
        "{}",
        context()
    );
    assert!(!transport.exists(), "the transport file was not consumed");

    // The job record: done, with the brief as the helper parsed it from the raw arguments.
    let job = helper_output
        .text
        .lines()
        .find_map(|line| line.strip_prefix("job: "))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no job line\n{}", context()))
        .to_owned();
    let record = find_record(&data, &job);
    assert_eq!(record["status"], "done", "{record}");
    assert_eq!(record["requestedModel"], "swe-2", "{record}");
}

/// The record of `job` under `<data>/state/*/jobs/`.
fn find_record(data: &Path, job: &str) -> Value {
    for workspace in std::fs::read_dir(data.join("state")).expect("state dir") {
        let file = workspace
            .expect("entry")
            .path()
            .join("jobs")
            .join(format!("{job}.json"));
        if let Ok(text) = std::fs::read_to_string(&file) {
            return serde_json::from_str(&text).expect("record JSON");
        }
    }
    panic!("no record for {job} under {}", data.display())
}
