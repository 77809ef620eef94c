//! The failures the summarizer's host side gives a client, with their stable codes, HTTP
//! statuses and repairability in one table. (Failures a transform component returns carry
//! their own codes and are status-checked by the engine; agent failures take theirs from
//! `AcpError`.)

use devin_bridge_types::Failure;

/// A failure the host itself decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostFailure {
    /// No such endpoint.
    NotFound,
    /// The endpoint exists, not for this method.
    MethodNotAllowed,
    /// No or a wrong local API key.
    Unauthorized,
    /// The body is over `[server] max_body_bytes`.
    RequestTooLarge,
    /// The body could not be read or is not UTF-8.
    InvalidRequest,
    /// The request's input estimate is over its model's context window.
    PromptTooLong,
    /// Every turn slot stayed busy for `[server] queue_timeout_ms`.
    Overloaded,
    /// A transform trapped, timed out or ran out of memory (the engine's code is kept).
    Transform,
    /// The reply narrated a client action instead of requesting it with a tool envelope.
    UnexecutedActionNarrative,
}

impl HostFailure {
    /// The one table: code, HTTP status, may the agent repair it.
    const fn spec(self) -> (&'static str, u16, bool) {
        match self {
            HostFailure::NotFound => ("not_found", 404, false),
            HostFailure::MethodNotAllowed => ("method_not_allowed", 405, false),
            HostFailure::Unauthorized => ("unauthorized", 401, false),
            HostFailure::RequestTooLarge => ("request_too_large", 413, false),
            HostFailure::InvalidRequest => ("invalid_request", 400, false),
            HostFailure::PromptTooLong => ("prompt_too_long", 400, false),
            HostFailure::Overloaded => ("overloaded", 529, false),
            HostFailure::Transform => ("transform_trap", 500, false),
            HostFailure::UnexecutedActionNarrative => ("unexecuted_action_narrative", 502, true),
        }
    }

    /// This failure with `message`.
    pub(crate) fn with(self, message: impl Into<String>) -> Failure {
        let (code, status, repairable) = self.spec();
        Failure {
            code: code.to_owned(),
            message: message.into(),
            status,
            repairable,
        }
    }

    /// A transform's failure under the engine's own code (`transform_timeout`, ...), with this
    /// entry's status.
    pub(crate) fn with_code(self, code: &str, message: impl Into<String>) -> Failure {
        Failure {
            code: code.to_owned(),
            ..self.with(message)
        }
    }
}

/// Seconds a client is told to wait before retrying a turn the agent's service turned away
/// for now (`retry-after` of a 429), when the service did not say how long.
pub(crate) const RETRY_AFTER_SECONDS: u64 = 5;

/// How a failure's message states the wait the agent's service asked for. A [`Failure`] is a
/// record of the transforms' interface and has no field for it, so the wait rides in the
/// message a client reads anyway, written and read only here.
const RETRY_AFTER_NOTE: (&str, &str) = (" (retry after ", " s)");

/// `message` with the wait the agent's service asked for, when it gave one.
pub(crate) fn with_retry_after(message: String, seconds: Option<u64>) -> String {
    match seconds {
        Some(seconds) => format!(
            "{message}{}{seconds}{}",
            RETRY_AFTER_NOTE.0, RETRY_AFTER_NOTE.1
        ),
        None => message,
    }
}

/// The `retry-after` of a 429: the wait the failure's message states, else
/// [`RETRY_AFTER_SECONDS`].
pub(crate) fn retry_after_of(failure: &Failure) -> u64 {
    failure
        .message
        .strip_suffix(RETRY_AFTER_NOTE.1)
        .and_then(|rest| rest.rsplit_once(RETRY_AFTER_NOTE.0))
        .and_then(|(_, seconds)| seconds.parse::<u64>().ok())
        .filter(|seconds| *seconds > 0)
        .unwrap_or(RETRY_AFTER_SECONDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_error_statuses_and_only_the_narrative_is_repairable() {
        use HostFailure::*;
        for failure in [
            NotFound,
            MethodNotAllowed,
            Unauthorized,
            RequestTooLarge,
            InvalidRequest,
            PromptTooLong,
            Overloaded,
            Transform,
            UnexecutedActionNarrative,
        ] {
            let built = failure.with("m");
            assert!(
                devin_bridge_engine::is_error_status(built.status),
                "{failure:?}"
            );
            assert_eq!(built.code, failure.spec().0);
            assert_eq!(
                built.repairable,
                failure == UnexecutedActionNarrative,
                "{failure:?}"
            );
        }
        assert_eq!(
            Transform.with_code("transform_timeout", "x").code,
            "transform_timeout"
        );
    }

    #[test]
    fn the_wait_the_agent_asked_for_is_the_retry_after() {
        let failure = |message: String| Failure {
            code: "agent_rate_limited".into(),
            message,
            status: 429,
            repairable: false,
        };
        let stated = with_retry_after("rate limited".into(), Some(30));
        assert_eq!(stated, "rate limited (retry after 30 s)");
        assert_eq!(retry_after_of(&failure(stated)), 30);
        assert_eq!(
            retry_after_of(&failure(with_retry_after("x".into(), None))),
            RETRY_AFTER_SECONDS
        );
        assert_eq!(
            retry_after_of(&failure("x (retry after soon s)".into())),
            RETRY_AFTER_SECONDS
        );
        assert_eq!(
            retry_after_of(&failure(with_retry_after("x".into(), Some(0)))),
            RETRY_AFTER_SECONDS
        );
    }
}
