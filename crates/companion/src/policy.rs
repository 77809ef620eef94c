//! The companion policy: `mode = "companion"` and its `[companion]` section, beside the sections every mode
//! has (`[components]`, `[limits]`, `[engine]`, `[log]`).
//!
//! Parsing is strict (`deny_unknown_fields` everywhere): a misspelt key is an error at load,
//! never a silently ignored setting; a section of another mode is refused by name.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use devin_bridge_agent::devin::identity::{
    ClientIdentity, IdentityError, DEFAULT_CLIENT_NAME, DEFAULT_CLIENT_VERSION,
};
use devin_bridge_policy::{Mode, ModePolicy, PolicyError};

devin_bridge_policy::mode_policy! {
    /// A whole companion policy file.
    pub struct CompanionPolicy {
        #[serde(default)]
        pub companion: CompanionSection,
    }
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
        if let Err(error) = companion.client_identity() {
            return Err(self.origin.invalid(format!("[companion] {error}")));
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
    /// The `clientInfo.name` the companion gives `devin acp` at `initialize`. Default
    /// `windsurf`: the Devin service answers every prompt of a client with any other name
    /// "Your Windsurf version is out of date", so a different name fails against a real
    /// account even though the agent starts.
    pub client_name: String,
    /// The `clientInfo.version` given with [`CompanionSection::client_name`]. Default
    /// `1.110.1`, a Windsurf version the service accepts; raise it when the service starts
    /// refusing it as out of date.
    pub client_version: String,
    /// `task --runner print --write`: run `devin -p` with the CLI's own sandbox
    /// (`--permission-mode autonomous --sandbox`) instead of `--permission-mode dangerous`.
    /// Off by default.
    pub print_sandbox: bool,
}

impl CompanionSection {
    /// The client identity of [`CompanionSection::client_name`] and
    /// [`CompanionSection::client_version`], checked (the error names the bad setting).
    pub fn client_identity(&self) -> Result<ClientIdentity, IdentityError> {
        ClientIdentity::new(&self.client_name, &self.client_version)
    }
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
            client_name: DEFAULT_CLIENT_NAME.into(),
            client_version: DEFAULT_CLIENT_VERSION.into(),
            print_sandbox: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(section: &str) -> Result<CompanionPolicy, PolicyError> {
        let text = format!("mode = \"companion\"\n[companion]\n{section}\n");
        CompanionPolicy::builtin(&text, "(test policy)")
    }

    #[test]
    fn the_client_identity_defaults_to_the_one_the_service_accepts() {
        let policy = parse("").expect("policy");
        let identity = policy.companion.client_identity().expect("identity");
        assert!(identity.is_default());
        assert_eq!(identity.to_string(), "windsurf/1.110.1");
        assert!(!policy.companion.print_sandbox);
        let custom = parse("client_version = \"1.200.0\"\nprint_sandbox = true").expect("policy");
        assert_eq!(
            custom
                .companion
                .client_identity()
                .expect("identity")
                .to_string(),
            "windsurf/1.200.0"
        );
        assert!(custom.companion.print_sandbox);
    }

    #[test]
    fn a_bad_client_identity_is_a_policy_error_naming_the_setting() {
        let error = parse("client_name = \"wind surf\"").expect_err("bad name");
        assert!(error.to_string().contains("client_name"), "{error}");
        let error = parse("client_version = \"\"").expect_err("bad version");
        assert!(error.to_string().contains("client_version"), "{error}");
    }
}
