//! How a turn ended, by the agent's own account: `_cognition.ai/agent_stopped {cause,
//! sessionId, stats, errorMessage?}`, sent before the prompt result.
//!
//! The cause decides the outcome of a turn, whatever the stop reason says: the real CLI ends a
//! turn whose quota ran out with `agent_stopped {cause: "quota_exhausted", errorMessage}` and
//! then an ordinary `end_turn`. Causes recorded: `complete`, `cancelled`, `interrupted`,
//! `restart`, `shutdown`, `quota_exhausted`, `auth_required`, `content_filter`, `error`,
//! `max_turn_requests`, `output_truncated`, `tool_rejected`. Those that mean the turn did not
//! produce its answer are typed failures ([`failure`]):
//!
//! | cause | failure |
//! |---|---|
//! | `quota_exhausted` | [`AcpError::QuotaExceeded`] with `errorMessage` (bounded) |
//! | `auth_required` | [`AcpError::Unauthenticated`] |
//! | `content_filter` | [`AcpError::ContentFiltered`] |
//! | `output_truncated` | [`AcpError::OutputTruncated`] |
//! | `max_turn_requests` | [`AcpError::TurnLimit`] |
//! | `error` | [`AcpError::Stopped`] (`cause error`) |
//!
//! The others leave the outcome to the stop reason (`cancelled` comes with `stopReason:
//! "cancelled"`; after a rejected tool the turn still ends `end_turn`). A `session/cancel` of
//! an idle session still produces an `agent_stopped` with zero stats; it names no prompt's
//! session and is ignored by the connection.

use serde_json::Value;

use super::errors::bounded;
use super::stats::{self, MAX_LABEL_CHARS};
use crate::error::AcpError;
use crate::report::AgentStopped;

/// An `agent_stopped` notification's params, read leniently and bounded.
pub fn read(params: &Value) -> AgentStopped {
    AgentStopped {
        cause: params
            .get("cause")
            .and_then(Value::as_str)
            .map(|text| text.chars().take(MAX_LABEL_CHARS).collect())
            .unwrap_or_default(),
        model_label: stats::stopped_model(params),
        error_message: params
            .get("errorMessage")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|text| !text.is_empty())
            .map(bounded),
        stats: params.get("stats").cloned().unwrap_or(Value::Null),
    }
}

/// The failure a turn that ended this way is, or `None` when the stop reason decides.
pub fn failure(stopped: &AgentStopped) -> Option<AcpError> {
    let failure = match stopped.cause.as_str() {
        "quota_exhausted" => AcpError::QuotaExceeded {
            message: stopped.error_message.clone(),
        },
        "auth_required" => AcpError::Unauthenticated,
        "content_filter" => AcpError::ContentFiltered,
        "output_truncated" => AcpError::OutputTruncated,
        "max_turn_requests" => AcpError::TurnLimit,
        "error" => AcpError::Stopped("cause error".to_owned()),
        _ => return None,
    };
    tracing::debug!(
        cause = %stopped.cause,
        code = failure.code(),
        "the agent's account of the turn decides its outcome"
    );
    Some(failure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stopped(cause: &str, error_message: Option<&str>) -> AgentStopped {
        let mut params = json!({"cause": cause, "sessionId": "s",
            "stats": {"modelLabel": "SWE-1.6 Slow", "durationMs": 1200}});
        if let Some(text) = error_message {
            params["errorMessage"] = json!(text);
        }
        read(&params)
    }

    #[test]
    fn a_quota_cause_is_the_quota_refusal_with_its_message() {
        let ended = stopped(
            "quota_exhausted",
            Some("Your daily usage quota has been exhausted. It resets at midnight UTC."),
        );
        assert_eq!(ended.model_label.as_deref(), Some("SWE-1.6 Slow"));
        match failure(&ended) {
            Some(AcpError::QuotaExceeded {
                message: Some(message),
            }) => {
                assert!(message.starts_with("Your daily usage quota"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let bare = failure(&stopped("quota_exhausted", None)).expect("a failure");
        assert!(matches!(bare, AcpError::QuotaExceeded { message: None }));
        assert_eq!(bare.status(), 400);
        let huge = "q".repeat(100_000);
        let bounded = stopped("quota_exhausted", Some(&huge));
        assert_eq!(
            bounded.error_message.map(|m| m.len()),
            Some(super::super::errors::MAX_AGENT_MESSAGE_BYTES)
        );
    }

    #[test]
    fn each_failing_cause_is_its_own_typed_failure() {
        for (cause, code) in [
            ("auth_required", "agent_unauthenticated"),
            ("content_filter", "agent_content_filtered"),
            ("output_truncated", "agent_output_truncated"),
            ("max_turn_requests", "agent_turn_limit"),
            ("error", "agent_stopped"),
        ] {
            let failure = failure(&stopped(cause, None)).unwrap_or_else(|| panic!("{cause}"));
            assert_eq!(failure.code(), code, "{cause}");
        }
        let error = failure(&stopped("error", None)).expect("a failure");
        assert!(error.to_string().contains("cause error"), "{error}");
    }

    #[test]
    fn the_other_causes_leave_the_outcome_to_the_stop_reason() {
        for cause in [
            "complete",
            "cancelled",
            "interrupted",
            "restart",
            "shutdown",
            "tool_rejected",
            "",
            "something_new",
        ] {
            assert!(failure(&stopped(cause, None)).is_none(), "{cause}");
        }
        let unread = read(&json!({"cause": 7}));
        assert_eq!(unread.cause, "");
        assert_eq!(unread.stats, Value::Null);
    }
}
