//! `[models] source = "live"`: `/v1/models` and model validation use the account's catalog,
//! read from the agent's session (the offline agent offers `swe-1-7` and `swe-1-7-lightning`,
//! fewer than `policies/models.json`), cached, with the file as the fallback; an agent that
//! needs authentication is authenticated once with its API-key method, never a browser.

use crate::common;

use std::time::{Duration, Instant};

use common::bridge::TestBridge;
use serde_json::{json, Value};

/// What the offline agent's session offers.
const LIVE_MODELS: [&str; 2] = [
    "devin-cli-agentic/swe-1-7",
    "devin-cli-agentic/swe-1-7-lightning",
];

async fn bridge(pass_env: &[&str], extra_server: &str) -> TestBridge {
    common::bridge::signed_out_agent_environment();
    let pass: Vec<&str> = ["MOCK_DEVIN_LOG"].iter().chain(pass_env).copied().collect();
    TestBridge::start_with_models(
        "",
        &format!("prewarm = 0\n{}", common::bridge::pass_env_line(&pass)),
        &format!("source = \"live\"\n{extra_server}"),
    )
    .await
}

async fn listed(bridge: &TestBridge) -> Vec<String> {
    bridge
        .model_cards()
        .await
        .iter()
        .filter_map(|card| card["id"].as_str().map(str::to_owned))
        .collect()
}

async fn catalog_status(bridge: &TestBridge) -> Value {
    bridge.request("GET", "/healthz", &[], "").await.json()["catalog"].clone()
}

fn turn(model: &str) -> Value {
    json!({"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi [mock:text]"}]})
}

#[tokio::test]
async fn the_live_catalog_is_listed_and_validates_models() {
    let bridge = bridge(&[], "").await;
    assert_eq!(listed(&bridge).await, LIVE_MODELS);
    let status = catalog_status(&bridge).await;
    assert_eq!(status["source"], "live", "{status}");
    assert_eq!(status["models"], 2, "{status}");
    // In the file's catalog, not in the account's: refused.
    let refused = bridge.messages(&turn("devin-cli-agentic/swe-2")).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    let accepted = bridge.messages(&turn("devin-cli-agentic/swe-1-7")).await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    bridge.stop().await;
}

#[tokio::test]
async fn an_agent_that_needs_authentication_is_authenticated_once_with_its_api_key() {
    let bridge = bridge(&["MOCK_DEVIN_REQUIRE_AUTH", "WINDSURF_API_KEY"], "").await;
    assert_eq!(listed(&bridge).await, LIVE_MODELS);
    assert_eq!(catalog_status(&bridge).await["source"], "live");
    let methods: Vec<Value> = bridge
        .agent_events("authenticate")
        .into_iter()
        .map(|event| event["methodId"].clone())
        .collect();
    assert_eq!(methods, [json!("windsurf-api-key")]);
    assert!(bridge.agent_events("browser_flow").is_empty());
    bridge.stop().await;
}

#[tokio::test]
async fn without_a_key_the_probe_fails_closed_to_the_file_catalog_and_never_opens_a_browser() {
    let bridge = bridge(&["MOCK_DEVIN_REQUIRE_AUTH"], "").await;
    let models = listed(&bridge).await;
    assert!(
        models.len() > LIVE_MODELS.len(),
        "the file's catalog: {models:?}"
    );
    assert!(models.iter().any(|id| id == "devin-cli-agentic/swe-2"));
    let status = catalog_status(&bridge).await;
    assert_eq!(status["source"], "file", "{status}");
    assert!(status["probe_error"].is_string(), "{status}");
    assert!(bridge.agent_events("authenticate").is_empty());
    assert!(bridge.agent_events("browser_flow").is_empty());
    bridge.stop().await;
}

#[tokio::test]
async fn an_expired_catalog_is_read_again() {
    let bridge = bridge(&[], "discovery_cache_ms = 200").await;
    assert_eq!(listed(&bridge).await, LIVE_MODELS);
    let probes = || bridge.agent_events("session_new").len();
    let before = probes();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A use after expiry starts a refresh in the background; the catalog in force serves.
    assert_eq!(listed(&bridge).await, LIVE_MODELS);
    let deadline = Instant::now() + Duration::from_secs(10);
    while probes() == before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(probes() > before, "no second probe");
    bridge.stop().await;
}
