//! Faults a test switches on at run time; every method takes `&self` and is thread-safe.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

#[derive(Default)]
pub struct Faults {
    fail_next: AtomicUsize,
    fail_status: AtomicU16,
    unauthorized: AtomicBool,
    duplicate_events: AtomicBool,
    end_streams_after: Mutex<Option<usize>>,
    stall_next_stream: AtomicBool,
    drop_gateway_url: AtomicBool,
    claim_conflicts: AtomicUsize,
    release_answer_delay: Mutex<Option<Duration>>,
}

impl Faults {
    /// The next `n` fleet API requests answer `status` (e.g. a burst of 503s).
    pub fn fail_next(&self, n: usize, status: u16) {
        self.fail_status.store(status, Ordering::SeqCst);
        self.fail_next.store(n, Ordering::SeqCst);
    }

    /// Every fleet API request answers 401, as if the token had been revoked.
    pub fn unauthorized(&self, on: bool) {
        self.unauthorized.store(on, Ordering::SeqCst);
    }

    /// Every watch event is sent twice (on open streams too).
    pub fn duplicate_events(&self, on: bool) {
        self.duplicate_events.store(on, Ordering::SeqCst);
    }

    /// Watch streams opened from now on close after `n` events (a duplicated event counts
    /// once; `None`: only at the maximum duration).
    pub fn end_streams_after(&self, n: Option<usize>) {
        *self
            .end_streams_after
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = n;
    }

    /// The next watch stream writes half of an event, then hangs: no close, no keepalive.
    pub fn stall_next_stream_mid_event(&self) {
        self.stall_next_stream.store(true, Ordering::SeqCst);
    }

    /// Claim responses carry no `status.gateway_url`.
    pub fn drop_gateway_url(&self, on: bool) {
        self.drop_gateway_url.store(on, Ordering::SeqCst);
    }

    /// The next `n` claims answer 409 as if another worker had won them.
    pub fn claim_conflict_next(&self, n: usize) {
        self.claim_conflicts.store(n, Ordering::SeqCst);
    }

    /// Releases take effect at once (their watch event goes out), but their answer reaches
    /// the worker only after `delay`, as on a slow return path (`None`: at once).
    pub fn delay_release_answers(&self, delay: Option<Duration>) {
        *self
            .release_answer_delay
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = delay;
    }

    pub(crate) fn release_answer_delay(&self) -> Option<Duration> {
        *self
            .release_answer_delay
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The status to fail this request with, if a `fail_next` burst is running.
    pub(crate) fn take_failure(&self) -> Option<u16> {
        take_one(&self.fail_next).then(|| self.fail_status.load(Ordering::SeqCst))
    }

    pub(crate) fn is_unauthorized(&self) -> bool {
        self.unauthorized.load(Ordering::SeqCst)
    }

    pub(crate) fn duplicating(&self) -> bool {
        self.duplicate_events.load(Ordering::SeqCst)
    }

    pub(crate) fn stream_limit(&self) -> Option<usize> {
        *self
            .end_streams_after
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn take_stall(&self) -> bool {
        self.stall_next_stream.swap(false, Ordering::SeqCst)
    }

    pub(crate) fn dropping_gateway_url(&self) -> bool {
        self.drop_gateway_url.load(Ordering::SeqCst)
    }

    pub(crate) fn take_claim_conflict(&self) -> bool {
        take_one(&self.claim_conflicts)
    }
}

/// Decrements `counter` if it is above zero; true if it did.
fn take_one(counter: &AtomicUsize) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}
