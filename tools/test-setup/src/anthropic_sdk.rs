//! The official Anthropic TypeScript SDK the tests read the bridge's answers with: an npm install
//! of one pinned version into an install prefix (the callers use `target/anthropic-sdk/`),
//! reused as long as it is there at that version, so later runs need no network.
//!
//! Invariant: [`VERSION`] is the only place the version is pinned.

use std::path::{Path, PathBuf};

/// The SDK version the tests run: npm `@anthropic-ai/sdk@1.17.0`.
pub const VERSION: &str = "1.17.0";

const PACKAGE: &str = "@anthropic-ai/sdk";

/// Why the pinned SDK is not available.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Npm(#[from] crate::npm::NpmError),
    #[error("npm installed {PACKAGE}@{VERSION} into {}, but its package.json says another version", prefix.display())]
    NotInstalled { prefix: PathBuf },
}

/// The `node_modules` directory under `prefix` that holds the pinned SDK, installed with npm
/// when it is missing or another version.
pub fn ensure(prefix: &Path) -> Result<PathBuf, Error> {
    let modules = prefix.join("node_modules");
    if installed(&modules) {
        return Ok(modules);
    }
    eprintln!(
        "anthropic-sdk: installing {PACKAGE}@{VERSION} into {}",
        prefix.display()
    );
    crate::npm::install(prefix, PACKAGE, VERSION)?;
    if installed(&modules) {
        Ok(modules)
    } else {
        Err(Error::NotInstalled {
            prefix: prefix.to_owned(),
        })
    }
}

/// Whether `modules` holds the SDK at the pinned version.
fn installed(modules: &Path) -> bool {
    let manifest = modules.join(PACKAGE).join("package.json");
    std::fs::read_to_string(manifest)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .is_some_and(|package| package["version"] == VERSION)
}
