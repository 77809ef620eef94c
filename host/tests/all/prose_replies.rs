//! Replies the way models really write them, through the whole bridge on both transports and
//! in both answer forms: a sentence before the call, and the call's envelope unclosed, its
//! JSON fenced, with a trailing comma, or with a few words around the object. Each answers 200
//! with the sentence as a text block before the `tool_use`, in one agent turn (no repair), and
//! each repaired defect is counted in `/metrics` by kind.

use crate::common;

use common::bridge::{pass_env_line, HttpResponse, TestBridge, AGENT_LOG};
use serde_json::{json, Value};

use super::summarizer::bash_tool;

/// What the offline agent's `[mock:prose-tool=...]` replies say before their call.
const PROSE: &str = "Let me look at the files first, then I will run the tests.";

/// Each shape and the recovery it needs (none for the plain envelope).
const SHAPES: [(&str, Option<&str>); 5] = [
    ("plain", None),
    ("unclosed", Some("unclosed_envelope")),
    ("fenced-json", Some("fenced_json")),
    ("trailing-comma", Some("trailing_comma")),
    ("stray-prose", Some("stray_prose")),
];

async fn bridge(transport: &str) -> TestBridge {
    std::env::set_var("MOCK_DEVIN_LOG", AGENT_LOG);
    TestBridge::start(
        "",
        &format!(
            "transport = {transport:?}\nprewarm = 0\n{}",
            pass_env_line(&["MOCK_DEVIN_LOG"])
        ),
    )
    .await
}

fn request(shape: &str, stream: bool) -> Value {
    json!({
        "model": "devin-cli-agentic/swe-1-7",
        "max_tokens": 1024,
        "stream": stream,
        "tools": [bash_tool()],
        "messages": [{"role": "user", "content": format!("List the files. [mock:prose-tool={shape}]")}]
    })
}

/// The content blocks of an answer, whichever form it came in: the JSON body's `content`, or
/// the stream's blocks rebuilt from their start and delta events.
fn blocks(response: &HttpResponse, stream: bool) -> (Vec<Value>, String) {
    assert_eq!(response.status, 200, "{}", response.body);
    if !stream {
        let body = response.json();
        let content = body["content"].as_array().cloned().unwrap_or_default();
        let stop = body["stop_reason"].as_str().unwrap_or_default().to_owned();
        return (content, stop);
    }
    let mut content: Vec<Value> = Vec::new();
    let mut stop = String::new();
    for (name, data) in response.events() {
        match name.as_str() {
            "content_block_start" => content.push(data["content_block"].clone()),
            "content_block_delta" => {
                let index = data["index"].as_u64().unwrap_or(u64::MAX) as usize;
                let block = content.get_mut(index).expect("a delta of a started block");
                match data["delta"]["type"].as_str() {
                    // Streamed text comes in several deltas: each one appends.
                    Some("text_delta") => {
                        let text = format!(
                            "{}{}",
                            block["text"].as_str().unwrap_or_default(),
                            data["delta"]["text"].as_str().unwrap_or_default()
                        );
                        block["text"] = Value::String(text);
                    }
                    Some("input_json_delta") => {
                        block["input"] = serde_json::from_str(
                            data["delta"]["partial_json"].as_str().unwrap_or_default(),
                        )
                        .expect("the input is JSON");
                    }
                    other => panic!("unexpected delta {other:?}"),
                }
            }
            "message_delta" => {
                stop = data["delta"]["stop_reason"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
            }
            _ => {}
        }
    }
    (content, stop)
}

async fn metrics(bridge: &TestBridge) -> String {
    bridge.request("GET", "/metrics", &[], "").await.body
}

#[tokio::test]
async fn prose_and_repairable_envelopes_answer_a_text_block_and_the_call_in_one_turn() {
    for transport in ["per-turn", "resident"] {
        let bridge = bridge(transport).await;
        let mut turns = 0;
        for (shape, _) in SHAPES {
            for stream in [false, true] {
                let key = format!("{shape}-{stream}");
                let response = bridge
                    .conversation_turn(&key, &request(shape, stream))
                    .await;
                let label = format!("{transport} {shape} stream={stream}");
                let (content, stop) = blocks(&response, stream);
                assert_eq!(content.len(), 2, "{label}: {content:?}");
                assert_eq!(content[0]["type"], "text", "{label}");
                assert_eq!(content[0]["text"], PROSE, "{label}");
                assert_eq!(content[1]["type"], "tool_use", "{label}");
                assert_eq!(content[1]["name"], "Bash", "{label}");
                assert_eq!(
                    content[1]["input"],
                    json!({"command": "echo mock", "description": "Print a marker"}),
                    "{label}"
                );
                assert_eq!(stop, "tool_use", "{label}");
                turns += 1;
                let prompts = bridge.agent_events("prompt");
                assert_eq!(prompts.len(), turns, "{label}: one agent turn per request");
                assert!(
                    prompts.iter().all(|prompt| prompt["repair"] == false),
                    "{label}: no repair turn: {prompts:?}"
                );
            }
        }
        let text = metrics(&bridge).await;
        for (_, recovery) in SHAPES {
            if let Some(kind) = recovery {
                // One JSON and one streamed request of each shape.
                let line = format!("devin_bridge_envelope_recoveries_total{{kind=\"{kind}\"}} 2");
                assert!(text.contains(&line), "{transport}: no {line:?} in\n{text}");
            }
        }
        bridge.stop().await;
    }
}
