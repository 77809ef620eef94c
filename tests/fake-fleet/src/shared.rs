//! What the fleet's tasks share: its state, its faults and the signals that wake and stop
//! them. Every server module takes it; it names none of them, so no request's path loops back
//! through the crate root.

use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::faults::Faults;
use crate::types::FleetConfig;
use crate::{state, static_files};

/// What the fleet's tasks share.
pub(crate) struct Shared {
    pub config: FleetConfig,
    pub state: Mutex<state::State>,
    pub faults: Faults,
    /// Bumped after every change a waiting stream or long-poll may care about.
    pub changes: tokio::sync::watch::Sender<u64>,
    /// Set to true when the fleet stops.
    pub shutdown: tokio::sync::watch::Sender<bool>,
    pub addr: SocketAddr,
    pub started: Instant,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, state::State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Wakes every stream and long-poll so it looks at the state again.
    pub(crate) fn poke(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Runs `change` on the state with the time-driven transitions applied first, then wakes
    /// the waiters.
    pub(crate) fn with_state<T>(&self, change: impl FnOnce(&mut state::State) -> T) -> T {
        let result = {
            let mut state = self.lock();
            state.tick(Instant::now());
            change(&mut state)
        };
        self.poke();
        result
    }

    pub(crate) fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub(crate) fn gateway_url(&self) -> String {
        format!("http://{}/gateway", self.addr)
    }

    pub(crate) fn static_base_url(&self) -> String {
        format!("http://{}{}", self.addr, static_files::BASE_PATH)
    }
}

/// Resolves once the fleet stops.
pub(crate) async fn until_stopped(shutdown: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stopped| *stopped).await.map(|_| ());
}
