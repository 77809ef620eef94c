//! `[models] source = "live"`: `/v1/models` and model validation use the account's catalog,
//! cached, with the file as the fallback (the file here has a model no agent offers,
//! `ghost-1`). The summarizer's sessions have no model option, so the catalog is read from a
//! session of the same CLI's full agent (the offline full agent offers the six models of its
//! own catalog; it needs its configuration file, given here through `XDG_CONFIG_HOME`). A
//! logged-out agent without a key fails the probe closed: the file's catalog serves and no
//! browser is ever opened.

use crate::common;

use std::time::{Duration, Instant};

use common::bridge::TestBridge;
use serde_json::{json, Value};

/// What the offline full agent's session offers.
const LIVE_MODELS: [&str; 6] = [
    "devin-cli-agentic/swe-2",
    "devin-cli-agentic/swe-2-fast",
    "devin-cli-agentic/swe-2-high",
    "devin-cli-agentic/kimi-k3",
    "devin-cli-agentic/glm-5-2",
    "devin-cli-agentic/muse-wonder",
];

/// A configuration directory holding the full agent's `devin/config.json` (an empty
/// configuration), set as this process's `XDG_CONFIG_HOME` for the agents these tests pass it to.
fn full_agent_configuration() {
    static SET: std::sync::Once = std::sync::Once::new();
    SET.call_once(|| {
        let dir = std::env::temp_dir().join(format!(
            "devin-bridge-live-catalog-config-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(dir.join("devin")).expect("config dir");
        std::fs::write(dir.join("devin").join("config.json"), "{}").expect("config");
        std::env::set_var("XDG_CONFIG_HOME", &dir);
    });
}

async fn bridge(pass_env: &[&str], extra_server: &str) -> TestBridge {
    common::bridge::signed_out_agent_environment();
    full_agent_configuration();
    let pass: Vec<&str> = ["MOCK_DEVIN_LOG", "XDG_CONFIG_HOME"]
        .iter()
        .chain(pass_env)
        .copied()
        .collect();
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
    let bridge = bridge(&["WINDSURF_API_KEY"], "").await;
    assert_eq!(listed(&bridge).await, LIVE_MODELS);
    let status = catalog_status(&bridge).await;
    assert_eq!(status["source"], "live", "{status}");
    assert_eq!(status["models"], 6, "{status}");
    // In the file's catalog, not in the account's: refused.
    let refused = bridge.messages(&turn("devin-cli-agentic/ghost-1")).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    let accepted = bridge.messages(&turn("devin-cli-agentic/swe-2")).await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    bridge.stop().await;
}

#[tokio::test]
async fn an_agent_given_the_key_in_its_environment_lists_the_accounts_models_without_authenticate()
{
    let bridge = bridge(&["MOCK_DEVIN_LOGGED_OUT", "WINDSURF_API_KEY"], "").await;
    assert_eq!(listed(&bridge).await, LIVE_MODELS);
    assert_eq!(catalog_status(&bridge).await["source"], "live");
    // The CLI reads the key from its environment: nothing needed `authenticate`.
    let methods: Vec<Value> = bridge.agent_events("authenticate");
    assert!(methods.is_empty(), "{methods:?}");
    assert!(bridge.agent_events("browser_login").is_empty());
    bridge.stop().await;
}

#[tokio::test]
async fn without_a_key_the_probe_fails_closed_to_the_file_catalog_and_never_opens_a_browser() {
    // The older CLIs' variant: a logged-out `session/new` is refused, so the probe has no list.
    std::env::set_var("MOCK_DEVIN_LOGOUT_STYLE", "session_new");
    let bridge = bridge(&["MOCK_DEVIN_LOGGED_OUT", "MOCK_DEVIN_LOGOUT_STYLE"], "").await;
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
    let bridge = bridge(&["WINDSURF_API_KEY"], "discovery_cache_ms = 200").await;
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
