//! Golden fixtures: every case in `tests/fixtures/envelope/` against the native library.
//!
//! The format is described in `tests/fixtures/README.md`. Expected values are exact; a change in
//! wording is a deliberate fixture update.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use devin_bridge_envelope::{
    narrates_unexecuted_action, parse, parse_review, parse_span, ReplyStream,
};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/envelope")
}

/// One fixture file, checked for shape before it is run.
struct Case {
    file: String,
    call: String,
    args: Map<String, Value>,
    expect: Value,
}

fn load(path: &Path) -> Case {
    let file = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let Value::Object(mut case) = value else {
        panic!("{file}: a case is an object");
    };
    let name = case.remove("name");
    assert!(
        name.as_ref().is_some_and(Value::is_string),
        "{file}: \"name\" must be a string"
    );
    let Some(Value::String(call)) = case.remove("call") else {
        panic!("{file}: \"call\" must be a string");
    };
    let Some(Value::Object(args)) = case.remove("args") else {
        panic!("{file}: \"args\" must be an object");
    };
    let Some(expect) = case.remove("expect") else {
        panic!("{file}: \"expect\" is missing");
    };
    assert!(case.is_empty(), "{file}: unknown fields {:?}", case.keys());
    let outcomes = expect.as_object().map(Map::len);
    assert!(
        outcomes == Some(1) && (expect.get("ok").is_some() || expect.get("err").is_some()),
        "{file}: \"expect\" must be {{\"ok\": ...}} or {{\"err\": ...}}"
    );
    Case {
        file,
        call,
        args,
        expect,
    }
}

fn string_arg<'a>(case: &'a Case, name: &str) -> &'a str {
    case.args
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{}: args.{name} must be a string", case.file))
}

/// The tools text: `tools` (a JSON value, serialised compactly) or `tools_raw` (exact text).
fn tools_arg(case: &Case) -> String {
    match (case.args.get("tools"), case.args.get("tools_raw")) {
        (Some(tools), None) => serde_json::to_string(tools).expect("a Value serialises"),
        (None, Some(Value::String(raw))) => raw.clone(),
        _ => panic!(
            "{}: exactly one of args.tools and args.tools_raw (a string)",
            case.file
        ),
    }
}

/// A `u32` argument; required, so every fixture states the limit it runs under.
fn u32_arg(case: &Case, name: &str) -> u32 {
    case.args
        .get(name)
        .and_then(Value::as_u64)
        .and_then(|value| u32::try_from(value).ok())
        .unwrap_or_else(|| panic!("{}: args.{name} must be a u32", case.file))
}

fn run(case: &Case) -> Value {
    match case.call.as_str() {
        "parse" => {
            let (output, tools, id_seed, max_calls) = (
                string_arg(case, "output"),
                tools_arg(case),
                string_arg(case, "id_seed"),
                u32_arg(case, "max_calls"),
            );
            let result = parse(output, &tools, id_seed, max_calls);
            // The component answers through `parse_span` (a text reply as its span of the
            // output): resolved against the output, it must say exactly the same.
            assert_eq!(
                parse_span(output, &tools, id_seed, max_calls).map(|span| span
                    .resolve(output)
                    .unwrap_or_else(|| panic!("{}: a span outside the output", case.file))),
                result,
                "{}: parse_span differs",
                case.file
            );
            match result {
                Ok(reply) => json!({ "ok": reply }),
                Err(failure) => json!({ "err": failure }),
            }
        }
        "narrates_unexecuted_action" => {
            json!({ "ok": narrates_unexecuted_action(string_arg(case, "output")) })
        }
        "parse_review" => match parse_review(string_arg(case, "output")) {
            Ok(review) => json!({ "ok": review }),
            Err(failure) => json!({ "err": failure }),
        },
        other => panic!("{}: unknown call {other:?}", case.file),
    }
}

/// The fixture files, sorted.
fn fixture_paths() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("the fixture directory exists")
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn every_fixture_matches_the_native_library() {
    let paths = fixture_paths();
    assert!(paths.len() >= 30, "only {} fixtures", paths.len());

    let mismatches: Vec<String> = paths
        .iter()
        .map(|path| load(path))
        .filter_map(|case| {
            let actual = run(&case);
            (actual != case.expect).then(|| {
                format!(
                    "{}:\n  expected {}\n  actual   {}",
                    case.file, case.expect, actual
                )
            })
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "{} of {} fixtures differ:\n{}",
        mismatches.len(),
        paths.len(),
        mismatches.join("\n")
    );
}

#[test]
fn fixtures_cover_every_code_and_every_call() {
    let cases: Vec<Case> = std::fs::read_dir(fixtures_dir())
        .expect("the fixture directory exists")
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .map(|path| load(&path))
        .collect();
    let codes: Vec<&str> = cases
        .iter()
        .filter_map(|case| case.expect.pointer("/err/code").and_then(Value::as_str))
        .collect();
    for code in [
        "excessive_tool_requests",
        "malformed_tool_json",
        "ambiguous_tool_envelope",
        "missing_tool_name",
        "unexpected_envelope_field",
        "unidentified_tool",
        "invalid_tool_arguments",
        "invalid_tool_schema",
        "invalid_tools",
        "review_missing",
        "review_invalid",
    ] {
        assert!(codes.contains(&code), "no fixture expects {code}");
    }
    for kind in ["text", "tools"] {
        assert!(
            cases
                .iter()
                .any(|case| case.expect.pointer("/ok/kind") == Some(&json!(kind))),
            "no fixture expects a {kind} reply"
        );
    }
    assert!(
        cases.iter().any(|case| case
            .expect
            .pointer("/ok/value")
            .and_then(Value::as_array)
            .is_some_and(|calls| calls.len() > 1)),
        "no fixture expects several calls"
    );
    let blocks = |case: &Case| {
        case.expect
            .pointer("/ok/value")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    assert!(
        cases
            .iter()
            .any(|case| blocks(case).iter().any(Value::is_string)),
        "no fixture expects a text block beside a call"
    );
    for kind in [
        "unclosed_envelope",
        "fenced_json",
        "trailing_comma",
        "stray_prose",
    ] {
        assert!(
            cases.iter().any(|case| case
                .expect
                .pointer("/ok/recoveries")
                .and_then(Value::as_array)
                .is_some_and(|kinds| kinds.contains(&json!(kind)))),
            "no fixture expects the recovery {kind}"
        );
    }
    for limit in [1, 2] {
        assert!(
            cases
                .iter()
                .any(|case| case.args.get("max_calls") == Some(&json!(limit))
                    && case.expect.pointer("/err/code") == Some(&json!("excessive_tool_requests"))),
            "no fixture exceeds a limit of {limit}"
        );
    }
    for value in [true, false] {
        assert!(
            cases
                .iter()
                .any(|case| case.call == "narrates_unexecuted_action"
                    && case.expect.get("ok") == Some(&json!(value))),
            "no heuristic fixture expects {value}"
        );
    }
    assert!(
        cases
            .iter()
            .any(|case| case.call == "parse_review" && case.expect.get("ok").is_some()),
        "no review fixture expects a valid review"
    );
}

/// `output` pushed in the chunks `cuts` makes: the end must be `parse_span`'s answer, and on
/// success the released text followed by the tail is the reply's shown text; a push may fail
/// only with `parse`'s failure.
fn stream_agrees(
    file: &str,
    output: &str,
    tools: &str,
    id_seed: &str,
    max_calls: u32,
    cuts: &[usize],
) {
    let one_shot = parse_span(output, tools, id_seed, max_calls);
    let mut stream = ReplyStream::new(tools, id_seed, max_calls);
    let mut released = String::new();
    let mut from = 0;
    for &cut in cuts.iter().chain([output.len()].iter()) {
        match stream.push(&output[from..cut]) {
            Ok(shown) => released.push_str(&shown),
            Err(failure) => assert_eq!(Err(failure), one_shot, "{file}: cut at {cuts:?}"),
        }
        from = cut;
    }
    let end = stream.finish();
    assert_eq!(
        end.clone().map(|end| end.reply),
        one_shot,
        "{file}: the stream cut at {cuts:?} ends otherwise than parse"
    );
    if let (Ok(end), Ok(reply)) = (end, one_shot) {
        let reply = reply.resolve(output).expect("a span of the output").reply;
        assert_eq!(
            format!("{released}{}", end.tail),
            reply.shown_text(),
            "{file}: the text streamed when cut at {cuts:?}"
        );
    }
}

#[test]
fn every_parse_fixture_streams_to_the_same_answer_however_cut() {
    let paths = fixture_paths();
    let mut streamed = 0;
    // A small deterministic generator for the random cuttings.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state >> 32
    };
    for case in paths.iter().map(|path| load(path)) {
        if case.call != "parse" {
            continue;
        }
        let (output, tools, id_seed, max_calls) = (
            string_arg(&case, "output"),
            tools_arg(&case),
            string_arg(&case, "id_seed"),
            u32_arg(&case, "max_calls"),
        );
        let points: Vec<usize> = (1..output.len())
            .filter(|&at| output.is_char_boundary(at))
            .collect();
        let run =
            |cuts: &[usize]| stream_agrees(&case.file, output, &tools, id_seed, max_calls, cuts);
        run(&[]);
        run(&points);
        // Every single cut of a short output, and of a long one every cut near a tag, a line
        // break or a fence mark (where the stream has something to decide); every pair of
        // cuts of a very short output.
        let near_marks = |at: usize| {
            let bytes = output.as_bytes();
            bytes[at.saturating_sub(8)..(at + 8).min(bytes.len())]
                .iter()
                .any(|byte| b"<>\n`~".contains(byte))
        };
        let singles: Vec<usize> = points
            .iter()
            .copied()
            .filter(|&at| points.len() <= 400 || near_marks(at))
            .collect();
        for &cut in &singles {
            run(&[cut]);
        }
        for (i, &cut) in points.iter().enumerate() {
            if points.len() <= 64 {
                for &second in &points[i + 1..] {
                    run(&[cut, second]);
                }
            }
        }
        for _ in 0..32 {
            let every = 1 + random() % 24;
            let cuts: Vec<usize> = points
                .iter()
                .copied()
                .filter(|_| random().is_multiple_of(every))
                .collect();
            run(&cuts);
        }
        streamed += 1;
    }
    assert!(streamed >= 50, "only {streamed} parse fixtures");
}
