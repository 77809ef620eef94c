//! The stream against the one-shot parse: for generated replies and every way (small ones) or
//! many random ways (large ones) of cutting them into chunks, the released text followed by
//! the tail is the shown text of `parse`'s answer, the end is `parse`'s answer, an early
//! failure is `parse`'s failure, and a failing reply releases nothing past the text before
//! the point of failure. The golden corpus is cut the same way by `devin-bridge-calls`'s golden
//! test (`crates/calls/tests/golden/envelope.rs`).

use super::*;
use crate::tests::robustness::XorShift;
use crate::{parse, scan, text_range, Parsed, ReplyBlock};

fn tools() -> String {
    serde_json::json!([
        {"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
        {"name": "Read", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}}
    ])
    .to_string()
}

const SEED: &str = "seed";

/// What a stream made of `output` cut at `cuts` (increasing char boundaries).
struct Streamed {
    released: String,
    /// What every push answered, in order.
    pushes: Vec<Result<String, Failure>>,
    end: Result<StreamEnd, Failure>,
    narrates: bool,
}

fn stream(output: &str, cuts: &[usize], tools: &str, max_calls: u32) -> Streamed {
    let mut stream = ReplyStream::new(tools, SEED, max_calls);
    let mut pushes = Vec::new();
    let mut from = 0;
    for &cut in cuts.iter().chain([output.len()].iter()) {
        pushes.push(stream.push(&output[from..cut]));
        from = cut;
    }
    let released: String = pushes
        .iter()
        .filter_map(|push| push.as_ref().ok())
        .cloned()
        .collect();
    assert_eq!(stream.released_bytes(), released.len());
    let end = stream.finish();
    assert_eq!(stream.finish(), end, "a second finish answers the same");
    assert_eq!(
        stream.push("more").map_err(|failure| failure.code),
        Err("stream_finished".to_owned())
    );
    Streamed {
        released,
        pushes,
        end,
        narrates: stream.narrates(),
    }
}

/// The shown text of the longest prefix of `output` whose structure `parse` accepts (with no
/// limit on the count): what a failing reply may have released at most.
fn lenient_bound(output: &str) -> String {
    let mut cut = output.len();
    while !(output.is_char_boundary(cut) && scan::envelopes(&output[..cut], usize::MAX).is_ok()) {
        cut -= 1;
    }
    let prefix = &output[..cut];
    match scan::envelopes(prefix, usize::MAX) {
        Ok(Some(pieces)) => Reply::Tools(
            pieces
                .into_iter()
                .filter_map(|piece| match piece {
                    scan::Piece::Text(text) => {
                        let range = text_range(text);
                        (!range.is_empty()).then(|| ReplyBlock::Text(text[range].to_owned()))
                    }
                    scan::Piece::Envelope(_) => None,
                })
                .collect(),
        )
        .shown_text()
        .into_owned(),
        _ => prefix[text_range(prefix)].to_owned(),
    }
}

/// Checks one cutting of `output` against the one-shot parse; returns whether it parsed.
fn agrees(output: &str, cuts: &[usize], tools: &str, max_calls: u32, bound: Option<&str>) -> bool {
    let one_shot = parse_span(output, tools, SEED, max_calls);
    let streamed = stream(output, cuts, tools, max_calls);
    let context = || format!("{output:?} cut at {cuts:?}, max_calls {max_calls}");
    // Each release is certain, so cutting can only delay text: never more than the whole
    // output pushed at once releases (unless that one push fails early, releasing nothing).
    let whole = stream(output, &[], tools, max_calls);
    let early = whole.pushes.iter().any(Result::is_err);
    let whole = whole.released;
    assert!(
        early || whole.starts_with(&streamed.released),
        "released {:?}, more than the whole output's {whole:?}: {}",
        streamed.released,
        context()
    );
    assert_eq!(
        streamed.end.clone().map(|end| end.reply),
        one_shot,
        "the end differs from parse: {}",
        context()
    );
    // A push fails only with parse's own failure, and then every later push does too.
    if let Some(first) = streamed.pushes.iter().position(Result::is_err) {
        for push in &streamed.pushes[first..] {
            assert_eq!(push.clone().err(), one_shot.clone().err(), "{}", context());
        }
    }
    match (&one_shot, &streamed.end) {
        (Ok(reply), Ok(end)) => {
            let resolved: Parsed = reply.clone().resolve(output).expect("a span of the output");
            let shown = resolved.reply.shown_text();
            assert_eq!(
                format!("{}{}", streamed.released, end.tail),
                shown,
                "released + tail is not the shown text: {}",
                context()
            );
            let narrates = match &resolved.reply {
                Reply::Text(text) => narrates_unexecuted_action(text),
                Reply::Tools(_) => false,
            };
            assert_eq!(streamed.narrates, narrates, "{}", context());
            true
        }
        _ => {
            assert!(!streamed.narrates);
            if let Some(bound) = bound {
                assert!(
                    bound.starts_with(&streamed.released),
                    "a failing reply released {:?}, beyond {bound:?}: {}",
                    streamed.released,
                    context()
                );
            }
            false
        }
    }
}

fn boundaries(output: &str) -> Vec<usize> {
    (1..output.len())
        .filter(|&at| output.is_char_boundary(at))
        .collect()
}

/// Every single cut, every pair of cuts (short outputs), every character alone, and
/// `random` random cuttings.
fn every_cutting(output: &str, tools: &str, max_calls: u32, random: &mut XorShift, randoms: usize) {
    let parsed = parse(output, tools, SEED, max_calls).is_ok();
    let bound = (!parsed && output.len() <= 400).then(|| lenient_bound(output));
    let bound = bound.as_deref();
    let points = boundaries(output);
    agrees(output, &[], tools, max_calls, bound);
    agrees(output, &points, tools, max_calls, bound);
    for (i, &cut) in points.iter().enumerate() {
        agrees(output, &[cut], tools, max_calls, bound);
        if points.len() <= 48 {
            for &second in &points[i + 1..] {
                agrees(output, &[cut, second], tools, max_calls, bound);
            }
        }
    }
    for _ in 0..randoms {
        let mut cuts: Vec<usize> = points
            .iter()
            .copied()
            .filter(|_| random.next().is_multiple_of(4))
            .collect();
        cuts.dedup();
        agrees(output, &cuts, tools, max_calls, bound);
    }
}

/// The pieces generated replies are made of: prose (narration and multi-byte characters
/// included), whitespace, envelopes valid and not, tags and their prefixes, fences, JSON
/// punctuation, and lines that echo a transcript.
const PIECES: &[&str] = &[
    "Let me list the files.",
    "I'll run the tests now.",
    "Next step: run cargo test",
    "Done. ",
    "Hello",
    "é",
    "日本語",
    "🦀",
    "’",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\t",
    "\u{a0}",
    "\u{2003}",
    "\r\n",
    "<tool>{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}</tool>",
    "<tool>{\"name\":\"Read\",\"arguments\":{\"file_path\":\"/a é\"}}</tool>",
    "<tool>{\"name\":\"Bash\",\"arguments\":{\"command\":\"echo '</tool>' \\\"<tool>\\\"\"}}</tool>",
    "<tool>\n```json\n{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\",},}\n```\n</tool>",
    "<tool>Calling {\"name\":\"Read\",\"arguments\":{\"file_path\":\"/x\"}} now</tool>",
    "<tool>{\"name\":\"Nope\"}</tool>",
    "<tool>{\"name\":\"Bash\"}</tool>",
    "<tool>not json</tool>",
    "<tool>{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}",
    "<tool>",
    "</tool>",
    "<tool",
    "</to",
    "<",
    "<b>",
    ">",
    "{",
    "}",
    "\"",
    "\\",
    "```\n",
    "```json\n",
    "``` a`b\n",
    "~~~\n",
    "   ```",
    "    ```\n",
    "`",
    "````\n",
    "\r",
    "<tool>{\"name\":\"Bash\",\"arguments\":{\"command\":\"a\\\\\"}}</tool>",
    "Human: what was asked before\n",
    "[tool_result] file list\n",
    "Assistant: I will read main.rs\n",
];

fn generated(random: &mut XorShift, max_pieces: usize) -> String {
    (0..random.next() % (max_pieces + 1))
        .map(|_| PIECES[random.next() % PIECES.len()])
        .collect()
}

#[test]
fn generated_replies_stream_to_the_one_shot_answer_however_cut() {
    let tools = tools();
    let mut random = XorShift(0x051c_eb00_c0dd_ba11);
    let (mut parsed, mut failed) = (0, 0);
    for _ in 0..1_500 {
        let output = generated(&mut random, 7);
        let max_calls = (random.next() % 4) as u32;
        if parse(&output, &tools, SEED, max_calls).is_ok() {
            parsed += 1;
        } else {
            failed += 1;
        }
        every_cutting(&output, &tools, max_calls, &mut random, 4);
    }
    // Both outcomes occur often, so both halves of the comparison mean something.
    assert!(
        parsed > 300 && failed > 300,
        "{parsed} parsed, {failed} failed"
    );
}

#[test]
fn long_generated_replies_stream_to_the_one_shot_answer_cut_at_random() {
    let tools = tools();
    let mut random = XorShift(0x0dd_ba11_5eed);
    for _ in 0..300 {
        let output = generated(&mut random, 60);
        let max_calls = (random.next() % 6) as u32;
        let parsed = parse(&output, &tools, SEED, max_calls).is_ok();
        let bound = (!parsed).then(|| lenient_bound(&output));
        let points = boundaries(&output);
        for _ in 0..12 {
            let every = 1 + random.next() % 16;
            let cuts: Vec<usize> = points
                .iter()
                .copied()
                .filter(|_| random.next().is_multiple_of(every))
                .collect();
            agrees(&output, &cuts, &tools, max_calls, bound.as_deref());
        }
    }
}

#[test]
fn the_tools_are_checked_first_as_parse_checks_them() {
    // An early failure (one envelope over the limit) is parse's: the broken tools win.
    let output = "<tool>{}</tool><tool>{}</tool>";
    let streamed = stream(output, &[20], "not json", 1);
    assert_eq!(
        streamed.pushes[1].clone().map_err(|failure| failure.code),
        Err("invalid_tools".to_owned())
    );
    assert!(!agrees(output, &[20], "not json", 1, None));
    let streamed = stream(output, &[20], &tools(), 1);
    assert_eq!(
        streamed.pushes[1].clone().map_err(|failure| failure.code),
        Err("excessive_tool_requests".to_owned())
    );
}

/// The released text after each chunk.
fn releases(chunks: &[&str], max_calls: u32) -> Vec<String> {
    let mut stream = ReplyStream::new(&tools(), SEED, max_calls);
    chunks
        .iter()
        .map(|chunk| stream.push(chunk).unwrap_or_else(|f| panic!("{f}")))
        .collect()
}

#[test]
fn prose_is_released_as_it_arrives_short_of_trailing_whitespace() {
    assert_eq!(
        releases(&["\n\n  Hel", "lo, ", "wor", "ld.\n", "\n", "Bye"], 8),
        ["  Hel", "lo,", " wor", "ld.", "", "\n\nBye"]
    );
}

#[test]
fn prose_before_and_after_an_envelope_streams_and_the_envelope_never_does() {
    let released = releases(
        &[
            "Let me list the files. <to",
            "ol>{\"name\":\"Bash\",\"arguments\":{\"command\":\"echo </tool> <tool>\"}}",
            "</tool>\n\n",
            "  ",
            "Then I read them.",
        ],
        8,
    );
    assert_eq!(
        released,
        [
            "Let me list the files.",
            "",
            "",
            "",
            "\n\n  Then I read them."
        ]
    );
}

#[test]
fn a_partial_tag_is_held_until_it_is_known() {
    assert_eq!(releases(&["a <", "b"], 8), ["a", " <b"]);
    assert_eq!(releases(&["a </too", "l"], 8), ["a", ""]);
    assert_eq!(releases(&["a <too", "k"], 8), ["a", " <took"]);
}

#[test]
fn a_tag_on_a_line_that_may_open_a_fence_waits_for_the_line() {
    // A backtick later on the line: no fence, the tag opens an envelope.
    assert_eq!(
        releases(&["``` x <tool>{}", "</tool> `"], 8),
        ["``` x", "\n\n `"]
    );
    // The line ends without one: a fence, and the tag is quoted text.
    assert_eq!(
        releases(&["``` x <tool>{}", "</tool>\nok"], 8),
        ["``` x", " <tool>{}</tool>\nok"]
    );
    // Tildes open a fence whatever follows.
    assert_eq!(
        releases(&["~~~ <tool>{}</tool>"], 8),
        ["~~~ <tool>{}</tool>"]
    );
}

#[test]
fn whitespace_between_envelopes_makes_no_separator() {
    let released = releases(
        &[
            "<tool>{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}</tool>\n \n",
            "<tool>{\"name\":\"Bash\",\"arguments\":{\"command\":\"pwd\"}}</tool>",
            "\nDone",
        ],
        8,
    );
    assert_eq!(released, ["", "", "Done"]);
}

#[test]
fn nothing_is_released_after_a_certain_failure() {
    let mut stream = ReplyStream::new(&tools(), SEED, 8);
    assert_eq!(stream.push("fine </tool> and"), Ok("fine".to_owned()));
    assert_eq!(stream.push(" more text"), Ok(String::new()));
    assert_eq!(
        stream.finish().map_err(|failure| failure.code),
        Err("malformed_tool_json".to_owned())
    );
    let mut stream = ReplyStream::new(&tools(), SEED, 8);
    assert_eq!(
        stream.push("x <tool>{\"a\": <tool>"),
        Err(failure::nested(1))
    );
    assert_eq!(stream.push("y"), Err(failure::nested(1)));
}

#[test]
fn a_multibyte_reply_is_released_on_character_boundaries() {
    let output = "日本語\u{a0}é\u{2003}\n🦀 <tool>{\"name\":\"Read\",\"arguments\":{\"file_path\":\"/é\"}}</tool>\u{2003}ß";
    let mut random = XorShift(7);
    every_cutting(output, &tools(), 8, &mut random, 50);
    // Whitespace that is not ASCII is held like any other.
    assert_eq!(releases(&["日本\u{a0}", "語"], 8), ["日本", "\u{a0}語"]);
}

#[test]
fn narration_is_released_and_judged_at_the_end() {
    let mut stream = ReplyStream::new(&tools(), SEED, 8);
    assert_eq!(
        stream.push("I'll run the tests now."),
        Ok("I'll run the tests now.".to_owned())
    );
    assert!(!stream.narrates(), "no verdict before the end");
    assert!(stream.finish().is_ok());
    assert!(stream.narrates());
}

#[test]
fn a_whole_turn_costs_one_pass_however_small_the_chunks() {
    // A megabyte of prose, spaces and fence-like lines pushed a few bytes at a time: were any
    // push to look at the whole buffer again, this would take minutes.
    let line = "word word ```x <b> ~~ `\n";
    let output = format!("{}{}", line.repeat(40_000), " ".repeat(100_000));
    let mut stream = ReplyStream::new(&tools(), SEED, 8);
    let mut released = 0;
    for chunk in output.as_bytes().chunks(3) {
        let chunk = std::str::from_utf8(chunk).expect("ASCII");
        released += stream.push(chunk).expect("text").len();
    }
    let end = stream.finish().expect("a text reply");
    assert_eq!(released + end.tail.len(), output.trim_end().len());
    assert!(end.tail.is_empty(), "only trailing whitespace was held");
}

#[test]
fn the_end_does_not_scan_the_output_again() {
    let output =
        "Let me look.\n<tool>{\"name\":\"Read\",\"arguments\":{\"file_path\":\"/a\"}}</tool>\n\
                  <tool>{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}";
    let mut stream = ReplyStream::new(&tools(), SEED, 8);
    for chunk in output.as_bytes().chunks(7) {
        stream
            .push(std::str::from_utf8(chunk).expect("ASCII"))
            .expect("no failure");
    }
    let before = scan::tests::bodies_read();
    let end = stream.finish().expect("two calls");
    assert_eq!(
        scan::tests::bodies_read(),
        before,
        "the end followed no body again"
    );
    assert_eq!(Ok(end.reply), parse_span(output, &tools(), SEED, 8));
    assert_eq!(
        scan::tests::bodies_read(),
        before + 2,
        "parse follows both bodies"
    );
}

#[test]
fn fences_after_an_envelope_are_found_as_the_one_shot_scan_finds_them() {
    let call = "<tool>{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}</tool>";
    let mut random = XorShift(11);
    for output in [
        // The line an envelope ends on is not a fence line; the next one is.
        format!("{call} ```\n<tool>{{}}</tool>"),
        format!("{call} x\n```\n{call}\n```\nafter"),
        format!("{call}\n~~~\n{call}"),
        format!("``` a`b\n{call}\n```\n{call}"),
        format!("   ```\n{call}\n   ```\nend {call}"),
    ] {
        every_cutting(&output, &tools(), 8, &mut random, 20);
    }
}

#[test]
fn a_push_answers_spans_of_the_output_and_separators_never_copies() {
    let mut stream = ReplyStream::new(&tools(), SEED, 8);
    let span = |start: u32, length: u32| ShownPiece::Output(TextSpan { start, length });
    // Two stretches of one chunk's prose are one span; trailing whitespace is held back.
    assert_eq!(stream.push_pieces("Let me look. "), Ok(vec![span(0, 12)]));
    assert_eq!(stream.push_pieces("Then run it."), Ok(vec![span(12, 13)]));
    // The prose after an envelope is a later block: the separator, then its span.
    let pieces = stream.push_pieces(
        "\n<tool>{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}</tool>\nDone.",
    );
    let output_len = u32::try_from(stream.output.len()).expect("small");
    assert_eq!(
        pieces,
        Ok(vec![ShownPiece::Separator, span(output_len - 5, 5)])
    );
    let end = stream.finish().expect("a reply that calls Bash");
    assert_eq!(end.tail, "");
    assert_eq!(
        stream.released_bytes(),
        "Let me look. Then run it.\n\nDone.".len()
    );
}

#[test]
fn a_short_output_grows_by_doubling_then_takes_the_long_room_at_once_then_doubles() {
    let mut stream = ReplyStream::new("[]", "seed", 8);
    assert!(stream.push("a").is_ok());
    // No room ahead for a short output: a large one would grow a fresh instance's memory.
    assert!(
        stream.output.capacity() < 64,
        "{}",
        stream.output.capacity()
    );
    let small = stream.output.capacity();
    assert!(stream.push(&"b".repeat(small)).is_ok());
    assert!(stream.output.capacity() >= 2 * small && stream.output.capacity() < 256);
    // Up to the short limit the buffer only doubles.
    assert!(stream
        .push(&"b".repeat(SHORT_OUTPUT - stream.output.len()))
        .is_ok());
    assert_eq!(stream.output.len(), SHORT_OUTPUT);
    assert!(stream.output.capacity() < LONG_ROOM);
    // One byte more: the long room, in one step (what arrived is copied once).
    assert!(stream.push("c").is_ok());
    assert_eq!(stream.output.capacity(), LONG_ROOM);
    assert!(stream
        .push(&"d".repeat(LONG_ROOM - SHORT_OUTPUT - 1))
        .is_ok());
    assert_eq!(stream.output.capacity(), LONG_ROOM);
    // Past it, the buffer doubles.
    assert!(stream.push("e").is_ok());
    assert!(stream.output.capacity() >= 2 * LONG_ROOM);
    assert_eq!(stream.output.len(), LONG_ROOM + 1);
}
