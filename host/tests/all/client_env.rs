//! `devin-bridge client-env`: the operator's BRIDGE_*_MODEL settings, from the environment and
//! an env file, checked against the catalog and printed as the exports Claude Code reads; a
//! bad value prints nothing on stdout. The real Claude Code, given those exports, no longer
//! warns that it does not know the model's context window.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::claude::{claude_code, offline_policy, run_in_group, GroupRun, ServedBridge};

fn client_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_devin-bridge"))
        .arg("client-env")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run client-env")
}

/// The `export NAME='value'` lines, as pairs (the `unset` lines are checked apart).
fn exports(output: &Output) -> Vec<(String, String)> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| !line.starts_with("unset "))
        .map(|line| {
            let rest = line.strip_prefix("export ").expect("an export line");
            let (name, value) = rest.split_once('=').expect("NAME=value");
            let value = value
                .strip_prefix('\'')
                .and_then(|v| v.strip_suffix('\''))
                .expect("single-quoted");
            (name.to_owned(), value.to_owned())
        })
        .collect()
}

fn value<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn refused(output: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        output.stdout.is_empty(),
        "stdout must be empty: {:?}",
        output.stdout
    );
    let line = stderr
        .lines()
        .find(|line| line.starts_with("devin-bridge client-env: "))
        .unwrap_or_else(|| panic!("no refusal line in {stderr}"));
    for needle in needles {
        assert!(line.contains(needle), "{line:?} lacks {needle:?}");
    }
}

#[test]
fn without_settings_every_role_is_the_catalogs_first_model_with_its_window() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = client_env(dir.path(), &[], &[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let pairs = exports(&output);
    let names: Vec<&str> = pairs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_MODEL",
            "ANTHROPIC_DEFAULT_SONNET_MODEL",
            "ANTHROPIC_DEFAULT_OPUS_MODEL",
            "ANTHROPIC_DEFAULT_HAIKU_MODEL",
            "CLAUDE_CODE_SUBAGENT_MODEL",
            "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        ]
    );
    assert_eq!(
        value(&pairs, "ANTHROPIC_BASE_URL"),
        Some("http://127.0.0.1:20128")
    );
    assert_eq!(
        value(&pairs, "ANTHROPIC_MODEL"),
        Some("devin-cli-agentic/swe-1-7")
    );
    assert_eq!(
        value(&pairs, "CLAUDE_CODE_SUBAGENT_MODEL"),
        Some("devin-cli-agentic/swe-1-7")
    );
    // The built-in catalog's swe-1-7 states 256000 tokens.
    assert_eq!(
        value(&pairs, "CLAUDE_CODE_AUTO_COMPACT_WINDOW"),
        Some("256000")
    );
    assert_eq!(
        value(&pairs, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"),
        Some("1")
    );
}

#[test]
fn the_default_env_file_is_read_and_the_environment_wins_over_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join(".env.devin-bridge"),
        "# operator settings\nBRIDGE_PRIMARY_MODEL=devin-cli-agentic/swe-2\n\
         BRIDGE_SONNET_MODEL=\"devin-cli-agentic/glm-5.2\"\nBRIDGE_HAIKU_MODEL=devin-cli-agentic/nope\n",
    )
    .expect("env file");
    let output = client_env(
        dir.path(),
        &["--base-url", "http://bridge:20128"],
        &[("BRIDGE_HAIKU_MODEL", "devin-cli-agentic/swe-1-6-fast")],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let pairs = exports(&output);
    assert_eq!(
        value(&pairs, "ANTHROPIC_BASE_URL"),
        Some("http://bridge:20128")
    );
    assert_eq!(
        value(&pairs, "ANTHROPIC_MODEL"),
        Some("devin-cli-agentic/swe-2")
    );
    assert_eq!(
        value(&pairs, "ANTHROPIC_DEFAULT_SONNET_MODEL"),
        Some("devin-cli-agentic/glm-5.2")
    );
    // The environment's value replaced the file's unknown model.
    assert_eq!(
        value(&pairs, "ANTHROPIC_DEFAULT_HAIKU_MODEL"),
        Some("devin-cli-agentic/swe-1-6-fast")
    );
    // Unset roles take the primary model.
    assert_eq!(
        value(&pairs, "CLAUDE_CODE_SUBAGENT_MODEL"),
        Some("devin-cli-agentic/swe-2")
    );
    // The smallest window in use: GLM 5.2 and SWE-1.6 Fast state 200000.
    assert_eq!(
        value(&pairs, "CLAUDE_CODE_AUTO_COMPACT_WINDOW"),
        Some("200000")
    );
}

#[test]
fn bad_values_exit_2_name_the_variable_and_its_source_and_print_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    refused(
        &client_env(dir.path(), &[], &[("BRIDGE_PRIMARY_MODEL", "swe-1-7")]),
        &[
            "BRIDGE_PRIMARY_MODEL",
            "the environment",
            "devin-cli-agentic/<model id>",
        ],
    );
    refused(
        &client_env(
            dir.path(),
            &[],
            &[("BRIDGE_SUBAGENT_MODEL", "devin-cli-agentic/no-such-model")],
        ),
        &["BRIDGE_SUBAGENT_MODEL", "not in the model catalog"],
    );
    let file = dir.path().join("models.env");
    std::fs::write(&file, "BRIDGE_SONNET_MODEL=devin-cli-agentic/adaptive\n").expect("write");
    refused(
        &client_env(dir.path(), &["--env-file", "models.env"], &[]),
        &[
            "BRIDGE_SONNET_MODEL",
            "models.env",
            "devin-cli-agentic/<model id>",
        ],
    );
    std::fs::write(&file, "BRIDGE_FAST_MODEL=devin-cli-agentic/swe-1-7\n").expect("write");
    refused(
        &client_env(dir.path(), &["--env-file", "models.env"], &[]),
        &["models.env", "unknown setting BRIDGE_FAST_MODEL"],
    );
    refused(
        &client_env(dir.path(), &["--env-file", "missing.env"], &[]),
        &["missing.env"],
    );
    refused(
        &client_env(dir.path(), &["--base-url", "bridge:20128"], &[]),
        &["--base-url", "http://HOST"],
    );
}

#[test]
fn a_summarizer_policy_gives_its_listen_address_and_its_catalog() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("models.json"),
        r#"{"families":[{"slug":"only","variants":[{"model_uid":"only-1","max_context_tokens":131072}]}]}"#,
    )
    .expect("catalog");
    std::fs::write(
        dir.path().join("bridge.toml"),
        "mode = \"summarizer\"\n[server]\nlisten = \"127.0.0.1:23456\"\n[models]\ncatalog = \"models.json\"\n",
    )
    .expect("policy");
    let output = client_env(dir.path(), &["--policy", "bridge.toml"], &[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let pairs = exports(&output);
    assert_eq!(
        value(&pairs, "ANTHROPIC_BASE_URL"),
        Some("http://127.0.0.1:23456")
    );
    assert_eq!(
        value(&pairs, "ANTHROPIC_MODEL"),
        Some("devin-cli-agentic/only-1")
    );
    assert_eq!(
        value(&pairs, "CLAUDE_CODE_AUTO_COMPACT_WINDOW"),
        Some("131072")
    );
    // A model of the built-in catalog is not in this policy's catalog.
    refused(
        &client_env(
            dir.path(),
            &["--policy", "bridge.toml"],
            &[("BRIDGE_PRIMARY_MODEL", "devin-cli-agentic/swe-1-7")],
        ),
        &["BRIDGE_PRIMARY_MODEL"],
    );
}

#[test]
fn claude_code_given_the_exports_no_longer_warns_about_the_context_window() {
    const WARNING: &str = "doesn't recognize the model";
    let claude = claude_code();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let project = root.join("project");
    for path in [&project, &root.join("claude-home"), &root.join("tmp")] {
        std::fs::create_dir_all(path).expect("mkdir");
    }
    let key = format!("client-env-key-{}", std::process::id());
    let key_file = root.join("bridge.key");
    std::fs::write(&key_file, &key).expect("key");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let home = root.join(".sandbox").join("home");
    let policy = offline_policy(&root, &home, &key_file);
    let mut bridge = ServedBridge::start(&policy, &root, &home, &root.join("agent.jsonl"));

    // Without the window, the pinned Claude Code warns (this is what the exports fix).
    let base_url = format!("http://{}", bridge.addr);
    let models = [
        ("ANTHROPIC_BASE_URL", base_url.as_str()),
        ("ANTHROPIC_MODEL", "devin-cli-agentic/swe-1-7"),
        ("ANTHROPIC_DEFAULT_HAIKU_MODEL", "devin-cli-agentic/swe-1-7"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ];
    let plain = claude_print(&claude, &project, &root, &key, &models);
    assert!(
        plain.contains(WARNING),
        "no warning without the exports:\n{plain}"
    );

    let output = client_env(
        &root,
        &["--base-url", &base_url],
        &[("BRIDGE_API_KEY", &key)],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let pairs = exports(&output);
    let env: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let with_exports = claude_print(&claude, &project, &root, &key, &env);
    bridge.stop();
    assert!(
        !with_exports.contains(WARNING),
        "still warned with the exports:\n{with_exports}"
    );
}

/// `claude -p` with text output (where Claude Code prints its notices), a private HOME and
/// only `env` besides PATH and the key; its stdout and stderr together.
fn claude_print(
    claude: &Path,
    project: &Path,
    root: &Path,
    key: &str,
    env: &[(&str, &str)],
) -> String {
    let GroupRun {
        status,
        stdout,
        stderr,
    } = run_in_group(
        Command::new(claude)
            .args(["-p", "Say hello.", "--allowedTools", "Read"])
            .current_dir(project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", root.join("claude-home"))
            .env("TMPDIR", root.join("tmp"))
            .env("ANTHROPIC_API_KEY", key)
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .envs(env.iter().copied())
            .stdin(Stdio::null()),
        std::time::Duration::from_secs(120),
    );
    let text = format!("{stdout}{stderr}");
    assert!(status.is_some(), "claude did not finish:\n{text}");
    text
}

#[test]
fn client_env_prints_only_its_exports_and_logs_only_with_v() {
    // Each run in a fresh home, so each compiles the model-alias component (a log line).
    let dir = tempfile::tempdir().expect("tempdir");
    let other = tempfile::tempdir().expect("tempdir");
    let key = [("BRIDGE_API_KEY", "a-bridge-key-for-this-test")];
    let quiet = client_env(dir.path(), &[], &key);
    assert!(quiet.status.success());
    assert!(
        quiet.stderr.is_empty(),
        "stderr: {}",
        String::from_utf8_lossy(&quiet.stderr)
    );
    let verbose = client_env(other.path(), &["-v"], &key);
    assert!(verbose.status.success());
    assert_eq!(verbose.stdout, quiet.stdout, "-v changes stderr only");
    assert!(
        String::from_utf8_lossy(&verbose.stderr).contains("component compiled"),
        "-v shows the bridge's log lines: {}",
        String::from_utf8_lossy(&verbose.stderr)
    );
}
