//! One tool-less agent process serving several sessions at once: the summarizer's resident
//! transport. A reader task owns the agent's stdout and routes every frame: an answer to the
//! request waiting for it, a session update to the prompt running on that session (text of a
//! session with no running prompt is dropped, so a reply can only land on its own session).
//!
//! The rules of [`super::AgentConnection`] hold here too, and every breach ends the process:
//! - any tool call, of any session, in a prompt or outside one, kills the process group at once
//!   (the summarizer may run no tool);
//! - a malformed frame, an update without a session, an answer to a request never sent, a
//!   line over the cap: the process is killed;
//! - permission requests are answered `cancelled`, every other agent request `-32601`.
//!
//! When the process ends, every request still waiting fails, and [`SharedAgent::death`] says
//! why, so a caller can tell the session that caused it from the ones that only shared it.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1;
use serde::Serialize;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::oneshot;

use super::connection::{
    initialize_request, millis, rpc_error, stop_reason, to_params, typed, Update, UpdateKind,
    OUTPUT,
};
use super::frame::{self, FrameReader, Incoming};
use super::{AcpError, AgentLimits, TurnOutput};
use crate::devin::account::TurnAccount;
use crate::devin::login::ApiKey;
use crate::devin::{self, ClientIdentity};
use crate::process::{Sandboxed, Spec};

/// Why a shared agent process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Death {
    /// A session's agent tried to run a tool; the process group was killed.
    ToolCall { session: String },
    /// The agent broke the protocol (the error's code); the process group was killed.
    Protocol(&'static str),
    /// The agent closed its output or exited.
    Exited,
    /// The host ended it (idle, shutdown, or a turn that would not finish).
    Closed,
}

/// A running agent shared by several sessions.
pub struct SharedAgent {
    pid: i32,
    limits: AgentLimits,
    child: Mutex<Option<Sandboxed>>,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    routes: Mutex<Routes>,
    next_id: AtomicU64,
    death: OnceLock<Death>,
    initialized: OnceLock<v1::InitializeResponse>,
    /// The API key the agent's environment carries, for one headless sign-in.
    api_key: Option<ApiKey>,
    /// The one headless sign-in of this process was tried.
    signed_in: std::sync::atomic::AtomicBool,
    /// This agent, for the background tasks its guards start.
    me: OnceLock<std::sync::Weak<SharedAgent>>,
    pub started: Instant,
}

/// Where incoming frames go.
#[derive(Default)]
struct Routes {
    /// Requests waiting for their answer.
    waiting: HashMap<u64, oneshot::Sender<Result<Value, Value>>>,
    /// Requests whose caller stopped waiting: their late answers are dropped.
    abandoned: HashSet<u64>,
    /// The running prompt of each session.
    prompts: HashMap<String, Collected>,
}

/// A request in flight: when its caller stops waiting, its answer becomes an expected late one.
struct Waiting<'a> {
    agent: &'a SharedAgent,
    id: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut routes = self.agent.lock_routes();
        if routes.waiting.remove(&self.id).is_some() {
            routes.abandoned.insert(self.id);
        }
    }
}

/// A prompt in flight on a session: when its caller stops waiting (a timeout or a client that
/// went away), its collector is removed and the agent is asked to cancel the turn.
struct Running<'a> {
    agent: &'a SharedAgent,
    session: &'a str,
    finished: bool,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.agent.lock_routes().prompts.remove(self.session);
        if self.finished || self.agent.death.get().is_some() {
            return;
        }
        if let (Ok(handle), Some(agent)) = (
            tokio::runtime::Handle::try_current(),
            self.agent.me.get().and_then(std::sync::Weak::upgrade),
        ) {
            let session = self.session.to_owned();
            handle.spawn(async move { agent.cancel(&session).await });
        }
    }
}

/// What a running prompt has gathered.
#[derive(Default)]
struct Collected {
    text: String,
    /// `used` of the turn's last `usage_update`.
    context_used: Option<u32>,
    over_cap: bool,
    /// What the agent reported about the turn beside its reply.
    account: TurnAccount,
    /// Where each accepted chunk of text also goes, when someone watches the turn.
    chunks: Option<super::ChunkSink>,
}

impl SharedAgent {
    /// Spawns `spec` and completes `initialize` (protocol version 1, `client` as
    /// `clientInfo`) within `limits.init_timeout`.
    pub async fn start(
        spec: &Spec,
        limits: AgentLimits,
        client: &ClientIdentity,
    ) -> Result<Arc<Self>, AcpError> {
        let mut child = Sandboxed::spawn(spec).map_err(AcpError::Spawn)?;
        let (Some(stdin), Some(stdout)) = (child.take_stdin(), child.take_stdout()) else {
            let _ = child.shutdown().await;
            return Err(AcpError::EarlyExit);
        };
        let agent = Arc::new(Self {
            pid: child.pid(),
            limits,
            child: Mutex::new(Some(child)),
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            routes: Mutex::new(Routes::default()),
            next_id: AtomicU64::new(0),
            death: OnceLock::new(),
            initialized: OnceLock::new(),
            api_key: devin::login::api_key(spec),
            signed_in: std::sync::atomic::AtomicBool::new(false),
            me: OnceLock::new(),
            started: Instant::now(),
        });
        let _ = agent.me.set(Arc::downgrade(&agent));
        tokio::spawn(read_frames(
            agent.clone(),
            FrameReader::new(stdout, limits.max_line()),
        ));
        let request = initialize_request(client);
        let answer = agent
            .request("initialize", request, limits.init_timeout)
            .await
            .and_then(
                |result| match result.get("protocolVersion").and_then(Value::as_u64) {
                    Some(1) => typed::<v1::InitializeResponse>(&result),
                    other => Err(AcpError::ProtocolVersion(
                        other.map_or_else(|| "none".to_owned(), |v| v.to_string()),
                    )),
                },
            );
        match answer {
            Ok(response) => {
                let _ = agent.initialized.set(response);
                Ok(agent)
            }
            Err(error) => {
                agent.end(Death::Closed);
                let ended = agent.close().await;
                tracing::warn!(code = error.code(), %error, exit = ?ended.map(|e| e.status), "agent start failed");
                Err(error)
            }
        }
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The agent's `initialize` answer.
    pub fn initialize_response(&self) -> Option<&v1::InitializeResponse> {
        self.initialized.get()
    }

    /// Why the process ended, once it has.
    pub fn death(&self) -> Option<&Death> {
        self.death.get()
    }

    pub fn is_alive(&self) -> bool {
        if self.death.get().is_some() {
            return false;
        }
        let exited = self
            .child
            .lock()
            .ok()
            .and_then(|mut child| child.as_mut().map(|child| child.try_exited().is_some()))
            .unwrap_or(true);
        !exited
    }

    /// `session/new` in `cwd` with no MCP servers, within `limits.init_timeout`: the session's
    /// id and config options. An agent that answers that it is not logged in is signed in
    /// once, headless, when its API key reaches it (see [`devin::login`]), then asked again.
    pub async fn new_session(&self, cwd: &Path) -> Result<v1::NewSessionResponse, AcpError> {
        match self.new_session_once(cwd).await {
            Err(AcpError::Unauthenticated) => {
                devin::login::log_variant(devin::login::LoggedOut::AtSessionNew, self.pid);
                self.sign_in().await?;
                self.new_session_once(cwd).await
            }
            other => other,
        }
    }

    /// The process's one headless sign-in (see [`devin::login`]); not signed in when it was
    /// tried already or no key can be used.
    async fn sign_in(&self) -> Result<(), AcpError> {
        if self.signed_in.swap(true, Ordering::AcqRel) {
            return Err(AcpError::Unauthenticated);
        }
        let params =
            devin::login::sign_in_params(self.initialized.get(), self.api_key.as_ref(), self.pid)
                .ok_or(AcpError::Unauthenticated)?;
        self.request("authenticate", params, self.limits.init_timeout)
            .await
            .map(drop)
    }

    async fn new_session_once(&self, cwd: &Path) -> Result<v1::NewSessionResponse, AcpError> {
        let result = self
            .request(
                "session/new",
                v1::NewSessionRequest::new(cwd),
                self.limits.init_timeout,
            )
            .await?;
        typed::<v1::NewSessionResponse>(&result)
    }

    /// `session/set_config_option` with a select value, within `limits.init_timeout`; the
    /// agent's full list of options after the change.
    pub async fn set_config_option(
        &self,
        session: &str,
        config_id: &str,
        value: &str,
    ) -> Result<Vec<v1::SessionConfigOption>, AcpError> {
        let request = v1::SetSessionConfigOptionRequest::new(
            session.to_owned(),
            config_id.to_owned(),
            v1::SessionConfigOptionValue::value_id(value.to_owned()),
        );
        let result = self
            .request(
                "session/set_config_option",
                request,
                self.limits.init_timeout,
            )
            .await?;
        Ok(typed::<v1::SetSessionConfigOptionResponse>(&result)?.config_options)
    }

    /// One prompt on `session`, answered within `limits.turn_timeout`. A turn that does not
    /// finish in time is cancelled and its late output dropped.
    pub async fn prompt(&self, session: &str, prompt: String) -> Result<TurnOutput, AcpError> {
        self.prompt_blocks(session, vec![v1::ContentBlock::from(prompt)])
            .await
    }

    /// [`SharedAgent::prompt`] with any content blocks (text and images). The agent's account
    /// of the turn (`agent_stopped`'s cause) decides its outcome before the stop reason does. A
    /// prompt refused because the agent is not signed in is sent once more after the process's
    /// one headless sign-in, when an API key reaches the agent.
    pub async fn prompt_blocks(
        &self,
        session: &str,
        blocks: Vec<v1::ContentBlock>,
    ) -> Result<TurnOutput, AcpError> {
        self.prompt_observed(session, blocks, None).await
    }

    /// [`SharedAgent::prompt_blocks`], with each chunk of the reply's text also sent to
    /// `chunks` as it arrives (see [`super::ChunkSink`]).
    pub async fn prompt_observed(
        &self,
        session: &str,
        blocks: Vec<v1::ContentBlock>,
        chunks: Option<super::ChunkSink>,
    ) -> Result<TurnOutput, AcpError> {
        let again = (self.api_key.is_some() && !self.signed_in.load(Ordering::Acquire))
            .then(|| blocks.clone());
        match self.prompt_once(session, blocks, chunks.clone()).await {
            Err(AcpError::Unauthenticated) => {
                let Some(blocks) = again else {
                    return Err(AcpError::Unauthenticated);
                };
                devin::login::log_variant(devin::login::LoggedOut::AtPrompt, self.pid);
                self.sign_in().await?;
                self.prompt_once(session, blocks, chunks).await
            }
            other => other,
        }
    }

    async fn prompt_once(
        &self,
        session: &str,
        blocks: Vec<v1::ContentBlock>,
        chunks: Option<super::ChunkSink>,
    ) -> Result<TurnOutput, AcpError> {
        let started = Instant::now();
        {
            let mut routes = self.lock_routes();
            if routes.prompts.contains_key(session) {
                // Turns on one session are single-flight: a caller broke that rule.
                return Err(AcpError::WrongSession);
            }
            routes.prompts.insert(
                session.to_owned(),
                Collected {
                    chunks,
                    ..Collected::default()
                },
            );
        }
        let mut running = Running {
            agent: self,
            session,
            finished: false,
        };
        let request = v1::PromptRequest::new(session.to_owned(), blocks);
        let answer = self
            .request("session/prompt", request, self.limits.turn_timeout)
            .await;
        // An answered turn (a result or the agent's error) has nothing left to cancel; one that
        // timed out is cancelled on drop.
        running.finished = !matches!(answer, Err(AcpError::Timeout(_)));
        let collected = self.lock_routes().prompts.remove(session);
        drop(running);
        let result = answer.map_err(|error| self.attribute(session, error))?;
        let collected = collected.unwrap_or_default();
        if collected.over_cap {
            return Err(AcpError::OutputTooLarge(self.limits.output_cap));
        }
        let stop = stop_reason(&result)?;
        if let Some(failure) = collected.account.failure() {
            return Err(failure);
        }
        match stop {
            v1::StopReason::EndTurn => Ok(TurnOutput {
                usage: devin::usage::of_turn(
                    collected.account.turn_sums,
                    result.get("usage").filter(|usage| !usage.is_null()),
                    collected.context_used,
                ),
                observed_model: collected.account.observed_model(),
                display_messages: collected.account.display_messages,
                compactions: collected.account.compactions,
                text: collected.text,
                // The caller applied the model on the session; it says how.
                model: super::ModelApplied::NotRequested,
                effort: super::EffortApplied::NotRequested,
                elapsed: started.elapsed(),
            }),
            other => Err(AcpError::Stopped(super::turn::stop_reason_name(other))),
        }
    }

    /// How the agent lets the host release a session it has forgotten.
    pub fn release(&self) -> devin::sessions::Release {
        self.initialized
            .get()
            .map_or(devin::sessions::Release::Keep, devin::sessions::Release::of)
    }

    /// Releases a session the host has forgotten, as the agent allows: `session/close`, else
    /// `session/delete` (the Devin CLI keeps every session on disk otherwise), else nothing.
    /// Errors are only logged.
    pub async fn release_session(&self, session: &str) {
        if self.death.get().is_some() {
            return;
        }
        let Some((method, params)) = self.release().request(session) else {
            return;
        };
        if let Err(error) = self.request(method, params, self.limits.init_timeout).await {
            tracing::debug!(
                pid = self.pid,
                method,
                code = error.code(),
                "releasing a session failed"
            );
        }
    }

    /// Sends `session/cancel` for `session` (a notification).
    pub async fn cancel(&self, session: &str) {
        let _ = self
            .notify(
                "session/cancel",
                v1::CancelNotification::new(session.to_owned()),
            )
            .await;
    }

    /// Kills the process group now and fails every waiting request.
    pub fn kill(&self) {
        self.end(Death::Closed);
    }

    /// Ends the process (close stdin, a moment to exit, SIGTERM, grace, SIGKILL, reap); `None`
    /// when it was closed already.
    pub async fn close(&self) -> Option<crate::process::Ended> {
        let _ = self.death.set(Death::Closed);
        self.stdin.lock().await.take();
        let child = self.child.lock().ok().and_then(|mut child| child.take())?;
        Some(child.shutdown().await)
    }

    /// A failure of a request as the caller should see it: when the process died under it,
    /// the death decides (a tool call of this session is this session's fault).
    fn attribute(&self, session: &str, error: AcpError) -> AcpError {
        if !matches!(error, AcpError::EarlyExit) {
            return error;
        }
        match self.death.get() {
            Some(Death::ToolCall { session: culprit }) if culprit == session => {
                AcpError::UnauthorizedTool
            }
            Some(Death::Protocol(code)) if *code == "wrong_session" => AcpError::WrongSession,
            Some(Death::Protocol(_)) => AcpError::MalformedFrame,
            _ => AcpError::EarlyExit,
        }
    }

    async fn request(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Duration,
    ) -> Result<Value, AcpError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let frame = frame::request(id, method, &params)?;
        drop(params);
        let (sender, receiver) = oneshot::channel();
        {
            let mut routes = self.lock_routes();
            if self.death.get().is_some() {
                return Err(AcpError::EarlyExit);
            }
            routes.waiting.insert(id, sender);
        }
        // Whatever ends this call early (a timeout, or the caller dropping it), a late answer
        // is then expected and dropped.
        let _waiting = Waiting { agent: self, id };
        self.send(&frame).await?;
        match tokio::time::timeout(timeout, receiver).await {
            Ok(Ok(outcome)) => outcome.map_err(rpc_error),
            Ok(Err(_closed)) => Err(AcpError::EarlyExit),
            Err(_elapsed) => Err(AcpError::Timeout(millis(timeout))),
        }
    }

    async fn notify(&self, method: &str, params: impl Serialize) -> Result<(), AcpError> {
        self.send(&frame::notification(method, &params)?).await
    }

    async fn send(&self, bytes: &[u8]) -> Result<(), AcpError> {
        let mut stdin = self.stdin.lock().await;
        let pipe = stdin.as_mut().ok_or(AcpError::EarlyExit)?;
        match pipe.write_all(bytes).await.and(pipe.flush().await) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                Err(AcpError::EarlyExit)
            }
            Err(error) => Err(AcpError::Io(error)),
        }
    }

    fn lock_routes(&self) -> std::sync::MutexGuard<'_, Routes> {
        // A poisoned lock only means a panic elsewhere; the routes stay consistent.
        self.routes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records why the process ended (the first reason wins), kills its group unless it
    /// exited by itself, and fails every waiting request.
    fn end(&self, death: Death) {
        let killed = death != Death::Exited;
        let _ = self.death.set(death);
        if killed {
            if let Ok(mut child) = self.child.lock() {
                if let Some(child) = child.as_mut() {
                    child.kill_now();
                }
            }
        }
        let mut routes = self.lock_routes();
        routes.waiting.clear();
        routes.prompts.clear();
    }

    /// Handles one frame; `Err` ends the process with that death.
    async fn handle(&self, incoming: Incoming) -> Result<(), Death> {
        match incoming {
            Incoming::Response { id, outcome } => {
                let mut routes = self.lock_routes();
                let waiting = id.as_u64().and_then(|got| routes.waiting.remove(&got));
                match waiting {
                    Some(sender) => {
                        let _ = sender.send(outcome);
                        Ok(())
                    }
                    None if id.as_u64().is_some_and(|got| routes.abandoned.remove(&got)) => Ok(()),
                    None => Err(Death::Protocol("stray_response")),
                }
            }
            Incoming::Request { id, method, .. } => {
                let answer = if method == "session/request_permission" {
                    // Never grant anything: the client owns every action.
                    to_params(v1::RequestPermissionResponse::new(
                        v1::RequestPermissionOutcome::Cancelled,
                    ))
                    .map(Ok)
                } else {
                    to_params(v1::Error::method_not_found()).map(Err)
                };
                tracing::debug!(%method, pid = self.pid, "agent request refused");
                match answer {
                    Ok(answer) => {
                        let _ = self.send(&frame::response(&id, answer)).await;
                        Ok(())
                    }
                    Err(_) => Err(Death::Protocol("malformed_frame")),
                }
            }
            Incoming::Notification { method, params } => self.notification(&method, &params),
        }
    }

    fn notification(&self, method: &str, params: &Value) -> Result<(), Death> {
        match method {
            "session/update" | "$/update" => {
                let update =
                    Update::parse(method, params).map_err(|_| Death::Protocol("wrong_session"))?;
                match update.kind {
                    UpdateKind::Tool(_) => Err(Death::ToolCall {
                        session: update.session_id,
                    }),
                    UpdateKind::Text(text) => {
                        let cap = self.limits.output_cap;
                        let mut routes = self.lock_routes();
                        if let Some(collected) = routes.prompts.get_mut(&update.session_id) {
                            if collected.text.len().saturating_add(text.len()) > cap {
                                collected.over_cap = true;
                            } else if !collected.over_cap {
                                collected.text.push_str(&text);
                                if let Some(chunks) = &collected.chunks {
                                    // A watcher that went away changes nothing for the turn.
                                    let _ = chunks.send(text);
                                }
                            }
                        }
                        Ok(())
                    }
                    UpdateKind::Display(text) => {
                        tracing::debug!(pid = self.pid, %text, "display-only message from the agent kept out of the reply");
                        if let Some(collected) =
                            self.lock_routes().prompts.get_mut(&update.session_id)
                        {
                            collected.account.note_display_chunk();
                        }
                        Ok(())
                    }
                    UpdateKind::Usage { used, model } => {
                        if let Some(collected) =
                            self.lock_routes().prompts.get_mut(&update.session_id)
                        {
                            if used.is_some() {
                                collected.context_used = used;
                            }
                            collected.account.note_usage_model(model);
                        }
                        Ok(())
                    }
                    UpdateKind::Other => Ok(()),
                }
            }
            method if TurnAccount::is_turn_notice(method) => {
                // Statistics that name no session belong to no prompt.
                let Some(session) = params.get("sessionId").and_then(Value::as_str) else {
                    return Ok(());
                };
                if let Some(collected) = self.lock_routes().prompts.get_mut(session) {
                    collected.account.note(method, params);
                }
                Ok(())
            }
            // Process-wide (its session id is empty): a debug line.
            OUTPUT => {
                devin::notices::log_output(params);
                Ok(())
            }
            // Other vendor and unknown notifications are ignored, as ACP requires.
            _ => Ok(()),
        }
    }
}

/// The reader task: routes frames until the agent ends its output or breaks a rule.
async fn read_frames(agent: Arc<SharedAgent>, mut frames: FrameReader<ChildStdout>) {
    let death = loop {
        let incoming = match frames.next().await {
            Ok(Some(incoming)) => incoming,
            Ok(None) => break Death::Exited,
            Err(error) => break Death::Protocol(error.code()),
        };
        if agent.death.get().is_some() {
            return;
        }
        if let Err(death) = agent.handle(incoming).await {
            break death;
        }
    };
    match &death {
        Death::Exited => tracing::debug!(pid = agent.pid, "shared agent ended its output"),
        Death::ToolCall { .. } => {
            tracing::warn!(
                pid = agent.pid,
                "the agent tried to run a tool; its process group was killed"
            );
        }
        other => {
            tracing::warn!(pid = agent.pid, death = ?other, "the agent broke the protocol; its process group was killed");
        }
    }
    agent.end(death);
}

#[cfg(test)]
mod tests;
