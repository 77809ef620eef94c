//! `[models] source = "live"`: `/v1/models` and model validation use the account's catalog,
//! read from the agent's session's model option (the offline agent offers the eight models of
//! `policies/models.json`; the file here has a ninth, `ghost-1`), cached, with the file as the
//! fallback; an agent that is not logged in is signed in once, headless, never in a browser.

use crate::common;

use std::time::{Duration, Instant};

use common::bridge::TestBridge;
use serde_json::{json, Value};

/// What the offline agent's session offers.
const LIVE_MODELS: [&str; 8] = [
    "devin-cli-agentic/swe-1-7",
    "devin-cli-agentic/swe-1-7-lightning",
    "devin-cli-agentic/swe-1-6",
    "devin-cli-agentic/swe-1-6-fast",
    "devin-cli-agentic/swe-2",
    "devin-cli-agentic/kimi-k3",
    "devin-cli-agentic/glm-5-2",
    "devin-cli-agentic/muse-wonder",
];

async fn bridge(pass_env: &[&str], extra_server: &str) -> TestBridge {
    common::bridge::signed_out_agent_environment();
    let pass: Vec<&str> = ["MOCK_DEVIN_LOG"].iter().chain(pass_env).copied().collect();
    let dir = tempfile::tempdir().expect("dir");
    let catalog = common::bridge::catalog_with_a_model_the_agent_lacks(dir.path());
    let bridge = TestBridge::start_with_catalog(
        "",
        &format!("prewarm = 0\n{}", common::bridge::pass_env_line(&pass)),
        &format!("source = \"live\"\n{extra_server}"),
        &catalog,
    )
    .await;
    // The file is read at start-up and on a failed probe's fallback, which has happened by now.
    drop(dir);
    bridge
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
    assert_eq!(status["models"], 8, "{status}");
    // In the file's catalog, not in the account's: refused.
    let refused = bridge.messages(&turn("devin-cli-agentic/ghost-1")).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    let accepted = bridge.messages(&turn("devin-cli-agentic/swe-1-7")).await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    bridge.stop().await;
}

#[tokio::test]
async fn an_agent_that_needs_authentication_is_authenticated_once_with_its_api_key() {
    let bridge = bridge(&["MOCK_DEVIN_LOGGED_OUT", "WINDSURF_API_KEY"], "").await;
    assert_eq!(listed(&bridge).await, LIVE_MODELS);
    assert_eq!(catalog_status(&bridge).await["source"], "live");
    let methods: Vec<Value> = bridge
        .agent_events("authenticate")
        .into_iter()
        .map(|event| event["apiKey"].clone())
        .collect();
    assert_eq!(methods, [json!(true)], "one headless sign-in with the key");
    assert!(bridge.agent_events("browser_login").is_empty());
    bridge.stop().await;
}

#[tokio::test]
async fn without_a_key_the_probe_fails_closed_to_the_file_catalog_and_never_opens_a_browser() {
    let bridge = bridge(&["MOCK_DEVIN_LOGGED_OUT"], "").await;
    let models = listed(&bridge).await;
    assert!(
        models.len() > LIVE_MODELS.len(),
        "the file's catalog: {models:?}"
    );
    assert!(models.iter().any(|id| id == "devin-cli-agentic/ghost-1"));
    let status = catalog_status(&bridge).await;
    assert_eq!(status["source"], "file", "{status}");
    assert!(status["probe_error"].is_string(), "{status}");
    assert!(bridge.agent_events("authenticate").is_empty());
    assert!(bridge.agent_events("browser_login").is_empty());
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
