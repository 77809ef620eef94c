//! Where the workspace is and how xtask runs cargo in it: a leaf module every command uses.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Result;

pub(crate) use devin_bridge_test_setup::workspace::{root as workspace_root, run};

/// `cargo`, in the workspace, without what `cargo run` set for xtask itself (its package's
/// name and directories): a build started here is then the same build as one started from a
/// shell, and neither makes the other rebuild (see `devin-bridge-nested-cargo`).
pub(crate) fn cargo() -> Command {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo.current_dir(workspace_root());
    devin_bridge_nested_cargo::without_package_context(&mut cargo);
    cargo
}

/// Removes clippy's driver from `command`, a build for another toolchain or of code from
/// elsewhere (the wasm components, the nightly fuzz targets, a tool from crates.io). CI makes
/// the stable toolchain's clippy the workspace's compiler for its host builds (`.ci/run`), and
/// that driver cannot build for them.
pub(crate) fn without_lint_driver(command: &mut Command) -> &mut Command {
    command
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
}

/// The directory cargo builds into: `CARGO_TARGET_DIR` (relative to the workspace root) when
/// set, else `target/`.
pub(crate) fn cargo_target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|dir| !dir.is_empty()) {
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    }
}

/// `cargo build` of the binaries of `packages`: release builds, or debug builds when not
/// `release`.
pub(crate) fn build_bins(packages: &[&str], release: bool) -> Result<()> {
    let mut build = cargo();
    build.args(["build", "--locked", "--bins"]);
    if release {
        build.arg("--release");
    }
    for package in packages {
        build.args(["-p", package]);
    }
    Ok(run(&mut build)?)
}
