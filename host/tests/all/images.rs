//! Image blocks through the real HTTP endpoint: with an agent that advertises image prompts
//! (the offline agent with `MOCK_DEVIN_IMAGES=1`) they reach it as ACP image blocks, within the
//! policy's limits, on both transports; with one that does not, they are refused as before.

use crate::common;

use std::sync::Once;

use common::bridge::TestBridge;
use serde_json::{json, Value};

/// A 1x1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn environment() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        std::env::set_var("MOCK_DEVIN_IMAGES", "1");
        std::env::set_var("MOCK_DEVIN_LOG", common::bridge::AGENT_LOG);
    });
}

/// A bridge whose agent takes images (`images = true`) or not.
async fn bridge(images: bool, extra: &str) -> TestBridge {
    environment();
    let pass = if images {
        r#"pass_env = ["MOCK_DEVIN_LOG", "MOCK_DEVIN_IMAGES"]"#
    } else {
        r#"pass_env = ["MOCK_DEVIN_LOG"]"#
    };
    TestBridge::start("", &format!("prewarm = 0\n{pass}\n{extra}")).await
}

fn image(media_type: &str, data: &str) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
}

fn request(content: Vec<Value>) -> Value {
    json!({
        "model": "devin-cli-agentic/swe-1-7",
        "max_tokens": 256,
        "tools": [{"name": "Read", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": content}]
    })
}

fn text(value: &str) -> Value {
    json!({"type": "text", "text": value})
}

fn reply_text(response: &common::bridge::HttpResponse) -> String {
    assert_eq!(response.status, 200, "{}", response.body);
    response.json()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn prompts(bridge: &TestBridge) -> Vec<Value> {
    bridge.agent_events("prompt")
}

async fn vision(bridge: &TestBridge) -> Vec<bool> {
    bridge
        .model_cards()
        .await
        .iter()
        .map(|card| card["capabilities"]["vision"].as_bool().unwrap_or(false))
        .collect()
}

#[tokio::test]
async fn images_reach_the_agent_as_image_blocks_and_models_report_vision() {
    let bridge = bridge(true, "").await;
    let jpeg = image("image/jpeg", "/9j/4AAQ");
    let response = bridge
        .messages(&request(vec![
            text("Two pictures."),
            image("image/png", PNG),
            jpeg,
            text("[mock:images]"),
        ]))
        .await;
    assert_eq!(reply_text(&response), "images: 2 (image/png, image/jpeg)");
    let seen = prompts(&bridge);
    assert_eq!(seen[0]["images"], 2);
    let models = vision(&bridge).await;
    assert!(
        !models.is_empty() && models.iter().all(|v| *v),
        "{models:?}"
    );
    bridge.stop().await;
}

#[tokio::test]
async fn only_the_most_recent_images_within_the_size_limit_are_attached() {
    // Three images of 3, 6 and 3 bytes; at most 2 are attached, each at most 4 bytes.
    let bridge = bridge(true, "max_images = 2\nmax_image_bytes = 4").await;
    let response = bridge
        .messages(&request(vec![
            image("image/gif", "R0lG"),
            image("image/png", "iVBORw0K"),
            image("image/webp", "UklG"),
            text("[mock:images]"),
        ]))
        .await;
    // The gif is older than the two most recent; the png is over 4 bytes.
    assert_eq!(reply_text(&response), "images: 1 (image/webp)");
    bridge.stop().await;
}

#[tokio::test]
async fn a_resident_session_receives_each_image_once() {
    let bridge = bridge(true, "transport = \"resident\"").await;
    let mut body = request(vec![
        text("Look."),
        image("image/png", PNG),
        text("[mock:images]"),
    ]);
    let first = bridge.conversation_turn("pictures", &body).await;
    assert_eq!(reply_text(&first), "images: 1 (image/png)");
    let messages = body["messages"].as_array_mut().expect("messages");
    messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": "images: 1 (image/png)"}]}));
    messages.push(json!({"role": "user", "content": "And now? [mock:images]"}));
    let second = bridge.conversation_turn("pictures", &body).await;
    assert_eq!(reply_text(&second), "images: 0 ()");
    let seen = prompts(&bridge);
    assert_eq!(seen[1]["received"], "continuation");
    assert_eq!(seen[1]["sessionId"], seen[0]["sessionId"]);
    bridge.stop().await;
}

#[tokio::test]
async fn without_image_support_images_are_refused_and_vision_is_off() {
    let bridge = bridge(false, "").await;
    let response = bridge
        .messages(&request(vec![
            image("image/png", PNG),
            text("[mock:images]"),
        ]))
        .await;
    assert_eq!(response.status, 400, "{}", response.body);
    assert_eq!(response.json()["error"]["type"], "invalid_request_error");
    assert!(response.body.contains("not supported"), "{}", response.body);
    assert!(
        prompts(&bridge).is_empty(),
        "no agent turn for a refused request"
    );
    let models = vision(&bridge).await;
    assert!(models.iter().all(|v| !v), "{models:?}");
    bridge.stop().await;
}

#[tokio::test]
async fn malformed_images_are_client_errors() {
    let bridge = bridge(true, "").await;
    for bad in [
        image("image/png", "not base64!"),
        image("image/bmp", "AAAA"),
        json!({"type": "image"}),
    ] {
        let response = bridge
            .messages(&request(vec![bad.clone(), text("[mock:images]")]))
            .await;
        assert_eq!(response.status, 400, "{bad}: {}", response.body);
    }
    bridge.stop().await;
}
