//! Drives the full agent (`mock-devin acp`, no agent type) over pipes, as companion mode does:
//! a private HOME and XDG directories, a generated `devin/config.json`, a credential.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod harness;

use harness::{Agent, Out, BIN, WAIT};

/// A private home: `home/`, `config/devin/config.json`, `data/devin/credentials.toml`, and a
/// project directory `work/`.
struct Home {
    dir: tempfile::TempDir,
    work: PathBuf,
    log: PathBuf,
}

impl Home {
    fn new(config: &Value) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        for sub in ["home", "config/devin", "data/devin", "work"] {
            std::fs::create_dir_all(root.join(sub)).expect("mkdir");
        }
        std::fs::write(
            root.join("config/devin/config.json"),
            serde_json::to_vec(config).expect("json"),
        )
        .expect("config");
        std::fs::write(root.join("data/devin/credentials.toml"), "token = \"x\"\n")
            .expect("credentials");
        Self {
            work: root.join("work"),
            log: root.join("mock-devin.jsonl"),
            dir,
        }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().expect("canonical")
    }

    fn env(&self) -> Vec<(String, String)> {
        let root = self.root();
        let path = |sub: &str| root.join(sub).display().to_string();
        vec![
            ("HOME".into(), path("home")),
            ("XDG_CONFIG_HOME".into(), path("config")),
            ("XDG_DATA_HOME".into(), path("data")),
            ("MOCK_DEVIN_LOG".into(), self.log.display().to_string()),
        ]
    }

    fn sessions(&self) -> PathBuf {
        self.root().join("data/devin/sessions")
    }

    fn log_events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("log line"))
            .collect()
    }
}

fn permissive() -> Value {
    json!({"permissions": {"allow": ["Read(**)"], "deny": []}})
}

fn command(env: &[(String, String)]) -> Command {
    let mut command = Command::new(BIN);
    command.env_clear();
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

impl Agent {
    /// The full agent (`mock-devin acp`) in `home`'s project, with `home`'s environment and
    /// `extra`, and nothing else.
    fn spawn(home: &Home, extra: &[(&str, &str)]) -> Self {
        let mut env = home.env();
        env.extend(
            extra
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned())),
        );
        let mut command = command(&env);
        command.arg("acp").current_dir(&home.work);
        Agent::start(command, 0)
    }

    fn turn(&mut self, session: &str, text: &str) -> (Vec<Value>, Value) {
        let id = self.prompt(session, text);
        self.until_response(id)
    }

    fn set_mode(&mut self, session: &str, mode: &str) -> Value {
        self.call(
            "session/set_mode",
            json!({"sessionId": session, "modeId": mode}),
        )
    }
}

/// The text of the updates of one kind among `messages`, joined.
fn text_of(messages: &[Value], kind: &str) -> String {
    messages
        .iter()
        .filter(|m| {
            m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == kind
        })
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

fn count_updates(messages: &[Value], kind: &str) -> usize {
    messages
        .iter()
        .filter(|m| {
            m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == kind
        })
        .count()
}

fn notification<'a>(messages: &'a [Value], method: &str) -> Option<&'a Value> {
    messages.iter().find(|m| m["method"] == method)
}

fn option<'a>(options: &'a Value, category: &str) -> Option<&'a Value> {
    options
        .as_array()
        .expect("configOptions")
        .iter()
        .find(|o| o["category"] == category)
}

fn values(option: &Value) -> Vec<&str> {
    option["options"]
        .as_array()
        .expect("options")
        .iter()
        .filter_map(|o| o["value"].as_str())
        .collect()
}

#[test]
fn session_round_trip_then_load_in_a_second_process() {
    let home = Home::new(&permissive());
    let mut agent = Agent::spawn(&home, &[]);
    let init = agent.initialize();
    assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true);
    let new = agent.new_session(&home.work);
    let result = &new["result"];
    let session = result["sessionId"].as_str().expect("session id").to_owned();
    assert!(
        session.starts_with("mock-") && session.len() > 10,
        "{session}"
    );
    assert_eq!(result["modes"]["currentModeId"], "accept-edits");
    let mode_ids: Vec<&str> = result["modes"]["availableModes"]
        .as_array()
        .expect("modes")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(mode_ids, ["accept-edits", "smart", "ask", "plan", "bypass"]);
    let options = &result["configOptions"];
    let model = option(options, "model").expect("model option");
    assert_eq!(model["currentValue"], "swe-2");
    assert_eq!(model["type"], "select");
    // Each model option says whether it takes images.
    for entry in model["options"].as_array().expect("options") {
        assert!(
            entry["_meta"]["cognition.ai/supportsImages"].is_boolean(),
            "{entry}"
        );
        assert!(entry["name"].is_string(), "{entry}");
    }
    assert_eq!(
        new["result"]["_meta"],
        json!({"cognition.ai/isLocked": false})
    );
    assert_eq!(
        values(model),
        [
            "swe-2",
            "swe-2-fast",
            "swe-2-high",
            "kimi-k3",
            "glm-5-2",
            "muse-wonder"
        ]
    );
    // No separate effort or speed options: effort is a model variant.
    assert!(option(options, "thought_level").is_none(), "{options}");
    assert!(option(options, "speed").is_none(), "{options}");
    assert_eq!(options.as_array().expect("options").len(), 2);
    assert_eq!(
        option(options, "mode").expect("mode")["currentValue"],
        "accept-edits"
    );

    // A second session gets another id.
    let other = agent.new_session(&home.work);
    assert_ne!(other["result"]["sessionId"], json!(session));

    // The update first, then the whole list.
    let id = agent.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "glm-5-2"}),
    );
    let (before, set) = agent.until_response(id);
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(
        before[0]["params"]["update"]["sessionUpdate"],
        "config_option_update"
    );
    assert_eq!(
        before[0]["params"]["update"]["configOptions"],
        set["result"]["configOptions"]
    );
    let options = &set["result"]["configOptions"];
    assert_eq!(
        option(options, "model").expect("model")["currentValue"],
        "glm-5-2"
    );
    let refused = agent.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thought_level", "value": "high"}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    for hidden in ["legacy-9", "adaptive"] {
        let bad_value = agent.call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": hidden}),
        );
        assert_eq!(
            bad_value["error"],
            json!({"code": -32002, "message": "Resource not found",
                   "data": {"uri": format!("Model not found: {hidden}. Available models: swe-2, \
                            swe-2-fast, swe-2-high, kimi-k3, glm-5-2, muse-wonder")}})
        );
    }

    assert_eq!(agent.set_mode(&session, "bypass")["result"], json!({}));
    assert_eq!(agent.set_mode(&session, "yolo")["error"]["code"], -32602);

    let (before, result) = agent.turn(&session, "Say hello.");
    assert_eq!(result["result"]["stopReason"], "end_turn", "{result}");
    let usage = &result["result"]["usage"];
    assert!(usage["inputTokens"].as_u64().is_some_and(|n| n > 0));
    assert_eq!(
        usage["totalTokens"].as_u64(),
        Some(usage["inputTokens"].as_u64().unwrap() + usage["outputTokens"].as_u64().unwrap())
    );
    assert_eq!(usage["cachedReadTokens"], 0, "{usage}");
    // Sorted: the order of a JSON object's keys depends on serde_json's features in the build.
    let mut keys: Vec<&String> = usage.as_object().expect("usage").keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "cachedReadTokens",
            "inputTokens",
            "outputTokens",
            "totalTokens"
        ]
    );
    assert!(result["result"]["_meta"]["cognition.ai/userMessageId"].is_string());
    let output = notification(&before, "_cognition.ai/output").expect("output");
    assert_eq!(output["params"]["sessionId"], "");
    assert!(count_updates(&before, "agent_message_chunk") >= 2);
    assert_eq!(
        text_of(&before, "agent_message_chunk"),
        "Devin mock: done. turns seen: 0"
    );
    let stats = notification(&before, "_cognition.ai/turn_stats").expect("turn_stats");
    assert!(stats["params"].get("modelLabel").is_none(), "{stats}");
    assert_eq!(
        stats["params"]["responseDimensions"][0],
        json!({"uid": "model", "groupTitle": "Response Statistics", "label": "Model",
               "kind": {"type": "metric", "value": "GLM-5.2"}})
    );
    assert_eq!(stats["params"]["sessionId"], json!(session));
    assert_eq!(
        stats["params"]["turnClientMessageId"],
        result["result"]["_meta"]["cognition.ai/userMessageId"]
    );
    let stopped = notification(&before, "_cognition.ai/agent_stopped").expect("agent_stopped");
    assert_eq!(stopped["params"]["cause"], "complete");
    assert_eq!(stopped["params"]["stats"]["modelLabel"], "GLM-5.2");
    assert_eq!(
        stopped["params"]["stats"]["requestId"],
        stats["params"]["turnRequestId"]
    );
    // turn_stats, then agent_stopped: the last messages before the result.
    assert_eq!(before.last(), Some(stopped));
    assert_eq!(before.get(before.len() - 2), Some(stats));

    // The session database holds the transcript, privately.
    let file = home.sessions().join(format!("{session}.json"));
    let mode = std::fs::metadata(&file)
        .expect("session file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let stored: Value = serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("json");
    assert_eq!(stored["model"], "glm-5-2");
    assert_eq!(stored["mode"], "bypass");
    assert_eq!(stored["history"][0]["text"], "Say hello.");

    agent.close_stdin();
    assert_eq!(
        agent
            .wait_exit(Duration::from_secs(5))
            .and_then(|s| s.code()),
        Some(0)
    );

    // A second process loads the session: replay, then the stored configuration.
    let mut second = Agent::spawn(&home, &[]);
    second.initialize();
    let missing = second.call(
        "session/load",
        json!({"sessionId": "mock-0000000000000000", "cwd": home.work, "mcpServers": []}),
    );
    assert_eq!(
        missing["error"],
        json!({"code": -32016, "message": "Session not found",
               "data": {"cognition.ai/errorKind": "session_not_found",
                        "cognition.ai/retryable": false}})
    );
    let id = second.request(
        "session/load",
        json!({"sessionId": session, "cwd": home.work, "mcpServers": []}),
    );
    let (replayed, loaded) = second.until_response(id);
    assert_eq!(text_of(&replayed, "user_message_chunk"), "Say hello.");
    assert_eq!(
        text_of(&replayed, "agent_message_chunk"),
        "Devin mock: done. turns seen: 0"
    );
    assert_eq!(loaded["result"]["modes"]["currentModeId"], "bypass");
    let options = &loaded["result"]["configOptions"];
    assert_eq!(
        option(options, "model").expect("model")["currentValue"],
        "glm-5-2"
    );
    let (before, result) = second.turn(&session, "Again.");
    assert_eq!(result["result"]["stopReason"], "end_turn");
    assert_eq!(
        text_of(&before, "agent_message_chunk"),
        "Devin mock: done. turns seen: 1"
    );

    // The log names sessions and settings, never prompt text.
    let log = std::fs::read_to_string(&home.log).expect("log");
    assert!(log.contains(&session));
    assert!(log.contains("\"configId\":\"model\""));
    assert!(!log.contains("Say hello."));
}

#[test]
fn writes_need_an_editing_mode_an_allow_rule_and_no_deny_rule() {
    let home = Home::new(&permissive());
    // The session's cwd is the project directory; the rules name absolute paths under it.
    let project = home.work.clone();
    let allowed = project.join("allowed");
    std::fs::create_dir_all(&allowed).expect("mkdir");
    let config = json!({"permissions": {
        "allow": ["Read(**)", format!("Write({}/**)", allowed.display())],
        "deny": [format!("Write({}/secret/**)", allowed.display()), "Exec(*)"],
    }});
    std::fs::write(
        home.root().join("config/devin/config.json"),
        serde_json::to_vec(&config).expect("json"),
    )
    .expect("config");
    let mut agent = Agent::spawn(&home, &[]);
    let session = agent.start_session(&project);

    // Smart mode: nothing is written even where the rules allow it.
    assert_eq!(agent.set_mode(&session, "smart")["result"], json!({}));
    let (before, _) = agent.turn(&session, "[mock:write allowed/a.txt]");
    let reply = text_of(&before, "agent_message_chunk");
    let target = allowed.join("a.txt");
    assert!(
        reply.contains(&format!("write denied: {}", target.display())),
        "{reply}"
    );
    assert!(!target.exists());
    let call = before
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "tool_call")
        .expect("tool_call");
    // A native tool: named in inferenceToolName, not toolName.
    assert_eq!(
        call["params"]["update"]["_meta"],
        json!({"cognition.ai/inferenceToolName": "write"})
    );
    assert_eq!(call["params"]["update"]["kind"], "edit");

    assert_eq!(agent.set_mode(&session, "bypass")["result"], json!({}));
    let (before, result) = agent.turn(
        &session,
        "[mock:write allowed/a.txt] [mock:write allowed/secret/b.txt] \
         [mock:write ../outside.txt] [mock:write other/c.txt]",
    );
    assert_eq!(result["result"]["stopReason"], "end_turn");
    let reply = text_of(&before, "agent_message_chunk");
    assert!(
        reply.contains(&format!("wrote: {}", target.display())),
        "{reply}"
    );
    assert_eq!(
        std::fs::read_to_string(&target).expect("written"),
        "mock write\n"
    );
    for denied in [
        allowed.join("secret/b.txt"),
        home.root().join("outside.txt"),
        project.join("other/c.txt"),
    ] {
        assert!(
            reply.contains(&format!("write denied: {}", denied.display())),
            "{reply}"
        );
        assert!(!denied.exists(), "{}", denied.display());
    }
    assert!(reply.ends_with("turns seen: 1"), "{reply}");
}

#[test]
fn argv_version_and_catalog() {
    let home = Home::new(&permissive());
    for flags in [
        &["acp", "--cloud"][..],
        &["acp", "--verbose"],
        &["acp", "--refusal-fallback"],
        &["acp", "--agent-type", "reviewer"],
    ] {
        let output = command(&home.env())
            .args(flags)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        assert_eq!(output.status.code(), Some(64), "{flags:?}");
        assert!(output.stdout.is_empty());
        assert!(!output.stderr.is_empty());
    }
    let refused: Vec<Value> = home
        .log_events()
        .into_iter()
        .filter(|event| event["event"] == "argv_refused")
        .map(|event| event["flags"].clone())
        .collect();
    assert_eq!(
        refused,
        [
            json!(["--cloud"]),
            json!(["--verbose"]),
            json!(["--refusal-fallback"]),
            json!(["--agent-type"])
        ]
    );
    let version = command(&[]).arg("--version").output().expect("run");
    assert!(version.status.success());
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        "devin 3000.11.4 (mock-devin offline)\n"
    );
    // Signed out and without any configuration, the catalog is still listed.
    let models = command(&[])
        .args(["models", "list", "--format", "json"])
        .output()
        .expect("run");
    assert_eq!(models.status.code(), Some(0));
    let catalog: Value = serde_json::from_slice(&models.stdout).expect("catalog json");
    let families = catalog["families"].as_array().expect("families");
    let find = |uid: &str| {
        families
            .iter()
            .find(|f| f["family_uid"] == uid)
            .unwrap_or_else(|| panic!("no family {uid}"))
    };
    let variants: Vec<&str> = find("swe-2")["variants"]
        .as_array()
        .expect("variants")
        .iter()
        .filter_map(|v| v["model_uid"].as_str())
        .collect();
    assert_eq!(variants, ["swe-2", "swe-2-fast", "swe-2-high"]);
    assert_eq!(find("adaptive")["variants"][0]["model_uid"], "adaptive");
    assert_eq!(find("adaptive")["variants"][0]["label"], "Adaptive");
    assert!(find("kimi-k3")["aliases"]
        .as_array()
        .expect("aliases")
        .contains(&json!("kimi")));
    assert_eq!(find("glm-5.2")["variants"][0]["model_uid"], "glm-5.2");
    find("muse-wonder");
    find("legacy-9");

    // legacy-9 is in the catalog but not offered to the account.
    let mut agent = Agent::spawn(&home, &[]);
    agent.initialize();
    let new = agent.new_session(&home.work);
    let model = option(&new["result"]["configOptions"], "model").expect("model");
    assert!(!values(model).contains(&"legacy-9"));
    assert!(!values(model).contains(&"adaptive"));
}

#[test]
fn missing_or_malformed_config_exits_78() {
    let home = Home::new(&permissive());
    let config = home.root().join("config/devin/config.json");
    for content in [
        None,
        Some("{not json"),
        Some(r#"{"permissions": {"allow": "Read(**)"}}"#),
        Some(r#"{"permissions": {"deny": ["Write("]}}"#),
    ] {
        match content {
            None => std::fs::remove_file(&config).expect("remove"),
            Some(text) => std::fs::write(&config, text).expect("write"),
        }
        let output = command(&home.env())
            .arg("acp")
            .current_dir(&home.work)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        assert_eq!(output.status.code(), Some(78), "{content:?}");
        assert!(String::from_utf8_lossy(&output.stderr).contains("config"));
    }
}

#[test]
fn signed_out_sessions_need_authentication() {
    let home = Home::new(&permissive());
    let credentials = home.root().join("data/devin/credentials.toml");
    std::fs::remove_file(&credentials).expect("remove");
    // The older logged-out behaviour: session/new and session/load are refused.
    let mut agent = Agent::spawn(&home, &[("MOCK_DEVIN_LOGOUT_STYLE", "session_new")]);
    let init = agent.initialize();
    assert_eq!(
        init["result"]["authMethods"],
        json!([{"id": "devin-browser", "name": "Devin", "description": "Sign in with your browser"}])
    );
    let new = agent.new_session(&home.work);
    assert_eq!(
        new["error"],
        json!({"code": -32000, "message": "ACP host has not authenticated. Run \"devin auth login\" or authenticate with an API key."}),
    );
    let load = agent.call(
        "session/load",
        json!({"sessionId": "mock-0000000000000000", "cwd": home.work, "mcpServers": []}),
    );
    assert_eq!(load["error"]["code"], -32000, "{load}");
    // No key: the CLI would open a browser.
    let browser = agent.call(
        "authenticate",
        json!({"methodId": "devin-browser", "_meta": {}}),
    );
    assert_eq!(
        browser["error"],
        json!({"code": -32603, "message": "cannot open a browser: no display"})
    );
    let unknown = agent.call("authenticate", json!({"methodId": "api-key"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    // A key through authenticate signs this process in.
    let signed = agent.call(
        "authenticate",
        json!({"methodId": "devin-browser", "_meta": {"api_key": "secret-key-9"}}),
    );
    assert_eq!(signed["result"], Value::Null, "{signed}");
    assert!(agent.new_session(&home.work)["result"]["sessionId"].is_string());
    drop(agent);
    let events = home.log_events();
    assert!(events.iter().any(|e| e["event"] == "browser_login"));
    assert!(events
        .iter()
        .any(|e| e["event"] == "authenticate" && e["apiKey"] == true));
    assert!(!std::fs::read_to_string(&home.log)
        .expect("log")
        .contains("secret-key-9"));

    // So does a credentials file reached through a symlink.
    let real = home.root().join("home/creds.toml");
    std::fs::write(&real, "x").expect("write");
    std::os::unix::fs::symlink(&real, &credentials).expect("symlink");
    let mut agent = Agent::spawn(&home, &[]);
    agent.initialize();
    assert!(agent.new_session(&home.work)["result"]["sessionId"].is_string());

    // A relative cwd, a missing one and missing mcpServers are refused.
    for params in [
        json!({"cwd": "work", "mcpServers": []}),
        json!({"cwd": home.root().join("nope"), "mcpServers": []}),
        json!({"cwd": home.work}),
    ] {
        let refused = agent.call("session/new", params);
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
    }
}

#[test]
fn failure_markers_end_turns_as_scripted() {
    let home = Home::new(&permissive());
    let mut agent = Agent::spawn(&home, &[]);
    let session = agent.start_session(&home.work);
    for (marker, code, message, data) in [
        (
            "auth",
            -32000,
            "ACP host has not authenticated",
            Value::Null,
        ),
        (
            "quota",
            -32011,
            "Quota exhausted.",
            json!({"cognition.ai/errorKind": "resource_exhausted", "cognition.ai/retryable": true}),
        ),
        (
            "rate_limited",
            -32010,
            "Reached overall message rate limit",
            json!({"cognition.ai/errorKind": "unavailable", "cognition.ai/retryable": true,
                   "cognition.ai/retryAfterSeconds": 5}),
        ),
        (
            "network",
            -32010,
            "Connection error, send a message to continue retrying",
            json!({"cognition.ai/errorKind": "unavailable", "cognition.ai/retryable": true}),
        ),
        (
            "server",
            -32603,
            "Internal error",
            json!({"cognition.ai/errorKind": "internal", "cognition.ai/retryable": false}),
        ),
    ] {
        let (before, result) = agent.turn(&session, &format!("[mock:fail {marker}]"));
        assert_eq!(result["error"]["code"], code, "{marker}: {result}");
        assert!(
            result["error"]["message"]
                .as_str()
                .expect("message")
                .starts_with(message),
            "{marker}: {result}"
        );
        assert_eq!(result["error"]["data"], data, "{marker}: {result}");
        let stopped = notification(&before, "_cognition.ai/agent_stopped").expect("stopped");
        assert_eq!(stopped["params"]["cause"], "error");
    }
    let (before, result) = agent.turn(&session, "[mock:fail error]");
    assert_eq!(result["result"]["stopReason"], "end_turn");
    assert_eq!(
        notification(&before, "_cognition.ai/agent_stopped").expect("stopped")["params"]["cause"],
        "error"
    );
    for (marker, reason) in [("refusal", "refusal"), ("max-tokens", "max_tokens")] {
        let (_, result) = agent.turn(&session, &format!("[mock:{marker}]"));
        assert_eq!(result["result"]["stopReason"], reason, "{marker}");
    }
    let (before, result) = agent.turn(
        &session,
        "[mock:no-stopped] [mock:model Custom 1] [mock:cache-tokens]",
    );
    assert!(notification(&before, "_cognition.ai/agent_stopped").is_none());
    assert_eq!(
        notification(&before, "_cognition.ai/turn_stats").expect("stats")["params"]
            ["responseDimensions"][0]["kind"]["value"],
        "Custom 1"
    );
    assert!(result["result"]["usage"]["cachedReadTokens"]
        .as_u64()
        .is_some_and(|n| n > 0));
    // Eight earlier turns.
    assert!(text_of(&before, "agent_message_chunk").ends_with("turns seen: 8"));

    let (before, _) = agent.turn(&session, "[mock:model X] use the label");
    assert_eq!(
        notification(&before, "_cognition.ai/agent_stopped").expect("stopped")["params"]["stats"]
            ["modelLabel"],
        "X"
    );

    let brief = "Review this change.\n[mock:echo]\nLine three.";
    let (before, _) = agent.turn(&session, brief);
    assert_eq!(text_of(&before, "agent_message_chunk"), brief);

    let (before, _) = agent.turn(&session, "[mock:malformed]");
    assert!(before.iter().any(|m| m == "this is not json"), "{before:?}");

    let (before, _) = agent.turn(
        &session,
        "[mock:tool read read] [mock:tool-kind execute] [mock:tool mcp__docs__search search]",
    );
    let calls: Vec<&Value> = before
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "tool_call")
        .map(|m| &m["params"]["update"])
        .collect();
    assert_eq!(calls.len(), 3);
    // A native tool is named in inferenceToolName; only an MCP tool has toolName.
    assert_eq!(
        calls[0]["_meta"],
        json!({"cognition.ai/inferenceToolName": "read"})
    );
    assert_eq!(calls[0]["kind"], "read");
    assert_eq!(calls[0]["status"], "pending");
    assert!(calls[1].get("_meta").is_none());
    assert_eq!(calls[1]["kind"], "execute");
    assert_eq!(
        calls[2]["_meta"],
        json!({"cognition.ai/toolName": "mcp__docs__search"})
    );
    assert_eq!(count_updates(&before, "tool_call_update"), 3);

    let (before, _) = agent.turn(&session, "[mock:review-json]");
    let reply = text_of(&before, "agent_message_chunk");
    let start = reply.find('{').expect("a JSON object");
    assert!(start > 0, "prose first: {reply}");
    let review: Value = serde_json::from_str(&reply[start..]).expect("review json");
    assert_eq!(review["verdict"], "request_changes");
    assert_eq!(review["findings"][0]["severity"], "high");
    let (before, _) = agent.turn(&session, "[mock:review-bad]");
    assert!(text_of(&before, "agent_message_chunk").contains("\"verdict\":\"maybe\""));
    let (before, _) = agent.turn(&session, "[mock:review-none]");
    assert!(!text_of(&before, "agent_message_chunk").contains('{'));

    let (before, _) = agent.turn(&session, "[mock:env]");
    let listing = text_of(&before, "agent_message_chunk");
    assert!(
        listing.lines().any(|l| l.starts_with("XDG_DATA_HOME=")),
        "{listing}"
    );
}

#[test]
fn env_listing_shows_the_sandbox_flag() {
    let home = Home::new(&permissive());
    let mut agent = Agent::spawn(&home, &[("DEVIN_SANDBOX", "true")]);
    let session = agent.start_session(&home.work);
    let (before, _) = agent.turn(&session, "[mock:env]");
    let listing = text_of(&before, "agent_message_chunk");
    assert!(
        listing.lines().any(|l| l == "DEVIN_SANDBOX=true"),
        "{listing}"
    );
}

#[test]
fn a_cancelled_permission_request_cancels_the_turn() {
    let home = Home::new(&permissive());
    let mut agent = Agent::spawn(&home, &[]);
    let session = agent.start_session(&home.work);
    let id = agent.prompt(&session, "[mock:permission]");
    let request = match agent.next() {
        Out::Json(message) if message["method"] == "session/request_permission" => message,
        Out::Json(message) => {
            // Updates come first; skip to the request.
            let mut message = message;
            while message["method"] != "session/request_permission" {
                message = match agent.next() {
                    Out::Json(m) => m,
                    Out::Raw(line) => panic!("not JSON: {line}"),
                };
            }
            message
        }
        Out::Raw(line) => panic!("not JSON: {line}"),
    };
    let options: Vec<&str> = request["params"]["options"]
        .as_array()
        .expect("options")
        .iter()
        .filter_map(|o| o["optionId"].as_str())
        .collect();
    assert_eq!(
        options,
        [
            "allow_once",
            "allow_session",
            "switch_bypass",
            "reject_once"
        ]
    );
    assert_eq!(
        request["params"]["toolCall"],
        json!({"toolCallId": "call_1"})
    );
    agent.send(&json!({"jsonrpc": "2.0", "id": request["id"],
                       "result": {"outcome": {"outcome": "cancelled"}}}));
    let (before, result) = agent.until_response(id);
    assert_eq!(result["result"]["stopReason"], "cancelled", "{result}");
    assert_eq!(
        notification(&before, "_cognition.ai/agent_stopped").expect("stopped")["params"]["cause"],
        "cancelled"
    );
}

#[test]
fn a_slow_turn_is_cancelled_and_its_grandchild_goes() {
    let home = Home::new(&permissive());
    let mut agent = Agent::spawn(&home, &[]);
    let session = agent.start_session(&home.work);
    let started = Instant::now();
    let id = agent.prompt(&session, "[mock:slow 10000]");
    // The grandchild is logged once it runs.
    let pid = loop {
        if let Some(pid) = home
            .log_events()
            .iter()
            .find_map(|event| event["grandchildPid"].as_u64())
        {
            break pid;
        }
        assert!(started.elapsed() < WAIT, "no grandchild logged");
        thread::sleep(Duration::from_millis(20));
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("grandchild runs");
    let pgrp: u32 = stat
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().nth(2))
        .and_then(|field| field.parse().ok())
        .expect("pgrp");
    assert_eq!(pgrp, agent.pid(), "the grandchild is in the agent's group");
    agent.send(&json!({"jsonrpc": "2.0", "method": "session/cancel",
                       "params": {"sessionId": session}}));
    let (_, result) = agent.until_response(id);
    assert_eq!(result["result"]["stopReason"], "cancelled");
    assert!(started.elapsed() < Duration::from_secs(8));
    // Reaped when the wait ends.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(
            Instant::now() < deadline,
            "grandchild {pid} outlived the wait"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn exit_hang_and_late_close() {
    let home = Home::new(&permissive());
    let mut agent = Agent::spawn(&home, &[]);
    let session = agent.start_session(&home.work);
    agent.prompt(&session, "[mock:exit]");
    assert_eq!(agent.wait_exit(WAIT).and_then(|s| s.code()), Some(3));

    for marker in ["[mock:hang]", "[mock:late-close]"] {
        let mut agent = Agent::spawn(&home, &[]);
        let session = agent.start_session(&home.work);
        let id = agent.prompt(&session, marker);
        if marker == "[mock:late-close]" {
            let (_, result) = agent.until_response(id);
            assert_eq!(result["result"]["stopReason"], "end_turn");
        }
        agent.close_stdin();
        assert!(
            agent.wait_exit(Duration::from_millis(1500)).is_none(),
            "{marker}: the agent must outlive stdin EOF"
        );
    }
}

#[test]
fn replay_after_answer_sends_one_update_late() {
    let home = Home::new(&permissive());
    let mut agent = Agent::spawn(&home, &[]);
    let session = agent.start_session(&home.work);
    agent.turn(&session, "[mock:replay-after-answer] first");
    agent.turn(&session, "second");
    drop(agent);

    let mut agent = Agent::spawn(&home, &[]);
    agent.initialize();
    let id = agent.request(
        "session/load",
        json!({"sessionId": session, "cwd": home.work, "mcpServers": []}),
    );
    let (before, answer) = agent.until_response(id);
    assert!(answer["result"]["configOptions"].is_array(), "{answer}");
    assert_eq!(before.len(), 3, "{before:?}");
    let late = match agent.next() {
        Out::Json(message) => message,
        Out::Raw(line) => panic!("not JSON: {line}"),
    };
    assert_eq!(
        late["params"]["update"]["sessionUpdate"],
        "agent_message_chunk"
    );
    assert_eq!(
        late["params"]["update"]["content"]["text"],
        "Devin mock: done. turns seen: 1"
    );
}

#[test]
fn client_requests_and_extra_updates() {
    let home = Home::new(&permissive());
    let mut agent = Agent::spawn(&home, &[]);
    let session = agent.start_session(&home.work);
    let id = agent.prompt(
        &session,
        "[mock:extra-updates] [mock:client-request fs/read_text_file] \
         [mock:client-request terminal/create]",
    );
    let mut seen = Vec::new();
    let mut reply = String::new();
    let mut answered = 0;
    let (before, result) = loop {
        let message = match agent.next() {
            Out::Json(message) => message,
            Out::Raw(line) => panic!("not JSON: {line}"),
        };
        let method = message["method"].as_str().unwrap_or_default().to_owned();
        if method.starts_with("fs/") || method.starts_with("terminal/") {
            answered += 1;
            agent.send(&json!({"jsonrpc": "2.0", "id": message["id"],
                               "error": {"code": -32601, "message": "Method not found"}}));
            seen.push(method);
            continue;
        }
        if message.get("method").is_none() && message["id"] == json!(id) {
            break (seen.clone(), message);
        }
        if message["method"] == "session/update" {
            if let Some(text) = message["params"]["update"]["content"]["text"].as_str() {
                if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
                    reply.push_str(text);
                }
            }
            seen.push(
                message["params"]["update"]["sessionUpdate"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
    };
    assert_eq!(answered, 2);
    assert_eq!(result["result"]["stopReason"], "end_turn", "{result}");
    for kind in [
        "plan",
        "usage_update",
        "current_mode_update",
        "config_option_update",
        "mystery_update",
        "fs/read_text_file",
        "terminal/create",
    ] {
        assert!(before.iter().any(|k| k == kind), "{kind} in {before:?}");
    }
    assert!(
        reply.contains("client answered fs/read_text_file: error -32601\n"),
        "{reply}"
    );
    assert!(
        reply.contains("client answered terminal/create: error -32601\n"),
        "{reply}"
    );
}

#[test]
fn scenario_variable_applies_to_prompts_without_markers() {
    let home = Home::new(&permissive());
    let mut agent = Agent::spawn(&home, &[("MOCK_DEVIN_SCENARIO", "fail quota")]);
    let session = agent.start_session(&home.work);
    let (_, result) = agent.turn(&session, "No marker here.");
    assert_eq!(
        result["error"]["data"]["cognition.ai/errorKind"],
        "resource_exhausted"
    );
    // A marker in the prompt wins.
    let (_, result) = agent.turn(&session, "[mock:refusal]");
    assert_eq!(result["result"]["stopReason"], "refusal");

    let mut env = home.env();
    env.push(("MOCK_DEVIN_SCENARIO".into(), "no-such-marker".into()));
    let output = command(&env)
        .arg("acp")
        .current_dir(&home.work)
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(64));
}

#[test]
fn prompts_of_a_client_not_named_windsurf_are_refused() {
    let home = Home::new(&permissive());
    for (client, served) in [
        (json!({"name": "acpx", "version": "0.1.0"}), false),
        (json!({"name": "windsurf", "version": "1.110.1"}), true),
        (Value::Null, true),
    ] {
        let mut agent = Agent::spawn(&home, &[]);
        let mut params = json!({"protocolVersion": 1, "clientCapabilities": {}});
        if !client.is_null() {
            params["clientInfo"] = client.clone();
        }
        agent.call("initialize", params);
        let session = agent.new_session(&home.work)["result"]["sessionId"]
            .as_str()
            .expect("session")
            .to_owned();
        let (_, result) = agent.turn(&session, "Hello.");
        if served {
            assert_eq!(result["result"]["stopReason"], "end_turn", "{client}");
        } else {
            assert_eq!(
                result["error"],
                json!({"code": -32603,
                       "message": "Your Windsurf version is out of date. Please update to the latest version.",
                       "data": {"cognition.ai/errorKind": "internal", "cognition.ai/retryable": false}})
            );
        }
    }
    assert!(home
        .log_events()
        .iter()
        .any(|e| e["event"] == "identity_refused" && e["clientName"] == "acpx"));
}

#[test]
fn sessions_are_listed_deleted_and_never_closed() {
    let home = Home::new(&permissive());
    let mut agent = Agent::spawn(&home, &[]);
    let init = agent.initialize();
    let capabilities = &init["result"]["agentCapabilities"];
    assert_eq!(capabilities["loadSession"], true);
    assert_eq!(
        capabilities["sessionCapabilities"],
        json!({"list": {}, "delete": {}, "additionalDirectories": {}})
    );
    let first = agent.new_session(&home.work)["result"]["sessionId"]
        .as_str()
        .expect("id")
        .to_owned();
    let listed = agent.call("session/list", json!({}));
    let sessions = listed["result"]["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 1, "{listed}");
    assert_eq!(sessions[0]["sessionId"], json!(first));
    assert_eq!(sessions[0]["cwd"], json!(home.work.display().to_string()));

    // Cancelling an idle session still reports that it stopped.
    agent.send(&json!({"jsonrpc": "2.0", "method": "session/cancel",
                       "params": {"sessionId": first}}));
    let stopped = agent.next_json();
    assert_eq!(
        stopped["method"], "_cognition.ai/agent_stopped",
        "{stopped}"
    );
    assert_eq!(stopped["params"]["cause"], "cancelled");
    assert_eq!(stopped["params"]["stats"]["modelLabel"], "SWE-2");

    let close = agent.call("session/close", json!({"sessionId": first}));
    assert_eq!(close["error"]["code"], -32601, "{close}");
    let deleted = agent.call("session/delete", json!({"sessionId": first}));
    assert_eq!(deleted["result"], json!({}), "{deleted}");
    assert!(!home.sessions().join(format!("{first}.json")).exists());
    let again = agent.call("session/delete", json!({"sessionId": first}));
    assert_eq!(again["error"]["code"], -32016, "{again}");
    let (_, gone) = agent.turn(&first, "Hello.");
    assert_eq!(gone["error"]["code"], -32016, "{gone}");
    let listed = agent.call("session/list", json!({}));
    assert_eq!(listed["result"], json!({"sessions": []}));
}

#[test]
fn model_flags_before_or_after_acp_and_the_thought_level_switch() {
    let home = Home::new(&permissive());
    for flags in [
        &["--model", "swe-2-high", "acp"][..],
        &["--model=swe-2-high", "acp"],
        &["acp", "--model", "swe-2-high"],
        &["acp", "--model=swe-2-high"],
    ] {
        let mut command = command(&home.env());
        command
            .args(flags)
            .current_dir(&home.work)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command.spawn().expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        for message in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                   "params": {"cwd": home.work, "mcpServers": []}}),
        ] {
            writeln!(stdin, "{message}").expect("write");
        }
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut session = String::new();
        for line in lines.by_ref() {
            let message: Value = serde_json::from_str(&line.expect("line")).expect("json");
            if message["id"] == 2 {
                let options = &message["result"]["configOptions"];
                // The full agent keeps its model option; the flag picks its current value.
                let model = option(options, "model").expect("model option");
                assert_eq!(model["currentValue"], "swe-2-high", "{flags:?}");
                session = message["result"]["sessionId"]
                    .as_str()
                    .expect("id")
                    .to_owned();
                break;
            }
        }
        let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}});
        writeln!(stdin, "{prompt}").expect("write");
        let mut label = Value::Null;
        for line in lines.by_ref() {
            let message: Value = serde_json::from_str(&line.expect("line")).expect("json");
            if message["method"] == "_cognition.ai/agent_stopped" {
                label = message["params"]["stats"]["modelLabel"].clone();
            }
            if message["id"] == 3 {
                break;
            }
        }
        drop(stdin);
        let _ = child.wait();
        assert_eq!(label, "SWE-2 High", "{flags:?}");
    }
    // A model the account does not offer: the process starts, its sessions fail to open.
    let mut agent = {
        let mut command = command(&home.env());
        command
            .args(["acp", "--model", "adaptive"])
            .current_dir(&home.work)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        command.spawn().expect("spawn")
    };
    let mut stdin = agent.stdin.take().expect("stdin");
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
               "params": {"cwd": home.work, "mcpServers": []}}),
    ] {
        writeln!(stdin, "{message}").expect("write");
    }
    let lines = BufReader::new(agent.stdout.take().expect("stdout")).lines();
    let mut refused = Value::Null;
    for line in lines {
        let message: Value = serde_json::from_str(&line.expect("line")).expect("json");
        if message["id"] == 2 {
            refused = message;
            break;
        }
    }
    drop(stdin);
    let _ = agent.wait();
    assert_eq!(refused["error"]["code"], -32002, "{refused}");
    assert_eq!(refused["error"]["message"], "Resource not found");
    assert!(
        refused["error"]["data"]["uri"].as_str().is_some_and(
            |uri| uri.starts_with("Model not found: adaptive. Available models: swe-2, ")
        )
    );

    // MOCK_DEVIN_THOUGHT_LEVEL=1 adds the thought_level select, absent under GLM-5.2.
    let mut agent = Agent::spawn(&home, &[("MOCK_DEVIN_THOUGHT_LEVEL", "1")]);
    let session = agent.start_session(&home.work);
    let set = agent.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thought_level", "value": "high"}),
    );
    let thought = option(&set["result"]["configOptions"], "thought_level").expect("thought");
    assert_eq!(thought["currentValue"], "high");
    assert_eq!(values(thought), ["low", "medium", "high"]);
    let set = agent.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "glm-5-2"}),
    );
    assert!(option(&set["result"]["configOptions"], "thought_level").is_none());
    assert!(option(&set["result"]["configOptions"], "speed").is_none());
}

/// Runs print mode with this environment.
fn print(cwd: &Path, env: &[(String, String)], args: &[&str]) -> (Option<i32>, String, String) {
    let output = command(env)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("run");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn print_mode_flags_errors_and_sign_in() {
    let home = Home::new(&permissive());
    trust(&home, &[&home.work]);
    let env = home.env();
    assert_eq!(
        print(&home.work, &env, &["-p", "Fix it."]),
        (Some(0), "Devin mock: done.\n".to_owned(), String::new())
    );
    for (given, shown) in [
        ("normal", "normal"),
        ("auto", "normal"),
        ("accept-edits", "accept-edits"),
        ("dangerous", "dangerous"),
        ("yolo", "dangerous"),
        ("bypass", "dangerous"),
    ] {
        let (status, stdout, _) = print(
            &home.work,
            &env,
            &[
                "-p",
                "--model",
                "kimi-k3",
                "--permission-mode",
                given,
                "--",
                "[mock:whoami]",
            ],
        );
        assert_eq!(status, Some(0), "{given}");
        assert!(
            stdout.starts_with(&format!("model: kimi-k3\npermission: {shown}\n")),
            "{stdout}"
        );
    }
    let (status, stdout, _) = print(
        &home.work,
        &env,
        &[
            "-p",
            "--sandbox",
            "--permission-mode",
            "autonomous",
            "-r",
            "mock-1",
            "--respect-workspace-trust",
            "false",
            "[mock:whoami]",
        ],
    );
    assert_eq!(status, Some(0));
    assert_eq!(
        stdout,
        "model: swe-2\npermission: autonomous\nsandbox: true\nresume: mock-1\n"
    );
    // autonomous without --sandbox: a run-time refusal, exit 1, naming --sandbox.
    let (status, _, stderr) = print(
        &home.work,
        &env,
        &["-p", "--permission-mode", "autonomous", "x"],
    );
    assert_eq!(status, Some(1));
    assert!(stderr.contains("requires --sandbox"), "{stderr}");
    let (status, stdout, stderr) =
        print(&home.work, &env, &["-p", "--permission-mode", "ask", "x"]);
    assert_eq!(status, Some(2));
    assert!(stdout.is_empty());
    assert_eq!(
        stderr,
        "error: invalid value 'ask' for '--permission-mode <PERMISSION_MODE>': Invalid \
         permission mode: ask. Valid options: normal (auto), accept-edits, dangerous (yolo, \
         bypass), autonomous (requires --sandbox)\n"
    );
    let (status, _, stderr) = print(&home.work, &env, &["-p", "--verbose", "x"]);
    assert_eq!(status, Some(2));
    assert!(
        stderr.starts_with("error: unexpected argument '--verbose' found"),
        "{stderr}"
    );

    let (_, stdout, _) = print(&home.work, &env, &["-p", "say [mock:echo] back"]);
    assert_eq!(stdout, "say [mock:echo] back\n");
    let (_, stdout, _) = print(&home.work, &env, &["-p", "[mock:env]"]);
    assert!(
        stdout.lines().any(|l| l.starts_with("XDG_DATA_HOME=")),
        "{stdout}"
    );

    // Agent errors: the message with a trace id, then the JSON tail.
    for (marker, message, tail) in [
        (
            "quota",
            "Quota exhausted.",
            json!({"cognition.ai/errorKind": "resource_exhausted", "cognition.ai/retryable": true}),
        ),
        (
            "rate_limited",
            "Reached overall message rate limit",
            json!({"cognition.ai/errorKind": "unavailable", "cognition.ai/retryable": true,
                   "cognition.ai/retryAfterSeconds": 5}),
        ),
        (
            "network",
            "Connection error, send a message to continue retrying",
            json!({"cognition.ai/errorKind": "unavailable", "cognition.ai/retryable": true}),
        ),
        (
            "server",
            "Internal error",
            json!({"cognition.ai/errorKind": "internal", "cognition.ai/retryable": false}),
        ),
    ] {
        let (status, stdout, stderr) =
            print(&home.work, &env, &["-p", &format!("[mock:fail {marker}]")]);
        assert_eq!(status, Some(1), "{marker}");
        assert!(stdout.is_empty());
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(
            lines.len(),
            tail.as_object().expect("tail").len() + 2,
            "{stderr}"
        );
        assert!(
            lines[0].starts_with(&format!("Error: Agent error: {message}")),
            "{stderr}"
        );
        let trace = lines[0]
            .split("(trace ID: ")
            .nth(1)
            .and_then(|rest| rest.strip_suffix("): {"))
            .expect("trace id");
        assert!(
            trace.len() == 16 && trace.chars().all(|c| c.is_ascii_hexdigit()),
            "{trace}"
        );
        let shown: Value =
            serde_json::from_str(&format!("{{\n{}", lines[1..].join("\n"))).expect("json tail");
        assert_eq!(shown, tail, "{marker}");
    }
    // An unknown model: "Resource not found", then the data with the text in `uri`.
    let (status, _, stderr) = print(&home.work, &env, &["-p", "--model", "adaptive", "x"]);
    assert_eq!(status, Some(1));
    assert!(
        stderr.starts_with("Error: Agent error: Resource not found (trace ID: "),
        "{stderr}"
    );
    assert!(
        stderr.contains("\"uri\": \"Model not found: adaptive. Available models: swe-2, "),
        "{stderr}"
    );

    // The log has the flags, never the prompt.
    let events = home.log_events();
    let start = events
        .iter()
        .find(|e| e["event"] == "print_start" && e["permissionMode"] == "autonomous")
        .expect("print_start");
    assert_eq!(start["sandbox"], true);
    assert_eq!(start["resume"], true);
    assert!(events
        .iter()
        .any(|e| e["event"] == "print_exit" && e["status"] == 1));
    assert!(!std::fs::read_to_string(&home.log)
        .expect("log")
        .contains("say [mock:echo] back"));

    // Signed out: no credentials file. A key in the environment counts for print mode.
    std::fs::remove_file(home.root().join("data/devin/credentials.toml")).expect("remove");
    let (status, stdout, stderr) = print(&home.work, &env, &["-p", "x"]);
    assert_eq!(
        (status, stdout.as_str(), stderr.as_str()),
        (Some(1), "", "Error: Not logged in\n")
    );
    let mut with_key = env.clone();
    with_key.push(("WINDSURF_API_KEY".into(), "k".into()));
    assert_eq!(print(&home.work, &with_key, &["-p", "x"]).0, Some(0));
    // The key in the environment is preferred over stored credentials: a stale one wins.
    std::fs::write(home.root().join("data/devin/credentials.toml"), "x").expect("creds");
    assert_eq!(print(&home.work, &env, &["-p", "x"]).0, Some(0));
    let mut stale = env.clone();
    stale.push(("WINDSURF_API_KEY".into(), "invalid-old".into()));
    assert_eq!(
        print(&home.work, &stale, &["-p", "x"]),
        (Some(1), String::new(), "Error: Not logged in\n".to_owned())
    );
}

/// Lists `dirs` as trusted workspaces in the home's `config.json`.
fn trust(home: &Home, dirs: &[&Path]) {
    let mut config = permissive();
    config["trustedWorkspaces"] = json!(dirs);
    std::fs::write(
        home.root().join("config/devin/config.json"),
        serde_json::to_vec(&config).expect("json"),
    )
    .expect("config");
}

#[test]
fn print_mode_respects_workspace_trust() {
    let home = Home::new(&permissive());
    let env = home.env();
    let nested = home.work.join("sub");
    std::fs::create_dir_all(&nested).expect("mkdir");
    // Untrusted: refused unless the flag says false.
    let (status, stdout, stderr) = print(&nested, &env, &["-p", "x"]);
    assert_eq!(status, Some(1));
    assert!(stdout.is_empty());
    assert!(
        stderr.starts_with(&format!(
            "Error: Workspace {} is not trusted.",
            nested.display()
        )),
        "{stderr}"
    );
    let (status, _, _) = print(
        &nested,
        &env,
        &["-p", "--respect-workspace-trust", "true", "x"],
    );
    assert_eq!(status, Some(1));
    let (status, stdout, _) = print(
        &nested,
        &env,
        &["-p", "--respect-workspace-trust", "false", "x"],
    );
    assert_eq!((status, stdout.as_str()), (Some(0), "Devin mock: done.\n"));
    // A trusted directory trusts the directories below it.
    trust(&home, &[&home.work]);
    let (status, stdout, _) = print(&nested, &env, &["-p", "x"]);
    assert_eq!((status, stdout.as_str()), (Some(0), "Devin mock: done.\n"));
    // Trust is checked before sign-in.
    std::fs::remove_file(home.root().join("data/devin/credentials.toml")).expect("rm");
    let (status, _, stderr) = print(&home.root(), &env, &["-p", "x"]);
    assert_eq!(status, Some(1));
    assert!(stderr.contains("is not trusted"), "{stderr}");
}

/// The value of a `cumulativeMetric` row of a turn_stats.
fn cumulative(stats: &Value, uid: &str) -> u64 {
    stats["params"]["responseDimensions"]
        .as_array()
        .expect("dimensions")
        .iter()
        .find(|row| row["uid"] == uid && row["kind"]["type"] == "cumulativeMetric")
        .and_then(|row| row["kind"]["value"].as_u64())
        .unwrap_or_else(|| panic!("no {uid} row in {stats}"))
}

#[test]
fn stop_causes_and_compaction() {
    let home = Home::new(&permissive());
    let mut agent = Agent::spawn(&home, &[]);
    let session = agent.start_session(&home.work);
    let (before, result) = agent.turn(&session, "[mock:stop quota_exhausted]");
    // Not an error: agent_stopped carries the cause, then an ordinary end_turn.
    assert_eq!(result["result"]["stopReason"], "end_turn", "{result}");
    let stopped = notification(&before, "_cognition.ai/agent_stopped").expect("stopped");
    assert_eq!(stopped["params"]["cause"], "quota_exhausted");
    assert!(stopped["params"]["errorMessage"]
        .as_str()
        .is_some_and(|m| m.starts_with("Your daily usage quota has been exhausted. ")));
    assert_eq!(count_updates(&before, "agent_message_chunk"), 0);
    for cause in [
        "auth_required",
        "content_filter",
        "max_turn_requests",
        "output_truncated",
    ] {
        let (before, result) = agent.turn(&session, &format!("[mock:stop {cause}]"));
        assert_eq!(result["result"]["stopReason"], "end_turn", "{cause}");
        let stopped = notification(&before, "_cognition.ai/agent_stopped").expect("stopped");
        assert_eq!(stopped["params"]["cause"], cause);
    }

    let (before, result) = agent.turn(&session, "Tidy up. [mock:compaction]");
    assert_eq!(result["result"]["stopReason"], "end_turn");
    let chunks: Vec<&Value> = before
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|m| &m["params"]["update"])
        .collect();
    let display: Vec<&&Value> = chunks
        .iter()
        .filter(|c| c["_meta"]["cognition.ai/displayMessage"] == true)
        .collect();
    assert_eq!(display.len(), 1);
    assert_eq!(display[0]["content"]["text"], "Compacting context...");
    let answer: String = chunks
        .iter()
        .filter(|c| c.get("_meta").is_none())
        .filter_map(|c| c["content"]["text"].as_str())
        .collect();
    assert_eq!(answer, "Devin mock: done. turns seen: 5");
    assert!(notification(&before, "_cognition.ai/compaction").is_some());
}

#[test]
fn tool_calls_are_model_requests_and_usage_is_the_last_one() {
    let home = Home::new(&permissive());
    let mut agent = Agent::spawn(&home, &[]);
    let session = agent.start_session(&home.work);
    let (before, result) = agent.turn(
        &session,
        "[mock:tool read read] [mock:tool exec execute] [mock:cache-tokens]",
    );
    let usage = &result["result"]["usage"];
    let input = usage["inputTokens"].as_u64().expect("input");
    let output = usage["outputTokens"].as_u64().expect("output");
    let cached = usage["cachedReadTokens"].as_u64().expect("cached");
    // Cached reads are inside the input, not added to the total.
    assert_eq!(usage["totalTokens"].as_u64(), Some(input + output));
    assert!(cached > 0 && cached < input, "{usage}");
    // Three model requests: two made the tool calls, the last wrote the answer. The result
    // covers the last one only; turn_stats sums all three.
    let stats = notification(&before, "_cognition.ai/turn_stats").expect("turn_stats");
    let prompt_tokens = input - 60;
    assert_eq!(
        cumulative(stats, "inputTokens"),
        3 * prompt_tokens + 30 + 60
    );
    assert_eq!(cumulative(stats, "outputTokens"), 20 + 20 + output);
    assert!(cumulative(stats, "cachedReadTokens") > cached);
    let stopped = notification(&before, "_cognition.ai/agent_stopped").expect("stopped");
    assert_eq!(
        stopped["params"]["stats"]["inputTokens"].as_u64(),
        Some(cumulative(stats, "inputTokens"))
    );
    assert_eq!(stopped["params"]["stats"]["toolCalls"], 2);
    assert_eq!(stopped["params"]["stats"]["commandsRun"], 1);

    // One request without tool calls: the sums equal the result.
    let (before, result) = agent.turn(&session, "Just answer.");
    let stats = notification(&before, "_cognition.ai/turn_stats").expect("turn_stats");
    assert_eq!(
        Some(cumulative(stats, "inputTokens")),
        result["result"]["usage"]["inputTokens"].as_u64()
    );
}

/// Answers the next permission request of a running turn with `option_id`; returns it.
fn answer_permission(agent: &mut Agent, option_id: &str) -> Value {
    let request = loop {
        match agent.next() {
            Out::Json(message) if message["method"] == "session/request_permission" => {
                break message
            }
            Out::Json(_) => {}
            Out::Raw(line) => panic!("not JSON: {line}"),
        }
    };
    agent.send(&json!({"jsonrpc": "2.0", "id": request["id"],
                       "result": {"outcome": {"outcome": "selected", "optionId": option_id}}}));
    request
}

#[test]
fn a_rejected_permission_is_asked_again_up_to_the_bound() {
    let home = Home::new(&permissive());
    let mut agent = Agent::spawn(&home, &[]);
    let session = agent.start_session(&home.work);
    let id = agent.prompt(&session, "[mock:permission 3]");
    let mut asked = Vec::new();
    for _ in 0..3 {
        let request = answer_permission(&mut agent, "reject_once");
        asked.push(request["params"]["toolCall"]["toolCallId"].clone());
    }
    let (before, result) = agent.until_response(id);
    assert_eq!(
        asked,
        [json!("call_1"), json!("call_1_2"), json!("call_1_3")]
    );
    // No fourth request; each rejected call failed; the turn still ends end_turn.
    assert!(!before
        .iter()
        .any(|m| m["method"] == "session/request_permission"));
    assert_eq!(result["result"]["stopReason"], "end_turn");
    assert!(text_of(&before, "agent_message_chunk")
        .starts_with("permission outcome: selected reject_once (asked 3 times)"));

    // Allowed on the second ask: no third.
    let id = agent.prompt(&session, "[mock:permission 9]");
    answer_permission(&mut agent, "reject_once");
    answer_permission(&mut agent, "allow_once");
    let (before, result) = agent.until_response(id);
    assert!(!before
        .iter()
        .any(|m| m["method"] == "session/request_permission"));
    assert_eq!(result["result"]["stopReason"], "end_turn");
    assert!(text_of(&before, "agent_message_chunk")
        .starts_with("permission outcome: selected allow_once (asked 2 times)"));
    let statuses: Vec<&Value> = before
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "tool_call_update")
        .map(|m| &m["params"]["update"]["status"])
        .collect();
    assert_eq!(statuses, [&json!("completed")]);
}

#[test]
fn signed_out_by_default_the_prompt_fails_and_an_environment_key_signs_in() {
    let home = Home::new(&permissive());
    std::fs::remove_file(home.root().join("data/devin/credentials.toml")).expect("remove");
    let mut agent = Agent::spawn(&home, &[]);
    let init = agent.initialize();
    assert_eq!(
        init["result"]["agentInfo"],
        json!({"name": "affogato", "title": "Devin Agent", "version": "0.0.0-dev"})
    );
    assert_eq!(
        init["result"]["agentCapabilities"]["mcpCapabilities"],
        json!({"http": true, "sse": true})
    );
    assert_eq!(
        init["result"]["_meta"]["mcpConfigPath"],
        json!(home
            .root()
            .join("config/devin/mcp.json")
            .display()
            .to_string())
    );
    let new = agent.new_session(&home.work);
    let session = new["result"]["sessionId"]
        .as_str()
        .expect("opens")
        .to_owned();
    let (before, result) = agent.turn(&session, "hi");
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(result["error"]["code"], -32603, "{result}");
    assert!(result["error"]["message"]
        .as_str()
        .is_some_and(|m| m.starts_with("Authentication failed: ")));
    drop(agent);

    let mut agent = Agent::spawn(&home, &[("WINDSURF_API_KEY", "env-key")]);
    let session = agent.start_session(&home.work);
    let (_, result) = agent.turn(&session, "hi");
    assert_eq!(result["result"]["stopReason"], "end_turn", "{result}");
    drop(agent);
    assert!(!std::fs::read_to_string(&home.log)
        .expect("log")
        .contains("env-key"));
}
