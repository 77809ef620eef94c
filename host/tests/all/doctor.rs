//! `devin-bridge doctor`: passes on the offline policy, and names each problem, with its fix,
//! on an offline agent made to refuse (a client identity the service does not accept, a home
//! that is not logged in, a missing CLI). `--json` is evidence without secrets.

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

/// A summarizer policy in `dir` whose agent is the offline one (or `command`), with extra
/// `[agent]` lines.
fn policy(dir: &Path, command: Option<&str>, agent: &str) -> std::path::PathBuf {
    let mock = common::bridge::mock_devin();
    let command = command.map_or_else(|| mock.display().to_string(), str::to_owned);
    let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/models.json");
    let text = common::policy_text(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nrequire_key = false\n\
         [agent]\ncommand = {command:?}\nargs = [\"acp\", \"--agent-type\", \"summarizer\"]\n\
         home = {:?}\noffline = true\n{agent}\n\
         [models]\ncatalog = {:?}\n",
        dir.join(".sandbox").join("home").display().to_string(),
        catalog.display().to_string(),
    ));
    let path = dir.join("policy.toml");
    std::fs::write(&path, text).expect("policy");
    path
}

fn doctor(policy: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_devin-bridge"))
        .arg("doctor")
        .arg("--policy")
        .arg(policy)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("XDG_CACHE_HOME", common::bridge_cache_home())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run doctor")
}

fn report(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "{error}: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|check| check["name"] == name))
        .unwrap_or_else(|| panic!("no {name} check in {report}"))
}

#[test]
fn doctor_passes_on_the_offline_policy_and_shows_which_model_answered() {
    let dir = tempfile::tempdir().expect("dir");
    let policy = policy(dir.path(), None, "");
    let output = doctor(&policy, &["--prompt", "--json"], &[]);
    let report = report(&output);
    assert!(output.status.success(), "{report}");
    assert_eq!(report["ok"], true);
    assert_eq!(report["client"], "windsurf/1.110.1");
    let names: Vec<&str> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter_map(|check| check["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "identity",
            "cli",
            "initialize",
            "session",
            "models",
            "prompt",
            "dialect"
        ]
    );
    // The CLI's version comes from --version; agentInfo is said to be something else.
    assert!(
        report["cli_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("devin ")),
        "{report}"
    );
    assert!(
        check(&report, "initialize")["detail"]
            .as_str()
            .is_some_and(|d| d.contains("not the CLI version")),
        "{report}"
    );
    // The session's option ids, and the dialect facts the exchange showed.
    assert!(
        check(&report, "session")["detail"]
            .as_str()
            .is_some_and(|d| d.contains("session options [mode")),
        "{report}"
    );
    assert!(report["dialect"]["agent_info"].is_string(), "{report}");
    assert_eq!(report["dialect"]["stop_reasons"], json!(["end_turn"]));
    // The agent shares the host's identity here: a warning line with its fix, not a log line.
    let identity = check(&report, "identity");
    assert_eq!(identity["ok"], true);
    assert!(
        identity["fix"]
            .as_str()
            .is_some_and(|fix| fix.contains("[agent] user")),
        "{identity}"
    );
    let initialize = check(&report, "initialize")["detail"]
        .as_str()
        .unwrap_or_default();
    assert!(initialize.contains("devin-browser"), "{initialize}");
    assert!(initialize.contains("session/delete"), "{initialize}");
    let prompt = check(&report, "prompt")["detail"]
        .as_str()
        .unwrap_or_default();
    assert!(prompt.contains("accepted the client identity"), "{prompt}");
    assert!(prompt.contains("answered by SWE-1.7"), "{prompt}");
    // The human form says the same, one line per check, and nothing else: no log lines.
    let human = doctor(&policy, &[], &[]);
    assert!(human.status.success());
    let text = String::from_utf8_lossy(&human.stdout);
    let stderr = String::from_utf8_lossy(&human.stderr);
    assert!(stderr.is_empty(), "doctor logged on stderr: {stderr}");
    assert!(text.starts_with("devin-bridge "), "{text}");
    assert!(text.contains("warn identity "), "{text}");
    for name in ["cli", "initialize", "session", "models"] {
        assert!(text.contains(&format!("ok   {name}")), "{text}");
    }
    assert!(
        !text.contains("ok   prompt"),
        "no prompt without --prompt: {text}"
    );
}

#[test]
fn doctor_names_a_refused_client_identity_with_its_fix() {
    let dir = tempfile::tempdir().expect("dir");
    let policy = policy(
        dir.path(),
        None,
        "client_name = \"acpx\"\nclient_version = \"0.1.0\"",
    );
    let output = doctor(&policy, &["--prompt", "--json"], &[]);
    assert_eq!(output.status.code(), Some(1));
    let report = report(&output);
    assert_eq!(report["ok"], false);
    let prompt = check(&report, "prompt");
    assert_eq!(prompt["ok"], false);
    assert!(
        prompt["detail"]
            .as_str()
            .is_some_and(|d| d.contains("client_identity_refused")),
        "{prompt}"
    );
    assert!(
        prompt["fix"]
            .as_str()
            .is_some_and(|f| f.contains("client_name")),
        "{prompt}"
    );
    // Without --prompt nothing asks the service, so the identity is not checked.
    assert!(doctor(&policy, &["--json"], &[]).status.success());
}

#[test]
fn doctor_names_a_home_that_is_not_logged_in_and_keeps_the_key_out_of_its_evidence() {
    let dir = tempfile::tempdir().expect("dir");
    // The older CLIs' variant: `session/new` itself refuses a home that is not logged in.
    let logged_out = [
        ("MOCK_DEVIN_LOGGED_OUT", "1"),
        ("MOCK_DEVIN_LOGOUT_STYLE", "session_new"),
    ];
    let policy = policy(
        dir.path(),
        None,
        &common::bridge::pass_env_line(&[
            "MOCK_DEVIN_LOGGED_OUT",
            "MOCK_DEVIN_LOGOUT_STYLE",
            "WINDSURF_API_KEY",
        ]),
    );
    let output = doctor(&policy, &["--json"], &logged_out);
    assert_eq!(output.status.code(), Some(1));
    let refused = report(&output);
    let session = check(&refused, "session");
    assert_eq!(session["ok"], false, "{refused}");
    assert!(
        session["fix"]
            .as_str()
            .is_some_and(|f| f.contains("devin auth login") && f.contains("WINDSURF_API_KEY")),
        "{session}"
    );
    // With the key in its environment the CLI is signed in (it prefers that key over stored
    // credentials); the key appears nowhere in the evidence.
    let key = "wk-doctor-secret-value";
    let output = doctor(
        &policy,
        &["--json", "--prompt"],
        &[logged_out[0], logged_out[1], ("WINDSURF_API_KEY", key)],
    );
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let signed_in = report(&output);
    assert!(output.status.success(), "{signed_in}");
    assert_eq!(check(&signed_in, "session")["ok"], true, "{signed_in}");
    assert!(!text.contains(key));
    assert!(!String::from_utf8_lossy(&output.stderr).contains(key));
}

#[test]
fn doctor_names_a_missing_cli() {
    let dir = tempfile::tempdir().expect("dir");
    let policy = policy(dir.path(), Some("/nonexistent/devin"), "");
    let output = doctor(&policy, &["--json"], &[]);
    assert_eq!(output.status.code(), Some(1));
    // A command that does not exist is refused as the agent's spec is made: the one check.
    let report = report(&output);
    let policy = check(&report, "policy");
    assert_eq!(policy["ok"], false, "{report}");
    assert!(
        policy["detail"]
            .as_str()
            .is_some_and(|d| d.contains("/nonexistent/devin")),
        "{policy}"
    );
    assert!(policy["fix"].as_str().is_some_and(|f| !f.is_empty()));
    // The one check after the identity warning (this test's agent shares the host's uid).
    let names: Vec<&str> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter_map(|check| check["name"].as_str())
        .collect();
    assert_eq!(names, ["identity", "policy"], "{report}");
}

#[test]
fn doctor_logs_only_when_asked() {
    let dir = tempfile::tempdir().expect("dir");
    let policy = policy(dir.path(), None, "");
    let quiet = doctor(&policy, &["--json"], &[]);
    assert!(quiet.status.success());
    assert!(
        quiet.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&quiet.stderr)
    );
    let verbose = doctor(&policy, &["--json", "-v"], &[]);
    assert!(verbose.status.success());
    assert!(
        String::from_utf8_lossy(&verbose.stderr).contains("INFO"),
        "-v shows the bridge's info lines: {}",
        String::from_utf8_lossy(&verbose.stderr)
    );
}

#[test]
fn doctor_records_a_private_redacted_trace_of_the_whole_exchange() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("dir");
    let logged_out = [("MOCK_DEVIN_LOGGED_OUT", "1")];
    let policy = policy(
        dir.path(),
        None,
        &common::bridge::pass_env_line(&["MOCK_DEVIN_LOGGED_OUT", "WINDSURF_API_KEY"]),
    );
    let trace = dir.path().join("doctor.jsonl");
    let key = "wk-doctor-record-secret-0123456789";
    let output = doctor(
        &policy,
        &[
            "--json",
            "--prompt",
            "--record",
            trace.to_str().expect("utf-8"),
        ],
        &[logged_out[0], ("WINDSURF_API_KEY", key)],
    );
    let json_text = String::from_utf8_lossy(&output.stdout).into_owned();
    let report = report(&output);
    assert!(output.status.success(), "{report}");
    assert!(!json_text.contains(key), "the key is in the report");
    assert_eq!(check(&report, "record")["ok"], true, "{report}");
    assert_eq!(check(&report, "prompt")["ok"], true, "{report}");
    let mode = std::fs::metadata(&trace)
        .expect("trace")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let text = std::fs::read_to_string(&trace).expect("trace");
    let home = dir.path().display().to_string();
    for secret in [
        key,
        home.as_str(),
        devin_bridge_summarizer::doctor::PROBE_PROMPT,
        "connectivity check",
    ] {
        assert!(
            !text.contains(secret),
            "{secret:?} is in the trace:\n{text}"
        );
    }
    let read = devin_bridge_agent::transcript::read(&text).expect("a trace");
    let header = read.header.expect("a header");
    assert!(header.recorded_by.contains("doctor"), "{header:?}");
    assert!(
        header.cli_version.is_some_and(|v| v.starts_with("devin ")),
        "the CLI version is in the header"
    );
    let methods: Vec<&str> = read
        .entries
        .iter()
        .filter_map(|(_, entry)| entry.msg["method"].as_str())
        .collect();
    // The CLI reads the key from its environment, so no `authenticate` carries it (the
    // redaction of a key in `authenticate` is a unit test of the transcript).
    for method in ["initialize", "session/new", "session/prompt"] {
        assert!(methods.contains(&method), "{method} missing: {methods:?}");
    }
    assert!(text.contains("[redacted text: "), "{text}");
}
