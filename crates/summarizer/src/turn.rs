//! The turn pipeline:
//! serializer -> model-alias -> ACP turn (on the model the request names) ->
//! unexecuted-intent check -> envelope parse -> at most one repair (a brand-new agent process
//! and session) -> sse render.
//! Fail closed: every failure is a typed `Failure`; nothing falls back to another provider.
//!
//! The model that answered, as the agent reports it, is compared with the one the request
//! named; a mismatch is logged and counted (`devin_bridge_turn_model{outcome}`).
//!
//! A streamed answer holds its response head until the turn has run for one ping interval:
//! a turn that fails sooner (a rate limit, a used-up quota, a refused identity) is answered as
//! a plain HTTP error with its status, so that a client retries a 429 after its `retry-after`
//! as it would Anthropic's. A turn that fails later ends the stream with an `error` event.

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
use devin_bridge_agent::acp::{prompt_blocks, AcpError, ModelApplied};
use devin_bridge_agent::devin::stats::names_model;
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

/// Seconds a client is told to wait before retrying a turn the agent's service turned away
/// for now (`retry-after` of a 429).
pub const RETRY_AFTER_SECONDS: u64 = 5;

/// An agent failure as the client sees it. The agent's own error text is untrusted: it is
/// cleaned by the sse component (`agent-error-message`); if that component fails, the text is
/// left out rather than passed on uncleaned. The status follows [`AcpError::status`]: a
/// retryable refusal is a 429, used-up credits a 400, a refused client identity a 502 whose
/// message names the settings to change.
pub(super) async fn agent_failure(bridge: &Bridge, error: AcpError) -> Failure {
    tracing::warn!(code = error.code(), status = error.status(), retryable = error.retryable(), kind = ?error.error_kind(), "agent failure");
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

/// What an agent turn produced: its text, the token counts it reported, if any, and what
/// it said of the model that answered.
pub struct AgentReply {
    pub text: String,
    pub usage: Option<ReportedUsage>,
    /// The model the agent reports ran the turn.
    pub observed_model: Option<String>,
    /// How the requested model was applied (with its display name, when known).
    pub model: ModelApplied,
}

impl AgentReply {
    /// The reply of a finished ACP turn.
    pub fn of(output: devin_bridge_agent::acp::TurnOutput) -> Self {
        Self {
            text: output.text,
            usage: output.usage,
            observed_model: output.observed_model,
            model: output.model,
        }
    }
}

/// A request that passed the transforms and may now wait for an agent.
pub struct Prepared {
    pub prompt: Prompt,
    /// The ACP model id the request's model resolved to (what the agent is set to).
    pub model_id: String,
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
    let (UnseenPrompt { prompt, images, .. }, model_id, session) = match &bridge.resident {
        Some(resident) => {
            let (unseen, model_id, lease) = resident.prepare(bridge, body, conversation).await?;
            (unseen, model_id, Session::Resident(resident.clone(), lease))
        }
        None => {
            let (unseen, model_id) = serialize_whole(bridge, body).await?;
            (unseen, model_id, Session::PerTurn)
        }
    };
    let head = MessageHead {
        id: message_id(),
        model: prompt.model.clone(),
        // `message_start` goes out before the agent answers: its usage is the estimate.
        usage: Usage::estimated(prompt.input_tokens, 1),
    };
    // The admission resolved the model already; only a path that admitted nothing asks again.
    let model_id = match model_id {
        Some(model_id) => model_id,
        None => resolve_model(bridge, &prompt.model).await?,
    };
    Ok(Prepared {
        model_id,
        prompt,
        images,
        head,
        session,
    })
}

/// The whole prompt and its images, admitted: model validated, input within its window.
pub async fn serialize_whole(
    bridge: &Bridge,
    body: String,
) -> Result<(UnseenPrompt, Option<String>), Failure> {
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
/// With a model check, also the ACP model id the request's model resolved to.
pub(super) async fn serialize_unseen(
    bridge: &Bridge,
    body: Arc<String>,
    held: u32,
    check: Check,
) -> Result<(UnseenPrompt, Option<String>), Failure> {
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
            Check::Nothing => Ok(None),
            Check::Model => t.validate_model(model, catalog)?.map(Some),
            Check::Admit => {
                window::admit(t, &windows, model, catalog, unseen.prompt.input_tokens)?.map(Some)
            }
        };
        Ok(checked.map(|model_id| (unseen, model_id)))
    })
    .await?
}

/// The ACP model id a request's (already validated) model resolves to.
async fn resolve_model(bridge: &Bridge, model: &str) -> Result<String, Failure> {
    let (model, catalog) = (model.to_owned(), bridge.catalog());
    run_transform(&bridge.transforms, model.len(), move |t| {
        t.validate_model(model, catalog)
    })
    .await?
}

/// `count_tokens`: the serializer's estimate of everything the request would send the agent,
/// with the model validated. A request over its model's window is counted, not refused.
pub async fn count_tokens(bridge: &Bridge, body: String) -> Result<u32, Failure> {
    serialize_unseen(bridge, Arc::new(body), 0, Check::Model)
        .await
        .map(|(unseen, _)| unseen.prompt.input_tokens)
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

/// One agent turn on a prewarmed (or fresh) agent, answered by `model`. An agent whose
/// sessions have no model option is told so once, and the turn runs again on an agent
/// started with `--model` (see `AgentPool::take_for`).
async fn agent_turn(
    bridge: &Bridge,
    prompt: &str,
    images: &[Image],
    model: &str,
) -> Result<AgentReply, Failure> {
    let blocks = prompt_blocks(prompt.to_owned(), image_parts(images));
    let mut outcome = per_turn(bridge, blocks.clone(), model).await;
    if matches!(outcome, Err(AcpError::NoModelOption)) {
        bridge.pool.learn_no_model_option();
        outcome = per_turn(bridge, blocks, model).await;
    }
    match outcome {
        Ok(output) => Ok(AgentReply::of(output)),
        Err(error) => Err(agent_failure(bridge, error).await),
    }
}

async fn per_turn(
    bridge: &Bridge,
    blocks: Vec<agent_client_protocol_schema::v1::ContentBlock>,
    model: &str,
) -> Result<devin_bridge_agent::acp::TurnOutput, AcpError> {
    let agent = bridge.pool.take_for(Some(model)).await?;
    let pid = agent.pid();
    let output = agent
        .run_turn_blocks(&bridge.home, blocks, Some(model))
        .await?;
    tracing::info!(pid, elapsed_ms = output.elapsed.as_millis() as u64, chars = output.text.len(), observed_model = ?output.observed_model, model_applied = ?output.model, reported_usage = output.usage.is_some(), "agent turn complete");
    Ok(output)
}

/// Compares the model that answered with the one the request named: logged and counted.
fn check_model(bridge: &Bridge, requested: &str, reply: &AgentReply) {
    let name = match &reply.model {
        ModelApplied::Option { name, .. } => name.as_deref(),
        _ => None,
    };
    let outcome = match reply.observed_model.as_deref() {
        None => "unreported",
        Some(observed) if names_model(observed, requested, name) => "matched",
        Some(observed) => {
            tracing::warn!(
                requested,
                observed,
                "the agent answered with another model than the request named"
            );
            "mismatched"
        }
    };
    bridge.metrics.count_model_check(outcome);
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
    model: &str,
    images: &[Image],
    session: &mut Session,
) -> Result<(Reply, Usage), Failure> {
    let _counted = InFlight::enter(&bridge.in_flight);
    let started = Instant::now();
    let has_tools = prompt.tools.trim() != "[]";
    let first = match session {
        Session::Resident(resident, lease) => {
            resident
                .turn(bridge, lease, &prompt.text, images, model)
                .await?
        }
        Session::PerTurn => agent_turn(bridge, &prompt.text, images, model).await?,
    };
    check_model(bridge, model, &first);
    let rejection = match check(bridge, prompt, &first.text, has_tools).await? {
        Verdict::Accept(reply) => {
            session.commit();
            return Ok((reply, usage(bridge, prompt, &first)));
        }
        Verdict::Repair(rejection) => rejection,
    };
    tracing::info!(code = %rejection.code, "agent output rejected; spending the single repair attempt");
    let second = match session {
        Session::Resident(resident, lease) => {
            resident.repair(bridge, lease, rejection, model).await?
        }
        Session::PerTurn => {
            let text = prompt.text.clone();
            let repaired = run_transform(&bridge.transforms, text.len(), move |t| {
                t.repair(text, rejection)
            })
            .await?;
            agent_turn(bridge, &repaired, images, model).await?
        }
    };
    check_model(bridge, model, &second);
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
        model_id,
        images,
        head,
        mut session,
    } = prepared;
    let outcome = run(bridge, &prompt, &model_id, &images, &mut session).await;
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

/// A streaming answer: the turn starts at once; `message_start` goes out when the turn
/// has run for one ping interval (then `ping` while the agent works, then the content events
/// or an `error` event), or with the content when it finishes sooner. A turn that fails
/// before the stream started is answered as a plain error with its own status.
pub async fn respond_stream(
    bridge: &Arc<Bridge>,
    prepared: Prepared,
    permit: OwnedSemaphorePermit,
) -> Response<ResponseBody> {
    let (frames, receiver) = mpsc::channel::<Bytes>(8);
    let (early, early_failure) = tokio::sync::oneshot::channel::<Failure>();
    let bridge_task = bridge.clone();
    let producer = tokio::spawn(
        async move { stream_turn(bridge_task, prepared, permit, frames, early).await }
            .instrument(tracing::Span::current()),
    );
    match early_failure.await {
        // The turn failed before the stream began: a plain error, status and all.
        Ok(failure) => error_response(bridge, failure).await,
        // The stream began (or the producer ended without a failure to report).
        Err(_) => Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
            .header("x-accel-buffering", "no")
            .body(Streamed::body(receiver, producer))
            .unwrap_or_else(|_| Response::new(full(""))),
    }
}

/// The producer of a streamed answer. Until the stream has begun, a failure goes to `early`
/// (and nothing is written); dropping `early` unsent tells the caller to answer with the
/// stream.
async fn stream_turn(
    bridge: Arc<Bridge>,
    prepared: Prepared,
    permit: OwnedSemaphorePermit,
    frames: mpsc::Sender<Bytes>,
    early: tokio::sync::oneshot::Sender<Failure>,
) {
    let _permit = permit;
    let transforms = &bridge.transforms;
    let head = prepared.head.clone();
    let id = prepared.head.id.clone();
    let start = match run_transform(transforms, 0, move |t| t.stream_start(head)).await {
        Ok(start) => start,
        Err(failure) => {
            let _ = early.send(failure);
            return;
        }
    };
    let ping = run_transform(transforms, 0, |t| t.stream_ping())
        .await
        .unwrap_or_else(|_| "event: ping\ndata: {\"type\":\"ping\"}\n\n".into());
    let Prepared {
        prompt,
        model_id,
        images,
        mut session,
        ..
    } = prepared;
    let turn = run(&bridge, &prompt, &model_id, &images, &mut session);
    tokio::pin!(turn);
    // Before the first ping the head is held: a quick failure is still a plain HTTP error.
    let first_ping = tokio::time::sleep(bridge.ping_interval);
    tokio::pin!(first_ping);
    let mut early = Some(early);
    let finished = match early.as_mut() {
        Some(waiting) => tokio::select! {
            outcome = &mut turn => Some(outcome),
            () = &mut first_ping => None,
            // The client went away before the head was sent: the turn (and its agent) ends.
            () = waiting.closed() => {
                tracing::info!(status = 499, id = %id, "client went away during the turn; agent killed");
                return;
            }
        },
        None => None,
    };
    let outcome = match finished {
        Some(Err(failure)) => {
            if let Some(early) = early.take() {
                tracing::info!(code = %failure.code, status = failure.status, id = %id, "turn failed before the stream began");
                let _ = early.send(failure);
            }
            return;
        }
        Some(Ok(answer)) => {
            drop(early.take());
            if frames.send(Bytes::from(start)).await.is_err() {
                return;
            }
            Ok(answer)
        }
        None => {
            drop(early.take());
            if frames.send(Bytes::from(start)).await.is_err()
                || frames.send(Bytes::from(ping.clone())).await.is_err()
            {
                tracing::info!(status = 499, id = %id, "client went away during the turn; agent killed");
                return;
            }
            let mut ticker = tokio::time::interval_at(
                tokio::time::Instant::now() + bridge.ping_interval,
                bridge.ping_interval,
            );
            loop {
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
    let mut response = json_response(status, body);
    if status == StatusCode::TOO_MANY_REQUESTS {
        // What a client waits before it retries (Claude Code honours it).
        response.headers_mut().insert(
            hyper::header::RETRY_AFTER,
            hyper::header::HeaderValue::from(RETRY_AFTER_SECONDS),
        );
    }
    response
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
