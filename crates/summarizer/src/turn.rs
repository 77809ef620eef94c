//! The turn pipeline:
//! serializer -> model-alias -> ACP turn -> unexecuted-intent check -> envelope parse ->
//! at most one repair (a brand-new agent process and session) -> sse render.
//! Fail closed: every failure is a typed `Failure`; nothing falls back to another provider.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use devin_bridge_agent::acp::ReportedUsage;
use devin_bridge_types::{error_type, estimate_tokens, Failure, Reply, Usage};
use hyper::{Response, StatusCode};
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tracing::Instrument;

use super::body::{full, ResponseBody, Streamed};
use super::failures::HostFailure;
use super::resident::{Lease, Resident};
use super::{window, Bridge, InFlight};
use devin_bridge_agent::acp::{prompt_blocks, AcpError};
use devin_bridge_engine::TransformCalls as _;
use devin_bridge_engine::{
    is_error_status, EngineError, Image, MessageHead, Prompt, PromptOptions, Transforms,
    UnseenPrompt,
};

/// A transform that trapped, timed out or ran out of memory: an internal error for this one
/// request. Details go to the log, not to the client.
pub fn engine_failure(error: &EngineError) -> Failure {
    tracing::error!(code = error.code(), %error, "transform failed");
    HostFailure::Transform.with_code(
        error.code(),
        "an internal transform failed while handling this request",
    )
}

/// An agent failure as the client sees it. The agent's own error text is untrusted: it is
/// cleaned by the sse component (`agent-error-message`); if that component fails, the text is
/// left out rather than passed on uncleaned.
pub(super) async fn agent_failure(bridge: &Bridge, error: AcpError) -> Failure {
    let message = match error {
        AcpError::Rpc { ref message, .. } => {
            let raw = message.clone();
            match run_transform(&bridge.transforms, raw.len(), move |t| {
                t.agent_error_message(raw)
            })
            .await
            {
                Ok(clean) => format!("the agent failed: {clean}"),
                Err(_) => "the agent failed".to_owned(),
            }
        }
        ref other => other.to_string(),
    };
    Failure {
        code: error.code().to_owned(),
        message,
        status: error.status(),
        repairable: false,
    }
}

/// Inputs up to this size are transformed on the async worker that awaits the answer; larger
/// ones on the blocking pool. Handing a call to the pool and waking the task again costs more
/// than a small call itself (measured side by side in the bridge benchmark: 15% less CPU per
/// turn with small calls inline), while the costliest call on 64 KiB, serializing it, takes
/// about a tenth of a millisecond (the transforms benchmark's 79 KB request: ~150 µs in a
/// fresh instance), short enough not to hold up the worker's other tasks for long; a megabyte
/// request takes over a millisecond and goes to the pool. Either way `call_timeout_ms` bounds a
/// call.
pub const INLINE_INPUT_BYTES: usize = 64 << 10;

/// Runs a synchronous transform call whose input is `input_bytes` long: on this worker when
/// it is small (see [`INLINE_INPUT_BYTES`]), else off the async workers.
pub(super) async fn run_transform<T: Send + 'static>(
    transforms: &Arc<Transforms>,
    input_bytes: usize,
    call: impl FnOnce(&Transforms) -> Result<T, EngineError> + Send + 'static,
) -> Result<T, Failure> {
    let outcome = if input_bytes <= INLINE_INPUT_BYTES {
        // A panic in the call must not take the connection's task down with it.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(transforms)))
            .map_err(|_| "the transform call panicked".to_owned())
    } else {
        let transforms = transforms.clone();
        tokio::task::spawn_blocking(move || call(&transforms))
            .await
            .map_err(|join| join.to_string())
    };
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(engine_failure(&error)),
        Err(why) => {
            tracing::error!(%why, "transform task failed");
            Err(HostFailure::Transform.with("an internal transform failed"))
        }
    }
}

/// What an agent turn produced: its text, and the token counts it reported, if any.
pub struct AgentReply {
    pub text: String,
    pub usage: Option<ReportedUsage>,
}

/// A request that passed the transforms and may now wait for an agent.
pub struct Prepared {
    pub prompt: Prompt,
    /// The images that go with the prompt.
    pub images: Vec<Image>,
    pub head: MessageHead,
    /// Where the turn runs.
    pub session: Session,
}

/// Where a turn runs: the transport the policy selected, with what it holds for this turn.
pub enum Session {
    /// A fresh agent process from the pool, sent the whole conversation.
    PerTurn,
    /// The resident transport: the conversation's session, leased for this turn.
    Resident(Arc<Resident>, Lease),
}

/// What the envelope check says of an agent's output.
enum Verdict {
    /// A reply for the client.
    Accept(Reply),
    /// Rejected, and the agent may fix it: the failure goes into the single repair.
    Repair(Failure),
}

/// Serializes the request and validates its model. On the resident transport this also finds
/// the conversation's session (waiting for its running turn) and serializes only what that
/// session has not seen; `conversation` is the client's conversation key.
pub async fn prepare(
    bridge: &Bridge,
    body: String,
    conversation: Option<String>,
) -> Result<Prepared, Failure> {
    let (UnseenPrompt { prompt, images, .. }, session) = match &bridge.resident {
        Some(resident) => {
            let (unseen, lease) = resident.prepare(bridge, body, conversation).await?;
            (unseen, Session::Resident(resident.clone(), lease))
        }
        None => (serialize_whole(bridge, body).await?, Session::PerTurn),
    };
    let head = MessageHead {
        id: message_id(),
        model: prompt.model.clone(),
        // `message_start` goes out before the agent answers: its usage is the estimate.
        usage: Usage::estimated(prompt.input_tokens, 1),
    };
    Ok(Prepared {
        prompt,
        images,
        head,
        session,
    })
}

/// The whole prompt and its images, admitted: model validated, input within its window.
pub async fn serialize_whole(bridge: &Bridge, body: String) -> Result<UnseenPrompt, Failure> {
    serialize_unseen(bridge, Arc::new(body), 0, Check::Admit).await
}

/// What a serialization checks besides the request itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    /// Nothing more (the request was admitted before).
    Nothing,
    /// The model names a catalog entry.
    Model,
    /// The model, and the input estimate within the model's context window.
    Admit,
}

/// `serialize-unseen` for a session holding `held` messages (with the images the agent
/// takes), and the `check` on the result: the transforms in one hop off the async workers.
pub(super) async fn serialize_unseen(
    bridge: &Bridge,
    body: Arc<String>,
    held: u32,
    check: Check,
) -> Result<UnseenPrompt, Failure> {
    let catalog = bridge.catalog();
    let windows = bridge.windows.clone();
    let options = PromptOptions {
        held,
        images: bridge.images,
    };
    run_transform(&bridge.transforms, body.len(), move |t| {
        let unseen = match t.serialize_unseen(body, options)? {
            Ok(unseen) => unseen,
            Err(failure) => return Ok(Err(failure)),
        };
        let model = unseen.prompt.model.clone();
        let checked = match check {
            Check::Nothing => Ok(()),
            Check::Model => t.validate_model(model, catalog)?.map(drop),
            Check::Admit => window::admit(t, &windows, model, catalog, unseen.prompt.input_tokens)?,
        };
        Ok(checked.map(|()| unseen))
    })
    .await?
}

/// `count_tokens`: the serializer's estimate of everything the request would send the agent,
/// with the model validated. A request over its model's window is counted, not refused.
pub async fn count_tokens(bridge: &Bridge, body: String) -> Result<u32, Failure> {
    serialize_unseen(bridge, Arc::new(body), 0, Check::Model)
        .await
        .map(|unseen| unseen.prompt.input_tokens)
}

/// An image as the ACP prompt builder takes it: (media type, base64 data).
pub(super) fn image_parts(images: &[Image]) -> impl Iterator<Item = (&str, &str)> {
    images
        .iter()
        .map(|image| (image.media_type.as_str(), image.data.as_str()))
}

/// `msg_` + 24 random hex digits.
fn message_id() -> String {
    let mut bytes = [0u8; 12];
    if getrandom::fill(&mut bytes).is_err() {
        // No entropy source: fall back to time and a counter (ids need uniqueness, not secrecy).
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let count = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        bytes[..8].copy_from_slice(&(nanos as u64).to_le_bytes());
        bytes[8..].copy_from_slice(&(count as u32).to_le_bytes());
    }
    format!("msg_{}", hex::encode(bytes))
}

/// Waits for a turn slot; `529 overloaded_error` when none frees up in time.
pub async fn acquire_slot(bridge: &Bridge) -> Result<OwnedSemaphorePermit, Failure> {
    match tokio::time::timeout(
        bridge.queue_timeout,
        bridge.turn_slots.clone().acquire_owned(),
    )
    .await
    {
        Ok(Ok(permit)) => Ok(permit),
        _ => Err(HostFailure::Overloaded.with("all agent slots are busy; retry later")),
    }
}

/// One agent turn on a prewarmed (or fresh) agent.
async fn agent_turn(
    bridge: &Bridge,
    prompt: &str,
    images: &[Image],
) -> Result<AgentReply, Failure> {
    let agent = match bridge.pool.take().await {
        Ok(agent) => agent,
        Err(error) => return Err(agent_failure(bridge, error).await),
    };
    let pid = agent.pid();
    let blocks = prompt_blocks(prompt.to_owned(), image_parts(images));
    match agent.run_turn_blocks(&bridge.home, blocks).await {
        Ok(output) => {
            tracing::info!(pid, elapsed_ms = output.elapsed.as_millis() as u64, chars = output.text.len(), observed_model = ?output.observed_model, reported_usage = output.usage.is_some(), "agent turn complete");
            Ok(AgentReply {
                text: output.text,
                usage: output.usage,
            })
        }
        Err(error) => Err(agent_failure(bridge, error).await),
    }
}

fn narrated_intent() -> Failure {
    HostFailure::UnexecutedActionNarrative
        .with("the reply described a client action instead of requesting it with a tool envelope")
}

/// The turn with its single repair. Returns the reply and the usage to report. On the
/// resident transport the turn runs on the leased session, the repair continues it, and a
/// success commits the session's new history.
pub async fn run(
    bridge: &Bridge,
    prompt: &Prompt,
    images: &[Image],
    session: &mut Session,
) -> Result<(Reply, Usage), Failure> {
    let _counted = InFlight::enter(&bridge.in_flight);
    let started = Instant::now();
    let has_tools = prompt.tools.trim() != "[]";
    let first = match session {
        Session::Resident(resident, lease) => {
            resident.turn(bridge, lease, &prompt.text, images).await?
        }
        Session::PerTurn => agent_turn(bridge, &prompt.text, images).await?,
    };
    let rejection = match check(bridge, prompt, &first.text, has_tools).await? {
        Verdict::Accept(reply) => {
            session.commit();
            return Ok((reply, usage(bridge, prompt, &first)));
        }
        Verdict::Repair(rejection) => rejection,
    };
    tracing::info!(code = %rejection.code, "agent output rejected; spending the single repair attempt");
    let second = match session {
        Session::Resident(resident, lease) => resident.repair(bridge, lease, rejection).await?,
        Session::PerTurn => {
            let text = prompt.text.clone();
            let repaired = run_transform(&bridge.transforms, text.len(), move |t| {
                t.repair(text, rejection)
            })
            .await?;
            agent_turn(bridge, &repaired, images).await?
        }
    };
    let outcome = match check(bridge, prompt, &second.text, has_tools).await? {
        Verdict::Accept(reply) => {
            session.commit();
            Ok((reply, usage(bridge, prompt, &second)))
        }
        Verdict::Repair(failure) => Err(Failure {
            repairable: false,
            ..failure
        }),
    };
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        repaired = outcome.is_ok(),
        "turn finished after repair"
    );
    outcome
}

/// The verdict on an agent's output. An error is the turn's end: the transform itself failed,
/// or the output is rejected in a way no repair can fix.
async fn check(
    bridge: &Bridge,
    prompt: &Prompt,
    output: &str,
    has_tools: bool,
) -> Result<Verdict, Failure> {
    // The heuristic and the parser in one hop off the async workers.
    let (text, tools, seed) = (
        output.to_owned(),
        prompt.tools.clone(),
        prompt.id_seed.clone(),
    );
    // `tool_choice.disable_parallel_tool_use` asks for one call; a second is then repairable.
    let max_calls = if prompt.single_tool_call {
        1
    } else {
        bridge.max_tool_calls
    };
    let size = text.len() + tools.len();
    let parsed = run_transform(&bridge.transforms, size, move |t| {
        if has_tools && t.narrates_unexecuted_action(text.clone())? {
            return Ok(Err(narrated_intent()));
        }
        t.parse(text, tools, seed, max_calls)
    })
    .await?;
    match parsed {
        Ok(reply) => Ok(Verdict::Accept(reply)),
        Err(failure) if failure.repairable => Ok(Verdict::Repair(failure)),
        Err(failure) => Err(failure),
    }
}

impl Session {
    /// After an accepted reply: the resident session keeps the conversation's new history.
    fn commit(&mut self) {
        if let Session::Resident(_, lease) = self {
            lease.commit();
        }
    }
}

/// The usage a turn reports: the agent's own counts when it gave them (an output count it did
/// not give is estimated), else the serializer's input estimate and the output's estimate.
fn usage(bridge: &Bridge, prompt: &Prompt, reply: &AgentReply) -> Usage {
    bridge.metrics.count_usage(reply.usage.is_some());
    match reply.usage {
        Some(reported) => Usage {
            input_tokens: reported.input_tokens,
            output_tokens: reported
                .output_tokens
                .unwrap_or_else(|| estimate_tokens(&reply.text)),
            cache_read_input_tokens: reported.cache_read_input_tokens,
            cache_creation_input_tokens: reported.cache_creation_input_tokens,
        },
        None => Usage::estimated(prompt.input_tokens, estimate_tokens(&reply.text)),
    }
}

/// A non-streaming answer: run the turn, render one JSON message.
pub async fn respond_json(
    bridge: &Arc<Bridge>,
    prepared: Prepared,
    permit: OwnedSemaphorePermit,
) -> Response<ResponseBody> {
    let Prepared {
        prompt,
        images,
        head,
        mut session,
    } = prepared;
    let outcome = run(bridge, &prompt, &images, &mut session).await;
    drop(session);
    drop(permit);
    match outcome {
        Ok((reply, usage)) => {
            let head = MessageHead { usage, ..head };
            let size = reply.content_bytes();
            match run_transform(&bridge.transforms, size, move |t| {
                t.render_json(head, reply)
            })
            .await
            {
                Ok(json) => json_response(StatusCode::OK, json),
                Err(failure) => error_response(bridge, failure).await,
            }
        }
        Err(failure) => error_response(bridge, failure).await,
    }
}

/// A streaming answer: `message_start` at once, `ping` while the agent works, then the
/// content events (or an `error` event).
pub fn respond_stream(
    bridge: &Arc<Bridge>,
    prepared: Prepared,
    permit: OwnedSemaphorePermit,
) -> Response<ResponseBody> {
    let (frames, receiver) = mpsc::channel::<Bytes>(8);
    let bridge = bridge.clone();
    let producer = tokio::spawn(
        async move {
        let _permit = permit;
        let transforms = &bridge.transforms;
        let head = prepared.head.clone();
        let id = prepared.head.id.clone();
        let start = match run_transform(transforms, 0, move |t| t.stream_start(head)).await {
            Ok(start) => start,
            Err(failure) => {
                let _ = frames
                    .send(Bytes::from(fallback_error_event(&failure)))
                    .await;
                return;
            }
        };
        if frames.send(Bytes::from(start)).await.is_err() {
            return;
        }
        let ping = run_transform(transforms, 0, |t| t.stream_ping())
            .await
            .unwrap_or_else(|_| "event: ping\ndata: {\"type\":\"ping\"}\n\n".into());
        let Prepared {
            prompt,
            images,
            mut session,
            ..
        } = prepared;
        let turn = run(&bridge, &prompt, &images, &mut session);
        tokio::pin!(turn);
        let mut ticker = tokio::time::interval_at(
            tokio::time::Instant::now() + bridge.ping_interval,
            bridge.ping_interval,
        );
        let outcome = loop {
            tokio::select! {
                outcome = &mut turn => break outcome,
                _ = ticker.tick() => {
                    if frames.send(Bytes::from(ping.clone())).await.is_err() {
                        tracing::info!(status = 499, id = %id, "client went away during the turn; agent killed");
                        return;
                    }
                }
                _ = frames.closed() => {
                    tracing::info!(status = 499, id = %id, "client went away during the turn; agent killed");
                    return;
                }
            }
        };
        let tail = match outcome {
            Ok((reply, usage)) => {
                let size = reply.content_bytes();
                run_transform(transforms, size, move |t| t.stream_finish(reply, usage)).await
            }
            Err(failure) => Err(failure),
        };
        let tail = match tail {
            Ok(events) => events,
            Err(failure) => {
                tracing::warn!(code = %failure.code, status = failure.status, id = %id, "turn failed after the stream started");
                let event_failure = failure.clone();
                run_transform(transforms, event_failure.message.len(), move |t| {
                    t.error_event(event_failure)
                })
                    .await
                    .unwrap_or_else(|_| fallback_error_event(&failure))
            }
        };
        let _ = frames.send(Bytes::from(tail)).await;
        }
        .instrument(tracing::Span::current()),
    );
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .header("x-accel-buffering", "no")
        .body(Streamed::body(receiver, producer))
        .unwrap_or_else(|_| Response::new(full("")))
}

pub fn json_response(status: StatusCode, json: String) -> Response<ResponseBody> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(full(json))
        .unwrap_or_else(|_| Response::new(full("")))
}

/// An Anthropic error body with the failure's status, rendered by the sse component, or by the
/// host itself if that component is broken (errors must always be answerable).
pub async fn error_response(bridge: &Bridge, failure: Failure) -> Response<ResponseBody> {
    let status = answer_status(failure.status);
    tracing::info!(code = %failure.code, status = failure.status, "request failed");
    let for_body = failure.clone();
    let body = run_transform(&bridge.transforms, for_body.message.len(), move |t| {
        t.error_body(for_body)
    })
    .await
    .unwrap_or_else(|_| fallback_error_body(&failure));
    json_response(status, body)
}

/// The HTTP status an error is answered with. Component failures have had their status
/// checked already (`engine::is_error_status`); this keeps a non-error status from reaching
/// the wire whatever produced the failure.
fn answer_status(status: u16) -> StatusCode {
    if is_error_status(status) {
        StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY)
    } else {
        StatusCode::BAD_GATEWAY
    }
}

/// The host's own error body, for when the sse component cannot render one. The error `type`
/// comes from the same table the sse component uses.
pub fn fallback_error_body(failure: &Failure) -> String {
    serde_json::json!({ "type": "error", "error": { "type": error_type(failure.status), "message": failure.message } }).to_string()
}

fn fallback_error_event(failure: &Failure) -> String {
    format!("event: error\ndata: {}\n\n", fallback_error_body(failure))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(status: u16) -> Failure {
        Failure {
            code: "some_code".into(),
            message: "Something failed.".into(),
            status,
            repairable: false,
        }
    }

    fn error_kind(body: &str) -> String {
        let value: serde_json::Value = serde_json::from_str(body).expect("JSON body");
        value["error"]["type"]
            .as_str()
            .expect("error type")
            .to_owned()
    }

    #[test]
    fn fallback_and_sse_component_agree_on_every_error_status() {
        for status in 400..=599 {
            let failure = failure(status);
            let parse = |body: String| -> serde_json::Value {
                serde_json::from_str(&body).expect("JSON error body")
            };
            assert_eq!(
                parse(fallback_error_body(&failure)),
                parse(devin_bridge_sse::error_body(&failure)),
                "status {status}"
            );
        }
    }

    #[test]
    fn previously_divergent_statuses_get_the_shared_types() {
        // The host's old fallback answered `api_error` for all of these.
        let expected = [
            (403, "permission_error"),
            (402, "invalid_request_error"),
            (405, "invalid_request_error"),
            (409, "invalid_request_error"),
            (422, "invalid_request_error"),
            (499, "invalid_request_error"),
        ];
        for (status, kind) in expected {
            assert_eq!(error_kind(&fallback_error_body(&failure(status))), kind);
        }
    }

    #[test]
    fn non_error_statuses_are_never_answered() {
        for status in [0, 101, 200, 204, 304, 399, 600, 1000] {
            assert_eq!(answer_status(status), StatusCode::BAD_GATEWAY, "{status}");
        }
        assert_eq!(answer_status(529).as_u16(), 529);
        assert_eq!(answer_status(400), StatusCode::BAD_REQUEST);
    }
}
