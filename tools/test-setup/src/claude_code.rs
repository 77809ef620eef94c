//! The real Claude Code CLI the tests run: an npm install of one pinned version into an install
//! prefix (the callers use `target/claude-code/`), reused as long as it is there and reports
//! that version, so later runs need no network.
//!
//! `cargo xtask test` passes the executable to the end-to-end test
//! (`host/tests/all/claude_code_e2e.rs`) as `DEVIN_BRIDGE_CLAUDE_CODE`; the container proof
//! runs it against the containerised bridge and copies it into the Claude Code image.
//! Invariant: [`VERSION`] is the only place the version is pinned.
//!
//! `cargo xtask compat` installs other releases the same way ([`ensure_release`], each into a
//! prefix of its own) and asks npm which releases there are ([`releases_on_npm`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The Claude Code version the tests and the Claude Code image run: npm
/// `@anthropic-ai/claude-code@2.1.332`.
pub const VERSION: &str = "2.1.332";

const PACKAGE: &str = "@anthropic-ai/claude-code";

/// Why the pinned Claude Code is not available.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Npm(#[from] crate::npm::NpmError),
    #[error("npm installed {PACKAGE}@{version} into {}, but no claude executable there reports {version}", prefix.display())]
    NotInstalled { prefix: PathBuf, version: String },
    #[error(
        "cannot ask npm for the releases of {PACKAGE} (`npm view {PACKAGE} versions --json`): {0}"
    )]
    Releases(String),
}

/// The `claude` executable of the pinned version under `prefix`, installed with npm when it is
/// missing or reports another version.
pub fn ensure(prefix: &Path) -> Result<PathBuf, Error> {
    ensure_release(prefix, VERSION)
}

/// The `claude` executable of `version` under `prefix`, installed with npm (its cache reused)
/// when it is missing or reports another version.
pub fn ensure_release(prefix: &Path, version: &str) -> Result<PathBuf, Error> {
    if let Some(claude) = installed(prefix, version) {
        eprintln!(
            "claude-code: Claude Code {version} is installed at {}",
            claude.display()
        );
        return Ok(claude);
    }
    eprintln!(
        "claude-code: installing Claude Code {version} into {} (npm install {PACKAGE}@{version})",
        prefix.display()
    );
    crate::npm::install(prefix, PACKAGE, version)?;
    installed(prefix, version).ok_or_else(|| Error::NotInstalled {
        prefix: prefix.to_owned(),
        version: version.to_owned(),
    })
}

/// Every release of Claude Code on npm, oldest first (`npm view ... versions --json`).
pub fn releases_on_npm() -> Result<Vec<String>, Error> {
    let output = Command::new("npm")
        .args(["view", PACKAGE, "versions", "--json"])
        .stdin(Stdio::null())
        .output()
        .map_err(|error| Error::Releases(error.to_string()))?;
    if !output.status.success() {
        return Err(Error::Releases(format!(
            "{}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let releases: Vec<String> = serde_json::from_slice(&output.stdout)
        .map_err(|error| Error::Releases(format!("not a JSON list of versions: {error}")))?;
    Ok(releases)
}

/// The first candidate executable that reports `version`.
fn installed(prefix: &Path, version: &str) -> Option<PathBuf> {
    candidates(prefix)
        .into_iter()
        .find(|claude| reports_version(claude, version))
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
fn reports_version(claude: &Path, version: &str) -> bool {
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
                    == Some(version)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_platform_binary_is_tried_before_the_npm_wrapper() {
        let temp = tempfile::tempdir().expect("tempdir");
        let dir = temp.path();
        let scope = dir.join("node_modules/@anthropic-ai");
        for package in ["claude-code", "claude-code-linux-x64", "other"] {
            std::fs::create_dir_all(scope.join(package)).expect("mkdir");
        }
        let found = candidates(dir);
        assert_eq!(
            found,
            vec![
                scope.join("claude-code-linux-x64/claude"),
                dir.join("node_modules/.bin/claude"),
            ]
        );
    }

    #[test]
    fn an_empty_prefix_has_no_installed_claude_code() {
        let temp = tempfile::tempdir().expect("tempdir");
        assert_eq!(installed(temp.path(), VERSION), None);
    }
}
