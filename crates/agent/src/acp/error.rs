//! Typed agent failures, each with a stable code and the HTTP status the bridge answers with.
//! Messages name what went wrong without paths, stack traces or vendor names: they reach
//! clients. Diagnostics (stderr tail, exit status) go to the logs only.

use crate::process::SpawnError;

#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    #[error("the agent could not be started")]
    Spawn(#[source] SpawnError),
    #[error("the agent speaks an unsupported protocol version ({0})")]
    ProtocolVersion(String),
    #[error("the agent wrote a malformed frame")]
    MalformedFrame,
    #[error("the agent answered a request that was never sent (id {0})")]
    StrayResponse(String),
    #[error("the agent reported on a session that is not this turn's")]
    WrongSession,
    /// `message` is the agent's own text, bounded but not cleaned: it is left out of
    /// `Display`, and a mode that shows it to a client cleans it first.
    #[error("the agent failed with JSON-RPC error {code}")]
    Rpc {
        code: i64,
        message: String,
        kind: Option<String>,
    },
    #[error("the agent is rate limited")]
    RateLimited,
    #[error("the agent's account is out of quota")]
    QuotaExceeded,
    /// The agent's own service failed or could not be reached (`ServerError`, `NetworkError`).
    #[error("the agent's service failed or could not be reached")]
    Network,
    #[error("the agent's account is not authenticated")]
    Unauthenticated,
    #[error("the agent exited before finishing the turn")]
    EarlyExit,
    #[error("the agent's output exceeded the {0} byte limit")]
    OutputTooLarge(usize),
    /// A tool call from an agent that may run none (the summarizer).
    #[error("the agent tried to run a tool itself; the turn was stopped")]
    UnauthorizedTool,
    /// A tool call the mode's tool list does not allow; the agent was killed. `tool` is the
    /// tool's name, or its ACP kind when it gave none (`unidentified` when neither helps).
    #[error("the agent tried to run a tool it may not use ({tool}); the turn was stopped")]
    ToolRefused { tool: String },
    #[error("the agent did not finish within {0} ms")]
    Timeout(u64),
    #[error("the agent stopped without completing the turn ({0})")]
    Stopped(String),
    #[error("the agent's pipes failed")]
    Io(#[source] std::io::Error),
}

impl AcpError {
    /// Stable machine code (logs, error bodies).
    pub fn code(&self) -> &'static str {
        match self {
            AcpError::Spawn(_) => "agent_unavailable",
            AcpError::ProtocolVersion(_) => "agent_protocol_mismatch",
            AcpError::MalformedFrame => "agent_malformed_frame",
            AcpError::StrayResponse(_) => "agent_stray_response",
            AcpError::WrongSession => "agent_wrong_session",
            AcpError::Rpc { .. } => "agent_error",
            AcpError::RateLimited => "agent_rate_limited",
            AcpError::QuotaExceeded => "agent_quota_exceeded",
            AcpError::Network => "agent_network",
            AcpError::Unauthenticated => "agent_unauthenticated",
            AcpError::EarlyExit => "agent_exited",
            AcpError::OutputTooLarge(_) => "agent_output_too_large",
            AcpError::UnauthorizedTool => "unauthorized_tool_execution",
            AcpError::ToolRefused { .. } => "tool_refused",
            AcpError::Timeout(_) => "agent_timeout",
            AcpError::Stopped(_) => "agent_stopped",
            AcpError::Io(_) => "agent_io",
        }
    }

    /// HTTP status. An unauthenticated *agent* is a gateway failure (502), not a client 401:
    /// a 401 would tell the client that its own key to the bridge is wrong.
    pub fn status(&self) -> u16 {
        match self {
            AcpError::Spawn(_) => 503,
            AcpError::RateLimited | AcpError::QuotaExceeded => 429,
            AcpError::Timeout(_) => 504,
            _ => 502,
        }
    }

    /// Devin's `cognition.ai/errorKind` behind this error, when it came from one (or is its
    /// meaning: `-32000` is `Unauthenticated`). `Network` answers `NetworkError` for both
    /// `ServerError` and `NetworkError`.
    pub fn error_kind(&self) -> Option<&str> {
        match self {
            AcpError::RateLimited => Some("RateLimited"),
            AcpError::QuotaExceeded => Some("QuotaExceeded"),
            AcpError::Unauthenticated => Some("Unauthenticated"),
            AcpError::Network => Some("NetworkError"),
            AcpError::Rpc { kind, .. } => kind.as_deref(),
            _ => None,
        }
    }

    /// Whether the agent was killed at once for trying to run a tool.
    pub fn is_tool_refusal(&self) -> bool {
        matches!(
            self,
            AcpError::UnauthorizedTool | AcpError::ToolRefused { .. }
        )
    }
}
