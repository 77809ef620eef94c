//! `devin-bridge companion` end to end, with the offline agent `mock-devin` as the Devin CLI
//! (`DEVIN_BIN`), a temporary data directory (`DEVIN_COMPANION_DATA`), a temporary home with
//! a credentials file, and a temporary git repository as the workspace.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use devin_bridge_agent::testkit::marked_process_running;
use serde_json::Value;

use common::bridge::mock_devin;
use common::companion::{
    failure_kind, failure_message, job_id, logging_mock, mock_events, script, stderr, stdout, task,
    Env,
};

fn assert_input_error(output: &Output, needle: &str) {
    assert_eq!(output.status.code(), Some(2), "{}", stderr(output));
    let err = stderr(output);
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.starts_with("devin-bridge companion: "), "{err}");
    assert!(err.contains(needle), "{err:?} lacks {needle:?}");
}

#[test]
fn a_consult_task_finishes_done_with_the_footer() {
    let env = Env::new();
    let (output, record) = task(&env, &["task", "explain", "the", "code"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("Devin mock: done"), "{text}");
    assert!(text.contains("state: done"), "{text}");
    assert!(text.contains("sandbox: read-only"), "{text}");
    assert_eq!(record["status"], "done");
    assert_eq!(record["mode"], "consult");
    assert_eq!(record["delivery"], "complete");
    assert_eq!(record["devinVersion"], "3000.11.4");
    assert_eq!(record["devinBuildPath"], env.devin.display().to_string());
    assert_eq!(record["stopReason"], "end_turn");
    assert_eq!(record["stopCause"], "complete");
    // The agent's usage is passed through as it reported it (the real CLI's four counts).
    let usage = &record["usage"];
    let (input, output) = (
        usage["inputTokens"].as_u64().expect("inputTokens"),
        usage["outputTokens"].as_u64().expect("outputTokens"),
    );
    assert_eq!(usage["totalTokens"], input + output, "{record}");
    assert_eq!(usage["cachedReadTokens"], 0, "{record}");
    assert!(record["sessionId"].is_string());
    // The JSON-RPC id of the job's `session/prompt` request.
    assert!(
        record["requestId"]
            .as_str()
            .is_some_and(|id| id.parse::<u64>().is_ok()),
        "{record}"
    );
    // The private per-job config is gone once the job is terminal.
    assert!(!env
        .data
        .join("runs")
        .join(record["id"].as_str().unwrap())
        .join("config")
        .exists());
}

#[test]
fn the_prompt_can_come_from_stdin_and_an_empty_one_is_input() {
    let env = Env::new();
    let output = env.run_stdin(&["task"], b"from stdin [mock:echo]");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("from stdin"),
        "{}",
        stdout(&output)
    );
    let empty = env.run_stdin(&["task"], b"  \n");
    assert_input_error(&empty, "empty");
    let binary = env.run_stdin(&["task"], &[0xff, 0xfe]);
    assert_input_error(&binary, "UTF-8");
}

#[test]
fn bad_flags_bad_cwd_and_a_cwd_below_the_root_are_input_without_records() {
    let env = Env::new();
    assert_input_error(&env.run(&["task", "--bogus", "x"]), "--bogus");
    assert_input_error(
        &env.run(&["task", "--cwd", "/nonexistent/dir", "x"]),
        "does not exist",
    );
    assert_input_error(
        &env.run(&["task", "--resume", "s", "--fresh", "x"]),
        "cannot be used with",
    );
    let below = env
        .command(&["task", "x"])
        .current_dir(env.workspace.join("src"))
        .output()
        .expect("run");
    assert_input_error(&below, "below its repository root");
    assert_input_error(&env.run(&["task", "--model", "adaptive", "x"]), "routing");
    assert_input_error(&env.run(&["task", "--effort", "fusion-max", "x"]), "effort");
    assert!(env.records().is_empty(), "no record for bad input");
    // An explicit --cwd below the root is fine.
    let ok = env.run(&[
        "task",
        "--cwd",
        env.workspace.join("src").to_str().unwrap(),
        "x",
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
}

#[test]
fn a_policy_of_another_mode_is_refused() {
    let env = Env::new();
    let policy = env.root.path().join("summarizer.toml");
    std::fs::write(&policy, "mode = \"summarizer\"\n").expect("write");
    let output = env.run(&["--policy", policy.to_str().unwrap(), "setup"]);
    assert_input_error(&output, "not a companion policy");
}

#[test]
fn raw_args_are_consumed_once_and_never_expanded() {
    let env = Env::new();
    let created = env.run(&["raw-args-create", "--json"]);
    assert_eq!(created.status.code(), Some(0), "{}", stderr(&created));
    let info: Value = serde_json::from_slice(&created.stdout).expect("json");
    let token = info["token"].as_str().expect("token").to_owned();
    let path = PathBuf::from(info["path"].as_str().expect("path"));
    assert_eq!(
        std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777,
        0o600
    );
    std::fs::write(&path, "--json -- '-x' \"$HOME `id` [mock:echo]\" *").expect("write");
    let output = env.run(&["task", "--raw-args-token", &token]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let value: Value = serde_json::from_slice(&output.stdout).expect("json output");
    let record = env.record(value["id"].as_str().expect("id"));
    let result = record["result"].as_str().unwrap_or_default();
    assert!(result.contains("-x $HOME `id` [mock:echo] *"), "{result}");
    assert!(!path.exists(), "consumed");
    // Replay: the file is gone.
    assert_input_error(
        &env.run(&["task", "--raw-args-token", &token]),
        "does not exist",
    );
    // Mixed with other arguments.
    assert_input_error(
        &env.run(&["task", "--write", "--raw-args-token", &token]),
        "only argument",
    );
}

#[test]
fn the_deprecated_transport_spellings_still_work_and_say_what_replaces_them() {
    let mut env = Env::new();
    let created = env.run(&["transport-create", "--json"]);
    assert_eq!(created.status.code(), Some(0), "{}", stderr(&created));
    assert!(
        stderr(&created).contains("`transport-create` is deprecated; use `raw-args-create`"),
        "{}",
        stderr(&created)
    );
    let info: Value = serde_json::from_slice(&created.stdout).expect("json");
    let token = info["token"].as_str().expect("token").to_owned();
    let path = PathBuf::from(info["path"].as_str().expect("path"));
    let discard = env.run(&["transport-discard", "--raw-args-token", &token]);
    assert_eq!(discard.status.code(), Some(0), "{}", stderr(&discard));
    assert!(stderr(&discard).contains("use `raw-args-discard`"));
    assert!(!path.exists(), "discarded through the old name");
    // `--transport print` still selects the print runner: `devin -p`.
    env.devin = script(
        &env,
        "print-devin",
        "if [ \"$1\" = --version ]; then echo 'devin 3000.11.2'; exit 0; fi\n\
         [ \"$1\" = -p ] && echo 'printed by devin -p'",
    );
    let (output, record) = task(&env, &["task", "--transport", "print", "x"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("`--transport` is deprecated; use `--runner`"));
    assert_eq!(record["status"], "done", "{record}");
    let result = record["result"].as_str().unwrap_or_default();
    assert!(result.contains("printed by devin -p"), "{result}");
}

#[test]
fn raw_args_files_with_a_changed_mode_a_symlink_or_too_much_text_are_refused() {
    let env = Env::new();
    let create = || {
        let out = env.run(&["raw-args-create"]);
        let text = stdout(&out);
        let token = text
            .lines()
            .find_map(|l| l.strip_prefix("token: "))
            .expect("token")
            .to_owned();
        let path = PathBuf::from(
            text.lines()
                .find_map(|l| l.strip_prefix("path: "))
                .expect("path"),
        );
        (token, path)
    };
    let (token, path) = create();
    std::fs::write(&path, "x").expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    assert_input_error(&env.run(&["task", "--raw-args-token", &token]), "0600");

    let (token, path) = create();
    std::fs::write(&path, "a".repeat(65 * 1024)).expect("write");
    assert_input_error(&env.run(&["status", "--raw-args-token", &token]), "larger");

    let (token, path) = create();
    std::fs::remove_file(&path).expect("rm");
    let target = env.root.path().join("elsewhere");
    std::fs::write(&target, "x").expect("write");
    std::os::unix::fs::symlink(&target, &path).expect("symlink");
    assert_input_error(&env.run(&["task", "--raw-args-token", &token]), "regular");

    let (token, path) = create();
    std::fs::write(&path, [0xffu8, 0x00]).expect("write");
    assert_input_error(&env.run(&["history", "--raw-args-token", &token]), "UTF-8");

    assert_input_error(&env.run(&["task", "--raw-args-token", "../../etc"]), "32");

    let (token, path) = create();
    let discard = env.run(&["raw-args-discard", "--raw-args-token", &token]);
    assert_eq!(discard.status.code(), Some(0));
    assert!(!path.exists());
    let again = env.run(&["raw-args-discard", "--raw-args-token", &token]);
    assert_eq!(again.status.code(), Some(0), "idempotent");
    assert!(env.records().is_empty());
}

#[test]
fn a_missing_cli_is_missing_cli() {
    let mut env = Env::new();
    env.devin = env.root.path().join("no-such-devin");
    let (output, record) = task(&env, &["task", "x"]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    assert_eq!(failure_kind(&record), "missing_cli");
    assert_eq!(record["failure"]["engineWide"], true);
}

#[test]
fn an_old_cli_is_setup_and_setup_reports_it() {
    let mut env = Env::new();
    env.devin = script(&env, "old-devin", "echo 'devin 3000.10.1'");
    let (output, record) = task(&env, &["task", "x"]);
    assert_eq!(output.status.code(), Some(4));
    assert_eq!(failure_kind(&record), "setup");
    let setup = env.run(&["setup", "--json"]);
    let value: Value = serde_json::from_slice(&setup.stdout).expect("json");
    assert_eq!(value["failure"]["kind"], "setup");
    env.devin = script(&env, "new-devin", "echo 'devin 3000.12.0'");
    let setup = env.run(&["setup"]);
    assert_eq!(setup.status.code(), Some(0), "{}", stderr(&setup));
    assert!(
        stdout(&setup).contains("newer than the tested interval"),
        "{}",
        stdout(&setup)
    );
    assert!(
        stdout(&setup).contains("credentials: linkable"),
        "{}",
        stdout(&setup)
    );
}

#[test]
fn a_listed_model_the_sessions_do_not_offer_is_input_naming_the_offered_ones() {
    let env = Env::new();
    // `devin models list` lists legacy-9, but the account's sessions do not offer it.
    let (output, record) = task(&env, &["task", "--model", "legacy-9", "x"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(failure_kind(&record), "input", "{record}");
    let message = failure_message(&record);
    assert!(message.contains("legacy-9"), "{message}");
    assert!(
        message.contains("swe-2") && message.contains("kimi-k3"),
        "names the offered models: {message}"
    );
    assert!(
        stdout(&output).contains("failure: input: "),
        "{}",
        stdout(&output)
    );
    assert_eq!(env.records().len(), 1);
}

#[test]
fn an_unknown_model_and_the_listed_adaptive_are_input_without_a_record() {
    let env = Env::new();
    assert_input_error(
        &env.run(&["task", "--model", "no-such-family", "x"]),
        "no-such-family",
    );
    // `adaptive` is listed by `devin models list` and refused by ACP sessions.
    assert_input_error(&env.run(&["task", "--model", "adaptive", "x"]), "adaptive");
    assert!(env.records().is_empty(), "no record for either");
}

#[test]
fn models_lists_and_caches_the_catalog() {
    let env = Env::new();
    let output = env.run(&["models", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let catalog: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert!(catalog["families"].as_array().is_some_and(|f| f.len() >= 5));
    let cache = env.data.join("models.json");
    assert_eq!(
        std::fs::metadata(&cache)
            .expect("cache")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    assert!(stdout(&env.run(&["models"])).contains("kimi"));
}

#[test]
fn the_model_is_set_through_the_sessions_model_option_and_a_mismatch_is_warned() {
    let mut env = Env::new();
    let log = logging_mock(&mut env, &[]);
    let (output, record) = task(&env, &["task", "--model", "kimi", "x"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(record["billingPool"], "api");
    assert_eq!(record["resolvedModel"], "kimi-k3", "{record}");
    assert_eq!(record["observedModel"], "Kimi K3", "{record}");
    assert!(record["effortApplied"].is_null(), "{record}");
    assert_eq!(record["warnings"], serde_json::json!([]), "{record}");
    let set: Vec<(Value, Value)> = mock_events(&log, "set_config_option")
        .into_iter()
        .map(|event| (event["configId"].clone(), event["value"].clone()))
        .collect();
    assert_eq!(set, [("model".into(), "kimi-k3".into())]);
    let (output, record) = task(
        &env,
        &["task", "--model", "swe-2", "[mock:model Someone Else]"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let warnings = record["warnings"].to_string();
    assert!(
        warnings.contains("model_mismatch: selected SWE-2, served Someone Else"),
        "{warnings}"
    );
    assert_eq!(record["billingPool"], "first-party");
}

#[test]
fn effort_is_the_models_variant_when_the_session_has_no_thought_level() {
    let mut env = Env::new();
    let log = logging_mock(&mut env, &[]);
    let (output, record) = task(&env, &["task", "--model", "swe-2", "--effort", "high", "x"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(record["effortApplied"], "high", "{record}");
    assert_eq!(record["resolvedModel"], "swe-2", "{record}");
    assert_eq!(record["observedModel"], "SWE-2 High", "{record}");
    assert!(
        !record["warnings"].to_string().contains("model_mismatch"),
        "the variant is the selected model: {record}"
    );
    let set: Vec<(Value, Value)> = mock_events(&log, "set_config_option")
        .into_iter()
        .map(|event| (event["configId"].clone(), event["value"].clone()))
        .collect();
    assert_eq!(set, [("model".into(), "swe-2-high".into())]);
    // An effort the model has no variant for: input naming what it offers.
    let (output, record) = task(&env, &["task", "--model", "swe-2", "--effort", "low", "x"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(failure_kind(&record), "input", "{record}");
    let message = failure_message(&record);
    assert!(
        message.contains("--effort low") && message.contains("high"),
        "{message}"
    );
    // A model without variants has no effort levels at all.
    let (output, record) = task(&env, &["task", "--model", "kimi", "--effort", "high", "x"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(failure_kind(&record), "input", "{record}");
    assert!(
        failure_message(&record).contains("no effort levels"),
        "{record}"
    );
    // `default` leaves the model as it is.
    let (output, record) = task(
        &env,
        &["task", "--model", "swe-2", "--effort", "default", "x"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(record["observedModel"], "SWE-2", "{record}");
    assert!(record["effortApplied"].is_null(), "{record}");
}

#[test]
fn effort_goes_to_the_thought_level_option_when_the_session_offers_one() {
    let mut env = Env::new();
    let log = logging_mock(&mut env, &[("MOCK_DEVIN_THOUGHT_LEVEL", "1")]);
    let (output, record) = task(&env, &["task", "--model", "kimi", "--effort", "high", "x"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(record["effortApplied"], "high", "{record}");
    assert_eq!(record["observedModel"], "Kimi K3", "{record}");
    // swe-2 at high: the thought level, not the swe-2-high variant.
    let (output, record) = task(&env, &["task", "--model", "swe-2", "--effort", "high", "x"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(record["effortApplied"], "high", "{record}");
    assert_eq!(record["observedModel"], "SWE-2", "{record}");
    let set: Vec<(Value, Value)> = mock_events(&log, "set_config_option")
        .into_iter()
        .map(|event| (event["configId"].clone(), event["value"].clone()))
        .collect();
    assert_eq!(
        set,
        [
            ("model".into(), "kimi-k3".into()),
            ("thought_level".into(), "high".into()),
            ("thought_level".into(), "high".into()),
        ]
    );
    // A level the option does not offer: input naming the offered ones.
    let (output, record) = task(&env, &["task", "--model", "kimi", "--effort", "ultra", "x"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(failure_kind(&record), "input", "{record}");
    let message = failure_message(&record);
    assert!(
        message.contains("low") && message.contains("medium"),
        "{message}"
    );
    // glm-5.2's sessions drop the thought level: an explicit one is input.
    let (output, record) = task(
        &env,
        &["task", "--model", "glm-5.2", "--effort", "high", "x"],
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(failure_kind(&record), "input", "{record}");
}

/// (marker, failure kind, exit code, what the failure message says)
const OUTCOMES: [(&str, &str, i32, &str); 12] = [
    // -32000, no data.
    ("[mock:fail auth]", "auth", 4, "devin auth login"),
    // -32011 `resource_exhausted`.
    ("[mock:fail quota]", "quota", 1, "credits"),
    // -32010 `unavailable`, "Rate limit exceeded".
    (
        "[mock:fail rate_limited]",
        "rate_limited",
        1,
        "rate limiting",
    ),
    // -32010 `unavailable`, "Connection error".
    ("[mock:fail network]", "network", 1, "could not be reached"),
    // -32603 `internal`: an error that keeps the agent's code and kind.
    ("[mock:fail server]", "error", 1, "-32603 (internal)"),
    // The CLI announces the call (`tool_call`, named `exec`) before it asks: in a read-only
    // mode the gate stops the call itself. The refused permission is checked in write mode,
    // where `exec` is on the list, by `a_permission_the_companion_does_not_grant_is_permission`.
    ("[mock:permission]", "policy", 1, "exec"),
    ("[mock:tool exec execute]", "policy", 1, "exec"),
    ("[mock:refusal]", "refused", 1, "refused"),
    ("[mock:malformed]", "protocol", 1, "malformed"),
    ("[mock:max-tokens]", "resource", 1, "max_tokens"),
    ("[mock:fail error]", "error", 1, "cause error"),
    ("[mock:no-stopped]", "error", 1, "without reporting"),
];

#[test]
fn a_permission_the_companion_does_not_grant_is_permission() {
    let env = Env::new();
    let (output, record) = task(&env, &["task", "--write", "[mock:permission]"]);
    assert_eq!(failure_kind(&record), "permission", "{record}");
    assert_eq!(output.status.code(), Some(1));
    let message = failure_message(&record);
    assert!(message.contains("exec"), "{message}");
}

#[test]
fn every_agent_outcome_maps_to_its_failure_kind() {
    let env = Env::new();
    for (marker, kind, code, says) in OUTCOMES {
        let (output, record) = task(&env, &["task", marker]);
        assert_eq!(failure_kind(&record), kind, "{marker}: {record}");
        assert_eq!(output.status.code(), Some(code), "{marker}");
        assert!(
            stdout(&output).contains(&format!("failure: {kind}: ")),
            "{marker}: {}",
            stdout(&output)
        );
        let message = failure_message(&record);
        assert!(
            message.contains(says),
            "{marker}: {message:?} lacks {says:?}"
        );
        if kind == "quota" || kind == "rate_limited" {
            assert_eq!(record["failure"]["billingPool"], "first-party", "{marker}");
        } else {
            assert!(record["failure"]["billingPool"].is_null(), "{marker}");
        }
    }
    let (output, record) = task(&env, &["task", "[mock:exit]"]);
    assert_eq!(failure_kind(&record), "protocol", "{record}");
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn the_agent_is_given_the_windsurf_client_identity_by_default() {
    let mut env = Env::new();
    let log = logging_mock(&mut env, &[]);
    let (output, record) = task(&env, &["task", "x"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{} {record}",
        stderr(&output)
    );
    let initialized = mock_events(&log, "initialize");
    assert_eq!(initialized.len(), 1, "{initialized:?}");
    assert_eq!(initialized[0]["clientName"], "windsurf");
    assert!(mock_events(&log, "identity_refused").is_empty());
}

#[test]
fn a_client_identity_the_service_refuses_is_setup_naming_the_setting() {
    let mut env = Env::new();
    let log = logging_mock(&mut env, &[]);
    let policy = env.root.path().join("acpx.toml");
    std::fs::write(
        &policy,
        "mode = \"companion\"\n[companion]\nclient_name = \"acpx\"\nclient_version = \"0.1.0\"\n",
    )
    .expect("policy");
    let policy = policy.display().to_string();
    let (output, record) = task(&env, &["--policy", &policy, "task", "x"]);
    assert_eq!(
        output.status.code(),
        Some(4),
        "{} {record}",
        stderr(&output)
    );
    assert_eq!(failure_kind(&record), "setup", "{record}");
    assert_eq!(record["failure"]["engineWide"], true, "{record}");
    let message = failure_message(&record);
    assert!(message.contains("`client_name`"), "{message}");
    assert!(message.contains("acpx/0.1.0"), "{message}");
    assert!(
        stdout(&output).contains("failure: setup: "),
        "{}",
        stdout(&output)
    );
    // The agent saw the policy's identity and refused the prompt for it.
    let initialized = mock_events(&log, "initialize");
    assert_eq!(initialized[0]["clientName"], "acpx", "{initialized:?}");
    assert_eq!(mock_events(&log, "identity_refused").len(), 1);
}

#[test]
fn missing_credentials_are_auth() {
    let mut env = Env::new();
    let log = logging_mock(&mut env, &[]);
    std::fs::remove_file(env.home.join(".local/share/devin/credentials.toml")).expect("rm");
    let (output, record) = task(&env, &["task", "x"]);
    assert_eq!(failure_kind(&record), "auth", "{record}");
    assert_eq!(output.status.code(), Some(4));
    let message = failure_message(&record);
    assert!(message.contains("devin auth login"), "{message}");
    // Without a key nothing signs the agent in: no `authenticate`, and never a browser.
    assert_eq!(mock_events(&log, "initialize").len(), 1, "the agent ran");
    assert!(mock_events(&log, "authenticate").is_empty());
    assert!(mock_events(&log, "browser_login").is_empty());
}

#[test]
fn an_api_key_in_the_environment_signs_the_agent_in_without_authenticate() {
    let mut env = Env::new();
    let log = logging_mock(&mut env, &[]);
    std::fs::remove_file(env.home.join(".local/share/devin/credentials.toml")).expect("rm");
    env.set("WINDSURF_API_KEY", "k-companion-test");
    let (output, record) = task(&env, &["task", "x"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{} {record}",
        stderr(&output)
    );
    assert_eq!(record["status"], "done", "{record}");
    // The CLI reads `WINDSURF_API_KEY` from its environment (and prefers it over stored
    // credentials), so the session opens and the prompt passes without an `authenticate`.
    let authenticated = mock_events(&log, "authenticate");
    assert!(authenticated.is_empty(), "{authenticated:?}");
    assert!(mock_events(&log, "browser_login").is_empty());
    // The key went in the request, never into the agent's log.
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(!text.contains("k-companion-test"));
}

#[test]
fn the_run_timeout_is_timeout_and_kills_the_agent() {
    let mut env = Env::new();
    env.set("DEVIN_COMPANION_TIMEOUT_MS", "1500");
    let started = Instant::now();
    let (output, record) = task(&env, &["task", "[mock:hang]"]);
    assert_eq!(failure_kind(&record), "timeout", "{record}");
    assert_eq!(output.status.code(), Some(1));
    assert!(started.elapsed() < Duration::from_secs(20));
    let pid = record["engineProcess"]["pid"].as_i64().expect("engine pid") as i32;
    assert!(wait_group_gone(pid), "engine group {pid} survived");
}

#[test]
fn an_agent_that_cannot_be_spawned_is_process() {
    let mut env = Env::new();
    // Answers the version probe, then makes itself impossible to execute.
    env.devin = script(
        &env,
        "vanishing-devin",
        "chmod a-x \"$0\"; echo 'devin 3000.11.0'",
    );
    let (output, record) = task(&env, &["task", "x"]);
    assert_eq!(failure_kind(&record), "process", "{record}");
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn a_consult_write_stays_denied() {
    let env = Env::new();
    let (_, record) = task(&env, &["task", "[mock:write out.txt]"]);
    assert_ne!(record["status"], "done");
    assert!(!env.workspace.join("out.txt").exists());
    let (output, record) = task(&env, &["task", "--write", "[mock:write out.txt]"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{} {record}",
        stderr(&output)
    );
    assert!(stdout(&output).contains("sandbox: workspace-write"));
    assert!(env.workspace.join("out.txt").exists(), "write mode writes");
}

#[test]
fn a_late_exit_is_late_close() {
    let mut env = Env::new();
    env.set("DEVIN_COMPANION_EXIT_GRACE_MS", "300");
    let (output, record) = task(&env, &["task", "[mock:late-close]"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(record["delivery"], "late_close");
    assert!(record["warnings"].to_string().contains("late_close"));
    assert!(stdout(&output).contains("delivery: late_close"));
}

#[test]
fn resume_loads_the_earlier_session() {
    let env = Env::new();
    let (first, record) = task(&env, &["task", "remember this"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let session = record["sessionId"].as_str().expect("session").to_owned();
    let (second, resumed) = task(&env, &["task", "--resume-last", "and now?"]);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    assert_eq!(resumed["sessionId"], session.as_str());
    assert_eq!(resumed["resumedFrom"], record["id"]);
    assert!(
        stdout(&second).contains("turns seen: 1"),
        "{}",
        stdout(&second)
    );
    let (third, _) = task(&env, &["task", "--resume", &session, "again"]);
    assert!(
        stdout(&third).contains("turns seen: 2"),
        "{}",
        stdout(&third)
    );
    // A write-mode resume of a consult session is refused.
    assert_input_error(
        &env.run(&["task", "--write", "--resume", &session, "x"]),
        "session",
    );
    assert_input_error(
        &env.run(&["task", "--resume", "mock-unknown", "x"]),
        "session",
    );
}

#[test]
fn resuming_a_session_the_devin_cli_no_longer_knows_is_input() {
    let env = Env::new();
    let (first, record) = task(&env, &["task", "remember this"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let session = record["sessionId"].as_str().expect("session").to_owned();
    // The agent's session database, in the companion's private agent home.
    let stored = env
        .data
        .join("home/.local/share/devin/sessions")
        .join(format!("{session}.json"));
    std::fs::remove_file(&stored).expect("the agent stored the session");
    let (output, resumed) = task(&env, &["task", "--resume", &session, "again"]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{} {resumed}",
        stderr(&output)
    );
    assert_eq!(failure_kind(&resumed), "input", "{resumed}");
    assert_eq!(
        failure_message(&resumed),
        format!("session {session} is not known to the Devin CLI")
    );
}

fn proc_alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next())
        })
        .is_some_and(|state| state != 'Z' && state != 'X')
}

/// Whether any live process has process group `pgid`.
fn group_alive(pgid: i32) -> bool {
    std::fs::read_dir("/proc")
        .expect("proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .any(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let (_, rest) = s.rsplit_once(") ")?;
                    let fields: Vec<&str> = rest.split_whitespace().collect();
                    let state = fields.first()?.chars().next()?;
                    let pgrp: i32 = fields.get(2)?.parse().ok()?;
                    Some(pgrp == pgid && state != 'Z' && state != 'X')
                })
                .unwrap_or(false)
        })
}

fn wait_group_gone(pgid: i32) -> bool {
    for _ in 0..100 {
        if !group_alive(pgid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn wait_for(env: &Env, id: &str, what: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let record = env.record(id);
        if what(&record) {
            return record;
        }
        assert!(Instant::now() < deadline, "timed out waiting on {record}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn background_jobs_run_detached_and_cancel_kills_the_group() {
    let env = Env::new();
    let output = env.run(&["task", "--background", "[mock:slow 30000]"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let id = job_id(&output);
    assert!(text.contains(&format!("/devin:status {id}")), "{text}");
    assert!(text.contains(&format!("/devin:result {id}")), "{text}");
    let record = wait_for(&env, &id, |r| {
        r["engineProcess"]["pid"].is_number() && r["sessionId"].is_string()
    });
    let engine = record["engineProcess"]["pid"].as_i64().expect("pid") as i32;
    let worker = record["worker"]["pid"].as_i64().expect("worker") as i32;
    assert!(group_alive(engine));
    let cancel = env.run(&["cancel", &id]);
    assert!(
        cancel.status.success() || cancel.status.code() == Some(3),
        "{}",
        stderr(&cancel)
    );
    let record = env.record(&id);
    assert_eq!(record["status"], "cancelled");
    assert!(
        wait_group_gone(engine),
        "the engine's group outlived the cancel"
    );
    for _ in 0..100 {
        if !proc_alive(worker) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!proc_alive(worker), "the worker outlived the cancel");
    assert_eq!(
        env.record(&id)["status"],
        "cancelled",
        "cancel wins over the worker"
    );
}

#[test]
fn a_killed_worker_is_died_at_the_next_read() {
    let env = Env::new();
    let output = env.run(&["task", "--background", "[mock:slow 30000]"]);
    let id = job_id(&output);
    let record = wait_for(&env, &id, |r| {
        r["worker"]["pid"].is_number() && r["engineProcess"]["pid"].is_number()
    });
    let worker = record["worker"]["pid"].as_i64().expect("worker") as i32;
    let engine = record["engineProcess"]["pid"].as_i64().expect("engine") as i32;
    signal(worker, nix::sys::signal::Signal::SIGKILL);
    for _ in 0..100 {
        if !proc_alive(worker) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = env.run(&["status", &id, "--json"]);
    assert!(stdout(&status).contains("died"), "{}", stdout(&status));
    assert_eq!(env.record(&id)["status"], "died");
    // Nothing of the engine's process group outlives the dead worker: not the engine, and not
    // the child it started (`[mock:slow]` keeps one in its group), even when the engine itself
    // exited on its own once its stdin closed.
    assert!(
        wait_group_gone(engine),
        "the engine's process group outlived its dead worker"
    );
}

#[test]
fn sixteen_simultaneous_background_tasks_all_end_terminal() {
    let env = Env::new();
    let children: Vec<_> = (0..16)
        .map(|i| {
            env.command(&["task", "--background", &format!("job {i} [mock:slow 300]")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let ids: Vec<String> = children
        .into_iter()
        .map(|child| {
            let output = child.wait_with_output().expect("wait");
            assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
            job_id(&output)
        })
        .collect();
    assert_eq!(env.records().len(), 16);
    for id in &ids {
        let record = wait_for(&env, id, |r| r["status"] != "running");
        assert_eq!(record["status"], "done", "{record}");
    }
}

fn commit_change(env: &Env, content: &str) {
    std::fs::write(env.workspace.join("src/lib.rs"), content).expect("write");
}

#[test]
fn review_validates_the_reviewers_json() {
    let env = Env::new();
    let nothing = env.run(&["review"]);
    assert_input_error(&nothing, "nothing to review");
    assert!(env.records().is_empty());

    commit_change(&env, "pub fn a() {} // [mock:review-json]\n");
    let (output, record) = task(&env, &["review", "--focus", "errors"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{} {record}",
        stderr(&output)
    );
    assert_eq!(record["mode"], "review");
    assert_eq!(record["role"], "review");
    assert_eq!(record["review"]["verdict"], "request_changes");
    assert!(stdout(&output).contains("sandbox: read-only"));

    commit_change(&env, "pub fn a() {} // [mock:review-bad]\n");
    let (output, record) = task(&env, &["review"]);
    assert_eq!(failure_kind(&record), "error", "{record}");
    assert_eq!(output.status.code(), Some(1));
    assert!(record["review"].is_null());

    commit_change(&env, "pub fn a() {} // [mock:review-none]\n");
    let (_, record) = task(&env, &["review"]);
    assert_eq!(failure_kind(&record), "error", "{record}");
}

#[test]
fn review_uses_the_plugin_template_when_given() {
    let mut env = Env::new();
    let plugin = env.root.path().join("plugin");
    std::fs::create_dir_all(plugin.join("prompts")).expect("mkdir");
    std::fs::write(
        plugin.join("prompts/review.md"),
        "CUSTOM scope={{SCOPE}} focus={{FOCUS}} [mock:echo]\n{{DIFF}}",
    )
    .expect("write");
    env.set("CLAUDE_PLUGIN_ROOT", plugin.to_str().unwrap());
    commit_change(&env, "pub fn b() {}\n");
    let (_, record) = task(&env, &["review", "--focus", "naming"]);
    let result = record["result"].as_str().unwrap_or_default();
    assert!(
        result.contains("CUSTOM scope=working-tree focus=naming"),
        "{result}"
    );
    assert!(result.contains("+pub fn b() {}"), "{result}");
}

#[test]
fn the_print_runner_runs_devin_p_and_keeps_the_tail() {
    let mut env = Env::new();
    let args_file = env.root.path().join("args.txt");
    env.devin = script(
        &env,
        "print-devin",
        &format!(
            "if [ \"$1\" = --version ]; then echo 'devin 3000.11.2'; exit 0; fi\n\
             printf '%s\\n' \"$@\" > {args}\n\
             i=0; while [ $i -lt 1200 ]; do printf 'line %04d %s\\n' $i \"$(printf '%0900d' 0)\"; i=$((i+1)); done\n\
             echo 'THE END'",
            args = args_file.display()
        ),
    );
    let (output, record) = task(&env, &["task", "--runner", "print", "--", "-p $(x)"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{} {record}",
        stderr(&output)
    );
    let result = record["result"].as_str().unwrap_or_default();
    assert!(result.len() <= 1 << 20);
    assert!(result.ends_with("THE END\n"), "the tail is kept");
    assert!(!result.contains("line 0000 "), "the head was dropped");
    let args = std::fs::read_to_string(&args_file).expect("args");
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(args.first(), Some(&"-p"));
    assert_eq!(args.last(), Some(&"-p $(x)"));
    // Consult is the CLI's read-only `normal`: it has no `ask`.
    assert!(args
        .windows(2)
        .any(|w| w == ["--permission-mode", "normal"]));
    assert!(!args.contains(&"ask"), "{args:?}");

    env.devin = script(
        &env,
        "failing-print",
        "if [ \"$1\" = --version ]; then echo 'devin 3000.11.2'; exit 0; fi\necho boom >&2; exit 7",
    );
    let (output, record) = task(&env, &["task", "--runner", "print", "x"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(failure_kind(&record), "error");
    assert!(record["failure"]["message"]
        .as_str()
        .unwrap_or_default()
        .contains('7'));
    // The failing CLI's stderr is kept in the record and shown with the failed job.
    assert_eq!(record["stderrTail"], "boom", "{record}");
    let shown = env.run(&["result", &job_id(&output)]);
    assert!(
        stdout(&shown).contains("stderr: boom"),
        "{}",
        stdout(&shown)
    );
}

/// The `model:`, `permission:` and `sandbox:` lines `mock-devin -p` prints for
/// `[mock:whoami]`, run by a print task (with `policy` and `task_args`).
fn print_whoami(env: &Env, policy: Option<&str>, task_args: &[&str]) -> [String; 3] {
    let mut args = Vec::new();
    if let Some(policy) = policy {
        args.extend(["--policy", policy]);
    }
    args.extend(["task", "--runner", "print"]);
    args.extend(task_args);
    args.push("[mock:whoami]");
    let (output, record) = task(env, &args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{} {record}",
        stderr(&output)
    );
    let result = record["result"].as_str().unwrap_or_default().to_owned();
    ["model:", "permission:", "sandbox:"].map(|name| {
        result
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} line in {result:?}"))
            .trim()
            .to_owned()
    })
}

#[test]
fn devin_p_runs_consult_as_normal_and_write_as_dangerous_or_autonomous_in_its_sandbox() {
    let env = Env::new();
    let lines = |permission: &str, sandbox: &str| ["swe-2", permission, sandbox].map(str::to_owned);
    assert_eq!(print_whoami(&env, None, &[]), lines("normal", "false"));
    assert_eq!(
        print_whoami(&env, None, &["--write"]),
        lines("dangerous", "false")
    );
    let policy = env.root.path().join("print-sandbox.toml");
    std::fs::write(
        &policy,
        "mode = \"companion\"\n[companion]\nprint_sandbox = true\n",
    )
    .expect("policy");
    let policy = policy.display().to_string();
    assert_eq!(
        print_whoami(&env, Some(&policy), &["--write"]),
        lines("autonomous", "true")
    );
    // The sandbox setting is for write jobs: consult stays `normal`, without `--sandbox`.
    assert_eq!(
        print_whoami(&env, Some(&policy), &[]),
        lines("normal", "false")
    );
}

#[test]
fn devin_p_is_given_the_model_as_the_cli_spells_it() {
    let env = Env::new();
    // The catalog's `kimi` alias resolves to the model the CLI knows as `kimi-k3`.
    assert_eq!(print_whoami(&env, None, &["--model", "kimi"])[0], "kimi-k3");
    // The catalog spells it `glm-5.2`; the CLI's sessions offer `glm-5-2`.
    assert_eq!(
        print_whoami(&env, None, &["--model", "glm-5.2"])[0],
        "glm-5-2"
    );
}

#[test]
fn devin_p_failures_map_to_their_kinds() {
    let mut env = Env::new();
    // Agent errors: `Error: Agent error: ... (trace ID: ...): {` and the JSON tail.
    for (marker, kind, says) in [
        ("[mock:fail quota]", "quota", "credits"),
        ("[mock:fail rate_limited]", "rate_limited", "rate limiting"),
        ("[mock:fail network]", "network", "could not be reached"),
        ("[mock:fail server]", "error", "(internal): Internal error"),
    ] {
        let (output, record) = task(
            &env,
            &["task", "--runner", "print", "--model", "swe-2", marker],
        );
        assert_eq!(output.status.code(), Some(1), "{marker}: {record}");
        assert_eq!(failure_kind(&record), kind, "{marker}: {record}");
        let message = failure_message(&record);
        assert!(message.contains(says), "{marker}: {message}");
        assert!(!message.contains("trace ID"), "{marker}: {message}");
        if kind == "quota" || kind == "rate_limited" {
            assert_eq!(record["failure"]["billingPool"], "first-party", "{marker}");
        }
    }
    // The CLI refusing its command line (exit 2): the real mock given the `ask` the CLI
    // does not take.
    env.devin = script(
        &env,
        "refusing-devin",
        &format!(
            "if [ \"$1\" = --version ]; then exec '{mock}' --version; fi\n             exec '{mock}' -p --permission-mode ask -- x",
            mock = mock_devin().display()
        ),
    );
    let (output, record) = task(&env, &["task", "--runner", "print", "x"]);
    assert_eq!(
        output.status.code(),
        Some(4),
        "{} {record}",
        stderr(&output)
    );
    assert_eq!(failure_kind(&record), "setup", "{record}");
    let message = failure_message(&record);
    assert!(
        message.contains("error: invalid value 'ask' for '--permission-mode <PERMISSION_MODE>'"),
        "quotes the CLI: {message}"
    );
    // Logged out: `Error: Not logged in`.
    env.devin = mock_devin();
    std::fs::remove_file(env.home.join(".local/share/devin/credentials.toml")).expect("rm");
    let (output, record) = task(&env, &["task", "--runner", "print", "x"]);
    assert_eq!(
        output.status.code(),
        Some(4),
        "{} {record}",
        stderr(&output)
    );
    assert_eq!(failure_kind(&record), "auth", "{record}");
    assert!(
        failure_message(&record).contains("devin auth login"),
        "{record}"
    );
}

#[test]
fn the_print_runner_keeps_only_the_policys_output_cap() {
    let mut env = Env::new();
    let policy = env.root.path().join("companion.toml");
    std::fs::write(
        &policy,
        "mode = \"companion\"\n[companion]\noutput_cap_bytes = 100\n",
    )
    .expect("policy");
    env.devin = script(
        &env,
        "long-print",
        "if [ \"$1\" = --version ]; then echo 'devin 3000.11.2'; exit 0; fi\nfor i in $(seq 1 100); do echo \"line $i\"; done\necho 'THE END'",
    );
    let policy = policy.display().to_string();
    let (output, record) = task(
        &env,
        &["--policy", &policy, "task", "--runner", "print", "x"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result = record["result"].as_str().unwrap_or_default();
    assert!(result.len() <= 100, "{} bytes kept", result.len());
    assert!(result.ends_with("THE END\n"), "{result:?}");
}

#[test]
fn unknown_jobs_are_input() {
    let env = Env::new();
    let output = env.run(&["status", "job-0000000000000000"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(stderr(&output).lines().count(), 1);
}

/// A print-runner `devin` that starts a grandchild and waits; both carry `marker` in their
/// argv, so the test can see whether any of them outlives the job.
fn lingering_print_devin(env: &Env, marker: &str) -> PathBuf {
    let path = env.root.path().join("lingering-devin");
    std::fs::write(
        &path,
        format!(
            "#!/bin/bash\nif [ \"$1\" = --version ]; then echo 'devin 3000.11.2'; exit 0; fi\n\
             (exec -a {marker}-grandchild sleep 300) &\nexec -a {marker}-devin sleep 300\n"
        ),
    )
    .expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn wait_marked(marker: &str, running: bool, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if marked_process_running(marker) == running {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A background print job of the lingering devin, once both of its processes run; its id and
/// its worker's pid.
fn lingering_print_job(env: &mut Env, marker: &str) -> (String, i32) {
    env.devin = lingering_print_devin(env, marker);
    let output = env.run(&["task", "--background", "--runner", "print", "x"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let id = job_id(&output);
    let record = wait_for(env, &id, |r| r["worker"]["pid"].is_number());
    let worker = record["worker"]["pid"].as_i64().expect("worker") as i32;
    assert!(
        wait_marked(
            &format!("{marker}-grandchild"),
            true,
            Duration::from_secs(20)
        ),
        "the print run never started"
    );
    (id, worker)
}

#[test]
fn sigkill_of_a_print_worker_leaves_no_devin_process() {
    let mut env = Env::new();
    let marker = format!("print-kill9-{}", std::process::id());
    let (_, worker) = lingering_print_job(&mut env, &marker);
    signal(worker, nix::sys::signal::Signal::SIGKILL);
    assert!(
        wait_marked(&marker, false, Duration::from_secs(20)),
        "devin -p or its child outlived the killed worker"
    );
}

/// devin runs only once the keeper watches its group, so a worker killed at the very instant
/// devin starts leaves nothing: this devin notes that it ran, SIGKILLs its worker, then starts
/// a grandchild and lingers.
#[test]
fn a_print_worker_killed_as_devin_starts_leaves_no_devin_process() {
    let mut env = Env::new();
    let marker = format!("print-first-kill9-{}", std::process::id());
    let ran = env.root.path().join("devin-ran");
    let path = env.root.path().join("worker-killing-devin");
    std::fs::write(
        &path,
        format!(
            "#!/bin/bash\nif [ \"$1\" = --version ]; then echo 'devin 3000.11.2'; exit 0; fi\n\
             echo $$ >> '{}'\nkill -9 $PPID\n\
             (exec -a {marker}-grandchild sleep 300) &\nexec -a {marker}-devin sleep 300\n",
            ran.display()
        ),
    )
    .expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    env.devin = path;
    let started = |run: usize| -> Option<i32> {
        let ran = std::fs::read_to_string(&ran).unwrap_or_default();
        ran.lines().nth(run).and_then(|pid| pid.parse().ok())
    };
    for run in 0..5 {
        let output = env.run(&["task", "--background", "--runner", "print", "x"]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let deadline = Instant::now() + Duration::from_secs(20);
        while started(run).is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let devin = started(run).unwrap_or_else(|| panic!("devin did not run (run {run})"));
        // devin's own end first (its pid, reaped or a zombie), so that a grandchild it would
        // have started is running by now; then nothing of the run may be left.
        let deadline = Instant::now() + Duration::from_secs(20);
        while process_alive(devin) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !process_alive(devin),
            "devin outlived the worker it killed (run {run})"
        );
        assert!(
            wait_marked(&marker, false, Duration::from_secs(1)),
            "devin's child outlived the worker devin killed (run {run})"
        );
    }
}

/// Whether `pid` runs (exists and is not a zombie).
fn process_alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(") ")?.1.chars().next()?;
            Some(state != 'Z' && state != 'X')
        })
        .unwrap_or(false)
}

#[test]
fn sigterm_to_a_print_worker_ends_devin_and_the_job_is_cancelled() {
    let mut env = Env::new();
    let marker = format!("print-term-{}", std::process::id());
    let (id, worker) = lingering_print_job(&mut env, &marker);
    signal(worker, nix::sys::signal::Signal::SIGTERM);
    assert!(
        wait_marked(&marker, false, Duration::from_secs(20)),
        "devin -p or its child outlived the worker's SIGTERM"
    );
    let record = wait_for(&env, &id, |r| r["status"] != "running");
    assert_eq!(record["status"], "cancelled", "{record}");
    assert!(
        record["failure"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("SIGTERM"),
        "{record}"
    );
}

#[test]
fn cancelling_a_print_job_leaves_no_devin_process() {
    let mut env = Env::new();
    let marker = format!("print-cancel-{}", std::process::id());
    let (id, _) = lingering_print_job(&mut env, &marker);
    let output = env.run(&["cancel", &id]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        wait_marked(&marker, false, Duration::from_secs(20)),
        "devin -p or its child outlived the cancel"
    );
    assert_eq!(env.record(&id)["status"], "cancelled");
}

/// Sends `signal` to `pid` from the test itself (a fresh machine may have no `kill` program).
fn signal(pid: i32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).expect("signal the worker");
}
