//! The resident transport: pooled agent processes, each serving several sessions, and one
//! session per conversation that lives across turns.
//!
//! - A conversation is keyed by the client's session header and found by the identity of the
//!   history it sends (see [`conversations`]). A request that continues a session sends only
//!   the messages that session has not seen; any other request (a new conversation, an edited
//!   or forked history, a replica that never saw it) starts a session with the whole prompt.
//! - Requests without the header, and side requests without tools (title generation, quota
//!   probes), run in an ephemeral session that is closed after the turn.
//! - When a session's process dies (another session's tool call killed it, or it exited), the
//!   next turn, or the turn that was running, rebuilds the session and sends the whole prompt
//!   once: a replay.
//! - The single repair attempt continues the same session with the repair instructions only.
//! - A subagent (its key joins its agent id to the parent's key) has sessions of its own,
//!   released at its final answer ([`Lease::commit`]); when room is needed, idle subagent
//!   sessions go first and a subagent never forgets its parent's (see [`conversations`]).

mod conversations;
mod processes;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use devin_bridge_types::Failure;
use prometheus_client::metrics::counter::Counter;
use serde::Serialize;
use tokio::sync::OwnedMutexGuard;

use self::conversations::{Binding, Bound, Conversations, Earlier, Entry, ResumeBudget};
use self::processes::Processes;
use super::calls::run_transform;
use super::reply::{agent_failure, AgentReply};
use super::serialize::{image_parts, serialize_resumed, serialize_unseen, Check, Codec};
use super::streamed::Chunks;
use crate::conversation::ConversationKey;
use crate::policy::AgentSection;
use agent_client_protocol_schema::v1;
use devin_bridge_agent::acp::{prompt_blocks, AcpError, AgentLimits, ChunkSink, TurnOutput};
use devin_bridge_agent::devin::ClientIdentity;
use devin_bridge_agent::process::Spec;
use devin_bridge_engine::TransformCalls as _;
use devin_bridge_engine::{Image, MessageMark, Prompt, Resume, UnseenPrompt};
use devin_bridge_types::continuation::{self, Continuation};

/// Attempts at finding a session before the turn runs in an ephemeral one instead (each
/// attempt that fails lost a race with another turn of the same conversation).
const MAX_SELECTION_ATTEMPTS: usize = 3;

/// Counters for `/healthz` and `/metrics` (Prometheus counters: `/metrics` registers clones).
#[derive(Default)]
pub struct Stats {
    /// Turns that continued their conversation's session.
    pub hits: Counter,
    /// Turns that started a conversation's first session.
    pub misses: Counter,
    /// Turns whose history no session of their conversation holds (edited, compacted, forked).
    pub forks: Counter,
    /// Turns whose session's process had died: the session was rebuilt.
    pub rebuilds: Counter,
    /// Whole prompts sent again to rebuild a session (on a rebuild, or when the process died
    /// during the turn).
    pub replays: Counter,
    /// Turns in an ephemeral session (no conversation header, or a side request).
    pub ephemeral: Counter,
    /// Requests serialized as the continuation of the session's last request: only the
    /// messages after the bytes the two share were parsed.
    pub resumed: Counter,
    /// Subagent sessions released because their conversation ended (a final answer).
    pub subagents_ended: Counter,
    /// Prompts sent to agents, and their bytes.
    pub prompts: Counter,
    pub prompt_bytes: Counter,
}

/// What `/healthz` says about the resident transport.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub processes: usize,
    pub processes_started: u64,
    pub sessions: usize,
    pub hits: u64,
    pub misses: u64,
    pub forks: u64,
    pub rebuilds: u64,
    pub replays: u64,
    pub ephemeral: u64,
    pub resumed: u64,
    /// Bytes of request bodies the sessions keep for resuming.
    pub kept_bytes: u64,
    pub subagents_ended: u64,
    pub prompts: u64,
    pub prompt_bytes: u64,
}

/// The resident transport's state.
pub struct Resident {
    processes: Processes,
    conversations: Conversations,
    /// What the sessions' kept requests may take.
    budget: Arc<ResumeBudget>,
    pub stats: Stats,
    home: PathBuf,
    idle: Duration,
    warm: usize,
}

/// How a turn found its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    Hit,
    New,
    Fork,
    Rebuild,
}

/// A turn's claim on its session: the conversation's single-flight lock, or an ephemeral
/// session. Dropped without [`Lease::commit`], the session is forgotten (its state after a
/// failed or abandoned turn is unknown).
pub(crate) struct Lease {
    resident: Arc<Resident>,
    session: LeasedSession,
    /// The request, for a replay.
    body: Arc<String>,
    /// The request's history identities.
    history: Vec<String>,
    /// What the session keeps of the request once the turn succeeds.
    earlier: Option<Arc<Earlier>>,
    /// Messages the session held before this turn (0: it gets the whole prompt).
    held: u32,
    replayed: bool,
    committed: bool,
}

enum LeasedSession {
    Conversation {
        entry: Arc<Entry>,
        binding: OwnedMutexGuard<Binding>,
    },
    Ephemeral {
        binding: Binding,
    },
}

impl LeasedSession {
    fn binding(&mut self) -> &mut Binding {
        match self {
            LeasedSession::Conversation { binding, .. } => binding,
            LeasedSession::Ephemeral { binding } => binding,
        }
    }
}

impl Lease {
    /// The turn succeeded: the session now holds the request's messages. `final_answer` says
    /// that the reply calls no tool: for a subagent that ends its conversation (Claude Code
    /// hands the answer to the parent and sends the subagent nothing more), so its session is
    /// released at once instead of waiting, idle, for `session_idle_ms` or for room to be
    /// needed. A main conversation's session stays: its user may write again.
    pub(crate) fn commit(&mut self, final_answer: bool) {
        self.committed = true;
        if let LeasedSession::Conversation { entry, binding } = &mut self.session {
            if final_answer && entry.is_subagent() {
                tracing::debug!("a subagent's conversation ended; its session is released");
                binding.take();
                self.resident.conversations.remove(entry);
                self.resident.stats.subagents_ended.inc();
            } else {
                entry.commit(&self.history, self.earlier.take());
            }
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        match &mut self.session {
            LeasedSession::Conversation { entry, binding } if !self.committed => {
                binding.take();
                self.resident.conversations.remove(entry);
            }
            // An ephemeral session ends with its turn.
            LeasedSession::Ephemeral { binding } => drop(binding.take()),
            LeasedSession::Conversation { .. } => {}
        }
    }
}

impl Resident {
    pub fn new(
        spec: Spec,
        limits: AgentLimits,
        client: ClientIdentity,
        agent: &AgentSection,
        home: PathBuf,
    ) -> Arc<Self> {
        Arc::new(Self {
            processes: Processes::new(spec, limits, client, agent.sessions_per_process),
            conversations: Conversations::new(agent.max_sessions),
            budget: ResumeBudget::new(
                usize::try_from(agent.resume_memory_mib.saturating_mul(1 << 20))
                    .unwrap_or(usize::MAX),
            ),
            stats: Stats::default(),
            home,
            idle: Duration::from_millis(agent.session_idle_ms),
            warm: agent.prewarm,
        })
    }

    /// Resident processes running now.
    pub fn live_processes(&self) -> usize {
        self.processes.live()
    }

    /// Bytes of request bodies the sessions keep for resuming.
    pub fn kept_bytes(&self) -> usize {
        self.budget.used()
    }

    /// Conversation sessions kept now.
    pub fn sessions(&self) -> usize {
        self.conversations.len()
    }

    /// The counter of processes started.
    pub fn processes_started(&self) -> &Counter {
        self.processes.started_counter()
    }

    pub fn snapshot(&self) -> Snapshot {
        let load = |counter: &Counter| counter.get();
        Snapshot {
            processes: self.processes.live(),
            processes_started: self.processes.started(),
            sessions: self.conversations.len(),
            hits: load(&self.stats.hits),
            misses: load(&self.stats.misses),
            forks: load(&self.stats.forks),
            rebuilds: load(&self.stats.rebuilds),
            replays: load(&self.stats.replays),
            ephemeral: load(&self.stats.ephemeral),
            resumed: load(&self.stats.resumed),
            kept_bytes: u64::try_from(self.kept_bytes()).unwrap_or(u64::MAX),
            subagents_ended: load(&self.stats.subagents_ended),
            prompts: load(&self.stats.prompts),
            prompt_bytes: load(&self.stats.prompt_bytes),
        }
    }

    /// Starts the policy's `prewarm` processes, then forgets idle sessions and ends idle and
    /// dead processes until the bridge stops.
    pub async fn run_reaper(self: Arc<Self>) {
        self.processes.warm(self.warm).await;
        let tick = (self.idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
        loop {
            tokio::time::sleep(tick).await;
            let forgotten = self.conversations.forget_idle(self.idle);
            if forgotten > 0 {
                tracing::info!(forgotten, "idle conversation sessions forgotten");
            }
            self.processes.reap(self.idle).await;
        }
    }

    /// Ends every process (shutdown).
    pub async fn shutdown(&self) {
        self.processes.close_all().await;
    }

    /// Serializes the request for the session it continues (found or started here) and
    /// validates its model (the ACP id it resolved to comes back with it). Waits while
    /// another turn of the same session runs.
    pub(crate) async fn prepare(
        self: &Arc<Self>,
        codec: &Codec,
        body: String,
        key: Option<ConversationKey>,
    ) -> Result<(UnseenPrompt, Option<String>, Lease), Failure> {
        let body = Arc::new(body);
        let Some(key) = key else {
            let (whole, model_id) = serialize(codec, &body, 0, Check::Admit).await?;
            let (whole, lease) = self.ephemeral(body, whole);
            return Ok((whole, model_id, lease));
        };
        let mut model_id = None;
        for _ in 0..MAX_SELECTION_ATTEMPTS {
            let (guess, earlier) = self.conversations.likely(&key);
            let resumed = match earlier {
                Some(earlier) => self.resume(codec, &body, &earlier, guess).await?,
                None => None,
            };
            let (unseen, admitted) = match resumed {
                Some((unseen, admitted)) => (unseen, Some(admitted)),
                None => serialize(codec, &body, guess, Check::Admit).await?,
            };
            model_id = admitted;
            if unseen.prompt.tools.trim() == "[]" {
                // A side request (title, quota probe, summary): never the conversation's session.
                let whole = if guess == 0 {
                    unseen
                } else {
                    serialize(codec, &body, 0, Check::Nothing).await?.0
                };
                let (whole, lease) = self.ephemeral(body, whole);
                return Ok((whole, model_id, lease));
            }
            let continued = self.conversations.continued(&key, &unseen.history);
            let known = self.conversations.knows(&key);
            let (entry, expected) = match continued {
                Some((entry, held)) => (entry, held),
                None => (self.conversations.create(&key, key.parent()), 0),
            };
            let mut binding = entry.lock().await;
            let view = entry.view();
            if view.forgotten || view.held != expected {
                // Another turn of this conversation changed the session while this one waited.
                continue;
            }
            let alive = binding.as_ref().is_some_and(|bound| bound.agent.is_alive());
            let found = match (expected, alive) {
                (0, _) if known => Found::Fork,
                (0, _) => Found::New,
                (_, true) => Found::Hit,
                (_, false) => Found::Rebuild,
            };
            let held = if found == Found::Hit { expected } else { 0 };
            if found == Found::Rebuild {
                binding.take();
            }
            self.count(found);
            let mut unseen = if held == guess {
                unseen
            } else {
                serialize(codec, &body, held, Check::Nothing).await?.0
            };
            tracing::debug!(
                ?found,
                held,
                messages = unseen.history.len(),
                "conversation session chosen"
            );
            // Kept only within the budget; without it, the next turn serializes the whole
            // request, which is just as correct.
            let earlier = self.budget.charge(body.len()).map(|charge| Earlier {
                body: body.clone(),
                _charge: charge,
                history: unseen.history.clone(),
                marks: std::mem::take(&mut unseen.marks),
                tool_names: std::mem::take(&mut unseen.tool_names),
                tools: unseen.prompt.tools.clone(),
                model: unseen.prompt.model.clone(),
                stream: unseen.prompt.stream,
                single_tool_call: unseen.prompt.single_tool_call,
                classifier_context: unseen.prompt.classifier_context.clone(),
                earlier_calls: unseen.prompt.earlier_calls.clone(),
                effort: unseen.prompt.effort.clone(),
            });
            let lease = Lease {
                resident: self.clone(),
                session: LeasedSession::Conversation { entry, binding },
                body,
                // The lease keeps the identities it commits; the caller needs only the prompt.
                history: std::mem::take(&mut unseen.history),
                earlier: earlier.map(Arc::new),
                held,
                replayed: false,
                committed: false,
            };
            return Ok((unseen, model_id, lease));
        }
        tracing::info!(
            "conversation busy with competing turns; this one runs in an ephemeral session"
        );
        let whole = serialize(codec, &body, 0, Check::Nothing).await?.0;
        let (whole, lease) = self.ephemeral(body, whole);
        Ok((whole, model_id, lease))
    }

    /// The request serialized as the continuation of `earlier`, the last request of the
    /// session that holds `held` messages, with its model validated: none when the request
    /// does not repeat `earlier`'s bytes far enough, or the serializer refuses the
    /// continuation (then serializing the whole request decides).
    async fn resume(
        &self,
        codec: &Codec,
        body: &Arc<String>,
        earlier: &Arc<Earlier>,
        held: u32,
    ) -> Result<Option<(UnseenPrompt, String)>, Failure> {
        let ends: Vec<u32> = earlier.marks.iter().map(|mark| mark.request_end).collect();
        let Some(found) = continuation::find(&earlier.body, &ends, body) else {
            return Ok(None);
        };
        let Some(resume) = resume_state(earlier, &found, held) else {
            return Ok(None);
        };
        let Some(text) = body.get(found.range.clone()) else {
            return Ok(None);
        };
        let model = earlier.model.clone();
        let Some((resumed, model_id)) =
            serialize_resumed(codec, text.to_owned(), resume, held, model).await?
        else {
            return Ok(None);
        };
        self.stats.resumed.inc();
        let before = found.messages;
        let offset = u32::try_from(found.range.start).unwrap_or(u32::MAX);
        let history = earlier.history[..before]
            .iter()
            .cloned()
            .chain(resumed.history)
            .collect();
        // The calls of the messages the continuation repeats (the marks count them, message by
        // message, in the order the serializer lists them), then the continuation's own.
        let earlier_calls = if earlier.classifier_context.is_some() {
            let repeated: usize = earlier.marks[..before]
                .iter()
                .map(|mark| mark.tool_uses.len())
                .sum();
            earlier
                .earlier_calls
                .iter()
                .take(repeated)
                .cloned()
                .chain(resumed.earlier_calls)
                .collect()
        } else {
            Vec::new()
        };
        let marks = earlier.marks[..before]
            .iter()
            .cloned()
            .chain(resumed.marks.into_iter().map(|mark| MessageMark {
                request_end: mark.request_end.saturating_add(offset),
                ..mark
            }))
            .collect();
        let unseen = UnseenPrompt {
            prompt: Prompt {
                text: resumed.text,
                tools: earlier.tools.clone(),
                input_tokens: resumed.input_tokens,
                id_seed: resumed.id_seed,
                model: earlier.model.clone(),
                stream: earlier.stream,
                single_tool_call: earlier.single_tool_call,
                // Part of what a continuation repeats byte for byte (it lies outside the
                // messages), so the earlier request's is this one's.
                classifier_context: earlier.classifier_context.clone(),
                earlier_calls,
                // Outside the messages too.
                effort: earlier.effort.clone(),
                // A continuation follows at least one message: never a side request's shape.
                local_answer: None,
            },
            history,
            images: resumed.images,
            marks,
            tool_names: earlier.tool_names.clone(),
        };
        Ok(Some((unseen, model_id)))
    }

    fn ephemeral(
        self: &Arc<Self>,
        body: Arc<String>,
        whole: UnseenPrompt,
    ) -> (UnseenPrompt, Lease) {
        let lease = Lease {
            resident: self.clone(),
            session: LeasedSession::Ephemeral { binding: None },
            body,
            // An ephemeral session commits nothing.
            history: Vec::new(),
            earlier: None,
            held: 0,
            replayed: false,
            committed: false,
        };
        (whole, lease)
    }

    fn count(&self, found: Found) {
        let counter = match found {
            Found::Hit => &self.stats.hits,
            Found::New => &self.stats.misses,
            Found::Fork => &self.stats.forks,
            Found::Rebuild => {
                self.stats.replays.inc();
                &self.stats.rebuilds
            }
        };
        counter.inc();
    }

    /// One agent turn on the lease's session, answered by `model` at `effort`. When the
    /// session's process dies under it for a reason that is not this session's own tool call,
    /// the session is rebuilt once with the whole prompt. With `chunks`, each chunk of the reply
    /// goes there as it arrives (the turn's streaming parse reads them; the replay's to a sink
    /// of its own, so the parse starts over).
    // The turn's inputs are the prompt's own parts and how it is answered; a struct holding
    // them for this one call would only rename them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn turn(
        &self,
        codec: &Codec,
        lease: &mut Lease,
        text: &str,
        images: &[Image],
        model: &str,
        effort: Option<&str>,
        chunks: Option<Chunks>,
    ) -> Result<AgentReply, Failure> {
        let error = match self
            .prompt(
                lease,
                prompt_blocks(text.to_owned(), image_parts(images)),
                model,
                effort,
                chunks.as_ref().map(Chunks::sink),
            )
            .await
        {
            Ok(output) => return Ok(AgentReply::of(output)),
            Err(error) => error,
        };
        if !matches!(error, AcpError::EarlyExit) || lease.replayed {
            return Err(agent_failure(&codec.transforms, error).await);
        }
        tracing::info!("the session's agent process ended under this turn; rebuilding the session with a replay");
        lease.replayed = true;
        lease.held = 0;
        self.stats.replays.inc();
        let (whole, _) = serialize(codec, &lease.body, 0, Check::Nothing).await?;
        let blocks = prompt_blocks(whole.prompt.text, image_parts(&whole.images));
        // The replay's chunks go to a sink of their own: its reply stream starts over.
        let sink = chunks.as_ref().map(Chunks::sink);
        match self.prompt(lease, blocks, model, effort, sink).await {
            Ok(output) => Ok(AgentReply::of(output)),
            Err(error) => Err(agent_failure(&codec.transforms, error).await),
        }
    }

    /// The single repair attempt: the repair instructions alone, on the same session.
    pub(crate) async fn repair(
        &self,
        codec: &Codec,
        lease: &mut Lease,
        rejection: Failure,
        model: &str,
        effort: Option<&str>,
        chunks: Option<Chunks>,
    ) -> Result<AgentReply, Failure> {
        let section = run_transform(&codec.transforms, rejection.message.len(), move |t| {
            t.repair(String::new(), rejection)
        })
        .await?;
        let section = section.trim_start();
        let section = section.strip_prefix("---").unwrap_or(section).trim_start();
        match self
            .prompt(
                lease,
                prompt_blocks(section.to_owned(), []),
                model,
                effort,
                chunks.as_ref().map(Chunks::sink),
            )
            .await
        {
            Ok(output) => Ok(AgentReply::of(output)),
            Err(error) => Err(agent_failure(&codec.transforms, error).await),
        }
    }

    /// Sends `text` on the lease's session, opening one when it has none, answered by `model`
    /// at `effort` (the session's model and effort are changed only when the conversation's
    /// model or effort changed). A session that holds messages and whose process died, or
    /// that cannot change its model (no model option: processes are then started per model),
    /// cannot take a continuation: `EarlyExit`, for the caller to replay. After any failure
    /// the session is dropped.
    async fn prompt(
        &self,
        lease: &mut Lease,
        blocks: Vec<v1::ContentBlock>,
        model: &str,
        effort: Option<&str>,
        chunks: Option<ChunkSink>,
    ) -> Result<TurnOutput, AcpError> {
        let held = lease.held;
        let ephemeral = matches!(lease.session, LeasedSession::Ephemeral { .. });
        let binding = lease.session.binding();
        if binding
            .as_ref()
            .is_some_and(|bound| !bound.agent.is_alive())
        {
            binding.take();
        }
        if binding.is_none() {
            if held > 0 {
                return Err(AcpError::EarlyExit);
            }
            *binding = Some(self.open(model).await?);
            // Counted when its session opens, so a request answered without an agent (a side
            // request the bridge answers itself) is no ephemeral turn.
            if ephemeral {
                self.stats.ephemeral.inc();
            }
        }
        let Some(bound) = binding.as_mut() else {
            return Err(AcpError::EarlyExit);
        };
        let applied = match bound.apply(model, effort).await {
            Ok(applied) => applied,
            Err(AcpError::NoModelOption) => {
                // Only the command line picks this agent's model: a session for this model
                // lives on a process started for it.
                self.processes.learn_no_model_option();
                binding.take();
                if held > 0 {
                    return Err(AcpError::EarlyExit);
                }
                let mut bound = self.open(model).await?;
                let applied = bound.apply(model, effort).await;
                *binding = Some(bound);
                match applied {
                    Ok(applied) => applied,
                    Err(error) => {
                        binding.take();
                        return Err(error);
                    }
                }
            }
            Err(error) => {
                binding.take();
                return Err(error);
            }
        };
        let Some(bound) = binding.as_ref() else {
            return Err(AcpError::EarlyExit);
        };
        self.stats.prompts.inc();
        self.stats
            .prompt_bytes
            .inc_by(u64::try_from(content_bytes(&blocks)).unwrap_or(u64::MAX));
        let outcome = bound
            .agent
            .prompt_observed(&bound.session, blocks, chunks)
            .await
            .map(|mut output| {
                output.model = applied.model;
                output.effort = applied.effort;
                output
            });
        match &outcome {
            Ok(output) => tracing::info!(
                pid = bound.agent.pid(),
                elapsed_ms = output.elapsed.as_millis() as u64,
                chars = output.text.len(),
                held,
                effort_applied = ?output.effort,
                "resident turn complete"
            ),
            Err(error) => {
                tracing::warn!(pid = bound.agent.pid(), code = error.code(), %error, "resident turn failed");
                binding.take();
            }
        }
        outcome
    }

    /// A new session for a conversation answered by `model`, on a process that can serve it.
    async fn open(&self, model: &str) -> Result<Bound, AcpError> {
        let slot = self.processes.reserve(model);
        let agent = self.processes.agent(&slot).await?;
        let created = agent.new_session(&self.home).await?;
        Ok(Bound::new(
            agent,
            created.session_id.0.to_string(),
            created.config_options.unwrap_or_default(),
            slot,
        ))
    }
}

/// What the serializer needs of `earlier`'s messages before `found`: none when the session,
/// holding `held` messages, does not hold them all or the marks do not cover them.
fn resume_state(earlier: &Earlier, found: &Continuation, held: u32) -> Option<Resume> {
    let before = found.messages;
    let last = before.checked_sub(1)?;
    if usize::try_from(held).ok()? < before || earlier.history.len() < before {
        return None;
    }
    let marks = earlier.marks.get(..before)?;
    Some(Resume {
        messages: u32::try_from(before).ok()?,
        history: earlier.history.get(last)?.clone(),
        trace_chars: marks.get(last)?.trace_chars,
        tool_uses: marks
            .iter()
            .flat_map(|mark| mark.tool_uses.iter().cloned())
            .collect(),
        tool_names: earlier.tool_names.clone(),
    })
}

/// Bytes of a prompt's text and image data.
fn content_bytes(blocks: &[v1::ContentBlock]) -> usize {
    blocks
        .iter()
        .map(|block| match block {
            v1::ContentBlock::Text(text) => text.text.len(),
            v1::ContentBlock::Image(image) => image.data.len(),
            _ => 0,
        })
        .sum()
}

/// [`serialize_unseen`] of the lease's request (shared with the call, not copied).
async fn serialize(
    codec: &Codec,
    body: &Arc<String>,
    held: u32,
    check: Check,
) -> Result<(UnseenPrompt, Option<String>), Failure> {
    serialize_unseen(codec, body.clone(), held, check).await
}
