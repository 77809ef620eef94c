//! The envelope's fixtures: `parse_span` (what the component answers through) says what
//! `parse` says, the fixtures show every code, recovery and reply shape, and every `parse`
//! fixture streams to the same answer however its output is cut.

use devin_bridge_calls::{Call, Output, StreamedParse, TransformKind};
use devin_bridge_envelope::{parse, parse_span};
use serde_json::{json, Value};

use crate::fixtures::{fixtures, Fixture};

/// One `parse` fixture's call.
struct ParseCase {
    file: String,
    output: String,
    tools: String,
    id_seed: String,
    max_calls: u32,
}

/// Every `parse` fixture of the envelope.
fn parse_cases() -> Vec<ParseCase> {
    fixtures(TransformKind::Envelope)
        .into_iter()
        .filter_map(|fixture| match fixture.case.call {
            Call::Parse {
                output,
                tools,
                id_seed,
                max_calls,
            } => Some(ParseCase {
                file: fixture.case.file,
                output,
                tools,
                id_seed,
                max_calls,
            }),
            _ => None,
        })
        .collect()
}

/// The component answers `parse` through `parse_span` (a text reply as its span of the
/// output): resolved against the output, it must say exactly what `parse` says.
#[test]
fn parse_span_resolves_to_what_parse_answers() {
    let mut checked = 0;
    for ParseCase {
        file,
        output,
        tools,
        id_seed,
        max_calls,
    } in parse_cases()
    {
        assert_eq!(
            parse_span(&output, &tools, &id_seed, max_calls).map(|span| span
                .resolve(&output)
                .unwrap_or_else(|| panic!("{file}: a span outside the output"))),
            parse(&output, &tools, &id_seed, max_calls),
            "{file}: parse_span differs"
        );
        checked += 1;
    }
    assert!(checked >= 50, "only {checked} parse fixtures");
}

#[test]
fn envelope_fixtures_cover_every_code_and_every_call() {
    let cases = fixtures(TransformKind::Envelope);
    let expect = |fixture: &Fixture, pointer: &str| fixture.case.expect.pointer(pointer).cloned();
    let codes: Vec<Value> = cases
        .iter()
        .filter_map(|fixture| expect(fixture, "/err/code"))
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
        assert!(codes.contains(&json!(code)), "no fixture expects {code}");
    }
    for kind in ["text", "tools"] {
        assert!(
            cases
                .iter()
                .any(|fixture| expect(fixture, "/ok/kind") == Some(json!(kind))),
            "no fixture expects a {kind} reply"
        );
    }
    let blocks = |fixture: &Fixture| match expect(fixture, "/ok/value") {
        Some(Value::Array(blocks)) => blocks,
        _ => Vec::new(),
    };
    assert!(
        cases.iter().any(|fixture| blocks(fixture).len() > 1),
        "no fixture expects several calls"
    );
    assert!(
        cases
            .iter()
            .any(|fixture| blocks(fixture).iter().any(Value::is_string)),
        "no fixture expects a text block beside a call"
    );
    for kind in [
        "unclosed_envelope",
        "fenced_json",
        "trailing_comma",
        "stray_prose",
    ] {
        assert!(
            cases.iter().any(|fixture| expect(fixture, "/ok/recoveries")
                .and_then(|kinds| kinds.as_array().cloned())
                .is_some_and(|kinds| kinds.contains(&json!(kind)))),
            "no fixture expects the recovery {kind}"
        );
    }
    for limit in [1, 2] {
        assert!(
            cases.iter().any(|fixture| {
                fixture.args.get("max_calls") == Some(&json!(limit))
                    && expect(fixture, "/err/code") == Some(json!("excessive_tool_requests"))
            }),
            "no fixture exceeds a limit of {limit}"
        );
    }
    for value in [true, false] {
        assert!(
            cases.iter().any(|fixture| {
                fixture.call == "narrates_unexecuted_action"
                    && fixture.case.expect.get("ok") == Some(&json!(value))
            }),
            "no heuristic fixture expects {value}"
        );
    }
    assert!(
        cases.iter().any(
            |fixture| fixture.call == "parse_review" && fixture.case.expect.get("ok").is_some()
        ),
        "no review fixture expects a valid review"
    );
}

/// `output` pushed in the chunks `cuts` makes: the end must be `parse`'s answer, and on
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
    let one_shot = parse(output, tools, id_seed, max_calls);
    let mut chunks = Vec::with_capacity(cuts.len() + 1);
    let mut from = 0;
    for &cut in cuts.iter().chain([output.len()].iter()) {
        chunks.push(output[from..cut].to_owned());
        from = cut;
    }
    let call = Call::ParseStream {
        chunks,
        tools: tools.to_owned(),
        id_seed: id_seed.to_owned(),
        max_calls,
        skip_narration: true,
    };
    let Ok(Output::Streamed(StreamedParse { pushes, end })) = call.run_native() else {
        panic!("{file}: a stream answers what it streamed");
    };
    let mut released = String::new();
    for push in pushes {
        match push {
            Ok(shown) => released.push_str(&shown),
            Err(failure) => assert_eq!(Err(failure), one_shot, "{file}: cut at {cuts:?}"),
        }
    }
    assert_eq!(
        end.clone().map(|end| end.reply),
        one_shot,
        "{file}: the stream cut at {cuts:?} ends otherwise than parse"
    );
    if let (Ok(end), Ok(parsed)) = (end, one_shot) {
        assert_eq!(
            format!("{released}{}", end.tail),
            parsed.reply.shown_text(),
            "{file}: the text streamed when cut at {cuts:?}"
        );
    }
}

#[test]
fn every_parse_fixture_streams_to_the_same_answer_however_cut() {
    let mut streamed = 0;
    // A small deterministic generator for the random cuttings.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state >> 32
    };
    for ParseCase {
        file,
        output,
        tools,
        id_seed,
        max_calls,
    } in parse_cases()
    {
        let points: Vec<usize> = (1..output.len())
            .filter(|&at| output.is_char_boundary(at))
            .collect();
        let run = |cuts: &[usize]| {
            stream_agrees(&file, &output, &tools, &id_seed, max_calls, cuts);
        };
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
