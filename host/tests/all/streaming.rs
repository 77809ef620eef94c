//! Streaming a reply's text as the agent writes it, through the whole bridge on both
//! transports: the first `text_delta` reaches the client while the agent is still writing, a
//! sentence before a call streams before the `tool_use`, a repair continues the shown text, a
//! failed repair ends with an `error` event after it, a resend joined mid-stream gets the
//! whole stream, and the accumulated stream is the JSON answer to the same request.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::bridge::{pass_env_line, HttpResponse, TestBridge, AGENT_LOG};
use serde_json::{json, Value};

use super::summarizer::request;

const TRANSPORTS: [&str; 2] = ["per-turn", "resident"];
/// The offline agent's `[mock:slow]` pause between its six chunks.
const SLOW_MS: u64 = 400;

async fn bridge(transport: &str, server: &str) -> TestBridge {
    std::env::set_var("MOCK_DEVIN_LOG", AGENT_LOG);
    std::env::set_var("MOCK_DEVIN_SLOW_MS", SLOW_MS.to_string());
    TestBridge::start(
        server,
        &format!(
            "transport = {transport:?}\nprewarm = 0\n{}",
            pass_env_line(&["MOCK_DEVIN_LOG", "MOCK_DEVIN_SLOW_MS"])
        ),
    )
    .await
}

/// The message a client accumulates from an event stream, as the Anthropic SDKs do: blocks by
/// index, text deltas appended, a tool's `partial_json` pieces joined and read as JSON at the
/// block's stop; `stop_reason` from `message_delta`; and the `error` event, if any.
pub(crate) fn accumulate(events: &[(String, Value)]) -> (Value, Option<Value>) {
    let mut content: Vec<Value> = Vec::new();
    let mut partial: Vec<String> = Vec::new();
    let mut stop = Value::Null;
    let mut error = None;
    for (name, data) in events {
        match name.as_str() {
            "content_block_start" => {
                let index = data["index"].as_u64().expect("index") as usize;
                assert_eq!(index, content.len(), "blocks start in order: {events:?}");
                content.push(data["content_block"].clone());
                partial.push(String::new());
            }
            "content_block_delta" => {
                let index = data["index"].as_u64().expect("index") as usize;
                let block = content.get_mut(index).expect("a delta of a started block");
                match data["delta"]["type"].as_str() {
                    Some("text_delta") => {
                        let text = format!(
                            "{}{}",
                            block["text"].as_str().unwrap_or_default(),
                            data["delta"]["text"].as_str().expect("text")
                        );
                        block["text"] = Value::String(text);
                    }
                    Some("input_json_delta") => partial[index]
                        .push_str(data["delta"]["partial_json"].as_str().expect("json")),
                    other => panic!("unexpected delta {other:?}"),
                }
            }
            "content_block_stop" => {
                let index = data["index"].as_u64().expect("index") as usize;
                if content[index]["type"] == "tool_use" && !partial[index].is_empty() {
                    content[index]["input"] =
                        serde_json::from_str(&partial[index]).expect("the input is JSON");
                }
            }
            "message_delta" => stop = data["delta"]["stop_reason"].clone(),
            "error" => error = Some(data["error"].clone()),
            _ => {}
        }
    }
    (json!({"content": content, "stop_reason": stop}), error)
}

/// The same message from a JSON answer.
pub(crate) fn of_json(response: &HttpResponse) -> Value {
    assert_eq!(response.status, 200, "{}", response.body);
    let body = response.json();
    json!({"content": body["content"], "stop_reason": body["stop_reason"]})
}

/// One SSE event as it arrived: its name, data, and whether the agent had finished writing
/// (logged its `reply`) when the client read it.
struct Arrived {
    name: String,
    data: Value,
    agent_done: bool,
}

/// Sends a streamed request and reads its events as they arrive, noting for each whether the
/// agent had logged its `reply` (written its last chunk) by then.
fn stream_watching_the_agent(
    bridge_addr: std::net::SocketAddr,
    home: std::path::PathBuf,
    session: &str,
    body: &Value,
) -> Vec<Arrived> {
    let replies = || {
        std::fs::read_to_string(home.join(AGENT_LOG))
            .unwrap_or_default()
            .lines()
            .filter(|line| line.contains("\"event\":\"reply\""))
            .count()
    };
    let before = replies();
    let body = body.to_string();
    let mut stream = TcpStream::connect(bridge_addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n\
         x-claude-code-session-id: {session}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut raw = String::new();
    let mut arrived = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let read = stream.read(&mut buffer).expect("read");
        if read == 0 {
            break;
        }
        let agent_done = replies() > before;
        raw.push_str(std::str::from_utf8(&buffer[..read]).expect("UTF-8"));
        // Whole events only (chunk-size lines of the transfer encoding are skipped).
        while let Some(end) = raw.find("\n\n") {
            let block: String = raw.drain(..end + 2).collect();
            let mut name = String::new();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(rest) = line.strip_prefix("event: ") {
                    name = rest.to_owned();
                } else if let Some(rest) = line.strip_prefix("data: ") {
                    data.push_str(rest);
                }
            }
            if name.is_empty() {
                continue;
            }
            let data = serde_json::from_str(&data).expect("JSON data");
            arrived.push(Arrived {
                name,
                data,
                agent_done,
            });
        }
    }
    arrived
}

fn text_request(marker: &str, stream: bool) -> Value {
    let mut body = request(marker, stream);
    body["messages"][0]["content"] = json!(format!("Tell me a story. {marker}"));
    body
}

#[tokio::test]
async fn the_first_text_reaches_the_client_while_the_agent_is_still_writing() {
    for transport in TRANSPORTS {
        let bridge = bridge(transport, "").await;
        let body = text_request("[mock:slow]", true);
        let (addr, home) = (bridge.addr, bridge.home.clone());
        let arrived = tokio::task::spawn_blocking(move || {
            stream_watching_the_agent(addr, home, "slow", &body)
        })
        .await
        .expect("client");
        let deltas: Vec<&Arrived> = arrived
            .iter()
            .filter(|event| event.data["delta"]["type"] == "text_delta")
            .collect();
        let first = deltas.first().expect("a text_delta");
        assert!(
            !first.agent_done,
            "{transport}: the first text arrived after the agent's last chunk"
        );
        let text = first.data["delta"]["text"].as_str().unwrap_or_default();
        assert!(
            text.starts_with("Mock slow answer, part 1 of 6.") && !text.contains("part 6"),
            "{transport}: the first text is the agent's first chunk: {text:?}"
        );
        assert!(
            deltas.len() >= 3,
            "{transport}: the text came in several deltas as it was written"
        );
        let events: Vec<(String, Value)> = arrived
            .iter()
            .map(|event| (event.name.clone(), event.data.clone()))
            .collect();
        let (streamed, error) = accumulate(&events);
        assert_eq!(error, None);
        // The accumulated stream is the JSON answer to the same request.
        let json = bridge
            .conversation_turn("slow-json", &text_request("[mock:slow]", false))
            .await;
        assert_eq!(streamed, of_json(&json), "{transport}");
        let whole = streamed["content"][0]["text"].as_str().unwrap_or_default();
        assert!(whole.contains("part 6 of 6."), "{transport}: {whole}");
        let metrics = bridge.request("GET", "/metrics", &[], "").await.body;
        assert!(
            metrics.contains("devin_bridge_stream_first_text_seconds_count 1"),
            "{transport}: {metrics}"
        );
        assert!(
            metrics.contains("devin_bridge_stream_held_back_bytes_count"),
            "{transport}: {metrics}"
        );
        bridge.stop().await;
    }
}

#[tokio::test]
async fn prose_then_a_call_repairs_and_errors_stream_as_the_json_answer_says() {
    for transport in TRANSPORTS {
        let bridge = bridge(transport, "").await;
        for (marker, first_text) in [
            // Prose before the envelope: the prose streams, then the tool_use.
            (
                "[mock:prose-tool=plain]",
                "Let me look at the files first, then I will run the tests.",
            ),
            // A narration that asks for the repair: it stays shown, the repair's call follows.
            (
                "[mock:narrate-then-tool]",
                "I'll run the tests next to check the fix.",
            ),
        ] {
            let label = format!("{transport} {marker}");
            let streamed = bridge
                .conversation_turn(&format!("{marker}-s"), &request(marker, true))
                .await;
            assert_eq!(streamed.status, 200, "{label}: {}", streamed.body);
            let (message, error) = accumulate(&streamed.events());
            assert_eq!(error, None, "{label}");
            assert_eq!(message["content"][0]["type"], "text", "{label}: {message}");
            assert_eq!(message["content"][0]["text"], first_text, "{label}");
            assert_eq!(message["content"][1]["type"], "tool_use", "{label}");
            assert_eq!(message["stop_reason"], "tool_use", "{label}");
            let json = bridge
                .conversation_turn(&format!("{marker}-j"), &request(marker, false))
                .await;
            assert_eq!(message, of_json(&json), "{label}");
        }
        // A repair that fails again: the narration was shown, the repair's narration after
        // it, and the stream ends with an error after both (the JSON answer is the error
        // alone).
        let streamed = bridge
            .conversation_turn("always", &request("[mock:narrate-always]", true))
            .await;
        assert_eq!(streamed.status, 200, "{transport}: {}", streamed.body);
        let events = streamed.events();
        let (message, error) = accumulate(&events);
        assert_eq!(
            message["content"][0]["text"],
            "I'll run the tests next to check the fix.\n\nI'll run the tests next to check the fix.",
            "{transport}"
        );
        assert_eq!(
            error.expect("an error event")["type"],
            "api_error",
            "{transport}"
        );
        assert_eq!(events.last().map(|(name, _)| name.as_str()), Some("error"));
        let json = bridge
            .conversation_turn("always-j", &request("[mock:narrate-always]", false))
            .await;
        assert_eq!(json.status, 502, "{transport}: {}", json.body);
        bridge.stop().await;
    }
}

#[tokio::test]
async fn a_resend_joined_mid_stream_gets_the_whole_stream_so_far_then_the_rest() {
    for transport in TRANSPORTS {
        let bridge = bridge(transport, "").await;
        let body = text_request("[mock:slow]", true);
        let (addr, home) = (bridge.addr, bridge.home.clone());
        let first_body = body.clone();
        let first = tokio::task::spawn_blocking(move || {
            stream_watching_the_agent(addr, home, "joined", &first_body)
        });
        // Join once the turn has streamed some text (its second chunk is out by then).
        tokio::time::sleep(Duration::from_millis(SLOW_MS * 2)).await;
        let resend = bridge.conversation_turn("joined", &body).await;
        let first = first.await.expect("client");
        assert_eq!(
            bridge.agent_events("prompt").len(),
            1,
            "{transport}: the resend ran no agent turn of its own"
        );
        let events: Vec<(String, Value)> = first
            .iter()
            .map(|event| (event.name.clone(), event.data.clone()))
            .collect();
        let (original, _) = accumulate(&events);
        let (joined, error) = accumulate(&resend.events());
        assert_eq!(error, None, "{transport}");
        assert_eq!(joined, original, "{transport}");
        assert!(joined["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.starts_with("Mock slow answer, part 1 of 6.")
                && text.contains("part 6 of 6.")));
        bridge.stop().await;
    }
}

#[tokio::test]
async fn with_streaming_off_the_reply_is_rendered_whole_at_the_end() {
    let bridge = bridge("per-turn", "stream_text = false").await;
    let body = text_request("[mock:slow]", true);
    let (addr, home) = (bridge.addr, bridge.home.clone());
    let arrived =
        tokio::task::spawn_blocking(move || stream_watching_the_agent(addr, home, "off", &body))
            .await
            .expect("client");
    let deltas: Vec<&Arrived> = arrived
        .iter()
        .filter(|event| event.data["delta"]["type"] == "text_delta")
        .collect();
    assert_eq!(deltas.len(), 1, "one text_delta with the whole text");
    assert!(deltas[0].agent_done, "sent after the agent's last chunk");
    bridge.stop().await;
}
