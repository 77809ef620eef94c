//! Running `cargo xtask` inside another cargo command: the host's build script runs
//! `cargo xtask components --tests` when the components are missing or older than their
//! sources, and the tests run `cargo xtask dist --binary` to package the binary they install.
//!
//! The outer cargo holds the lock of the target directory it builds in while a build script
//! runs, so a nested cargo on that directory would wait for it forever. Every nested cargo
//! therefore builds in `target/test-build`: xtask itself, and whatever xtask builds with cargo
//! without naming a directory of its own (`CARGO_TARGET_DIR` is set for it). One directory for
//! every caller, so xtask is compiled there once.
//!
//! `host/build.rs` includes this file as a module, so it uses std only.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the nested cargo builds: `target/test-build` of the workspace at `root`.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    root.join("target").join("test-build")
}

/// `cargo xtask ARGS` for the workspace at `root`, building in [`target_dir`].
pub(crate) fn command(root: &Path, args: &[&str]) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(root)
        .args(["run", "--quiet", "--locked", "--package", "xtask", "--"])
        .args(args)
        .env("CARGO_TARGET_DIR", target_dir(root));
    // What the outer cargo set for its own build would steer this one: its rustflags
    // (`CARGO_ENCODED_RUSTFLAGS` wins over the `RUSTFLAGS` xtask gives the wasm build),
    // clippy's wrapper when the outer command is `cargo clippy`, its target and directories.
    for name in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_BUILD_BUILD_DIR",
    ] {
        command.env_remove(name);
    }
    command
}

/// An exclusive lock on `target/test-build/<name>`, held until the file is dropped: two
/// cargo commands at once (a build and a test run, say) build the components once.
pub(crate) fn lock(root: &Path, name: &str) -> std::io::Result<File> {
    let dir = target_dir(root);
    std::fs::create_dir_all(&dir)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(name))?;
    file.lock()?;
    Ok(file)
}
