//! One ACP run of the full Devin agent (`devin acp`) for a job.
//!
//! initialize, `session/new` (or `session/load` to resume), the config options (model,
//! thought level, speed), the mode (`ask` for consult and review, `bypass` for write), then
//! one `session/prompt` carrying the brief. Tools are checked against the mode's list; a
//! refused tool kills the agent's process group. Success needs `stopReason: end_turn` and an
//! `agent_stopped` with cause `complete`; everything else maps to a failure kind.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1;

use super::failure::{FailureKind, JobFailure};
use super::jobs::{Delivery, RunMode};
use super::models::{self, ModelsError};
use super::preflight::Devin;
use devin_bridge_agent::acp::{AcpError, AgentConnection, AgentLimits, ToolCallSeen, ToolGate};
use devin_bridge_agent::process::{SpawnError, Spec};
use devin_bridge_engine::ResolvedModel;

/// Tools every mode may use.
pub const READ_TOOLS: [&str; 6] = [
    "read",
    "grep",
    "glob",
    "find_file_by_name",
    "notebook_read",
    "todo_write",
];
/// Tools only write mode adds.
pub const WRITE_TOOLS: [&str; 7] = [
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
pub struct ModeGate {
    pub write: bool,
}

impl ModeGate {
    pub fn for_mode(mode: RunMode) -> Self {
        Self {
            write: mode == RunMode::Write,
        }
    }

    pub fn allows_name(&self, name: &str) -> bool {
        READ_TOOLS.contains(&name) || (self.write && WRITE_TOOLS.contains(&name))
    }
}

impl ToolGate for ModeGate {
    fn allows(&self, call: &ToolCallSeen) -> bool {
        call.tool_name().is_some_and(|name| self.allows_name(&name))
    }
}

/// The ACP mode id of a run mode.
pub fn acp_mode(mode: RunMode) -> &'static str {
    match mode {
        RunMode::Write => "bypass",
        RunMode::Consult | RunMode::Review => "ask",
    }
}

/// What a run needs.
#[derive(Debug, Clone)]
pub struct RunRequest {
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
}

/// Facts learnt while the run progresses, for the record.
#[derive(Debug, Clone)]
pub enum Progress {
    Started { pid: i32 },
    Session { id: String },
    ModelSet { resolved: String },
    EffortSet { value: String },
}

/// The end of a run.
#[derive(Debug, Clone, Default)]
pub struct RunResult {
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

/// The failure kind of an ACP error.
pub fn classify(error: &AcpError) -> FailureKind {
    match error {
        AcpError::Spawn(SpawnError::Spawn { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            FailureKind::MissingCli
        }
        AcpError::Spawn(_) | AcpError::Io(_) => FailureKind::Process,
        AcpError::Unauthenticated => FailureKind::Auth,
        AcpError::QuotaExceeded => FailureKind::Quota,
        AcpError::RateLimited => FailureKind::RateLimited,
        AcpError::Network => FailureKind::Network,
        AcpError::Rpc { code, kind, .. } => match kind.as_deref() {
            Some("Unauthenticated") => FailureKind::Auth,
            Some("QuotaExceeded") => FailureKind::Quota,
            Some("RateLimited") => FailureKind::RateLimited,
            Some("ServerError" | "NetworkError") => FailureKind::Network,
            _ if *code == -32000 => FailureKind::Auth,
            _ => FailureKind::Error,
        },
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

fn describe(error: &AcpError) -> String {
    match error {
        AcpError::ToolRefused { tool } => {
            format!("the agent called a tool outside this mode's list ({tool}); it was stopped")
        }
        other => other.to_string(),
    }
}

/// Runs one job's agent turn. `progress` is told what the record should learn as it happens.
pub async fn run(request: RunRequest, progress: &(dyn Fn(Progress) + Sync)) -> RunResult {
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
    let mut connection =
        match tokio::time::timeout(deadline, AgentConnection::start(&spec, limits)).await {
            Err(_) => {
                return result.failed(
                    FailureKind::Timeout,
                    format!("the agent did not start within {} ms", deadline.as_millis()),
                )
            }
            Ok(Err(error)) => return result.failed(classify(&error), describe(&error)),
            Ok(Ok(connection)) => connection,
        };
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

/// Session setup and the prompt turn. Failures come back as (kind, message).
async fn drive(
    connection: &mut AgentConnection,
    request: &RunRequest,
    result: &mut RunResult,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(), (FailureKind, String)> {
    let acp = |error: AcpError| (classify(&error), describe(&error));
    let (session_id, mut options) = match &request.resume {
        Some(id) => {
            let loaded = connection
                .load_session(id, &request.workspace)
                .await
                .map_err(|error| match &error {
                    AcpError::Rpc { code: -32002, .. } => (
                        FailureKind::Input,
                        format!("session {id} is not known to the Devin CLI"),
                    ),
                    _ => acp(error),
                })?;
            (id.clone(), loaded.config_options.unwrap_or_default())
        }
        None => {
            let created = connection
                .new_session(&request.workspace)
                .await
                .map_err(acp)?;
            (
                created.session_id.0.to_string(),
                created.config_options.unwrap_or_default(),
            )
        }
    };
    result.session_id = Some(session_id.clone());
    progress(Progress::Session {
        id: session_id.clone(),
    });
    let model_error = |error: ModelsError| match error {
        ModelsError::Input(message) => (FailureKind::Input, message),
        ModelsError::Setup(message) => (FailureKind::Setup, message),
        other => (FailureKind::Error, other.to_string()),
    };
    if let Some(resolved) = &request.model {
        let (config_id, value) =
            models::session_model_value(&options, resolved).map_err(model_error)?;
        options = connection
            .set_config_option(&session_id, &config_id, &value)
            .await
            .map_err(acp)?;
        progress(Progress::ModelSet {
            resolved: resolved.model_uid.clone(),
        });
        result.session_model = Some(resolved.model_uid.clone());
    } else if let Some(current) = models::session_current_model(&options) {
        // No --model: the account's default (or a resumed session's own) model.
        progress(Progress::ModelSet {
            resolved: current.clone(),
        });
        result.session_model = Some(current);
    }
    if let Some(effort) = &request.effort {
        if let Some((config_id, value)) =
            models::session_effort_value(&options, effort).map_err(model_error)?
        {
            options = connection
                .set_config_option(&session_id, &config_id, &value)
                .await
                .map_err(acp)?;
            result.effort_applied = Some(value.clone());
            progress(Progress::EffortSet { value });
        }
    }
    if let Some((config_id, value)) = models::session_speed_standard(&options) {
        connection
            .set_config_option(&session_id, &config_id, &value)
            .await
            .map_err(acp)?;
    }
    connection
        .set_mode(&session_id, acp_mode(request.mode))
        .await
        .map_err(acp)?;
    let gate = ModeGate::for_mode(request.mode);
    let prompt = vec![v1::ContentBlock::Text(v1::TextContent::new(
        request.brief.clone(),
    ))];
    // Recorded with the outcome, not as progress: one fewer synced write per job.
    result.request_id = Some(connection.next_request_id().to_string());
    let outcome = connection
        .prompt(&session_id, prompt, &gate)
        .await
        .map_err(acp)?;
    result.usage = outcome.usage.clone();
    result.observed_model = outcome
        .stopped
        .as_ref()
        .and_then(|stopped| stopped.model_label.clone())
        .or_else(|| outcome.turn_stats_model.clone());
    result.stop_cause = outcome.stopped.as_ref().map(|s| s.cause.clone());
    let stop_reason = stop_reason_name(&outcome.stop_reason);
    result.stop_reason = Some(stop_reason.to_owned());
    if let (Some(resolved), Some(observed)) = (&request.model, &result.observed_model) {
        if !labels_match(&resolved.label, observed) {
            result.warnings.push(format!(
                "model_mismatch: selected {}, served {observed}",
                resolved.label
            ));
        }
    }
    result.text = Some(outcome.text.clone());
    match outcome.stop_reason {
        v1::StopReason::EndTurn => {}
        v1::StopReason::Refusal => {
            return Err((FailureKind::Refused, "the agent refused the request".into()))
        }
        v1::StopReason::MaxTokens | v1::StopReason::MaxTurnRequests => {
            return Err((
                FailureKind::Resource,
                format!("the agent stopped at a limit ({stop_reason})"),
            ))
        }
        v1::StopReason::Cancelled if outcome.permission_requests > 0 => return Err((
            FailureKind::Permission,
            "the agent asked for a permission the companion does not grant; the turn was cancelled"
                .into(),
        )),
        v1::StopReason::Cancelled => {
            return Err((
                FailureKind::Cancelled,
                "the agent cancelled the turn".into(),
            ))
        }
        #[allow(unreachable_patterns)]
        _ => {
            return Err((
                FailureKind::Protocol,
                format!("unknown stop reason {stop_reason}"),
            ))
        }
    }
    match result.stop_cause.as_deref() {
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
pub fn stop_reason_name(reason: &v1::StopReason) -> &'static str {
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

/// Labels compare without case and with `.`/`_`/space as `-`.
fn labels_match(selected: &str, served: &str) -> bool {
    let norm = |s: &str| models::normalise_id(&s.replace(' ', "-"));
    norm(selected) == norm(served)
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
    fn rpc_error_kinds_map_to_failure_kinds() {
        let rpc = |code, kind: Option<&str>| AcpError::Rpc {
            code,
            message: String::new(),
            kind: kind.map(str::to_owned),
        };
        assert_eq!(classify(&rpc(-32000, None)), FailureKind::Auth);
        assert_eq!(
            classify(&rpc(-32603, Some("QuotaExceeded"))),
            FailureKind::Quota
        );
        assert_eq!(
            classify(&rpc(-32603, Some("ServerError"))),
            FailureKind::Network
        );
        assert_eq!(classify(&rpc(-32603, None)), FailureKind::Error);
        assert_eq!(classify(&AcpError::MalformedFrame), FailureKind::Protocol);
        assert_eq!(
            classify(&AcpError::ToolRefused { tool: "x".into() }),
            FailureKind::Policy
        );
    }

    #[test]
    fn model_labels_compare_loosely() {
        assert!(labels_match("GLM 5.2", "glm-5-2"));
        assert!(!labels_match("SWE-2", "Other"));
    }
}
