//! An agent whose home is not logged in fails a turn as "not signed in" (at `session/new` or,
//! as newer CLIs do and the offline agent does by default, at the prompt). When
//! `WINDSURF_API_KEY` reaches the agent, the CLI reads it from its environment and is signed
//! in without any `authenticate`; without the key the turn fails closed as a gateway error
//! that says how to log in, and the browser flow is never started. (The bridge's one headless
//! `authenticate` and retry, for a CLI that still refuses, is tested with the dialect's unit
//! tests and the logged-out traces of `tests/traces/`.)

use crate::common;

use common::bridge::TestBridge;
use serde_json::{json, Value};

/// A bridge on the file catalog (no start-up probe signs the agent in first) and `transport`.
async fn bridge(transport: &str, pass_env: &[&str]) -> TestBridge {
    common::bridge::signed_out_agent_environment();
    let pass: Vec<&str> = ["MOCK_DEVIN_LOG", "MOCK_DEVIN_LOGGED_OUT"]
        .iter()
        .chain(pass_env)
        .copied()
        .collect();
    TestBridge::start(
        "",
        &format!(
            "transport = {transport:?}\nprewarm = 0\n{}",
            common::bridge::pass_env_line(&pass)
        ),
    )
    .await
}

fn turn(text: &str) -> Value {
    json!({"model": "devin-cli-agentic/swe-1-7", "max_tokens": 16,
           "messages": [{"role": "user", "content": text}]})
}

fn sign_ins(bridge: &TestBridge) -> Vec<Value> {
    bridge
        .agent_events("authenticate")
        .into_iter()
        .map(|event| event["apiKey"].clone())
        .collect()
}

#[tokio::test]
async fn a_per_turn_agent_given_the_api_key_in_its_environment_needs_no_authenticate() {
    let bridge = bridge("per-turn", &["WINDSURF_API_KEY"]).await;
    for _ in 0..2 {
        let reply = bridge.messages(&turn("hi [mock:text]")).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    // The CLI prefers the key in its environment: no process needed `authenticate`.
    assert!(sign_ins(&bridge).is_empty(), "{:?}", sign_ins(&bridge));
    assert!(bridge.agent_events("browser_login").is_empty());
    bridge.stop().await;
}

#[tokio::test]
async fn a_resident_agent_given_the_api_key_in_its_environment_serves_every_session() {
    let bridge = bridge("resident", &["WINDSURF_API_KEY"]).await;
    let first = bridge
        .conversation_turn("signed-in-a", &turn("one [mock:text]"))
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let second = bridge
        .conversation_turn("signed-in-b", &turn("two [mock:text]"))
        .await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(bridge.agent_events("session_new").len(), 2);
    assert!(sign_ins(&bridge).is_empty(), "{:?}", sign_ins(&bridge));
    bridge.stop().await;
}

#[tokio::test]
async fn without_the_key_a_turn_fails_closed_and_nothing_signs_in() {
    for transport in ["per-turn", "resident"] {
        let bridge = bridge(transport, &[]).await;
        let reply = bridge
            .conversation_turn("signed-out", &turn("hi [mock:text]"))
            .await;
        assert_eq!(reply.status, 502, "{transport}: {}", reply.body);
        assert!(
            reply.body.contains("the agent is not logged in"),
            "{transport}: {}",
            reply.body
        );
        assert!(sign_ins(&bridge).is_empty(), "{transport}");
        assert!(bridge.agent_events("browser_login").is_empty());
        bridge.stop().await;
    }
}
