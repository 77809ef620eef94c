//! Side requests the bridge answers without an agent turn: Claude Code's session-title request
//! (captured from 2.1.332, `tests/fixtures/requests/claude-code-session-title.json`) gets its
//! `{"title": ...}` JSON at once on both transports, streamed or not, and the offline agent's
//! log shows no prompt, whatever the wording of its instructions. With `[server]
//! local_side_requests = false`, a request that has only some of its features, and a main
//! turn, the agent answers.

use crate::common;

use common::bridge::{pass_env_line, HttpResponse, TestBridge, AGENT_LOG};
use serde_json::{json, Value};

/// The captured title request, with the catalog's model in place of the one Claude Code named
/// (the bridge's client environment makes every role use the catalog's models).
fn title_request(stream: bool) -> Value {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/requests/claude-code-session-title.json"),
    )
    .expect("the captured title request");
    let mut body: Value = serde_json::from_str(&text).expect("JSON");
    body["model"] = json!("devin-cli-agentic/swe-1-7");
    body["stream"] = json!(stream);
    body
}

/// The title the bridge makes of the captured request's session text
/// ("fix the failing test in math.js please").
const TITLE: &str = "Fix the failing test in math.js";

async fn bridge(transport: &str, server: &str) -> TestBridge {
    std::env::set_var("MOCK_DEVIN_LOG", AGENT_LOG);
    TestBridge::start(
        server,
        &format!(
            "transport = {transport:?}\nprewarm = 0\n{}",
            pass_env_line(&["MOCK_DEVIN_LOG"])
        ),
    )
    .await
}

/// The reply's text, from a JSON message or the text deltas of a stream.
fn reply_text(response: &HttpResponse, stream: bool) -> String {
    assert_eq!(response.status, 200, "{}", response.body);
    if !stream {
        let message = response.json();
        assert_eq!(message["stop_reason"], "end_turn", "{message}");
        return message["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
    }
    let events = response.events();
    assert_eq!(
        events.first().map(|(name, _)| name.as_str()),
        Some("message_start")
    );
    assert_eq!(
        events.last().map(|(name, _)| name.as_str()),
        Some("message_stop")
    );
    events
        .iter()
        .filter(|(name, _)| name == "content_block_delta")
        .filter_map(|(_, data)| data["delta"]["text"].as_str())
        .collect()
}

async fn metrics(bridge: &TestBridge) -> String {
    bridge.request("GET", "/metrics", &[], "").await.body
}

/// The resident transport's count of turns in an ephemeral session (`/healthz`).
async fn ephemeral_turns(bridge: &TestBridge) -> u64 {
    let health: Value = bridge.request("GET", "/healthz", &[], "").await.json();
    health["resident"]["ephemeral"]
        .as_u64()
        .unwrap_or_else(|| panic!("no resident.ephemeral in {health}"))
}

fn side_requests(purpose: &str, answered: &str, count: u32) -> String {
    format!(
        "devin_bridge_side_requests_total{{purpose=\"{purpose}\",answered=\"{answered}\"}} {count}"
    )
}

#[tokio::test]
async fn the_captured_title_request_is_answered_without_an_agent_on_both_transports() {
    for transport in ["per-turn", "resident"] {
        let bridge = bridge(transport, "").await;
        for stream in [false, true] {
            let response = bridge
                .conversation_turn("titled", &title_request(stream))
                .await;
            let text = reply_text(&response, stream);
            let title: Value = serde_json::from_str(&text)
                .unwrap_or_else(|error| panic!("{transport}: not JSON ({error}): {text}"));
            assert_eq!(
                title,
                json!({ "title": TITLE }),
                "{transport} stream={stream}"
            );
        }
        // Without a session header too, and with instructions worded another way.
        let mut reworded = title_request(false);
        reworded["system"][2]["text"] =
            json!("Name this coding session. Return JSON with a single \"title\" field.");
        for body in [title_request(false), reworded] {
            let response = bridge.messages(&body).await;
            assert_eq!(
                serde_json::from_str::<Value>(&reply_text(&response, false)).expect("JSON"),
                json!({ "title": TITLE })
            );
        }
        assert!(
            bridge.agent_events("prompt").is_empty(),
            "{transport}: the agent was prompted: {:?}",
            bridge.agent_events("prompt")
        );
        assert!(
            bridge.agent_events("session_new").is_empty(),
            "{transport}: a session was started"
        );
        assert_eq!(bridge.agents(), 0, "{transport}: an agent process runs");
        let metrics = metrics(&bridge).await;
        for expected in [
            side_requests("session_title", "local", 4),
            "devin_bridge_messages_total{kind=\"side_request\"} 4".to_owned(),
        ] {
            assert!(metrics.contains(&expected), "{transport}: {metrics}");
        }
        assert!(
            !metrics.contains("answered=\"agent\""),
            "{transport}: {metrics}"
        );
        if transport == "resident" {
            assert_eq!(
                ephemeral_turns(&bridge).await,
                0,
                "a local answer is no ephemeral turn"
            );
        }
        bridge.stop().await;
    }
}

#[tokio::test]
async fn with_local_side_requests_off_the_agent_answers_the_title_request() {
    for transport in ["per-turn", "resident"] {
        let bridge = bridge(transport, "local_side_requests = false").await;
        let response = bridge
            .conversation_turn("untitled", &title_request(false))
            .await;
        assert_eq!(response.status, 200, "{transport}: {}", response.body);
        assert_eq!(
            bridge.agent_events("prompt").len(),
            1,
            "{transport}: the agent answers"
        );
        let metrics = metrics(&bridge).await;
        assert!(
            metrics.contains(&side_requests("session_title", "agent", 1)),
            "{transport}: {metrics}"
        );
        assert!(
            !metrics.contains("answered=\"local\""),
            "{transport}: {metrics}"
        );
        if transport == "resident" {
            assert_eq!(ephemeral_turns(&bridge).await, 1);
        }
        bridge.stop().await;
    }
}

#[tokio::test]
async fn a_main_turn_and_a_title_request_of_another_shape_go_to_the_agent() {
    let bridge = bridge("per-turn", "").await;
    // The same request with a tool: a main turn, never a side request.
    let mut main_turn = title_request(false);
    main_turn["tools"] = json!([{"name": "Bash", "description": "Run a command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]);
    // A schema that asks for a second property: only some of the title request's features.
    let mut near_miss = title_request(true);
    near_miss["output_config"]["format"]["schema"]["properties"]["emoji"] =
        json!({"type": "string"});
    // Two user messages.
    let mut two_messages = title_request(false);
    let message = two_messages["messages"][0].clone();
    two_messages["messages"] = json!([message, {"role": "assistant", "content": "ok"}, message]);
    for (name, body) in [
        ("main turn", &main_turn),
        ("near miss", &near_miss),
        ("two messages", &two_messages),
    ] {
        let response = bridge.conversation_turn(name, body).await;
        assert_eq!(response.status, 200, "{name}: {}", response.body);
    }
    assert_eq!(
        bridge.agent_events("prompt").len(),
        3,
        "every one is a turn"
    );
    let metrics = metrics(&bridge).await;
    for expected in [
        side_requests("unknown", "agent", 2),
        "devin_bridge_messages_total{kind=\"main_turn\"} 1".to_owned(),
        "devin_bridge_messages_total{kind=\"side_request\"} 2".to_owned(),
    ] {
        assert!(metrics.contains(&expected), "{metrics}");
    }
    assert!(!metrics.contains("answered=\"local\""), "{metrics}");
    bridge.stop().await;
}
