//! The engine's side of the table of the transforms' functions
//! (`devin_bridge_types::transform_functions!`): the typed functions, `bind` and the load-time `check` generated
//! from it (see `table`), the functions of the reply stream's resource that no call names
//! directly, and the bindings the table writes as `bind[...]`.
//!
//! Invariant: every WIT function the host calls is one row, here (the resource's) or in the
//! table (every other); a function is spelled nowhere else.

use devin_bridge_calls::{Call, IntoAnswer, StreamedEnd, StreamedParse};
use devin_bridge_types::{
    Failure, MessageHead, ParsedReply, Prompt, PromptOptions, Reply, ResolvedModel, Resume,
    ResumedPrompt, SafeguardStatus, ShownPiece, SseFrames, StreamEnd, ToolCall, UnseenPrompt,
    Usage,
};
use wasmtime::component::ResourceAny;

use super::reply::{reply_of, reply_of_owned, shown_text, PUSH};
use super::table::wit_functions;
use super::{Bound, CallStore, Instance};
use crate::runtime::arm_deadline;
use crate::TransformKind;

devin_bridge_types::transform_functions!(wit_functions! {
    // The reply stream (`resource reply-stream`). A handle is owned by the store the stream
    // was opened in, which must be the store of every later call (see `crate::stream`).
    engine {
        Envelope wit[("[constructor]reply-stream")
            fn reply_stream_open(tools: &str, id_seed: &str, max_calls: u32) -> ResourceAny];
        // By reference: looked up per push (a turn's stream takes `reply::Push` once instead).
        Envelope wit[(PUSH)
            fn reply_stream_push(stream: ResourceAny, chunk: &str)
                -> Result<Vec<ShownPiece>, Failure>];
        Envelope wit[("[method]reply-stream.finish")
            fn reply_stream_finish(stream: ResourceAny) -> Result<StreamEnd, Failure>];
        Envelope wit[("[method]reply-stream.narrates")
            fn reply_stream_narrates(stream: ResourceAny) -> bool];
    }
});

/// `parse`, its text reply resolved against `output` (the component answers a span of it).
fn bind_parse<'a>(output: &'a str, tools: &'a str, id_seed: &'a str, max_calls: u32) -> Bound<'a> {
    Bound::new(TransformKind::Envelope, move |instance, store| match parse(
        instance, store, output, tools, id_seed, max_calls,
    )? {
        Ok(parsed) => reply_of(parsed, output).map(|parsed| Ok(parsed.into())),
        Err(failure) => Ok(Err(failure)),
    })
}

/// A whole reply stream, see [`parse_stream`].
fn bind_parse_stream<'a>(
    chunks: &'a [String],
    tools: &'a str,
    id_seed: &'a str,
    max_calls: u32,
    judge_narration: bool,
) -> Bound<'a> {
    Bound::new(TransformKind::Envelope, move |instance, store| {
        parse_stream(
            instance,
            store,
            chunks,
            tools,
            id_seed,
            max_calls,
            judge_narration,
        )
        .map(IntoAnswer::into_answer)
    })
}

/// A whole reply stream on one instance, the data form of a streamed turn: opened, fed `chunks`
/// in order (each push with its own deadline), finished, its narration verdict read (when
/// `judge_narration`), and closed.
fn parse_stream(
    instance: &Instance,
    store: &mut CallStore,
    chunks: &[String],
    tools: &str,
    id_seed: &str,
    max_calls: u32,
    judge_narration: bool,
) -> wasmtime::Result<StreamedParse> {
    arm_deadline(store);
    let handle = reply_stream_open(instance, store, tools, id_seed, max_calls)?;
    let mut pushes = Vec::with_capacity(chunks.len());
    let mut output = String::new();
    for chunk in chunks {
        arm_deadline(store);
        output.push_str(chunk);
        pushes.push(match reply_stream_push(instance, store, handle, chunk)? {
            Ok(pieces) => Ok(shown_text(&pieces, &output)?),
            Err(failure) => Err(failure),
        });
    }
    arm_deadline(store);
    let end = reply_stream_finish(instance, store, handle)?;
    let narrates = judge_narration && reply_stream_narrates(instance, store, handle)?;
    handle.resource_drop(&mut *store)?;
    let end = match end {
        Ok(StreamEnd { tail, reply }) => Ok(StreamedEnd {
            tail,
            reply: reply_of_owned(reply, output)?,
            narrates,
        }),
        Err(failure) => Err(failure),
    };
    Ok(StreamedParse { pushes, end })
}
