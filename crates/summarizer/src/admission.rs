//! Who may ask and how much at once: the local API key, the request body's limit, the turn
//! slots a turn waits for, and the count of turns running.
//!
//! Invariants:
//! - With a key configured, an API request without it is refused before its body is read
//!   (`/healthz` and `/metrics` ask for none).
//! - A body over the limit is refused (413) without being read past the limit: a declared
//!   length over it before reading, a body that grows over it while read.
//! - At most `max_concurrent_turns` turns hold a slot; a turn that finds none within the queue
//!   timeout is refused with `529 overloaded_error`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use devin_bridge_types::Failure;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::Request;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::auth::ApiKey;
use crate::failures::HostFailure;
use crate::policy::ServerSection;

/// The admission of requests and turns.
pub(crate) struct Admission {
    key: Option<ApiKey>,
    max_body: usize,
    turn_slots: Arc<Semaphore>,
    queue_timeout: Duration,
    in_flight: AtomicUsize,
}

impl Admission {
    /// The admission `[server]` sets up, with the key loaded from its `api_key_file`.
    pub(crate) fn new(key: Option<ApiKey>, server: &ServerSection) -> Self {
        Self {
            key,
            max_body: server.max_body_bytes,
            turn_slots: Arc::new(Semaphore::new(server.max_concurrent_turns)),
            queue_timeout: Duration::from_millis(server.queue_timeout_ms),
            in_flight: AtomicUsize::new(0),
        }
    }

    /// Whether the request's headers carry the key (always, when none is configured).
    pub(crate) fn accepts(&self, headers: &hyper::HeaderMap) -> bool {
        self.key.as_ref().is_none_or(|key| key.accepts(headers))
    }

    /// Reads the body within the limit (413 beyond it) as UTF-8 text.
    pub(crate) async fn read_body(&self, request: Request<Incoming>) -> Result<String, Failure> {
        let max_body = self.max_body;
        let too_large =
            || HostFailure::RequestTooLarge.with(format!("request body exceeds {max_body} bytes"));
        let declared = request
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<usize>().ok());
        if declared.is_some_and(|length| length > max_body) {
            return Err(too_large());
        }
        let collected = Limited::new(request.into_body(), max_body)
            .collect()
            .await
            .map_err(|error| {
                if error.is::<http_body_util::LengthLimitError>() {
                    too_large()
                } else {
                    HostFailure::InvalidRequest.with("the request body could not be read")
                }
            })?;
        // `Vec::from` takes over the collected buffer when nothing else holds it, instead of
        // copying a body that may be megabytes.
        String::from_utf8(Vec::from(collected.to_bytes()))
            .map_err(|_| HostFailure::InvalidRequest.with("the request body is not UTF-8"))
    }

    /// Waits for a turn slot; `529 overloaded_error` when none frees up in time.
    pub(crate) async fn turn_slot(&self) -> Result<OwnedSemaphorePermit, Failure> {
        match tokio::time::timeout(self.queue_timeout, self.turn_slots.clone().acquire_owned())
            .await
        {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(HostFailure::Overloaded.with("all agent slots are busy; retry later")),
        }
    }

    /// Counts a running turn (for `/healthz` and `/metrics`) while the guard lives.
    pub(crate) fn running(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(&self.in_flight)
    }

    /// Turns running now.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }
}

/// Counts a running turn while alive (see [`Admission::running`]).
pub(crate) struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(max_concurrent_turns: usize, queue_timeout_ms: u64) -> Admission {
        let server = ServerSection {
            max_concurrent_turns,
            queue_timeout_ms,
            ..ServerSection::default()
        };
        Admission::new(None, &server)
    }

    #[test]
    fn running_turns_are_counted_while_their_guards_live() {
        let admission = admission(1, 10);
        assert_eq!(admission.in_flight(), 0);
        let first = admission.running();
        let second = admission.running();
        assert_eq!(admission.in_flight(), 2);
        drop(first);
        assert_eq!(admission.in_flight(), 1);
        drop(second);
        assert_eq!(admission.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_turn_that_finds_no_slot_in_time_is_overloaded() {
        let admission = admission(1, 20);
        let held = admission.turn_slot().await.expect("the one slot");
        let refused = admission.turn_slot().await.expect_err("no slot left");
        assert_eq!(refused.status, 529);
        drop(held);
        assert!(admission.turn_slot().await.is_ok());
    }

    #[test]
    fn without_a_key_every_request_is_accepted_with_one_only_a_request_presenting_it() {
        let bare = hyper::HeaderMap::new();
        assert!(admission(1, 10).accepts(&bare));
        let keyed = Admission::new(Some(ApiKey::new("local-key")), &ServerSection::default());
        assert!(!keyed.accepts(&bare));
        let mut presented = hyper::HeaderMap::new();
        presented.insert("x-api-key", "local-key".parse().expect("header"));
        assert!(keyed.accepts(&presented));
    }
}
