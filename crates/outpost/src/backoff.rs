//! Retry delays: exponential, factor 2, with jitter, built on `backon`. The queue loop's run
//! from 0.8 s to 30 s (the schedule Kubernetes reflectors use); a worker's retries of sessions
//! that fail to start on its machine from 1 s to a minute.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// A backoff schedule that starts over after a success.
pub(crate) struct Backoff {
    builder: ExponentialBuilder,
    current: ExponentialBackoff,
}

impl Backoff {
    /// The queue loop's schedule.
    pub(crate) fn queue() -> Self {
        Self::new(Duration::from_millis(800), Duration::from_secs(30))
    }

    /// Retries of a worker whose sessions fail to start on its machine: from 1 s to a minute,
    /// so a broken machine claims about one session a minute until it is mended.
    pub(crate) fn local_failures() -> Self {
        Self::new(Duration::from_secs(1), Duration::from_secs(60))
    }

    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        let builder = ExponentialBuilder::default()
            .with_min_delay(min)
            .with_max_delay(max)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        Self {
            current: builder.build(),
            builder,
        }
    }

    /// The next delay.
    pub(crate) fn next_delay(&mut self) -> Duration {
        self.current.next().unwrap_or(Duration::from_secs(30))
    }

    /// Starts over (after a healthy period).
    pub(crate) fn reset(&mut self) {
        self.current = self.builder.build();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_to_the_cap_and_start_over_after_a_reset() {
        let mut backoff = Backoff::new(Duration::from_millis(800), Duration::from_secs(30));
        let first = backoff.next_delay();
        assert!(first >= Duration::from_millis(800) && first < Duration::from_millis(1600));
        let mut last = first;
        for _ in 0..20 {
            last = backoff.next_delay();
        }
        // Jitter adds at most one more base delay on top of the cap.
        assert!(last >= Duration::from_secs(30) && last <= Duration::from_secs(60));
        backoff.reset();
        assert!(backoff.next_delay() < Duration::from_millis(1600));
    }
}
