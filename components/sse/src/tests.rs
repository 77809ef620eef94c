//! Unit tests of the public rendering functions.

use super::*;
use serde_json::{json, Value};

fn head() -> MessageHead {
    MessageHead {
        id: "msg_0123".into(),
        model: "devin-cli-agentic/swe-1-7".into(),
        usage: Usage::estimated(42, 7),
    }
}

fn tool(input: &str) -> Reply {
    Reply::of_calls([call("devin_call_0011223344556677", "Bash", input)])
}

fn call(id: &str, name: &str, input: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        input: input.into(),
    }
}

/// Three calls with distinct ids, names and inputs, the second one spaced out.
fn three_calls() -> Reply {
    Reply::of_calls([
        call("devin_call_a", "Read", r#"{"file_path":"/work/a.js"}"#),
        call(
            "devin_call_b",
            "Grep",
            "{ \"pattern\" : \"fn main\" ,\n \"n\" : 2 }",
        ),
        call("devin_call_c", "Bash", r#"{"command":"ls \"x\"\n"}"#),
    ])
}

/// The four counts as a usage object is expected to carry them, in the wire order.
fn usage_json(input: u32, output: u32, cache_read: u32, cache_creation: u32) -> Value {
    json!({"input_tokens": input, "cache_creation_input_tokens": cache_creation,
        "cache_read_input_tokens": cache_read, "output_tokens": output})
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
         \"usage\":{\"input_tokens\":42,\"cache_creation_input_tokens\":0,\
         \"cache_read_input_tokens\":0,\"output_tokens\":1}}}\n\n"
    );
}

#[test]
fn ping_is_fixed() {
    assert_eq!(stream_ping(), "event: ping\ndata: {\"type\":\"ping\"}\n\n");
}

#[test]
fn finish_text_reply() {
    let usage = Usage::estimated(1, 3);
    assert_eq!(
        stream_finish(&Reply::Text("Hello.".into()), &usage, None),
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\
         \"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
         event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\
         \"delta\":{\"type\":\"text_delta\",\"text\":\"Hello.\"}}\n\n\
         event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
         event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\
         \"end_turn\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":1,\
         \"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":3}}\n\n\
         event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
    );
}

#[test]
fn finish_tool_reply() {
    let usage = Usage::estimated(1, 9);
    let body = stream_finish(&tool("{ \"command\": \"npm test\" }"), &usage, None);
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
            "usage":usage_json(1, 9, 0, 0)})
    );
}

#[test]
fn render_stream_is_start_then_finish_with_head_usage() {
    for reply in [Reply::Text("x".into()), tool("{}")] {
        let head = head();
        assert_eq!(
            render_stream(&head, &reply, None),
            stream_start(&head) + &stream_finish(&reply, &head.usage, None)
        );
    }
}

#[test]
fn lifecycle_order_and_event_names() {
    for reply in [Reply::Text("done".into()), tool(r#"{"a":1}"#)] {
        let names: Vec<String> = events(&render_stream(&head(), &reply, None))
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
    let body: Value = serde_json::from_str(&render_json(&head(), &Reply::Text("Hi".into()), None))
        .expect("valid JSON");
    assert_eq!(
        body,
        json!({"id":"msg_0123","type":"message","role":"assistant",
            "model":"devin-cli-agentic/swe-1-7","content":[{"type":"text","text":"Hi"}],
            "stop_reason":"end_turn","stop_sequence":null,
            "usage":usage_json(42, 7, 0, 0)})
    );
}

#[test]
fn json_tool_body_embeds_the_object() {
    let rendered = render_json(
        &head(),
        &tool("{\"file_path\": \"/tmp/a\", \"limit\": 5}"),
        None,
    );
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
        let body: Value = serde_json::from_str(&render_json(&head(), &tool(input), None)).unwrap();
        assert_eq!(body["content"][0]["input"], json!({}), "input {input:?}");
        let stream = events(&stream_finish(&tool(input), &Usage::default(), None));
        assert_eq!(
            stream[1].1["delta"]["partial_json"], "{}",
            "input {input:?}"
        );
    }
}

#[test]
fn text_is_escaped_and_kept_on_one_data_line() {
    let text = "line 1\nline 2\r\n\"quoted\" \\ tab\t nul\u{0} bell\u{7} é ✓ \u{2028} </script>";
    let body = render_stream(&head(), &Reply::Text(text.into()), None);
    let events = events(&body);
    assert_eq!(events[2].1["delta"]["text"], text);
    let json: Value = serde_json::from_str(&render_json(&head(), &Reply::Text(text.into()), None))
        .expect("valid JSON");
    assert_eq!(json["content"][0]["text"], text);
}

#[test]
fn hostile_ids_and_names_are_escaped() {
    let head = MessageHead {
        id: "msg\"\n".into(),
        model: "m\\\u{1}".into(),
        usage: Usage::default(),
    };
    let reply = Reply::of_calls([call("id\"}", "na\nme", "{}")]);
    let events = events(&render_stream(&head, &reply, None));
    assert_eq!(events[0].1["message"]["id"], "msg\"\n");
    assert_eq!(events[0].1["message"]["model"], "m\\\u{1}");
    assert_eq!(events[1].1["content_block"]["name"], "na\nme");
    let body: Value = serde_json::from_str(&render_json(&head, &reply, None)).unwrap();
    assert_eq!(body["content"][0]["id"], "id\"}");
}

#[test]
fn partial_json_concatenation_parses_to_the_input() {
    let input = r#"{"edits":[{"old":"a\nb","new":"c"}],"n":1.0e3,"ok":true}"#;
    let events = events(&render_stream(&head(), &tool(input), None));
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
            cache_read_input_tokens: u32::MAX,
            cache_creation_input_tokens: 0,
        },
        ..head()
    };
    let events = events(&render_stream(&head, &Reply::Text(String::new()), None));
    assert_eq!(events[0].1["message"]["usage"]["input_tokens"], u32::MAX);
    assert_eq!(events[0].1["message"]["usage"]["output_tokens"], 1);
    assert_eq!(events[2].1["delta"]["text"], "");
    assert_eq!(events[4].1["usage"]["output_tokens"], 0);
    assert_eq!(events[4].1["usage"], usage_json(u32::MAX, 0, u32::MAX, 0));
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
    let stream = render_stream(&head(), &reply, None);
    let events = events(&stream);
    assert_eq!(events[2].1["delta"]["text"].as_str(), Some(text.as_str()));
    let json: Value = serde_json::from_str(&render_json(&head(), &reply, None)).unwrap();
    assert_eq!(json["content"][0]["text"].as_str(), Some(text.as_str()));
}

/// The (event name, index) of every content block event, in order.
fn block_events(events: &[(String, Value)]) -> Vec<(String, u64)> {
    events
        .iter()
        .filter(|(name, _)| name.starts_with("content_block_"))
        .map(|(name, data)| (name.clone(), data["index"].as_u64().expect("index")))
        .collect()
}

#[test]
fn several_tool_calls_stream_one_block_after_the_other() {
    let usage = Usage::estimated(5, 30);
    let body = stream_finish(&three_calls(), &usage, None);
    let events = events(&body);
    let mut expected = Vec::new();
    for index in 0..3 {
        for name in [
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
        ] {
            expected.push((name.to_owned(), index));
        }
    }
    assert_eq!(block_events(&events), expected);
    assert_eq!(events.len(), 3 * 3 + 2);
    let reply = three_calls();
    let calls: Vec<&ToolCall> = reply.calls().collect();
    let partials = [
        r#"{"file_path":"/work/a.js"}"#,
        r#"{"pattern":"fn main","n":2}"#,
        r#"{"command":"ls \"x\"\n"}"#,
    ];
    for (index, (call, partial)) in calls.iter().zip(partials).enumerate() {
        assert_eq!(
            events[3 * index].1,
            json!({"type":"content_block_start","index":index,"content_block":
                {"type":"tool_use","id":call.id,"name":call.name,"input":{}}})
        );
        assert_eq!(
            events[3 * index + 1].1,
            json!({"type":"content_block_delta","index":index,"delta":
                {"type":"input_json_delta","partial_json":partial}})
        );
        assert_eq!(
            events[3 * index + 2].1,
            json!({"type":"content_block_stop","index":index})
        );
    }
    assert_eq!(
        events[9].1,
        json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},
            "usage":usage_json(5, 30, 0, 0)})
    );
    assert_eq!(events[10].1, json!({"type":"message_stop"}));
}

#[test]
fn several_tool_calls_exact_bytes_of_the_second_block() {
    let body = stream_finish(&three_calls(), &Usage::default(), None);
    assert!(body.contains(
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\
         \"content_block\":{\"type\":\"tool_use\",\"id\":\"devin_call_b\",\"name\":\"Grep\",\
         \"input\":{}}}\n\n\
         event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\
         \"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\
         \"{\\\"pattern\\\":\\\"fn main\\\",\\\"n\\\":2}\"}}\n\n\
         event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
         event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,"
    ));
}

#[test]
fn several_tool_calls_json_body_lists_every_block_in_order() {
    let body: Value =
        serde_json::from_str(&render_json(&head(), &three_calls(), None)).expect("valid JSON");
    assert_eq!(body["stop_reason"], "tool_use");
    assert_eq!(
        body["content"],
        json!([
            {"type":"tool_use","id":"devin_call_a","name":"Read",
                "input":{"file_path":"/work/a.js"}},
            {"type":"tool_use","id":"devin_call_b","name":"Grep",
                "input":{"pattern":"fn main","n":2}},
            {"type":"tool_use","id":"devin_call_c","name":"Bash",
                "input":{"command":"ls \"x\"\n"}},
        ])
    );
    let rendered = render_json(&head(), &three_calls(), None);
    assert!(
        rendered.contains(r#""input":{"pattern":"fn main","n":2}},{"type":"tool_use""#),
        "{rendered}"
    );
}

#[test]
fn non_object_input_becomes_empty_object_per_block() {
    let reply = Reply::of_calls([
        call("a", "Read", r#"{"file_path":"/a"}"#),
        call("b", "Read", "[1,2]"),
        call("c", "Read", "{\"broken\": "),
        call("d", "Read", r#"{"ok":true}"#),
    ]);
    let stream = events(&stream_finish(&reply, &Usage::default(), None));
    let partials: Vec<&str> = stream
        .iter()
        .filter(|(name, _)| name == "content_block_delta")
        .map(|(_, data)| data["delta"]["partial_json"].as_str().expect("string"))
        .collect();
    assert_eq!(
        partials,
        [r#"{"file_path":"/a"}"#, "{}", "{}", r#"{"ok":true}"#]
    );
    let body: Value = serde_json::from_str(&render_json(&head(), &reply, None)).unwrap();
    let inputs: Vec<&Value> = (0..4).map(|i| &body["content"][i]["input"]).collect();
    assert_eq!(
        inputs,
        [
            &json!({"file_path":"/a"}),
            &json!({}),
            &json!({}),
            &json!({"ok":true})
        ]
    );
}

#[test]
fn empty_tool_list_has_no_blocks_and_ends_the_turn() {
    let reply = Reply::Tools(Vec::new());
    let usage = Usage::estimated(3, 4);
    assert_eq!(
        stream_finish(&reply, &usage, None),
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\
         \"end_turn\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":3,\
         \"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":4}}\
         \n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
    );
    let names: Vec<String> = events(&render_stream(&head(), &reply, None))
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(names, ["message_start", "message_delta", "message_stop"]);
    let body: Value = serde_json::from_str(&render_json(&head(), &reply, None)).unwrap();
    assert_eq!(body["content"], json!([]));
    assert_eq!(body["stop_reason"], "end_turn");
}

#[test]
fn render_stream_of_several_calls_is_start_then_finish() {
    let head = head();
    for reply in [three_calls(), Reply::Tools(Vec::new())] {
        assert_eq!(
            render_stream(&head, &reply, None),
            stream_start(&head) + &stream_finish(&reply, &head.usage, None)
        );
    }
}

#[test]
fn every_usage_object_carries_the_four_counts() {
    let usage = Usage {
        input_tokens: 1200,
        output_tokens: 80,
        cache_read_input_tokens: 900,
        cache_creation_input_tokens: 300,
    };
    let head = MessageHead { usage, ..head() };
    for reply in [Reply::Text("t".into()), tool("{}"), three_calls()] {
        let stream = events(&render_stream(&head, &reply, None));
        let start = &stream[0].1["message"]["usage"];
        assert_eq!(*start, usage_json(1200, 1, 900, 300), "message_start");
        let delta = &stream[stream.len() - 2].1;
        assert_eq!(delta["type"], "message_delta");
        assert_eq!(
            delta["usage"],
            usage_json(1200, 80, 900, 300),
            "message_delta"
        );
        let body: Value = serde_json::from_str(&render_json(&head, &reply, None)).unwrap();
        assert_eq!(body["usage"], usage_json(1200, 80, 900, 300), "body");
    }
    // stream_finish reports the usage it is given, not the head's.
    let other = Usage {
        input_tokens: 7,
        output_tokens: 8,
        cache_read_input_tokens: 9,
        cache_creation_input_tokens: 10,
    };
    let finish = events(&stream_finish(&three_calls(), &other, None));
    assert_eq!(finish[9].1["usage"], usage_json(7, 8, 9, 10));
}

#[test]
fn usage_field_order_on_the_wire() {
    let usage = Usage {
        input_tokens: 1,
        output_tokens: 2,
        cache_read_input_tokens: 3,
        cache_creation_input_tokens: 4,
    };
    let wire = "\"usage\":{\"input_tokens\":1,\"cache_creation_input_tokens\":4,\
                \"cache_read_input_tokens\":3,\"output_tokens\":2}";
    let head = MessageHead { usage, ..head() };
    let text = Reply::Text("x".into());
    assert!(stream_finish(&text, &usage, None).contains(wire));
    assert!(render_json(&head, &text, None).ends_with(&format!("{wire}}}")));
    assert!(stream_start(&head).contains(
        "\"usage\":{\"input_tokens\":1,\"cache_creation_input_tokens\":4,\
         \"cache_read_input_tokens\":3,\"output_tokens\":1}"
    ));
}

#[test]
fn text_reply_is_byte_identical_to_serde_escaping() {
    // The content is written by the crate's own escaper; it must give serde_json's bytes.
    let text: String = (0u8..=0x7f)
        .map(char::from)
        .chain("é中😀\u{2028}".chars())
        .cycle()
        .take(5_000)
        .collect();
    let escaped = serde_json::to_string(&text).unwrap();
    let finish = stream_finish(&Reply::Text(text.clone()), &Usage::default(), None);
    assert!(finish.contains(&format!(
        "{{\"type\":\"text_delta\",\"text\":{escaped}}}}}\n\n"
    )));
    let body = render_json(&head(), &Reply::Text(text), None);
    assert!(body.contains(&format!(
        "\"content\":[{{\"type\":\"text\",\"text\":{escaped}}}]"
    )));
}

#[test]
fn large_tool_input_round_trips() {
    let value = json!({"content": "line \"one\"\n\tline two é 中\\".repeat(20_000), "n": [1, 2]});
    let input = serde_json::to_string_pretty(&value).unwrap();
    let reply = Reply::of_calls([call("id", "Write", &input), call("id2", "Read", "{}")]);
    let stream = events(&stream_finish(&reply, &Usage::default(), None));
    let partial = stream[1].1["delta"]["partial_json"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(partial).unwrap(), value);
    assert!(!partial.contains("\n  "), "compacted");
    let body: Value = serde_json::from_str(&render_json(&head(), &reply, None)).unwrap();
    assert_eq!(body["content"][0]["input"], value);
    assert_eq!(body["content"][1]["input"], json!({}));
}

mod safeguard_results {
    use super::*;
    use devin_bridge_types::{CallVerdict, Evaluation, SafeguardOutcome, ToolVerdict};

    fn evaluated(id: &str, outcome: SafeguardOutcome, rule: Option<&str>) -> ToolVerdict {
        ToolVerdict {
            id: id.to_owned(),
            verdict: CallVerdict::Evaluated(Evaluation {
                outcome,
                explanation: format!("because \"{id}\"\n"),
                cited_rule: rule.map(str::to_owned),
            }),
        }
    }

    fn results_of_body(body: &str) -> serde_json::Value {
        let body: serde_json::Value = serde_json::from_str(body).expect("a JSON body");
        body["safeguard_results"].clone()
    }

    #[test]
    fn each_id_gets_its_verdict_and_an_id_given_twice_keeps_its_first() {
        let status = SafeguardStatus::Available(vec![
            evaluated("a", SafeguardOutcome::Flagged, None),
            evaluated("b", SafeguardOutcome::NotFlagged, Some("auto_mode.allow.3")),
            evaluated("a", SafeguardOutcome::NotFlagged, None),
        ]);
        let head = MessageHead {
            id: "msg".into(),
            model: "m".into(),
            usage: Usage::estimated(1, 1),
        };
        let results = results_of_body(&render_json(&head, &Reply::Text("x".into()), Some(&status)));
        assert_eq!(
            results,
            serde_json::json!([{
                "type": "dangerous_tool_use",
                "status": {"type": "available", "tool_uses": {
                    "a": {"type": "evaluated", "outcome": "flagged", "explanation": "because \"a\"\n"},
                    "b": {"type": "evaluated", "outcome": "not_flagged", "explanation": "because \"b\"\n",
                          "cited_rule": {"type": "classifier_context", "path": "auto_mode.allow.3"}}
                }}
            }])
        );
    }

    #[test]
    fn without_a_safeguard_there_is_no_field_in_a_body_or_a_delta() {
        let head = MessageHead {
            id: "msg".into(),
            model: "m".into(),
            usage: Usage::estimated(1, 1),
        };
        assert!(!render_json(&head, &Reply::Text("x".into()), None).contains("safeguard_results"));
        assert!(!render_stream(&head, &Reply::Text("x".into()), None).contains("safeguard_results"));
        let unavailable = SafeguardStatus::Unavailable("bad \"context\"".into());
        let stream = stream_finish(&Reply::Text("x".into()), &head.usage, Some(&unavailable));
        let delta = stream
            .split("\n\n")
            .find(|event| event.starts_with("event: message_delta"))
            .and_then(|event| event.split_once("data: "))
            .map(|(_, data)| serde_json::from_str::<serde_json::Value>(data).expect("JSON data"))
            .expect("a message_delta");
        assert_eq!(
            delta["delta"]["safeguard_results"],
            serde_json::json!([{"type": "dangerous_tool_use",
                "status": {"type": "unavailable", "reason": "bad \"context\""}}])
        );
    }
}

#[test]
fn text_blocks_keep_their_place_between_the_calls() {
    let reply = Reply::Tools(vec![
        ReplyBlock::Text("Let me list the files.".into()),
        ReplyBlock::Call(call("devin_call_a", "Bash", r#"{"command":"ls"}"#)),
        ReplyBlock::Text("And read one:".into()),
        ReplyBlock::Call(call("devin_call_b", "Read", r#"{"file_path":"/a"}"#)),
        ReplyBlock::Text("Back with results.".into()),
    ]);
    let stream = events(&stream_finish(&reply, &Usage::default(), None));
    let starts: Vec<(String, u64)> = stream
        .iter()
        .filter(|(name, _)| name == "content_block_start")
        .map(|(_, data)| {
            (
                data["content_block"]["type"]
                    .as_str()
                    .expect("type")
                    .to_owned(),
                data["index"].as_u64().expect("index"),
            )
        })
        .collect();
    assert_eq!(
        starts,
        [
            ("text".to_owned(), 0),
            ("tool_use".to_owned(), 1),
            ("text".to_owned(), 2),
            ("tool_use".to_owned(), 3),
            ("text".to_owned(), 4)
        ]
    );
    let deltas: Vec<Value> = stream
        .iter()
        .filter(|(name, _)| name == "content_block_delta")
        .map(|(_, data)| data["delta"].clone())
        .collect();
    assert_eq!(
        deltas[0],
        json!({"type": "text_delta", "text": "Let me list the files."})
    );
    assert_eq!(
        deltas[2],
        json!({"type": "text_delta", "text": "And read one:"})
    );
    assert_eq!(deltas[3]["type"], "input_json_delta");
    let delta = stream
        .iter()
        .find(|(name, _)| name == "message_delta")
        .expect("message_delta");
    assert_eq!(delta.1["delta"]["stop_reason"], "tool_use");

    let body: Value = serde_json::from_str(&render_json(&head(), &reply, None)).unwrap();
    assert_eq!(
        body["content"],
        json!([
            {"type": "text", "text": "Let me list the files."},
            {"type": "tool_use", "id": "devin_call_a", "name": "Bash", "input": {"command": "ls"}},
            {"type": "text", "text": "And read one:"},
            {"type": "tool_use", "id": "devin_call_b", "name": "Read", "input": {"file_path": "/a"}},
            {"type": "text", "text": "Back with results."}
        ])
    );
    assert_eq!(body["stop_reason"], "tool_use");
}

#[test]
fn text_streamed_whole_at_the_end_renders_as_the_finished_reply_of_one_text_block_and_calls() {
    let calls = vec![
        ToolCall {
            id: "devin_call_a".into(),
            name: "Bash".into(),
            input: r#"{"command":"ls"}"#.into(),
        },
        ToolCall {
            id: "devin_call_b".into(),
            name: "Read".into(),
            input: r#"{"file_path":"/a"}"#.into(),
        },
    ];
    let usage = Usage {
        input_tokens: 3,
        output_tokens: 4,
        ..Usage::default()
    };
    let text = "Let me look.\n\nThen \"this\".";
    let mut blocks = vec![ReplyBlock::Text(text.into())];
    blocks.extend(calls.iter().cloned().map(ReplyBlock::Call));
    let finished = stream_finish(&Reply::Tools(blocks), &usage, None);
    let streamed = stream_text(true, "") + &stream_finish_after_text(text, &calls, &usage, None);
    assert_eq!(streamed, finished);

    // Cut into pieces, the same text arrives in the same block, in order.
    let pieces = stream_text(true, "Let me")
        + &stream_text(false, " look.\n\nThen")
        + &stream_finish_after_text(" \"this\".", &[], &usage, None);
    let texts: String = pieces
        .split("\n\n")
        .filter_map(|event| event.strip_prefix("event: content_block_delta\ndata: "))
        .map(|data| {
            let data: Value = serde_json::from_str(data).unwrap();
            assert_eq!(data["index"], 0);
            data["delta"]["text"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(texts, text);
    assert!(pieces.contains("\"stop_reason\":\"end_turn\""));
}
