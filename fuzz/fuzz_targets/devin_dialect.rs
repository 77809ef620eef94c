#![no_main]
//! What the Devin CLI says about a failure: a JSON-RPC error object (ACP) or a print run's
//! stderr (`devin -p`), both untrusted. The first byte picks the reading: odd, the rest as a
//! print run's stderr with exit status 1 or 2; even, the rest as a JSON-RPC error (raw JSON
//! when it parses, else its text as the message of a -32010 error). Either way the
//! classification never panics, keeps agent text within its bounds (the quota's explanation
//! too), keeps a kind only when it is a short snake_case word, and passes on a bounded
//! `retryAfterSeconds` only with a retryable failure.

use devin_bridge_agent::acp::AcpError;
use devin_bridge_agent::devin::errors::{
    classify, MAX_AGENT_MESSAGE_BYTES, MAX_RETRY_AFTER_SECONDS,
};
use devin_bridge_agent::devin::print::{failure, PrintFailure};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fn check(error: &AcpError) {
    match error {
        AcpError::Rpc { message, kind, .. } => {
            assert!(message.len() <= MAX_AGENT_MESSAGE_BYTES);
            if let Some(kind) = kind {
                assert!(!kind.is_empty() && kind.len() <= 64);
                assert!(kind
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
            }
        }
        AcpError::QuotaExceeded {
            message: Some(message),
        } => assert!(message.len() <= MAX_AGENT_MESSAGE_BYTES),
        AcpError::ModelNotOffered { model, offered } => {
            assert!(model.chars().count() <= 64);
            assert!(offered.len() <= 256);
            assert!(offered.iter().all(|value| value.chars().count() <= 64));
        }
        _ => {}
    }
    // A wait is passed on only for what a client retries, and bounded.
    if let Some(seconds) = error.retry_after() {
        assert!(error.retryable() && seconds <= MAX_RETRY_AFTER_SECONDS);
    }
    // Every error has a stable code and an HTTP status that is an error status.
    assert!(!error.code().is_empty());
    assert!((400..=599).contains(&error.status()));
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    if control & 1 == 1 {
        let exit = if control & 2 == 2 { 2 } else { 1 };
        match failure(&text, Some(exit)) {
            PrintFailure::Agent(error) => check(&error),
            PrintFailure::Usage(line) | PrintFailure::Other(line) => {
                assert!(line.chars().count() <= 300);
            }
            PrintFailure::NotLoggedIn => {}
        }
    } else {
        let error = serde_json::from_slice::<Value>(rest)
            .unwrap_or_else(|_| json!({"code": -32010, "message": text}));
        check(&classify(&error));
    }
});
