//! Each call's answer from the plain Rust libraries the components are built from: the
//! reference the components are compared with (the golden fixtures, the differential test, the
//! fuzz targets).
//!
//! The answer comes in the same types as a component's, so the two compare with `==`.

use devin_bridge_envelope as envelope;
use devin_bridge_model_alias as model_alias;
use devin_bridge_safeguard as safeguard;
use devin_bridge_serializer as serializer;
use devin_bridge_sse as sse;
use devin_bridge_types::Failure;

use crate::{Answer, Call, Output, StreamedEnd, StreamedParse};

/// A library's result as an answer.
fn answer<T: Into<Output>>(result: Result<T, Failure>) -> Answer {
    result.map(Into::into)
}

/// The code of the failure a reply stream answers when its end names text outside the output
/// it was fed: a broken library, which the comparison with a component then shows.
pub const SPAN_OUTSIDE_OUTPUT: &str = "span_outside_output";

impl Call {
    /// The answer of the plain Rust library to this call.
    pub fn run_native(&self) -> Answer {
        match self {
            Call::Serialize { request } => answer(serializer::serialize(request)),
            Call::SerializeUnseen { request, options } => {
                answer(serializer::serialize_unseen(request, *options))
            }
            Call::SerializeResumed {
                continuation,
                resume,
                options,
            } => answer(serializer::serialize_resumed(
                continuation,
                resume,
                *options,
            )),
            Call::Repair { prompt, rejection } => Ok(serializer::repair(prompt, rejection).into()),
            Call::Parse {
                output,
                tools,
                id_seed,
                max_calls,
            } => answer(envelope::parse(output, tools, id_seed, *max_calls)),
            Call::ParseStream {
                chunks,
                tools,
                id_seed,
                max_calls,
                skip_narration,
            } => Ok(parse_stream(chunks, tools, id_seed, *max_calls, !skip_narration).into()),
            Call::NarratesUnexecutedAction { output } => {
                Ok(envelope::narrates_unexecuted_action(output).into())
            }
            Call::ParseReview { output } => answer(envelope::parse_review(output)),
            Call::StreamStart { head } => Ok(sse::stream_start(head).into()),
            Call::StreamPing => Ok(sse::stream_ping().into()),
            Call::StreamFinish {
                reply,
                usage,
                safeguard,
            } => Ok(sse::stream_finish(reply, usage, safeguard.as_ref()).into()),
            Call::StreamText { first, text } => Ok(sse::stream_text(*first, text).into()),
            Call::StreamFinishAfterText {
                tail,
                calls,
                usage,
                safeguard,
            } => Ok(sse::stream_finish_after_text(tail, calls, usage, safeguard.as_ref()).into()),
            Call::RenderStream {
                head,
                reply,
                safeguard,
            } => Ok(sse::render_stream(head, reply, safeguard.as_ref()).into()),
            Call::RenderJson {
                head,
                reply,
                safeguard,
            } => Ok(sse::render_json(head, reply, safeguard.as_ref()).into()),
            Call::ErrorEvent { failure } => Ok(sse::error_event(failure).into()),
            Call::ErrorBody { failure } => Ok(sse::error_body(failure).into()),
            Call::AgentErrorMessage { raw } => Ok(sse::agent_error_message(raw).into()),
            Call::ParseEvents {
                buffer,
                max_event_bytes,
            } => answer(sse::parse_events(buffer, *max_event_bytes)),
            Call::Validate { reference, catalog } => {
                answer(model_alias::validate(reference, catalog))
            }
            Call::ClientEnvironment { settings, catalog } => {
                answer(model_alias::client_environment(settings, catalog))
            }
            Call::Resolve { requested, catalog } => {
                answer(model_alias::resolve(requested, catalog))
            }
            Call::ListModels { catalog, vision } => {
                answer(model_alias::list_models(catalog, *vision))
            }
            Call::ContextWindows { catalog } => answer(model_alias::context_windows(catalog)),
            Call::Judge {
                calls,
                classifier_context,
                earlier_calls,
            } => Ok(
                safeguard::judge_in_conversation(calls, classifier_context, earlier_calls).into(),
            ),
        }
    }
}

/// A reply stream fed `chunks` in order: each push's released text, then the end (its reply
/// resolved against the whole output, and the narration verdict when `narration` asks for it).
fn parse_stream(
    chunks: &[String],
    tools: &str,
    id_seed: &str,
    max_calls: u32,
    narration: bool,
) -> StreamedParse {
    let mut stream = envelope::ReplyStream::new(tools, id_seed, max_calls);
    let pushes = chunks.iter().map(|chunk| stream.push(chunk)).collect();
    let end = stream.finish();
    let narrates = narration && stream.narrates();
    let output = chunks.concat();
    let end = end.and_then(|end| {
        let reply = end.reply.resolve(&output).ok_or_else(|| Failure {
            code: SPAN_OUTSIDE_OUTPUT.to_owned(),
            message: format!(
                "the stream's end names a text span outside its {}-byte output",
                output.len()
            ),
            status: 500,
            repairable: false,
        })?;
        Ok(StreamedEnd {
            tail: end.tail,
            reply,
            narrates,
        })
    });
    StreamedParse { pushes, end }
}
