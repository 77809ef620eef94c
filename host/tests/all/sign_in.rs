//! An agent whose home is not logged in answers `session/new` with `-32000`. On a turn, on
//! either transport, the bridge then signs it in once, headless (`authenticate` with
//! `devin-browser` and the key in `_meta`), only when `WINDSURF_API_KEY` reaches the agent, and
//! asks again; without the key the turn fails closed as a gateway error that says how to log
//! in, and the browser flow is never started.

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
async fn a_per_turn_agent_that_needs_authentication_is_signed_in_with_its_api_key() {
    let bridge = bridge("per-turn", &["WINDSURF_API_KEY"]).await;
    for _ in 0..2 {
        let reply = bridge.messages(&turn("hi [mock:text]")).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    // One agent process per turn, each signed in once.
    assert_eq!(sign_ins(&bridge), [json!(true), json!(true)]);
    assert!(bridge.agent_events("browser_login").is_empty());
    bridge.stop().await;
}

#[tokio::test]
async fn a_resident_agent_is_signed_in_once_for_every_session_it_serves() {
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
    assert_eq!(sign_ins(&bridge), [json!(true)]);
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
