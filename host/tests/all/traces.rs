//! Recorded traces are tests: every `tests/traces/<name>.jsonl` is played by the offline agent
//! (`mock-devin --replay`) to the clients its `tests/traces/<name>.expect.toml` names: behind
//! the summarizer, on the per-turn and the resident transport (a `[summarizer]` section), and
//! to a companion task (a `[companion]` section), and each answer must be the one the section
//! names. A trace dropped into the folder (`devin-bridge doctor --record`) is a test with no
//! code change; one without its expect file fails with the answer the bridge gave, ready to be
//! written down.
//!
//! The expect file:
//! ```toml
//! description = "what the trace shows"
//! model = "swe-1-6"            # the request's model, a catalog id; also `--model` of the agent
//! transports = ["per-turn", "resident"]   # the default
//! [summarizer]
//! status = 200
//! reply_text = "..."           # a success: the reply's text, exactly
//! error_type = "..."           # a failure: the Anthropic error type
//! message_contains = ["..."]   # words the error message holds
//! retry_after = "30"           # the retry-after header
//! [companion]
//! status = "done"              # the job record's status: done or failed
//! result = "..."               # a success: the job's result text, exactly
//! failure_kind = "quota"       # a failure: the job's typed failure kind
//! message_contains = ["..."]   # words the failure message holds
//! ```
//! Every run also fails when the replay met a request the trace did not expect (its
//! `replay_unexpected` log line names the request and the trace's line).

use crate::common;

use std::path::{Path, PathBuf};

use common::bridge::{HttpResponse, TestBridge};
use common::companion;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    #[allow(dead_code)]
    description: String,
    #[serde(default = "default_model")]
    model: String,
    #[serde(default = "default_transports")]
    transports: Vec<String>,
    summarizer: Option<Outcome>,
    companion: Option<CompanionOutcome>,
}

/// How a companion task must end.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompanionOutcome {
    status: String,
    result: Option<String>,
    failure_kind: Option<String>,
    #[serde(default)]
    message_contains: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Outcome {
    status: u16,
    reply_text: Option<String>,
    error_type: Option<String>,
    #[serde(default)]
    message_contains: Vec<String>,
    retry_after: Option<String>,
}

fn default_model() -> String {
    "swe-1-6".to_owned()
}

fn default_transports() -> Vec<String> {
    vec!["per-turn".to_owned(), "resident".to_owned()]
}

/// The traces in `tests/traces`, sorted.
fn traces() -> Vec<PathBuf> {
    let dir = common::artifacts::workspace_root()
        .join("tests")
        .join("traces");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    found.sort();
    found
}

fn expect_file(trace: &Path) -> PathBuf {
    let stem = trace
        .file_stem()
        .and_then(|stem| stem.to_str())
        .unwrap_or_default();
    trace.with_file_name(format!("{stem}.expect.toml"))
}

/// The offline agent logs to `mock.jsonl` in its working directory: each bridge's own home.
fn log_in_agent_home() {
    static SET: std::sync::Once = std::sync::Once::new();
    SET.call_once(|| std::env::set_var("MOCK_DEVIN_LOG", common::bridge::AGENT_LOG));
}

/// What the bridge answered one trace on one transport, and what the replay logged.
struct Played {
    response: HttpResponse,
    unexpected: Vec<String>,
    replays: usize,
}

/// Plays `trace` behind a summarizer on `transport` and sends it one request for `model`.
async fn play(trace: &Path, transport: &str, model: &str) -> Played {
    log_in_agent_home();
    let args = [
        format!("--replay={}", trace.display()),
        "--model".to_owned(),
        model.to_owned(),
        "acp".to_owned(),
        "--agent-type".to_owned(),
        "summarizer".to_owned(),
    ];
    let agent = format!(
        "transport = {transport:?}\nprewarm = 0\nargs = {args:?}\npass_env = [\"MOCK_DEVIN_LOG\"]\n\
         init_timeout_ms = 10000\nturn_timeout_ms = 20000\n"
    );
    let bridge = TestBridge::start("", &agent).await;
    let request = json!({
        "model": format!("devin-cli-agentic/{model}"),
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "What is the capital of France?"}]
    });
    let response = bridge
        .conversation_turn("trace-conversation", &request)
        .await;
    // The per-turn transport releases its session after the answer: give it a moment, so a
    // release the trace did not expect is seen too.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let unexpected = bridge
        .agent_events("replay_unexpected")
        .iter()
        .map(|event| event["message"].as_str().unwrap_or_default().to_owned())
        .collect();
    let replays = bridge.agent_events("replay_start").len();
    bridge.stop().await;
    Played {
        response,
        unexpected,
        replays,
    }
}

/// What went wrong with the replay itself: it never started (`replays` starts logged), or it
/// met messages the trace did not expect.
fn replay_problems(replays: usize, unexpected: &[String]) -> Vec<String> {
    let mut wrong = Vec::new();
    if replays == 0 {
        wrong.push("the replay never started (no replay_start in the agent log)".to_owned());
    }
    wrong.extend(
        unexpected
            .iter()
            .map(|message| format!("the replay failed: {message}")),
    );
    wrong
}

/// What is wrong with `played` against `outcome` (nothing: empty).
fn judge(played: &Played, outcome: &Outcome) -> Vec<String> {
    let mut wrong = replay_problems(played.replays, &played.unexpected);
    let response = &played.response;
    if response.status != outcome.status {
        wrong.push(format!(
            "status {} instead of {}: {}",
            response.status, outcome.status, response.body
        ));
    }
    let body: Value = serde_json::from_str(&response.body).unwrap_or(Value::Null);
    if let Some(text) = &outcome.reply_text {
        let got: String = body["content"]
            .as_array()
            .map(|blocks| {
                blocks
                    .iter()
                    .filter(|block| block["type"] == "text")
                    .filter_map(|block| block["text"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        if got != *text {
            wrong.push(format!("reply text {got:?} instead of {text:?}"));
        }
    }
    if let Some(kind) = &outcome.error_type {
        if body["error"]["type"] != kind.as_str() {
            wrong.push(format!(
                "error type {} instead of {kind}",
                body["error"]["type"]
            ));
        }
    }
    let message = body["error"]["message"].as_str().unwrap_or_default();
    for words in &outcome.message_contains {
        if !message.contains(words.as_str()) {
            wrong.push(format!("the error message {message:?} lacks {words:?}"));
        }
    }
    if let Some(after) = &outcome.retry_after {
        if response.header("retry-after") != Some(after.as_str()) {
            wrong.push(format!(
                "retry-after {:?} instead of {after:?}",
                response.header("retry-after")
            ));
        }
    }
    wrong
}

/// An expect file that would make `played` pass, for a trace that has none.
fn suggestion(played: &Played) -> String {
    let body: Value = serde_json::from_str(&played.response.body).unwrap_or(Value::Null);
    let mut text = format!(
        "description = \"...\"\n\n[summarizer]\nstatus = {}\n",
        played.response.status
    );
    match body["error"]["type"].as_str() {
        Some(kind) => text.push_str(&format!(
            "error_type = {kind:?}\nmessage_contains = [{:?}]\n",
            body["error"]["message"].as_str().unwrap_or_default()
        )),
        None => text.push_str(&format!(
            "reply_text = {:?}\n",
            body["content"][0]["text"].as_str().unwrap_or_default()
        )),
    }
    text
}

/// Plays one trace as its expect file says; what went wrong, per transport.
async fn check(trace: &Path) -> Vec<String> {
    let name = trace.display();
    let expect_path = expect_file(trace);
    let Ok(text) = std::fs::read_to_string(&expect_path) else {
        let played = play(trace, "per-turn", &default_model()).await;
        return vec![format!(
            "{name}: no {}; the bridge answered it with:\n{}",
            expect_path.display(),
            suggestion(&played)
        )];
    };
    let expect: Expect = match toml::from_str(&text) {
        Ok(expect) => expect,
        Err(error) => return vec![format!("{}: {error}", expect_path.display())],
    };
    let mut wrong = Vec::new();
    if expect.summarizer.is_none() && expect.companion.is_none() {
        wrong.push(format!(
            "{}: names no client: give it a [summarizer] or a [companion] section",
            expect_path.display()
        ));
    }
    if let Some(outcome) = &expect.summarizer {
        for transport in &expect.transports {
            let played = play(trace, transport, &expect.model).await;
            wrong.extend(
                judge(&played, outcome)
                    .into_iter()
                    .map(|problem| format!("{name} ({transport}): {problem}")),
            );
        }
    }
    if let Some(outcome) = &expect.companion {
        let trace = trace.to_owned();
        let played = tokio::task::spawn_blocking(move || play_companion(&trace))
            .await
            .expect("the companion run");
        wrong.extend(
            judge_companion(&played, outcome)
                .into_iter()
                .map(|problem| format!("{name} (companion): {problem}")),
        );
    }
    wrong
}

/// What a companion task ended as against one trace, and what the replay logged.
struct CompanionPlayed {
    record: Value,
    unexpected: Vec<String>,
    replays: usize,
}

/// Plays `trace` as the companion's Devin CLI (`--version` included) and runs one consult
/// task against it.
fn play_companion(trace: &Path) -> CompanionPlayed {
    let mut env = companion::Env::new();
    let log = env.root.path().join("mock-devin.jsonl");
    env.devin = companion::script(
        &env,
        "replaying-devin",
        &format!(
            "MOCK_DEVIN_LOG='{}' exec '{}' --replay='{}' \"$@\"",
            log.display(),
            common::bridge::mock_devin().display(),
            trace.display()
        ),
    );
    let (_, record) = companion::task(&env, &["task", "--", "What is the capital of France?"]);
    CompanionPlayed {
        record,
        unexpected: companion::mock_events(&log, "replay_unexpected")
            .iter()
            .map(|event| event["message"].as_str().unwrap_or_default().to_owned())
            .collect(),
        replays: companion::mock_events(&log, "replay_start").len(),
    }
}

/// What is wrong with a companion task's record against `outcome` (nothing: empty).
fn judge_companion(played: &CompanionPlayed, outcome: &CompanionOutcome) -> Vec<String> {
    let mut wrong = replay_problems(played.replays, &played.unexpected);
    let record = &played.record;
    if record["status"] != outcome.status.as_str() {
        wrong.push(format!(
            "status {} instead of {}: {record}",
            record["status"], outcome.status
        ));
    }
    if let Some(text) = &outcome.result {
        if record["result"] != text.as_str() {
            wrong.push(format!("result {} instead of {text:?}", record["result"]));
        }
    }
    if let Some(kind) = &outcome.failure_kind {
        if companion::failure_kind(record) != *kind {
            wrong.push(format!(
                "failure kind {} instead of {kind}: {}",
                record["failure"]["kind"], record["failure"]["message"]
            ));
        }
    }
    let message = companion::failure_message(record);
    for words in &outcome.message_contains {
        if !message.contains(words.as_str()) {
            wrong.push(format!("the failure message {message:?} lacks {words:?}"));
        }
    }
    wrong
}

#[tokio::test(flavor = "multi_thread")]
async fn every_trace_in_tests_traces_gets_its_expected_answer_from_each_client_it_names() {
    let traces = traces();
    let sections = |section: &str| {
        traces
            .iter()
            .filter(|trace| {
                std::fs::read_to_string(expect_file(trace))
                    .is_ok_and(|text| text.lines().any(|line| line.trim() == section))
            })
            .count()
    };
    for section in ["[summarizer]", "[companion]"] {
        let count = sections(section);
        assert!(
            count >= 10,
            "tests/traces holds {count} traces for {section}, fewer than the ten recorded situations"
        );
    }
    let mut wrong = Vec::new();
    for trace in &traces {
        wrong.extend(check(trace).await);
    }
    assert!(
        wrong.is_empty(),
        "{} of the checks failed:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// A trace that records `session/load` where the bridge opens a new session.
fn wrong_trace(dir: &Path) -> PathBuf {
    let normal = common::artifacts::workspace_root().join("tests/traces/normal_turn.jsonl");
    let text = std::fs::read_to_string(normal).expect("the normal turn");
    let changed = text.replacen(
        "\"method\":\"session/new\"",
        "\"method\":\"session/load\"",
        1,
    );
    assert_ne!(changed, text, "the normal turn opens a session");
    let path = dir.join("wrong.jsonl");
    std::fs::write(&path, changed).expect("write the trace");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trace_the_bridge_does_not_follow_fails_naming_the_request_and_the_line() {
    let dir = tempfile::tempdir().expect("dir");
    let trace = wrong_trace(dir.path());
    let played = play(&trace, "per-turn", "swe-1-6").await;
    assert_ne!(played.response.status, 200, "{}", played.response.body);
    let message = played.unexpected.join("\n");
    assert!(message.contains("request `session/new`"), "{message}");
    assert!(
        message.contains("expected `session/load` at line 4"),
        "{message}"
    );
    // The runner reports it as a failure of that trace.
    let outcome = Outcome {
        status: 200,
        reply_text: Some("The capital of France is Paris.".into()),
        error_type: None,
        message_contains: Vec::new(),
        retry_after: None,
    };
    let problems = judge(&played, &outcome).join("\n");
    assert!(
        problems.contains("the replay failed: unexpected request `session/new`"),
        "{problems}"
    );
}

#[test]
fn a_trace_the_companion_does_not_follow_fails_naming_the_request_and_the_line() {
    let dir = tempfile::tempdir().expect("dir");
    let normal =
        common::artifacts::workspace_root().join("tests/traces/full_agent_normal_turn.jsonl");
    let text = std::fs::read_to_string(normal).expect("the full agent's normal turn");
    // The trace expects `session/load` where the companion sets the mode.
    let changed = text.replacen(
        "\"method\":\"session/set_mode\"",
        "\"method\":\"session/load\"",
        1,
    );
    assert_ne!(changed, text, "the companion's trace sets the mode");
    let trace = dir.path().join("wrong.jsonl");
    std::fs::write(&trace, changed).expect("write the trace");
    let played = play_companion(&trace);
    let outcome = CompanionOutcome {
        status: "done".into(),
        result: Some("The capital of France is Paris.".into()),
        failure_kind: None,
        message_contains: Vec::new(),
    };
    let problems = judge_companion(&played, &outcome).join("\n");
    assert!(
        problems.contains("the replay failed: unexpected request `session/set_mode`"),
        "{problems}"
    );
    assert!(
        problems.contains("expected `session/load` at line"),
        "{problems}"
    );
    assert!(
        problems.contains("status \"error\" instead of done"),
        "{problems}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trace_without_an_expect_file_fails_with_the_answer_to_write_down() {
    let dir = tempfile::tempdir().expect("dir");
    let normal = common::artifacts::workspace_root().join("tests/traces/normal_turn.jsonl");
    let trace = dir.path().join("dropped.jsonl");
    std::fs::copy(normal, &trace).expect("copy");
    let problems = check(&trace).await.join("\n");
    assert!(problems.contains("no "), "{problems}");
    assert!(problems.contains("dropped.expect.toml"), "{problems}");
    assert!(problems.contains("status = 200"), "{problems}");
    assert!(
        problems.contains("reply_text = \"The capital of France is Paris.\""),
        "{problems}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_doctor_recording_replays_behind_the_bridge_as_a_test() {
    let dir = tempfile::tempdir().expect("dir");
    let catalog = common::policies::catalog();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        common::policy_text(&format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nrequire_key = false\n\
             [agent]\ncommand = {:?}\nhome = {:?}\noffline = true\n\
             [models]\ncatalog = {:?}\n",
            common::bridge::mock_devin().display().to_string(),
            dir.path().join(".sandbox/home").display().to_string(),
            catalog.display().to_string(),
        )),
    )
    .expect("policy");
    let trace = dir.path().join("recorded.jsonl");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_devin-bridge"))
        .args(["doctor", "--prompt", "--json", "--policy"])
        .arg(&policy)
        .arg("--record")
        .arg(&trace)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("XDG_CACHE_HOME", common::bridge_cache_home())
        .output()
        .expect("doctor");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    // The redacted reply is filled in by the replay, so the bridge has a reply to answer.
    let outcome = Outcome {
        status: 200,
        reply_text: Some("(replayed text)".into()),
        error_type: None,
        message_contains: Vec::new(),
        retry_after: None,
    };
    for transport in ["per-turn", "resident"] {
        let played = play(&trace, transport, "swe-1-7").await;
        let problems = judge(&played, &outcome);
        assert!(problems.is_empty(), "{transport}: {problems:?}");
    }
}
