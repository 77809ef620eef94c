//! Unit tests of the public API: one group per rule, then the heuristic.

use super::*;
use serde_json::json;

/// A small catalog in the shape Claude Code sends (draft-07, `additionalProperties: false`).
fn tools() -> String {
    json!([
        {
            "name": "Bash",
            "description": "Run a shell command",
            "input_schema": {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "timeout": {"type": "number", "maximum": 600000},
                    "description": {"type": "string"}
                },
                "required": ["command"],
                "additionalProperties": false
            }
        },
        {
            "name": "Read",
            "description": "Read a file",
            "input_schema": {
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "pattern": "^/"},
                    "offset": {"type": "integer", "minimum": 0},
                    "limit": {"type": "integer", "exclusiveMinimum": 0}
                },
                "required": ["file_path"],
                "additionalProperties": false
            }
        },
        {"name": "NoArgs", "description": "Takes nothing", "input_schema": {"type": "object"}},
        {"name": "Broken", "description": "Bad schema", "input_schema": {"type": 12}}
    ])
    .to_string()
}

/// The bridge's default limit of calls per reply.
const MAX_CALLS: u32 = 8;

/// `parse` with the test catalog and seed, checked to give the same answer as `parse_span`
/// (what the component answers), resolved against the output both ways.
fn parse_with(output: &str, max_calls: u32) -> Result<Parsed, Failure> {
    let tools = tools();
    let borrowed = parse(output, &tools, "seed", max_calls);
    let span = parse_span(output, &tools, "seed", max_calls);
    let resolved = span
        .clone()
        .map(|span| span.resolve(output).expect("a span of the output"));
    assert_eq!(borrowed, resolved, "{output:?}");
    let owned = span.map(|span| {
        span.resolve_owned(output.to_owned())
            .expect("a span of the output")
    });
    assert_eq!(borrowed, owned, "{output:?}");
    borrowed
}

fn parsed(output: &str) -> Parsed {
    match parse_with(output, MAX_CALLS) {
        Ok(parsed) => parsed,
        Err(failure) => panic!("{output:?} failed: {failure}"),
    }
}

fn ok(output: &str) -> Reply {
    parsed(output).reply
}

/// The blocks of a reply that calls tools.
fn blocks(output: &str) -> Vec<ReplyBlock> {
    match ok(output) {
        Reply::Tools(blocks) => blocks,
        Reply::Text(text) => panic!("{output:?} gave text {text:?}"),
    }
}

/// The calls of a reply that calls tools and holds nothing else.
fn tool_calls(output: &str) -> Vec<ToolCall> {
    blocks(output)
        .into_iter()
        .map(|block| match block {
            ReplyBlock::Call(call) => call,
            ReplyBlock::Text(text) => panic!("{output:?} has the text block {text:?}"),
        })
        .collect()
}

fn tool_call(output: &str) -> ToolCall {
    match <[ToolCall; 1]>::try_from(tool_calls(output)) {
        Ok([call]) => call,
        Err(calls) => panic!("{output:?} gave {} calls", calls.len()),
    }
}

/// The failure of `output` under `max_calls`, checked to be a repairable 502 with `code`.
fn rejected_with(output: &str, max_calls: u32, code: &str) -> Failure {
    let failure = parse_with(output, max_calls).expect_err(output);
    assert_eq!(failure.code, code, "{output:?}: {}", failure.message);
    assert_eq!(failure.status, 502, "{output:?}");
    assert!(failure.repairable, "{output:?}");
    failure
}

/// The failure of `output` under the default limit.
fn rejected(output: &str, code: &str) -> Failure {
    rejected_with(output, MAX_CALLS, code)
}

/// An envelope calling `name` with `arguments`.
fn envelope(name: &str, arguments: serde_json::Value) -> String {
    format!(
        "<tool>{}</tool>",
        json!({"name": name, "arguments": arguments})
    )
}

mod rule_1_text {
    use super::*;

    #[test]
    fn output_without_tags_is_text() {
        assert_eq!(
            ok("The answer is 42."),
            Reply::Text("The answer is 42.".into())
        );
        assert_eq!(
            ok("a < b and <b>bold</b> and <tools> and <Tool>"),
            Reply::Text("a < b and <b>bold</b> and <tools> and <Tool>".into())
        );
    }

    #[test]
    fn trailing_whitespace_and_leading_blank_lines_are_trimmed() {
        assert_eq!(ok("\n\n  \nDone.\n\n"), Reply::Text("Done.".into()));
        assert_eq!(
            ok("\n    indented code\nnext\n"),
            Reply::Text("    indented code\nnext".into()),
            "first-line indentation is kept"
        );
        assert_eq!(
            ok("  one line  "),
            Reply::Text("  one line".into()),
            "no line break: nothing before the text is a blank line"
        );
        assert_eq!(
            ok("a\n\n\nb"),
            Reply::Text("a\n\n\nb".into()),
            "inside: verbatim"
        );
    }

    #[test]
    fn empty_output_is_empty_text() {
        assert_eq!(ok(""), Reply::Text(String::new()));
        assert_eq!(ok(" \n\t "), Reply::Text(String::new()));
    }
}

mod rule_2_count {
    use super::*;

    fn two() -> String {
        format!(
            "{}\n{}",
            envelope("Read", json!({"file_path": "/a"})),
            envelope("Read", json!({"file_path": "/b"}))
        )
    }

    #[test]
    fn more_envelopes_than_the_limit_are_excessive() {
        let failure = rejected_with(&two(), 1, "excessive_tool_requests");
        assert_eq!(
            failure.message,
            "the output contains at least 2 <tool> envelopes; one tool call per reply is allowed"
        );
        let three = format!("{}{}", two(), envelope("NoArgs", json!({})));
        let failure = rejected_with(&three, 2, "excessive_tool_requests");
        assert_eq!(
            failure.message,
            "the output contains at least 3 <tool> envelopes; at most 2 tool calls per reply are \
             allowed"
        );
        assert_eq!(tool_calls(&three).len(), 3, "within the default limit");
        assert!(parse_with(&three, 3).is_ok(), "exactly at the limit");
    }

    #[test]
    fn a_limit_of_zero_counts_as_one() {
        let failure = rejected_with(&two(), 0, "excessive_tool_requests");
        assert!(
            failure.message.contains("one tool call per reply"),
            "{}",
            failure.message
        );
        let one = envelope("NoArgs", json!({}));
        assert!(
            matches!(parse_with(&one, 0), Ok(Parsed { reply: Reply::Tools(calls), .. }) if calls.len() == 1)
        );
    }

    #[test]
    fn an_unclosed_envelope_over_the_limit_is_excessive_within_it_malformed() {
        let output = r#"<tool>{"name":"NoArgs"}</tool><tool>{"name":"NoArgs""#;
        rejected_with(output, 1, "excessive_tool_requests");
        let failure = rejected(output, "malformed_tool_json");
        assert_eq!(
            failure.message,
            "call 2 of 2: the <tool> envelope has no closing </tool> tag outside its JSON \
             strings, and its body is not one complete JSON object"
        );
    }

    #[test]
    fn excess_wins_over_prose_and_bad_json() {
        rejected_with(
            "I will call two. <tool>x</tool> <tool>y</tool>",
            1,
            "excessive_tool_requests",
        );
        rejected_with(
            "<tool>x</tool> <tool>{\"a\": <tool> </tool>",
            1,
            "excessive_tool_requests",
        );
    }

    #[test]
    fn the_count_stops_at_the_first_envelope_over_the_limit() {
        // What follows the envelope over the limit is never read: a cut-off envelope, prose,
        // a nesting, and thousands more envelopes change nothing.
        let valid = envelope("NoArgs", json!({}));
        for tail in ["<tool>{", "prose", "<tool>{\"a\":<tool>", "</tool>"] {
            let output = format!("{valid}{valid}{valid}{tail}");
            rejected_with(&output, 2, "excessive_tool_requests");
        }
        let many = valid.repeat(200_000);
        rejected_with(&many, 2, "excessive_tool_requests");
        rejected(&many, "excessive_tool_requests");
    }

    #[test]
    fn closing_tag_alone_is_malformed() {
        let failure = rejected("All done.</tool>", "malformed_tool_json");
        assert!(
            failure.message.contains("without an opening"),
            "{}",
            failure.message
        );
    }
}

mod rule_3_outside_text {
    use super::*;

    fn text(text: &str) -> ReplyBlock {
        ReplyBlock::Text(text.into())
    }

    #[test]
    fn prose_before_between_and_after_becomes_text_blocks_in_order() {
        let read = envelope("Read", json!({"file_path": "/a"}));
        let bash = envelope("Bash", json!({"command": "ls"}));
        let output = format!("Let me read it.\n{read}\n\nand then list:\n  {bash}\nDone.  \n");
        let got = blocks(&output);
        let calls = tool_calls(&format!("{read}{bash}"));
        assert_eq!(
            got,
            [
                text("Let me read it."),
                ReplyBlock::Call(calls[0].clone()),
                text("and then list:"),
                ReplyBlock::Call(calls[1].clone()),
                text("Done."),
            ]
        );
        // The prose changes neither the calls nor their ids, and repairs nothing.
        assert!(parsed(&output).recoveries.is_empty());
        let before = blocks(&format!("I'll run the tests now.\n{bash}"));
        assert_eq!(before.len(), 2);
        assert_eq!(before[0], text("I'll run the tests now."));
    }

    #[test]
    fn whitespace_between_envelopes_is_no_block() {
        let read = envelope("Read", json!({"file_path": "/a"}));
        assert_eq!(tool_calls(&format!(" {read}\n\t{read}\r\n")).len(), 2);
        assert_eq!(
            tool_calls(&format!("{read}{read}")).len(),
            2,
            "nothing between"
        );
    }

    #[test]
    fn whitespace_around_is_fine() {
        let call = tool_call("\n\t <tool>\n{\"name\": \"NoArgs\"}\n</tool> \r\n");
        assert_eq!(call.name, "NoArgs");
    }

    #[test]
    fn a_stray_closing_tag_is_malformed() {
        let read = envelope("Read", json!({"file_path": "/a"}));
        for output in [
            format!("{read}</tool>"),
            format!("{read}</tool>{read}"),
            format!("done </tool> {read}"),
        ] {
            let failure = rejected(&output, "malformed_tool_json");
            assert!(
                failure.message.contains("without an opening"),
                "{}",
                failure.message
            );
        }
    }

    #[test]
    fn prose_does_not_excuse_a_bad_envelope() {
        rejected("Here: <tool>not json</tool>", "malformed_tool_json");
        rejected("Here: <tool>{\"name\":", "malformed_tool_json");
        rejected(
            r#"Let me look. <tool>{"name":"Nope"}</tool>"#,
            "unidentified_tool",
        );
        rejected(
            r#"Reading. <tool>{"name":"Read","arguments":{"file_path":"relative"}}</tool>"#,
            "invalid_tool_arguments",
        );
    }
}

mod code_fences {
    use super::*;

    const FENCED: &str =
        "```xml\n<tool>{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}</tool>\n```";

    #[test]
    fn an_envelope_in_a_fence_alone_is_a_text_reply() {
        // Read as an example: the client gets the text, and no command runs.
        assert_eq!(ok(FENCED), Reply::Text(FENCED.into()));
        let tilde = "~~~\n<tool>{\"name\":\"NoArgs\"}</tool>\n~~~\n";
        assert_eq!(ok(tilde), Reply::Text(tilde.trim_end().into()));
        // A fence never closed runs to the end of the output.
        let open = "Example:\n```\n<tool>{\"name\":\"NoArgs\"}</tool>";
        assert_eq!(ok(open), Reply::Text(open.into()));
    }

    #[test]
    fn a_fenced_call_announced_in_prose_is_narration_for_the_repair() {
        // A model that fenced its real call and said so: no call is made, and the narration
        // check (which the host runs on text replies) asks for it again.
        let output = format!("Let me run the tests.\n{FENCED}");
        assert!(matches!(ok(&output), Reply::Text(_)));
        assert!(narrates_unexecuted_action(&output));
        // Quoting the syntax in an answer is not narration.
        assert!(!narrates_unexecuted_action(&format!(
            "Calls look like this:\n{FENCED}"
        )));
    }

    #[test]
    fn a_fenced_example_beside_a_real_call_stays_text() {
        let bash = envelope("Bash", json!({"command": "ls"}));
        let output = format!("For example:\n{FENCED}\nNow for real:\n{bash}");
        let got = blocks(&output);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(
            got[0],
            ReplyBlock::Text(format!("For example:\n{FENCED}\nNow for real:"))
        );
        assert!(matches!(&got[1], ReplyBlock::Call(call) if call.input == r#"{"command":"ls"}"#));
        // A fenced closing tag is quoted text too, not a stray one.
        let closing = format!("{bash}\n```\n</tool>\n```");
        assert_eq!(blocks(&closing).len(), 2);
    }

    #[test]
    fn fences_are_lines_of_three_or_more_markers() {
        // Inline backticks, two backticks or an indented line are no fence: the tag counts.
        for output in [
            "``<tool>{\"name\":\"NoArgs\"}</tool>``",
            "`` \n<tool>{\"name\":\"NoArgs\"}</tool>",
            "    ```\n<tool>{\"name\":\"NoArgs\"}</tool>\n    ```",
        ] {
            assert_eq!(parsed(output).reply.calls().count(), 1, "{output:?}");
        }
        // A fence closes only with the same marker, at least as long.
        let unclosed = "````\n```\n<tool>{\"name\":\"NoArgs\"}</tool>\n~~~~\n";
        assert!(matches!(ok(unclosed), Reply::Text(_)));
        let closed = "````\nx\n`````\n<tool>{\"name\":\"NoArgs\"}</tool>";
        assert_eq!(parsed(closed).reply.calls().count(), 1);
    }

    #[test]
    fn a_fence_line_inside_an_envelope_is_not_prose() {
        // The envelope's own fence (the fenced-JSON recovery) opens nothing outside it.
        let output = "<tool>\n```json\n{\"name\":\"NoArgs\"}\n```\n</tool>\nthen\n<tool>{\"name\":\"NoArgs\"}</tool>";
        let got = parsed(output);
        assert_eq!(got.reply.calls().count(), 2);
        assert_eq!(got.recoveries, [Recovery::FencedJson]);
    }
}

mod recoveries {
    use super::*;

    #[test]
    fn an_unclosed_last_envelope_is_closed() {
        let got = parsed("Let me list the files.\n<tool>{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}\n");
        assert_eq!(got.recoveries, [Recovery::UnclosedEnvelope]);
        assert!(matches!(&got.reply, Reply::Tools(blocks) if blocks.len() == 2));
        let cut = parsed("<tool>{\"name\":\"NoArgs\"}</to");
        assert_eq!(cut.recoveries, [Recovery::UnclosedEnvelope]);
        let after = parsed(&format!(
            "{}\n<tool>{{\"name\":\"NoArgs\"}}",
            envelope("NoArgs", json!({}))
        ));
        assert_eq!(after.reply.calls().count(), 2);
        assert_eq!(after.recoveries, [Recovery::UnclosedEnvelope]);
    }

    #[test]
    fn an_unclosed_envelope_that_is_not_one_object_stays_malformed() {
        for output in [
            "<tool>{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"",
            "<tool>{\"name\":\"NoArgs\"} and then I will",
            "<tool>[{\"name\":\"NoArgs\"}]",
            "<tool>",
        ] {
            let failure = rejected(output, "malformed_tool_json");
            assert!(
                failure.message.contains("no closing </tool>"),
                "{output:?}: {}",
                failure.message
            );
        }
    }

    #[test]
    fn fenced_json_trailing_commas_and_stray_prose_are_repaired_and_reported() {
        let fenced = parsed("<tool>\n```json\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}\n```\n</tool>");
        assert_eq!(fenced.recoveries, [Recovery::FencedJson]);
        let comma = parsed(r#"<tool>{"name": "Bash", "arguments": {"command": "ls",},}</tool>"#);
        assert_eq!(comma.recoveries, [Recovery::TrailingComma]);
        let prose = parsed(
            r#"<tool>Calling Bash: {"name": "Bash", "arguments": {"command": "ls"}} now</tool>"#,
        );
        assert_eq!(prose.recoveries, [Recovery::StrayProse]);
        // Each is the same call as the well-formed envelope, id included.
        let clean = tool_call(r#"<tool>{"name":"Bash","arguments":{"command":"ls"}}</tool>"#);
        for got in [fenced, comma, prose] {
            assert_eq!(got.reply.calls().collect::<Vec<_>>(), [&clean]);
        }
    }

    #[test]
    fn recoveries_are_listed_in_reply_order() {
        let output = "<tool>{\"name\":\"NoArgs\",}</tool> <tool>x {\"name\":\"NoArgs\"}</tool>\n<tool>```\n{\"name\":\"NoArgs\"}\n```";
        assert_eq!(
            parsed(output).recoveries,
            [
                Recovery::TrailingComma,
                Recovery::StrayProse,
                Recovery::UnclosedEnvelope,
                Recovery::FencedJson
            ]
        );
    }

    #[test]
    fn two_objects_in_one_envelope_are_ambiguous() {
        let failure = rejected(
            r#"<tool>{"name":"Bash","arguments":{"command":"ls"}} or {"name":"NoArgs"}</tool>"#,
            "ambiguous_tool_envelope",
        );
        assert!(
            failure.message.contains("more than one JSON object"),
            "{}",
            failure.message
        );
    }
}

mod rule_4_json {
    use super::*;

    #[test]
    fn body_must_be_json() {
        let failure = rejected("<tool>{name: 'Bash'}</tool>", "malformed_tool_json");
        assert!(failure
            .message
            .starts_with("the <tool> envelope body is not valid JSON: "));
        rejected("<tool></tool>", "malformed_tool_json");
        rejected(
            r#"<tool>{"name":"NoArgs"} {}</tool>"#,
            "ambiguous_tool_envelope",
        );
    }

    #[test]
    fn body_must_be_an_object() {
        let failure = rejected(r#"<tool>["NoArgs"]</tool>"#, "malformed_tool_json");
        assert_eq!(
            failure.message,
            "the <tool> envelope body is an array, not a JSON object"
        );
        rejected("<tool>null</tool>", "malformed_tool_json");
    }

    #[test]
    fn duplicate_keys_are_malformed() {
        let failure = rejected(
            r#"<tool>{"name":"Read","name":"Bash","arguments":{"command":"id"}}</tool>"#,
            "malformed_tool_json",
        );
        assert!(
            failure.message.contains("duplicate key \"name\""),
            "{}",
            failure.message
        );
        rejected(
            r#"<tool>{"name":"Bash","arguments":{"command":"ls","command":"rm -rf /"}}</tool>"#,
            "malformed_tool_json",
        );
    }

    #[test]
    fn an_envelope_cut_inside_a_string_is_malformed() {
        let failure = rejected(r#"<tool>{"name":"NoArgs}</tool>"#, "malformed_tool_json");
        assert!(
            failure.message.contains("no closing </tool>"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn a_cut_off_envelope_after_complete_ones_is_malformed() {
        let read = envelope("Read", json!({"file_path": "/a"}));
        let failure = rejected(
            &format!("{read}\n{read}\n<tool>{{\"name\":\"Read\",\"arguments\":{{\"file_pa"),
            "malformed_tool_json",
        );
        assert_eq!(
            failure.message,
            "call 3 of 3: the <tool> envelope has no closing </tool> tag outside its JSON \
             strings, and its body is not one complete JSON object"
        );
    }

    #[test]
    fn envelopes_must_not_nest() {
        let nested = r#"<tool>{"name":"NoArgs","arguments":<tool>{"name":"NoArgs"}</tool>}</tool>"#;
        let failure = rejected(nested, "malformed_tool_json");
        assert_eq!(
            failure.message,
            "a <tool> tag opens inside <tool> envelope 1, outside its JSON strings; envelopes \
             must not nest: close each one with </tool> before the next <tool>"
        );
        // Overlapping: the second opens before the first closes, then each "closes".
        let overlap = r#"<tool>{"name":"NoArgs" <tool></tool>{"name":"NoArgs"}</tool>"#;
        rejected(overlap, "malformed_tool_json");
        // In a later envelope, and with no closing tag at all.
        let read = envelope("Read", json!({"file_path": "/a"}));
        let failure = rejected(&format!("{read}<tool>{{<tool>"), "malformed_tool_json");
        assert!(
            failure.message.contains("envelope 2"),
            "{}",
            failure.message
        );
        // Inside a JSON string it is content, not a nesting.
        let call =
            tool_call(r#"<tool>{"name":"Bash","arguments":{"command":"echo <tool>"}}</tool>"#);
        assert_eq!(call.input, r#"{"command":"echo <tool>"}"#);
        // Prose before the outer envelope changes nothing.
        rejected(&format!("see {nested}"), "malformed_tool_json");
    }
}

mod rule_5_name {
    use super::*;

    #[test]
    fn name_is_required_and_a_string() {
        let failure = rejected(r#"<tool>{"arguments":{}}</tool>"#, "missing_tool_name");
        assert_eq!(failure.message, "the <tool> envelope has no \"name\" field");
        let failure = rejected(r#"<tool>{"name":["Bash"]}</tool>"#, "missing_tool_name");
        assert_eq!(
            failure.message,
            "the <tool> envelope's \"name\" is an array, not a string"
        );
        rejected(r#"<tool>{"name":null}</tool>"#, "missing_tool_name");
    }

    #[test]
    fn other_envelope_fields_are_rejected() {
        let failure = rejected(
            r#"<tool>{"name":"NoArgs","input":{"a":1},"id":"x"}</tool>"#,
            "unexpected_envelope_field",
        );
        assert_eq!(
            failure.message,
            "the <tool> envelope has an unexpected field \"id\"; only \"name\" and \"arguments\" \
             are allowed"
        );
    }
}

mod rule_6_known_tool {
    use super::*;

    #[test]
    fn unknown_or_differently_cased_tools_are_unidentified() {
        let failure = rejected(r#"<tool>{"name":"Write"}</tool>"#, "unidentified_tool");
        assert_eq!(
            failure.message,
            "the tool \"Write\" is not among the request's tools"
        );
        rejected(
            r#"<tool>{"name":"bash","arguments":{"command":"ls"}}</tool>"#,
            "unidentified_tool",
        );
        rejected(r#"<tool>{"name":""}</tool>"#, "unidentified_tool");
    }

    #[test]
    fn hostile_names_are_quoted_escaped_and_bounded() {
        let long = "\"\n".repeat(5_000);
        let output = format!("<tool>{}</tool>", json!({"name": long}));
        let failure = rejected(&output, "unidentified_tool");
        assert!(failure.message.len() < 200, "{}", failure.message);
        assert!(!failure.message.contains('\n'));
    }

    #[test]
    fn an_empty_catalog_knows_no_tool() {
        let failure =
            parse(r#"<tool>{"name":"Bash"}</tool>"#, "[]", "s", MAX_CALLS).expect_err("unknown");
        assert_eq!(failure.code, "unidentified_tool");
    }
}

mod rule_7_arguments {
    use super::*;

    #[test]
    fn arguments_are_validated_with_every_error_listed() {
        let failure = rejected(
            r#"<tool>{"name":"Bash","arguments":{"timeout":700000,"cmd":"ls"}}</tool>"#,
            "invalid_tool_arguments",
        );
        assert_eq!(
            failure.message,
            "the arguments of tool \"Bash\" do not match its input schema (3 errors):\n\
             - (root): \"command\" is a required property\n\
             - (root): Additional properties are not allowed ('cmd' was unexpected)\n\
             - /timeout: value is greater than the maximum of 600000"
        );
    }

    #[test]
    fn features_the_typescript_bridge_skipped_are_checked() {
        rejected(
            r#"<tool>{"name":"Read","arguments":{"file_path":"relative.txt"}}</tool>"#,
            "invalid_tool_arguments",
        );
        rejected(
            r#"<tool>{"name":"Read","arguments":{"file_path":"/a","offset":-1}}</tool>"#,
            "invalid_tool_arguments",
        );
        rejected(
            r#"<tool>{"name":"Read","arguments":{"file_path":"/a","limit":0}}</tool>"#,
            "invalid_tool_arguments",
        );
    }

    #[test]
    fn arguments_must_be_an_object() {
        for arguments in ["null", "[]", "\"ls\"", "1"] {
            let output = format!(r#"<tool>{{"name":"NoArgs","arguments":{arguments}}}</tool>"#);
            rejected(&output, "invalid_tool_arguments");
        }
    }

    #[test]
    fn absent_arguments_are_an_empty_object() {
        let call = tool_call(r#"<tool>{"name":"NoArgs"}</tool>"#);
        assert_eq!(call.input, "{}");
        rejected(r#"<tool>{"name":"Bash"}</tool>"#, "invalid_tool_arguments");
    }

    #[test]
    fn a_broken_schema_is_a_client_error() {
        let failure = parse(
            r#"<tool>{"name":"Broken"}</tool>"#,
            &tools(),
            "seed",
            MAX_CALLS,
        )
        .expect_err("broken schema");
        assert_eq!(failure.code, "invalid_tool_schema");
        assert_eq!(failure.status, 400);
        assert!(!failure.repairable);
    }

    #[test]
    fn only_the_called_tool_schema_is_compiled() {
        // "Broken" is declared with an invalid schema; calling another tool does not notice it.
        let call = tool_call(r#"<tool>{"name":"Bash","arguments":{"command":"ls"}}</tool>"#);
        assert_eq!(call.name, "Bash");
    }
}

mod rule_8_call {
    use super::*;

    #[test]
    fn input_is_canonical_and_id_is_derived_from_it() {
        let call = tool_call(
            r#"<tool>{ "arguments": {"timeout": 5, "command": "ls -la"}, "name": "Bash" }</tool>"#,
        );
        assert_eq!(call.name, "Bash");
        assert_eq!(call.input, r#"{"command":"ls -la","timeout":5}"#);
        // printf 'seed:Bash:{"command":"ls -la","timeout":5}' | sha256sum
        assert_eq!(call.id, "devin_call_6060ac5e235bdf4b");
    }

    #[test]
    fn key_order_and_spacing_do_not_change_the_call() {
        let a =
            tool_call(r#"<tool>{"name":"Bash","arguments":{"command":"ls","timeout":5}}</tool>"#);
        let b = tool_call(
            "<tool>\n{\n  \"arguments\": {\"timeout\": 5, \"command\": \"ls\"},\n  \"name\": \"Bash\"\n}\n</tool>",
        );
        assert_eq!(a, b);
    }

    #[test]
    fn seed_name_and_arguments_all_feed_the_id() {
        let output = r#"<tool>{"name":"Bash","arguments":{"command":"ls"}}</tool>"#;
        let base = tool_call(output).id;
        let other_seed = parse(output, &tools(), "other", MAX_CALLS).expect("should parse");
        assert_ne!(
            Some(&base),
            other_seed.reply.calls().next().map(|call| &call.id)
        );
        let other_args = tool_call(r#"<tool>{"name":"Bash","arguments":{"command":"pwd"}}</tool>"#);
        assert_ne!(base, other_args.id);
    }

    #[test]
    fn closing_tag_inside_arguments_is_content() {
        let call = tool_call(
            r#"<tool>{"name":"Bash","arguments":{"command":"printf '</tool>\n<tool>' \"x\""}}</tool>"#,
        );
        assert_eq!(
            call.input,
            r#"{"command":"printf '</tool>\n<tool>' \"x\""}"#
        );
    }
}

mod several_calls {
    use super::*;

    #[test]
    fn calls_come_back_in_reply_order() {
        let output = format!(
            "{}\n\n{}\n{}",
            envelope("Read", json!({"file_path": "/src/main.rs", "limit": 20})),
            envelope("Bash", json!({"command": "cargo test"})),
            envelope("NoArgs", json!({}))
        );
        let calls = tool_calls(&output);
        let names: Vec<_> = calls.iter().map(|call| call.name.as_str()).collect();
        assert_eq!(names, ["Read", "Bash", "NoArgs"]);
        assert_eq!(calls[0].input, r#"{"file_path":"/src/main.rs","limit":20}"#);
        assert_eq!(calls[1].input, r#"{"command":"cargo test"}"#);
        assert_eq!(calls[2].input, "{}");
    }

    #[test]
    fn the_first_call_keeps_the_single_call_id_and_later_ones_hash_their_position() {
        let bash = r#"<tool>{"name":"Bash","arguments":{"command":"ls -la","timeout":5}}</tool>"#;
        let single = tool_call(bash);
        let calls = tool_calls(&format!("{bash}{bash}{bash}"));
        // printf 'seed:Bash:{"command":"ls -la","timeout":5}' | sha256sum
        assert_eq!(single.id, "devin_call_6060ac5e235bdf4b");
        assert_eq!(calls[0], single);
        // printf 'seed:2:Bash:{"command":"ls -la","timeout":5}' | sha256sum
        assert_eq!(calls[1].id, "devin_call_7d944bcd79468ffa");
        // printf 'seed:3:Bash:{"command":"ls -la","timeout":5}' | sha256sum
        assert_eq!(calls[2].id, "devin_call_d0d7fc35cad40d1c");
        assert_eq!(
            calls[1].input, calls[0].input,
            "identical calls, distinct ids"
        );
    }

    #[test]
    fn ids_are_distinct_and_deterministic() {
        let read = envelope("Read", json!({"file_path": "/a"}));
        let output = read.repeat(8);
        let calls = tool_calls(&output);
        let ids: std::collections::BTreeSet<_> = calls.iter().map(|call| &call.id).collect();
        assert_eq!(ids.len(), 8);
        assert_eq!(
            tool_calls(&output),
            calls,
            "the same output gives the same ids"
        );
        let other = parse(&output, &tools(), "other", MAX_CALLS).expect("should parse");
        assert!(
            other.reply.calls().zip(&calls).all(|(a, b)| a.id != b.id),
            "the seed feeds every id"
        );
    }

    #[test]
    fn each_call_is_checked_against_its_own_tool() {
        let output = format!(
            "{}{}{}",
            envelope("Bash", json!({"command": "ls"})),
            envelope("Read", json!({"file_path": "relative.txt"})),
            envelope("Bash", json!({"cmd": "ls"}))
        );
        let failure = rejected(&output, "invalid_tool_arguments");
        assert_eq!(
            failure.message,
            "call 2 of 3 (Read): the arguments of tool \"Read\" do not match its input schema \
             (1 error):\n- /file_path: value does not match \"^/\""
        );
        // An argument valid for one tool is not for the other.
        let swapped = format!(
            "{}{}",
            envelope("Read", json!({"file_path": "/a"})),
            envelope("Bash", json!({"file_path": "/a"}))
        );
        let failure = rejected(&swapped, "invalid_tool_arguments");
        assert!(
            failure.message.starts_with("call 2 of 2 (Bash): "),
            "{}",
            failure.message
        );
    }

    #[test]
    fn the_first_failure_in_reply_order_wins() {
        let valid = envelope("NoArgs", json!({}));
        let cases = [
            (
                format!("{valid}<tool>{{\"arguments\":{{}}}}</tool><tool>{{}}</tool>"),
                "missing_tool_name",
                "call 2 of 3: the <tool> envelope has no \"name\" field",
            ),
            (
                format!("{valid}{valid}<tool>[1]</tool>"),
                "malformed_tool_json",
                "call 3 of 3: the <tool> envelope body is an array, not a JSON object",
            ),
            (
                format!("<tool>{{\"name\":\"Write\"}}</tool>{valid}<tool>x</tool>"),
                "unidentified_tool",
                "call 1 of 3 (Write): the tool \"Write\" is not among the request's tools",
            ),
            (
                format!("{valid}<tool>{{\"name\":\"NoArgs\",\"input\":{{}}}}</tool>"),
                "unexpected_envelope_field",
                "call 2 of 2: the <tool> envelope has an unexpected field \"input\"; only \
                 \"name\" and \"arguments\" are allowed",
            ),
        ];
        for (output, code, message) in cases {
            let failure = rejected(&output, code);
            assert_eq!(failure.message, message, "{output}");
        }
    }

    #[test]
    fn a_broken_schema_among_several_calls_is_still_a_client_error() {
        let output = format!(
            "{}{}",
            envelope("NoArgs", json!({})),
            envelope("Broken", json!({}))
        );
        let failure = parse_with(&output, MAX_CALLS).expect_err("broken schema");
        assert_eq!(failure.code, "invalid_tool_schema");
        assert_eq!(failure.status, 400);
        assert!(!failure.repairable);
        assert!(failure
            .message
            .starts_with("call 2 of 2 (Broken): the input schema"));
    }

    #[test]
    fn a_tool_called_again_is_checked_again() {
        // The second call reuses the first one's checker (and validator, if one was built):
        // it must still judge its own arguments.
        let output = format!(
            "{}{}",
            envelope("Read", json!({"file_path": "/a", "offset": 1})),
            envelope("Read", json!({"file_path": "/b", "offset": -1}))
        );
        let failure = rejected(&output, "invalid_tool_arguments");
        assert!(
            failure.message.starts_with("call 2 of 2 (Read): "),
            "{}",
            failure.message
        );
        assert!(failure.message.contains("/offset"), "{}", failure.message);
        let valid = format!(
            "{}{}",
            envelope("Read", json!({"file_path": "/a", "offset": -1, "limit": 0})),
            envelope("Read", json!({"file_path": "/b"}))
        );
        let failure = rejected(&valid, "invalid_tool_arguments");
        assert!(
            failure.message.starts_with("call 1 of 2 (Read): "),
            "{}",
            failure.message
        );
    }

    #[test]
    fn hostile_names_in_the_call_prefix_are_escaped_and_bounded() {
        let long = "\"\n".repeat(5_000);
        let output = format!(
            "{}{}",
            envelope("NoArgs", json!({})),
            envelope(&long, json!({}))
        );
        let failure = rejected(&output, "unidentified_tool");
        assert!(
            failure.message.starts_with("call 2 of 2 (\\\"\\n"),
            "{}",
            failure.message
        );
        assert!(failure.message.len() < 400, "{}", failure.message);
        assert!(!failure.message.contains('\n'));
    }
}

mod owned {
    use super::*;

    #[test]
    fn a_text_reply_reuses_the_output_buffer() {
        let output = format!("\n\n  {}  \n", "x".repeat(10_000));
        let pointer = output.as_ptr();
        let Ok(span) = parse_span(&output, &tools(), "seed", MAX_CALLS) else {
            panic!("text");
        };
        let Some(Parsed {
            reply: Reply::Text(text),
            ..
        }) = span.resolve_owned(output)
        else {
            panic!("text");
        };
        assert_eq!(text, format!("  {}", "x".repeat(10_000)));
        assert_eq!(text.as_ptr(), pointer, "no new buffer");
    }
}

mod tools_input {
    use super::*;

    #[test]
    fn broken_tools_are_reported_whatever_the_output() {
        for output in ["plain text", r#"<tool>{"name":"Bash"}</tool>"#, "<tool>"] {
            let failure = parse(output, "{\"name\":\"Bash\"}", "s", MAX_CALLS).expect_err(output);
            assert_eq!(failure.code, "invalid_tools");
            assert_eq!(failure.status, 400);
            assert!(!failure.repairable);
            assert_eq!(
                failure.message,
                "the tools list is invalid: not a JSON array"
            );
        }
    }
}

pub(crate) mod robustness {
    use super::*;

    /// A tiny deterministic generator, so the test needs no dependency and never flakes.
    pub(crate) struct XorShift(pub(crate) u64);

    impl XorShift {
        pub(crate) fn next(&mut self) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 32) as usize
        }
    }

    #[test]
    fn no_panic_on_generated_outputs() {
        let pieces = [
            "<tool>",
            "</tool>",
            "<",
            ">",
            "{",
            "}",
            "[",
            "]",
            "\"",
            "\\",
            ":",
            ",",
            "\"name\"",
            "\"arguments\"",
            "\"Bash\"",
            "\"Read\"",
            "\"command\"",
            "\"file_path\"",
            "\"/a\"",
            "1",
            "-0.5e3",
            "null",
            "true",
            " ",
            "\n",
            "é",
            "’",
            "I'll",
            "let me",
            "run",
            ".",
            "next step:",
            "tests have not been run",
            "\u{0}",
            "\u{2028}",
        ];
        let tools = tools();
        let mut random = XorShift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let length = random.next() % 24;
            let output: String = (0..length)
                .map(|_| pieces[random.next() % pieces.len()])
                .collect();
            let max_calls = (random.next() % 4) as u32;
            if let Ok(parsed) = parse(&output, &tools, "seed", max_calls) {
                if let Reply::Tools(blocks) = &parsed.reply {
                    let calls = parsed.reply.calls().count();
                    assert!(calls >= 1 && calls <= max_calls.max(1) as usize);
                    // Text blocks are non-empty and never adjacent.
                    assert!(blocks
                        .windows(2)
                        .all(|pair| !matches!(pair, [ReplyBlock::Text(_), ReplyBlock::Text(_)])));
                    assert!(blocks.iter().all(
                        |block| !matches!(block, ReplyBlock::Text(text) if text.trim().is_empty())
                    ));
                } else {
                    assert!(parsed.recoveries.is_empty(), "a text reply repairs nothing");
                }
            }
            let _ = narrates_unexecuted_action(&output);
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!(
            r#"<tool>{{"name":"NoArgs","arguments":{{"a":{}1{}}}}}</tool>"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        rejected(&deep, "malformed_tool_json");
    }

    #[test]
    fn megabyte_outputs_are_handled_in_one_pass() {
        let prose = "let me think about the next step and whether tests ".repeat(20_000);
        assert!(prose.len() > 1_000_000);
        assert!(!narrates_unexecuted_action(&prose));
        let tags = "<tool></tool><".repeat(80_000);
        rejected(&tags, "excessive_tool_requests");
        let unclosed = format!("<tool>{}", "\"\\\"".repeat(400_000));
        rejected(&unclosed, "malformed_tool_json");
        assert!(!narrates_unexecuted_action(&"<".repeat(1_000_000)));
        // A hundred thousand quoted envelopes in a fence, then the real call.
        let fenced = format!(
            "```\n{}```\n<tool>{{\"name\":\"NoArgs\"}}</tool>",
            "<tool>x</tool>\n".repeat(100_000)
        );
        assert_eq!(parsed(&fenced).reply.calls().count(), 1);
        // A megabyte of prose around one object with a trailing comma, inside the envelope.
        let words = "word ".repeat(100_000);
        let body = format!("<tool>{words}{{\"name\":\"NoArgs\",}}{words}</tool>");
        assert_eq!(
            parsed(&body).recoveries,
            [Recovery::StrayProse, Recovery::TrailingComma]
        );
    }
}

mod narration {
    use super::*;

    #[track_caller]
    fn fires(text: &str) {
        assert!(narrates_unexecuted_action(text), "should fire: {text:?}");
    }

    #[track_caller]
    fn quiet(text: &str) {
        assert!(
            !narrates_unexecuted_action(text),
            "should not fire: {text:?}"
        );
    }

    #[test]
    fn intent_phrases_followed_by_a_verb() {
        fires("I'll run the test suite now.");
        fires("I’ll check the config first.");
        fires("I will inspect the logs.");
        fires("LET ME READ THE FILE.");
        fires("Let me quickly examine what changed: edit later");
        fires("Ok. I'll go ahead and, after that, start the server");
    }

    #[test]
    fn intent_needs_the_verb_in_the_same_sentence_and_window() {
        quiet("I'll summarize. Run it yourself.");
        quiet("I'll summarize\nrun it yourself");
        quiet(&format!("I will {} run", "word ".repeat(40)));
        fires(&format!("I will {} run", "word ".repeat(25)));
        fires("I'll look at src/main.rs and run it");
    }

    #[test]
    fn let_me_know_is_not_an_intent() {
        quiet("The fix is applied. Let me know if you want me to run the tests.");
        fires("Let me know. Then let me run the tests.");
    }

    #[test]
    fn plans_followed_by_a_verb() {
        fires("The next step is to run the migrations.");
        fires("Immediate next task: fix the parser.");
        fires("Next steps:\n1. Read the config\n2. Test it");
        fires("Planned actions - first, edit main.rs");
        fires("Next immediate step: check the logs");
        fires(&format!("The next step is {} run", "x".repeat(300)));
        quiet(&format!("The next step is {} run", "x".repeat(330)));
    }

    #[test]
    fn still_or_now_need_to() {
        fires("We still need to run the integration suite.");
        fires("It now needs to check the cache.");
        fires("The build is still required to test cleanly");
        quiet("We still need the logs.");
        quiet("We need to run it.");
    }

    #[test]
    fn tests_not_run() {
        fires("Note: tests have not been run.");
        fires("The tests were not yet run.");
        fires("Tests haven't been run");
        fires("The test wasn’t run");
        quiet("The tests have been run and pass.");
        quiet("Tests were not required.");
    }

    #[test]
    fn whole_words_only() {
        quiet("I'll rerun nothing; I will be brief and let mercy prevail");
        quiet("The next stepper motor reads fine");
        quiet("I will ruin it");
        quiet("I'll running");
    }

    #[test]
    fn final_answers_stay_quiet() {
        quiet("The function returns the sum of both arguments.");
        quiet("Fixed the off-by-one error in `sum`; all 12 tests pass.");
        quiet("");
    }

    #[test]
    fn an_output_that_makes_a_call_is_never_narration() {
        quiet(r#"<tool>{"name":"Bash","arguments":{"command":"echo let me run tests"}}</tool>"#);
        // A later step announced beside the call made now is how models answer.
        quiet(
            "Let me look at the files first, then I will run the tests.\n\
             <tool>{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}</tool>",
        );
        quiet(r#"I'll run it: <tool>{"name":"Bash","arguments":{"command":"make"}}</tool>"#);
        quiet(r#"<tool>{"name":"Bash","arguments":{}}</tool> next step: run"#);
        quiet(r#"<tool>{"name":"Bash","arguments":{"command":"let me run"}}"#);
    }

    #[test]
    fn a_fenced_envelope_is_no_call() {
        fires("I'll run the tests:\n```\n<tool>{\"name\":\"Bash\"}</tool>\n```");
        quiet("Envelopes look like:\n```\n<tool>{\"name\":\"Bash\"}</tool>\n```");
    }
}
