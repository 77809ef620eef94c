//! Companion settings: the policy's `[companion]` section with environment overrides.
//!
//! Precedence for each value: the environment variable, then the policy (`--policy`,
//! `DEVIN_BRIDGE_POLICY`, else the built-in `policies/companion.toml`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::policy::{CompanionPolicy, CompanionSection};
use devin_bridge_policy::{ModePolicy, PolicyError};

/// The built-in policy: exactly `policies/companion.toml`, so defaults cannot drift from it.
pub(crate) const BUILTIN_POLICY: &str = include_str!("../../../policies/companion.toml");

/// Why the settings could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum CompanionSettingsError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("{name} must be a whole number of milliseconds, not {value:?}")]
    BadDuration { name: &'static str, value: String },
    #[error("{0} must be an absolute path")]
    RelativePath(&'static str),
    #[error("cannot find the home directory (HOME is not set)")]
    NoHome,
}

/// What every companion command needs to know.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `DEVIN_COMPANION_DATA`, else the policy, else `~/.claude/plugins/data/devin-claude-code-fusion`.
    pub data_dir: PathBuf,
    /// `DEVIN_COMPANION_TIMEOUT_MS` (540000).
    pub timeout: Duration,
    /// `DEVIN_COMPANION_EXIT_GRACE_MS` (15000).
    pub exit_grace: Duration,
    /// `DEVIN_COMPANION_WAIT_TIMEOUT_MS` (240000).
    pub wait_timeout: Duration,
    /// `DEVIN_COMPANION_WAIT_POLL_MS` (1000).
    pub wait_poll: Duration,
    /// `DEVIN_COMPANION_PIDLESS_RUNNING_GRACE_MS` (10000).
    pub pidless_running_grace: Duration,
    /// Jobs shown by listings (records are never deleted to enforce it).
    pub history_limit: usize,
}

/// Loads the policy a companion command runs under and refuses any other mode.
pub(crate) fn load_policy(path: Option<&Path>) -> Result<CompanionPolicy, CompanionSettingsError> {
    Ok(match path {
        Some(path) => CompanionPolicy::load(path)?,
        None => builtin_policy()?,
    })
}

/// The embedded default policy. Its relative paths resolve against the workspace's
/// `policies/` directory of this build (components default to `DEVIN_BRIDGE_COMPONENTS`).
pub(crate) fn builtin_policy() -> Result<CompanionPolicy, CompanionSettingsError> {
    Ok(CompanionPolicy::builtin(
        BUILTIN_POLICY,
        "(built-in companion policy)",
    )?)
}

impl Settings {
    /// Resolves the settings from a companion policy and the process environment.
    pub fn resolve(policy: &CompanionPolicy) -> Result<Self, CompanionSettingsError> {
        Self::resolve_with(&policy.companion, policy, |name| std::env::var(name).ok())
    }

    /// Like `resolve`, with an explicit environment lookup (tests).
    pub fn resolve_with(
        section: &CompanionSection,
        policy: &CompanionPolicy,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, CompanionSettingsError> {
        let ms = |name: &'static str, default: u64| -> Result<Duration, CompanionSettingsError> {
            match env(name) {
                Some(value) if !value.is_empty() => value
                    .trim()
                    .parse::<u64>()
                    .map(Duration::from_millis)
                    .map_err(|_| CompanionSettingsError::BadDuration { name, value }),
                _ => Ok(Duration::from_millis(default)),
            }
        };
        let data_dir = match env("DEVIN_COMPANION_DATA").filter(|v| !v.is_empty()) {
            Some(dir) => {
                let dir = PathBuf::from(dir);
                if !dir.is_absolute() {
                    return Err(CompanionSettingsError::RelativePath("DEVIN_COMPANION_DATA"));
                }
                devin_bridge_policy::normalize(&dir)
            }
            None => match &section.data_dir {
                Some(dir) => policy.resolve(dir),
                None => {
                    let home = env("HOME")
                        .filter(|h| !h.is_empty())
                        .ok_or(CompanionSettingsError::NoHome)?;
                    PathBuf::from(home).join(".claude/plugins/data/devin-claude-code-fusion")
                }
            },
        };
        Ok(Self {
            data_dir,
            timeout: ms("DEVIN_COMPANION_TIMEOUT_MS", section.timeout_ms)?,
            exit_grace: ms("DEVIN_COMPANION_EXIT_GRACE_MS", section.exit_grace_ms)?,
            wait_timeout: ms("DEVIN_COMPANION_WAIT_TIMEOUT_MS", section.wait_timeout_ms)?,
            wait_poll: ms("DEVIN_COMPANION_WAIT_POLL_MS", section.wait_poll_ms)?,
            pidless_running_grace: ms(
                "DEVIN_COMPANION_PIDLESS_RUNNING_GRACE_MS",
                section.pidless_running_grace_ms,
            )?,
            history_limit: section.history_limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devin_bridge_policy::Mode;

    #[test]
    fn the_builtin_policy_is_the_shipped_companion_file() {
        let policy = builtin_policy().expect("built-in policy parses");
        assert_eq!(policy.mode, Mode::Companion);
        assert_eq!(policy.companion, CompanionSection::default());
    }

    #[test]
    fn a_summarizer_policy_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("p.toml");
        std::fs::write(&path, "mode = \"summarizer\"\n").expect("write");
        let error = load_policy(Some(&path)).expect_err("wrong mode");
        assert!(matches!(
            error,
            CompanionSettingsError::Policy(PolicyError::WrongMode {
                found: devin_bridge_policy::Mode::Summarizer,
                ..
            })
        ));
    }

    #[test]
    fn environment_overrides_the_policy() {
        let policy = builtin_policy().expect("policy");
        let settings = Settings::resolve_with(&policy.companion, &policy, |name| match name {
            "DEVIN_COMPANION_DATA" => Some("/tmp/x/../data".into()),
            "DEVIN_COMPANION_TIMEOUT_MS" => Some("1234".into()),
            "HOME" => Some("/home/u".into()),
            _ => None,
        })
        .expect("settings");
        assert_eq!(settings.data_dir, PathBuf::from("/tmp/data"));
        assert_eq!(settings.timeout, Duration::from_millis(1234));
        assert_eq!(settings.exit_grace, Duration::from_millis(15_000));
        let default = Settings::resolve_with(&policy.companion, &policy, |name| {
            (name == "HOME").then(|| "/home/u".to_owned())
        })
        .expect("settings");
        assert_eq!(
            default.data_dir,
            PathBuf::from("/home/u/.claude/plugins/data/devin-claude-code-fusion")
        );
    }

    #[test]
    fn a_malformed_duration_is_an_error() {
        let policy = builtin_policy().expect("policy");
        let error = Settings::resolve_with(&policy.companion, &policy, |name| match name {
            "DEVIN_COMPANION_WAIT_POLL_MS" => Some("soon".into()),
            "HOME" => Some("/h".into()),
            _ => None,
        })
        .expect_err("bad duration");
        assert!(error.to_string().contains("DEVIN_COMPANION_WAIT_POLL_MS"));
    }
}
