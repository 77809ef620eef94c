//! Token counts an agent reports for a turn.
//!
//! Two places carry them. The prompt result may hold `usage: {inputTokens, outputTokens,
//! cachedReadTokens, cachedWriteTokens, ...}` (the counts of that turn); a `usage_update`
//! session update holds `used`, the tokens in the session's context. A turn's counts come
//! from the prompt result when it has them; otherwise the last `usage_update` of the turn
//! gives its input (what the model read) and the output stays unknown. Anything that is not a
//! non-negative integer counts as absent, and counts saturate at `u32::MAX`: the agent is
//! untrusted and its numbers are only reported, never used to size anything.

use serde_json::Value;

/// What an agent reported of one turn's tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportedUsage {
    pub input_tokens: u32,
    /// `None` when only the context size was reported (a `usage_update`).
    pub output_tokens: Option<u32>,
    pub cache_read_input_tokens: u32,
    pub cache_creation_input_tokens: u32,
}

impl ReportedUsage {
    /// The prompt result's `usage` object, when it states both input and output tokens.
    pub fn from_prompt_result(usage: &Value) -> Option<Self> {
        Some(Self {
            input_tokens: count(usage.get("inputTokens"))?,
            output_tokens: Some(count(usage.get("outputTokens"))?),
            cache_read_input_tokens: count(usage.get("cachedReadTokens")).unwrap_or(0),
            cache_creation_input_tokens: count(usage.get("cachedWriteTokens")).unwrap_or(0),
        })
    }

    /// A `usage_update`'s `used`: the context the model read, output unknown.
    pub fn from_context_used(used: u32) -> Self {
        Self {
            input_tokens: used,
            output_tokens: None,
            cache_read_input_tokens: 0,
            cache_creation_input_tokens: 0,
        }
    }

    /// The turn's usage: the prompt result's, else the context of the last `usage_update`.
    pub fn of_turn(result_usage: Option<&Value>, context_used: Option<u32>) -> Option<Self> {
        result_usage
            .and_then(Self::from_prompt_result)
            .or_else(|| context_used.map(Self::from_context_used))
    }
}

/// The `used` field of a `usage_update` session update (`update` is the update object).
pub(crate) fn context_used(update: &Value) -> Option<u32> {
    if update.get("sessionUpdate").and_then(Value::as_str) != Some("usage_update") {
        return None;
    }
    count(update.get("used"))
}

fn count(value: Option<&Value>) -> Option<u32> {
    value
        .and_then(Value::as_u64)
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_prompt_results_usage_gives_every_count() {
        let usage = json!({"inputTokens": 1200, "outputTokens": 34, "totalTokens": 1234,
                           "cachedReadTokens": 1000, "cachedWriteTokens": 150});
        assert_eq!(
            ReportedUsage::from_prompt_result(&usage),
            Some(ReportedUsage {
                input_tokens: 1200,
                output_tokens: Some(34),
                cache_read_input_tokens: 1000,
                cache_creation_input_tokens: 150,
            })
        );
    }

    #[test]
    fn cache_counts_default_to_zero_and_bad_counts_are_absent() {
        let plain =
            ReportedUsage::from_prompt_result(&json!({"inputTokens": 5, "outputTokens": 6}))
                .expect("both counts");
        assert_eq!(
            (
                plain.cache_read_input_tokens,
                plain.cache_creation_input_tokens
            ),
            (0, 0)
        );
        for bad in [
            json!({"inputTokens": -1, "outputTokens": 6}),
            json!({"inputTokens": "5", "outputTokens": 6}),
            json!({"inputTokens": 5}),
            json!({"inputTokens": 5.5, "outputTokens": 6}),
            json!(null),
        ] {
            assert_eq!(ReportedUsage::from_prompt_result(&bad), None, "{bad}");
        }
        let huge = ReportedUsage::from_prompt_result(
            &json!({"inputTokens": 1u64 << 40, "outputTokens": 1}),
        )
        .expect("saturates");
        assert_eq!(huge.input_tokens, u32::MAX);
    }

    #[test]
    fn the_result_wins_over_a_usage_update_which_gives_only_the_input() {
        let result = json!({"inputTokens": 10, "outputTokens": 2});
        assert_eq!(
            ReportedUsage::of_turn(Some(&result), Some(999)).map(|u| u.input_tokens),
            Some(10)
        );
        let from_update = ReportedUsage::of_turn(None, Some(999)).expect("context");
        assert_eq!(
            (from_update.input_tokens, from_update.output_tokens),
            (999, None)
        );
        assert_eq!(ReportedUsage::of_turn(None, None), None);
        assert_eq!(
            context_used(&json!({"sessionUpdate": "usage_update", "used": 77, "size": 200000})),
            Some(77)
        );
        assert_eq!(
            context_used(&json!({"sessionUpdate": "plan", "used": 77})),
            None
        );
    }
}
