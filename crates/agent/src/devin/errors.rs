//! Devin's JSON-RPC errors as typed [`AcpError`]s.
//!
//! The CLI puts its own classification in the error's `data`:
//! `{"cognition.ai/errorKind": <snake_case kind>, "cognition.ai/retryable": <bool>}`, with codes
//! of its own. Recorded:
//!
//! | code | kind | meaning | here |
//! |---|---|---|---|
//! | -32010 | `unavailable` | a rate limit, or the service could not be reached ("Connection error ...") | [`AcpError::RateLimited`] or [`AcpError::Network`], by the message |
//! | -32011 | `resource_exhausted` | credits or quota used up | [`AcpError::QuotaExceeded`] |
//! | -32016 | `session_not_found` | `session/load` of an unknown id | [`AcpError::SessionNotFound`] |
//! | -32000 | (none) | the CLI is not logged in | [`AcpError::Unauthenticated`] |
//!
//! Whatever the code, a message saying the client's "version is out of date" is the service
//! refusing the `clientInfo` the bridge sent: [`AcpError::ClientIdentityRefused`]; and
//! "Model not found: X. Available models: a, b" (a model a session refuses, such as
//! `adaptive`, in ACP and in print mode) is [`AcpError::ModelNotOffered`] with that list. Any other
//! error is a bounded [`AcpError::Rpc`] carrying the kind (when it is a short snake_case word)
//! and `retryable` (when it is a boolean). The code is read first when the kind is missing. A
//! `data` or kind of the wrong type is ignored, never trusted.

use serde_json::Value;

use crate::error::AcpError;

/// `-32010`: `unavailable`.
pub const CODE_UNAVAILABLE: i64 = -32010;
/// `-32011`: `resource_exhausted`.
pub const CODE_RESOURCE_EXHAUSTED: i64 = -32011;
/// `-32016`: `session_not_found`.
pub const CODE_SESSION_NOT_FOUND: i64 = -32016;
/// `-32000`: the CLI is not logged in.
pub const CODE_NOT_AUTHENTICATED: i64 = -32000;

const KIND_POINTER: &str = "/data/cognition.ai~1errorKind";
const RETRYABLE_POINTER: &str = "/data/cognition.ai~1retryable";
/// Longest error kind kept (characters); a longer one is not a kind.
const MAX_KIND_CHARS: usize = 64;
/// At most this many bytes of an agent's error message are kept. The text is untrusted: the
/// mode that shows it to anyone cleans it first (summarizer: the sse component).
pub const MAX_AGENT_MESSAGE_BYTES: usize = 4096;

/// A JSON-RPC error object from the agent, classified.
pub fn classify(error: &Value) -> AcpError {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
    let message = bounded(
        error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    );
    let kind = error
        .pointer(KIND_POINTER)
        .and_then(Value::as_str)
        .filter(|kind| is_kind(kind))
        .map(str::to_owned);
    let retryable = error.pointer(RETRYABLE_POINTER).and_then(Value::as_bool);
    if identity_refused(&message) {
        return AcpError::ClientIdentityRefused;
    }
    if let Some((model, offered)) = model_not_found(&message) {
        return AcpError::ModelNotOffered { model, offered };
    }
    let kind_or_code = kind.as_deref().or(match code {
        CODE_UNAVAILABLE => Some("unavailable"),
        CODE_RESOURCE_EXHAUSTED => Some("resource_exhausted"),
        CODE_SESSION_NOT_FOUND => Some("session_not_found"),
        _ => None,
    });
    match kind_or_code {
        Some("unavailable") => {
            // The CLI retries these itself before giving up; a caller may try again later.
            let retryable = retryable.unwrap_or(true);
            if mentions_rate_limit(&message) {
                AcpError::RateLimited { retryable }
            } else {
                AcpError::Network { retryable }
            }
        }
        Some("resource_exhausted") => AcpError::QuotaExceeded,
        Some("session_not_found") => AcpError::SessionNotFound,
        Some("unauthenticated") => AcpError::Unauthenticated,
        _ if code == CODE_NOT_AUTHENTICATED => AcpError::Unauthenticated,
        _ => AcpError::Rpc {
            code,
            message,
            kind,
            retryable: retryable.unwrap_or(false),
        },
    }
}

/// The service's answer to a `clientInfo` it does not accept ("Your Windsurf version is out of
/// date"), matched without case and without the editor's name, which may change.
pub fn identity_refused(message: &str) -> bool {
    message
        .to_ascii_lowercase()
        .contains("version is out of date")
}

/// `Model not found: X. Available models: a, b, c`: the model and the list, bounded.
fn model_not_found(message: &str) -> Option<(String, Vec<String>)> {
    const MAX_MODELS: usize = 256;
    let rest = message.strip_prefix("Model not found:")?.trim_start();
    let (model, available) = match rest.split_once(". Available models:") {
        Some((model, available)) => (model, available),
        None => (rest.trim_end_matches('.'), ""),
    };
    let offered = available
        .split(',')
        .map(|value| value.trim().trim_end_matches('.'))
        .filter(|value| !value.is_empty())
        .take(MAX_MODELS)
        .map(|value| value.chars().take(MAX_KIND_CHARS).collect())
        .collect();
    Some((model.trim().chars().take(MAX_KIND_CHARS).collect(), offered))
}

fn mentions_rate_limit(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    ["rate limit", "rate-limit", "ratelimit", "too many requests"]
        .iter()
        .any(|needle| lower.contains(needle))
}

/// A kind is a short word of lowercase letters, digits and `_`.
fn is_kind(kind: &str) -> bool {
    !kind.is_empty()
        && kind.len() <= MAX_KIND_CHARS
        && kind
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The first `MAX_AGENT_MESSAGE_BYTES` of `message`, cut at a character boundary.
pub fn bounded(message: &str) -> String {
    let mut end = message.len().min(MAX_AGENT_MESSAGE_BYTES);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error(code: i64, message: &str, kind: Option<&str>, retryable: Option<bool>) -> Value {
        let mut data = serde_json::Map::new();
        if let Some(kind) = kind {
            data.insert("cognition.ai/errorKind".into(), json!(kind));
        }
        if let Some(retryable) = retryable {
            data.insert("cognition.ai/retryable".into(), json!(retryable));
        }
        json!({"code": code, "message": message, "data": data})
    }

    #[test]
    fn the_recorded_kinds_and_codes_are_typed() {
        assert!(matches!(
            classify(&error(
                -32010,
                "Rate limit exceeded",
                Some("unavailable"),
                Some(true)
            )),
            AcpError::RateLimited { retryable: true }
        ));
        assert!(matches!(
            classify(&error(
                -32010,
                "Connection error: reset",
                Some("unavailable"),
                Some(true)
            )),
            AcpError::Network { retryable: true }
        ));
        assert!(matches!(
            classify(&error(
                -32010,
                "Too Many Requests",
                Some("unavailable"),
                Some(false)
            )),
            AcpError::RateLimited { retryable: false }
        ));
        assert!(matches!(
            classify(&error(
                -32011,
                "out of credits",
                Some("resource_exhausted"),
                Some(false)
            )),
            AcpError::QuotaExceeded
        ));
        assert!(matches!(
            classify(&error(
                -32016,
                "Session not found",
                Some("session_not_found"),
                Some(false)
            )),
            AcpError::SessionNotFound
        ));
        assert!(matches!(
            classify(&json!({"code": -32000, "message": "ACP host has not authenticated"})),
            AcpError::Unauthenticated
        ));
    }

    #[test]
    fn the_code_decides_when_the_kind_is_missing() {
        assert!(matches!(
            classify(&json!({"code": -32010, "message": "Connection error"})),
            AcpError::Network { retryable: true }
        ));
        assert!(matches!(
            classify(&json!({"code": -32011, "message": "x"})),
            AcpError::QuotaExceeded
        ));
        assert!(matches!(
            classify(&json!({"code": -32016})),
            AcpError::SessionNotFound
        ));
    }

    #[test]
    fn the_out_of_date_answer_is_an_identity_refusal_whatever_its_code() {
        for code in [-32603, -32000, -32010, 1] {
            let refused = classify(&error(
                code,
                "Your Windsurf version is out of date. Please update.",
                Some("internal"),
                Some(false),
            ));
            assert!(matches!(refused, AcpError::ClientIdentityRefused), "{code}");
            assert_eq!(refused.code(), "client_identity_refused");
        }
    }

    #[test]
    fn a_model_the_session_refuses_names_the_offered_ones() {
        let refused = classify(&error(
            -32602,
            "Model not found: adaptive. Available models: swe-2, swe-2-high, glm-5-2",
            None,
            None,
        ));
        match refused {
            AcpError::ModelNotOffered { model, offered } => {
                assert_eq!(model, "adaptive");
                assert_eq!(offered, ["swe-2", "swe-2-high", "glm-5-2"]);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            classify(&error(-32602, "Model not found: x", Some("invalid_argument"), None)),
            AcpError::ModelNotOffered { offered, .. } if offered.is_empty()
        ));
    }

    #[test]
    fn the_old_pascal_case_kinds_are_not_a_dialect() {
        // Kinds are snake_case; `RateLimited` is no kind at all and the code decides.
        match classify(&error(-32603, "x", Some("RateLimited"), Some(true))) {
            AcpError::Rpc {
                kind, retryable, ..
            } => {
                assert_eq!(kind, None);
                assert!(retryable);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_kinds_stay_bounded_typed_agent_errors() {
        match classify(&error(-32603, "boom", Some("internal"), Some(false))) {
            AcpError::Rpc {
                code,
                message,
                kind,
                retryable,
            } => {
                assert_eq!(code, -32603);
                assert_eq!(message, "boom");
                assert_eq!(kind.as_deref(), Some("internal"));
                assert!(!retryable);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_of_the_wrong_shape_or_size_are_bounded() {
        let huge = "é".repeat(100_000);
        let shapes = [
            json!({"code": -32603, "message": huge, "data": {"cognition.ai/errorKind": 42, "cognition.ai/retryable": "yes"}}),
            json!({"code": "x", "data": "oops"}),
            json!("not an object"),
            json!(null),
            json!({"code": -32603, "data": {"cognition.ai/errorKind": "x".repeat(65)}}),
            json!({"code": -32603, "data": {"cognition.ai/errorKind": "Bad Kind\n"}}),
        ];
        for shape in shapes {
            match classify(&shape) {
                AcpError::Rpc {
                    message,
                    kind,
                    retryable,
                    ..
                } => {
                    assert!(message.len() <= MAX_AGENT_MESSAGE_BYTES);
                    assert_eq!(kind, None, "{shape}");
                    assert!(!retryable);
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
