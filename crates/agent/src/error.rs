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
    /// `Display`, and a mode that shows it to a client cleans it first. `kind` is the
    /// agent's own classification when it gave a well-formed one; `retryable` its own word on
    /// whether trying again later may succeed (false when it said nothing).
    /// `retry_after` is the agent's own `retryAfterSeconds`, when it gave one.
    #[error("the agent failed with JSON-RPC error {code}")]
    Rpc {
        code: i64,
        message: String,
        kind: Option<String>,
        retryable: bool,
        retry_after: Option<u64>,
    },
    /// The agent's service is rate limiting this account (`unavailable`, a rate limit);
    /// `retry_after` is how long it asked the client to wait, when it said.
    #[error("the agent's service is rate limiting this account; retry later")]
    RateLimited {
        retryable: bool,
        retry_after: Option<u64>,
    },
    /// Credits or quota are used up (`resource_exhausted`, or a turn that ended with the
    /// `quota_exhausted` cause). `message` is the agent's own explanation, bounded but not
    /// cleaned (left out of `Display`, like [`AcpError::Rpc`]'s): a mode that shows it cleans
    /// it first. Never retryable, whatever the agent's own flag said: a quota rarely clears
    /// within a client's retry window.
    #[error("the agent's account has no credits or quota left; add credits or wait for the quota to reset")]
    QuotaExceeded { message: Option<String> },
    /// The agent's service could not be reached (`unavailable`, not a rate limit).
    #[error("the agent's service could not be reached")]
    Network {
        retryable: bool,
        retry_after: Option<u64>,
    },
    /// The agent is not signed in (at `session/new` or at the prompt), and could not be signed
    /// in: it has no stored login and no usable API key, or the one sign-in did not help.
    #[error("the agent is not logged in: log in the agent's home once (`devin auth login` with the agent's HOME), or let WINDSURF_API_KEY reach the agent")]
    Unauthenticated,
    /// The agent's service withheld the model's reply (the turn ended with the
    /// `content_filter` cause or error kind).
    #[error(
        "the agent's service withheld the model's reply (content filter); rephrase the request"
    )]
    ContentFiltered,
    /// The model's output was cut off at its length limit (the `output_truncated` cause).
    #[error("the model's output was cut off at its length limit; the turn did not complete")]
    OutputTruncated,
    /// The agent reached its limit of model requests in one turn (the `max_turn_requests`
    /// cause).
    #[error(
        "the agent reached its limit of model requests for one turn; the turn did not complete"
    )]
    TurnLimit,
    /// The agent's service refused the `clientInfo` this client sent in `initialize` ("version
    /// is out of date").
    #[error("the agent's service refused this client's identity: set `client_name` and `client_version` in the policy to an identity the CLI accepts (default windsurf 1.110.1)")]
    ClientIdentityRefused,
    /// `session/load` of a session the agent does not know (`session_not_found`).
    #[error("the agent does not know this session")]
    SessionNotFound,
    /// The requested model is not among the models the agent's session offers.
    #[error("model {model} is not offered by the agent; it offers: {}", offered.join(", "))]
    ModelNotOffered { model: String, offered: Vec<String> },
    /// The session has no model option, and the process was not started with `--model` for
    /// the requested model: start one that is.
    #[error(
        "the agent's session has no model option; the model must be chosen on its command line"
    )]
    NoModelOption,
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
            AcpError::RateLimited { .. } => "agent_rate_limited",
            AcpError::QuotaExceeded { .. } => "agent_quota_exceeded",
            AcpError::Network { .. } => "agent_network",
            AcpError::Unauthenticated => "agent_unauthenticated",
            AcpError::ContentFiltered => "agent_content_filtered",
            AcpError::OutputTruncated => "agent_output_truncated",
            AcpError::TurnLimit => "agent_turn_limit",
            AcpError::ClientIdentityRefused => "client_identity_refused",
            AcpError::SessionNotFound => "agent_session_not_found",
            AcpError::ModelNotOffered { .. } => "model_not_offered",
            AcpError::NoModelOption => "agent_no_model_option",
            AcpError::EarlyExit => "agent_exited",
            AcpError::OutputTooLarge(_) => "agent_output_too_large",
            AcpError::UnauthorizedTool => "unauthorized_tool_execution",
            AcpError::ToolRefused { .. } => "tool_refused",
            AcpError::Timeout(_) => "agent_timeout",
            AcpError::Stopped(_) => "agent_stopped",
            AcpError::Io(_) => "agent_io",
        }
    }

    /// HTTP status, as an Anthropic-style client reacts to it: anything the agent's service
    /// says may succeed later is a 429 (retried after `retry-after`); used-up credits are a
    /// 400 `invalid_request_error`, which is never retried (what Anthropic answers an empty
    /// balance with). An unauthenticated *agent* is a gateway failure (502), not a client 401:
    /// a 401 would tell the client that its own key to the bridge is wrong. A filtered reply is
    /// a 400 too (the same request would be filtered again); a truncated output or a turn at
    /// its request limit is a 502 (the agent did not complete the turn).
    pub fn status(&self) -> u16 {
        if self.retryable() {
            return 429;
        }
        match self {
            AcpError::Spawn(_) => 503,
            AcpError::QuotaExceeded { .. }
            | AcpError::ModelNotOffered { .. }
            | AcpError::ContentFiltered => 400,
            AcpError::Timeout(_) => 504,
            _ => 502,
        }
    }

    /// Whether the agent's service said that trying again later may succeed.
    pub fn retryable(&self) -> bool {
        match self {
            AcpError::RateLimited { retryable, .. }
            | AcpError::Network { retryable, .. }
            | AcpError::Rpc { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// How many seconds the agent's service asked a client to wait before trying again
    /// (`cognition.ai/retryAfterSeconds`), when it said so on a retryable failure.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            AcpError::RateLimited { retry_after, .. }
            | AcpError::Network { retry_after, .. }
            | AcpError::Rpc { retry_after, .. }
                if self.retryable() =>
            {
                *retry_after
            }
            _ => None,
        }
    }

    /// The agent's own error kind (`cognition.ai/errorKind`) behind this error, or the kind
    /// it stands for.
    pub fn error_kind(&self) -> Option<&str> {
        match self {
            AcpError::RateLimited { .. } | AcpError::Network { .. } => Some("unavailable"),
            AcpError::QuotaExceeded { .. } => Some("resource_exhausted"),
            AcpError::ContentFiltered => Some("content_filter"),
            AcpError::SessionNotFound => Some("session_not_found"),
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
