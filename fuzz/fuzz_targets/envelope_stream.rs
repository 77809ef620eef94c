#![no_main]
//! Envelope reply stream: the first byte picks a tool set and a call limit, the rest is the
//! agent's output cut into chunks at every `0xFF` byte (a byte UTF-8 never holds, so the
//! fuzzer chooses the cuts; an input whose chunks are not all UTF-8 is skipped, as a chunk the
//! host pushes is always a whole string).
//!
//! The stream must agree with the native one-shot `parse_span` of the concatenated chunks:
//! the end is its answer, a push fails only with its failure (and every later push too), on
//! success the released text followed by the tail is the reply's shown text and the narration
//! verdict is `narrates_unexecuted_action` of a text reply. Whatever the answer, a cutting
//! never releases more than the whole output pushed as one chunk does (each release is
//! certain, so cutting can only delay text, never change it), unless that one push fails
//! early and so releases nothing.
//!
//! Then the component's side: the same chunks pushed into the wasm `reply-stream` resource (one
//! instance for the stream, as a turn has) answer push for push and at the end exactly as the
//! native stream does.

use devin_bridge_engine::Call;
use devin_bridge_envelope::{narrates_unexecuted_action, parse_span, Reply, ReplyStream};
use devin_bridge_fuzz::differential;
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fn tool_sets() -> [String; 3] {
    [
        "[]".to_owned(),
        json!([{"name":"Bash","input_schema":{"type":"object","properties":{"command":{"type":"string","minLength":1}},"required":["command"],"additionalProperties":false}}]).to_string(),
        json!([
            {"name":"Read","input_schema":{"type":"object","properties":{"file_path":{"type":"string","pattern":"^/"}},"required":["file_path"]}},
            {"name":"Edit","input_schema":{"type":"object","properties":{"old":{"type":"string"},"new":{"type":"string"}},"required":["old","new"]}}
        ]).to_string(),
    ]
}

const SEED: &str = "0123456789abcdef01234567";

/// The released text, every push's answer, and the end.
fn run(
    chunks: &[&str],
    tools: &str,
    max_calls: u32,
) -> (
    String,
    Vec<Result<String, devin_bridge_envelope::Failure>>,
    ReplyStream,
) {
    let mut stream = ReplyStream::new(tools, SEED, max_calls);
    let pushes: Vec<_> = chunks.iter().map(|chunk| stream.push(chunk)).collect();
    let released = pushes
        .iter()
        .filter_map(|push| push.as_ref().ok())
        .cloned()
        .collect();
    (released, pushes, stream)
}

fuzz_target!(init: devin_bridge_fuzz::prepare(devin_bridge_engine::TransformKind::Envelope), |data: &[u8]| {
    let Some((selector, rest)) = data.split_first() else { return };
    let Ok(chunks) = rest
        .split(|&byte| byte == 0xFF)
        .map(std::str::from_utf8)
        .collect::<Result<Vec<&str>, _>>()
    else {
        return;
    };
    let output: String = chunks.concat();
    let tools = tool_sets()[usize::from(*selector) % 3].clone();
    let max_calls = u32::from(*selector / 3 % 6);

    let one_shot = parse_span(&output, &tools, SEED, max_calls);
    let (released, pushes, mut stream) = run(&chunks, &tools, max_calls);
    if let Some(first) = pushes.iter().position(Result::is_err) {
        for push in &pushes[first..] {
            assert_eq!(push.clone().err(), one_shot.clone().err(), "a push failed otherwise than parse");
        }
    }
    let end = stream.finish();
    assert_eq!(end.clone().map(|end| end.reply), one_shot, "the stream ended otherwise than parse");
    differential(Call::ParseStream {
        chunks: chunks.iter().map(|chunk| (*chunk).to_owned()).collect(),
        tools: tools.clone(),
        id_seed: SEED.to_owned(),
        max_calls,
        skip_narration: false,
    });
    match (&end, &one_shot) {
        (Ok(end), Ok(reply)) => {
            let reply = reply.clone().resolve(&output).expect("a span of the output").reply;
            assert_eq!(format!("{released}{}", end.tail), reply.shown_text(), "streamed text differs");
            let narrates = match &reply {
                Reply::Text(text) => narrates_unexecuted_action(text),
                Reply::Tools(_) => false,
            };
            assert_eq!(stream.narrates(), narrates, "narration verdict differs");
        }
        _ => assert!(!stream.narrates(), "a failed reply has no narration verdict"),
    }
    let (whole, whole_pushes, _) = run(&[output.as_str()], &tools, max_calls);
    // A push that fails early releases nothing of its chunk.
    let early = whole_pushes.iter().any(Result::is_err);
    assert!(
        early || whole.starts_with(&released),
        "cut into chunks the stream released {released:?}, more than the whole output's {whole:?}"
    );
});
