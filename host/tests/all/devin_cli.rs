//! The summarizer against the Devin CLI's own dialect, on both transports: the client identity
//! the service checks, the requested model applied (the answering model proves it), its
//! error kinds as answers Claude Code understands (429 with `retry-after`, a used-up quota a
//! 400 naming credits), and the headless login. The offline agent speaks that dialect.

use crate::common;

use common::bridge::{pass_env_line, HttpResponse, TestBridge, AGENT_LOG};
use serde_json::{json, Value};

fn turn(model: &str, text: &str, stream: bool) -> Value {
    json!({"model": format!("devin-cli-agentic/{model}"), "max_tokens": 64, "stream": stream,
           "messages": [{"role": "user", "content": text}]})
}

async fn bridge(transport: &str, agent: &str) -> TestBridge {
    bridge_passing(transport, agent, &[]).await
}

/// A bridge whose agent also gets the host's variables `pass` (only this bridge's agent sees
/// them, whatever other tests run at the same time).
async fn bridge_passing(transport: &str, agent: &str, pass: &[&str]) -> TestBridge {
    std::env::set_var("MOCK_DEVIN_LOG", AGENT_LOG);
    let names: Vec<&str> = std::iter::once("MOCK_DEVIN_LOG")
        .chain(pass.iter().copied())
        .collect();
    TestBridge::start(
        "",
        &format!(
            "transport = {transport:?}\nprewarm = 0\n{}\n{agent}",
            pass_env_line(&names)
        ),
    )
    .await
}

/// One turn in the conversation `key` (resident) or alone (per-turn).
async fn send(bridge: &TestBridge, key: &str, body: &Value) -> HttpResponse {
    bridge.conversation_turn(key, body).await
}

fn text_of(response: &HttpResponse) -> String {
    assert_eq!(response.status, 200, "{}", response.body);
    response.json()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn error_of(response: &HttpResponse) -> (u16, String, String) {
    let body = response.json();
    (
        response.status,
        body["error"]["type"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

async fn metrics(bridge: &TestBridge) -> String {
    bridge.request("GET", "/metrics", &[], "").await.body
}

#[tokio::test]
async fn the_requested_model_answers_on_both_transports() {
    for transport in ["per-turn", "resident"] {
        let bridge = bridge(transport, "").await;
        for model in ["swe-1-6", "glm-5.2", "swe-1-7"] {
            let reply = send(
                &bridge,
                &format!("model-{model}"),
                &turn(model, "which model? [mock:whoami]", false),
            )
            .await;
            let expected = format!("model: {}", model.replace('.', "-"));
            assert_eq!(text_of(&reply), expected, "{transport}");
        }
        // The summarizer's sessions have no model option: every model went on the agent's
        // command line (`--model`), none through the session.
        assert!(
            bridge.agent_events("set_config_option").is_empty(),
            "{transport}"
        );
        let metrics = metrics(&bridge).await;
        assert!(
            metrics.contains("devin_bridge_turn_model_total{outcome=\"matched\"} 3"),
            "{transport}: {metrics}"
        );
        bridge.stop().await;
    }
}

#[tokio::test]
async fn a_resident_conversation_moves_to_a_session_of_its_new_model_only_when_its_model_changes() {
    let bridge = bridge("resident", "").await;
    // A request with tools is a conversation turn (one without is a side request, which runs
    // in a session of its own); each turn carries the history with the agent's real replies.
    let tools = json!([{"name": "Bash", "description": "Run a command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]);
    let mut messages: Vec<Value> = Vec::new();
    for (model, text) in [
        ("swe-1-6", "one [mock:whoami]"),
        ("swe-1-6", "two [mock:whoami]"),
        ("swe-2", "three [mock:whoami]"),
    ] {
        messages.push(json!({"role": "user", "content": text}));
        let body = json!({"model": format!("devin-cli-agentic/{model}"), "max_tokens": 64,
                          "tools": tools, "messages": messages});
        let reply = text_of(&send(&bridge, "switch", &body).await);
        assert_eq!(reply, format!("model: {model}"));
        messages.push(json!({"role": "assistant", "content": reply}));
    }
    // The summarizer's model is its process's `--model`: swe-1-6's session serves the first
    // two turns, and swe-2 gets a session of its own on a process started for it.
    assert_eq!(
        bridge.agent_events("session_new").len(),
        2,
        "one session per model"
    );
    assert!(bridge.agent_events("set_config_option").is_empty());
    bridge.stop().await;
}

#[tokio::test]
async fn models_switching_back_and_forth_go_on_the_agents_command_line() {
    for transport in ["per-turn", "resident"] {
        let bridge = bridge(transport, "").await;
        for (key, model) in [("a", "swe-1-6"), ("b", "swe-2"), ("c", "swe-1-6")] {
            let reply = send(
                &bridge,
                &format!("flag-{key}"),
                &turn(model, "which model? [mock:whoami]", false),
            )
            .await;
            assert_eq!(text_of(&reply), format!("model: {model}"), "{transport}");
        }
        assert!(bridge.agent_events("set_config_option").is_empty());
        bridge.stop().await;
    }
}

#[tokio::test]
async fn a_model_the_agent_does_not_offer_is_a_400_naming_the_offered_ones() {
    let dir = tempfile::tempdir().expect("dir");
    let file = common::bridge::catalog_with_a_model_the_agent_lacks(dir.path());
    std::env::set_var("MOCK_DEVIN_LOG", AGENT_LOG);
    for transport in ["per-turn", "resident"] {
        let bridge = TestBridge::start_with_catalog(
            "",
            &format!(
                "transport = {transport:?}\nprewarm = 0\n{}",
                pass_env_line(&["MOCK_DEVIN_LOG"])
            ),
            "",
            &file,
        )
        .await;
        for stream in [false, true] {
            let reply = send(&bridge, "ghost", &turn("ghost-1", "hi [mock:text]", stream)).await;
            let (status, kind, message) = error_of(&reply);
            assert_eq!(
                (status, kind.as_str()),
                (400, "invalid_request_error"),
                "{}",
                reply.body
            );
            assert!(message.contains("ghost-1"), "{message}");
            assert!(
                message.contains("swe-1-7"),
                "names the offered ones: {message}"
            );
        }
        assert!(
            bridge.agent_events("prompt").is_empty(),
            "{transport}: no turn ran"
        );
        bridge.stop().await;
    }
}

#[tokio::test]
async fn a_refused_client_identity_is_a_setup_error_naming_the_setting() {
    for transport in ["per-turn", "resident"] {
        let bridge = bridge(transport, "client_name = \"devin-bridge\"").await;
        for stream in [false, true] {
            let reply = send(
                &bridge,
                "identity",
                &turn("swe-1-7", "hi [mock:text]", stream),
            )
            .await;
            let (status, kind, message) = error_of(&reply);
            assert_eq!(
                (status, kind.as_str()),
                (502, "api_error"),
                "{}",
                reply.body
            );
            assert!(message.contains("client_name"), "{message}");
            assert!(
                !message.contains("out of date"),
                "not the raw agent text: {message}"
            );
        }
        bridge.stop().await;
    }
    // The default identity passes the same gate.
    let bridge = bridge("per-turn", "").await;
    assert_eq!(
        text_of(&send(&bridge, "ok", &turn("swe-1-7", "hi [mock:text]", false)).await),
        "Mock answer: the bridge works."
    );
    bridge.stop().await;
}

#[tokio::test]
async fn rate_limits_are_retried_429s_and_a_used_up_quota_a_400_naming_credits() {
    for transport in ["per-turn", "resident"] {
        let bridge = bridge(transport, "").await;
        for stream in [false, true] {
            for marker in [
                "[mock:rpc-error=unavailable]",
                "[mock:rpc-error=connection]",
            ] {
                let reply = send(&bridge, "limits", &turn("swe-1-7", marker, stream)).await;
                let (status, kind, _) = error_of(&reply);
                assert_eq!(
                    (status, kind.as_str()),
                    (429, "rate_limit_error"),
                    "{transport} {marker} stream={stream}: {}",
                    reply.body
                );
                assert_eq!(
                    reply.header("retry-after"),
                    Some("5"),
                    "{transport} {marker}"
                );
            }
            let reply = send(
                &bridge,
                "quota",
                &turn("swe-1-7", "[mock:rpc-error=resource_exhausted]", stream),
            )
            .await;
            let (status, kind, message) = error_of(&reply);
            assert_eq!(
                (status, kind.as_str()),
                (400, "invalid_request_error"),
                "{transport}: {}",
                reply.body
            );
            assert!(message.contains("credits"), "{message}");
            assert_eq!(reply.header("retry-after"), None);
        }
        bridge.stop().await;
    }
}

/// Waits up to 10 s for the offline agent to have logged `count` `event`s.
async fn wait_for_events(bridge: &TestBridge, event: &str, count: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let seen = bridge.agent_events(event).len();
        if seen >= count || std::time::Instant::now() > deadline {
            return seen;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn sessions_are_deleted_on_the_agent_which_advertises_no_close() {
    // Per turn: each turn's session is deleted before its process ends.
    let per_turn = bridge("per-turn", "").await;
    for key in ["d1", "d2"] {
        text_of(&send(&per_turn, key, &turn("swe-1-7", "hi [mock:text]", false)).await);
    }
    assert_eq!(wait_for_events(&per_turn, "session_delete", 2).await, 2);
    per_turn.stop().await;
    // Resident: a session forgotten for idleness is deleted on its (still running) agent.
    let resident = bridge("resident", "session_idle_ms = 200").await;
    text_of(&send(&resident, "idle", &turn("swe-1-7", "hi [mock:text]", false)).await);
    assert_eq!(wait_for_events(&resident, "session_delete", 1).await, 1);
    resident.stop().await;
}
