//! Token counts an agent reports for a turn, in Anthropic's terms, and where they came from.
//!
//! Reading them is the agent's dialect ([`crate::devin::usage`]: which report covers the whole
//! turn, and whether cached reads sit inside the input); this module holds what every caller
//! sees, and the one plain-ACP source: a `usage_update` session update's `used`, the tokens in
//! the session's context. Anything that is not a non-negative integer counts as absent, and
//! counts saturate at `u32::MAX`: the agent is untrusted and its numbers are only reported,
//! never used to size anything.

use serde_json::Value;

pub use crate::report::{ReportedUsage, UsageSource};

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
