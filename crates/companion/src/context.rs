//! The policy and settings a command runs with.

use std::path::PathBuf;
use std::time::Duration;

use crate::settings::Settings;

/// The policy and settings a command runs with.
#[derive(Debug, Clone)]
pub struct Context {
    pub policy: crate::policy::CompanionPolicy,
    /// The policy file given (`--policy`/`DEVIN_BRIDGE_POLICY`), passed on to workers.
    pub policy_path: Option<PathBuf>,
    pub settings: Settings,
}

impl Context {
    pub fn probe_timeout(&self) -> Duration {
        Duration::from_millis(self.policy.companion.probe_timeout_ms)
    }

    pub fn models_ttl(&self) -> Duration {
        Duration::from_secs(self.policy.companion.models_cache_secs)
    }
}
