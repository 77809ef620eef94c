//! Anthropic-shaped error bodies.
//!
//! The error `type` comes from the one status table in `devin-bridge-types` (the host's
//! fallback renderer uses the same table). The message is passed through as is; producers
//! guarantee it carries no paths, stack traces or vendor names.

use devin_bridge_types::error_type;
use serde::Serialize;

use devin_bridge_types::Failure;

#[derive(Serialize)]
pub(crate) struct WireError<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    error: Detail<'a>,
}

#[derive(Serialize)]
struct Detail<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: &'a str,
}

/// `{"type":"error","error":{"type":..,"message":..}}`, the same in a body and in an event.
pub(crate) fn wire_error(failure: &Failure) -> WireError<'_> {
    WireError {
        kind: "error",
        error: Detail {
            kind: error_type(failure.status),
            message: &failure.message,
        },
    }
}
