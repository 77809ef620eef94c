//! The one table from HTTP status to Anthropic error `type`.
//!
//! The sse component renders error bodies with it and the host's own fallback renderer (used
//! only when that component is broken) uses it too, so a client sees the same `type` for a
//! status whichever side rendered the body.

/// The Anthropic error `type` for an HTTP status.
///
/// The type is derived from the status alone, never from a failure's code: codes are internal
/// vocabulary, and clients (and their retry logic) key on the Anthropic type. Statuses outside
/// the table fall back by class: any other 4xx is a client problem (`invalid_request_error`),
/// anything else, including a nonsensical non-error status from a buggy producer, is reported
/// as a server problem (`api_error`).
pub fn error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        500 | 502 => "api_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        // 400 itself, and every other client error.
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_statuses() {
        let table = [
            (400, "invalid_request_error"),
            (401, "authentication_error"),
            (403, "permission_error"),
            (404, "not_found_error"),
            (413, "request_too_large"),
            (429, "rate_limit_error"),
            (500, "api_error"),
            (502, "api_error"),
            (504, "timeout_error"),
            (529, "overloaded_error"),
        ];
        for (status, kind) in table {
            assert_eq!(error_type(status), kind, "status {status}");
        }
    }

    #[test]
    fn other_statuses_fall_back_by_class() {
        for status in [402, 405, 409, 422, 499] {
            assert_eq!(error_type(status), "invalid_request_error", "{status}");
        }
        for status in [501, 503, 505, 599] {
            assert_eq!(error_type(status), "api_error", "{status}");
        }
    }

    #[test]
    fn non_error_statuses_are_server_errors() {
        for status in [0, 100, 101, 200, 204, 302, 304, 399, 600, u16::MAX] {
            assert_eq!(error_type(status), "api_error", "{status}");
        }
    }
}
