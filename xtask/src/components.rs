//! Building the components: the five transforms into `target/components` (with the build
//! stamp the host's build script reads), and the test components into a directory of their own.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::workspace::workspace_root;
use crate::{sources, wasm};

/// The file `build_components` writes last (see `host/build.rs`).
const BUILD_STAMP: &str = "build-stamp";

/// Where components are written.
pub(crate) fn components_dir() -> PathBuf {
    workspace_root().join("target").join("components")
}

/// Builds the five transforms into `target/components`.
pub(crate) fn build_components() -> Result<PathBuf> {
    let out = components_dir();
    eprintln!(
        "xtask: building the transform components into {} (wasm, then pre-initialised)",
        out.display()
    );
    let built = wasm::build(&wasm::transforms(), &out)?;
    let manifest = wasm::write_manifest(&out, &built)?;
    eprintln!("xtask: manifest {}", manifest.display());
    // When this build happened, whether or not it changed a component: the host's build
    // script compares this with the sources to tell whether the components are current.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_nanos())
        .unwrap_or_default();
    std::fs::write(out.join(BUILD_STAMP), format!("{now}\n"))?;
    Ok(out)
}

/// Builds the test components into `out`, and writes `out/sources`: every file they were
/// built from, which the build script that asked for them watches.
pub(crate) fn build_test_components(out: &Path) -> Result<()> {
    eprintln!("xtask: building the test components into {}", out.display());
    // The directory holds exactly this set: a component dropped from it must not linger.
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("clearing {}", out.display()))?;
    }
    let specs = wasm::test_components();
    wasm::build(&specs, out)?;
    let sources = sources::of_build(&workspace_root(), &wasm::dep_infos(&specs))?;
    sources::write(&out.join("sources"), &sources)
}
