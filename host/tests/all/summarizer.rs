//! Contract tests of the Anthropic Messages endpoint over HTTP, with the offline agent.
//! Every path in both streaming and JSON forms, every agent fault, and no process left behind.

use crate::common;

use std::time::Duration;

use common::bridge::{wait_no_agents, HttpResponse, TestBridge};
use serde_json::{json, Value};

pub(crate) fn bash_tool() -> Value {
    json!({
        "name": "Bash",
        "description": "Run a shell command",
        "input_schema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout": {"type": "number", "maximum": 600000},
                "description": {"type": "string"},
                "run_in_background": {"type": "boolean"}
            },
            "required": ["command"],
            "additionalProperties": false
        }
    })
}

pub(crate) fn request(marker: &str, stream: bool) -> Value {
    json!({
        "model": "devin-cli-agentic/swe-1-7",
        "max_tokens": 1024,
        "stream": stream,
        "system": [{"type": "text", "text": "You are a coding assistant.", "cache_control": {"type": "ephemeral"}}],
        "tools": [bash_tool()],
        "metadata": {"user_id": "test"},
        "messages": [{"role": "user", "content": format!("Please help. {marker}")}]
    })
}

/// The Anthropic lifecycle, pings removed.
fn lifecycle(response: &HttpResponse) -> Vec<String> {
    response
        .events()
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| name != "ping")
        .collect()
}

const LIFECYCLE: [&str; 6] = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
];

/// Error bodies must not leak paths, stack traces or vendor names.
fn assert_clean(text: &str) {
    for leak in [
        "/tmp",
        "/work",
        "/home",
        "mock-devin",
        "panicked",
        "Devin",
        "devin acp",
        "cognition",
        "Anthropic",
        "stack backtrace",
    ] {
        assert!(!text.contains(leak), "body leaks {leak:?}: {text}");
    }
}

fn assert_error(response: &HttpResponse, status: u16, kind: &str) {
    assert_eq!(response.status, status, "{}", response.body);
    let body = response.json();
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], kind, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
    assert_clean(&response.body);
}

/// The streamed error event after `message_start`.
fn assert_stream_error(response: &HttpResponse, kind: &str) {
    assert_eq!(response.status, 200, "{}", response.body);
    let events = response.events();
    assert_eq!(
        events.first().map(|(n, _)| n.as_str()),
        Some("message_start")
    );
    let (name, data) = events.last().expect("events");
    assert_eq!(name, "error", "{}", response.body);
    assert_eq!(data["error"]["type"], kind, "{data}");
    assert_clean(&response.body);
}

#[tokio::test]
async fn a_turn_that_fails_after_the_stream_began_ends_it_with_an_error_event() {
    let bridge = TestBridge::start(
        "ping_interval_ms = 100",
        "prewarm = 0\nturn_timeout_ms = 1500\nkill_grace_ms = 300",
    )
    .await;
    let streamed = bridge.messages(&request("[mock:hang]", true)).await;
    assert_stream_error(&streamed, "timeout_error");
    assert!(streamed.events().iter().any(|(name, _)| name == "ping"));
    bridge.stop().await;
}

#[tokio::test]
async fn text_replies_in_json_and_sse() {
    let bridge = TestBridge::start("", "prewarm = 1").await;
    let response = bridge.messages(&request("[mock:text]", false)).await;
    assert_eq!(response.status, 200, "{}", response.body);
    let body = response.json();
    assert_eq!(body["type"], "message");
    assert_eq!(body["role"], "assistant");
    assert_eq!(body["model"], "devin-cli-agentic/swe-1-7");
    assert_eq!(body["stop_reason"], "end_turn");
    assert_eq!(body["content"][0]["type"], "text");
    assert_eq!(body["content"][0]["text"], "Mock answer: the bridge works.");
    assert!(body["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("msg_") && id.len() == 28));
    assert!(body["usage"]["input_tokens"]
        .as_u64()
        .is_some_and(|n| n > 10));
    assert!(body["usage"]["output_tokens"]
        .as_u64()
        .is_some_and(|n| n >= 1));

    let response = bridge.messages(&request("[mock:text]", true)).await;
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert_eq!(lifecycle(&response), LIFECYCLE);
    let events = response.events();
    let delta = events
        .iter()
        .find(|(n, _)| n == "content_block_delta")
        .expect("delta");
    assert_eq!(delta.1["delta"]["type"], "text_delta");
    assert_eq!(delta.1["delta"]["text"], "Mock answer: the bridge works.");
    let stop = events
        .iter()
        .find(|(n, _)| n == "message_delta")
        .expect("message_delta");
    assert_eq!(stop.1["delta"]["stop_reason"], "end_turn");
    bridge.stop().await;
}

#[tokio::test]
async fn tool_replies_in_json_and_sse() {
    let bridge = TestBridge::start("", "prewarm = 0").await;
    let response = bridge.messages(&request("[mock:tool]", false)).await;
    assert_eq!(response.status, 200, "{}", response.body);
    let body = response.json();
    assert_eq!(body["stop_reason"], "tool_use");
    let block = &body["content"][0];
    assert_eq!(block["type"], "tool_use");
    assert_eq!(block["name"], "Bash");
    assert_eq!(
        block["input"],
        json!({"command": "echo mock", "description": "Print a marker"})
    );
    assert!(block["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("devin_call_") && id.len() == 27));

    let streamed = bridge.messages(&request("[mock:tool]", true)).await;
    assert_eq!(lifecycle(&streamed), LIFECYCLE);
    let events = streamed.events();
    let start = events
        .iter()
        .find(|(n, _)| n == "content_block_start")
        .expect("start");
    assert_eq!(start.1["content_block"]["type"], "tool_use");
    assert_eq!(start.1["content_block"]["input"], json!({}));
    let delta = events
        .iter()
        .find(|(n, _)| n == "content_block_delta")
        .expect("delta");
    assert_eq!(delta.1["delta"]["type"], "input_json_delta");
    let input: Value = serde_json::from_str(
        delta.1["delta"]["partial_json"]
            .as_str()
            .expect("partial json"),
    )
    .expect("json");
    assert_eq!(input["command"], "echo mock");
    // Same request, same deterministic tool id.
    assert_eq!(start.1["content_block"]["id"], block["id"]);
    bridge.stop().await;
}

#[tokio::test]
async fn the_single_repair_recovers_narration_and_malformed_envelopes() {
    let bridge = TestBridge::start("", "prewarm = 0").await;
    for marker in ["[mock:narrate-then-tool]", "[mock:malformed-then-tool]"] {
        let response = bridge.messages(&request(marker, false)).await;
        assert_eq!(response.status, 200, "{marker}: {}", response.body);
        assert_eq!(response.json()["stop_reason"], "tool_use", "{marker}");
        let streamed = bridge.messages(&request(marker, true)).await;
        // The narration was shown as it came and stays shown: the repair's call follows it in
        // the same message (the JSON answer holds the same blocks; `streaming` compares them).
        let (message, _) = super::streaming::accumulate(&streamed.events());
        assert_eq!(message, super::streaming::of_json(&response), "{marker}");
        if marker == "[mock:malformed-then-tool]" {
            assert_eq!(lifecycle(&streamed), LIFECYCLE, "{marker}");
        }
    }
    // A repair that fails again is a gateway error; there is no second repair. (Two envelopes
    // are one reply now; `tool_calls_and_usage` covers when they are refused.)
    for marker in ["[mock:narrate-always]"] {
        assert_error(
            &bridge.messages(&request(marker, false)).await,
            502,
            "api_error",
        );
        // Streamed, the narration was shown as it came: the error event follows it.
        assert_stream_error(&bridge.messages(&request(marker, true)).await, "api_error");
    }
    bridge.stop().await;
}

#[tokio::test]
async fn agent_faults_are_typed_and_leave_no_process() {
    let bridge = TestBridge::start(
        "",
        "prewarm = 0\nturn_timeout_ms = 1500\nkill_grace_ms = 300",
    )
    .await;
    let cases = [
        ("[mock:rpc-error]", 502, "api_error"),
        ("[mock:rpc-error=unavailable]", 429, "rate_limit_error"),
        ("[mock:rpc-error=connection]", 429, "rate_limit_error"),
        (
            "[mock:rpc-error=resource_exhausted]",
            400,
            "invalid_request_error",
        ),
        ("[mock:rpc-error=auth]", 502, "api_error"),
        ("[mock:rpc-error=bad-shape]", 502, "api_error"),
        ("[mock:rpc-error=not-object]", 502, "api_error"),
        ("[mock:exit]", 502, "api_error"),
        ("[mock:hang]", 504, "timeout_error"),
        ("[mock:tool-call]", 502, "api_error"),
        ("[mock:tool-call-update]", 502, "api_error"),
        ("[mock:malformed-frame]", 502, "api_error"),
        ("[mock:huge]", 502, "api_error"),
        ("[mock:wrong-session]", 502, "api_error"),
        ("[mock:stray-response]", 502, "api_error"),
        ("[mock:grandchild]", 504, "timeout_error"),
    ];
    for (marker, status, kind) in cases {
        let response = bridge.messages(&request(marker, false)).await;
        assert_error(&response, status, kind);
        // Every one fails before the first ping: the stream's head was held, so the streamed
        // request gets the same plain error (a client retries a 429 as Anthropic's); only the
        // huge reply and the agent that exits after a sentence had text certain before their
        // failure, which was shown, then the error.
        let streamed = bridge.messages(&request(marker, true)).await;
        if ["[mock:huge]", "[mock:exit]"].contains(&marker) {
            assert_stream_error(&streamed, kind);
        } else {
            assert_error(&streamed, status, kind);
        }
        assert!(
            wait_no_agents(&bridge.home, Duration::from_secs(5))
                .await
                .is_some(),
            "{marker}: an agent process survived its turn"
        );
    }
    bridge.stop().await;
}

#[tokio::test]
async fn each_fault_has_its_own_code_in_the_logs_and_status() {
    // The codes reach clients only through the error type; check them on the typed errors.
    use devin_bridge_agent::acp::AcpError;
    let codes = [
        AcpError::MalformedFrame.code(),
        AcpError::WrongSession.code(),
        AcpError::StrayResponse("9".into()).code(),
        AcpError::EarlyExit.code(),
        AcpError::OutputTooLarge(1).code(),
        AcpError::UnauthorizedTool.code(),
        AcpError::Timeout(1).code(),
        AcpError::RateLimited {
            retryable: true,
            retry_after: None,
        }
        .code(),
        AcpError::QuotaExceeded { message: None }.code(),
        AcpError::Network {
            retryable: true,
            retry_after: None,
        }
        .code(),
        AcpError::ContentFiltered.code(),
        AcpError::OutputTruncated.code(),
        AcpError::TurnLimit.code(),
        AcpError::ClientIdentityRefused.code(),
        AcpError::SessionNotFound.code(),
        AcpError::NoModelOption.code(),
        AcpError::ModelNotOffered {
            model: "m".into(),
            offered: Vec::new(),
        }
        .code(),
        AcpError::ToolRefused {
            tool: "exec".into(),
        }
        .code(),
        AcpError::Unauthenticated.code(),
    ];
    let unique: std::collections::BTreeSet<_> = codes.iter().collect();
    assert_eq!(unique.len(), codes.len());
    assert_eq!(
        AcpError::UnauthorizedTool.code(),
        "unauthorized_tool_execution"
    );
}

#[tokio::test]
async fn permission_and_agent_requests_are_refused() {
    let bridge = TestBridge::start("", "prewarm = 0").await;
    // The CLI announces the call (`tool_call`) before it asks for permission: the summarizer
    // runs no tool of the agent's, so the turn is stopped at the announcement, fail closed.
    let response = bridge.messages(&request("[mock:permission]", false)).await;
    assert_eq!(response.status, 502, "{}", response.body);
    assert!(
        response
            .body
            .contains("the agent tried to run a tool itself"),
        "{}",
        response.body
    );
    let response = bridge
        .messages(&request("[mock:agent-request]", false))
        .await;
    assert_eq!(response.status, 200, "{}", response.body);
    assert_eq!(response.json()["content"][0]["text"], "fs answer: -32601");
    let response = bridge
        .messages(&request("[mock:legacy-update]", false))
        .await;
    assert_eq!(response.status, 200, "{}", response.body);
    bridge.stop().await;
}

#[tokio::test]
async fn the_agent_environment_is_an_allowlist() {
    std::env::set_var("ANTHROPIC_API_KEY", "sk-ant-must-not-leak");
    std::env::set_var("CLAUDE_CODE_OAUTH_TOKEN", "must-not-leak");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "must-not-leak");
    std::env::set_var("GOOGLE_APPLICATION_CREDENTIALS", "/must/not/leak");
    std::env::set_var("DEVIN_API_TOKEN", "must-not-leak");
    let bridge = TestBridge::start("", "prewarm = 0").await;
    let response = bridge
        .messages(&json!({
            "model": "devin-cli-agentic/swe-1-7", "max_tokens": 64,
            "messages": [{"role": "user", "content": "[mock:env]"}]
        }))
        .await;
    assert_eq!(response.status, 200, "{}", response.body);
    let text = response.json()["content"][0]["text"]
        .as_str()
        .expect("text")
        .to_owned();
    assert!(
        !text.contains("must-not-leak") && !text.contains("sk-ant"),
        "secret leaked:\n{text}"
    );
    let names: Vec<&str> = text
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .collect();
    for name in &names {
        assert!(
            [
                "PATH",
                "HOME",
                "XDG_CONFIG_HOME",
                "XDG_DATA_HOME",
                "XDG_STATE_HOME",
                "XDG_CACHE_HOME",
                "TMPDIR",
                "LANG",
                "LC_ALL",
                "TZ",
                "DO_NOT_TRACK",
                "DISABLE_AUTOUPDATER",
                "NO_UPDATE_NOTIFIER"
            ]
            .contains(name),
            "unexpected variable {name} reached the agent"
        );
    }
    assert!(
        text.contains(&format!("HOME={}", bridge.home.display())),
        "{text}"
    );
    bridge.stop().await;
}

#[tokio::test]
async fn pings_keep_a_slow_stream_alive() {
    let bridge = TestBridge::start("ping_interval_ms = 200", "prewarm = 0").await;
    let response = bridge.messages(&request("[mock:slow]", true)).await;
    let names: Vec<String> = response.events().into_iter().map(|(n, _)| n).collect();
    assert!(
        names.iter().filter(|n| *n == "ping").count() >= 3,
        "{names:?}"
    );
    assert_eq!(names.first().map(String::as_str), Some("message_start"));
    // The text streamed as the agent wrote it: several deltas of one text block.
    let mut lifecycle = lifecycle(&response);
    let deltas = lifecycle
        .iter()
        .filter(|name| *name == "content_block_delta")
        .count();
    assert!(deltas >= 3, "{lifecycle:?}");
    lifecycle.dedup();
    assert_eq!(lifecycle, LIFECYCLE);
    bridge.stop().await;
}

#[tokio::test]
async fn client_errors_are_anthropic_shaped() {
    let bridge = TestBridge::start("max_body_bytes = 65536", "prewarm = 0").await;
    assert_error(
        &bridge
            .request("POST", "/v1/messages", &[], "{not json")
            .await,
        400,
        "invalid_request_error",
    );
    let addr = bridge.addr;
    let not_utf8 = tokio::task::spawn_blocking(move || {
        common::bridge::request_bytes(
            addr,
            "POST",
            "/v1/messages",
            &[],
            b"{\"model\":\"devin-cli-agentic/swe-1-7\",\"max_tokens\":9,\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
        )
    })
    .await
    .expect("client");
    assert_error(&not_utf8, 400, "invalid_request_error");
    assert!(not_utf8.body.contains("not UTF-8"), "{}", not_utf8.body);
    let image = json!({"model": "devin-cli-agentic/swe-1-7", "max_tokens": 9, "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}]});
    assert_error(&bridge.messages(&image).await, 400, "invalid_request_error");
    let unprefixed = json!({"model": "swe-1-7", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]});
    assert_error(
        &bridge.messages(&unprefixed).await,
        400,
        "invalid_request_error",
    );
    let unknown = json!({"model": "devin-cli-agentic/gpt-9", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]});
    assert_error(
        &bridge.messages(&unknown).await,
        400,
        "invalid_request_error",
    );
    let huge = json!({"model": "devin-cli-agentic/swe-1-7", "max_tokens": 9, "messages": [{"role": "user", "content": "x".repeat(70_000)}]});
    assert_error(&bridge.messages(&huge).await, 413, "request_too_large");
    assert_error(
        &bridge.request("GET", "/v1/nothing", &[], "").await,
        404,
        "not_found_error",
    );
    assert_eq!(
        bridge.agents(),
        0,
        "no agent may start for a refused request"
    );
    bridge.stop().await;
}

#[tokio::test]
async fn the_local_key_is_required_when_configured() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, "local-test-key\n").expect("key");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let bridge = TestBridge::start(
        &format!("api_key_file = {:?}", key_file.display().to_string()),
        "prewarm = 0",
    )
    .await;
    let body = request("[mock:text]", false).to_string();
    assert_error(
        &bridge.request("POST", "/v1/messages", &[], &body).await,
        401,
        "authentication_error",
    );
    assert_error(
        &bridge
            .request("POST", "/v1/messages", &[("x-api-key", "wrong")], &body)
            .await,
        401,
        "authentication_error",
    );
    assert_eq!(
        bridge
            .request(
                "POST",
                "/v1/messages",
                &[("x-api-key", "local-test-key")],
                &body
            )
            .await
            .status,
        200
    );
    assert_eq!(
        bridge
            .request(
                "POST",
                "/v1/messages",
                &[("authorization", "Bearer local-test-key")],
                &body
            )
            .await
            .status,
        200
    );
    assert_error(
        &bridge.request("GET", "/v1/models", &[], "").await,
        401,
        "authentication_error",
    );
    // Health is for operators and carries no secret.
    assert_eq!(bridge.request("GET", "/healthz", &[], "").await.status, 200);
    bridge.stop().await;
}

#[tokio::test]
async fn overload_is_a_529_after_a_bounded_wait() {
    let bridge = TestBridge::start(
        "max_concurrent_turns = 1\nqueue_timeout_ms = 300",
        "prewarm = 0\nturn_timeout_ms = 3000",
    )
    .await;
    let occupying = bridge.messages_in_background(&request("[mock:hang]", false));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_error(
        &bridge.messages(&request("[mock:text]", false)).await,
        529,
        "overloaded_error",
    );
    assert_error(&occupying.await.expect("first"), 504, "timeout_error");
    assert_eq!(
        bridge.messages(&request("[mock:text]", false)).await.status,
        200,
        "a freed slot serves again"
    );
    bridge.stop().await;
}

#[tokio::test]
async fn count_tokens_models_and_health() {
    let bridge = TestBridge::start("", "prewarm = 1").await;
    let mut counted = request("[mock:text]", false);
    counted.as_object_mut().map(|o| o.remove("max_tokens"));
    let response = bridge
        .request(
            "POST",
            "/v1/messages/count_tokens?beta=true",
            &[],
            &counted.to_string(),
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.body);
    assert!(response.json()["input_tokens"]
        .as_u64()
        .is_some_and(|n| n > 10));

    let models = bridge.request("GET", "/v1/models", &[], "").await.json();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(ids.contains(&"devin-cli-agentic/swe-1-7"), "{ids:?}");
    assert!(ids.iter().all(|id| id.starts_with("devin-cli-agentic/")));
    assert_eq!(models["data"][0]["capabilities"]["vision"], false);

    // The summarizer's model goes on its agent's command line, so the warm set waits for the
    // first turn to name the model; the pool then refills with an agent for it, which health
    // counts.
    assert_eq!(
        bridge.messages(&request("[mock:text]", false)).await.status,
        200
    );
    for _ in 0..200 {
        if bridge.agents() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let health = bridge.request("GET", "/healthz", &[], "").await.json();
    assert_eq!(health["agent_processes"], 1, "{health}");
    assert_eq!(health["mode"], "summarizer");
    assert_eq!(health["agent"]["kind"], "offline");
    assert_eq!(
        health["agent"]["version"],
        "devin 3000.11.4 (mock-devin offline)"
    );
    assert_eq!(
        health["agent"]["args"],
        json!(["acp", "--agent-type", "summarizer"])
    );
    assert_eq!(health["components"].as_array().map(Vec::len), Some(5));
    assert!(health["components"][0]["sha256"]
        .as_str()
        .is_some_and(|s| s.len() == 64));
    assert_eq!(health["in_flight_turns"], 0);
    let home = bridge.home.clone();
    bridge.stop().await;
    assert!(
        wait_no_agents(&home, Duration::from_secs(5))
            .await
            .is_some(),
        "the prewarmed agent survived the shutdown"
    );
}

#[tokio::test]
async fn a_client_that_hangs_up_gets_its_agent_killed_within_a_second() {
    for stream in [false, true] {
        let bridge = TestBridge::start("", "prewarm = 0\nturn_timeout_ms = 60000").await;
        let body = request("[mock:grandchild]", stream).to_string();
        let addr = bridge.addr;
        let client = std::thread::spawn(move || {
            use std::io::Write;
            let mut socket = std::net::TcpStream::connect(addr).expect("connect");
            let head = format!("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len());
            socket.write_all(head.as_bytes()).expect("write");
            socket.write_all(body.as_bytes()).expect("write");
            socket
        });
        let socket = client.join().expect("client");
        // Wait until the agent and its grandchild run.
        let mut waited = 0;
        while bridge.agents() < 2 && waited < 200 {
            tokio::time::sleep(Duration::from_millis(25)).await;
            waited += 1;
        }
        assert!(
            bridge.agents() >= 2,
            "the agent and its grandchild should be running"
        );
        drop(socket);
        let took = wait_no_agents(&bridge.home, Duration::from_secs(5)).await;
        let took =
            took.unwrap_or_else(|| panic!("stream={stream}: agent processes survived the hang-up"));
        assert!(
            took < Duration::from_secs(1),
            "stream={stream}: took {took:?} to kill the agent"
        );
        bridge.stop().await;
    }
}

#[tokio::test]
async fn shutdown_kills_what_does_not_finish_in_the_grace_and_leaves_nothing() {
    let bridge = TestBridge::start(
        "shutdown_grace_ms = 300",
        "prewarm = 2\nturn_timeout_ms = 60000",
    )
    .await;
    let hung = bridge.messages_in_background(&request("[mock:hang]", false));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(bridge.agents() >= 1);
    let home = bridge.home.clone();
    bridge.stop().await;
    assert!(
        wait_no_agents(&home, Duration::from_secs(5))
            .await
            .is_some(),
        "processes survived the shutdown"
    );
    let _ = hung.await;
}

/// `request` with the `dangerous_tool_use` safeguard Claude Code's auto mode sends.
fn with_safeguard(mut request: Value, classifier_context: Value) -> Value {
    request["safeguards"] = json!([{
        "type": "dangerous_tool_use",
        "classifier_context": classifier_context
    }]);
    request
}

fn project_context() -> Value {
    json!({"v": 1, "permission_mode": "auto", "live_cwd": "/w", "home_dir": "/home/u",
           "trusted_directories": {"primary": {"path": "/w"}, "additional": []}})
}

/// The `safeguard_results` of a streamed answer's `message_delta`.
fn streamed_results(response: &HttpResponse) -> Value {
    response
        .events()
        .into_iter()
        .find(|(name, _)| name == "message_delta")
        .map(|(_, data)| data["delta"]["safeguard_results"].clone())
        .expect("a message_delta")
}

#[tokio::test]
async fn safeguard_results_answer_every_tool_call_and_only_when_asked() {
    let bridge = TestBridge::start("", "prewarm = 0").await;
    // A tool reply: one verdict, for the call's own id, in JSON and in the stream.
    let tool = with_safeguard(request("[mock:tool]", false), project_context());
    let response = bridge.messages(&tool).await;
    assert_eq!(response.status, 200, "{}", response.body);
    let body = response.json();
    let id = body["content"][0]["id"]
        .as_str()
        .expect("tool id")
        .to_owned();
    let results = &body["safeguard_results"];
    assert_eq!(results[0]["type"], "dangerous_tool_use", "{body}");
    assert_eq!(results[0]["status"]["type"], "available", "{body}");
    let uses = results[0]["status"]["tool_uses"]
        .as_object()
        .expect("tool_uses");
    assert_eq!(uses.len(), 1, "{body}");
    assert_eq!(uses[&id]["type"], "evaluated");
    assert_eq!(
        uses[&id]["outcome"], "not_flagged",
        "`echo mock` is in the safe set"
    );
    let mut streamed = tool.clone();
    streamed["stream"] = json!(true);
    let response = bridge.messages(&streamed).await;
    let results = streamed_results(&response);
    assert_eq!(
        results[0]["status"]["tool_uses"][&id]["outcome"], "not_flagged",
        "{results}"
    );

    // A text reply under the safeguard: available, no verdicts.
    let text = with_safeguard(request("[mock:text]", false), project_context());
    let body = bridge.messages(&text).await.json();
    assert_eq!(
        body["safeguard_results"][0]["status"]["type"], "available",
        "{body}"
    );
    assert_eq!(
        body["safeguard_results"][0]["status"]["tool_uses"],
        json!({})
    );

    // A context that is not an object: unavailable with a reason, and the turn still answers.
    let broken = with_safeguard(request("[mock:tool]", false), json!("not an object"));
    let response = bridge.messages(&broken).await;
    assert_eq!(response.status, 200, "{}", response.body);
    let status = &response.json()["safeguard_results"][0]["status"];
    assert_eq!(status["type"], "unavailable", "{status}");
    assert!(status["reason"]
        .as_str()
        .is_some_and(|reason| !reason.is_empty()));

    // No safeguard asked for: no field, in JSON or in the stream.
    let plain = bridge.messages(&request("[mock:tool]", false)).await;
    assert!(
        plain.json().get("safeguard_results").is_none(),
        "{}",
        plain.body
    );
    let plain = bridge.messages(&request("[mock:tool]", true)).await;
    assert_eq!(streamed_results(&plain), Value::Null);

    // Counted by outcome and tool.
    let metrics = bridge.request("GET", "/metrics", &[], "").await.body;
    assert!(
        metrics.contains(
            r#"devin_bridge_safeguard_verdicts_total{outcome="not_flagged",tool="Bash"} 2"#
        ) && metrics.contains(
            r#"devin_bridge_safeguard_verdicts_total{outcome="unavailable",tool="Bash"} 1"#
        ),
        "{metrics}"
    );
    bridge.stop().await;
}

#[tokio::test]
async fn a_bridge_whose_safeguards_are_unsupported_says_so_and_judges_nothing() {
    let bridge =
        TestBridge::start_with_models("", "prewarm = 0", "[safeguards]\nmode = \"unsupported\"")
            .await;
    let tool = with_safeguard(request("[mock:tool]", false), project_context());
    let body = bridge.messages(&tool).await.json();
    assert_eq!(
        body["safeguard_results"],
        json!([{"type": "dangerous_tool_use", "status": {"type": "unsupported"}}]),
        "{body}"
    );
    let metrics = bridge.request("GET", "/metrics", &[], "").await.body;
    assert!(
        !metrics.contains("devin_bridge_safeguard_verdicts_total{"),
        "{metrics}"
    );
    bridge.stop().await;
}
