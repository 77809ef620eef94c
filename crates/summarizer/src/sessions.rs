//! Where turns run: the per-turn pool of prewarmed agents or the resident transport (the one
//! the policy selects), the agents' home, and how their processes are counted; and a turn's
//! [`Placement`], which preparing a request produces and the turn then owns.
//!
//! Invariants:
//! - With the resident transport in force, every turn runs on a leased resident session; else
//!   every turn runs on an agent of the pool, one agent per turn.
//! - A placement is handed over by value: whoever holds it is the only one that may change its
//!   lease, and dropping it uncommitted forgets the session (see `resident::Lease`).

use std::path::Path;
use std::sync::Arc;

use crate::pool::AgentPool;
use crate::resident::{Lease, Resident};

/// The agents the summarizer runs turns on.
pub(crate) struct Sessions {
    pub(crate) pool: Arc<AgentPool>,
    /// The resident transport, when the policy selects it.
    pub(crate) resident: Option<Arc<Resident>>,
    /// The agents' working directory.
    home: Arc<Path>,
    /// Set when agents run under their own uid (then they are counted by uid: the host may
    /// not read another uid's `/proc/<pid>/cwd`).
    agent_uid: Option<u32>,
}

impl Sessions {
    pub(crate) fn new(
        pool: Arc<AgentPool>,
        resident: Option<Arc<Resident>>,
        home: &Path,
        agent_uid: Option<u32>,
    ) -> Self {
        Self {
            pool,
            resident,
            home: Arc::from(home),
            agent_uid,
        }
    }

    /// Live agent processes (for `/healthz` and `/metrics`).
    pub(crate) fn agent_processes(&self) -> usize {
        match self.agent_uid {
            Some(uid) => devin_bridge_agent::process::live_processes_of_uid(uid),
            None => devin_bridge_agent::process::live_processes_in(&self.home),
        }
    }

    /// The transport in force, as `/healthz` names it.
    pub(crate) fn transport(&self) -> &'static str {
        if self.resident.is_some() {
            "resident"
        } else {
            "per-turn"
        }
    }

    /// A per-turn placement: an agent of the pool, started in the agents' home.
    pub(crate) fn per_turn(&self) -> Placement {
        Placement::PerTurn {
            pool: self.pool.clone(),
            home: self.home.clone(),
        }
    }

    /// Ends every agent process (shutdown).
    pub(crate) async fn shutdown(&self) {
        self.pool.drain().await;
        if let Some(resident) = &self.resident {
            resident.shutdown().await;
        }
    }
}

/// Where a turn runs: the transport the policy selected, with what it holds for this turn.
pub(crate) enum Placement {
    /// A fresh agent process from the pool, sent the whole conversation, in `home`.
    PerTurn {
        pool: Arc<AgentPool>,
        home: Arc<Path>,
    },
    /// The resident transport: the conversation's session, leased for this turn.
    Resident(Arc<Resident>, Lease),
}

impl Placement {
    /// After an accepted reply: the resident session keeps the conversation's new history
    /// (a subagent's is released when `reply` is its final answer, see `Lease::commit`).
    pub(crate) fn commit(&mut self, reply: &devin_bridge_types::Reply) {
        if let Placement::Resident(_, lease) = self {
            lease.commit(matches!(reply, devin_bridge_types::Reply::Text(_)));
        }
    }
}
