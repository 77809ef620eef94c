//! SIGHUP: re-read the policy and apply what can change while serving.
//!
//! The new policy is parsed and validated whole, and every component it names that changed is
//! compiled, pin-checked and self-tested (under the new limits, when they change) before
//! anything is swapped in: a bad policy changes nothing. What can change live: the components,
//! `limits.memory_mib` and `limits.call_timeout_ms` (for calls that start afterwards) and
//! `log.filter`. Every other setting that differs is logged as needing a restart, and its old
//! value stays in force.

use devin_bridge_policy::ModePolicy;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::policy::SummarizerPolicy;
use devin_bridge_engine::Transforms;
use devin_bridge_policy::log as logging;

/// Whether a changed setting (a dotted field name) takes effect without a restart.
pub(crate) fn is_live(field: &str) -> bool {
    field.starts_with("components.")
        || field.starts_with("log.")
        || field == "limits.memory_mib"
        || field == "limits.call_timeout_ms"
}

/// The serving process's view of its policy file.
pub(crate) struct Reloader {
    path: PathBuf,
    /// The policy in force: the one loaded at start with the live settings of every accepted
    /// reload since.
    applied: SummarizerPolicy,
    transforms: Arc<Transforms>,
}

impl Reloader {
    pub(crate) fn new(
        path: PathBuf,
        applied: SummarizerPolicy,
        transforms: Arc<Transforms>,
    ) -> Self {
        Self {
            path,
            applied,
            transforms,
        }
    }

    /// Re-reads the policy file and applies it as far as it can change live.
    pub(crate) async fn reload(&mut self) {
        tracing::info!(policy = %self.path.display(), "SIGHUP: re-reading the policy");
        let new = match SummarizerPolicy::load(&self.path) {
            Ok(policy) => policy,
            Err(error) => {
                tracing::error!(%error, "SIGHUP: the new policy is invalid; nothing changed");
                return;
            }
        };
        let changed = new.changed_fields(&self.applied);
        let limits_change = changed
            .iter()
            .any(|field| field == "limits.memory_mib" || field == "limits.call_timeout_ms");
        let memory_bytes = (new.limits.memory_mib as usize) << 20;
        let call_timeout = Duration::from_millis(new.limits.call_timeout_ms);

        // Everything that can fail happens here, before anything is swapped in.
        let trial = self
            .transforms
            .runtime()
            .with_limits(memory_bytes, call_timeout);
        let (transforms, candidate) = (self.transforms.clone(), new.engine_config());
        let reloaded = tokio::task::spawn_blocking(move || {
            transforms.reload(&candidate, &trial, limits_change)
        })
        .await;
        let reports = match reloaded {
            Ok(Ok(reports)) => reports,
            Ok(Err(error)) => {
                tracing::error!(%error, "SIGHUP: a component of the new policy was refused; nothing changed");
                return;
            }
            Err(error) => {
                tracing::error!(%error, "SIGHUP: the reload task failed; nothing changed");
                return;
            }
        };

        // Components are in; the rest cannot fail.
        if limits_change {
            self.transforms
                .runtime()
                .set_limits(memory_bytes, call_timeout);
            tracing::info!(
                memory_mib = new.limits.memory_mib,
                call_timeout_ms = new.limits.call_timeout_ms,
                "SIGHUP: new transform limits in force"
            );
        }
        if changed.iter().any(|field| field.starts_with("log.")) {
            match logging::apply_policy_filter(new.log.filter_or_default()) {
                Ok(true) => {
                    tracing::info!(
                        filter = new.log.filter_or_default(),
                        "SIGHUP: new log filter in force"
                    );
                }
                Ok(false) => tracing::warn!(
                    "SIGHUP: log.filter changed, but DEVIN_BRIDGE_LOG (or RUST_LOG) overrides it"
                ),
                Err(error) => tracing::error!(%error, "SIGHUP: the log filter did not change"),
            }
        }
        for field in changed.iter().filter(|field| !is_live(field)) {
            tracing::warn!("SIGHUP: {field} changed; restart to apply");
        }
        for report in &reports {
            tracing::info!(transform = report.transform, old = %report.old_sha256, new = %report.new_sha256, "SIGHUP: component reloaded");
        }
        if reports.is_empty() {
            tracing::debug!("SIGHUP: no component changed");
        }
        self.applied.components = new.components;
        self.applied.limits.memory_mib = new.limits.memory_mib;
        self.applied.limits.call_timeout_ms = new.limits.call_timeout_ms;
        self.applied.log = new.log;
        tracing::info!(
            swapped = reports.len(),
            restart_needed = changed.iter().filter(|field| !is_live(field)).count(),
            "SIGHUP: reload complete"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_components_two_limits_and_the_log_filter_are_live() {
        for field in [
            "components.sse.path",
            "components.model-alias.sha256",
            "limits.memory_mib",
            "limits.call_timeout_ms",
            "log.filter",
        ] {
            assert!(is_live(field), "{field}");
        }
        for field in [
            "limits.max_instances",
            "server.listen",
            "server.require_key",
            "agent.command",
            "mode",
            "engine.cache_dir",
            "control.socket",
            "models.catalog",
        ] {
            assert!(!is_live(field), "{field}");
        }
    }
}
