//! Statuses that come out of components.
//!
//! A component's failure carries the HTTP status the host answers with. A component is
//! untrusted code, so that status is checked: anything but a client or server error (a
//! `101 Switching Protocols`, a `204 No Content`, a `304 Not Modified` would each change how
//! the client reads the answer) becomes `502` with a generic message. The component's own text
//! is dropped with it: a component that gets the status wrong cannot be trusted with the words.

use devin_bridge_types::Failure;

use super::TransformKind;

/// The stable code of a failure whose status a component got wrong.
pub const INVALID_STATUS_CODE: &str = "transform_invalid_status";

/// Whether `status` is one a failure may be answered with (4xx or 5xx).
pub fn is_error_status(status: u16) -> bool {
    (400..=599).contains(&status)
}

/// A failure as a component returned it, with its status checked. Logs one warning naming the
/// component, its code and the bad status when the status is refused.
pub(crate) fn checked_failure(transform: TransformKind, failure: Failure) -> Failure {
    if is_error_status(failure.status) {
        return failure;
    }
    // The code is component text: bounded before it reaches the log.
    let code: String = failure.code.chars().take(64).collect();
    tracing::warn!(
        %transform,
        code = %code.escape_debug(),
        status = failure.status,
        "component returned a failure with a non-error HTTP status; answering 502"
    );
    Failure {
        code: INVALID_STATUS_CODE.into(),
        message: "an internal transform returned an invalid failure".into(),
        status: 502,
        repairable: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(status: u16) -> Failure {
        Failure {
            code: "component_code".into(),
            message: "component text /secret/path".into(),
            status,
            repairable: true,
        }
    }

    #[test]
    fn error_statuses_pass_through_unchanged() {
        for status in [400, 401, 404, 413, 429, 499, 500, 502, 504, 529, 599] {
            assert_eq!(
                checked_failure(TransformKind::Serializer, failure(status)),
                failure(status)
            );
        }
    }

    #[test]
    fn non_error_statuses_become_a_generic_502() {
        for status in [0, 100, 101, 200, 204, 301, 304, 399, 600, 999, u16::MAX] {
            let checked = checked_failure(TransformKind::Envelope, failure(status));
            assert_eq!(checked.status, 502, "{status}");
            assert_eq!(checked.code, INVALID_STATUS_CODE, "{status}");
            assert!(!checked.repairable, "{status}");
            assert!(
                !checked.message.contains("component") && !checked.message.contains("/secret"),
                "component text leaked for {status}: {}",
                checked.message
            );
        }
    }
}
