//! Companion settings (a minimal stand-in; the full resolution from policy and environment
//! lives with the command-line side).

use std::path::PathBuf;
use std::time::Duration;

/// Resolved companion settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// DEVIN_COMPANION_DATA, else policy, else ~/.claude/plugins/data/devin-claude-code-fusion.
    pub data_dir: PathBuf,
    /// DEVIN_COMPANION_TIMEOUT_MS (540000).
    pub timeout: Duration,
    /// DEVIN_COMPANION_EXIT_GRACE_MS (15000).
    pub exit_grace: Duration,
    /// DEVIN_COMPANION_WAIT_TIMEOUT_MS (240000).
    pub wait_timeout: Duration,
    /// DEVIN_COMPANION_WAIT_POLL_MS (1000).
    pub wait_poll: Duration,
    /// DEVIN_COMPANION_PIDLESS_RUNNING_GRACE_MS (10000).
    pub pidless_running_grace: Duration,
    /// Records shown by default (20).
    pub history_limit: usize,
}
