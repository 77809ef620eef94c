//! The binary's policy reader: `mode` first, then that mode's strict type.
//!
//! Each mode crate owns its policy type and validation; this reader only decides which one
//! parses a file, and refuses, with the command to run instead, a policy of another mode
//! (fail closed).

use std::path::Path;

use anyhow::bail;

use devin_bridge_policy::{Mode, ModePolicy};
use devin_bridge_summarizer::policy::SummarizerPolicy;

/// Loads `path` as a summarizer policy for `command` (`serve`, `components`); a companion or
/// outpost policy is refused with the command that runs it.
pub(crate) fn load_summarizer(path: &Path, command: &str) -> anyhow::Result<SummarizerPolicy> {
    let (text, origin) = devin_bridge_policy::read(path)?;
    match devin_bridge_policy::read_mode(&text, &origin)? {
        Mode::Summarizer => Ok(SummarizerPolicy::parse_from(&text, origin)?),
        Mode::Companion => bail!(
            "a companion policy is not for `devin-bridge {command}`: run `devin-bridge companion --policy {} <subcommand>` instead; refusing to start (fail closed)",
            path.display()
        ),
        Mode::Outpost => bail!(
            "an outpost policy is not for `devin-bridge {command}`: run `devin-bridge outpost start --policy {}` instead; refusing to start (fail closed)",
            path.display()
        ),
    }
}
