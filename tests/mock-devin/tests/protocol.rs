//! Drives the built `mock-devin` binary over stdio, as the host does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod harness;

use harness::{kill_group, Agent, Out, BIN, WAIT};

const TEXT: &str = "Mock answer: the bridge works.";

/// A temporary directory with a sandbox home inside it (`<tmp>/.sandbox/home`).
struct Sandbox {
    _dir: tempfile::TempDir,
    home: PathBuf,
}

fn sandbox() -> Sandbox {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join(".sandbox").join("home");
    std::fs::create_dir_all(&home).expect("home");
    let home = home.canonicalize().expect("canonical home");
    Sandbox { _dir: dir, home }
}

impl Agent {
    /// The summarizer agent type in `cwd`, with `env` added to the test's environment (less
    /// the mock's scenario and log variables).
    fn spawn(cwd: &Path, env: &[(&str, &str)]) -> Self {
        spawn_args(cwd, &["acp", "--agent-type", "summarizer"], env)
    }
}

fn framed(trace: &str) -> String {
    format!(
        "[Devin Summarizer Bridge]\nProduce the assistant's next output.\n\n[Execution Trace]\n{trace}"
    )
}

fn tools_section(names: &[&str]) -> String {
    let mut out = String::from("[Available Tools]\nThe client declares the tools below.");
    for name in names {
        out.push_str(&format!(
            "\n\n[Tool: {name}]\nDescription:\nA tool.\nInput schema:\n{{\n  \"type\": \"object\"\n}}"
        ));
    }
    out
}

fn user_prompt(user: &str) -> String {
    framed(&format!(
        "{}\n\n---\n\n[User]\n{user}",
        tools_section(&["Bash", "Read", "Edit"])
    ))
}

fn repair(prompt: &str) -> String {
    format!(
        "{prompt}\n\n---\n\n[Single Repair Attempt]\nYour previous output was rejected and was not \
         delivered to the client.\nReason (action_narrative_mismatch): narration"
    )
}

/// The text of the `agent_message_chunk` updates among `messages`.
fn chunks(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| {
            m["method"] == "session/update"
                && m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        })
        .map(|m| {
            m["params"]["update"]["content"]["text"]
                .as_str()
                .expect("chunk text")
                .to_owned()
        })
        .collect()
}

/// Runs one prompt in a fresh agent and returns the messages before the result, and the result.
fn turn(text: &str, env: &[(&str, &str)]) -> (Vec<Value>, Value) {
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, env);
    let session = agent.start_session(&sandbox.home);
    let id = agent.prompt(&session, text);
    agent.until_response(id)
}

#[test]
fn refuses_any_other_argv() {
    for args in [
        &[][..],
        &["acp", "--agent-type", "default"],
        &["acp", "--agent-type", "summarizer", "--extra"],
        &["acp", "--mode", "summarizer"],
    ] {
        let output = Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        assert_eq!(output.status.code(), Some(64), "{args:?}");
        assert!(output.stdout.is_empty());
        assert!(String::from_utf8_lossy(&output.stderr).contains("unsupported arguments"));
    }
    let version = Command::new(BIN).arg("--version").output().expect("run");
    assert!(version.status.success());
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        "devin 3000.11.4 (mock-devin offline)\n"
    );
    let bad_env = Command::new(BIN)
        .args(["acp", "--agent-type", "summarizer"])
        .env("MOCK_DEVIN_SCENARIO", "no-such-scenario")
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(bad_env.status.code(), Some(64));
}

#[test]
fn happy_path_streams_chunks_then_the_result() {
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, &[]);

    let early = agent.call(
        "session/new",
        json!({"cwd": "/home/bridge", "mcpServers": []}),
    );
    assert_eq!(early["error"]["code"], -32600, "{early}");
    let old = agent.call("initialize", json!({"protocolVersion": 2}));
    assert_eq!(old["error"]["code"], -32602, "{old}");

    let init = agent.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {},
               "clientInfo": {"name": "windsurf", "version": "1.110.1"}}),
    );
    let config_path = init["result"]["_meta"]["mcpConfigPath"]
        .as_str()
        .expect("mcpConfigPath")
        .to_owned();
    assert!(config_path.ends_with("/devin/mcp.json"), "{config_path}");
    assert_eq!(
        init["result"],
        json!({
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": true,
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false},
                "mcpCapabilities": {"http": true, "sse": true},
                "sessionCapabilities": {"list": {}, "delete": {}, "additionalDirectories": {}}},
            "agentInfo": {"name": "affogato", "title": "Devin Agent", "version": "0.0.0-dev"},
            "authMethods": [{"id": "devin-browser", "name": "Devin",
                             "description": "Sign in with your browser"}],
            "_meta": {"mcpConfigPath": config_path},
        })
    );
    let new = agent.new_session(&sandbox.home);
    assert_eq!(new["result"]["sessionId"], "mock-session-1", "{new}");
    assert_eq!(new["result"]["modes"]["currentModeId"], "accept-edits");
    let mode = agent.call(
        "session/set_mode",
        json!({"sessionId": "mock-session-1", "modeId": "bypass"}),
    );
    assert_eq!(mode["error"]["code"], -32602, "{mode}");

    let prompt = user_prompt("Say something. [mock:text]");
    let id = agent.prompt("mock-session-1", &prompt);
    let (before, result) = agent.until_response(id);
    // A process-wide output notification opens the turn: {channel, message, level}.
    assert_eq!(before[0]["method"], "_cognition.ai/output");
    let output = before[0]["params"].as_object().expect("output params");
    let mut keys: Vec<&String> = output.keys().collect();
    keys.sort();
    assert_eq!(keys, ["channel", "level", "message", "sessionId"]);
    assert_eq!(output["sessionId"], "");
    assert_eq!(before[1]["method"], "session/update");
    assert_eq!(
        before[1]["params"]["update"]["sessionUpdate"],
        "available_commands_update"
    );
    // turn_stats closes the turn, right before agent_stopped.
    let stats = &before[before.len() - 2];
    assert_eq!(stats["method"], "_cognition.ai/turn_stats");
    // Sorted: the order of a JSON object's keys depends on serde_json's features in the build.
    let mut keys: Vec<&String> = stats["params"].as_object().expect("stats").keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "responseDimensions",
            "sessionId",
            "turnClientMessageId",
            "turnRequestId"
        ]
    );
    // A list: the model's display label by uid, then the turn's sums.
    let dimensions = stats["params"]["responseDimensions"]
        .as_array()
        .expect("a list");
    assert_eq!(
        dimensions[0],
        json!({"uid": "model", "groupTitle": "Response Statistics", "label": "Model",
               "kind": {"type": "metric", "value": "SWE-1.7"}})
    );
    let text = chunks(&before);
    assert!(text.len() >= 2, "{text:?}");
    assert_eq!(text.concat(), TEXT);
    for message in &before[1..] {
        assert_eq!(message["params"]["sessionId"], "mock-session-1");
    }
    // agent_stopped comes last, right before the result.
    let stopped = before.last().expect("agent_stopped");
    assert_eq!(stopped["method"], "_cognition.ai/agent_stopped");
    assert_eq!(stopped["params"]["cause"], "complete");
    let stopped_stats = &stopped["params"]["stats"];
    // Sorted: the order of a JSON object's keys depends on serde_json's features in the build.
    let mut keys: Vec<&String> = stopped_stats.as_object().expect("stats").keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "commandsRun",
            "filesChanged",
            "inputTokens",
            "modelLabel",
            "outputTokens",
            "requestId",
            "responseDimensions",
            "toolCalls",
            "totalTimeMs",
            "ttftMs"
        ]
    );
    assert_eq!(stopped_stats["modelLabel"], "SWE-1.7");
    assert_eq!(stopped_stats["responseDimensions"], json!([dimensions[0]]));
    assert!(stopped["params"].get("errorMessage").is_none());
    assert_eq!(stopped_stats["requestId"], stats["params"]["turnRequestId"]);
    assert_eq!(
        result["result"]["_meta"]["cognition.ai/userMessageId"],
        stats["params"]["turnClientMessageId"]
    );

    let result = &result["result"];
    assert_eq!(result["stopReason"], "end_turn");
    let usage = &result["usage"];
    let input = usage["inputTokens"].as_u64().expect("input");
    let output = usage["outputTokens"].as_u64().expect("output");
    assert_eq!(input, (prompt.chars().count() as u64).div_ceil(4));
    assert_eq!(output, (TEXT.len() as u64).div_ceil(4));
    assert_eq!(usage["totalTokens"], input + output);
    assert_eq!(usage["cachedReadTokens"], 0);
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

    agent.close_stdin();
    let status = agent
        .wait_exit(Duration::from_secs(5))
        .expect("exits on EOF");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn protocol_errors() {
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, &[]);
    agent.send_line("this is not json");
    let parse = agent.next_json();
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    assert_eq!(parse["id"], Value::Null);

    let session = agent.start_session(&sandbox.home);
    agent.send(&json!({"jsonrpc": "2.0", "method": "_cognition.ai/whatever", "params": {}}));
    agent.send(
        &json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    );
    let unknown = agent.call("_cognition.ai/extension", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let unknown = agent.call("session/fork", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");

    let unframed = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "[User]\nhi [mock:text]"}]}),
    );
    let (before, response) = agent.until_response(unframed);
    assert!(before.is_empty());
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert!(response["error"]["message"]
        .as_str()
        .expect("message")
        .contains("missing bridge framing"));

    let wrong = agent.call(
        "session/prompt",
        json!({"sessionId": "nope", "prompt": [{"type": "text", "text": framed("[User]\nhi")}]}),
    );
    assert_eq!(wrong["error"]["code"], -32016, "{wrong}");
    assert_eq!(
        wrong["error"]["data"]["cognition.ai/errorKind"],
        "session_not_found"
    );

    let cwd = sandbox.home.to_str().expect("utf8");
    let no_mcp = agent.call("session/new", json!({"cwd": cwd}));
    assert!(no_mcp["error"]["data"].is_null(), "{no_mcp}");
    assert_eq!(no_mcp["error"]["code"], -32602, "{no_mcp}");
    let some_mcp = agent.call(
        "session/new",
        json!({"cwd": cwd, "mcpServers": [{"name": "x", "command": "y", "args": [], "env": []}]}),
    );
    assert_eq!(some_mcp["error"]["code"], -32602, "{some_mcp}");
}

#[test]
fn refuses_a_cwd_that_is_not_its_sandbox_home() {
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, &[]);
    agent.call("initialize", json!({"protocolVersion": 1}));
    let elsewhere = sandbox.home.parent().expect("parent").join("other");
    std::fs::create_dir_all(&elsewhere).expect("other");
    let refused = agent.call(
        "session/new",
        json!({"cwd": elsewhere.to_str().expect("utf8"), "mcpServers": []}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"]
        .as_str()
        .expect("message")
        .contains("not the agent's working directory"));
    let relative = agent.call("session/new", json!({"cwd": "home", "mcpServers": []}));
    assert_eq!(relative["error"]["code"], -32602, "{relative}");

    // A process that runs outside any sandbox home refuses its own directory.
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = dir.path().canonicalize().expect("canonical");
    let mut agent = Agent::spawn(&plain, &[]);
    agent.call("initialize", json!({"protocolVersion": 1}));
    let refused = agent.call(
        "session/new",
        json!({"cwd": plain.to_str().expect("utf8"), "mcpServers": []}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"]
        .as_str()
        .expect("message")
        .contains("not a sandbox home"));
}

#[test]
fn permission_request_round_trip() {
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, &[]);
    let session = agent.start_session(&sandbox.home);

    for (answer, expected) in [
        (
            json!({"result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}),
            "permission outcome: selected",
        ),
        (
            json!({"result": {"outcome": {"outcome": "cancelled"}}}),
            "permission outcome: cancelled",
        ),
        (
            json!({"error": {"code": -32601, "message": "Method not found"}}),
            "permission outcome: error",
        ),
    ] {
        // One process serves several turns in a row without trouble.
        let id = agent.prompt(&session, &user_prompt("Run it. [mock:permission]"));
        let mut call = Value::Null;
        let request = loop {
            let message = agent.next_json();
            if message["params"]["update"]["sessionUpdate"] == "tool_call" {
                call = message["params"]["update"].clone();
            }
            if message["method"] == "session/request_permission" {
                break message;
            }
        };
        // The tool call comes first; the request names it by id only.
        assert_eq!(call["toolCallId"], "c1", "{call}");
        assert_eq!(call["_meta"]["cognition.ai/inferenceToolName"], "exec");
        let params = &request["params"];
        assert_eq!(params["sessionId"], session.as_str());
        assert_eq!(params["toolCall"], json!({"toolCallId": "c1"}));
        let options: Vec<(&str, &str)> = params["options"]
            .as_array()
            .expect("options")
            .iter()
            .map(|o| {
                (
                    o["optionId"].as_str().expect("id"),
                    o["kind"].as_str().expect("kind"),
                )
            })
            .collect();
        assert_eq!(
            options,
            [
                ("allow_once", "allow_once"),
                ("allow_session", "allow_always"),
                ("switch_bypass", "allow_always"),
                ("reject_once", "reject_once")
            ]
        );
        // An answer to an id the agent never used is ignored.
        agent.send(&json!({"jsonrpc": "2.0", "id": 424242, "result": {}}));
        let mut reply = json!({"jsonrpc": "2.0", "id": request["id"]});
        for (key, value) in answer.as_object().expect("object") {
            reply[key] = value.clone();
        }
        agent.send(&reply);
        let (before, result) = agent.until_response(id);
        assert_eq!(chunks(&before).concat(), expected);
        assert_eq!(result["result"]["stopReason"], "end_turn");
    }
}

#[test]
fn default_script_runs_the_coding_task() {
    let sandbox = sandbox();
    let log = sandbox.home.join("mock.jsonl");
    let log_env = log.to_str().expect("utf8").to_owned();
    let env = [("MOCK_DEVIN_LOG", log_env.as_str())];

    let first = user_prompt("npm test fails. Fix the bug in math.js and run the tests.");
    let (before, result) = turn(&first, &env);
    assert_eq!(result["result"]["stopReason"], "end_turn");
    assert_eq!(
        chunks(&before).concat(),
        r#"<tool>{"name":"Bash","arguments":{"command":"pwd","description":"Show the working directory"}}</tool>"#
    );

    let second = format!(
        "{first}\n\n---\n\n[Assistant]\n[Assistant Tool Use]\nid: toolu_1\nname: Bash\narguments:\n\
         {{\n  \"command\": \"pwd\"\n}}\n\n---\n\n[User]\n[Tool Result]\ntool_use_id: toolu_1\n\
         is_error: false\ncontent:\n/tmp/.sandbox/project"
    );
    let (before, _) = turn(&second, &env);
    assert_eq!(
        chunks(&before).concat(),
        "<tool>{\"name\":\"Read\",\"arguments\":{\"file_path\":\"/tmp/.sandbox/project/math.js\"}}</tool>\n\
         <tool>{\"name\":\"Read\",\"arguments\":{\"file_path\":\"/tmp/.sandbox/project/math.test.js\"}}</tool>",
        "independent reads come together"
    );
    // When the request disables parallel tool use, one read at a time.
    let serial = second.replacen(
        "[User]",
        "[Tool Choice]\nauto: answer with text.\nParallel tool use is disabled: request at most one tool per output, never two envelopes.\n\n---\n\n[User]",
        1,
    );
    let (before, _) = turn(&serial, &env);
    assert_eq!(
        chunks(&before).concat(),
        r#"<tool>{"name":"Read","arguments":{"file_path":"/tmp/.sandbox/project/math.js"}}</tool>"#
    );

    // Without the tools it needs, it says so.
    let (before, _) = turn(&framed("[User]\nhello"), &env);
    assert!(chunks(&before)
        .concat()
        .contains("does not declare Bash, Read, Edit"));

    // MOCK_DEVIN_SCENARIO replaces the script when there is no marker.
    let (before, _) = turn(&first, &[("MOCK_DEVIN_SCENARIO", "text")]);
    assert_eq!(chunks(&before).concat(), TEXT);

    let events: Vec<Value> = std::fs::read_to_string(&log)
        .expect("log")
        .lines()
        .map(|line| serde_json::from_str(line).expect("log line"))
        .collect();
    let envelopes: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "tool_envelope")
        .collect();
    assert_eq!(envelopes.len(), 4, "{events:?}");
    assert_eq!(envelopes[0]["name"], "Bash");
    assert_eq!(envelopes[0]["scenario"], "script");
    assert_eq!(
        envelopes[1]["arguments"]["file_path"],
        "/tmp/.sandbox/project/math.js"
    );
    assert!(events.iter().all(|e| e["at"].is_string()));
    assert_eq!(
        envelopes[2]["arguments"]["file_path"],
        "/tmp/.sandbox/project/math.test.js"
    );
    assert_eq!(events.iter().filter(|e| e["event"] == "prompt").count(), 4);
}

#[test]
fn envelope_scenarios_and_repairs() {
    let bash = r#"<tool>{"name":"Bash","arguments":{"command":"echo mock","description":"Print a marker"}}</tool>"#;
    let narration = "I'll run the tests next to check the fix.";
    let malformed = r#"<tool>{"name": "Bash", "arguments": {</tool>"#;
    let cases = [
        ("[mock:tool]", false, bash.to_owned()),
        ("[mock:narrate-then-tool]", false, narration.to_owned()),
        ("[mock:narrate-then-tool]", true, bash.to_owned()),
        ("[mock:narrate-always]", true, narration.to_owned()),
        ("[mock:malformed-then-tool]", false, malformed.to_owned()),
        ("[mock:malformed-then-tool]", true, bash.to_owned()),
        ("[mock:usage]", false, TEXT.to_owned()),
    ];
    for (marker, is_repair, expected) in cases {
        let prompt = user_prompt(&format!("Go. {marker}"));
        let prompt = if is_repair { repair(&prompt) } else { prompt };
        let (before, result) = turn(&prompt, &[]);
        assert_eq!(
            chunks(&before).concat(),
            expected,
            "{marker} repair={is_repair}"
        );
        assert_eq!(result["result"]["stopReason"], "end_turn");
    }
    let (before, _) = turn(&user_prompt("Go. [mock:two-tools]"), &[]);
    assert_eq!(chunks(&before).concat().matches("<tool>").count(), 2);

    // Without Bash, the first declared tool with no arguments.
    let (before, _) = turn(
        &framed(&format!(
            "{}\n\n---\n\n[User]\n[mock:tool]",
            tools_section(&["Read", "Write"])
        )),
        &[],
    );
    assert_eq!(
        chunks(&before).concat(),
        r#"<tool>{"name":"Read","arguments":{}}</tool>"#
    );
    // Only the last user section counts.
    let (before, _) = turn(
        &user_prompt("[mock:tool]\n\n---\n\n[Assistant]\nok\n\n---\n\n[User]\nnow [mock:text]"),
        &[],
    );
    assert_eq!(chunks(&before).concat(), TEXT);
}

#[test]
fn rpc_error_scenarios() {
    for (marker, code, message, kind) in [
        (
            "[mock:rpc-error]",
            -32603,
            "Internal error",
            Some(("internal", false)),
        ),
        (
            "[mock:rpc-error=unavailable]",
            -32010,
            "Reached overall message rate limit",
            Some(("unavailable", true)),
        ),
        (
            "[mock:rpc-error=rate_limited]",
            -32010,
            "Reached overall message rate limit",
            Some(("unavailable", true)),
        ),
        (
            "[mock:rpc-error=connection]",
            -32010,
            "Connection error, send a message to continue retrying",
            Some(("unavailable", true)),
        ),
        (
            "[mock:rpc-error=resource_exhausted]",
            -32011,
            "Quota exhausted.",
            Some(("resource_exhausted", true)),
        ),
        (
            "[mock:rpc-error=quota]",
            -32011,
            "Quota exhausted.",
            Some(("resource_exhausted", true)),
        ),
        (
            "[mock:rpc-error=session_not_found]",
            -32016,
            "Session not found",
            Some(("session_not_found", false)),
        ),
        (
            "[mock:rpc-error=auth]",
            -32000,
            "ACP host has not authenticated",
            None,
        ),
    ] {
        let (before, response) = turn(&user_prompt(marker), &[]);
        let error = &response["error"];
        assert_eq!(error["code"], code, "{marker}: {response}");
        assert!(
            error["message"]
                .as_str()
                .expect("message")
                .starts_with(message),
            "{marker}: {response}"
        );
        match kind {
            Some((kind, retryable)) => {
                let mut data = json!({"cognition.ai/errorKind": kind,
                                      "cognition.ai/retryable": retryable});
                // A rate limit says when to try again.
                if message.starts_with("Reached overall message rate limit") {
                    data["cognition.ai/retryAfterSeconds"] = json!(5);
                }
                assert_eq!(error["data"], data, "{marker}");
            }
            None => assert!(error.get("data").is_none(), "{marker}: {response}"),
        }
        let stopped = before
            .iter()
            .find(|m| m["method"] == "_cognition.ai/agent_stopped")
            .expect("agent_stopped");
        assert_eq!(stopped["params"]["cause"], "error");
    }
    // The invented PascalCase kinds are not markers any more: a normal answer.
    let (_, response) = turn(
        &user_prompt("[mock:rpc-error=RateLimited] [mock:text]"),
        &[],
    );
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    let (_, response) = turn(&user_prompt("[mock:rpc-error=bad-shape]"), &[]);
    let error = &response["error"];
    assert_eq!(
        error["data"],
        json!({"cognition.ai/errorKind": 42, "cognition.ai/retryable": "yes"})
    );
    assert_eq!(
        error["message"].as_str().expect("message").len(),
        200 * 1024
    );
    let (_, response) = turn(&user_prompt("[mock:rpc-error=not-object]"), &[]);
    assert_eq!(response["error"]["data"], "oops", "{response}");
    assert!(response["error"].get("message").is_none(), "{response}");
}

#[test]
fn stream_shape_scenarios() {
    let (before, _) = turn(&user_prompt("[mock:legacy-update]"), &[]);
    let legacy: Vec<&Value> = before
        .iter()
        .filter(|m| m["method"] == "$/update")
        .collect();
    assert!(legacy.len() >= 2);
    assert_eq!(legacy[0]["params"]["type"], "agent_message_chunk");
    let text: String = legacy
        .iter()
        .map(|m| m["params"]["content"]["text"].as_str().expect("text"))
        .collect();
    assert_eq!(text, TEXT);

    let (before, _) = turn(&user_prompt("[mock:wrong-session]"), &[]);
    let foreign: Vec<&Value> = before
        .iter()
        .filter(|m| m["params"]["sessionId"] == "someone-else")
        .collect();
    assert!(foreign.len() >= 2);

    let (before, _) = turn(&user_prompt("[mock:huge]"), &[]);
    let text = chunks(&before);
    assert_eq!(text.len(), 64);
    assert!(text.iter().all(|c| c.len() == 64 * 1024));

    let (before, _) = turn(&user_prompt("[mock:stray-response]"), &[]);
    assert!(before
        .iter()
        .any(|m| m["id"] == 987654 && m["result"] == json!({})));
    assert_eq!(chunks(&before).concat(), TEXT);

    let (before, _) = turn(&user_prompt("[mock:slow]"), &[("MOCK_DEVIN_SLOW_MS", "10")]);
    assert_eq!(chunks(&before).len(), 6);

    let (before, _) = turn(
        &user_prompt("[mock:env]"),
        &[("MOCK_DEVIN_PROBE", "visible")],
    );
    let listing = chunks(&before).concat();
    assert!(
        listing.lines().any(|l| l == "MOCK_DEVIN_PROBE=visible"),
        "{listing}"
    );
    let names: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split_once('=').map(|(n, _)| n))
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);

    // The malformed frame is a raw line before the normal answer.
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, &[]);
    let session = agent.start_session(&sandbox.home);
    agent.prompt(&session, &user_prompt("[mock:malformed-frame]"));
    let saw_raw = loop {
        match agent.next() {
            Out::Raw(line) => break line,
            Out::Json(message) => assert!(message.get("result").is_none(), "{message}"),
        }
    };
    assert_eq!(saw_raw, "this is not json");
}

#[test]
fn agent_request_and_tool_call() {
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, &[]);
    let session = agent.start_session(&sandbox.home);
    let id = agent.prompt(&session, &user_prompt("[mock:agent-request]"));
    let request = loop {
        let message = agent.next_json();
        if message["method"] == "fs/read_text_file" {
            break message;
        }
    };
    assert_eq!(request["params"]["path"], "/etc/passwd");
    agent.send(&json!({"jsonrpc": "2.0", "id": request["id"],
                       "error": {"code": -32601, "message": "Method not found"}}));
    let (before, _) = agent.until_response(id);
    assert_eq!(chunks(&before).concat(), "fs answer: -32601");

    // A tool_call, then a cancel: the turn ends as cancelled.
    let id = agent.prompt(&session, &user_prompt("[mock:tool-call]"));
    loop {
        let message = agent.next_json();
        if message["params"]["update"]["sessionUpdate"] == "tool_call" {
            assert_eq!(message["params"]["update"]["toolCallId"], "call_1");
            assert_eq!(message["params"]["update"]["kind"], "execute");
            break;
        }
    }
    agent.send(
        &json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    );
    let (_, result) = agent.until_response(id);
    assert_eq!(result["result"]["stopReason"], "cancelled");
}

#[test]
fn cancel_ends_a_slow_turn() {
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, &[("MOCK_DEVIN_SLOW_MS", "5000")]);
    let session = agent.start_session(&sandbox.home);
    let id = agent.prompt(&session, &user_prompt("[mock:slow]"));
    loop {
        let message = agent.next_json();
        if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            break;
        }
    }
    let started = Instant::now();
    agent.send(
        &json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    );
    let (before, result) = agent.until_response(id);
    assert_eq!(result["result"]["stopReason"], "cancelled");
    assert!(started.elapsed() < Duration::from_secs(4));
    assert!(chunks(&before).is_empty());
}

#[test]
fn exit_and_hang() {
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, &[]);
    let session = agent.start_session(&sandbox.home);
    agent.prompt(&session, &user_prompt("[mock:exit]"));
    let mut seen = Vec::new();
    while let Ok(Out::Json(message)) = agent.next_within(WAIT) {
        seen.push(message);
    }
    assert_eq!(chunks(&seen).len(), 1);
    assert!(seen.iter().all(|m| m.get("result").is_none()));
    let status = agent.wait_exit(Duration::from_secs(5)).expect("exited");
    assert_eq!(status.code(), Some(3));

    let mut agent = Agent::spawn(&sandbox.home, &[]);
    let session = agent.start_session(&sandbox.home);
    agent.prompt(&session, &user_prompt("[mock:hang]"));
    agent.close_stdin();
    assert!(
        agent.wait_exit(Duration::from_millis(500)).is_none(),
        "a hung agent ignores EOF"
    );
    assert!(matches!(
        agent.next_within(Duration::from_millis(100)),
        Err(RecvTimeoutError::Timeout)
    ));
}

#[test]
fn grandchild_lives_in_the_agent_process_group() {
    let sandbox = sandbox();
    let log = sandbox.home.join("mock.jsonl");
    let log_env = log.to_str().expect("utf8").to_owned();
    let mut agent = Agent::spawn(&sandbox.home, &[("MOCK_DEVIN_LOG", log_env.as_str())]);
    let session = agent.start_session(&sandbox.home);
    agent.prompt(&session, &user_prompt("[mock:grandchild]"));
    let deadline = Instant::now() + WAIT;
    let pid = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let found = text
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find_map(|event| event["grandchildPid"].as_u64());
        if let Some(pid) = found {
            break pid;
        }
        assert!(Instant::now() < deadline, "no grandchild in {text}");
        thread::sleep(Duration::from_millis(20));
    };
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let stat = std::fs::read_to_string(proc_dir.join("stat")).expect("grandchild runs");
    // Field 5 of /proc/PID/stat is the process group: the agent's.
    let pgrp = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.split_whitespace().nth(2))
        .expect("pgrp");
    assert_eq!(pgrp, agent.pid().to_string());
    agent.close_stdin();
    assert!(agent.wait_exit(Duration::from_millis(300)).is_none());

    kill_group(agent.pid());
    let deadline = Instant::now() + WAIT;
    while std::fs::read_to_string(proc_dir.join("stat")).is_ok_and(|stat| !stat.contains(") Z ")) {
        assert!(
            Instant::now() < deadline,
            "grandchild {pid} survived its group"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

fn continued(trace: &str) -> String {
    format!("[Devin Summarizer Bridge: continued]\nThe trace continues.\n\n[Execution Trace: continued]\n{trace}")
}

#[test]
fn sessions_keep_their_trace_across_prompts_and_run_in_parallel() {
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, &[]);
    let first_session = agent.start_session(&sandbox.home);
    let second = agent.new_session(&sandbox.home);
    let second_session = second["result"]["sessionId"]
        .as_str()
        .expect("second session")
        .to_owned();

    // A continuation needs an earlier prompt in its session.
    let orphan = agent.call(
        "session/prompt",
        json!({"sessionId": first_session, "prompt": [{"type": "text", "text": continued("[User]\nhi")}]}),
    );
    assert_eq!(orphan["error"]["code"], -32602, "{orphan}");

    // The scripted task decides from the whole trace: the continuation's tool result is the
    // first one, so the next step is Read.
    let id = agent.prompt(
        &first_session,
        &user_prompt("npm test fails. Fix the bug in math.js and run the tests."),
    );
    let (before, _) = agent.until_response(id);
    assert!(chunks(&before).concat().contains("\"pwd\""));
    let id = agent.prompt(
        &first_session,
        &continued(
            "[Assistant]\n[Assistant Tool Use]\nid: toolu_1\nname: Bash\narguments:\n{}\n\n---\n\n\
             [User]\n[Tool Result]\ntool_use_id: toolu_1\nis_error: false\ncontent:\n/tmp/.sandbox/p",
        ),
    );
    let (before, _) = agent.until_response(id);
    assert!(
        chunks(&before).concat().starts_with(
            r#"<tool>{"name":"Read","arguments":{"file_path":"/tmp/.sandbox/p/math.js"}}</tool>"#
        ),
        "the next step reads math.js"
    );

    // Two sessions' turns overlap: the slow one on the second session does not block the first.
    let slow = agent.prompt(&second_session, &user_prompt("[mock:slow]"));
    let quick = agent.prompt(&first_session, &continued("[User]\n[mock:text]"));
    let (_, quick_result) = agent.until_response(quick);
    assert_eq!(quick_result["result"]["stopReason"], "end_turn");
    let busy = agent.request(
        "session/prompt",
        json!({"sessionId": second_session, "prompt": [{"type": "text", "text": user_prompt("[mock:text]")}]}),
    );
    let (meanwhile, busy) = agent.until_response(busy);
    assert_eq!(busy["error"]["code"], -32600, "{busy}");
    // The slow turn may go on streaming before the refusal arrives; nothing else may.
    assert!(
        meanwhile.iter().all(|message| message.get("id").is_none()
            && (message["params"]["sessionId"] == json!(second_session)
                || message["method"] == "_cognition.ai/output")),
        "{meanwhile:?}"
    );
    let (_, slow_result) = agent.until_response(slow);
    assert_eq!(slow_result["result"]["stopReason"], "end_turn");

    // There is no session/close; a deleted session is gone.
    let closed = agent.call("session/close", json!({"sessionId": first_session}));
    assert_eq!(closed["error"]["code"], -32601, "{closed}");
    let deleted = agent.call("session/delete", json!({"sessionId": first_session}));
    assert_eq!(deleted["result"], json!({}), "{deleted}");
    let gone = agent.call(
        "session/prompt",
        json!({"sessionId": first_session, "prompt": [{"type": "text", "text": user_prompt("[mock:text]")}]}),
    );
    assert_eq!(gone["error"]["code"], -32016, "{gone}");
}

#[test]
fn exit_after_answers_then_ends_the_process() {
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, &[]);
    let session = agent.start_session(&sandbox.home);
    let id = agent.prompt(&session, &user_prompt("[mock:exit-after]"));
    let (before, result) = agent.until_response(id);
    assert_eq!(result["result"]["stopReason"], "end_turn");
    assert_eq!(chunks(&before).concat(), TEXT);
    let status = agent.wait_exit(Duration::from_secs(5)).expect("exited");
    assert_eq!(status.code(), Some(3));
}

/// A process with its own, empty account home (`XDG_DATA_HOME`), so that no credentials file
/// of the machine counts.
fn account_env(sandbox: &Sandbox, extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let data = sandbox.home.join("data");
    std::fs::create_dir_all(data.join("devin")).expect("data dir");
    let mut env = vec![("XDG_DATA_HOME", data.display().to_string())];
    env.extend(extra.iter().cloned());
    env
}

fn spawn_with(sandbox: &Sandbox, env: &[(&'static str, String)]) -> Agent {
    let env: Vec<(&str, &str)> = env.iter().map(|(n, v)| (*n, v.as_str())).collect();
    Agent::spawn(&sandbox.home, &env)
}

fn log_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("log line"))
        .collect()
}

#[test]
fn only_a_client_named_windsurf_gets_answers() {
    let sandbox = sandbox();
    let log = sandbox.home.join("mock.jsonl");
    let env = [("MOCK_DEVIN_LOG", log.display().to_string())];
    for (client, served) in [
        (json!({"name": "acpx", "version": "0.1.0"}), false),
        (json!({"name": "Windsurf", "version": "1.110.1"}), false),
        (json!({"version": "1.110.1"}), false),
        (json!({"name": "windsurf", "version": "1.110.1"}), true),
        (json!({"name": "windsurf", "version": "0.0.1"}), true),
        (Value::Null, true),
    ] {
        let mut agent = spawn_with(&sandbox, &env);
        let mut params = json!({"protocolVersion": 1, "clientCapabilities": {}});
        if !client.is_null() {
            params["clientInfo"] = client.clone();
        }
        agent.call("initialize", params);
        let session = agent.new_session(&sandbox.home)["result"]["sessionId"]
            .as_str()
            .expect("session")
            .to_owned();
        for _ in 0..2 {
            let id = agent.prompt(&session, &user_prompt("[mock:text]"));
            let (before, response) = agent.until_response(id);
            if served {
                assert_eq!(response["result"]["stopReason"], "end_turn", "{client}");
            } else {
                // Every prompt, before any turn starts.
                assert!(before.is_empty(), "{before:?}");
                assert_eq!(
                    response["error"],
                    json!({"code": -32603,
                           "message": "Your Windsurf version is out of date. Please update to the latest version.",
                           "data": {"cognition.ai/errorKind": "internal", "cognition.ai/retryable": false}}),
                    "{client}"
                );
            }
        }
    }
    let refused: Vec<Value> = log_events(&log)
        .into_iter()
        .filter(|e| e["event"] == "identity_refused")
        .map(|e| e["clientName"].clone())
        .collect();
    assert_eq!(refused.len(), 6, "{refused:?}");
    assert_eq!(refused[0], "acpx");
}

#[test]
fn signing_in_with_the_browser_method_and_a_key() {
    let sandbox = sandbox();
    let log = sandbox.home.join("mock.jsonl");
    // The older logged-out behaviour: session/new is refused.
    let logged_out = account_env(
        &sandbox,
        &[
            ("MOCK_DEVIN_LOGGED_OUT", "1".to_owned()),
            ("MOCK_DEVIN_LOGOUT_STYLE", "session_new".to_owned()),
            ("MOCK_DEVIN_LOG", log.display().to_string()),
        ],
    );
    let mut agent = spawn_with(&sandbox, &logged_out);
    agent.call("initialize", json!({"protocolVersion": 1}));
    let refused = agent.new_session(&sandbox.home);
    assert_eq!(
        refused["error"],
        json!({"code": -32000, "message": "ACP host has not authenticated. Run \"devin auth login\" or authenticate with an API key."}),
        "{refused}"
    );
    let load = agent.call(
        "session/load",
        json!({"sessionId": "mock-session-1", "cwd": sandbox.home, "mcpServers": []}),
    );
    assert_eq!(load["error"]["code"], -32000, "{load}");
    // Without a key the CLI would open a browser: never from a bridge.
    let browser = agent.call("authenticate", json!({"methodId": "devin-browser"}));
    assert_eq!(
        browser["error"],
        json!({"code": -32603, "message": "cannot open a browser: no display"})
    );
    let unknown = agent.call(
        "authenticate",
        json!({"methodId": "windsurf-api-key", "_meta": {"api_key": "k"}}),
    );
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(agent.new_session(&sandbox.home)["error"].is_object());
    let signed = agent.call(
        "authenticate",
        json!({"methodId": "devin-browser", "_meta": {"api_key": "secret-key-123"}}),
    );
    assert_eq!(signed["result"], Value::Null, "{signed}");
    assert!(signed.get("error").is_none());
    let session = agent.new_session(&sandbox.home);
    assert_eq!(
        session["result"]["sessionId"], "mock-session-1",
        "{session}"
    );
    drop(agent);

    let events = log_events(&log);
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert!(names.contains(&"browser_login"), "{names:?}");
    let auth = events
        .iter()
        .find(|e| e["event"] == "authenticate")
        .expect("authenticate event");
    assert_eq!(auth["apiKey"], true);
    assert!(!std::fs::read_to_string(&log)
        .expect("log")
        .contains("secret-key-123"));

    // A credentials file (even a symlink) signs in a logged-out process.
    let real = sandbox.home.join("creds");
    std::fs::write(&real, "x").expect("creds");
    std::os::unix::fs::symlink(&real, sandbox.home.join("data/devin/credentials.toml"))
        .expect("symlink");
    let mut agent = spawn_with(&sandbox, &logged_out);
    agent.call("initialize", json!({"protocolVersion": 1}));
    assert!(agent.new_session(&sandbox.home)["result"]["sessionId"].is_string());

    // Without MOCK_DEVIN_LOGGED_OUT the summarizer agent is signed in by default.
    let fresh = self::sandbox();
    let mut agent = spawn_with(&fresh, &account_env(&fresh, &[]));
    agent.call("initialize", json!({"protocolVersion": 1}));
    assert!(agent.new_session(&fresh.home)["result"]["sessionId"].is_string());
}

/// A prompt in a fresh session: the messages before the answer, and the answer.
fn prompt_turn(agent: &mut Agent, session: &str, text: &str) -> (Vec<Value>, Value) {
    let id = agent.prompt(session, &user_prompt(text));
    agent.until_response(id)
}

#[test]
fn logged_out_newer_style_opens_sessions_and_fails_the_prompt() {
    let sandbox = sandbox();
    // The default style.
    let env = account_env(&sandbox, &[("MOCK_DEVIN_LOGGED_OUT", "1".to_owned())]);
    let mut agent = spawn_with(&sandbox, &env);
    let session = agent.start_session(&sandbox.home);
    for _ in 0..2 {
        let (before, response) = prompt_turn(&mut agent, &session, "[mock:text]");
        // Refused at once: no turn starts.
        assert!(before.is_empty(), "{before:?}");
        assert_eq!(
            response["error"],
            json!({"code": -32603,
                   "message": "Authentication failed: Please authenticate to continue. Run `/login` to log in.",
                   "data": {"cognition.ai/errorKind": "unauthenticated", "cognition.ai/retryable": false}}),
            "{response}"
        );
    }
    // authenticate with the key in _meta signs the process in; the same session then works.
    let signed = agent.call(
        "authenticate",
        json!({"methodId": "devin-browser", "_meta": {"api_key": "good-key"}}),
    );
    assert_eq!(signed["result"], Value::Null, "{signed}");
    let (_, response) = prompt_turn(&mut agent, &session, "[mock:text]");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    // An invalid key is taken, but leaves the process signed out.
    let mut agent = spawn_with(&sandbox, &env);
    let session = agent.start_session(&sandbox.home);
    let taken = agent.call(
        "authenticate",
        json!({"methodId": "devin-browser", "_meta": {"api_key": "invalid-key"}}),
    );
    assert_eq!(taken["result"], Value::Null, "{taken}");
    let (_, response) = prompt_turn(&mut agent, &session, "[mock:text]");
    assert_eq!(response["error"]["code"], -32603, "{response}");

    // An unknown style is refused at start-up.
    let output = Command::new(BIN)
        .args(["acp", "--agent-type", "summarizer"])
        .env("MOCK_DEVIN_LOGOUT_STYLE", "later")
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(64));
}

#[test]
fn windsurf_api_key_in_the_environment_is_preferred_over_stored_credentials() {
    let sandbox = sandbox();
    let log = sandbox.home.join("mock.jsonl");
    for style in ["prompt", "session_new"] {
        let base = [
            ("MOCK_DEVIN_LOGGED_OUT", "1".to_owned()),
            ("MOCK_DEVIN_LOGOUT_STYLE", style.to_owned()),
            ("MOCK_DEVIN_LOG", log.display().to_string()),
        ];
        // A valid key in the environment signs a logged-out process in.
        let mut env = account_env(&sandbox, &base);
        env.push(("WINDSURF_API_KEY", "env-secret-key".to_owned()));
        let mut agent = spawn_with(&sandbox, &env);
        let session = agent.start_session(&sandbox.home);
        let (_, response) = prompt_turn(&mut agent, &session, "[mock:text]");
        assert_eq!(
            response["result"]["stopReason"], "end_turn",
            "{style}: {response}"
        );
        drop(agent);

        // With stored credentials, a stale key in the environment still wins: signed out.
        let credentials = sandbox.home.join("data/devin/credentials.toml");
        std::fs::write(&credentials, "windsurf_api_key = \"x\"\n").expect("creds");
        let mut env = account_env(&sandbox, &base);
        env.push(("WINDSURF_API_KEY", "invalid-stale-key".to_owned()));
        let mut agent = spawn_with(&sandbox, &env);
        agent.call("initialize", json!({"protocolVersion": 1}));
        let new = agent.new_session(&sandbox.home);
        if style == "session_new" {
            assert_eq!(new["error"]["code"], -32000, "{new}");
        } else {
            let session = new["result"]["sessionId"].as_str().expect("id").to_owned();
            let (_, response) = prompt_turn(&mut agent, &session, "[mock:text]");
            assert_eq!(response["error"]["code"], -32603, "{response}");
        }
        drop(agent);
        // Without the variable the stored credentials count.
        let mut agent = spawn_with(&sandbox, &account_env(&sandbox, &base));
        let session = agent.start_session(&sandbox.home);
        let (_, response) = prompt_turn(&mut agent, &session, "[mock:text]");
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        std::fs::remove_file(&credentials).expect("rm creds");
    }
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(!text.contains("env-secret-key") && !text.contains("invalid-stale-key"));
}

fn model_option(new: &Value) -> Option<Value> {
    new["configOptions"]
        .as_array()
        .expect("configOptions")
        .iter()
        .find(|o| o["category"] == "model")
        .cloned()
}

/// The text of one turn's reply, and its agent_stopped and turn_stats.
fn whoami(agent: &mut Agent, session: &str) -> (String, Value, Value) {
    let id = agent.prompt(session, &user_prompt("[mock:whoami]"));
    let (before, result) = agent.until_response(id);
    assert_eq!(result["result"]["stopReason"], "end_turn", "{result}");
    let find = |method: &str| {
        before
            .iter()
            .find(|m| m["method"] == method)
            .unwrap_or_else(|| panic!("no {method}"))
            .clone()
    };
    (
        chunks(&before).concat(),
        find("_cognition.ai/agent_stopped"),
        find("_cognition.ai/turn_stats"),
    )
}

/// The model row of a turn_stats' dimensions: its display label.
fn model_label(stats: &Value) -> Value {
    stats["params"]["responseDimensions"]
        .as_array()
        .expect("dimensions")
        .iter()
        .find(|d| d["uid"] == "model")
        .map(|d| d["kind"]["value"].clone())
        .expect("model row")
}

/// A summarizer started with these arguments (and environment).
fn spawn_args(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Agent {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .current_dir(cwd)
        .env_remove("MOCK_DEVIN_SCENARIO")
        .env_remove("MOCK_DEVIN_LOG");
    for (name, value) in env {
        command.env(name, value);
    }
    Agent::start(command, 100)
}

#[test]
fn the_summarizer_offers_no_model_option() {
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, &[]);
    agent.call("initialize", json!({"protocolVersion": 1}));
    let new = agent.new_session(&sandbox.home);
    let ids: Vec<&str> = new["result"]["configOptions"]
        .as_array()
        .expect("options")
        .iter()
        .filter_map(|o| o["id"].as_str())
        .collect();
    assert_eq!(ids, ["mode"], "{new}");
    let session = new["result"]["sessionId"].as_str().expect("id").to_owned();
    let (text, stopped, stats) = whoami(&mut agent, &session);
    assert_eq!(text, "model: swe-1-7");
    assert_eq!(stopped["params"]["stats"]["modelLabel"], "SWE-1.7");
    assert_eq!(model_label(&stats), "SWE-1.7");
    assert!(stats["params"].get("modelLabel").is_none(), "{stats}");
    // There is no model option to set.
    let refused = agent.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "swe-1-6"}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let other = agent.call(
        "session/set_config_option",
        json!({"sessionId": "nope", "configId": "model", "value": "swe-2"}),
    );
    assert_eq!(other["error"]["code"], -32016, "{other}");
}

#[test]
fn model_flag_before_or_after_acp_picks_the_model() {
    let sandbox = sandbox();
    for args in [
        &["--model", "kimi-k3", "acp", "--agent-type", "summarizer"][..],
        &["--model=kimi-k3", "acp", "--agent-type", "summarizer"],
        &["acp", "--agent-type", "summarizer", "--model", "kimi-k3"],
        &["acp", "--model=kimi-k3", "--agent-type", "summarizer"],
        // After the subcommand wins.
        &[
            "--model",
            "swe-2",
            "acp",
            "--agent-type",
            "summarizer",
            "--model",
            "kimi-k3",
        ],
    ] {
        let mut agent = spawn_args(&sandbox.home, args, &[]);
        let session = agent.start_session(&sandbox.home);
        let (text, stopped, stats) = whoami(&mut agent, &session);
        assert_eq!(text, "model: kimi-k3", "{args:?}");
        // The label is the catalog's display name, not the id.
        assert_eq!(
            stopped["params"]["stats"]["modelLabel"], "Kimi K3",
            "{args:?}"
        );
        assert_eq!(model_label(&stats), "Kimi K3", "{args:?}");
    }
}

#[test]
fn an_unknown_model_flag_fails_every_session_with_resource_not_found() {
    let sandbox = sandbox();
    for args in [
        &["--model", "adaptive", "acp", "--agent-type", "summarizer"][..],
        &["acp", "--agent-type", "summarizer", "--model", "adaptive"],
    ] {
        let mut agent = spawn_args(&sandbox.home, args, &[]);
        agent.call("initialize", json!({"protocolVersion": 1}));
        for _ in 0..2 {
            let new = agent.new_session(&sandbox.home);
            assert_eq!(
                new["error"],
                json!({"code": -32002, "message": "Resource not found",
                       "data": {"uri": "Model not found: adaptive. Available models: swe-1-7, \
                                swe-1-7-lightning, swe-1-6, swe-1-6-fast, swe-2, kimi-k3, \
                                glm-5-2, muse-wonder"}}),
                "{args:?}"
            );
        }
    }
}

#[test]
fn the_effort_switches_add_a_thought_level_and_an_effort_variant() {
    let sandbox = sandbox();
    // By default: no thought level, and whoami names the model alone.
    let mut agent = Agent::spawn(&sandbox.home, &[]);
    agent.call("initialize", json!({"protocolVersion": 1}));
    let new = agent.new_session(&sandbox.home);
    assert!(model_option(&new["result"]).is_none(), "{new}");
    let session = new["result"]["sessionId"].as_str().expect("id").to_owned();
    let refused = agent.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thought_level", "value": "high"}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    drop(agent);
    // Without the effort switch, swe-2-high is not offered.
    let mut agent = spawn_args(
        &sandbox.home,
        &["--model", "swe-2-high", "acp", "--agent-type", "summarizer"],
        &[],
    );
    agent.call("initialize", json!({"protocolVersion": 1}));
    assert_eq!(agent.new_session(&sandbox.home)["error"]["code"], -32002);
    drop(agent);

    let effort = [
        ("MOCK_DEVIN_THOUGHT_LEVEL", "1"),
        ("MOCK_DEVIN_EFFORT_VARIANTS", "1"),
    ];
    let mut agent = Agent::spawn(&sandbox.home, &effort);
    agent.call("initialize", json!({"protocolVersion": 1}));
    let new = agent.new_session(&sandbox.home);
    let options = new["result"]["configOptions"].as_array().expect("options");
    let level = options
        .iter()
        .find(|option| option["category"] == "thought_level")
        .expect("a thought_level select");
    assert_eq!(level["id"], "thought_level");
    assert_eq!(level["currentValue"], "medium");
    let session = new["result"]["sessionId"].as_str().expect("id").to_owned();
    let (text, _, _) = whoami(&mut agent, &session);
    assert_eq!(text, "model: swe-1-7, thought_level: medium");
    let set = agent.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thought_level", "value": "high"}),
    );
    assert!(set["result"]["configOptions"].is_array(), "{set}");
    let (text, _, _) = whoami(&mut agent, &session);
    assert_eq!(text, "model: swe-1-7, thought_level: high");
    drop(agent);
    // The effort variant through --model.
    let mut agent = spawn_args(
        &sandbox.home,
        &["acp", "--agent-type", "summarizer", "--model", "swe-2-high"],
        &effort,
    );
    let session = agent.start_session(&sandbox.home);
    let (text, stopped, _) = whoami(&mut agent, &session);
    assert_eq!(text, "model: swe-2-high, thought_level: medium");
    assert_eq!(stopped["params"]["stats"]["modelLabel"], "SWE-2 High");
    drop(agent);
    // Under GLM 5.2 there is no thought level to report or set.
    let mut agent = spawn_args(
        &sandbox.home,
        &["acp", "--agent-type", "summarizer", "--model", "glm-5-2"],
        &effort,
    );
    let session = agent.start_session(&sandbox.home);
    let (text, stopped, _) = whoami(&mut agent, &session);
    assert_eq!(text, "model: glm-5-2");
    assert_eq!(stopped["params"]["stats"]["modelLabel"], "GLM 5.2");
    let refused = agent.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thought_level", "value": "low"}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

#[test]
fn sessions_list_delete_load_and_idle_cancel() {
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, &[]);
    let first = agent.start_session(&sandbox.home);
    let second = agent.new_session(&sandbox.home)["result"]["sessionId"]
        .as_str()
        .expect("id")
        .to_owned();
    let listed = agent.call("session/list", json!({}));
    let cwd = sandbox.home.to_str().expect("utf8");
    assert_eq!(
        listed["result"],
        json!({"sessions": [{"sessionId": first, "cwd": cwd}, {"sessionId": second, "cwd": cwd}]})
    );

    let missing = agent.call(
        "session/load",
        json!({"sessionId": "mock-session-99", "cwd": cwd, "mcpServers": []}),
    );
    assert_eq!(
        missing["error"],
        json!({"code": -32016, "message": "Session not found",
               "data": {"cognition.ai/errorKind": "session_not_found", "cognition.ai/retryable": false}})
    );
    let loaded = agent.call(
        "session/load",
        json!({"sessionId": first, "cwd": cwd, "mcpServers": []}),
    );
    assert!(loaded["result"]["configOptions"].is_array(), "{loaded}");
    assert_eq!(loaded["result"]["modes"]["currentModeId"], "accept-edits");

    // Cancelling an idle session still reports that it stopped.
    agent.send(
        &json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": first}}),
    );
    let stopped = agent.next_json();
    assert_eq!(
        stopped["method"], "_cognition.ai/agent_stopped",
        "{stopped}"
    );
    assert_eq!(stopped["params"]["cause"], "cancelled");
    assert_eq!(stopped["params"]["sessionId"], json!(first));

    let deleted = agent.call("session/delete", json!({"sessionId": first}));
    assert_eq!(deleted["result"], json!({}));
    let again = agent.call("session/delete", json!({"sessionId": first}));
    assert_eq!(again["error"]["code"], -32016, "{again}");
    let listed = agent.call("session/list", json!({}));
    assert_eq!(
        listed["result"]["sessions"].as_array().expect("list").len(),
        1
    );
    let close = agent.call("session/close", json!({"sessionId": second}));
    assert_eq!(close["error"]["code"], -32601, "{close}");
}

/// The first notification with this method among `messages`.
fn find_method<'a>(messages: &'a [Value], method: &str) -> &'a Value {
    messages
        .iter()
        .find(|m| m["method"] == method)
        .unwrap_or_else(|| panic!("no {method} in {messages:?}"))
}

#[test]
fn stop_causes_end_the_turn_with_an_ordinary_end_turn() {
    for (cause, message, text) in [
        (
            "quota_exhausted",
            Some("Your daily usage quota has been exhausted. "),
            "",
        ),
        ("auth_required", Some("Authentication required."), ""),
        (
            "content_filter",
            Some("The response was blocked"),
            "Devin mock: the start of an answer that",
        ),
        (
            "max_turn_requests",
            None,
            "Devin mock: I ran many tools and stopped before finishing.",
        ),
        (
            "output_truncated",
            None,
            "Devin mock: a long answer, cut off in the mid",
        ),
    ] {
        let (before, response) = turn(&user_prompt(&format!("[mock:stop={cause}]")), &[]);
        assert_eq!(response["result"]["stopReason"], "end_turn", "{cause}");
        assert!(response["result"]["usage"].is_object(), "{response}");
        let stopped = before.last().expect("agent_stopped");
        assert_eq!(stopped["method"], "_cognition.ai/agent_stopped", "{cause}");
        assert_eq!(stopped["params"]["cause"], cause);
        match message {
            Some(start) => assert!(
                stopped["params"]["errorMessage"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(start)),
                "{stopped}"
            ),
            None => assert!(stopped["params"].get("errorMessage").is_none(), "{stopped}"),
        }
        // The quota and sign-in stops stream no text at all.
        assert_eq!(chunks(&before).concat(), text, "{cause}");
        if text.is_empty() {
            assert!(chunks(&before).is_empty(), "{cause}");
        }
    }
}

#[test]
fn compaction_sends_display_only_chunks_and_a_notice() {
    let (before, response) = turn(&user_prompt("[mock:compaction]"), &[]);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let updates: Vec<&Value> = before
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|m| &m["params"]["update"])
        .collect();
    let (display, answer): (Vec<&Value>, Vec<&Value>) = updates
        .into_iter()
        .partition(|u| u["_meta"]["cognition.ai/displayMessage"] == true);
    assert_eq!(display.len(), 1, "{before:?}");
    assert_eq!(display[0]["content"]["text"], "Compacting context...");
    let text: String = answer
        .iter()
        .map(|u| u["content"]["text"].as_str().expect("text"))
        .collect();
    assert_eq!(text, TEXT);
    // The display chunk and the notice come during the turn, before the real answer.
    let at = |wanted: &dyn Fn(&Value) -> bool| before.iter().position(wanted).expect("position");
    let notice = at(&|m| m["method"] == "_cognition.ai/compaction");
    let shown = at(&|m| m["params"]["update"]["_meta"]["cognition.ai/displayMessage"] == true);
    let first_answer = at(&|m| m["params"]["update"] == *answer[0]);
    assert!(notice < first_answer && shown < first_answer, "{before:?}");
    assert!(find_method(&before, "_cognition.ai/compaction")["params"]["sessionId"].is_string());
}

#[test]
fn usage_is_the_last_request_and_cached_reads_are_not_added() {
    let (before, response) = turn(&user_prompt("[mock:usage]"), &[]);
    assert_eq!(
        response["result"]["usage"],
        json!({"totalTokens": 4363, "inputTokens": 4321, "outputTokens": 42,
               "cachedReadTokens": 4000})
    );
    let stats = find_method(&before, "_cognition.ai/turn_stats");
    let rows = stats["params"]["responseDimensions"]
        .as_array()
        .expect("rows");
    let sum = |uid: &str| {
        rows.iter()
            .find(|r| r["uid"] == uid)
            .map(|r| r["kind"].clone())
            .expect(uid)
    };
    // One model request: the turn's sums equal it.
    assert_eq!(
        sum("inputTokens"),
        json!({"type": "cumulativeMetric", "value": 4321})
    );
    assert_eq!(
        sum("outputTokens"),
        json!({"type": "cumulativeMetric", "value": 42})
    );

    // usage_update: the counts and the model in _meta, the dimension in the Rust spelling.
    let (before, response) = turn(&user_prompt("[mock:usage-update]"), &[]);
    assert!(response["result"].get("usage").is_none(), "{response}");
    let update = before
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "usage_update")
        .expect("usage_update");
    let meta = &update["params"]["update"]["_meta"];
    assert!(meta["cognition.ai/inputTokens"].is_u64(), "{meta}");
    assert!(meta["cognition.ai/outputTokens"].is_u64(), "{meta}");
    assert_eq!(meta["cognition.ai/cachedReadTokens"], 0);
    assert_eq!(
        meta["cognition.ai/responseDimensions"],
        json!([{"uid": "model", "groupTitle": "Response Statistics", "label": "Model",
                "kind": {"Metric": {"value": "SWE-1.7"}}}])
    );
    assert_eq!(update["params"]["update"]["used"], 5555);
}

#[test]
fn a_cancelled_turn_sends_turn_stats_without_dimensions_then_agent_stopped() {
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, &[("MOCK_DEVIN_SLOW_MS", "5000")]);
    let session = agent.start_session(&sandbox.home);
    let id = agent.prompt(&session, &user_prompt("[mock:slow]"));
    loop {
        let message = agent.next_json();
        if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            break;
        }
    }
    agent.send(
        &json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    );
    let (before, result) = agent.until_response(id);
    let methods: Vec<&str> = before.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(
        methods,
        ["_cognition.ai/turn_stats", "_cognition.ai/agent_stopped"],
        "{before:?}"
    );
    assert!(before[0]["params"].get("responseDimensions").is_none());
    assert_eq!(before[1]["params"]["cause"], "cancelled");
    assert_eq!(result["result"]["stopReason"], "cancelled");
}

#[test]
fn set_model_and_stop_are_never_answered_fork_and_resume_are_unknown() {
    let sandbox = sandbox();
    let mut agent = Agent::spawn(&sandbox.home, &[]);
    let session = agent.start_session(&sandbox.home);
    let unanswered = [
        agent.request(
            "session/set_model",
            json!({"sessionId": session, "modelId": "swe-2"}),
        ),
        agent.request("session/stop", json!({"sessionId": session})),
    ];
    for method in ["session/fork", "session/resume"] {
        let answer = agent.call(method, json!({"sessionId": session}));
        assert_eq!(answer["error"]["code"], -32601, "{method}: {answer}");
    }
    // The agent goes on serving; the two requests above got nothing.
    let id = agent.prompt(&session, &user_prompt("[mock:text]"));
    let (before, result) = agent.until_response(id);
    assert_eq!(result["result"]["stopReason"], "end_turn");
    for message in &before {
        assert!(
            !unanswered.iter().any(|id| message["id"] == json!(id)),
            "{message}"
        );
    }
    agent.close_stdin();
    while let Ok(Out::Json(message)) = agent.next_within(Duration::from_millis(500)) {
        assert!(
            !unanswered.iter().any(|id| message["id"] == json!(id)),
            "{message}"
        );
    }
}

#[test]
fn version_is_a_3000_release() {
    let output = Command::new(BIN).arg("--version").output().expect("run");
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text
        .split_whitespace()
        .nth(1)
        .expect("devin <version>")
        .to_owned();
    let parts: Vec<&str> = version.split('.').collect();
    assert_eq!(parts.len(), 3, "{version}");
    assert_eq!(parts[0], "3000");
    assert!(parts.iter().all(|p| p.parse::<u32>().is_ok()), "{version}");
}
