//! The real Claude Code CLI for the end-to-end test (`host/tests/all/claude_code_e2e.rs`): an npm
//! install of one pinned version into `target/claude-code/`, reused as long as it is there and
//! reports that version, so later runs need no network.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use crate::{run, workspace_root};

/// The Claude Code version the end-to-end test runs: npm `@anthropic-ai/claude-code@2.1.332`.
/// This is the only place the version is pinned; `cargo xtask test` installs it and passes the
/// executable to the tests as `DEVIN_BRIDGE_CLAUDE_CODE`.
pub const VERSION: &str = "2.1.332";

const PACKAGE: &str = "@anthropic-ai/claude-code";

/// The `claude` executable of the pinned version, installed with npm when it is missing or
/// reports another version.
pub fn ensure_claude_code() -> Result<PathBuf> {
    let prefix = workspace_root().join("target").join("claude-code");
    if let Some(claude) = installed(&prefix) {
        eprintln!(
            "xtask: Claude Code {VERSION} is installed at {}",
            claude.display()
        );
        return Ok(claude);
    }
    eprintln!(
        "xtask: installing Claude Code {VERSION} into {} (npm install {PACKAGE}@{VERSION})",
        prefix.display()
    );
    std::fs::create_dir_all(&prefix)
        .with_context(|| format!("cannot create {}", prefix.display()))?;
    run(Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg(format!("{PACKAGE}@{VERSION}")))
    .context("installing Claude Code needs node and npm (and the npm registry, once)")?;
    installed(&prefix).with_context(|| {
        format!(
            "npm installed {PACKAGE}@{VERSION} into {}, but no claude executable there reports {VERSION}",
            prefix.display()
        )
    })
}

/// The first candidate executable that reports the pinned version.
fn installed(prefix: &Path) -> Option<PathBuf> {
    candidates(prefix)
        .into_iter()
        .find(|claude| reports_version(claude))
}

/// The platform package's native binary first (`@anthropic-ai/claude-code-linux-x64/claude`
/// and the like): the wrapper's `bin/claude.exe`, which `.bin/claude` links to, is a
/// placeholder until the wrapper's postinstall script copies the native binary over it, and
/// npm may have skipped that script.
fn candidates(prefix: &Path) -> Vec<PathBuf> {
    let modules = prefix.join("node_modules");
    let mut found: Vec<PathBuf> = std::fs::read_dir(modules.join("@anthropic-ai"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("claude-code-")
        })
        .map(|entry| entry.path().join("claude"))
        .collect();
    found.sort();
    found.push(modules.join(".bin").join("claude"));
    found
}

/// `claude --version` prints `2.1.332 (Claude Code)`.
fn reports_version(claude: &Path) -> bool {
    Command::new(claude)
        .arg("--version")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|out| {
            out.status.success()
                && String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .next()
                    == Some(VERSION)
        })
}
