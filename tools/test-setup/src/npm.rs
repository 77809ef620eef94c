//! Installing one pinned npm package into a prefix of its own: the one way the test set-up
//! fetches a JavaScript peer (Claude Code, the Anthropic SDK). The caller checks what was
//! installed; this only runs `npm install` and says why it could not.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// Why `npm install` did not install the package.
#[derive(Debug, thiserror::Error)]
pub enum NpmError {
    #[error("cannot create {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot run npm (installing {spec} needs node and npm, and the npm registry once): {source}")]
    Missing {
        spec: String,
        source: std::io::Error,
    },
    #[error("npm install {spec} failed with {status} (it needs the npm registry once)")]
    Failed { spec: String, status: ExitStatus },
}

/// `npm install PACKAGE@VERSION` into `prefix` (created when missing), without audit or fund
/// messages.
pub fn install(prefix: &Path, package: &str, version: &str) -> Result<(), NpmError> {
    let spec = format!("{package}@{version}");
    std::fs::create_dir_all(prefix).map_err(|source| NpmError::CreateDir {
        path: prefix.to_owned(),
        source,
    })?;
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(prefix)
        .arg(&spec)
        .status()
        .map_err(|source| NpmError::Missing {
            spec: spec.clone(),
            source,
        })?;
    if !status.success() {
        return Err(NpmError::Failed { spec, status });
    }
    Ok(())
}
