//! The turn pipeline:
//! serializer -> model-alias -> ACP turn (on the model the request names) ->
//! envelope parse -> unexecuted-intent check (of a text reply only: a reply that makes a call
//! may announce its next step) -> at most one repair (a brand-new agent process and session,
//! or the resident session continued) -> sse render.
//! The defects the envelope parser repaired in an accepted reply are counted by kind
//! (`devin_bridge_envelope_recoveries_total{kind}`).
//! Fail closed: every failure is a typed `Failure`; nothing falls back to another provider.
//!
//! The model that answered, as the agent reports it, is compared with the one the request
//! named; a mismatch is logged and counted (`devin_bridge_turn_model{outcome}`).
//!
//! The request's effort (the serializer's `effort`) goes with the model: as the model's
//! effort variant or the session's thought level, or ignored when the session offers neither
//! (see `apply_model_and_effort` of the agent crate); never a failure. Each agent turn is
//! counted by effort and by how it was applied (`devin_bridge_turn_effort{effort, applied}`).
//!
//! With `[server] stream_text` (the default) the envelope parse is a reply stream fed the
//! agent's chunks as they arrive (`streamed`), one per attempt; its certain text is the turn's
//! `Shown` text, which streaming responses send as it comes, and the reply is the message that
//! text ends up in (one text block, then the calls). Without it, the whole output is parsed
//! once at the end.
//!
//! A streamed answer holds its response head until the turn has run for one ping interval or
//! its first text is certain: a turn that fails sooner (a rate limit, a used-up quota, a
//! refused identity) is answered as a plain HTTP error with its status, so that a client
//! retries a 429 after its `retry-after` as it would Anthropic's. A turn that fails later ends
//! the stream with an `error` event after what was shown.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use agent_client_protocol_schema::v1::ContentBlock;
use devin_bridge_agent::acp::{prompt_blocks, AcpError, ChunkSink, ModelApplied, TurnOutput};
use devin_bridge_agent::devin::stats::{catalog_labels, names_any};
use devin_bridge_engine::{Image, Prompt, TransformCalls as _};
use devin_bridge_types::{estimate_tokens, Failure, Reply, Usage};
use tokio::sync::mpsc::UnboundedReceiver;

use super::calls::run_transform;
use super::failures::HostFailure;
use super::metrics::Metrics;
use super::policy::SafeguardMode;
use super::pool::AgentPool;
use super::reply::{agent_failure, AgentReply};
use super::serialize::{image_parts, Codec};
use super::shown::Shown;
use super::streamed;
use crate::sessions::Placement;

/// How turns are run and judged: what serializing and the transforms need (the codec), the
/// most calls a reply may hold, whether a reply's text streams, and who answers a request's
/// safeguard.
pub(crate) struct Turns {
    pub(crate) codec: Codec,
    /// Tool calls one reply may hold (`[agent] max_tool_calls`).
    pub(crate) max_tool_calls: u32,
    /// Whether a streamed reply's text goes out as the agent writes it (`[server]
    /// stream_text`).
    pub(crate) stream_text: bool,
    /// Who answers a request's `dangerous_tool_use` safeguard (`[safeguards] mode`).
    pub(crate) safeguard_mode: SafeguardMode,
}

/// What the envelope check says of an agent's output.
enum Verdict {
    /// A reply for the client.
    Accept(Reply),
    /// Rejected, and the agent may fix it: the failure goes into the single repair.
    Repair(Failure),
}

async fn per_turn(
    pool: &Arc<AgentPool>,
    home: &Path,
    blocks: Vec<ContentBlock>,
    model: &str,
    effort: Option<&str>,
    chunks: Option<ChunkSink>,
) -> Result<TurnOutput, AcpError> {
    let agent = pool.take_for(Some(model)).await?;
    let pid = agent.pid();
    let output = agent
        .run_turn_observed(home, blocks, Some(model), effort, chunks)
        .await?;
    tracing::info!(pid, elapsed_ms = output.elapsed.as_millis() as u64, chars = output.text.len(), observed_model = ?output.observed_model, model_applied = ?output.model, effort_applied = ?output.effort, reported_usage = output.usage.is_some(), "agent turn complete");
    Ok(output)
}

fn narrated_intent() -> Failure {
    HostFailure::UnexecutedActionNarrative.with(
        "the reply described a client action instead of requesting it with a tool envelope \
             (an envelope inside a Markdown code fence is quoted text, not a request)",
    )
}

/// The turn with its single repair. Returns the reply and the usage to report. The turn owns
/// its `placement`: on the resident transport the turn runs on the leased session, the repair
/// continues it, and a success commits the session's new history; the placement ends with the
/// turn.
///
/// With `shown`, the reply's text streams: each attempt's output is pushed chunk by chunk into
/// a reply stream of its own (see [`super::streamed`]), the text it makes certain is appended
/// to `shown` as it comes, and the reply returned is the message `shown` ends up holding (one
/// text block, then the calls). What was shown stays shown: a repair's text continues it.
pub(crate) async fn run(
    turns: &Turns,
    metrics: &Metrics,
    prompt: &Prompt,
    model: &str,
    images: &[Image],
    mut placement: Placement,
    shown: Option<&Arc<Shown>>,
) -> Result<(Reply, Usage), Failure> {
    let run = Run {
        turns,
        metrics,
        prompt,
        model,
        images,
        shown,
    };
    let started = Instant::now();
    let first = run.attempt(&mut placement, None).await?;
    let rejection = match first.verdict {
        Verdict::Accept(reply) => {
            placement.commit(&reply);
            return Ok((reply, run.usage(&first.reply)));
        }
        Verdict::Repair(rejection) => rejection,
    };
    tracing::info!(code = %rejection.code, "agent output rejected; spending the single repair attempt");
    let second = run.attempt(&mut placement, Some(rejection)).await?;
    let outcome = match second.verdict {
        Verdict::Accept(reply) => {
            placement.commit(&reply);
            Ok((reply, run.usage(&second.reply)))
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

/// One attempt: the agent's answer and the verdict on it.
struct Attempt {
    reply: AgentReply,
    verdict: Verdict,
}

/// What one turn runs with: the settings, the metrics, the request's prompt, model and images,
/// and where its text streams. The placement it runs on is not here: the turn holds it (see
/// [`run`]).
struct Run<'a> {
    turns: &'a Turns,
    metrics: &'a Metrics,
    prompt: &'a Prompt,
    model: &'a str,
    images: &'a [Image],
    shown: Option<&'a Arc<Shown>>,
}

impl Run<'_> {
    /// Runs the first attempt (`rejection` absent) or the single repair, on the placement's
    /// transport; with `shown`, its output streams (see [`run`]).
    async fn attempt(
        &self,
        placement: &mut Placement,
        rejection: Option<Failure>,
    ) -> Result<Attempt, Failure> {
        let (sink, chunks) = match self.shown {
            Some(_) => {
                let (sink, chunks) = streamed::Chunks::new();
                (Some(sink), Some(chunks))
            }
            None => (None, None),
        };
        // The agent's turn; the sink goes with it, so the chunks end when the turn does.
        let agent = self.agent(placement, rejection, sink);
        let (reply, verdict) = match (self.shown, chunks) {
            (Some(shown), Some(chunks)) => {
                let (reply, fed) = tokio::join!(agent, self.feed(chunks, shown));
                let reply = reply?;
                self.observe(&reply);
                let verdict = match fed? {
                    // Only a reply without any call is judged, and only when the request has
                    // tools (as the one-shot check does).
                    streamed::Fed::Accepted { narrates: true, .. } => {
                        Verdict::Repair(narrated_intent())
                    }
                    streamed::Fed::Accepted { calls, tail, .. } => {
                        self.metrics.observe_held_back(tail.len());
                        shown.append(&tail);
                        Verdict::Accept(streamed::message(shown.text(), calls))
                    }
                    streamed::Fed::Rejected(failure) if failure.repairable => {
                        Verdict::Repair(failure)
                    }
                    streamed::Fed::Rejected(failure) => return Err(failure),
                };
                (reply, verdict)
            }
            _ => {
                let reply = agent.await?;
                self.observe(&reply);
                let verdict = self.check(&reply.text).await?;
                (reply, verdict)
            }
        };
        Ok(Attempt { reply, verdict })
    }

    /// The agent's answer on the placement's transport: the prompt, or (with `rejection`) the
    /// single repair.
    async fn agent(
        &self,
        placement: &mut Placement,
        rejection: Option<Failure>,
        sink: Option<streamed::Chunks>,
    ) -> Result<AgentReply, Failure> {
        let (codec, prompt, images) = (&self.turns.codec, self.prompt, self.images);
        let (model, effort) = (self.model, prompt.effort.as_deref());
        match (placement, rejection) {
            (Placement::Resident(resident, lease), None) => {
                resident
                    .turn(codec, lease, &prompt.text, images, model, effort, sink)
                    .await
            }
            (Placement::Resident(resident, lease), Some(rejection)) => {
                resident
                    .repair(codec, lease, rejection, model, effort, sink)
                    .await
            }
            (Placement::PerTurn { pool, home }, None) => {
                self.agent_turn(pool, home, &prompt.text, sink).await
            }
            (Placement::PerTurn { pool, home }, Some(rejection)) => {
                let text = prompt.text.clone();
                let repaired = run_transform(&codec.transforms, text.len(), move |t| {
                    t.repair(text, rejection)
                })
                .await?;
                self.agent_turn(pool, home, &repaired, sink).await
            }
        }
    }

    /// One agent turn on a prewarmed (or fresh) agent of `pool`, in `home`, sent `text`. An
    /// agent whose sessions have no model option is told so once, and the turn runs again on
    /// an agent started with `--model` (see `AgentPool::take_for`).
    async fn agent_turn(
        &self,
        pool: &Arc<AgentPool>,
        home: &Path,
        text: &str,
        chunks: Option<streamed::Chunks>,
    ) -> Result<AgentReply, Failure> {
        let (model, effort) = (self.model, self.prompt.effort.as_deref());
        let blocks = prompt_blocks(text.to_owned(), image_parts(self.images));
        let sink = chunks.as_ref().map(streamed::Chunks::sink);
        let mut outcome = per_turn(pool, home, blocks.clone(), model, effort, sink).await;
        if matches!(outcome, Err(AcpError::NoModelOption)) {
            pool.learn_no_model_option();
            let sink = chunks.as_ref().map(streamed::Chunks::sink);
            outcome = per_turn(pool, home, blocks, model, effort, sink).await;
        }
        match outcome {
            Ok(output) => Ok(AgentReply::of(output)),
            Err(error) => Err(agent_failure(&self.turns.codec.transforms, error).await),
        }
    }

    /// The streaming parse of one attempt's chunks into `shown`.
    async fn feed(
        &self,
        chunks: UnboundedReceiver<UnboundedReceiver<String>>,
        shown: &Arc<Shown>,
    ) -> Result<streamed::Fed, Failure> {
        let limits = streamed::Limits {
            max_calls: self.max_calls(),
            judge_narration: self.has_tools(),
        };
        let metrics = self.metrics;
        streamed::feed(
            &self.turns.codec.transforms,
            self.prompt,
            limits,
            chunks,
            shown,
            |recovery| metrics.count_recovery(recovery),
        )
        .await
    }

    fn has_tools(&self) -> bool {
        self.prompt.tools.trim() != "[]"
    }

    /// The most calls a reply may hold: one when `tool_choice.disable_parallel_tool_use` asks
    /// for one (a second is then repairable), else the policy's limit.
    fn max_calls(&self) -> u32 {
        if self.prompt.single_tool_call {
            1
        } else {
            self.turns.max_tool_calls
        }
    }

    /// What an attempt's reply says of the turn, counted: the model that answered, the effort
    /// and the notices kept out of the reply.
    fn observe(&self, reply: &AgentReply) {
        self.check_model(reply);
        self.metrics
            .count_effort(self.prompt.effort.as_deref(), reply.effort.label());
        self.metrics
            .count_notices("display_message", reply.display_messages);
        self.metrics.count_notices("compaction", reply.compactions);
    }

    /// Compares the model that answered (the agent reports a display label, "SWE-2 High")
    /// with the one the request named (an id): as ids, then by the display names known for the
    /// id (the session option's name for the value set, the catalog's labels for the id):
    /// logged and counted. A model chosen with `--model` (a session without a model option)
    /// has only the catalog's labels.
    fn check_model(&self, reply: &AgentReply) {
        let requested = self.model;
        let (value, name) = match &reply.model {
            ModelApplied::Option { value, name } => (Some(value.as_str()), name.as_deref()),
            ModelApplied::CommandLine { value } => (Some(value.as_str()), None),
            ModelApplied::NotRequested => (None, None),
        };
        let names_it = |observed: &str| {
            let set = value.unwrap_or(requested);
            if names_any(observed, requested, name) || names_any(observed, set, name) {
                return true;
            }
            // Only a label that is not the id itself costs a read of the catalog.
            let catalog: serde_json::Value =
                serde_json::from_str(&self.turns.codec.catalog()).unwrap_or_default();
            let labels = catalog_labels(&catalog, requested)
                .into_iter()
                .chain(catalog_labels(&catalog, set));
            labels
                .into_iter()
                .any(|label| names_any(observed, requested, [label.as_str()]))
        };
        let outcome = match reply.observed_model.as_deref() {
            None => "unreported",
            Some(observed) if names_it(observed) => "matched",
            Some(observed) => {
                tracing::warn!(
                    requested,
                    observed,
                    "the agent answered with another model than the request named"
                );
                "mismatched"
            }
        };
        self.metrics.count_model_check(outcome);
    }

    /// The verdict on an agent's output. An error is the turn's end: the transform itself
    /// failed, or the output is rejected in a way no repair can fix.
    async fn check(&self, output: &str) -> Result<Verdict, Failure> {
        let prompt = self.prompt;
        // The heuristic and the parser in one hop off the async workers.
        let (text, tools, seed) = (
            output.to_owned(),
            prompt.tools.clone(),
            prompt.id_seed.clone(),
        );
        let (max_calls, has_tools) = (self.max_calls(), self.has_tools());
        let size = text.len() + tools.len();
        let parsed = run_transform(&self.turns.codec.transforms, size, move |t| {
            let parsed = match t.parse(text, tools, seed, max_calls)? {
                Ok(parsed) => parsed,
                Err(failure) => return Ok(Err(failure)),
            };
            // Only a reply without any call is judged: prose beside a call may announce the
            // step after it.
            if let Reply::Text(text) = &parsed.reply {
                if has_tools && t.narrates_unexecuted_action(text.clone())? {
                    return Ok(Err(narrated_intent()));
                }
            }
            Ok(Ok(parsed))
        })
        .await?;
        match parsed {
            Ok(parsed) => {
                for recovery in &parsed.recoveries {
                    self.metrics.count_recovery(*recovery);
                }
                if !parsed.recoveries.is_empty() {
                    tracing::info!(recoveries = ?parsed.recoveries, "the envelope parser repaired the agent's envelopes");
                }
                Ok(Verdict::Accept(parsed.reply))
            }
            Err(failure) if failure.repairable => Ok(Verdict::Repair(failure)),
            Err(failure) => Err(failure),
        }
    }

    /// The usage a turn reports: the agent's own counts when it gave them (an output count it
    /// did not give is estimated), else the serializer's input estimate and the output's
    /// estimate. Reported counts are counted by their source (the turn's sums, or its last
    /// model request only).
    fn usage(&self, reply: &AgentReply) -> Usage {
        self.metrics.count_usage(reply.usage.is_some());
        if let Some(reported) = &reply.usage {
            self.metrics.count_usage_source(reported.source.label());
        }
        match reply.usage {
            Some(reported) => Usage {
                input_tokens: reported.input_tokens,
                output_tokens: reported
                    .output_tokens
                    .unwrap_or_else(|| estimate_tokens(&reply.text)),
                cache_read_input_tokens: reported.cache_read_input_tokens,
                cache_creation_input_tokens: reported.cache_creation_input_tokens,
            },
            None => Usage::estimated(self.prompt.input_tokens, estimate_tokens(&reply.text)),
        }
    }
}
