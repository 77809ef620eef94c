//! `devin-bridge outpost create | list | delete` against the fake fleet API, and the start
//! command's refusals.

use std::process::Output;

use devin_bridge_fake_fleet::{FakeFleet, FleetConfig};

async fn run(fleet: &FakeFleet, token: &str, args: &[&str]) -> Output {
    let home = tempfile::tempdir().expect("home");
    tokio::process::Command::new(env!("CARGO_BIN_EXE_devin-bridge"))
        .arg("outpost")
        .args(args)
        .args(["--api-url", &fleet.api_url()])
        .env_clear()
        .env("HOME", home.path())
        .env("DEVIN_OUTPOSTS_TOKEN", token)
        .output()
        .await
        .expect("devin-bridge runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn create_list_and_delete_an_outpost_with_the_orchestrator_token() {
    let fleet = FakeFleet::start(FleetConfig::default())
        .await
        .expect("fleet");
    let created = run(
        &fleet,
        "orchestrator-token",
        &[
            "create",
            "gpu-h200",
            "--platform",
            "linux",
            "--description",
            "H200 boxes",
        ],
    )
    .await;
    assert!(created.status.success(), "{}", text(&created.stderr));
    let id = text(&created.stdout).trim().to_owned();
    assert!(id.starts_with("outpost_env-"), "{id}");

    let listed = run(&fleet, "machine-token", &["list", "--json"]).await;
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let outposts: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("json");
    assert_eq!(outposts[0]["metadata"]["outpost_id"], id.as_str());
    assert_eq!(outposts[0]["spec"]["name"], "gpu-h200");
    let table = run(&fleet, "machine-token", &["list"]).await;
    assert!(
        text(&table.stdout).contains("gpu-h200"),
        "{}",
        text(&table.stdout)
    );

    let deleted = run(&fleet, "orchestrator-token", &["delete", &id]).await;
    assert!(deleted.status.success(), "{}", text(&deleted.stderr));
    let again = run(&fleet, "machine-token", &["list", "--json"]).await;
    assert_eq!(text(&again.stdout).trim(), "[]");
}

#[tokio::test]
async fn creating_with_the_machine_token_is_refused_with_the_apis_reason() {
    let fleet = FakeFleet::start(FleetConfig::default())
        .await
        .expect("fleet");
    let refused = run(
        &fleet,
        "machine-token",
        &["create", "x", "--platform", "linux"],
    )
    .await;
    assert!(!refused.status.success());
    let stderr = text(&refused.stderr);
    assert!(stderr.contains("403"), "{stderr}");
    assert!(
        !stderr.contains("machine-token"),
        "the token was printed: {stderr}"
    );
}

#[tokio::test]
async fn a_bad_platform_or_outpost_id_is_refused_before_any_request() {
    let fleet = FakeFleet::start(FleetConfig::default())
        .await
        .expect("fleet");
    let bad_platform = run(
        &fleet,
        "orchestrator-token",
        &["create", "x", "--platform", "beos"],
    )
    .await;
    assert!(!bad_platform.status.success());
    assert!(text(&bad_platform.stderr).contains("linux, macos, windows"));
    let bad_id = run(&fleet, "orchestrator-token", &["delete", "../../etc"]).await;
    assert!(!bad_id.status.success());
    assert!(fleet.requests().is_empty(), "{:?}", fleet.requests());
}

#[tokio::test]
async fn a_policy_of_another_mode_is_refused() {
    let fleet = FakeFleet::start(FleetConfig::default())
        .await
        .expect("fleet");
    let dir = tempfile::tempdir().expect("dir");
    let policy = dir.path().join("companion.toml");
    std::fs::write(&policy, "mode = \"companion\"\n").expect("policy");
    let refused = run(
        &fleet,
        "machine-token",
        &["start", "--policy", policy.to_str().expect("utf-8")],
    )
    .await;
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("needs `mode = \"outpost\"`"),
        "{}",
        text(&refused.stderr)
    );
}
