//! Token counts an agent reports for a turn, in Anthropic's terms, and where they came from.
//!
//! Reading them is the agent's dialect ([`crate::devin::usage`]: which report covers the whole
//! turn, and whether cached reads sit inside the input); this module holds what every caller
//! sees, and the one plain-ACP source: a `usage_update` session update's `used`, the tokens in
//! the session's context. Anything that is not a non-negative integer counts as absent, and
//! counts saturate at `u32::MAX`: the agent is untrusted and its numbers are only reported,
//! never used to size anything.

use serde_json::Value;

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

/// The `used` field of a `usage_update` session update (`update` is the update object).
pub(crate) fn context_used(update: &Value) -> Option<u32> {
    if update.get("sessionUpdate").and_then(Value::as_str) != Some("usage_update") {
        return None;
    }
    update
        .get("used")
        .and_then(Value::as_u64)
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_usage_update_gives_the_context_size_as_the_input() {
        assert_eq!(
            context_used(&json!({"sessionUpdate": "usage_update", "used": 77, "size": 200000})),
            Some(77)
        );
        assert_eq!(
            context_used(&json!({"sessionUpdate": "usage_update", "used": 1u64 << 40})),
            Some(u32::MAX)
        );
        assert_eq!(
            context_used(&json!({"sessionUpdate": "plan", "used": 77})),
            None
        );
        assert_eq!(
            context_used(&json!({"sessionUpdate": "usage_update", "used": -1})),
            None
        );
        let usage = ReportedUsage::from_context_used(77);
        assert_eq!(
            (usage.output_tokens, usage.source),
            (None, UsageSource::ContextSize)
        );
        assert_eq!(UsageSource::TurnStats.label(), "turn_stats");
        assert_eq!(UsageSource::LastRequest.label(), "last_request");
    }
}
