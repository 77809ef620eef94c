//! Where the workspace is, running a program in it, and the pinned Claude Code: a leaf module
//! every command uses.

use std::path::PathBuf;

use anyhow::Result;

pub(crate) use devin_bridge_test_setup::workspace::{root as workspace_root, run};

/// The pinned Claude Code, installed into `target/claude-code/` when missing (where
/// `cargo xtask test` installs it for the end-to-end test too).
pub(crate) fn claude_code() -> Result<PathBuf> {
    Ok(devin_bridge_test_setup::claude_code::ensure(
        &workspace_root().join("target").join("claude-code"),
    )?)
}
