//! A component's failure status is checked: a status outside 400-599 is answered as a generic
//! 502, without the component's text, whatever endpoint the failure surfaces on.

use crate::common;

use common::bridge::TestBridge;
use devin_bridge_engine::TransformKind;
use serde_json::json;

fn request(content: &str) -> serde_json::Value {
    json!({
        "model": "devin-cli-agentic/swe-1-7",
        "max_tokens": 64,
        "messages": [{ "role": "user", "content": content }]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_error_statuses_from_a_component_become_a_generic_502() {
    let bridge = TestBridge::start("", "prewarm = 0").await;
    let path = devin_bridge_test_artifacts::MISBEHAVING_SERIALIZER
        .path()
        .to_path_buf();
    let bytes = std::fs::read(&path).expect("misbehaving serializer");
    let transforms = bridge.bridge.transforms().clone();
    tokio::task::spawn_blocking(move || {
        transforms
            .swap(
                TransformKind::Serializer,
                &bytes,
                path.display().to_string(),
            )
            .expect("the misbehaving serializer passes the corpus")
    })
    .await
    .expect("swap");

    for marker in ["__STATUS_204__", "__STATUS_101__"] {
        for endpoint in ["/v1/messages", "/v1/messages/count_tokens"] {
            let response = bridge
                .request("POST", endpoint, &[], &request(marker).to_string())
                .await;
            assert_eq!(response.status, 502, "{marker} on {endpoint}: {response:?}");
            let body = response.json();
            assert_eq!(body["type"], "error", "{body}");
            assert_eq!(body["error"]["type"], "api_error", "{body}");
            let message = body["error"]["message"].as_str().expect("message");
            assert!(
                !message.contains("component text") && !message.contains("/srv"),
                "{marker}: the component's text reached the client: {message}"
            );
        }
    }
    // The same serializer still serves ordinary requests (the check is per failure).
    let counted = bridge
        .request(
            "POST",
            "/v1/messages/count_tokens",
            &[],
            &request("hello").to_string(),
        )
        .await;
    assert_eq!(counted.status, 200, "{counted:?}");
    bridge.stop().await;
}
