//! Where the workspace is and how xtask runs cargo in it: a leaf module every command uses.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

pub(crate) use devin_bridge_nested_cargo::without_lint_driver;
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

/// The directory cargo builds into: `CARGO_TARGET_DIR` (relative to the workspace root) when
/// set, else `target/`.
pub(crate) fn cargo_target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|dir| !dir.is_empty()) {
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    }
}

/// Builds the tool binary `bin` as `cargo build --locked --workspace --bin <bin>` and returns
/// its path. Naming the whole workspace gives wasmtime and everything below it the features
/// `cargo build --workspace --bins` and `cargo test --workspace` give them, so a tool that links
/// wasmtime shares the one the host and the tests link (`-p` alone would compile another).
pub(crate) fn build_workspace_tool(bin: &str) -> Result<PathBuf> {
    run(cargo().args(["build", "--locked", "--workspace", "--bin", bin]))
        .with_context(|| format!("building {bin}"))?;
    Ok(cargo_target_dir().join("debug").join(bin))
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
