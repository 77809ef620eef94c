//! A turn's token counts, as the Devin CLI reports them, in Anthropic's terms.
//!
//! What the real CLI sends:
//! - the prompt result's `usage: {totalTokens, inputTokens, outputTokens, cachedReadTokens}`
//!   and each `usage_update` cover the **last model request** of the turn only;
//! - `_cognition.ai/turn_stats` carries the turn's sums as its `cumulativeMetric` rows of
//!   `responseDimensions`. The `uid`s of those rows for tokens are **not recorded**: the rows
//!   are read here by the names the `usage` fields have (`inputTokens`, `outputTokens`,
//!   `cachedReadTokens`, `cachedWriteTokens`, compared without case and punctuation, with or
//!   without a `cognition.ai/` prefix). When a turn's `turn_stats` has no such rows (or no
//!   `turn_stats` came), the prompt result's `usage` is used, which undercounts a turn of
//!   several model requests: [`ReportedUsage::source`] says which source a count came from so
//!   that a deployment can tell how often that happens.
//!
//! **Assumption, cached reads are inside `inputTokens`:** the CLI reports `totalTokens =
//! inputTokens + outputTokens`, with `cachedReadTokens` not added, which means the cached
//! reads are part of `inputTokens`. Anthropic's `input_tokens` excludes them, so the counts
//! are mapped as `input_tokens = inputTokens - cachedReadTokens - cachedWriteTokens` and
//! `cache_read_input_tokens = cachedReadTokens`. When a report says otherwise (its
//! `totalTokens` is the sum of input, output and the cached counts, or the cached counts
//! exceed the input), the input is taken as it is. Counts that are not non-negative integers
//! are absent; counts saturate at `u32::MAX`.

use serde_json::Value;

use super::stats::dimensions;
use crate::report::{ReportedUsage, UsageSource};

/// Token counts of one report, in the CLI's own terms (input includes cached reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenCounts {
    pub input: u64,
    pub output: u64,
    pub cached_read: u64,
    pub cached_write: u64,
    /// `totalTokens`, when reported.
    pub total: Option<u64>,
}

impl TokenCounts {
    /// The prompt result's `usage` object, when it states both input and output tokens.
    pub fn of_usage(usage: &Value) -> Option<Self> {
        Some(Self {
            input: count(usage.get("inputTokens"))?,
            output: count(usage.get("outputTokens"))?,
            cached_read: count(usage.get("cachedReadTokens")).unwrap_or(0),
            cached_write: count(usage.get("cachedWriteTokens")).unwrap_or(0),
            total: count(usage.get("totalTokens")),
        })
    }

    /// The turn's sums in a `turn_stats` notification's `cumulativeMetric` rows, when it has
    /// rows for both input and output tokens.
    pub fn of_turn_stats(params: &Value) -> Option<Self> {
        let mut counts = Self::default();
        let (mut input, mut output) = (false, false);
        for row in dimensions(params.get("responseDimensions")) {
            if row.kind != "cumulativemetric" {
                continue;
            }
            let Some(value) = count(Some(row.value)) else {
                continue;
            };
            match token_row(row.uid) {
                Some(Row::Input) => (counts.input, input) = (value, true),
                Some(Row::Output) => (counts.output, output) = (value, true),
                Some(Row::CachedRead) => counts.cached_read = value,
                Some(Row::CachedWrite) => counts.cached_write = value,
                Some(Row::Total) => counts.total = Some(value),
                None => {}
            }
        }
        (input && output).then_some(counts)
    }

    /// In Anthropic's terms, from `source`.
    pub fn reported(self, source: UsageSource) -> ReportedUsage {
        let cached = self.cached_read.saturating_add(self.cached_write);
        let cached_apart = self.total.is_some_and(|total| {
            cached > 0
                && total
                    == self
                        .input
                        .saturating_add(self.output)
                        .saturating_add(cached)
        }) || cached > self.input;
        let input = if cached_apart {
            self.input
        } else {
            self.input.saturating_sub(cached)
        };
        ReportedUsage {
            input_tokens: clamp(input),
            output_tokens: Some(clamp(self.output)),
            cache_read_input_tokens: clamp(self.cached_read),
            cache_creation_input_tokens: clamp(self.cached_write),
            source,
        }
    }
}

enum Row {
    Input,
    Output,
    CachedRead,
    CachedWrite,
    Total,
}

/// The token row a `cumulativeMetric` uid names (an assumption: see the module doc).
fn token_row(uid: &str) -> Option<Row> {
    let uid = uid.strip_prefix("cognition.ai/").unwrap_or(uid);
    let name: String = uid
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    match name.as_str() {
        "inputtokens" => Some(Row::Input),
        "outputtokens" => Some(Row::Output),
        "cachedreadtokens" | "cachereadtokens" => Some(Row::CachedRead),
        "cachedwritetokens" | "cachewritetokens" => Some(Row::CachedWrite),
        "totaltokens" => Some(Row::Total),
        _ => None,
    }
}

/// The turn's usage: the sums of its `turn_stats` when they were reported, else the prompt
/// result's `usage` (the last model request), else the context size of the turn's last
/// `usage_update` as the input (output unknown).
pub fn of_turn(
    turn_sums: Option<TokenCounts>,
    result_usage: Option<&Value>,
    context_used: Option<u32>,
) -> Option<ReportedUsage> {
    if let Some(sums) = turn_sums {
        return Some(sums.reported(UsageSource::TurnStats));
    }
    if let Some(last) = result_usage.and_then(TokenCounts::of_usage) {
        return Some(last.reported(UsageSource::LastRequest));
    }
    context_used.map(ReportedUsage::from_context_used)
}

fn count(value: Option<&Value>) -> Option<u64> {
    value.and_then(Value::as_u64)
}

fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The prompt result's `usage` as the real CLI sends it: total = input + output.
    fn recorded_usage() -> Value {
        json!({"totalTokens": 4363, "inputTokens": 4321, "outputTokens": 42, "cachedReadTokens": 4000})
    }

    #[test]
    fn cached_reads_are_taken_out_of_the_input() {
        let usage = of_turn(None, Some(&recorded_usage()), Some(9999)).expect("usage");
        assert_eq!(
            usage,
            ReportedUsage {
                input_tokens: 321,
                output_tokens: Some(42),
                cache_read_input_tokens: 4000,
                cache_creation_input_tokens: 0,
                source: UsageSource::LastRequest,
            }
        );
    }

    #[test]
    fn a_report_whose_total_adds_the_cached_reads_keeps_its_input() {
        let apart = json!({"totalTokens": 4363, "inputTokens": 321, "outputTokens": 42, "cachedReadTokens": 4000});
        let usage = of_turn(None, Some(&apart), None).expect("usage");
        assert_eq!(
            (usage.input_tokens, usage.cache_read_input_tokens),
            (321, 4000)
        );
        // More cached than input cannot be inside it.
        let more = json!({"inputTokens": 10, "outputTokens": 1, "cachedReadTokens": 500});
        assert_eq!(
            of_turn(None, Some(&more), None).map(|u| u.input_tokens),
            Some(10)
        );
    }

    /// `turn_stats` with cumulative rows named like the usage fields (their names are an
    /// assumption), beside the recorded model row.
    fn turn_stats_with_sums() -> Value {
        json!({"sessionId": "s", "turnClientMessageId": "m", "turnRequestId": "r", "responseDimensions": [
            {"uid": "model", "label": "Model", "kind": {"type": "metric", "value": "SWE-1.6 Slow"}},
            {"uid": "inputTokens", "label": "Input", "kind": {"type": "cumulativeMetric", "value": 9000}},
            {"uid": "outputTokens", "label": "Output", "kind": {"type": "cumulativeMetric", "value": 300}},
            {"uid": "cachedReadTokens", "label": "Cached", "kind": {"CumulativeMetric": {"value": 7000}}},
        ]})
    }

    #[test]
    fn the_turns_cumulative_rows_win_over_the_last_requests_usage() {
        let sums = TokenCounts::of_turn_stats(&turn_stats_with_sums()).expect("sums");
        assert_eq!(
            (sums.input, sums.output, sums.cached_read),
            (9000, 300, 7000)
        );
        let usage = of_turn(Some(sums), Some(&recorded_usage()), None).expect("usage");
        assert_eq!(usage.source, UsageSource::TurnStats);
        assert_eq!(
            (
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_input_tokens
            ),
            (2000, Some(300), 7000)
        );
    }

    #[test]
    fn without_token_rows_the_usage_of_the_last_request_is_used() {
        // What is recorded: the model row only; and a cancelled turn's stats without rows.
        for stats in [
            json!({"responseDimensions": [{"uid": "model", "kind": {"type": "metric", "value": "SWE-2"}}]}),
            json!({"sessionId": "s"}),
            // A metric (not cumulative) row is one request's, not the turn's sum.
            json!({"responseDimensions": [
                {"uid": "inputTokens", "kind": {"type": "metric", "value": 5}},
                {"uid": "outputTokens", "kind": {"type": "metric", "value": 5}}]}),
            // Input without output is no sum.
            json!({"responseDimensions": [
                {"uid": "inputTokens", "kind": {"type": "cumulativeMetric", "value": 5}}]}),
        ] {
            assert_eq!(TokenCounts::of_turn_stats(&stats), None, "{stats}");
        }
        let usage = of_turn(None, Some(&recorded_usage()), None).expect("usage");
        assert_eq!(usage.source, UsageSource::LastRequest);
        let context = of_turn(None, None, Some(77)).expect("context");
        assert_eq!(
            (context.source, context.input_tokens, context.output_tokens),
            (UsageSource::ContextSize, 77, None)
        );
        assert_eq!(of_turn(None, None, None), None);
    }

    #[test]
    fn bad_counts_are_absent_and_big_ones_saturate() {
        for bad in [
            json!({"inputTokens": -1, "outputTokens": 6}),
            json!({"inputTokens": "5", "outputTokens": 6}),
            json!({"inputTokens": 5}),
            json!({"inputTokens": 5.5, "outputTokens": 6}),
            json!(null),
        ] {
            assert_eq!(TokenCounts::of_usage(&bad), None, "{bad}");
        }
        let huge = of_turn(
            None,
            Some(&json!({"inputTokens": 1u64 << 40, "outputTokens": 1})),
            None,
        )
        .expect("saturates");
        assert_eq!(huge.input_tokens, u32::MAX);
    }
}
