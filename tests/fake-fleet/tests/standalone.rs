//! The standalone `fake-fleet` binary and its `/_control/` API.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::call;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

#[tokio::test]
async fn the_binary_prints_its_urls_and_obeys_the_control_api() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-fleet"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--machine-token",
            "m",
            "--orchestrator-token",
            "o",
            "--claim-ttl-secs",
            "5",
        ])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let urls: Value = serde_json::from_str(&line).unwrap();
    let api = urls["api_url"].as_str().unwrap().to_owned();
    assert!(urls["gateway_url"].as_str().unwrap().ends_with("/gateway"));
    assert!(urls["static_base_url"]
        .as_str()
        .unwrap()
        .ends_with("/static/devin-rs/remote"));

    let (status, outpost) = call(
        &api,
        "POST",
        "/_control/outposts",
        None,
        Some(&json!({"name": "rhel", "platform": "linux"})),
    )
    .await;
    assert_eq!(status, 200, "{outpost}");
    let outpost = outpost["outpost_id"].as_str().unwrap().to_owned();
    let (status, session) = call(
        &api,
        "POST",
        "/_control/enqueue",
        None,
        Some(&json!({"outpost_id": outpost, "behaviour": "crash", "remote_binary_sha": "abc1234"})),
    )
    .await;
    assert_eq!(status, 200, "{session}");
    let session = session["session_id"].as_str().unwrap().to_owned();
    let (status, _) = call(
        &api,
        "POST",
        "/_control/faults",
        None,
        Some(&json!({"claim_conflict_next": 1})),
    )
    .await;
    assert_eq!(status, 200);
    let claim = format!("/opbeta/outposts/devins/{session}/claim");
    let body = json!({"acceptor_id": "w1"});
    assert_eq!(
        call(&api, "POST", &claim, Some("m"), Some(&body)).await.0,
        409
    );
    let (status, claimed) = call(&api, "POST", &claim, Some("m"), Some(&body)).await;
    assert_eq!(status, 200);
    assert_eq!(claimed["spec"]["remote_binary_sha"], "abc1234");

    let (_, history) = call(
        &api,
        "GET",
        &format!("/_control/history?session={session}"),
        None,
        None,
    )
    .await;
    let kinds: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["ClaimConflict", "Claimed"]);
    let (status, stats) = call(&api, "GET", "/_control/stats", None, None).await;
    assert_eq!(status, 200);
    assert_eq!(stats["sessions"][0]["session_id"], session.as_str());
    assert!(stats["requests"].as_array().unwrap().len() >= 2);
}
