//! Tests of the public functions as a whole; each module tests its own rules.

use super::*;
use crate::trace::SECTION_SEPARATOR;

fn code(request: &str) -> String {
    match serialize(request) {
        Ok(_) => "ok".to_owned(),
        Err(failure) => failure.code,
    }
}

fn trace_of(prompt: &Prompt) -> &str {
    prompt
        .text
        .strip_prefix(framing::PREAMBLE)
        .expect("the prompt starts with the framing")
}

#[test]
fn minimal_request() {
    let prompt = serialize(
        r#"{"model":"devin-cli-agentic/swe-1-7","messages":[{"role":"user","content":"hi"}]}"#,
    )
    .expect("valid");
    assert_eq!(trace_of(&prompt), "[User]\nhi");
    assert!(prompt.text.starts_with("[Devin Summarizer Bridge]\n"));
    assert!(prompt.text.contains("\n\n[Execution Trace]\n[User]\nhi"));
    assert_eq!(prompt.tools, "[]");
    assert_eq!(prompt.model, "devin-cli-agentic/swe-1-7");
    assert!(!prompt.stream);
    assert_eq!(prompt.input_tokens, 3, "ceil(10 chars / 4)");
    // xxh3-128(length as 8 little-endian bytes ++ "[User]\nhi")
    let mut hashed = (b"[User]\nhi".len() as u64).to_le_bytes().to_vec();
    hashed.extend_from_slice(b"[User]\nhi");
    let digest = format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&hashed));
    assert_eq!(prompt.id_seed, digest[..24]);
    assert_eq!(prompt.id_seed.len(), 24);
}

#[test]
fn the_id_seed_of_a_long_trace_changes_with_every_appended_turn_and_costs_a_bounded_hash() {
    let long = "x".repeat(1 << 20);
    let turn_one = format!("[User]\n{long}\n[Assistant]\nok");
    let turn_two = format!("{turn_one}\n[User]\nnext");
    assert_ne!(id_seed(&turn_one), id_seed(&turn_two));
    // Same length, different last byte.
    let mut changed = turn_one.clone();
    changed.pop();
    changed.push('l');
    assert_ne!(id_seed(&turn_one), id_seed(&changed));
    // The definition: length, first 4 KiB, last 60 KiB.
    let bytes = turn_one.as_bytes();
    let mut hashed = (bytes.len() as u64).to_le_bytes().to_vec();
    hashed.extend_from_slice(&bytes[..SEED_HEAD_BYTES]);
    hashed.extend_from_slice(&bytes[bytes.len() - SEED_TAIL_BYTES..]);
    assert_eq!(
        id_seed(&turn_one),
        format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&hashed))[..24]
    );
}

#[test]
fn sections_come_in_order() {
    let prompt = serialize(
        r#"{"model":"m","stream":true,"system":"sys","tools":[{"name":"Read"}],
        "tool_choice":{"type":"auto"},"messages":[{"role":"user","content":"u"},{"role":"assistant","content":"a"}],
        "max_tokens":100,"metadata":{"user_id":"x"},"future_field":[1,2,3]}"#,
    )
    .expect("valid");
    let headers: Vec<&str> = trace_of(&prompt)
        .split(SECTION_SEPARATOR)
        .map(|section| section.lines().next().unwrap_or_default())
        .collect();
    assert_eq!(
        headers,
        [
            "[System]",
            "[Available Tools]",
            "[Tool Choice]",
            "[User]",
            "[Assistant]"
        ]
    );
    assert!(prompt.stream);
    assert_eq!(prompt.tools, r#"[{"name":"Read"}]"#);
}

#[test]
fn top_level_errors() {
    assert_eq!(code(""), "invalid_json");
    assert_eq!(code("{"), "invalid_json");
    assert_eq!(code(r#"{"model":"m"} trailing"#), "invalid_json");
    assert_eq!(code(&"[".repeat(10_000)), "invalid_json");
    assert_eq!(
        code(r#"{"model":"m","messages":[{"role":"user","content":1e999}]}"#),
        "invalid_json"
    );
    assert_eq!(code("[]"), "invalid_request");
    assert_eq!(code("null"), "invalid_request");
    assert_eq!(code(r#""text""#), "invalid_request");
    assert_eq!(code(r#"{"messages":[]}"#), "missing_model");
    assert_eq!(code(r#"{"model":"m"}"#), "empty_messages");
    assert_eq!(
        code(r#"{"model":"m","messages":[],"system":"","tools":[]}"#),
        "empty_messages"
    );
    // The reference counts sections, not messages: a system prompt alone is a trace.
    assert_eq!(code(r#"{"model":"m","system":"s"}"#), "ok");
}

#[test]
fn every_failure_is_an_unrepairable_400() {
    for request in [
        "",
        "[]",
        "{}",
        r#"{"model":"m"}"#,
        r#"{"model":"m","messages":[{"role":"x","content":""}]}"#,
    ] {
        let failure = serialize(request).expect_err("invalid");
        assert_eq!(
            (failure.status, failure.repairable),
            (400, false),
            "{request}"
        );
        assert!(!failure.message.is_empty());
    }
}

#[test]
fn error_messages_quote_client_values_briefly() {
    let long_role = "r".repeat(10_000);
    let failure = serialize(&format!(
        r#"{{"model":"m","messages":[{{"role":"{long_role}","content":"x"}}]}}"#
    ))
    .expect_err("bad role");
    assert_eq!(failure.code, "unsupported_role");
    assert!(failure.message.len() < 200, "{}", failure.message);
}

#[test]
fn same_request_same_prompt() {
    let request = r#"{"model":"m","tools":[{"name":"B","input_schema":{"z":1,"a":2}}],"messages":[{"role":"user","content":"x"}]}"#;
    assert_eq!(serialize(request), serialize(request));
}

#[test]
fn key_order_is_the_requests() {
    let prompt = serialize(
        r#"{"model":"m","tools":[{"name":"B","input_schema":{"z":1,"a":2}}],"messages":[{"role":"user","content":"x"}]}"#,
    )
    .expect("valid");
    assert!(prompt.text.contains("{\n  \"z\": 1,\n  \"a\": 2\n}"));
    assert_eq!(
        prompt.tools,
        r#"[{"name":"B","input_schema":{"z":1,"a":2}}]"#
    );
}

#[test]
fn repair_extends_the_prompt() {
    let prompt =
        serialize(r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#).expect("valid");
    let rejection = Failure::repairable(
        "action_narrative_mismatch",
        "prose around the envelope",
        400,
    );
    let repaired = repair(&prompt.text, &rejection);
    assert!(repaired.starts_with(&prompt.text));
    assert!(repaired.contains("[Single Repair Attempt]"));
    assert!(repaired.contains("action_narrative_mismatch"));
    assert!(repaired.contains("prose around the envelope"));
}

/// Byte-level mutations of `base`, deterministic (a fixed LCG, no randomness crate): `count`
/// variants, each with one to `max_edits` replaced, removed or inserted bytes from `alphabet`.
/// Variants that are not UTF-8 are left out.
pub(crate) fn mutations(
    base: &str,
    seed: u64,
    count: usize,
    max_edits: u64,
    alphabet: &[u8],
) -> Vec<String> {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    (0..count)
        .filter_map(|_| {
            let mut mutated = base.as_bytes().to_vec();
            for _ in 0..=(next() % max_edits) {
                let len = mutated.len().max(1) as u64;
                let at = (next() % len) as usize;
                let byte = alphabet[(next() % alphabet.len() as u64) as usize];
                match next() % 3 {
                    0 if at < mutated.len() => mutated[at] = byte,
                    1 if at < mutated.len() => {
                        mutated.remove(at);
                    }
                    _ => mutated.insert(at.min(mutated.len()), byte),
                }
            }
            String::from_utf8(mutated).ok()
        })
        .collect()
}

/// Whatever the bytes of a realistic request become, `serialize` returns; it never panics.
#[test]
fn mutated_requests_never_panic() {
    let base = include_str!("../../../tests/fixtures/requests/claude-code.json");
    let alphabet = b"{}[]\":,0123456789eE.-+ \\ntrufalse\x00\xc3\xa9";
    let mut outcomes = [0usize; 2];
    for text in mutations(base, 0x2545_f491_4f6c_dd1d, 300, 4, alphabet) {
        outcomes[usize::from(serialize(&text).is_ok())] += 1;
    }
    assert!(outcomes[0] > 0, "some mutations must be rejected");
}

/// One megabyte of tool results must cost about as much per byte as a small request: the
/// builder is linear (no re-scanning, no quadratic concatenation).
#[test]
fn large_requests_serialize_completely() {
    let mut messages = Vec::new();
    for i in 0..400 {
        messages.push(format!(
            r#"{{"role":"assistant","content":[{{"type":"tool_use","id":"t{i}","name":"Read","input":{{"path":"f{i}"}}}}]}}"#
        ));
        messages.push(format!(
            r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t{i}","content":"{}"}}]}}"#,
            "line of output\\n".repeat(160)
        ));
    }
    let request = format!(
        r#"{{"model":"m","tools":[{{"name":"Read"}}],"messages":[{}]}}"#,
        messages.join(",")
    );
    assert!(request.len() > 1_000_000);
    let prompt = serialize(&request).expect("valid");
    assert_eq!(prompt.text.matches("[Tool Result]").count(), 400);
}

/// A request with a system prompt, one tool and `turns` user/assistant exchanges: the user says
/// `step N`, the assistant answers `done N`; it ends with a user message.
fn conversation(turns: usize, system: &str) -> String {
    let mut messages = Vec::new();
    for turn in 0..turns {
        messages.push(serde_json::json!({"role": "user", "content": format!("step {turn}")}));
        messages.push(serde_json::json!({"role": "assistant", "content": format!("done {turn}")}));
    }
    messages.push(serde_json::json!({"role": "user", "content": "last"}));
    serde_json::json!({
        "model": "devin-cli-agentic/swe-1-7",
        "system": system,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": messages,
    })
    .to_string()
}

#[test]
fn unseen_prompt_with_nothing_held_is_the_whole_prompt() {
    let request = conversation(2, "be brief");
    let unseen = serialize_unseen(&request, PromptOptions::held(0)).expect("valid");
    let whole = serialize(&request).expect("valid");
    // The id seed is the history's last link: it covers the whole trace at no extra cost.
    assert_eq!(
        Prompt {
            id_seed: whole.id_seed.clone(),
            ..unseen.prompt.clone()
        },
        whole
    );
    assert_eq!(unseen.history.len(), 5, "one identity per message");
    assert!(unseen.history.iter().all(|id| id.len() == 32));
    assert_eq!(unseen.prompt.id_seed, unseen.history[4][..24]);
}

#[test]
fn unseen_prompt_carries_only_the_later_messages() {
    let request = conversation(2, "be brief");
    let unseen = serialize_unseen(&request, PromptOptions::held(3)).expect("valid");
    let text = &unseen.prompt.text;
    assert!(text.starts_with("[Devin Summarizer Bridge: continued]\n"));
    let after = text
        .split_once("[Execution Trace: continued]\n")
        .expect("continuation header")
        .1;
    assert_eq!(after, "[Assistant]\ndone 1\n\n---\n\n[User]\nlast");
    assert!(!text.contains("step 0") && !text.contains("be brief") && !text.contains("Bash"));
    // Everything else describes the whole request.
    let whole = serialize(&request).expect("valid");
    assert_eq!(unseen.prompt.input_tokens, whole.input_tokens);
    assert_eq!(unseen.prompt.tools, whole.tools);
    let whole_unseen = serialize_unseen(&request, PromptOptions::held(0)).expect("valid");
    assert_eq!(unseen.prompt.id_seed, whole_unseen.prompt.id_seed);
}

#[test]
fn unseen_prompt_holding_every_message_has_no_trace() {
    let request = conversation(1, "s");
    for held in [3, 4, u32::MAX] {
        let unseen = serialize_unseen(&request, PromptOptions::held(held)).expect("valid");
        assert!(unseen
            .prompt
            .text
            .ends_with("[Execution Trace: continued]\n"));
    }
}

#[test]
fn history_is_shared_by_a_continued_conversation_only() {
    let earlier = serialize_unseen(&conversation(1, "s"), PromptOptions::held(0))
        .expect("valid")
        .history;
    let later = serialize_unseen(&conversation(2, "s"), PromptOptions::held(0))
        .expect("valid")
        .history;
    // The earlier request's last message is `last`, the later one's third is `step 1`.
    assert_eq!(earlier[..2], later[..2]);
    assert_ne!(earlier[2], later[2]);
    // A different system prompt or tool list changes every identity.
    let other_system = serialize_unseen(&conversation(2, "t"), PromptOptions::held(0))
        .expect("valid")
        .history;
    assert!(other_system.iter().zip(&later).all(|(a, b)| a != b));
    let mut no_tools: serde_json::Value =
        serde_json::from_str(&conversation(2, "s")).expect("JSON");
    no_tools.as_object_mut().expect("object").remove("tools");
    let no_tools = serialize_unseen(&no_tools.to_string(), PromptOptions::held(0))
        .expect("valid")
        .history;
    assert!(no_tools.iter().zip(&later).all(|(a, b)| a != b));
}

#[test]
fn cache_markers_do_not_change_the_history() {
    // Claude Code moves `cache_control` from message to message between turns.
    let plain =
        r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#;
    let marked = r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}"#;
    assert_eq!(
        serialize_unseen(plain, PromptOptions::held(0))
            .expect("valid")
            .history,
        serialize_unseen(marked, PromptOptions::held(0))
            .expect("valid")
            .history
    );
}

#[test]
fn unseen_prompt_still_validates_the_held_messages() {
    let request = r#"{"model":"m","messages":[{"role":"robot","content":"x"},{"role":"user","content":"y"}]}"#;
    let failure = serialize_unseen(request, PromptOptions::held(1)).expect_err("invalid role");
    assert_eq!(failure.code, "unsupported_role");
}

/// A Claude Code-like conversation after `turns` tool rounds: the cache marker sits on the last
/// user message only, so it moves on every turn, and an image arrives in the second round.
fn tool_rounds(turns: usize) -> String {
    let mut messages = vec![serde_json::json!({"role": "user", "content": "Fix the build. é ✓"})];
    for turn in 0..turns {
        messages.push(serde_json::json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Looking, round {turn}.")},
            {"type": "tool_use", "id": format!("toolu_{turn}"), "name": "Bash", "input": {"command": format!("make {turn}")}}
        ]}));
        let mut result = vec![
            serde_json::json!({"type": "tool_result", "tool_use_id": format!("toolu_{turn}"), "content": format!("line\n\"{turn}\"\tdone")}),
        ];
        if turn == 1 {
            result.push(serde_json::json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}));
        }
        messages.push(serde_json::json!({"role": "user", "content": result}));
    }
    if let Some(last) = messages
        .last_mut()
        .and_then(|m| m["content"].as_array_mut())
        .and_then(|c| c.last_mut())
    {
        last["cache_control"] = serde_json::json!({"type": "ephemeral"});
    }
    serde_json::json!({
        "model": "devin-cli-agentic/swe-1-7",
        "messages": messages,
        "system": [{"type": "text", "text": "You are a coding assistant."}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "stream": true,
    })
    .to_string()
}

/// What the host hands [`serialize_resumed`] for `later` after `earlier` was serialized.
fn resume_after(
    earlier: &UnseenPrompt,
    text: &str,
    later: &str,
) -> Option<(Resume, std::ops::Range<usize>)> {
    let ends: Vec<u32> = earlier.marks.iter().map(|mark| mark.request_end).collect();
    let found = devin_bridge_types::continuation::find(text, &ends, later)?;
    let k = found.messages;
    let resume = Resume {
        messages: u32::try_from(k).expect("few messages"),
        history: earlier.history[k - 1].clone(),
        trace_chars: earlier.marks[k - 1].trace_chars,
        tool_uses: earlier.marks[..k]
            .iter()
            .flat_map(|mark| mark.tool_uses.clone())
            .collect(),
        tool_names: earlier.tool_names.clone(),
    };
    Some((resume, found.range))
}

#[test]
fn a_resumed_continuation_says_what_the_whole_request_says() {
    let images = ImageLimits {
        max_images: 8,
        max_image_bytes: 1 << 20,
    };
    let mut checked = 0;
    for turn in 1..5 {
        let (earlier, later) = (tool_rounds(turn - 1), tool_rounds(turn));
        let before = serialize_unseen(&earlier, PromptOptions { held: 0, images }).expect("valid");
        let (resume, range) = resume_after(&before, &earlier, &later).expect("continues");
        // From the second round on, the moved cache marker changed the earlier last message.
        let changed = usize::from(turn > 1);
        assert_eq!(
            resume.messages as usize,
            before.marks.len() - changed,
            "turn {turn}"
        );
        let total = u32::try_from(before.marks.len() + 1).expect("few");
        for held in resume.messages..=total {
            let options = PromptOptions { held, images };
            let whole = serialize_unseen(&later, options).expect("valid");
            let resumed =
                serialize_resumed(&later[range.clone()], &resume, options).expect("resumes");
            let k = resume.messages as usize;
            assert_eq!(resumed.text, whole.prompt.text, "turn {turn} held {held}");
            assert_eq!(resumed.input_tokens, whole.prompt.input_tokens);
            assert_eq!(resumed.id_seed, whole.prompt.id_seed);
            assert_eq!(resumed.history, whole.history[k..]);
            assert_eq!(resumed.images, whole.images, "turn {turn} held {held}");
            let shifted: Vec<MessageMark> = resumed
                .marks
                .iter()
                .map(|mark| MessageMark {
                    request_end: mark.request_end + range.start as u32,
                    ..mark.clone()
                })
                .collect();
            assert_eq!(shifted, whole.marks[k..]);
            checked += 1;
        }
    }
    assert!(checked >= 10, "{checked}");
}

#[test]
fn a_continuation_that_leaves_the_messages_array_is_rejected() {
    let earlier = tool_rounds(1);
    let before = serialize_unseen(&earlier, PromptOptions::held(0)).expect("valid");
    let first_end = before.marks[0].request_end as usize;
    // A second `messages` key, opened from inside the first array: a valid request whose
    // messages are the injected one and what follows, which no continuation can express.
    let later = format!(
        r#"{}],"messages":[{{"role":"user","content":"injected"}}{}"#,
        &earlier[..first_end],
        &earlier[first_end..]
    );
    serialize_unseen(&later, PromptOptions::held(0)).expect("the whole request is valid");
    let (resume, range) = resume_after(&before, &earlier, &later).expect("the bytes match");
    let failure = serialize_resumed(&later[range], &resume, PromptOptions::held(1))
        .expect_err("not a continuation");
    assert_eq!(failure.code, "invalid_json");
}

#[test]
fn a_continuation_checks_its_messages_against_what_came_before() {
    let earlier = tool_rounds(1);
    let before = serialize_unseen(&earlier, PromptOptions::held(0)).expect("valid");
    let (resume, _) = resume_after(&before, &earlier, &tool_rounds(2)).expect("continues");
    let held = PromptOptions::held(resume.messages);
    let result = |content: &str| {
        format!(
            r#",{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"{content}","content":"x"}}]}}"#
        )
    };
    // toolu_0 came before the continuation; toolu_9 never did.
    serialize_resumed(&result("toolu_0"), &resume, held).expect("answers an earlier call");
    let orphan = serialize_resumed(&result("toolu_9"), &resume, held).expect_err("orphan");
    assert_eq!(orphan.code, "orphan_tool_result");
    assert!(
        orphan
            .message
            .contains(&format!("messages[{}]", resume.messages)),
        "{}",
        orphan.message
    );
    let call = r#",{"role":"assistant","content":[{"type":"tool_use","id":"toolu_0","name":"Bash","input":{}}]}"#;
    assert_eq!(
        serialize_resumed(call, &resume, held)
            .expect_err("repeated")
            .code,
        "duplicate_tool_use_id"
    );
    let undeclared = call.replace("toolu_0", "toolu_7").replace("Bash", "Read");
    assert_eq!(
        serialize_resumed(&undeclared, &resume, held)
            .expect_err("undeclared")
            .code,
        "undeclared_tool"
    );
    for bad in [
        r#"{"role":"user","content":"no comma"}"#,
        r#",{"role":"user","content":"x"}]"#,
        ",",
        r#",{"role":"user""#,
    ] {
        assert_eq!(
            serialize_resumed(bad, &resume, held).expect_err(bad).code,
            "invalid_json",
            "{bad}"
        );
    }
    let unheld = PromptOptions::held(resume.messages - 1);
    assert_eq!(
        serialize_resumed(&result("toolu_0"), &resume, unheld)
            .expect_err("held")
            .code,
        "invalid_resume"
    );
    let garbled = Resume {
        history: "zz".into(),
        ..resume.clone()
    };
    assert_eq!(
        serialize_resumed(&result("toolu_0"), &garbled, held)
            .expect_err("digest")
            .code,
        "invalid_resume"
    );
}

/// A conversation whose assistant turns each request two tools at once, answered by one user
/// message holding both results (the shape a client sends after parallel tool calls).
fn parallel_tool_rounds(turns: usize) -> String {
    let mut messages = vec![serde_json::json!({"role": "user", "content": "Compare a and b."})];
    for turn in 0..turns {
        messages.push(serde_json::json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("toolu_a{turn}"), "name": "Read", "input": {"file_path": format!("/src/a{turn}.rs")}},
            {"type": "tool_use", "id": format!("toolu_b{turn}"), "name": "Grep", "input": {"pattern": format!("fn b{turn}")}}
        ]}));
        messages.push(serde_json::json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_a{turn}"), "content": format!("contents of a{turn}")},
            {"type": "tool_result", "tool_use_id": format!("toolu_b{turn}"), "content": format!("match for b{turn}")}
        ]}));
    }
    serde_json::json!({
        "model": "devin-cli-agentic/swe-1-7",
        "messages": messages,
        "tools": [
            {"name": "Read", "input_schema": {"type": "object"}},
            {"name": "Grep", "input_schema": {"type": "object"}}
        ],
    })
    .to_string()
}

#[test]
fn parallel_tool_uses_and_their_results_serialize_in_order() {
    let prompt = serialize(&parallel_tool_rounds(1)).expect("valid");
    let trace = trace_of(&prompt);
    let positions: Vec<usize> = [
        "toolu_a0",
        "/src/a0.rs",
        "toolu_b0",
        "fn b0",
        "contents of a0",
        "match for b0",
    ]
    .iter()
    .map(|needle| {
        trace
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} in {trace}"))
    })
    .collect();
    assert!(
        positions.windows(2).all(|pair| pair[0] < pair[1]),
        "both calls, then both results, in request order: {positions:?}\n{trace}"
    );
}

#[test]
fn a_resumed_continuation_with_parallel_tool_calls_says_what_the_whole_request_says() {
    let options = PromptOptions::held(0);
    for turn in 1..4 {
        let (earlier, later) = (parallel_tool_rounds(turn - 1), parallel_tool_rounds(turn));
        let before = serialize_unseen(&earlier, options).expect("valid");
        let (resume, range) = resume_after(&before, &earlier, &later).expect("continues");
        assert_eq!(
            resume.tool_uses.len(),
            2 * (turn - 1),
            "both ids of every earlier round are carried"
        );
        let held = resume.messages;
        let options = PromptOptions::held(held);
        let whole = serialize_unseen(&later, options).expect("valid");
        let resumed = serialize_resumed(&later[range], &resume, options).expect("resumes");
        assert_eq!(resumed.text, whole.prompt.text, "turn {turn}");
        assert_eq!(resumed.input_tokens, whole.prompt.input_tokens);
        assert_eq!(resumed.history, whole.history[held as usize..]);
        let last = whole.marks.len() - 2;
        assert_eq!(
            whole.marks[last].tool_uses,
            [
                format!("toolu_a{}", turn - 1),
                format!("toolu_b{}", turn - 1)
            ],
            "one mark lists every id its message introduced"
        );
    }
}

#[test]
fn a_result_for_an_id_the_history_never_used_is_refused_even_beside_a_valid_one() {
    let request = parallel_tool_rounds(1).replace(
        "\"tool_use_id\":\"toolu_b0\"",
        "\"tool_use_id\":\"toolu_zz\"",
    );
    assert_eq!(code(&request), "orphan_tool_result");
    let twice = parallel_tool_rounds(1).replace("\"id\":\"toolu_b0\"", "\"id\":\"toolu_a0\"");
    assert_eq!(code(&twice), "duplicate_tool_use_id");
}

#[test]
fn disable_parallel_tool_use_asks_for_one_call_and_is_reported() {
    let with_choice = |choice: &str| {
        parallel_tool_rounds(0).replace(
            "\"tools\":",
            &format!("\"tool_choice\":{choice},\"tools\":"),
        )
    };
    let single = serialize(&with_choice(
        r#"{"type":"auto","disable_parallel_tool_use":true}"#,
    ))
    .expect("valid");
    assert!(single.single_tool_call);
    assert!(trace_of(&single).contains("Parallel tool use is disabled"));
    let parallel = serialize(&with_choice(
        r#"{"type":"auto","disable_parallel_tool_use":false}"#,
    ))
    .expect("valid");
    assert!(!parallel.single_tool_call);
    assert!(!trace_of(&parallel).contains("Parallel tool use is disabled"));
    assert!(
        !serialize(&parallel_tool_rounds(0))
            .expect("valid")
            .single_tool_call
    );
    assert!(framing::PREAMBLE.contains("may be requested together"));
    assert_eq!(
        code(&with_choice(
            r#"{"type":"auto","disable_parallel_tool_use":"yes"}"#
        )),
        "invalid_tool_choice"
    );
}

mod safeguards {
    use super::*;

    /// The conversation with `"safeguards": <text>` as its first field, spelled as given (a
    /// `serde_json::Value` would fix the key order by its features).
    fn with_safeguards(safeguards: serde_json::Value) -> String {
        with_safeguards_text(&safeguards.to_string())
    }

    fn with_safeguards_text(safeguards: &str) -> String {
        let request = conversation(1, "be brief");
        let rest = request.strip_prefix('{').expect("an object");
        format!("{{\"safeguards\":{safeguards},{rest}")
    }

    #[test]
    fn the_dangerous_tool_use_context_is_taken_compact_and_kept_out_of_the_prompt() {
        let request = with_safeguards_text(
            r#"[{"type": "something_else", "classifier_context": {"x": 1}},
                {"type": "dangerous_tool_use",
                 "classifier_context": {"v": 1, "live_cwd": "/w", "secret_rule": "Bash(deploy:*)"}}]"#,
        );
        let prompt = serialize(&request).expect("valid");
        assert_eq!(
            prompt.classifier_context.as_deref(),
            // Compact, in the order the request wrote it.
            Some(r#"{"v":1,"live_cwd":"/w","secret_rule":"Bash(deploy:*)"}"#)
        );
        assert!(
            !prompt.text.contains("secret_rule"),
            "the context stays out of the prompt"
        );
        assert!(!prompt.text.contains("Bash(deploy:*)"));
        let unseen = serialize_unseen(&request, PromptOptions::held(0)).expect("valid");
        assert_eq!(unseen.prompt.classifier_context, prompt.classifier_context);
    }

    #[test]
    fn an_entry_without_a_context_is_null_and_anything_unreadable_is_no_safeguard() {
        let bare = with_safeguards(serde_json::json!([{"type": "dangerous_tool_use"}]));
        assert_eq!(
            serialize(&bare)
                .expect("valid")
                .classifier_context
                .as_deref(),
            Some("null")
        );
        for unreadable in [
            serde_json::json!({"type": "dangerous_tool_use"}),
            serde_json::json!("dangerous_tool_use"),
            serde_json::json!([]),
            serde_json::json!([{"type": "other"}, 7, null]),
        ] {
            let request = with_safeguards(unreadable.clone());
            assert_eq!(
                serialize(&request).expect("valid").classifier_context,
                None,
                "{unreadable}"
            );
        }
        assert_eq!(
            serialize(&conversation(1, "x"))
                .expect("valid")
                .classifier_context,
            None
        );
    }
}

mod effort {
    use super::*;

    /// The conversation with `fields` (JSON members, spelled as given) after its last field.
    fn with_fields(fields: &str) -> String {
        let request = conversation(1, "be brief");
        let rest = request.strip_suffix('}').expect("an object");
        format!("{rest},{fields}}}")
    }

    #[test]
    fn the_effort_of_output_config_is_reported_and_never_changes_the_prompt() {
        let plain = serialize(&conversation(1, "be brief")).expect("valid");
        assert_eq!(plain.effort, None);
        let request = with_fields(
            r#""thinking":{"type":"adaptive","display":"omitted"},"output_config":{"effort":"High"}"#,
        );
        let prompt = serialize(&request).expect("valid");
        assert_eq!(prompt.effort.as_deref(), Some("high"));
        assert_eq!(prompt.text, plain.text, "the prompt is the same");
        assert_eq!(prompt.input_tokens, plain.input_tokens);
        assert_eq!(prompt.id_seed, plain.id_seed);
        let unseen = serialize_unseen(&request, PromptOptions::held(0)).expect("valid");
        assert_eq!(unseen.prompt.effort.as_deref(), Some("high"));
        assert_eq!(unseen.prompt.text, plain.text);
        let held = serialize_unseen(&request, PromptOptions::held(1)).expect("valid");
        assert_eq!(held.prompt.effort.as_deref(), Some("high"));
    }

    #[test]
    fn a_thinking_budget_stands_for_an_effort() {
        let of = |fields: &str| serialize(&with_fields(fields)).expect("valid").effort;
        assert_eq!(
            of(r#""thinking":{"type":"enabled","budget_tokens":31999}"#).as_deref(),
            Some("high")
        );
        assert_eq!(
            of(r#""thinking":{"type":"enabled","budget_tokens":8192}"#).as_deref(),
            Some("medium")
        );
        assert_eq!(
            of(r#""thinking":{"type":"enabled","budget_tokens":1024}"#).as_deref(),
            Some("low")
        );
        assert_eq!(
            of(r#""thinking":{"type":"adaptive","display":"updates"}"#),
            None
        );
        assert_eq!(of(r#""thinking":{"type":"disabled"}"#), None);
    }

    #[test]
    fn a_bogus_effort_is_none_and_never_a_failure() {
        for fields in [
            r#""output_config":{"effort":42}"#,
            r#""output_config":{"effort":"<script>"}"#,
            r#""output_config":{"effort":"ultra-mega-extra-high"}"#,
            r#""output_config":[]"#,
            r#""thinking":{"type":"enabled","budget_tokens":"lots"}"#,
            r#""thinking":{"type":"enabled","budget_tokens":2048.5}"#,
        ] {
            assert_eq!(
                serialize(&with_fields(fields)).expect("valid").effort,
                None,
                "{fields}"
            );
        }
    }
}
