//! Incremental framing of a `text/event-stream` body received from an untrusted server.
//!
//! The caller feeds whatever bytes arrived, prefixed with the tail of its previous call; this
//! function returns the events that are complete and the bytes that are not. It keeps no state
//! between calls: the tail always starts at the first byte of an unfinished event, so the next
//! call reads that event again from its start with more bytes behind it. That is what makes the
//! result independent of where the transport happened to split the stream.
//!
//! Field parsing follows the WHATWG "interpreting an event stream" rules, except that each
//! event is reported on its own (the caller keeps any "last event id" it needs), a byte order
//! mark is not stripped (the servers we read never send one), and bytes that are not UTF-8 are
//! a failure instead of being replaced: nothing downstream should act on a guessed decoding.

use devin_bridge_types::{Failure, SseEvent, SseFrames};

/// Stable failure codes of `parse_events`.
pub mod codes {
    pub const SSE_EVENT_TOO_LARGE: &str = "sse_event_too_large";
    pub const SSE_INVALID_UTF8: &str = "sse_invalid_utf8";
}

/// A bad event stream is the upstream server's fault, and asking again will not change it.
const UPSTREAM_STATUS: u16 = 502;

/// The event type of an event without a (non-empty) `event:` field.
const DEFAULT_EVENT: &str = "message";

/// Frames the complete events of `buffer` (the previous tail followed by new bytes).
///
/// Lines end with CRLF, LF or CR; a CR that is the last byte of `buffer` is left in the tail,
/// since the LF of a CRLF may be in the next chunk. An event ends at a blank line, and its
/// size counts every byte from its first line through the line break of that blank line.
/// Comment lines (starting with `:`), `retry` and unknown fields are ignored, an `id` whose
/// value contains NUL is ignored, and an event without a `data` line is not dispatched.
///
/// Failures (502, not repairable): `sse_event_too_large` when a complete event, or the tail,
/// is larger than `max_event_bytes`; `sse_invalid_utf8` when a complete event is not UTF-8.
/// The first problem in stream order is reported; messages never quote the stream.
pub fn parse_events(buffer: &[u8], max_event_bytes: u32) -> Result<SseFrames, Failure> {
    let limit = usize::try_from(max_event_bytes).unwrap_or(usize::MAX);
    let mut events = Vec::new();
    let mut event_start = 0;
    let mut line_start = 0;
    while let Some((line_end, next_line)) = line_break(buffer, line_start) {
        if line_end == line_start {
            let block = buffer.get(event_start..next_line).unwrap_or_default();
            if let Some(event) = complete_event(block, limit)? {
                events.push(event);
            }
            event_start = next_line;
        }
        line_start = next_line;
    }
    let tail = buffer.get(event_start..).unwrap_or_default();
    if tail.len() > limit {
        return Err(too_large(limit));
    }
    Ok(SseFrames {
        events,
        tail: tail.to_vec(),
    })
}

/// The end of the line that starts at `from` and the start of the next one, or `None` when the
/// line is not complete yet (no line break, or only a CR that an LF may still follow).
fn line_break(buffer: &[u8], from: usize) -> Option<(usize, usize)> {
    let rest = buffer.get(from..)?;
    let offset = rest.iter().position(|&b| b == b'\r' || b == b'\n')?;
    let end = from + offset;
    let next = match (buffer.get(end), buffer.get(end + 1)) {
        (Some(b'\r'), Some(b'\n')) => end + 2,
        (Some(b'\r'), None) => return None,
        _ => end + 1,
    };
    Some((end, next))
}

/// Checks and reads the bytes of one event, blank line included; `None` when it has no data.
fn complete_event(block: &[u8], limit: usize) -> Result<Option<SseEvent>, Failure> {
    if block.len() > limit {
        return Err(too_large(limit));
    }
    let text = std::str::from_utf8(block).map_err(|_| invalid_utf8())?;
    let mut event: Option<&str> = None;
    let mut data: Option<String> = None;
    let mut id: Option<&str> = None;
    for line in lines(text) {
        if line.is_empty() || line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => event = Some(value),
            "data" => match &mut data {
                Some(joined) => {
                    joined.push('\n');
                    joined.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            // A NUL cannot be carried back to the server in a `Last-Event-ID` header; the
            // standard ignores such an id, and so do we.
            "id" if !value.contains('\0') => id = Some(value),
            _ => {}
        }
    }
    Ok(data.map(|data| SseEvent {
        event: event
            .filter(|name| !name.is_empty())
            .unwrap_or(DEFAULT_EVENT)
            .to_owned(),
        data,
        id: id.map(str::to_owned),
    }))
}

/// The lines of a complete event, split at CRLF, LF or CR. Every CR inside a complete event was
/// already judged by `line_break` with the byte after it in view, so a final CR ends a line.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let Some(at) = rest.find(['\r', '\n']) else {
            let line = rest;
            rest = "";
            return Some(line);
        };
        let (line, after) = rest.split_at(at);
        rest = after
            .strip_prefix("\r\n")
            .or_else(|| after.get(1..))
            .unwrap_or("");
        Some(line)
    })
}

fn too_large(limit: usize) -> Failure {
    Failure {
        code: codes::SSE_EVENT_TOO_LARGE.to_owned(),
        message: format!("a server-sent event is larger than the limit of {limit} bytes"),
        status: UPSTREAM_STATUS,
        repairable: false,
    }
}

fn invalid_utf8() -> Failure {
    Failure {
        code: codes::SSE_INVALID_UTF8.to_owned(),
        message: "a server-sent event is not valid UTF-8".to_owned(),
        status: UPSTREAM_STATUS,
        repairable: false,
    }
}

#[cfg(test)]
mod tests;
