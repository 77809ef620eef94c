//! One agent process spoken to in the Agent Client Protocol's own types: `initialize` at start,
//! then any number of sessions and prompts, for any mode. The mode decides which tools the
//! agent may run ([`ToolGate`]); everything else is fixed here and fails closed.
//!
//! - Every response id is checked (an answer to a request that was never sent is an error; a
//!   late answer to a request whose caller stopped waiting is dropped).
//! - Every session update must name the session it belongs to.
//! - Permission requests are answered `cancelled`, every other agent request `-32601`.
//! - A tool call the gate refuses, or any tool call outside a prompt, kills the process group at
//!   once.
//! - Malformed frames, output over the cap and an exit before the answer are each their own
//!   error.
//!
//! Unknown `session/update` variants (and the legacy flat `$/update` form) are tolerated.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use agent_client_protocol_schema::{v1, ProtocolVersion};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdout;

use super::frame::{self, FrameReader, Incoming};
use super::gate::{ToolCallSeen, ToolGate};
use super::AcpError;
use crate::devin::account::TurnAccount;
use crate::devin::login::ApiKey;
use crate::devin::{self, ClientIdentity};
pub use crate::process::Ended;
use crate::process::{Sandboxed, Spec};
use crate::transcript::{Direction, Recorder};

/// Bounds of one agent.
#[derive(Debug, Clone, Copy)]
pub struct AgentLimits {
    /// `initialize`, and each session request outside a prompt.
    pub init_timeout: Duration,
    /// One prompt, from the request to its answer.
    pub turn_timeout: Duration,
    /// Cap on the text collected in one prompt.
    pub output_cap: usize,
    /// After a prompt's answer, how long to keep reading for `_cognition.ai/agent_stopped`
    /// when it did not come before the answer. Zero for a caller that does not need the
    /// agent's account of the turn (the summarizer), so its answers are never delayed.
    pub stopped_wait: Duration,
}

impl AgentLimits {
    /// A single frame may carry at most the whole allowed output plus envelope overhead.
    pub(crate) fn max_line(&self) -> usize {
        self.output_cap.saturating_add(64 << 10)
    }
}

pub use crate::report::AgentStopped;

/// What one prompt produced.
#[derive(Debug, Clone)]
pub struct PromptOutcome {
    pub stop_reason: v1::StopReason,
    /// `agent_message_chunk` text appended after the prompt was sent.
    pub text: String,
    /// The prompt result's `usage` object exactly as reported (nothing filled in).
    pub usage: Option<Value>,
    /// `used` of the turn's last `usage_update` (tokens in the session's context).
    pub context_used: Option<u32>,
    /// What the agent reported about the turn beside its reply.
    pub account: TurnAccount,
    /// Permission requests answered `cancelled`.
    pub permission_requests: u32,
    /// The tools those requests were about (their labels, looked up from the earlier tool call
    /// when the request names only its id), at most [`MAX_PERMISSION_TOOLS`].
    pub permission_tools: Vec<String>,
    /// Tools the gate allowed, in order.
    pub tool_calls: Vec<ToolCallSeen>,
    pub elapsed: Duration,
}

impl PromptOutcome {
    /// The model the agent says ran the turn: `agent_stopped`'s label, else the `model`
    /// dimension of `turn_stats`, else of a `usage_update`.
    pub fn observed_model(&self) -> Option<String> {
        self.account.observed_model()
    }

    /// The turn's token counts in Anthropic's terms ([`devin::usage::of_turn`]).
    pub fn reported_usage(&self) -> Option<super::ReportedUsage> {
        devin::usage::of_turn(
            self.account.turn_sums,
            self.usage.as_ref(),
            self.context_used,
        )
    }
}

pub(super) use devin::notices::OUTPUT;
pub(super) use devin::stats::MAX_LABEL_CHARS;
/// Most tools of permission requests remembered in one prompt.
pub const MAX_PERMISSION_TOOLS: usize = 32;
/// `session/load`: the replay is over once the agent has been quiet this long after answering.
const REPLAY_QUIET: Duration = Duration::from_millis(300);
/// Tool calls allowed over the connection's life (each is remembered so its updates pass).
const MAX_TOOL_CALLS: usize = 10_000;
/// Longest id of a stray response quoted in its error (characters).
const MAX_ID_CHARS: usize = 64;

/// A spawned and initialized agent process.
pub struct AgentConnection {
    child: Sandboxed,
    frames: FrameReader<ChildStdout>,
    limits: AgentLimits,
    next_id: u64,
    /// Requests sent and not answered yet. A call that is still waiting removes its own id;
    /// ids left behind belong to calls whose caller stopped waiting (a timeout), and their
    /// late answers are dropped rather than taken for stray ones.
    unanswered: HashSet<u64>,
    /// Tool calls the gate allowed, by (session, toolCallId): their later updates pass.
    allowed: HashMap<(String, String), ToolCallSeen>,
    initialized: v1::InitializeResponse,
    /// The API key the agent's environment carries, for one headless sign-in.
    api_key: Option<ApiKey>,
    /// The agent was signed in headless by this connection (it had no stored login).
    signed_in: bool,
    /// The one headless sign-in was tried (whatever came of it).
    sign_in_tried: bool,
    /// Where every message both ways is also recorded (a trace), when set.
    recorder: Option<Recorder>,
}

impl AgentConnection {
    /// Spawns `spec` (own process group, identity and environment as the spec says) and
    /// completes `initialize` (protocol version 1 required, `client` as `clientInfo`) within
    /// `limits.init_timeout`.
    pub async fn start(
        spec: &Spec,
        limits: AgentLimits,
        client: &ClientIdentity,
    ) -> Result<Self, AcpError> {
        Self::start_recorded(spec, limits, client, None).await
    }

    /// [`AgentConnection::start`], with every message both ways (from `initialize` on) also
    /// given to `recorder`, which redacts it before keeping it (see [`crate::transcript`]).
    pub async fn start_recorded(
        spec: &Spec,
        limits: AgentLimits,
        client: &ClientIdentity,
        recorder: Option<Recorder>,
    ) -> Result<Self, AcpError> {
        let mut child = Sandboxed::spawn(spec).map_err(AcpError::Spawn)?;
        let Some(stdout) = child.take_stdout() else {
            let _ = child.shutdown().await;
            return Err(AcpError::EarlyExit);
        };
        let mut frames = FrameReader::new(stdout, limits.max_line());
        if let Some(recorder) = &recorder {
            frames.tap(recorder.clone());
        }
        let mut connection = AgentConnection {
            child,
            frames,
            recorder,
            limits,
            next_id: 0,
            unanswered: HashSet::new(),
            allowed: HashMap::new(),
            initialized: v1::InitializeResponse::new(ProtocolVersion::V1),
            api_key: devin::login::api_key(spec),
            signed_in: false,
            sign_in_tried: false,
        };
        let request = initialize_request(client);
        let result = match connection
            .request(limits.init_timeout, "initialize", request, &mut Phase::Idle)
            .await
        {
            Ok(result) => result,
            Err(error) => return Err(connection.fail(error).await),
        };
        match result.get("protocolVersion").and_then(Value::as_u64) {
            Some(1) => {}
            other => {
                let version = other.map_or_else(|| "none".to_owned(), |v| v.to_string());
                return Err(connection.fail(AcpError::ProtocolVersion(version)).await);
            }
        }
        match v1::InitializeResponse::deserialize(&result) {
            Ok(response) => connection.initialized = response,
            Err(error) => {
                tracing::debug!(%error, "unreadable initialize answer");
                return Err(connection.fail(AcpError::MalformedFrame).await);
            }
        }
        Ok(connection)
    }

    /// The agent's `initialize` answer.
    pub fn initialize_response(&self) -> &v1::InitializeResponse {
        &self.initialized
    }

    pub fn pid(&self) -> i32 {
        self.child.pid()
    }

    /// Whether the process is still running.
    pub fn is_alive(&mut self) -> bool {
        self.child.try_exited().is_none()
    }

    /// `session/new` in `cwd` with no MCP servers, within `limits.init_timeout` per request.
    /// An agent that answers that it is not logged in is signed in once, headless, when its
    /// API key reaches it (see [`devin::login`]), then asked again.
    pub async fn new_session(&mut self, cwd: &Path) -> Result<v1::NewSessionResponse, AcpError> {
        match self.new_session_once(cwd).await {
            Err(AcpError::Unauthenticated) if !self.sign_in_tried => {
                devin::login::log_variant(devin::login::LoggedOut::AtSessionNew, self.pid());
                self.sign_in().await?;
                self.new_session_once(cwd).await
            }
            other => other,
        }
    }

    /// One headless sign-in (see [`devin::login`]); not signed in when no key can be used.
    async fn sign_in(&mut self) -> Result<(), AcpError> {
        let params = devin::login::sign_in_params(
            Some(&self.initialized),
            self.api_key.as_ref(),
            self.pid(),
        )
        .ok_or(AcpError::Unauthenticated)?;
        // Tried once whatever its outcome: a second refusal is final.
        self.sign_in_tried = true;
        self.request(
            self.limits.init_timeout,
            "authenticate",
            params,
            &mut Phase::Idle,
        )
        .await?;
        self.signed_in = true;
        Ok(())
    }

    /// Whether this connection signed the agent in headless (it had no stored login).
    pub fn signed_in(&self) -> bool {
        self.signed_in
    }

    async fn new_session_once(&mut self, cwd: &Path) -> Result<v1::NewSessionResponse, AcpError> {
        let mut phase = Phase::Setup { seen: None };
        let result = self
            .request(
                self.limits.init_timeout,
                "session/new",
                v1::NewSessionRequest::new(cwd),
                &mut phase,
            )
            .await?;
        let response = typed::<v1::NewSessionResponse>(&result)?;
        if let Phase::Setup { seen: Some(seen) } = phase {
            if *seen != *response.session_id.0 {
                return Err(AcpError::WrongSession);
            }
        }
        Ok(response)
    }

    /// `session/load`. The history the agent replays as `session/update` before (and sometimes
    /// after) its answer is drained and ignored, tool calls included: the answer within
    /// `limits.init_timeout`, then until the agent has been quiet for a moment (at most another
    /// `limits.init_timeout`).
    pub async fn load_session(
        &mut self,
        session_id: &str,
        cwd: &Path,
    ) -> Result<v1::LoadSessionResponse, AcpError> {
        let mut phase = Phase::Replay(session_id);
        let result = self
            .request(
                self.limits.init_timeout,
                "session/load",
                v1::LoadSessionRequest::new(session_id.to_owned(), cwd),
                &mut phase,
            )
            .await?;
        let response = if result.is_null() {
            v1::LoadSessionResponse::new()
        } else {
            typed::<v1::LoadSessionResponse>(&result)?
        };
        let deadline = Instant::now() + self.limits.init_timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match tokio::time::timeout(left.min(REPLAY_QUIET), self.step(None, &mut phase)).await {
                Err(_quiet) => break,
                Ok(Ok(Step::Ended)) => return Err(AcpError::EarlyExit),
                Ok(Ok(_)) => {}
                Ok(Err(error)) => return Err(self.refused(error)),
            }
        }
        Ok(response)
    }

    /// Releases a session the host no longer needs, as the agent allows
    /// ([`devin::sessions::Release`]): `session/close`, else `session/delete`, else nothing.
    /// Within `limits.init_timeout`; a failure is only logged.
    pub async fn release_session(&mut self, session_id: &str) {
        let Some((method, params)) =
            devin::sessions::Release::of(&self.initialized).request(session_id)
        else {
            return;
        };
        let outcome = self
            .request(
                self.limits.init_timeout,
                method,
                params,
                &mut Phase::Session(session_id),
            )
            .await;
        if let Err(error) = outcome {
            tracing::debug!(
                pid = self.pid(),
                method,
                code = error.code(),
                "releasing a session failed"
            );
        }
    }

    /// `session/set_mode`, within `limits.init_timeout`.
    pub async fn set_mode(&mut self, session_id: &str, mode_id: &str) -> Result<(), AcpError> {
        self.request(
            self.limits.init_timeout,
            "session/set_mode",
            v1::SetSessionModeRequest::new(session_id.to_owned(), mode_id.to_owned()),
            &mut Phase::Session(session_id),
        )
        .await
        .map(drop)
    }

    /// `session/set_config_option` with a select value; the agent's full list of options after
    /// the change. Within `limits.init_timeout`.
    pub async fn set_config_option(
        &mut self,
        session_id: &str,
        config_id: &str,
        value: &str,
    ) -> Result<Vec<v1::SessionConfigOption>, AcpError> {
        let request = v1::SetSessionConfigOptionRequest::new(
            session_id.to_owned(),
            config_id.to_owned(),
            v1::SessionConfigOptionValue::value_id(value.to_owned()),
        );
        let result = self
            .request(
                self.limits.init_timeout,
                "session/set_config_option",
                request,
                &mut Phase::Session(session_id),
            )
            .await?;
        Ok(typed::<v1::SetSessionConfigOptionResponse>(&result)?.config_options)
    }

    /// `session/prompt`, answered within `limits.turn_timeout`. Every tool call is shown to
    /// `gate` (an update of a call it allowed already passes unless it changes the tool); a
    /// refusal kills the process group at once and fails the prompt with `gate.refusal`. After
    /// the answer, waits up to `limits.stopped_wait` for `_cognition.ai/agent_stopped` if it has
    /// not come yet. The agent's account of the turn (`agent_stopped`'s cause) decides its
    /// outcome before the stop reason does ([`devin::stopped::failure`]). A prompt refused
    /// because the agent is not signed in (newer CLIs accept `session/new` and refuse the
    /// prompt) is sent once more after one headless sign-in, when this connection has not
    /// signed in yet and an API key reaches the agent.
    pub async fn prompt(
        &mut self,
        session_id: &str,
        prompt: Vec<v1::ContentBlock>,
        gate: &dyn ToolGate,
    ) -> Result<PromptOutcome, AcpError> {
        self.prompt_observed(session_id, prompt, gate, None).await
    }

    /// [`AgentConnection::prompt`], with each chunk of the reply's text also sent to `chunks`
    /// as it arrives (see [`super::ChunkSink`]).
    pub async fn prompt_observed(
        &mut self,
        session_id: &str,
        prompt: Vec<v1::ContentBlock>,
        gate: &dyn ToolGate,
        chunks: Option<super::ChunkSink>,
    ) -> Result<PromptOutcome, AcpError> {
        let again = (self.api_key.is_some() && !self.sign_in_tried).then(|| prompt.clone());
        match self
            .prompt_once(session_id, prompt, gate, chunks.clone())
            .await
        {
            Err(AcpError::Unauthenticated) => {
                let Some(prompt) = again else {
                    return Err(AcpError::Unauthenticated);
                };
                devin::login::log_variant(devin::login::LoggedOut::AtPrompt, self.pid());
                self.sign_in().await?;
                self.prompt_once(session_id, prompt, gate, chunks).await
            }
            other => other,
        }
    }

    async fn prompt_once(
        &mut self,
        session_id: &str,
        prompt: Vec<v1::ContentBlock>,
        gate: &dyn ToolGate,
        chunks: Option<super::ChunkSink>,
    ) -> Result<PromptOutcome, AcpError> {
        let started = Instant::now();
        let mut turn = Turn::new(self.limits.output_cap);
        turn.chunks = chunks;
        let request = v1::PromptRequest::new(session_id.to_owned(), prompt);
        let result = {
            let mut phase = Phase::Prompt {
                session: session_id,
                turn: &mut turn,
                gate,
            };
            self.request(
                self.limits.turn_timeout,
                "session/prompt",
                request,
                &mut phase,
            )
            .await?
        };
        let stop_reason = stop_reason(&result)?;
        let usage = result
            .get("usage")
            .filter(|usage| !usage.is_null())
            .cloned();
        if turn.account.stopped.is_none() && !self.limits.stopped_wait.is_zero() {
            self.await_stopped(session_id, &mut turn, gate).await?;
        }
        if let Some(failure) = turn.account.failure() {
            return Err(failure);
        }
        Ok(PromptOutcome {
            stop_reason,
            text: turn.text,
            usage,
            context_used: turn.context_used,
            account: turn.account,
            permission_requests: turn.permission_requests,
            permission_tools: turn.permission_tools,
            tool_calls: turn.tool_calls,
            elapsed: started.elapsed(),
        })
    }

    /// Sends `session/cancel` (a notification; the running prompt answers `cancelled`).
    pub async fn cancel(&mut self, session_id: &str) -> Result<(), AcpError> {
        let cancel = v1::CancelNotification::new(session_id.to_owned());
        self.send(&frame::notification("session/cancel", &cancel)?)
            .await
    }

    /// Closes stdin and waits up to `grace` for the agent to exit, then SIGTERM to the group,
    /// the spec's kill grace, SIGKILL, reap. `killed` = it did not exit by itself: it needed
    /// SIGKILL, or it ended by a signal (SIGTERM, or [`AgentConnection::kill_now`] earlier). An
    /// agent that catches SIGTERM and exits with a status of its own counts as not killed.
    pub async fn close(self, grace: Duration) -> Ended {
        let mut ended = self.child.shutdown_after(grace).await;
        // `Sandboxed` counts only SIGKILL; a process that needed SIGTERM was signalled too.
        if ended.status.is_some_and(|status| {
            use std::os::unix::process::ExitStatusExt;
            status.signal().is_some()
        }) {
            ended.killed = true;
        }
        ended
    }

    /// SIGKILL to the whole process group, now.
    /// The JSON-RPC id the next request will carry (a job records its prompt's id).
    pub fn next_request_id(&self) -> u64 {
        self.next_id
    }

    pub fn kill_now(&mut self) {
        self.child.kill_now();
    }

    /// Reads frames after a prompt's answer until `agent_stopped` arrives, the agent ends its
    /// output, or the wait is over. The gate still applies.
    async fn await_stopped(
        &mut self,
        session_id: &str,
        turn: &mut Turn,
        gate: &dyn ToolGate,
    ) -> Result<(), AcpError> {
        let deadline = Instant::now() + self.limits.stopped_wait;
        while turn.account.stopped.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let mut phase = Phase::Prompt {
                session: session_id,
                turn: &mut *turn,
                gate,
            };
            match tokio::time::timeout(left, self.step(None, &mut phase)).await {
                Err(_) | Ok(Ok(Step::Ended)) => break,
                Ok(Ok(_)) => {}
                Ok(Err(error)) => return Err(self.refused(error)),
            }
        }
        Ok(())
    }

    /// Sends a request and processes frames until its answer, within `timeout`.
    async fn request(
        &mut self,
        timeout: Duration,
        method: &str,
        params: impl Serialize,
        phase: &mut Phase<'_>,
    ) -> Result<Value, AcpError> {
        let outcome = tokio::time::timeout(timeout, self.call(method, params, phase)).await;
        match outcome {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(self.refused(error)),
            Err(_) => Err(AcpError::Timeout(millis(timeout))),
        }
    }

    async fn call(
        &mut self,
        method: &str,
        params: impl Serialize,
        phase: &mut Phase<'_>,
    ) -> Result<Value, AcpError> {
        let id = self.next_id;
        let frame = frame::request(id, method, &params)?;
        self.next_id += 1;
        self.unanswered.insert(id);
        self.send(&frame).await?;
        loop {
            match self.step(Some(id), phase).await? {
                Step::Answered(outcome) => return outcome.map_err(rpc_error),
                Step::Other => {}
                Step::Ended => return Err(AcpError::EarlyExit),
            }
        }
    }

    /// Reads and handles one frame.
    async fn step(
        &mut self,
        awaited: Option<u64>,
        phase: &mut Phase<'_>,
    ) -> Result<Step, AcpError> {
        let Some(message) = self.frames.next().await? else {
            return Ok(Step::Ended);
        };
        match message {
            Incoming::Response { id, outcome } => match id.as_u64() {
                Some(got) if Some(got) == awaited => {
                    self.unanswered.remove(&got);
                    Ok(Step::Answered(outcome))
                }
                Some(got) if self.unanswered.remove(&got) => {
                    tracing::debug!(id = got, "late answer to an abandoned request dropped");
                    Ok(Step::Other)
                }
                _ => Err(AcpError::StrayResponse(
                    id.to_string().chars().take(MAX_ID_CHARS).collect(),
                )),
            },
            Incoming::Request { id, method, params } => {
                let answer = if method == "session/request_permission" {
                    // Never grant anything: the client owns every action.
                    let tool = permission_tool(&params, &self.allowed);
                    tracing::debug!(pid = self.pid(), %tool, "permission request answered cancelled");
                    if let Phase::Prompt { turn, .. } = phase {
                        turn.permission_requests = turn.permission_requests.saturating_add(1);
                        if turn.permission_tools.len() < MAX_PERMISSION_TOOLS {
                            turn.permission_tools.push(tool);
                        }
                    }
                    to_params(v1::RequestPermissionResponse::new(
                        v1::RequestPermissionOutcome::Cancelled,
                    ))
                    .map(Ok)?
                } else {
                    Err(to_params(v1::Error::method_not_found())?)
                };
                tracing::debug!(%method, "agent request refused");
                self.send(&frame::response(&id, answer)).await?;
                Ok(Step::Other)
            }
            Incoming::Notification { method, params } => {
                phase.notification(&method, &params, &mut self.allowed)?;
                Ok(Step::Other)
            }
        }
    }

    /// A tool refusal kills the process group before anything else happens.
    fn refused(&mut self, error: AcpError) -> AcpError {
        if error.is_tool_refusal() {
            self.child.kill_now();
        }
        error
    }

    async fn send(&mut self, bytes: &[u8]) -> Result<(), AcpError> {
        if let Some(recorder) = &self.recorder {
            recorder.record(Direction::ToAgent, bytes);
        }
        let stdin = self.child.stdin().ok_or(AcpError::EarlyExit)?;
        match stdin.write_all(bytes).await.and(stdin.flush().await) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                Err(AcpError::EarlyExit)
            }
            Err(error) => Err(AcpError::Io(error)),
        }
    }

    async fn fail(self, error: AcpError) -> AcpError {
        let ended = self.child.shutdown().await;
        tracing::warn!(code = error.code(), %error, exit = ?ended.status, stderr_tail = %ended.stderr_tail, "agent start failed");
        error
    }

    /// Ends the process in the background-friendly default way (pool drain, summarizer turns).
    pub(crate) async fn shutdown(self) -> Ended {
        self.child.shutdown().await
    }
}

enum Step {
    Answered(Result<Value, Value>),
    Other,
    Ended,
}

/// What is being waited for, which decides what a session update may be.
enum Phase<'a> {
    /// `initialize`: there is no session, so no update may come.
    Idle,
    /// `session/new`: the new session's id is not known until the answer; updates must all
    /// name one session, checked against the answer.
    Setup { seen: Option<String> },
    /// A request about `session` outside a prompt: its updates are tolerated.
    Session(&'a str),
    /// `session/load`: the replay of `session` is drained, tool calls included.
    Replay(&'a str),
    /// `session/prompt`: text is collected, tool calls go to the gate.
    Prompt {
        session: &'a str,
        turn: &'a mut Turn,
        gate: &'a dyn ToolGate,
    },
}

impl Phase<'_> {
    fn notification(
        &mut self,
        method: &str,
        params: &Value,
        allowed: &mut HashMap<(String, String), ToolCallSeen>,
    ) -> Result<(), AcpError> {
        match method {
            "session/update" | "$/update" => {
                let update = Update::parse(method, params)?;
                self.update(update, allowed)
            }
            method if TurnAccount::is_turn_notice(method) => {
                if let Phase::Prompt { session, turn, .. } = self {
                    // Another session's statistics are not this prompt's.
                    let other = params
                        .get("sessionId")
                        .is_some_and(|id| id.as_str() != Some(session));
                    if !other {
                        turn.account.note(method, params);
                    }
                }
                Ok(())
            }
            // Process-wide (its session id is empty): a debug line, whatever the phase.
            OUTPUT => {
                devin::notices::log_output(params);
                Ok(())
            }
            // Other vendor and unknown notifications are ignored, as ACP requires.
            _ => Ok(()),
        }
    }

    fn update(
        &mut self,
        update: Update,
        allowed: &mut HashMap<(String, String), ToolCallSeen>,
    ) -> Result<(), AcpError> {
        let expected = match self {
            Phase::Idle => return Err(AcpError::WrongSession),
            Phase::Setup { seen } => {
                let first = seen.get_or_insert_with(|| update.session_id.clone());
                if *first != update.session_id {
                    return Err(AcpError::WrongSession);
                }
                None
            }
            Phase::Session(session) | Phase::Replay(session) => Some(*session),
            Phase::Prompt { session, .. } => Some(*session),
        };
        if expected.is_some_and(|session| session != update.session_id) {
            return Err(AcpError::WrongSession);
        }
        match (self, update.kind) {
            (Phase::Replay(_), _) | (_, UpdateKind::Other) => Ok(()),
            (Phase::Prompt { turn, .. }, UpdateKind::Text(text)) => turn.append(&text),
            (Phase::Prompt { turn, .. }, UpdateKind::Display(text)) => {
                tracing::debug!(%text, "display-only message from the agent kept out of the reply");
                turn.account.note_display_chunk();
                Ok(())
            }
            (Phase::Prompt { turn, .. }, UpdateKind::Usage { used, model }) => {
                if used.is_some() {
                    turn.context_used = used;
                }
                turn.account.note_usage_model(model);
                Ok(())
            }
            (_, UpdateKind::Usage { .. } | UpdateKind::Display(_)) => Ok(()),
            (Phase::Prompt { turn, gate, .. }, UpdateKind::Tool(call)) => {
                check_tool(update.session_id, call, Some(*gate), allowed, Some(turn))
            }
            (_, UpdateKind::Text(_)) => Ok(()),
            (_, UpdateKind::Tool(call)) => check_tool(update.session_id, call, None, allowed, None),
        }
    }
}

/// Shows a tool call to the gate unless it is an update of one allowed already that leaves the
/// tool as it was. Without a gate (outside a prompt) no new tool may run.
fn check_tool(
    session: String,
    call: ToolCallSeen,
    gate: Option<&dyn ToolGate>,
    allowed: &mut HashMap<(String, String), ToolCallSeen>,
    turn: Option<&mut Turn>,
) -> Result<(), AcpError> {
    let key = (session, call.id.clone());
    let refusal = |call: &ToolCallSeen| match gate {
        Some(gate) => gate.refusal(call),
        None => AcpError::ToolRefused { tool: call.label() },
    };
    if let Some(known) = allowed.get_mut(&key) {
        if !known.merge(call) {
            return Ok(());
        }
        return match gate {
            Some(gate) if gate.allows(known) => Ok(()),
            _ => Err(refusal(known)),
        };
    }
    match (gate, turn) {
        (Some(gate), Some(turn)) if gate.allows(&call) => {
            if allowed.len() >= MAX_TOOL_CALLS {
                return Err(AcpError::OutputTooLarge(MAX_TOOL_CALLS));
            }
            turn.tool_calls.push(call.clone());
            allowed.insert(key, call);
            Ok(())
        }
        _ => Err(refusal(&call)),
    }
}

/// One session update, read with the schema types.
pub(super) struct Update {
    pub(super) session_id: String,
    pub(super) kind: UpdateKind,
}

pub(super) enum UpdateKind {
    Text(String),
    /// A display-only message chunk ([`devin::notices`]): never part of a reply. Its text is
    /// bounded and escaped, for a debug line.
    Display(String),
    Tool(ToolCallSeen),
    /// A `usage_update`: the tokens in the session's context, and the model its `_meta`
    /// names.
    Usage {
        used: Option<u32>,
        model: Option<String>,
    },
    Other,
}

impl Update {
    pub(super) fn parse(method: &str, params: &Value) -> Result<Self, AcpError> {
        let legacy;
        let params = if method == "$/update" {
            legacy = legacy_form(params);
            &legacy
        } else {
            params
        };
        let session_id = params
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or(AcpError::WrongSession)?
            .to_owned();
        let raw = params.get("update");
        if raw.is_some_and(devin::notices::is_display_chunk) {
            let text = raw.map(devin::notices::display_text).unwrap_or_default();
            return Ok(Update {
                session_id,
                kind: UpdateKind::Display(text),
            });
        }
        let kind = match v1::SessionNotification::deserialize(params) {
            Ok(notification) => match notification.update {
                v1::SessionUpdate::AgentMessageChunk(v1::ContentChunk {
                    content: v1::ContentBlock::Text(text),
                    ..
                }) => UpdateKind::Text(text.text),
                v1::SessionUpdate::ToolCall(call) => {
                    let kind_given = raw.is_some_and(|u| u.get("kind").is_some());
                    UpdateKind::Tool(ToolCallSeen::from_call(&call, kind_given))
                }
                v1::SessionUpdate::ToolCallUpdate(update) => {
                    UpdateKind::Tool(ToolCallSeen::from_update(&update))
                }
                _ => UpdateKind::Other,
            },
            // A variant this client does not know, or a known one it cannot read: tolerated,
            // except that a tool call is always a tool call (then the gate decides on what can
            // be read of it).
            Err(_) => match raw
                .and_then(|update| update.get("sessionUpdate"))
                .and_then(Value::as_str)
            {
                Some("tool_call" | "tool_call_update") => {
                    UpdateKind::Tool(ToolCallSeen::from_raw(raw))
                }
                _ => UpdateKind::Other,
            },
        };
        // `usage_update` is read from the raw update whether or not the schema types know it.
        let is_usage = raw
            .and_then(|update| update.get("sessionUpdate"))
            .and_then(Value::as_str)
            == Some("usage_update");
        let kind = match kind {
            UpdateKind::Other if is_usage => UpdateKind::Usage {
                used: raw.and_then(super::usage::context_used),
                model: raw
                    .and_then(|update| update.get("_meta"))
                    .and_then(devin::stats::usage_update_model),
            },
            kind => kind,
        };
        Ok(Update { session_id, kind })
    }
}

/// The legacy `$/update` params (`{sessionId, type, ...}`) in today's shape
/// (`{sessionId, update: {sessionUpdate, ...}}`).
fn legacy_form(params: &Value) -> Value {
    let Some(flat) = params.as_object() else {
        return Value::Null;
    };
    let mut update = serde_json::Map::new();
    let mut session_id = Value::Null;
    for (key, value) in flat {
        match key.as_str() {
            "sessionId" => session_id = value.clone(),
            "type" => {
                update.insert("sessionUpdate".to_owned(), value.clone());
            }
            _ => {
                update.insert(key.clone(), value.clone());
            }
        }
    }
    serde_json::json!({ "sessionId": session_id, "update": update })
}

/// What a prompt has gathered so far.
struct Turn {
    text: String,
    context_used: Option<u32>,
    output_cap: usize,
    account: TurnAccount,
    permission_requests: u32,
    permission_tools: Vec<String>,
    tool_calls: Vec<ToolCallSeen>,
    /// Where each accepted chunk of text also goes, when someone watches the turn.
    chunks: Option<super::ChunkSink>,
}

impl Turn {
    fn new(output_cap: usize) -> Self {
        Self {
            chunks: None,
            text: String::new(),
            context_used: None,
            output_cap,
            account: TurnAccount::default(),
            permission_requests: 0,
            permission_tools: Vec::new(),
            tool_calls: Vec::new(),
        }
    }

    fn append(&mut self, text: &str) -> Result<(), AcpError> {
        if self.text.len().saturating_add(text.len()) > self.output_cap {
            return Err(AcpError::OutputTooLarge(self.output_cap));
        }
        self.text.push_str(text);
        if let Some(chunks) = &self.chunks {
            // A watcher that went away (its request ended) changes nothing for the turn.
            let _ = chunks.send(text.to_owned());
        }
        Ok(())
    }
}

/// The tool a permission request is about, for logs and the caller: its `toolCall`'s name or
/// kind, else (the Devin CLI sends only `toolCallId`) the tool call of that id seen earlier in
/// the session.
fn permission_tool(params: &Value, seen: &HashMap<(String, String), ToolCallSeen>) -> String {
    let asked = ToolCallSeen::from_raw(params.get("toolCall"));
    if asked.tool_name().is_none() && asked.kind.is_none() {
        let session = params
            .get("sessionId")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Some(known) = seen.get(&(session.to_owned(), asked.id.clone())) {
            return known.label();
        }
    }
    asked.label()
}

/// The stop reason of a prompt's answer. One this client does not know is the agent stopping
/// for a reason of its own.
pub(super) fn stop_reason(result: &Value) -> Result<v1::StopReason, AcpError> {
    match v1::PromptResponse::deserialize(result) {
        Ok(response) => Ok(response.stop_reason),
        Err(_) => match result.get("stopReason").and_then(Value::as_str) {
            Some(other) => Err(AcpError::Stopped(
                other.chars().take(MAX_LABEL_CHARS).collect(),
            )),
            None => Err(AcpError::MalformedFrame),
        },
    }
}

/// An answer read as the schema type its method promises.
pub(super) fn typed<T: for<'de> Deserialize<'de>>(result: &Value) -> Result<T, AcpError> {
    T::deserialize(result).map_err(|error| {
        tracing::debug!(%error, "unreadable answer from the agent");
        AcpError::MalformedFrame
    })
}

pub(super) fn to_params(params: impl Serialize) -> Result<Value, AcpError> {
    serde_json::to_value(params).map_err(|_| AcpError::MalformedFrame)
}

/// A JSON-RPC error from the agent, classified in Devin's dialect ([`devin::errors`]).
pub(crate) fn rpc_error(error: Value) -> AcpError {
    devin::errors::classify(&error)
}

/// At most this many bytes of an agent's error message are kept.
pub use devin::errors::MAX_AGENT_MESSAGE_BYTES;

/// `initialize` as this client sends it: protocol 1, no client capabilities (the agent's own
/// tools only), `clientInfo` the configured identity.
pub(crate) fn initialize_request(client: &ClientIdentity) -> v1::InitializeRequest {
    v1::InitializeRequest::new(ProtocolVersion::V1)
        .client_capabilities(v1::ClientCapabilities::new())
        .client_info(v1::Implementation::new(
            client.name.clone(),
            client.version.clone(),
        ))
}

pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
