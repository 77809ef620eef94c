//! Unit tests of `parse_events`: field rules, every line ending, limits, and the promise that
//! where the stream is split never changes what comes out.

use super::*;

const LIMIT: u32 = 1 << 16;

fn event(name: &str, data: &str, id: Option<&str>) -> SseEvent {
    SseEvent {
        event: name.to_owned(),
        data: data.to_owned(),
        id: id.map(str::to_owned),
    }
}

fn parse(buffer: &[u8]) -> SseFrames {
    parse_events(buffer, LIMIT).expect("a valid stream")
}

fn code(result: Result<SseFrames, Failure>) -> String {
    let failure = result.expect_err("a failure");
    assert_eq!((failure.status, failure.repairable), (502, false));
    failure.code
}

/// Feeds `chunks` one after the other as a caller would: previous tail + new bytes.
fn feed(chunks: &[&[u8]], limit: u32) -> Result<SseFrames, Failure> {
    let mut events = Vec::new();
    let mut tail = Vec::new();
    for chunk in chunks {
        let mut buffer = std::mem::take(&mut tail);
        buffer.extend_from_slice(chunk);
        let frames = parse_events(&buffer, limit)?;
        events.extend(frames.events);
        tail = frames.tail;
    }
    Ok(SseFrames { events, tail })
}

#[test]
fn one_event_with_every_field() {
    let frames = parse(b"event: added\ndata: {\"a\":1}\nid: 7\n\n");
    assert_eq!(
        frames.events,
        [event("added", "{\"a\":1}", Some("7"))],
        "fields read"
    );
    assert!(frames.tail.is_empty());
}

#[test]
fn every_line_ending_frames_the_same_events() {
    let expected = [event("a", "1\n2", Some("x")), event("message", "3", None)];
    for ending in ["\n", "\r\n", "\r"] {
        let stream = [
            "event: a", "data: 1", "data: 2", "id: x", "", "data: 3", "", "",
        ]
        .join(ending);
        let frames = parse(stream.as_bytes());
        if ending == "\r" {
            // The final CR may be followed by an LF: the last event waits for one more byte.
            assert_eq!(frames.events, expected[..1], "line ending {ending:?}");
            assert_eq!(frames.tail, b"data: 3\r\r");
            let more = parse(format!("{stream}:").as_bytes());
            assert_eq!(more.events, expected, "line ending {ending:?}");
            assert_eq!(more.tail, b":");
        } else {
            assert_eq!(frames.events, expected, "line ending {ending:?}");
            assert!(frames.tail.is_empty(), "line ending {ending:?}");
        }
    }
    // Mixed within one stream.
    let frames = parse(b"event: a\r\ndata: 1\rdata: 2\nid: x\r\n\rdata: 3\n\n");
    assert_eq!(frames.events, expected);
    assert!(frames.tail.is_empty());
}

#[test]
fn a_cr_at_the_end_of_the_buffer_waits_for_the_next_byte() {
    // The CR may be half of a CRLF: the line it ends is not complete yet.
    let frames = parse(b"data: x\r");
    assert!(frames.events.is_empty());
    assert_eq!(frames.tail, b"data: x\r");
    // Nor is the blank line a final CR would make.
    let frames = parse(b"data: x\r\r");
    assert!(frames.events.is_empty());
    assert_eq!(frames.tail, b"data: x\r\r");
    // With the next byte in view it is decided either way.
    for (next, tail) in [(&b"\n"[..], &b""[..]), (b"d", b"d")] {
        let mut buffer = b"data: x\r\r".to_vec();
        buffer.extend_from_slice(next);
        let frames = parse(&buffer);
        assert_eq!(frames.events, [event("message", "x", None)], "{next:?}");
        assert_eq!(frames.tail, tail, "{next:?}");
    }
}

#[test]
fn incomplete_events_stay_in_the_tail_from_their_first_byte() {
    let frames = parse(b"data: one\n\nevent: two\ndata: 2\n");
    assert_eq!(frames.events, [event("message", "one", None)]);
    assert_eq!(frames.tail, b"event: two\ndata: 2\n");
    let frames = parse(b"data: one\n\ndata: par");
    assert_eq!(frames.tail, b"data: par");
    assert!(parse(b"").events.is_empty());
    assert!(parse(b"").tail.is_empty());
}

#[test]
fn comments_unknown_fields_and_retry_are_ignored() {
    let frames = parse(b": keep-alive\nretry: 10\nfoo: bar\ndata: x\n:another\nDATA: no\n\n");
    assert_eq!(frames.events, [event("message", "x", None)]);
}

#[test]
fn an_event_without_data_is_not_dispatched_but_is_consumed() {
    let frames = parse(b": ping\n\nevent: empty\nid: 3\n\n\n\ndata: y\n\n");
    assert_eq!(frames.events, [event("message", "y", None)]);
    assert!(frames.tail.is_empty());
    // The type and id of an undispatched event do not leak into the next one.
    let frames = parse(b"event: lost\nid: 9\n\ndata: z\n\n");
    assert_eq!(frames.events, [event("message", "z", None)]);
}

#[test]
fn field_values_lose_one_leading_space_only() {
    let frames = parse(b"data:x\n\ndata:  two spaces\n\ndata: a:b: c\n\n");
    let data: Vec<&str> = frames.events.iter().map(|e| e.data.as_str()).collect();
    assert_eq!(data, ["x", " two spaces", "a:b: c"]);
}

#[test]
fn empty_data_lines_are_data_and_a_field_without_colon_has_an_empty_value() {
    let frames = parse(b"data\n\ndata:\ndata:\n\ndata\ndata: b\n\n");
    let data: Vec<&str> = frames.events.iter().map(|e| e.data.as_str()).collect();
    assert_eq!(data, ["", "\n", "\nb"]);
}

#[test]
fn the_last_event_and_id_fields_win_and_empty_event_means_message() {
    let frames = parse(b"event: a\nevent: b\nid: 1\nid: 2\ndata: d\n\nevent:\ndata: e\nid:\n\n");
    assert_eq!(
        frames.events,
        [event("b", "d", Some("2")), event("message", "e", Some(""))]
    );
}

#[test]
fn an_id_containing_nul_is_ignored() {
    let frames = parse(b"id: 1\nid: a\0b\ndata: d\n\n");
    assert_eq!(frames.events, [event("message", "d", Some("1"))]);
}

#[test]
fn unicode_is_kept() {
    let frames = parse("event: ünï\ndata: 😀 \u{2028} ok\n\n".as_bytes());
    assert_eq!(frames.events, [event("ünï", "😀 \u{2028} ok", None)]);
}

#[test]
fn invalid_utf8_in_a_complete_event_fails_but_waits_while_incomplete() {
    assert_eq!(
        code(parse_events(b"data: \xff\n\n", LIMIT)),
        "sse_invalid_utf8"
    );
    // Comments are part of the event too.
    assert_eq!(
        code(parse_events(b":\xc3\ndata: x\n\n", LIMIT)),
        "sse_invalid_utf8"
    );
    // Half of a two-byte character at the end may be completed by the next chunk.
    let frames = parse(b"data: \xc3");
    assert_eq!(frames.tail, b"data: \xc3");
    assert_eq!(
        feed(&[b"data: \xc3", b"\xa9\n\n"], LIMIT)
            .expect("valid")
            .events,
        [event("message", "é", None)]
    );
    // Events before the bad one are not returned: the stream is broken.
    assert_eq!(
        code(parse_events(b"data: ok\n\ndata: \xfe\n\n", LIMIT)),
        "sse_invalid_utf8"
    );
}

#[test]
fn the_size_limit_counts_every_byte_of_an_event_and_of_the_tail() {
    let stream = b"data: 12345\n\n"; // 13 bytes
    assert_eq!(
        parse_events(stream, 13).expect("at the limit").events.len(),
        1
    );
    assert_eq!(code(parse_events(stream, 12)), "sse_event_too_large");
    // The tail alone: 11 bytes.
    assert_eq!(
        parse_events(b"data: 12345", 11)
            .expect("at the limit")
            .tail
            .len(),
        11
    );
    assert_eq!(
        code(parse_events(b"data: 12345", 10)),
        "sse_event_too_large"
    );
    // A stream that never ends a line is refused once it passes the limit.
    assert_eq!(code(parse_events(&[b'a'; 100], 99)), "sse_event_too_large");
    // Each event is measured on its own.
    let two = b"data: 1\n\ndata: 2\n\n";
    assert_eq!(parse_events(two, 9).expect("each fits").events.len(), 2);
    // The message names the limit and quotes nothing of the stream.
    let failure = parse_events(b"data: SECRET\n\n", 4).expect_err("too large");
    assert!(failure.message.contains('4'), "{}", failure.message);
    assert!(!failure.message.contains("SECRET"), "{}", failure.message);
}

#[test]
fn the_first_problem_in_stream_order_is_reported() {
    let bad_then_large = b"data: \xff\n\ndata: 0123456789\n\n";
    assert_eq!(code(parse_events(bad_then_large, 14)), "sse_invalid_utf8");
    let large_then_bad = b"data: 0123456789\n\ndata: \xff\n\n";
    assert_eq!(
        code(parse_events(large_then_bad, 14)),
        "sse_event_too_large"
    );
    // An oversized event is refused before its bytes are decoded.
    assert_eq!(
        code(parse_events(b"data: \xff\xff\xff\n\n", 4)),
        "sse_event_too_large"
    );
}

/// A stream with every line ending, comments, ids, undispatched events, multi-line data and
/// multi-byte characters.
const STREAM: &[u8] = b": hello\r\n\
    retry: 1000\n\
    event: added\r\n\
    id: 1\r\n\
    data: {\"name\":\"s\xc3\xa9ssion-1\"}\r\n\
    \r\n\
    event: modified\r\
    data: line one\r\
    data: line two\r\
    \r\
    : keep-alive\n\
    \n\
    event: nothing\n\
    id: 5\n\
    \n\
    data\n\
    \n\
    id: 42\r\n\
    data: \xf0\x9f\x98\x80 last\n\
    \r\n\
    event: partial\r\n\
    data: unfinished";

fn stream_events() -> Vec<SseEvent> {
    vec![
        event("added", "{\"name\":\"séssion-1\"}", Some("1")),
        event("modified", "line one\nline two", None),
        event("message", "", None),
        event("message", "😀 last", Some("42")),
    ]
}

#[test]
fn the_reference_stream_frames_as_expected() {
    let frames = parse(STREAM);
    assert_eq!(frames.events, stream_events());
    assert_eq!(frames.tail, b"event: partial\r\ndata: unfinished");
}

#[test]
fn a_split_at_every_offset_gives_the_same_events_and_tail() {
    let whole = parse(STREAM);
    for cut in 0..=STREAM.len() {
        let (first, second) = STREAM.split_at(cut);
        let split = feed(&[first, second], LIMIT).expect("valid");
        assert_eq!(split, whole, "split at byte {cut}");
    }
}

#[test]
fn any_two_cuts_and_byte_by_byte_give_the_same_events_and_tail() {
    let whole = parse(STREAM);
    for a in 0..=STREAM.len() {
        for b in a..=STREAM.len() {
            let split = feed(&[&STREAM[..a], &STREAM[a..b], &STREAM[b..]], LIMIT).expect("valid");
            assert_eq!(split, whole, "cuts at bytes {a} and {b}");
        }
    }
    let bytes: Vec<&[u8]> = STREAM.chunks(1).collect();
    assert_eq!(feed(&bytes, LIMIT).expect("valid"), whole, "byte by byte");
}

#[test]
fn failures_do_not_depend_on_the_split_either() {
    let mut broken = STREAM.to_vec();
    broken.extend_from_slice(b"\n\ndata: \xff\n\n");
    for limit in [LIMIT, 40, 30, 20] {
        let whole = parse_events(&broken, limit).map_err(|f| f.code);
        for cut in 0..=broken.len() {
            let (first, second) = broken.split_at(cut);
            let split = feed(&[first, second], limit).map_err(|f| f.code);
            assert_eq!(split, whole, "limit {limit}, split at byte {cut}");
        }
    }
}
