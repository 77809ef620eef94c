//! Unit tests of the public rendering functions.

use super::*;
use serde_json::{json, Value};

fn head() -> MessageHead {
    MessageHead {
        id: "msg_0123".into(),
        model: "devin-cli-agentic/swe-1-7".into(),
        usage: Usage {
            input_tokens: 42,
            output_tokens: 7,
        },
    }
}

fn tool(input: &str) -> Reply {
    Reply::Tool(ToolCall {
        id: "devin_call_0011223344556677".into(),
        name: "Bash".into(),
        input: input.into(),
    })
}

fn failure(status: u16, message: &str) -> Failure {
    Failure {
        code: "internal_code".into(),
        message: message.into(),
        status,
        repairable: false,
    }
}

/// Splits an SSE body into (event name, parsed data), checking the framing of each event.
fn events(body: &str) -> Vec<(String, Value)> {
    assert!(body.ends_with("\n\n"), "body must end with a blank line");
    body[..body.len() - 2]
        .split("\n\n")
        .map(|event| {
            let (name_line, data_line) = event.split_once('\n').expect("two lines");
            let name = name_line.strip_prefix("event: ").expect("event line");
            let data = data_line.strip_prefix("data: ").expect("data line");
            assert!(!data.contains('\n'), "data spans one line");
            let value: Value = serde_json::from_str(data).expect("data is JSON");
            (name.to_owned(), value)
        })
        .collect()
}

#[test]
fn stream_start_matches_anthropic_shape() {
    assert_eq!(
        stream_start(&head()),
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_0123\",\
         \"type\":\"message\",\"role\":\"assistant\",\"content\":[],\
         \"model\":\"devin-cli-agentic/swe-1-7\",\"stop_reason\":null,\"stop_sequence\":null,\
         \"usage\":{\"input_tokens\":42,\"output_tokens\":1}}}\n\n"
    );
}

#[test]
fn ping_is_fixed() {
    assert_eq!(stream_ping(), "event: ping\ndata: {\"type\":\"ping\"}\n\n");
}

#[test]
fn finish_text_reply() {
    let usage = Usage {
        input_tokens: 1,
        output_tokens: 3,
    };
    assert_eq!(
        stream_finish(&Reply::Text("Hello.".into()), &usage),
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\
         \"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
         event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\
         \"delta\":{\"type\":\"text_delta\",\"text\":\"Hello.\"}}\n\n\
         event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
         event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\
         \"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}\n\n\
         event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
    );
}

#[test]
fn finish_tool_reply() {
    let usage = Usage {
        input_tokens: 1,
        output_tokens: 9,
    };
    let body = stream_finish(&tool("{ \"command\": \"npm test\" }"), &usage);
    let events = events(&body);
    assert_eq!(
        events[0].1,
        json!({"type":"content_block_start","index":0,"content_block":
            {"type":"tool_use","id":"devin_call_0011223344556677","name":"Bash","input":{}}})
    );
    assert_eq!(
        events[1].1,
        json!({"type":"content_block_delta","index":0,"delta":
            {"type":"input_json_delta","partial_json":"{\"command\":\"npm test\"}"}})
    );
    assert_eq!(
        events[3].1,
        json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},
            "usage":{"output_tokens":9}})
    );
}

#[test]
fn render_stream_is_start_then_finish_with_head_usage() {
    for reply in [Reply::Text("x".into()), tool("{}")] {
        let head = head();
        assert_eq!(
            render_stream(&head, &reply),
            stream_start(&head) + &stream_finish(&reply, &head.usage)
        );
    }
}

#[test]
fn lifecycle_order_and_event_names() {
    for reply in [Reply::Text("done".into()), tool(r#"{"a":1}"#)] {
        let names: Vec<String> = events(&render_stream(&head(), &reply))
            .into_iter()
            .map(|(name, data)| {
                assert_eq!(data["type"], Value::String(name.clone()));
                name
            })
            .collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
    }
}

#[test]
fn json_text_body() {
    let body: Value =
        serde_json::from_str(&render_json(&head(), &Reply::Text("Hi".into()))).expect("valid JSON");
    assert_eq!(
        body,
        json!({"id":"msg_0123","type":"message","role":"assistant",
            "model":"devin-cli-agentic/swe-1-7","content":[{"type":"text","text":"Hi"}],
            "stop_reason":"end_turn","stop_sequence":null,
            "usage":{"input_tokens":42,"output_tokens":7}})
    );
}

#[test]
fn json_tool_body_embeds_the_object() {
    let rendered = render_json(&head(), &tool("{\"file_path\": \"/tmp/a\", \"limit\": 5}"));
    assert!(
        rendered.contains(r#""input":{"file_path":"/tmp/a","limit":5}"#),
        "{rendered}"
    );
    let body: Value = serde_json::from_str(&rendered).expect("valid JSON");
    assert_eq!(body["stop_reason"], "tool_use");
    assert_eq!(
        body["content"],
        json!([{"type":"tool_use","id":"devin_call_0011223344556677","name":"Bash",
            "input":{"file_path":"/tmp/a","limit":5}}])
    );
}

#[test]
fn non_object_input_becomes_empty_object_everywhere() {
    for input in ["[1]", "nope", "", "\"s\"", "{\"a\":"] {
        let body: Value = serde_json::from_str(&render_json(&head(), &tool(input))).unwrap();
        assert_eq!(body["content"][0]["input"], json!({}), "input {input:?}");
        let stream = events(&stream_finish(&tool(input), &Usage::default()));
        assert_eq!(
            stream[1].1["delta"]["partial_json"], "{}",
            "input {input:?}"
        );
    }
}

#[test]
fn text_is_escaped_and_kept_on_one_data_line() {
    let text = "line 1\nline 2\r\n\"quoted\" \\ tab\t nul\u{0} bell\u{7} é ✓ \u{2028} </script>";
    let body = render_stream(&head(), &Reply::Text(text.into()));
    let events = events(&body);
    assert_eq!(events[2].1["delta"]["text"], text);
    let json: Value =
        serde_json::from_str(&render_json(&head(), &Reply::Text(text.into()))).expect("valid JSON");
    assert_eq!(json["content"][0]["text"], text);
}

#[test]
fn hostile_ids_and_names_are_escaped() {
    let head = MessageHead {
        id: "msg\"\n".into(),
        model: "m\\\u{1}".into(),
        usage: Usage::default(),
    };
    let reply = Reply::Tool(ToolCall {
        id: "id\"}".into(),
        name: "na\nme".into(),
        input: "{}".into(),
    });
    let events = events(&render_stream(&head, &reply));
    assert_eq!(events[0].1["message"]["id"], "msg\"\n");
    assert_eq!(events[0].1["message"]["model"], "m\\\u{1}");
    assert_eq!(events[1].1["content_block"]["name"], "na\nme");
    let body: Value = serde_json::from_str(&render_json(&head, &reply)).unwrap();
    assert_eq!(body["content"][0]["id"], "id\"}");
}

#[test]
fn partial_json_concatenation_parses_to_the_input() {
    let input = r#"{"edits":[{"old":"a\nb","new":"c"}],"n":1.0e3,"ok":true}"#;
    let events = events(&render_stream(&head(), &tool(input)));
    let joined: String = events
        .iter()
        .filter(|(name, _)| name == "content_block_delta")
        .filter_map(|(_, data)| data["delta"]["partial_json"].as_str())
        .collect();
    let parsed: Value = serde_json::from_str(&joined).unwrap();
    assert_eq!(parsed, serde_json::from_str::<Value>(input).unwrap());
}

#[test]
fn usage_extremes() {
    let head = MessageHead {
        usage: Usage {
            input_tokens: u32::MAX,
            output_tokens: 0,
        },
        ..head()
    };
    let events = events(&render_stream(&head, &Reply::Text(String::new())));
    assert_eq!(events[0].1["message"]["usage"]["input_tokens"], u32::MAX);
    assert_eq!(events[0].1["message"]["usage"]["output_tokens"], 1);
    assert_eq!(events[2].1["delta"]["text"], "");
    assert_eq!(events[4].1["usage"]["output_tokens"], 0);
}

#[test]
fn error_body_and_event() {
    let failure = failure(529, "The agent is busy; try again.");
    assert_eq!(
        error_body(&failure),
        r#"{"type":"error","error":{"type":"overloaded_error","message":"The agent is busy; try again."}}"#
    );
    assert_eq!(
        error_event(&failure),
        format!("event: error\ndata: {}\n\n", error_body(&failure))
    );
}

#[test]
fn error_type_comes_from_status_not_code() {
    let mut failure = failure(504, "timed out");
    failure.code = "rate_limit_error".into();
    let body: Value = serde_json::from_str(&error_body(&failure)).unwrap();
    assert_eq!(body["error"]["type"], "timeout_error");
    // The internal code and the repairable flag never reach the client.
    assert!(!error_body(&failure).contains("rate_limit_error"));
    assert!(!error_body(&failure).contains("repairable"));
}

#[test]
fn error_message_is_escaped() {
    let failure = failure(400, "bad \"model\"\nnext");
    let events = events(&error_event(&failure));
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, "error");
    assert_eq!(events[0].1["error"]["message"], "bad \"model\"\nnext");
}

#[test]
fn megabyte_text_renders_completely() {
    let text = "abcd\"".repeat(200_000 + 9_716); // ~1 MiB, a fifth of it needing escapes
    let reply = Reply::Text(text.clone());
    let stream = render_stream(&head(), &reply);
    let events = events(&stream);
    assert_eq!(events[2].1["delta"]["text"].as_str(), Some(text.as_str()));
    let json: Value = serde_json::from_str(&render_json(&head(), &reply)).unwrap();
    assert_eq!(json["content"][0]["text"].as_str(), Some(text.as_str()));
}
