//! One ACP run of the full Devin agent (`devin acp`) for a job.
//!
//! initialize (with the policy's client identity), `session/new` (or `session/load` to
//! resume), the config options (the model; the effort as a thought level or as the model's
//! variant; speed only when the session offers it), the mode (`ask` for consult and review,
//! `bypass` for write), then one `session/prompt` carrying the brief. The session is kept
//! afterwards (never closed or deleted): a later job may resume it by id. Tools are checked against the mode's list; a
//! refused tool kills the agent's process group. Success needs `stopReason: end_turn` and an
//! `agent_stopped` with cause `complete`; everything else maps to a failure kind.
//!
//! `drive` runs those steps in that order, each a method of `SessionSetup`, then judges the
//! turn by its stop reason and the agent's stop cause.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1;

use super::failure::{FailureKind, JobFailure};
use super::jobs::{Delivery, RunMode};
use super::models::{self, ModelsError};
use super::preflight::Devin;
use devin_bridge_agent::acp::{
    AcpError, AgentConnection, AgentLimits, PromptOutcome, ToolCallSeen, ToolGate,
};
use devin_bridge_agent::devin::options::Select;
use devin_bridge_agent::devin::{self, ClientIdentity};
use devin_bridge_agent::process::{SpawnError, Spec};
use devin_bridge_engine::ResolvedModel;

/// Tools every mode may use.
pub(crate) const READ_TOOLS: [&str; 6] = [
    "read",
    "grep",
    "glob",
    "find_file_by_name",
    "notebook_read",
    "todo_write",
];
/// Tools only write mode adds.
pub(crate) const WRITE_TOOLS: [&str; 7] = [
    "edit",
    "write",
    "notebook_edit",
    "exec",
    "get_output",
    "kill_shell",
    "write_to_process",
];

/// The tool list of a mode as a gate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModeGate {
    pub write: bool,
}

impl ModeGate {
    pub(crate) fn for_mode(mode: RunMode) -> Self {
        Self {
            write: mode == RunMode::Write,
        }
    }

    pub(crate) fn allows_name(&self, name: &str) -> bool {
        READ_TOOLS.contains(&name) || (self.write && WRITE_TOOLS.contains(&name))
    }
}

impl ToolGate for ModeGate {
    fn allows(&self, call: &ToolCallSeen) -> bool {
        call.tool_name().is_some_and(|name| self.allows_name(&name))
    }
}

/// The ACP mode id of a run mode.
pub(crate) fn acp_mode(mode: RunMode) -> &'static str {
    match mode {
        RunMode::Write => "bypass",
        RunMode::Consult | RunMode::Review => "ask",
    }
}

/// What a run needs.
#[derive(Debug, Clone)]
pub(crate) struct RunRequest {
    pub mode: RunMode,
    pub workspace: PathBuf,
    pub brief: String,
    pub devin: Devin,
    pub env: Vec<(OsString, OsString)>,
    pub model: Option<ResolvedModel>,
    pub effort: Option<String>,
    /// A session to load instead of creating one.
    pub resume: Option<String>,
    pub timeout: Duration,
    pub exit_grace: Duration,
    pub output_cap: usize,
    /// The `clientInfo` given to the agent (the policy's `client_name`/`client_version`).
    pub client: ClientIdentity,
}

/// Facts learnt while the run progresses, for the record.
#[derive(Debug, Clone)]
pub(crate) enum Progress {
    Started { pid: i32 },
    Session { id: String },
    ModelSet { resolved: String },
    EffortSet { value: String },
}

/// The end of a run.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunResult {
    pub text: Option<String>,
    pub failure: Option<JobFailure>,
    pub session_id: Option<String>,
    pub observed_model: Option<String>,
    pub usage: Option<serde_json::Value>,
    pub stop_reason: Option<String>,
    pub stop_cause: Option<String>,
    pub delivery: Option<Delivery>,
    pub warnings: Vec<String>,
    pub effort_applied: Option<String>,
    /// The session's model (the selected one, or the account's default).
    pub session_model: Option<String>,
    /// The JSON-RPC id of the `session/prompt` request.
    pub request_id: Option<String>,
}

impl RunResult {
    fn failed(mut self, kind: FailureKind, message: impl AsRef<str>) -> Self {
        let model = self
            .observed_model
            .clone()
            .or_else(|| self.session_model.clone());
        self.failure = Some(JobFailure::new(kind, message).with_model(model.as_deref()));
        self.delivery.get_or_insert(Delivery::Failed);
        self
    }
}

/// The failure kind of an ACP error. The agent crate reads the Devin CLI's errors
/// (`cognition.ai/errorKind`, the JSON-RPC codes, the "out of date" refusal) into typed
/// variants; this only maps those.
pub(crate) fn classify(error: &AcpError) -> FailureKind {
    match error {
        AcpError::Spawn(SpawnError::Spawn { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            FailureKind::MissingCli
        }
        AcpError::Spawn(_) | AcpError::Io(_) => FailureKind::Process,
        AcpError::Unauthenticated => FailureKind::Auth,
        AcpError::QuotaExceeded { .. } => FailureKind::Quota,
        AcpError::ContentFiltered => FailureKind::Refused,
        AcpError::OutputTruncated | AcpError::TurnLimit => FailureKind::Resource,
        AcpError::RateLimited { .. } => FailureKind::RateLimited,
        AcpError::Network { .. } => FailureKind::Network,
        AcpError::ClientIdentityRefused | AcpError::NoModelOption => FailureKind::Setup,
        AcpError::SessionNotFound | AcpError::ModelNotOffered { .. } => FailureKind::Input,
        AcpError::Rpc { .. } => FailureKind::Error,
        AcpError::ToolRefused { .. } | AcpError::UnauthorizedTool => FailureKind::Policy,
        AcpError::OutputTooLarge(_) => FailureKind::Resource,
        AcpError::Timeout(_) => FailureKind::Timeout,
        AcpError::ProtocolVersion(_)
        | AcpError::MalformedFrame
        | AcpError::StrayResponse(_)
        | AcpError::WrongSession
        | AcpError::EarlyExit => FailureKind::Protocol,
        AcpError::Stopped(_) => FailureKind::Error,
        #[allow(unreachable_patterns)]
        _ => FailureKind::Error,
    }
}

/// The agent's own words, bounded, with control characters (terminal escapes, line breaks
/// that could forge output) replaced.
fn agent_words(message: &str) -> String {
    message
        .chars()
        .take(MAX_AGENT_MESSAGE_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// What a failure message may say about the run it ended.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Context<'a> {
    /// The identity the companion gave the agent (`None`: `devin -p`, which sends its own).
    pub client: Option<&'a ClientIdentity>,
    /// The session being resumed.
    pub resume: Option<&'a str>,
    /// The agent's private HOME (the companion's agent home).
    pub home: Option<&'a Path>,
}

impl<'a> Context<'a> {
    /// The agent HOME an environment gives the agent.
    pub(crate) fn home_of(env: &'a [(OsString, OsString)]) -> Option<&'a Path> {
        env.iter()
            .rev()
            .find(|(name, _)| name == "HOME")
            .map(|(_, value)| Path::new(value))
    }
}

/// The longest agent message quoted in a failure.
const MAX_AGENT_MESSAGE_CHARS: usize = 500;

/// How to log the companion's agent in, for an `auth` failure.
pub(crate) fn login_hint(home: Option<&Path>) -> String {
    let home = home.map_or_else(String::new, |home| format!(" ({})", home.display()));
    format!(
        "the Devin CLI is not logged in: run `devin auth login` once as yourself (the companion \
         links your credentials file into its agent home{home}), or let WINDSURF_API_KEY reach \
         the companion so that it signs its agent in"
    )
}

/// The failure kind and message of an ACP error.
pub(crate) fn failure_of(error: &AcpError, context: Context<'_>) -> (FailureKind, String) {
    let kind = classify(error);
    let message = match error {
        AcpError::ToolRefused { tool } => {
            format!("the agent called a tool outside this mode's list ({tool}); it was stopped")
        }
        AcpError::Unauthenticated => login_hint(context.home),
        AcpError::ClientIdentityRefused => match context.client {
            Some(client) => format!(
                "the Devin service refused the client identity {client} as out of date: set \
                 `client_name` and `client_version` in the [companion] section of the \
                 companion policy to an identity it accepts (default {}/{})",
                devin::identity::DEFAULT_CLIENT_NAME,
                devin::identity::DEFAULT_CLIENT_VERSION
            ),
            None => "the Devin service refused the Devin CLI as out of date (`devin -p` sends \
                     the CLI's own client identity): update the Devin CLI"
                .to_owned(),
        },
        AcpError::SessionNotFound => match context.resume {
            Some(id) => format!("session {id} is not known to the Devin CLI"),
            None => "the Devin CLI does not know the session".to_owned(),
        },
        AcpError::RateLimited {
            retry_after: Some(seconds),
            ..
        } => format!(
            "the agent's service is rate limiting this account; it asks to retry in {seconds} s"
        ),
        AcpError::ModelNotOffered { model, offered } => format!(
            "model {model} is not offered by this account's Devin sessions; they offer: {}",
            if offered.is_empty() {
                "none".to_owned()
            } else {
                offered.join(", ")
            }
        ),
        AcpError::QuotaExceeded {
            message: Some(said),
        } => format!("{error}: {}", agent_words(said)),
        AcpError::Rpc {
            code,
            message,
            kind,
            ..
        } => {
            let kind = kind
                .as_deref()
                .map_or_else(String::new, |kind| format!(" ({kind})"));
            let message = agent_words(message);
            if message.is_empty() {
                format!("the agent failed with JSON-RPC error {code}{kind}")
            } else {
                format!("the agent failed with JSON-RPC error {code}{kind}: {message}")
            }
        }
        other => other.to_string(),
    };
    (kind, message)
}

/// Runs one job's agent turn. `progress` is told what the record should learn as it happens.
pub(crate) async fn run(request: RunRequest, progress: &(dyn Fn(Progress) + Sync)) -> RunResult {
    let deadline = request.timeout;
    let started = Instant::now();
    let mut result = RunResult::default();
    let spec = Spec {
        program: request.devin.path.clone(),
        args: vec!["acp".to_owned()],
        cwd: request.workspace.clone(),
        env: request.env.clone(),
        stderr_tail_bytes: 16 << 10,
        kill_grace: Duration::from_secs(2),
        identity: None,
    };
    let limits = AgentLimits {
        init_timeout: deadline.min(Duration::from_secs(30)),
        turn_timeout: deadline,
        output_cap: request.output_cap,
        // Success needs the agent's own account of the turn: give it a moment after the answer.
        stopped_wait: Duration::from_secs(2),
    };
    let started_agent = AgentConnection::start(&spec, limits, &request.client);
    let mut connection = match tokio::time::timeout(deadline, started_agent).await {
        Err(_) => {
            return result.failed(
                FailureKind::Timeout,
                format!("the agent did not start within {} ms", deadline.as_millis()),
            )
        }
        Ok(Err(error)) => {
            let (kind, message) = acp_failure(&request, error);
            return result.failed(kind, message);
        }
        Ok(Ok(connection)) => connection,
    };
    tracing::info!(
        pid = connection.pid(),
        client = %request.client,
        default_client = request.client.is_default(),
        "the job's agent started"
    );
    progress(Progress::Started {
        pid: connection.pid(),
    });
    let remaining = || deadline.saturating_sub(started.elapsed());
    let turn = tokio::time::timeout(
        remaining(),
        drive(&mut connection, &request, &mut result, progress),
    )
    .await;
    match turn {
        Err(_) => {
            connection.kill_now();
            let _ = connection.close(Duration::ZERO).await;
            return result.failed(
                FailureKind::Timeout,
                format!("the run exceeded its {} ms budget", deadline.as_millis()),
            );
        }
        Ok(Err((kind, message))) => {
            let ended = connection.close(Duration::from_millis(200)).await;
            if kind == FailureKind::Protocol && !ended.stderr_tail.is_empty() {
                tracing::debug!(stderr = %ended.stderr_tail, "agent stderr");
            }
            return result.failed(kind, message);
        }
        Ok(Ok(())) => {}
    }
    // The answer is in; the agent gets the exit grace to leave on its own.
    let ended = connection.close(request.exit_grace).await;
    if ended.killed {
        result.delivery = Some(Delivery::LateClose);
        result.warnings.push("late_close".to_owned());
    } else if result.failure.is_none() {
        result.delivery = Some(Delivery::Complete);
    }
    result
}

/// A run's failure: its kind and the message for the record.
type Failure = (FailureKind, String);

/// Session setup and the prompt turn.
async fn drive(
    connection: &mut AgentConnection,
    request: &RunRequest,
    result: &mut RunResult,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(), Failure> {
    let mut session = SessionSetup::open(connection, request).await?;
    result.session_id = Some(session.id.clone());
    progress(Progress::Session {
        id: session.id.clone(),
    });
    let selected = session.select_model(result, progress).await?;
    let variant = session.apply_effort(selected, result, progress).await?;
    session.set_standard_speed().await;
    let outcome = session.prompt(result).await?;
    result.usage = outcome.usage.clone();
    result.observed_model = outcome.observed_model();
    result.stop_cause = outcome.account.stopped.as_ref().map(|s| s.cause.clone());
    result.stop_reason = Some(stop_reason_name(&outcome.stop_reason).to_owned());
    if let Some(warning) = session.model_mismatch(result.observed_model.as_deref(), variant) {
        result.warnings.push(warning);
    }
    result.text = Some(outcome.text.clone());
    stop_reason_verdict(&outcome)?;
    stop_cause_verdict(result.stop_cause.as_deref())
}

/// The job's session on a started agent, from its creation (or loading) to its prompt.
struct SessionSetup<'a> {
    connection: &'a mut AgentConnection,
    request: &'a RunRequest,
    id: String,
    /// The session's config options as last reported (each change answers with them all).
    options: Vec<v1::SessionConfigOption>,
}

impl<'a> SessionSetup<'a> {
    /// `session/load` of the session to resume, else `session/new`.
    async fn open(
        connection: &'a mut AgentConnection,
        request: &'a RunRequest,
    ) -> Result<Self, Failure> {
        let opened = match &request.resume {
            Some(id) => connection
                .load_session(id, &request.workspace)
                .await
                .map(|loaded| (id.clone(), loaded.config_options.unwrap_or_default())),
            None => connection
                .new_session(&request.workspace)
                .await
                .map(|created| {
                    (
                        created.session_id.0.to_string(),
                        created.config_options.unwrap_or_default(),
                    )
                }),
        };
        let (id, options) = opened.map_err(|error| acp_failure(request, error))?;
        Ok(Self {
            connection,
            request,
            id,
            options,
        })
    }

    fn acp(&self, error: AcpError) -> Failure {
        acp_failure(self.request, error)
    }

    /// Sets the model asked for (or reads the session's own): the model value the session
    /// runs, for the effort and the check of the model the agent reports.
    async fn select_model(
        &mut self,
        result: &mut RunResult,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Result<Option<String>, Failure> {
        let Some(resolved) = &self.request.model else {
            // No --model: the account's default (or a resumed session's own) model.
            let current = models::session_current_model(&self.options);
            if let Some(current) = &current {
                progress(Progress::ModelSet {
                    resolved: current.clone(),
                });
                result.session_model = Some(current.clone());
            }
            return Ok(current);
        };
        let chosen = models::session_model(&self.options, resolved).map_err(model_failure)?;
        if let Some(config_id) = &chosen.set {
            self.options = self
                .connection
                .set_config_option(&self.id, config_id, &chosen.value)
                .await
                .map_err(|error| self.acp(error))?;
        }
        progress(Progress::ModelSet {
            resolved: resolved.model_uid.clone(),
        });
        result.session_model = Some(resolved.model_uid.clone());
        Ok(Some(chosen.value))
    }

    /// Sets the effort asked for, as a thought level or as the model's variant; the variant
    /// chosen, if it was one.
    async fn apply_effort(
        &mut self,
        selected: Option<String>,
        result: &mut RunResult,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Result<Option<String>, Failure> {
        let Some(effort) = &self.request.effort else {
            return Ok(None);
        };
        let model = selected.unwrap_or_default();
        let Some(chosen) =
            models::session_effort(&self.options, &model, effort).map_err(model_failure)?
        else {
            return Ok(None);
        };
        self.options = self
            .connection
            .set_config_option(&self.id, &chosen.config_id, &chosen.value)
            .await
            .map_err(|error| self.acp(error))?;
        // A variant (`swe-2-high`) records the effort asked for; a thought level its value.
        let (applied, variant) = if chosen.variant {
            (effort.to_ascii_lowercase(), Some(chosen.value))
        } else {
            (chosen.value, None)
        };
        result.effort_applied = Some(applied.clone());
        progress(Progress::EffortSet { value: applied });
        Ok(variant)
    }

    /// Only a session that offers a speed option gets it set; a refusal costs nothing.
    async fn set_standard_speed(&mut self) {
        let Some((config_id, value)) = models::session_speed_standard(&self.options) else {
            return;
        };
        if let Err(error) = self
            .connection
            .set_config_option(&self.id, &config_id, &value)
            .await
        {
            tracing::debug!(
                code = error.code(),
                "the session's speed was left as it was"
            );
        }
    }

    /// Sets the mode and sends the brief through the mode's tool gate.
    async fn prompt(&mut self, result: &mut RunResult) -> Result<PromptOutcome, Failure> {
        self.connection
            .set_mode(&self.id, acp_mode(self.request.mode))
            .await
            .map_err(|error| self.acp(error))?;
        let gate = ModeGate::for_mode(self.request.mode);
        let prompt = vec![v1::ContentBlock::Text(v1::TextContent::new(
            self.request.brief.clone(),
        ))];
        // Recorded with the outcome, not as progress: one fewer synced write per job.
        result.request_id = Some(self.connection.next_request_id().to_string());
        self.connection
            .prompt(&self.id, prompt, &gate)
            .await
            .map_err(|error| self.acp(error))
    }

    /// A warning when the model the agent reports is neither the one selected nor the
    /// effort's variant of it.
    fn model_mismatch(&self, observed: Option<&str>, variant: Option<String>) -> Option<String> {
        let (resolved, observed) = (self.request.model.as_ref()?, observed?);
        let variant_name = variant.as_deref().and_then(|value| {
            Select::model(&self.options).and_then(|s| s.name_of(value).map(str::to_owned))
        });
        let served_variant = variant.as_deref().is_some_and(|value| {
            devin::stats::names_model(observed, value, variant_name.as_deref())
        });
        let served_selected =
            devin::stats::names_model(observed, &resolved.acp_id, Some(&resolved.label));
        (!served_variant && !served_selected).then(|| {
            format!(
                "model_mismatch: selected {}, served {observed}",
                resolved.label
            )
        })
    }
}

/// An ACP error of this run as a failure.
fn acp_failure(request: &RunRequest, error: AcpError) -> Failure {
    let context = Context {
        client: Some(&request.client),
        resume: request.resume.as_deref(),
        home: Context::home_of(&request.env),
    };
    failure_of(&error, context)
}

/// A model or effort the session cannot run as a failure.
fn model_failure(error: ModelsError) -> Failure {
    match error {
        ModelsError::Input(message) => (FailureKind::Input, message),
        ModelsError::Setup(message) => (FailureKind::Setup, message),
        other => (FailureKind::Error, other.to_string()),
    }
}

/// Only `end_turn` ends a turn well; every other stop reason is the run's failure.
fn stop_reason_verdict(outcome: &PromptOutcome) -> Result<(), Failure> {
    let stop_reason = stop_reason_name(&outcome.stop_reason);
    match outcome.stop_reason {
        v1::StopReason::EndTurn => Ok(()),
        v1::StopReason::Refusal => {
            Err((FailureKind::Refused, "the agent refused the request".into()))
        }
        v1::StopReason::MaxTokens | v1::StopReason::MaxTurnRequests => Err((
            FailureKind::Resource,
            format!("the agent stopped at a limit ({stop_reason})"),
        )),
        v1::StopReason::Cancelled if outcome.permission_requests > 0 => {
            let mut tools = outcome.permission_tools.clone();
            tools.dedup();
            Err((
                FailureKind::Permission,
                format!(
                    "the agent asked for a permission the companion does not grant ({}); the turn was cancelled",
                    tools.join(", ")
                ),
            ))
        }
        v1::StopReason::Cancelled => Err((
            FailureKind::Cancelled,
            "the agent cancelled the turn".into(),
        )),
        #[allow(unreachable_patterns)]
        _ => Err((
            FailureKind::Protocol,
            format!("unknown stop reason {stop_reason}"),
        )),
    }
}

/// After `end_turn`, success needs the agent's own account that the turn completed.
fn stop_cause_verdict(cause: Option<&str>) -> Result<(), Failure> {
    match cause {
        Some("complete") => Ok(()),
        Some(cause) => Err((
            FailureKind::Error,
            format!("the agent stopped with cause {cause}"),
        )),
        None => Err((
            FailureKind::Error,
            "the agent ended the turn without reporting that it completed".into(),
        )),
    }
}

/// The wire name of a stop reason.
pub(crate) fn stop_reason_name(reason: &v1::StopReason) -> &'static str {
    match reason {
        v1::StopReason::EndTurn => "end_turn",
        v1::StopReason::MaxTokens => "max_tokens",
        v1::StopReason::MaxTurnRequests => "max_turn_requests",
        v1::StopReason::Refusal => "refusal",
        v1::StopReason::Cancelled => "cancelled",
        #[allow(unreachable_patterns)]
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: Option<&str>, kind: Option<v1::ToolKind>) -> ToolCallSeen {
        ToolCallSeen {
            id: "c1".into(),
            name: name.map(str::to_owned),
            kind,
            title: "t".into(),
        }
    }

    #[test]
    fn consult_allows_reading_and_refuses_writing_and_unknown_tools() {
        let gate = ModeGate::for_mode(RunMode::Consult);
        assert!(gate.allows(&call(Some("grep"), None)));
        assert!(gate.allows(&call(None, Some(v1::ToolKind::Read))));
        assert!(!gate.allows(&call(Some("write"), None)));
        assert!(!gate.allows(&call(None, Some(v1::ToolKind::Execute))));
        assert!(!gate.allows(&call(None, Some(v1::ToolKind::Fetch))));
        assert!(!gate.allows(&call(None, None)));
        let review = ModeGate::for_mode(RunMode::Review);
        assert!(!review.allows(&call(Some("edit"), None)));
    }

    #[test]
    fn write_mode_adds_the_editing_tools_only() {
        let gate = ModeGate::for_mode(RunMode::Write);
        for tool in WRITE_TOOLS {
            assert!(gate.allows(&call(Some(tool), None)), "{tool}");
        }
        assert!(!gate.allows(&call(Some("web_fetch"), None)));
        assert!(!gate.allows(&call(None, Some(v1::ToolKind::Delete))));
    }

    #[test]
    fn modes_map_to_acp_modes() {
        assert_eq!(acp_mode(RunMode::Consult), "ask");
        assert_eq!(acp_mode(RunMode::Review), "ask");
        assert_eq!(acp_mode(RunMode::Write), "bypass");
    }

    #[test]
    fn typed_agent_errors_map_to_failure_kinds() {
        let cases = [
            (
                AcpError::RateLimited {
                    retryable: true,
                    retry_after: Some(30),
                },
                FailureKind::RateLimited,
            ),
            (
                AcpError::RateLimited {
                    retryable: false,
                    retry_after: None,
                },
                FailureKind::RateLimited,
            ),
            (
                AcpError::QuotaExceeded { message: None },
                FailureKind::Quota,
            ),
            (
                AcpError::Network {
                    retryable: true,
                    retry_after: None,
                },
                FailureKind::Network,
            ),
            (AcpError::ContentFiltered, FailureKind::Refused),
            (AcpError::OutputTruncated, FailureKind::Resource),
            (AcpError::TurnLimit, FailureKind::Resource),
            (AcpError::Unauthenticated, FailureKind::Auth),
            (AcpError::ClientIdentityRefused, FailureKind::Setup),
            (AcpError::NoModelOption, FailureKind::Setup),
            (AcpError::SessionNotFound, FailureKind::Input),
            (
                AcpError::ModelNotOffered {
                    model: "adaptive".into(),
                    offered: vec!["swe-2".into()],
                },
                FailureKind::Input,
            ),
            (AcpError::MalformedFrame, FailureKind::Protocol),
            (
                AcpError::ToolRefused { tool: "x".into() },
                FailureKind::Policy,
            ),
        ];
        for (error, kind) in cases {
            assert_eq!(classify(&error), kind, "{error:?}");
            assert_eq!(failure_of(&error, Context::default()).0, kind, "{error:?}");
        }
    }

    #[test]
    fn other_agent_errors_are_errors_that_keep_their_kind_and_message() {
        let rpc = |code, kind: Option<&str>| AcpError::Rpc {
            code,
            message: "Something broke".into(),
            kind: kind.map(str::to_owned),
            retryable: false,
            retry_after: None,
        };
        // Whatever the error kind says, the agent crate decided it is none of the typed ones.
        for kind in [None, Some("internal"), Some("RateLimited")] {
            assert_eq!(classify(&rpc(-32603, kind)), FailureKind::Error);
        }
        let (kind, message) = failure_of(&rpc(-32603, Some("internal")), Context::default());
        assert_eq!(kind, FailureKind::Error);
        assert_eq!(
            message,
            "the agent failed with JSON-RPC error -32603 (internal): Something broke"
        );
        let (_, message) = failure_of(&rpc(-32603, None), Context::default());
        assert_eq!(
            message,
            "the agent failed with JSON-RPC error -32603: Something broke"
        );
        let long = AcpError::Rpc {
            code: 1,
            message: "x".repeat(10_000),
            kind: None,
            retryable: false,
            retry_after: None,
        };
        assert!(failure_of(&long, Context::default()).1.len() < 600);
        let escapes = AcpError::Rpc {
            code: 1,
            message: "bad\u{1b}[2J\nforged: line".into(),
            kind: None,
            retryable: false,
            retry_after: None,
        };
        let (_, message) = failure_of(&escapes, Context::default());
        assert!(!message.chars().any(char::is_control), "{message:?}");
        assert!(message.ends_with("bad [2J forged: line"), "{message:?}");
    }

    #[test]
    fn messages_say_what_to_do() {
        let client = ClientIdentity::new("acpx", "0.1.0").expect("identity");
        let home = PathBuf::from("/data/home");
        let context = Context {
            client: Some(&client),
            resume: Some("s-42"),
            home: Some(&home),
        };
        let (kind, message) = failure_of(&AcpError::ClientIdentityRefused, context);
        assert_eq!(kind, FailureKind::Setup);
        assert!(message.contains("acpx/0.1.0"), "{message}");
        assert!(message.contains("`client_name`"), "{message}");
        assert!(message.contains("`client_version`"), "{message}");
        assert!(message.contains("companion policy"), "{message}");
        let (_, message) = failure_of(&AcpError::SessionNotFound, context);
        assert_eq!(message, "session s-42 is not known to the Devin CLI");
        let (_, message) = failure_of(&AcpError::Unauthenticated, context);
        assert!(message.contains("devin auth login"), "{message}");
        assert!(message.contains("/data/home"), "{message}");
        let offered = AcpError::ModelNotOffered {
            model: "adaptive".into(),
            offered: vec!["swe-2".into(), "glm-5-2".into()],
        };
        let (_, message) = failure_of(&offered, context);
        assert!(
            message.contains("adaptive") && message.contains("swe-2, glm-5-2"),
            "{message}"
        );
        let (kind, message) = failure_of(&AcpError::QuotaExceeded { message: None }, context);
        assert_eq!(kind, FailureKind::Quota);
        assert!(message.contains("credits"), "{message}");
        // A quota that ended the turn carries the service's own words, cleaned.
        let said = AcpError::QuotaExceeded {
            message: Some("Your daily usage quota has been exhausted.\u{1b}[2J".into()),
        };
        let (kind, message) = failure_of(&said, context);
        assert_eq!(kind, FailureKind::Quota);
        assert!(message.contains("daily usage quota"), "{message}");
        assert!(!message.chars().any(char::is_control), "{message:?}");
        let (kind, message) = failure_of(&AcpError::ContentFiltered, context);
        assert_eq!(kind, FailureKind::Refused);
        assert!(message.contains("content filter"), "{message}");
    }

    fn outcome(stop_reason: v1::StopReason, permission_tools: &[&str]) -> PromptOutcome {
        PromptOutcome {
            stop_reason,
            text: String::new(),
            usage: None,
            context_used: None,
            account: devin::account::TurnAccount::default(),
            permission_requests: u32::try_from(permission_tools.len()).expect("few"),
            permission_tools: permission_tools.iter().map(|t| (*t).to_owned()).collect(),
            tool_calls: Vec::new(),
            elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn only_an_end_turn_the_agent_reports_complete_succeeds() {
        assert!(stop_reason_verdict(&outcome(v1::StopReason::EndTurn, &[])).is_ok());
        let kind =
            |reason, tools: &[&str]| stop_reason_verdict(&outcome(reason, tools)).map_err(|f| f.0);
        assert_eq!(
            kind(v1::StopReason::Refusal, &[]),
            Err(FailureKind::Refused)
        );
        assert_eq!(
            kind(v1::StopReason::MaxTokens, &[]),
            Err(FailureKind::Resource)
        );
        assert_eq!(
            kind(v1::StopReason::MaxTurnRequests, &[]),
            Err(FailureKind::Resource)
        );
        assert_eq!(
            kind(v1::StopReason::Cancelled, &[]),
            Err(FailureKind::Cancelled)
        );
        let asked = stop_reason_verdict(&outcome(
            v1::StopReason::Cancelled,
            &["exec", "exec", "web"],
        ))
        .expect_err("a permission was asked");
        assert_eq!(asked.0, FailureKind::Permission);
        assert!(asked.1.contains("(exec, web)"), "{}", asked.1);
        assert!(stop_cause_verdict(Some("complete")).is_ok());
        let stopped = stop_cause_verdict(Some("max_turns")).expect_err("not complete");
        assert_eq!(
            stopped,
            (
                FailureKind::Error,
                "the agent stopped with cause max_turns".to_owned()
            )
        );
        assert_eq!(
            stop_cause_verdict(None).map_err(|f| f.0),
            Err(FailureKind::Error)
        );
    }

    #[test]
    fn the_agent_home_comes_from_the_agents_environment() {
        let env: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), "/bin".into()),
            ("HOME".into(), "/data/home".into()),
        ];
        assert_eq!(Context::home_of(&env), Some(Path::new("/data/home")));
        assert_eq!(Context::home_of(&[]), None);
    }
}
