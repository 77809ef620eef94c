#![no_main]
//! ACP frames from the agent's stdout: the first byte sets the line cap (1..=1021 bytes), the
//! rest is the stream. The reader must agree with a model: lines split at `\n`, blank lines
//! skipped, a line over the cap refused (and nothing read past it), every other line parsed
//! alone; an accepted frame is a JSON-RPC 2.0 object from a line within the cap.

use devin_bridge_agent::fuzzing::{acp_frame, acp_frames, Frame};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let max_line = 1 + usize::from(control) * 4;
    let frames = acp_frames(input, max_line);

    let mut expected = Vec::new();
    for line in input.split_inclusive(|b| *b == b'\n') {
        let content = line.strip_suffix(b"\n").unwrap_or(line);
        if content.len() > max_line {
            expected.push(Frame::Error("agent_output_too_large"));
            break;
        }
        let trimmed = content.trim_ascii();
        if trimmed.is_empty() {
            continue;
        }
        let frame = acp_frame(trimmed);
        let refused = matches!(frame, Frame::Error(_));
        if !refused {
            let value: Value = serde_json::from_slice(trimmed).expect("an accepted frame is JSON");
            assert_eq!(value.get("jsonrpc").and_then(Value::as_str), Some("2.0"));
            assert!(trimmed.len() <= max_line);
        }
        expected.push(frame);
        if refused {
            break;
        }
    }
    assert_eq!(frames, expected);
});
