//! The companion policy: `mode = "companion"` and its `[companion]` section, beside the sections every mode
//! has (`[components]`, `[limits]`, `[engine]`, `[log]`).
//!
//! Parsing is strict (`deny_unknown_fields` everywhere): a misspelt key is an error at load,
//! never a silently ignored setting; a section of another mode is refused by name.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use devin_bridge_engine::{ComponentsTable, EngineSection, RuntimeLimits};
use devin_bridge_policy::{LogSection, Mode, ModePolicy, Origin, PolicyError};

/// A whole companion policy file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CompanionPolicy {
    pub mode: Mode,
    #[serde(default)]
    pub components: ComponentsTable,
    #[serde(default)]
    pub limits: RuntimeLimits,
    #[serde(default)]
    pub engine: EngineSection,
    #[serde(default)]
    pub log: LogSection,
    #[serde(default)]
    pub companion: CompanionSection,
    /// Where the policy was read from.
    #[serde(skip)]
    pub origin: Origin,
}

impl ModePolicy for CompanionPolicy {
    const MODE: Mode = Mode::Companion;

    devin_bridge_policy::common_sections_access!();

    fn validate_own(&self) -> Result<(), PolicyError> {
        let companion = &self.companion;
        if companion.timeout_ms == 0
            || companion.wait_poll_ms == 0
            || companion.probe_timeout_ms == 0
            || companion.history_limit == 0
            || companion.max_prompt_bytes == 0
            || companion.output_cap_bytes == 0
        {
            return Err(self
                .origin
                .invalid("companion timeouts, intervals, limits and caps must be positive"));
        }
        Ok(())
    }
}

/// `[companion]`: `devin-bridge companion`, the helper a Claude Code plugin calls to delegate
/// tasks and reviews to the Devin CLI. Every duration can also be set by an environment
/// variable (named in `settings.rs` beside this module), which wins over the policy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompanionSection {
    /// Where job records, the private agent HOME and caches live; default
    /// `~/.claude/plugins/data/devin-claude-code-fusion`. `DEVIN_COMPANION_DATA` wins.
    pub data_dir: Option<PathBuf>,
    /// The Devin CLI: a name on PATH or an absolute path; `DEVIN_BIN` wins.
    pub command: String,
    /// Wall-clock budget of one agent run.
    pub timeout_ms: u64,
    /// After the prompt result: how long the agent may take to exit once its stdin is closed.
    pub exit_grace_ms: u64,
    /// `result --wait`: how long to wait for a running job.
    pub wait_timeout_ms: u64,
    /// `result --wait`: the polling interval.
    pub wait_poll_ms: u64,
    /// A running record without a worker stamp older than this is `died`.
    pub pidless_running_grace_ms: u64,
    /// Jobs listed by `history` and `status` without `--limit`.
    pub history_limit: usize,
    /// `devin --version` and `devin models list` deadline.
    pub probe_timeout_ms: u64,
    /// How long the model catalog cache (`<data>/models.json`) is fresh.
    pub models_cache_secs: u64,
    /// Largest prompt accepted (arguments or stdin).
    pub max_prompt_bytes: usize,
    /// Largest reply text kept from the agent.
    pub output_cap_bytes: usize,
}

impl Default for CompanionSection {
    fn default() -> Self {
        Self {
            data_dir: None,
            command: "devin".into(),
            timeout_ms: 540_000,
            exit_grace_ms: 15_000,
            wait_timeout_ms: 240_000,
            wait_poll_ms: 1_000,
            pidless_running_grace_ms: 10_000,
            history_limit: 20,
            probe_timeout_ms: 10_000,
            models_cache_secs: 3_600,
            max_prompt_bytes: 1 << 20,
            output_cap_bytes: 1 << 20,
        }
    }
}
