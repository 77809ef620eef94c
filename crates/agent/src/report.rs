//! What an agent reports of one turn, as every caller sees it: how the turn stopped and its
//! token counts. The ACP client ([`crate::acp`]) carries these and the Devin dialect
//! ([`crate::devin`]) fills them in, so both import this leaf module and neither imports the
//! other for them.

use serde_json::Value;

/// `_cognition.ai/agent_stopped`: the agent's own account of how a turn ended (read by
/// [`crate::devin::stopped`]).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentStopped {
    /// `complete`, `cancelled`, `quota_exhausted`, ... (bounded, as the agent wrote it).
    pub cause: String,
    /// The model that really ran (`stats.modelLabel`, or its `model` response dimension): a
    /// display label.
    pub model_label: Option<String>,
    /// `errorMessage`, the agent's own explanation (bounded, not cleaned).
    pub error_message: Option<String>,
    /// The whole `stats` object (`Null` when absent).
    pub stats: Value,
}

/// Where a turn's reported counts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageSource {
    /// The turn's own sums (the Devin CLI's `turn_stats` cumulative rows).
    TurnStats,
    /// The prompt result's `usage`: the turn's last model request only.
    LastRequest,
    /// The context size of the turn's last `usage_update`, as the input; output unknown.
    ContextSize,
}

impl UsageSource {
    /// A short name for metrics and logs: `turn_stats`, `last_request` or `context_size`.
    pub fn label(self) -> &'static str {
        match self {
            UsageSource::TurnStats => "turn_stats",
            UsageSource::LastRequest => "last_request",
            UsageSource::ContextSize => "context_size",
        }
    }
}

/// What an agent reported of one turn's tokens, in Anthropic's terms: `input_tokens` excludes
/// the cache reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportedUsage {
    pub input_tokens: u32,
    /// `None` when only the context size was reported (a `usage_update`).
    pub output_tokens: Option<u32>,
    pub cache_read_input_tokens: u32,
    pub cache_creation_input_tokens: u32,
    pub source: UsageSource,
}

impl ReportedUsage {
    /// A `usage_update`'s `used`: the context the model read, output unknown.
    pub fn from_context_used(used: u32) -> Self {
        Self {
            input_tokens: used,
            output_tokens: None,
            cache_read_input_tokens: 0,
            cache_creation_input_tokens: 0,
            source: UsageSource::ContextSize,
        }
    }
}
