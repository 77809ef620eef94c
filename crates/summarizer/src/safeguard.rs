//! The answer to a request's `dangerous_tool_use` safeguard: Claude Code's auto mode asks the
//! bridge to judge every tool call of the reply before the call runs on the user's machine.
//!
//! Invariants:
//! - A request without the safeguard gets no `safeguard_results` (`None` here), whatever the
//!   mode.
//! - With `[safeguards] mode = "unsupported"` the answer is `unsupported` and no call is judged.
//! - A reply without a call is `available` with no verdicts; a reply that calls tools gets the
//!   safeguard component's verdicts on exactly its calls (the prose around them is shown to
//!   the user, never run, so never judged), which must be one per call, for the calls' own ids
//!   in their order.
//!   A judge that fails (trap, timeout) or answers for other ids makes the answer
//!   `unavailable`: the client then checks by itself or asks. Nothing here ever turns a
//!   verdict into `not_flagged`, and a judge's failure never fails the turn.
//! - The classifier context is the user's private configuration: it goes to the judge and
//!   nowhere else (not to the log, not to the agent). A flagged call is logged once, with its
//!   tool (bounded to Claude Code's tool names) and the rule that decided it, never its input.

use std::sync::Arc;

use devin_bridge_engine::{TransformCalls as _, Transforms};
use devin_bridge_types::{CallVerdict, Reply, SafeguardOutcome, SafeguardStatus, ToolCall};

use super::calls::run_transform;
use super::metrics::{tool_label, Metrics};
use super::policy::SafeguardMode;

/// The reason a client sees when the judge could not run.
const JUDGE_FAILED: &str = "the bridge's safeguard judge failed on this reply";

/// The reason a client sees when the judge's verdicts do not match the reply's calls.
const JUDGE_MISMATCHED: &str = "the bridge's safeguard judge did not answer for every call";

/// The safeguard answer for `reply`, when the request asked for one (`context` is its
/// classifier context, `earlier` the conversation's calls before the reply, as the serializer
/// reduced them), in the policy's `mode`, judged by the safeguard component of `transforms`.
pub(crate) async fn answer(
    mode: SafeguardMode,
    transforms: &Arc<Transforms>,
    metrics: &Metrics,
    context: Option<&str>,
    earlier: &[ToolCall],
    reply: &Reply,
) -> Option<SafeguardStatus> {
    let context = context?;
    if mode == SafeguardMode::Unsupported {
        return Some(SafeguardStatus::Unsupported);
    }
    let calls = judged_calls(reply);
    if calls.is_empty() {
        return Some(SafeguardStatus::Available(Vec::new()));
    }
    let (judged, context, earlier) = (calls.clone(), context.to_owned(), earlier.to_vec());
    let earlier_bytes: usize = earlier.iter().map(|call| call.input.len()).sum();
    let size = context
        .len()
        .saturating_add(reply.content_bytes())
        .saturating_add(earlier_bytes);
    let status = match run_transform(transforms, size, move |t| t.judge(judged, context, earlier))
        .await
    {
        Ok(status) => checked(status, &calls),
        Err(failure) => {
            tracing::warn!(code = %failure.code, "the safeguard judge failed; the client checks the calls itself");
            SafeguardStatus::Unavailable(JUDGE_FAILED.to_owned())
        }
    };
    record(metrics, &status, &calls);
    Some(status)
}

/// What the judge is asked about: exactly the reply's calls, in order, without its prose.
fn judged_calls(reply: &Reply) -> Vec<ToolCall> {
    reply.calls().cloned().collect()
}

/// `status`, when it holds exactly one verdict per call, for the calls' ids in order; else
/// `unavailable`.
fn checked(status: SafeguardStatus, calls: &[ToolCall]) -> SafeguardStatus {
    match &status {
        SafeguardStatus::Available(verdicts)
            if verdicts.len() != calls.len()
                || verdicts
                    .iter()
                    .zip(calls)
                    .any(|(verdict, call)| verdict.id != call.id) =>
        {
            tracing::warn!(
                verdicts = verdicts.len(),
                calls = calls.len(),
                "the safeguard judge's verdicts do not match the reply's calls; answered unavailable"
            );
            SafeguardStatus::Unavailable(JUDGE_MISMATCHED.to_owned())
        }
        _ => status,
    }
}

/// Counts every verdict and logs each flagged call (tool and rule, never the input).
fn record(metrics: &Metrics, status: &SafeguardStatus, calls: &[ToolCall]) {
    let verdicts = match status {
        SafeguardStatus::Available(verdicts) => verdicts,
        SafeguardStatus::Unavailable(_) => {
            for call in calls {
                metrics.count_verdict("unavailable", &call.name);
            }
            return;
        }
        SafeguardStatus::Unsupported => return,
    };
    for (verdict, call) in verdicts.iter().zip(calls) {
        let outcome = match &verdict.verdict {
            CallVerdict::Evaluated(evaluation) => match evaluation.outcome {
                SafeguardOutcome::Flagged => {
                    tracing::info!(
                        tool = %tool_label(&call.name),
                        rule = %evaluation.cited_rule.as_deref().unwrap_or("judge"),
                        id = %verdict.id,
                        "safeguard flagged a tool call; the client will not run it"
                    );
                    "flagged"
                }
                SafeguardOutcome::NotFlagged => "not_flagged",
            },
            CallVerdict::Skipped => "skipped",
            CallVerdict::Unavailable(_) => "unavailable",
        };
        metrics.count_verdict(outcome, &call.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devin_bridge_types::{Evaluation, ToolVerdict};

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: "Bash".to_owned(),
            input: "{}".to_owned(),
        }
    }

    fn passed(id: &str) -> ToolVerdict {
        ToolVerdict {
            id: id.to_owned(),
            verdict: CallVerdict::Evaluated(Evaluation {
                outcome: SafeguardOutcome::NotFlagged,
                explanation: "fine".to_owned(),
                cited_rule: None,
            }),
        }
    }

    #[test]
    fn the_judge_sees_exactly_the_calls_and_no_prose() {
        use devin_bridge_types::ReplyBlock;
        let reply = Reply::Tools(vec![
            ReplyBlock::Text("Let me clean up.".to_owned()),
            ReplyBlock::Call(call("a")),
            ReplyBlock::Text("and then".to_owned()),
            ReplyBlock::Call(call("b")),
        ]);
        assert_eq!(judged_calls(&reply), [call("a"), call("b")]);
        assert!(judged_calls(&Reply::Text("Let me run rm -rf".to_owned())).is_empty());
    }

    #[test]
    fn verdicts_for_exactly_the_calls_in_order_pass_through() {
        let status = SafeguardStatus::Available(vec![passed("a"), passed("b")]);
        assert_eq!(checked(status.clone(), &[call("a"), call("b")]), status);
    }

    #[test]
    fn verdicts_for_other_ids_or_another_count_are_unavailable_never_passed() {
        let calls = [call("a"), call("b")];
        for verdicts in [
            vec![passed("a")],
            vec![passed("b"), passed("a")],
            vec![passed("a"), passed("b"), passed("c")],
            vec![passed("a"), passed("x")],
        ] {
            assert_eq!(
                checked(SafeguardStatus::Available(verdicts.clone()), &calls),
                SafeguardStatus::Unavailable(JUDGE_MISMATCHED.to_owned()),
                "{verdicts:?}"
            );
        }
        assert_eq!(
            checked(SafeguardStatus::Unsupported, &calls),
            SafeguardStatus::Unsupported
        );
    }
}
