//! Devin's JSON-RPC errors as typed [`AcpError`]s.
//!
//! The CLI puts its own classification in the error's `data`:
//! `{"cognition.ai/errorKind": <snake_case kind>, "cognition.ai/retryable": <bool>,
//! "cognition.ai/retryAfterSeconds"?: <n>}`, with codes of its own. Recorded:
//!
//! | code | kind | meaning | here |
//! |---|---|---|---|
//! | -32010 | `unavailable` | a rate limit, or the service could not be reached ("Connection error ...") | [`AcpError::RateLimited`] or [`AcpError::Network`], by the message |
//! | -32011 | `resource_exhausted` | credits or quota used up (sent with `retryable: true`) | [`AcpError::QuotaExceeded`], never retryable |
//! | -32016 | `session_not_found` | `session/load` of an unknown id | [`AcpError::SessionNotFound`] |
//! | (any) | `content_filter` | the service withheld the reply | [`AcpError::ContentFiltered`] |
//! | -32000 | (none) | `session/new` of a CLI that is not logged in (older CLIs) | [`AcpError::Unauthenticated`] |
//! | -32603 | (not recorded) | "Authentication failed: ... Run `/login` ..." at `session/prompt` (newer CLIs) | [`AcpError::Unauthenticated`] |
//!
//! Whatever the code: a message saying the client's "version is out of date" is the service
//! refusing the `clientInfo` the bridge sent ([`AcpError::ClientIdentityRefused`]); a message
//! saying the CLI has not authenticated, or that authentication failed, is
//! [`AcpError::Unauthenticated`]; and "Model not found: X. Available models: a, b" (a model a
//! session refuses, such as `adaptive`) is [`AcpError::ModelNotOffered`] with that list. The
//! real CLI answers an unknown model with the message "Resource not found" and puts that text
//! in `data.uri` (its code is not recorded), so the text is looked for in the message, then in
//! `data.uri`, then in any other string of `data`. `retryAfterSeconds` is kept (bounded) on
//! the failures a client may retry. Any other error is a bounded [`AcpError::Rpc`] carrying the
//! kind (when it is a short snake_case word) and `retryable` (when it is a boolean). The code
//! is read first when the kind is missing. A `data` or kind of the wrong type is ignored, never
//! trusted.

use serde_json::Value;

use crate::error::AcpError;

/// `-32010`: `unavailable`.
pub const CODE_UNAVAILABLE: i64 = -32010;
/// `-32011`: `resource_exhausted`.
pub const CODE_RESOURCE_EXHAUSTED: i64 = -32011;
/// `-32016`: `session_not_found`.
pub const CODE_SESSION_NOT_FOUND: i64 = -32016;
/// `-32000`: the CLI is not logged in (older CLIs, at `session/new`).
pub const CODE_NOT_AUTHENTICATED: i64 = -32000;

const KIND_POINTER: &str = "/data/cognition.ai~1errorKind";
const RETRYABLE_POINTER: &str = "/data/cognition.ai~1retryable";
const RETRY_AFTER_POINTER: &str = "/data/cognition.ai~1retryAfterSeconds";
/// Longest wait kept from `retryAfterSeconds` (an hour); a longer one is cut to it.
pub const MAX_RETRY_AFTER_SECONDS: u64 = 3600;
/// Longest error kind kept (characters); a longer one is not a kind.
const MAX_KIND_CHARS: usize = 64;
/// Most strings of an error's `data` searched for the unknown-model text.
const MAX_DATA_STRINGS: usize = 32;
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
    let retry_after = retry_after(error.pointer(RETRY_AFTER_POINTER));
    if identity_refused(&message) {
        return AcpError::ClientIdentityRefused;
    }
    if let Some((model, offered)) = texts(&message, error.get("data")).find_map(model_not_found) {
        return AcpError::ModelNotOffered { model, offered };
    }
    if not_signed_in(&message) {
        return AcpError::Unauthenticated;
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
                AcpError::RateLimited {
                    retryable,
                    retry_after,
                }
            } else {
                AcpError::Network {
                    retryable,
                    retry_after,
                }
            }
        }
        // Recorded with `retryable: true`: not trusted, a quota is a clear refusal.
        Some("resource_exhausted") => AcpError::QuotaExceeded {
            message: (!message.is_empty()).then_some(message),
        },
        Some("session_not_found") => AcpError::SessionNotFound,
        Some("content_filter") => AcpError::ContentFiltered,
        Some("unauthenticated") => AcpError::Unauthenticated,
        _ if code == CODE_NOT_AUTHENTICATED => AcpError::Unauthenticated,
        _ => AcpError::Rpc {
            code,
            message,
            kind,
            retryable: retryable.unwrap_or(false),
            retry_after,
        },
    }
}

/// `retryAfterSeconds`: a non-negative number of seconds (a fraction rounds up), at most
/// [`MAX_RETRY_AFTER_SECONDS`].
fn retry_after(value: Option<&Value>) -> Option<u64> {
    let value = value?;
    let seconds = match value.as_u64() {
        Some(whole) => whole,
        None => {
            let fraction = value.as_f64().filter(|n| n.is_finite() && *n >= 0.0)?;
            // In range: checked against the cap before the cast.
            if fraction >= MAX_RETRY_AFTER_SECONDS as f64 {
                MAX_RETRY_AFTER_SECONDS
            } else {
                fraction.ceil() as u64
            }
        }
    };
    Some(seconds.min(MAX_RETRY_AFTER_SECONDS))
}

/// The message, then `data.uri`, then the other strings of `data` (bounded).
fn texts<'a>(message: &'a str, data: Option<&'a Value>) -> impl Iterator<Item = &'a str> {
    let uri = data
        .and_then(|data| data.get("uri"))
        .and_then(Value::as_str);
    let others = data
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|map| map.iter())
        .filter(|(key, _)| key.as_str() != "uri")
        .filter_map(|(_, value)| value.as_str())
        .take(MAX_DATA_STRINGS);
    std::iter::once(message).chain(uri).chain(others)
}

/// The CLI's ways of saying it is not signed in: "ACP host has not authenticated" (older CLIs,
/// at `session/new`) and "Authentication failed: Please authenticate to continue. Run `/login`
/// to log in." (newer ones, at the prompt), matched without case.
pub fn not_signed_in(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    [
        "has not authenticated",
        "authentication failed",
        "not logged in",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// The service's answer to a `clientInfo` it does not accept ("Your Windsurf version is out of
/// date"), matched without case and without the editor's name, which may change.
pub fn identity_refused(message: &str) -> bool {
    message
        .to_ascii_lowercase()
        .contains("version is out of date")
}

/// `Model not found: X. Available models: a, b, c` anywhere in `text`: the model and the list,
/// bounded. The list ends at the text's end or at a line break or quote (a client may have
/// rendered the JSON of `data` after it).
fn model_not_found(text: &str) -> Option<(String, Vec<String>)> {
    const MARKER: &str = "Model not found:";
    const MAX_MODELS: usize = 256;
    let at = text.find(MARKER)?;
    let rest = text[at + MARKER.len()..].trim_start();
    let rest = rest.split(['\n', '"']).next().unwrap_or_default();
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
            AcpError::RateLimited {
                retryable: true,
                ..
            }
        ));
        assert!(matches!(
            classify(&error(
                -32010,
                "Connection error: reset",
                Some("unavailable"),
                Some(true)
            )),
            AcpError::Network {
                retryable: true,
                ..
            }
        ));
        assert!(matches!(
            classify(&error(
                -32010,
                "Too Many Requests",
                Some("unavailable"),
                Some(false)
            )),
            AcpError::RateLimited {
                retryable: false,
                ..
            }
        ));
        assert!(matches!(
            classify(&error(
                -32011,
                "out of credits",
                Some("resource_exhausted"),
                Some(false)
            )),
            AcpError::QuotaExceeded { .. }
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
            AcpError::Network {
                retryable: true,
                ..
            }
        ));
        assert!(matches!(
            classify(&json!({"code": -32011, "message": "x"})),
            AcpError::QuotaExceeded { .. }
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
                retry_after,
            } => {
                assert_eq!(retry_after, None);
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

    /// The unknown-model answer as the real CLI sends it: a generic message, the text in
    /// `data.uri`, a code that is not recorded.
    #[test]
    fn an_unknown_model_is_found_in_data_uri_whatever_the_code() {
        for code in [-32002, -32603, -32602, 0] {
            let error = json!({"code": code, "message": "Resource not found", "data": {
                "uri": "Model not found: gpt-9. Available models: swe-1-6-slow, swe-2-high, glm-5-2"}});
            match classify(&error) {
                AcpError::ModelNotOffered { model, offered } => {
                    assert_eq!(model, "gpt-9", "{code}");
                    assert_eq!(offered, ["swe-1-6-slow", "swe-2-high", "glm-5-2"]);
                }
                other => panic!("{code}: {other:?}"),
            }
        }
        // A client's rendering: the message followed by the JSON of `data`.
        let rendered = json!({"code": -32002, "message":
            "Resource not found: {\n  \"uri\": \"Model not found: x. Available models: a, b\"\n}"});
        assert!(matches!(
            classify(&rendered),
            AcpError::ModelNotOffered { model, offered } if model == "x" && offered == ["a", "b"]
        ));
        // Another string of `data`; and a "Resource not found" without the text stays an error.
        let elsewhere = json!({"code": -32002, "message": "Resource not found",
            "data": {"detail": "Model not found: y. Available models: c"}});
        assert!(
            matches!(classify(&elsewhere), AcpError::ModelNotOffered { model, .. } if model == "y")
        );
        let plain =
            json!({"code": -32002, "message": "Resource not found", "data": {"uri": "file:///x"}});
        assert!(matches!(
            classify(&plain),
            AcpError::Rpc { code: -32002, .. }
        ));
    }

    /// Both logged-out answers: `-32000` at `session/new` (older CLIs) and `-32603`
    /// "Authentication failed ... Run `/login`" at the prompt (newer ones).
    #[test]
    fn both_logged_out_answers_are_not_signed_in() {
        let older = json!({"code": -32000, "message": "ACP host has not authenticated. Please authenticate first."});
        let newer = json!({"code": -32603, "message":
            "Authentication failed: Please authenticate to continue. Run `/login` to log in."});
        for error in [older, newer] {
            let classified = classify(&error);
            assert!(matches!(classified, AcpError::Unauthenticated), "{error}");
            assert_eq!(classified.code(), "agent_unauthenticated");
        }
        // The text decides whatever the code and kind.
        let kinded = error(
            -32603,
            "authentication failed",
            Some("unknown"),
            Some(false),
        );
        assert!(matches!(classify(&kinded), AcpError::Unauthenticated));
        assert!(!not_signed_in("Rate limit exceeded"));
    }

    #[test]
    fn retry_after_is_kept_bounded_on_what_a_client_may_retry() {
        let mut limited = error(
            -32010,
            "Reached overall message rate limit",
            Some("unavailable"),
            Some(true),
        );
        limited["data"]["cognition.ai/retryAfterSeconds"] = json!(30);
        let classified = classify(&limited);
        assert!(matches!(
            classified,
            AcpError::RateLimited {
                retryable: true,
                retry_after: Some(30)
            }
        ));
        assert_eq!(classified.retry_after(), Some(30));
        assert_eq!(classified.status(), 429);
        limited["data"]["cognition.ai/retryAfterSeconds"] = json!(2.2);
        assert_eq!(classify(&limited).retry_after(), Some(3));
        limited["data"]["cognition.ai/retryAfterSeconds"] = json!(1_000_000);
        assert_eq!(
            classify(&limited).retry_after(),
            Some(MAX_RETRY_AFTER_SECONDS)
        );
        for bad in [json!(-1), json!("30"), json!(null), json!(f64::MAX)] {
            limited["data"]["cognition.ai/retryAfterSeconds"] = bad.clone();
            let kept = classify(&limited).retry_after();
            assert!(
                kept.is_none() || kept == Some(MAX_RETRY_AFTER_SECONDS),
                "{bad}: {kept:?}"
            );
        }
        // A wait on a failure nobody retries is not passed on.
        let mut unknown = error(-32603, "boom", Some("deadline_exceeded"), Some(false));
        unknown["data"]["cognition.ai/retryAfterSeconds"] = json!(9);
        assert_eq!(classify(&unknown).retry_after(), None);
        unknown["data"]["cognition.ai/retryable"] = json!(true);
        assert_eq!(classify(&unknown).retry_after(), Some(9));
    }

    #[test]
    fn an_exhausted_quota_is_a_clear_refusal_even_when_flagged_retryable() {
        let quota = classify(&error(
            -32011,
            "Quota exhausted.",
            Some("resource_exhausted"),
            Some(true),
        ));
        assert!(
            matches!(&quota, AcpError::QuotaExceeded { message: Some(m) } if m == "Quota exhausted.")
        );
        assert!(!quota.retryable());
        assert_eq!(quota.status(), 400);
        assert_eq!(quota.retry_after(), None);
    }

    #[test]
    fn a_content_filter_kind_is_its_own_failure() {
        let filtered = classify(&error(
            -32603,
            "blocked",
            Some("content_filter"),
            Some(false),
        ));
        assert!(matches!(filtered, AcpError::ContentFiltered));
        assert_eq!(filtered.code(), "agent_content_filtered");
        assert_eq!(filtered.status(), 400);
    }
}
