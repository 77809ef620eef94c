//! The official Anthropic SDK (TypeScript, pinned in `tools/test-setup`) reads the bridge's
//! answers: every streamed reply (text written slowly, prose then a call, a repair after shown
//! text, an error after shown text) through its own stream accumulator, and the accumulated
//! message equals the JSON answer to the same request.

use crate::common;

use std::process::Command;

use common::bridge::{pass_env_line, TestBridge, AGENT_LOG};
use serde_json::Value;

use super::summarizer::request;

/// The SDK's `{streamed, json}` for `body` (see `host/tests/sdk/accumulate.mjs`).
fn read_with_the_sdk(addr: std::net::SocketAddr, body: &Value) -> Value {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("sdk")
        .join("accumulate.mjs");
    let output = Command::new("node")
        .arg(script)
        .arg(format!("http://{addr}"))
        .arg(body.to_string())
        .env("NODE_PATH", common::artifacts::anthropic_sdk())
        .output()
        .expect("node runs");
    assert!(
        output.status.success(),
        "the SDK script failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON line")
}

#[tokio::test]
async fn the_sdks_accumulated_stream_is_the_json_answer_on_both_transports() {
    for transport in ["per-turn", "resident"] {
        std::env::set_var("MOCK_DEVIN_LOG", AGENT_LOG);
        std::env::set_var("MOCK_DEVIN_SLOW_MS", "200");
        let bridge = TestBridge::start(
            "",
            &format!(
                "transport = {transport:?}\nprewarm = 0\n{}",
                pass_env_line(&["MOCK_DEVIN_LOG", "MOCK_DEVIN_SLOW_MS"])
            ),
        )
        .await;
        for marker in [
            "[mock:slow]",
            "[mock:prose-tool=plain]",
            "[mock:narrate-then-tool]",
        ] {
            let (addr, body) = (bridge.addr, request(marker, true));
            let answers = tokio::task::spawn_blocking(move || read_with_the_sdk(addr, &body))
                .await
                .expect("sdk");
            let label = format!("{transport} {marker}");
            assert!(answers["streamed"]["error"].is_null(), "{label}: {answers}");
            assert_eq!(answers["streamed"], answers["json"], "{label}");
            let content = answers["streamed"]["content"].as_array().expect("content");
            assert_eq!(content[0]["type"], "text", "{label}: {answers}");
            if marker != "[mock:slow]" {
                assert_eq!(content[1]["type"], "tool_use", "{label}: {answers}");
                assert_eq!(answers["streamed"]["stop_reason"], "tool_use", "{label}");
            }
        }
        // An error after shown text: the SDK saw the text, then the error event.
        let (addr, body) = (bridge.addr, request("[mock:narrate-always]", true));
        let answers = tokio::task::spawn_blocking(move || read_with_the_sdk(addr, &body))
            .await
            .expect("sdk");
        assert_eq!(answers["streamed"]["error"], "api_error", "{answers}");
        assert!(
            answers["streamed"]["text"]
                .as_str()
                .is_some_and(|text| text.starts_with("I'll run the tests next to check the fix.")),
            "{transport}: {answers}"
        );
        assert_eq!(answers["json"]["error"], "api_error", "{answers}");
        bridge.stop().await;
    }
}
