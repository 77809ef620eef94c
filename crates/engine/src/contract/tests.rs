use serde_json::{json, Value};

use super::*;
use crate::corpus::{cases, Case};
use crate::TransformKind;

fn case(kind: TransformKind, file: &str) -> Case {
    cases(kind)
        .expect("embedded fixtures decode")
        .into_iter()
        .find(|case| case.file == file)
        .unwrap_or_else(|| panic!("no fixture {file}"))
}

/// Every embedded fixture keeps its own contract (the checks accept the reference answers).
#[test]
fn every_expected_answer_passes_its_own_check() {
    for kind in TransformKind::ALL {
        for case in cases(kind).expect("fixtures") {
            check(&case.call, &case.expect, &case.expect)
                .unwrap_or_else(|error| panic!("{}: {error}", case.file));
        }
    }
}

fn with(expect: &Value, pointer: &str, value: Value) -> Value {
    let mut changed = expect.clone();
    *changed.pointer_mut(pointer).expect("pointer exists") = value;
    changed
}

/// Each `(pointer, value)` change of the case's expected answer, made alone, fails its check.
fn refuses_each_change<const N: usize>(case: &Case, changes: [(&str, Value); N]) {
    for (pointer, value) in changes {
        assert!(
            check(
                &case.call,
                &case.expect,
                &with(&case.expect, pointer, value)
            )
            .is_err(),
            "{pointer} must be checked"
        );
    }
}

#[test]
fn a_failure_may_change_its_wording_and_status_within_its_class() {
    let case = case(TransformKind::Envelope, "malformed_not_json.json");
    let reworded = with(&case.expect, "/err/message", json!("another sentence"));
    let status = with(&reworded, "/err/status", json!(504));
    check(&case.call, &case.expect, &status).expect("same code, same class");
}

#[test]
fn a_different_code_another_status_class_or_an_out_of_range_status_is_refused() {
    let case = case(TransformKind::Envelope, "malformed_not_json.json");
    let code = check(
        &case.call,
        &case.expect,
        &with(&case.expect, "/err/code", json!("oops")),
    )
    .expect_err("code");
    assert!(
        code.contains("failure code oops differs from the expected malformed_tool_json"),
        "{code}"
    );
    let class = check(
        &case.call,
        &case.expect,
        &with(&case.expect, "/err/status", json!(429)),
    )
    .expect_err("class");
    assert!(
        class.contains("not in the class of the expected 502 (5xx)"),
        "{class}"
    );
    let range = check(
        &case.call,
        &case.expect,
        &with(&case.expect, "/err/status", json!(200)),
    )
    .expect_err("range");
    assert!(range.contains("outside 400-599"), "{range}");
    let repair = check(
        &case.call,
        &case.expect,
        &with(&case.expect, "/err/repairable", json!(false)),
    )
    .expect_err("repairable");
    assert!(repair.contains("repairable"), "{repair}");
    let success = check(
        &case.call,
        &case.expect,
        &json!({"ok": {"kind": "text", "value": "x"}}),
    )
    .expect_err("ok for err");
    assert!(success.contains("got a success"), "{success}");
}

#[test]
fn tool_replies_need_the_same_name_an_object_input_and_a_well_formed_id() {
    let case = case(TransformKind::Envelope, "tool_bash.json");
    let other_id = with(
        &case.expect,
        "/ok/value/0/id",
        json!("devin_call_0123456789abcdef"),
    );
    check(&case.call, &case.expect, &other_id).expect("ids are free within their format");
    for (pointer, value, says) in [
        (
            "/ok/value/0/id",
            json!("devin_call_0123456789ABCDEF"),
            "tool id",
        ),
        ("/ok/value/0/id", json!("call_0123456789abcdef"), "tool id"),
        ("/ok/value/0/id", json!("devin_call_0123"), "tool id"),
        ("/ok/value/0/name", json!("Read"), "tool name"),
        (
            "/ok/value/0/input",
            json!("[1]"),
            "not the text of a JSON object",
        ),
        (
            "/ok/value/0/input",
            json!("{\"command\":\"rm -rf /\"}"),
            "tool input differs",
        ),
        ("/ok/kind", json!("text"), "text reply"),
    ] {
        let error = check(
            &case.call,
            &case.expect,
            &with(&case.expect, pointer, value),
        )
        .expect_err(pointer);
        assert!(error.contains(says), "{pointer}: {error}");
    }
    assert!(well_formed_tool_id("devin_call_3b9f0c1d2e4a5b6c"));
}

#[test]
fn event_streams_may_change_formatting_but_not_events_or_data() {
    let case = case(TransformKind::Sse, "04_stream_finish_tool.json");
    let text = case.expect["ok"].as_str().expect("stream").to_owned();
    // Formatting: no space after `data:`, a comment, key order and spacing inside the JSON.
    let reformatted = text
        .replace("data: ", "data:")
        .replacen(
            "event: content_block_stop",
            ": a comment\nevent: content_block_stop",
            1,
        )
        .replace(
            "{\"type\":\"message_stop\"}",
            "{ \"type\" : \"message_stop\" }",
        );
    check(&case.call, &case.expect, &json!({ "ok": reformatted })).expect("formatting is free");

    let without_stop = text.replace(
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        "",
    );
    let error =
        check(&case.call, &case.expect, &json!({ "ok": without_stop })).expect_err("sequence");
    assert!(error.contains("event sequence"), "{error}");
    let wrong_type = text.replace("{\"type\":\"message_stop\"}", "{\"type\":\"ping\"}");
    let error = check(&case.call, &case.expect, &json!({ "ok": wrong_type })).expect_err("type");
    assert!(error.contains("is not the event name"), "{error}");
    let other_data = text.replace(
        "\"stop_reason\":\"tool_use\"",
        "\"stop_reason\":\"end_turn\"",
    );
    let error = check(&case.call, &case.expect, &json!({ "ok": other_data })).expect_err("data");
    assert!(error.contains("differs from the expected"), "{error}");
    let unterminated = text.trim_end().to_owned();
    let error = check(&case.call, &case.expect, &json!({ "ok": unterminated })).expect_err("end");
    assert!(error.contains("blank line"), "{error}");
    let garbage = format!("{text}retry: 10\n\n");
    assert!(check(&case.call, &case.expect, &json!({ "ok": garbage })).is_err());
}

#[test]
fn json_bodies_are_compared_as_values_with_their_type() {
    let case = case(TransformKind::Sse, "12_render_json_tool.json");
    let text = case.expect["ok"].as_str().expect("body");
    let value: Value = serde_json::from_str(text).expect("json");
    let pretty = serde_json::to_string_pretty(&value).expect("pretty");
    check(&case.call, &case.expect, &json!({ "ok": pretty })).expect("formatting is free");
    let error = check(
        &case.call,
        &case.expect,
        &json!({ "ok": text.replace("\"type\":\"message\"", "\"type\":\"error\"") }),
    )
    .expect_err("type");
    assert!(error.contains("type"), "{error}");
    assert!(check(&case.call, &case.expect, &json!({ "ok": "not json" })).is_err());
}

#[test]
fn a_model_must_resolve_to_the_same_id_but_may_change_its_label() {
    let case = case(TransformKind::ModelAlias, "09_resolve_exact_uid.json");
    check(
        &case.call,
        &case.expect,
        &with(&case.expect, "/ok/label", json!("Another label")),
    )
    .expect("label is free");
    let error = check(
        &case.call,
        &case.expect,
        &with(&case.expect, "/ok/acp_id", json!("swe-1-6")),
    )
    .expect_err("id");
    assert!(error.contains("acp_id"), "{error}");
}

#[test]
fn a_prompt_keeps_model_stream_tokens_and_tools_but_may_reword_its_framing() {
    let case = case(TransformKind::Serializer, "ok_minimal.json");
    let text = case.expect["ok"]["text"].as_str().expect("text");
    let reframed = with(
        &case.expect,
        "/ok/text",
        json!(text.replacen("and nothing else", "and nothing more", 1)),
    );
    check(&case.call, &case.expect, &reframed).expect("framing is free");
    refuses_each_change(
        &case,
        [
            ("/ok/input_tokens", json!(6)),
            ("/ok/model", json!("devin-cli-agentic/other")),
            ("/ok/tools", json!("[{}]")),
            ("/ok/text", json!("no trace here")),
            (
                "/ok/text",
                json!(text.replacen("[Devin Summarizer Bridge]", "[Bridge]", 1)),
            ),
            ("/ok/id_seed", json!("")),
        ],
    );
}

#[test]
fn a_prompt_keeps_its_effort() {
    let effort = case(TransformKind::Serializer, "ok_effort_output_config.json");
    assert_eq!(effort.expect["ok"]["effort"], json!("high"));
    check(&effort.call, &effort.expect, &effort.expect).expect("the same answer");
    refuses_each_change(
        &effort,
        [
            ("/ok/effort", json!("low")),
            ("/ok/effort", json!("HIGH")),
            ("/ok/effort", Value::Null),
        ],
    );
    let mut dropped = effort.expect.clone();
    dropped["ok"]
        .as_object_mut()
        .expect("an object")
        .remove("effort");
    assert!(check(&effort.call, &effort.expect, &dropped).is_err());
    // A request without an effort: none may be made up.
    let plain = case(TransformKind::Serializer, "ok_minimal.json");
    let mut added = plain.expect.clone();
    added["ok"]["effort"] = json!("medium");
    assert!(check(&plain.call, &plain.expect, &added).is_err());
}

#[test]
fn a_prompt_keeps_its_local_answer() {
    let title = case(
        TransformKind::Serializer,
        "ok_session_title_local_answer.json",
    );
    assert_eq!(
        title.expect["ok"]["local_answer"],
        json!({"purpose": "session_title", "text": "{\"title\":\"Fix the failing test in math.js\"}"})
    );
    check(&title.call, &title.expect, &title.expect).expect("the same answer");
    // The same JSON, spelt otherwise, is the same answer.
    let spaced = with(
        &title.expect,
        "/ok/local_answer/text",
        json!("{ \"title\": \"Fix the failing test in math.js\" }"),
    );
    check(&title.call, &title.expect, &spaced).expect("the same JSON value");
    refuses_each_change(
        &title,
        [
            ("/ok/local_answer/purpose", json!("summary")),
            ("/ok/local_answer/text", json!("{\"title\":\"Math tests\"}")),
            (
                "/ok/local_answer/text",
                json!("Fix the failing test in math.js"),
            ),
            ("/ok/local_answer/text", json!(7)),
            ("/ok/local_answer", Value::Null),
        ],
    );
    let mut dropped = title.expect.clone();
    dropped["ok"]
        .as_object_mut()
        .expect("an object")
        .remove("local_answer");
    assert!(check(&title.call, &title.expect, &dropped).is_err());
    // A request the serializer does not answer: none may be made up.
    for file in ["ok_session_title_near_miss.json", "ok_minimal.json"] {
        let plain = case(TransformKind::Serializer, file);
        assert!(plain.expect["ok"].get("local_answer").is_none(), "{file}");
        let mut added = plain.expect.clone();
        added["ok"]["local_answer"] = title.expect["ok"]["local_answer"].clone();
        assert!(check(&plain.call, &plain.expect, &added).is_err(), "{file}");
    }
}

#[test]
fn a_resumed_prompt_keeps_tokens_images_and_message_marks_but_may_reword_and_rehash() {
    let case = case(TransformKind::Serializer, "ok_resumed_continuation.json");
    let text = case.expect["ok"]["text"].as_str().expect("text");
    let reworded = with(
        &case.expect,
        "/ok/text",
        json!(text.replacen("still applies", "still holds", 1)),
    );
    let rehashed = with(
        &with(&reworded, "/ok/history", json!(["aa", "bb"])),
        "/ok/id_seed",
        json!("bb"),
    );
    let recounted = with(&rehashed, "/ok/marks/0/trace_chars", json!(1));
    check(&case.call, &case.expect, &recounted).expect("wording and identities are free");
    refuses_each_change(
        &case,
        [
            ("/ok/input_tokens", json!(5)),
            ("/ok/history", json!(["aa"])),
            ("/ok/history", json!(["aa", "aa"])),
            ("/ok/marks/0/request_end", json!(106)),
            ("/ok/marks/0/tool_uses", json!([])),
            ("/ok/marks", json!([])),
            (
                "/ok/images",
                json!([{"media_type": "image/png", "data": "AA=="}]),
            ),
            ("/ok/id_seed", json!("not a seed")),
            (
                "/ok/text",
                json!(format!("[Devin Summarizer Bridge]\n{text}")),
            ),
        ],
    );
}

#[test]
fn a_review_must_be_the_same_value_in_the_same_canonical_spelling() {
    let case = case(TransformKind::Envelope, "review_valid.json");
    let text = case.expect["ok"].as_str().expect("review").to_owned();
    check(&case.call, &case.expect, &json!({ "ok": text.clone() })).expect("itself");
    let value: Value = serde_json::from_str(&text).expect("json");
    let pretty = serde_json::to_string_pretty(&value).expect("pretty");
    let error = check(&case.call, &case.expect, &json!({ "ok": pretty })).expect_err("spelling");
    assert!(error.contains("not in the canonical form"), "{error}");
    // The same object with its top-level keys in the reverse order.
    let reversed: serde_json::Map<String, Value> = value
        .as_object()
        .expect("object")
        .iter()
        .rev()
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let reordered = Value::Object(reversed).to_string();
    assert_ne!(reordered, text);
    let error =
        check(&case.call, &case.expect, &json!({ "ok": reordered })).expect_err("key order");
    assert!(error.contains("not in the canonical form"), "{error}");
    let other_verdict = text.replacen("request_changes", "approve", 1);
    let error =
        check(&case.call, &case.expect, &json!({ "ok": other_verdict })).expect_err("verdict");
    assert!(error.contains("the review"), "{error}");
    assert!(error.contains("differs from the expected"), "{error}");
    let error = check(&case.call, &case.expect, &json!({ "ok": "not json" })).expect_err("json");
    assert!(error.contains("the review is not JSON"), "{error}");
}

#[test]
fn an_invalid_review_passed_through_is_refused() {
    let case = case(TransformKind::Envelope, "review_bad_line.json");
    let Call::ParseReview { output } = &case.call else {
        panic!("review_bad_line.json is a parse_review case");
    };
    let error = check(&case.call, &case.expect, &json!({ "ok": output })).expect_err("passed");
    assert!(
        error.contains("expected the failure review_invalid (502), got a success"),
        "{error}"
    );
    let missing = check(
        &case.call,
        &case.expect,
        &with(&case.expect, "/err/code", json!("review_missing")),
    )
    .expect_err("code");
    assert!(
        missing.contains("differs from the expected review_invalid"),
        "{missing}"
    );
    let repairable = check(
        &case.call,
        &case.expect,
        &with(&case.expect, "/err/repairable", json!(true)),
    )
    .expect_err("repairable");
    assert!(repairable.contains("repairable"), "{repairable}");
}

#[test]
fn framed_events_and_the_tail_must_be_exactly_the_expected_ones() {
    let framed = case(TransformKind::Sse, "35_parse_events_partial_tail.json");
    check(&framed.call, &framed.expect, &framed.expect).expect("the fixture's own answer");
    for (pointer, value, says) in [
        ("/ok/tail", json!([]), "the tail"),
        ("/ok/events/0/data", json!("done\n"), "event 0"),
        ("/ok/events/0/event", json!("done"), "event 0"),
        ("/ok/events/0/id", json!(""), "event 0"),
        ("/ok/events", json!([]), "0 events framed, expected 1"),
    ] {
        let error = check(
            &framed.call,
            &framed.expect,
            &with(&framed.expect, pointer, value),
        )
        .expect_err(pointer);
        assert!(error.contains(says), "{pointer}: {error}");
    }
    let error = check(
        &framed.call,
        &framed.expect,
        &json!({ "ok": { "tail": [] } }),
    )
    .expect_err("no events");
    assert!(error.contains("no list of events"), "{error}");
    let failure = case(TransformKind::Sse, "38_parse_events_event_too_large.json");
    let error = check(&failure.call, &failure.expect, &framed.expect).expect_err("a success");
    assert!(
        error.contains("expected the failure sse_event_too_large"),
        "{error}"
    );
}

#[test]
fn several_tool_calls_need_the_same_count_order_and_distinct_ids() {
    let case = case(TransformKind::Envelope, "tools_read_grep.json");
    check(&case.call, &case.expect, &case.expect).expect("the reference answer");
    let calls = case.expect["ok"]["value"]
        .as_array()
        .expect("calls")
        .clone();
    assert_eq!(calls.len(), 2);
    let dropped = json!({"ok": {"kind": "tools", "value": [calls[0].clone()]}});
    let error = check(&case.call, &case.expect, &dropped).expect_err("a call dropped");
    assert!(error.contains("has 1 blocks, expected 2"), "{error}");
    let swapped = json!({"ok": {"kind": "tools", "value": [calls[1].clone(), calls[0].clone()]}});
    let error = check(&case.call, &case.expect, &swapped).expect_err("the order changed");
    assert!(error.contains("block 0"), "{error}");
    let same_id = with(&case.expect, "/ok/value/1/id", calls[0]["id"].clone());
    let error = check(&case.call, &case.expect, &same_id).expect_err("an id used twice");
    assert!(error.contains("used twice"), "{error}");
}

#[test]
fn text_blocks_and_recoveries_must_be_kept() {
    let case = case(
        TransformKind::Envelope,
        "prose_before_unclosed_envelope.json",
    );
    check(&case.call, &case.expect, &case.expect).expect("the reference answer");
    let blocks = case.expect["ok"]["value"]
        .as_array()
        .expect("blocks")
        .clone();
    assert!(
        blocks[0].is_string(),
        "the fixture opens with prose: {blocks:?}"
    );
    // Whitespace around a text block is free; its words are not.
    let spaced = with(
        &case.expect,
        "/ok/value/0",
        json!(format!(" {} ", blocks[0].as_str().unwrap_or_default())),
    );
    check(&case.call, &case.expect, &spaced).expect("whitespace is free");
    let reworded = with(&case.expect, "/ok/value/0", json!("something else"));
    let error = check(&case.call, &case.expect, &reworded).expect_err("text changed");
    assert!(error.contains("text block 0"), "{error}");
    let dropped = json!({"ok": {"kind": "tools", "value": [blocks[1].clone()], "recoveries": case.expect["ok"]["recoveries"].clone()}});
    let error = check(&case.call, &case.expect, &dropped).expect_err("the prose dropped");
    assert!(error.contains("has 1 blocks, expected 2"), "{error}");
    let unreported = json!({"ok": {"kind": "tools", "value": blocks}});
    let error = check(&case.call, &case.expect, &unreported).expect_err("recoveries dropped");
    assert!(error.contains("the recoveries"), "{error}");
}
