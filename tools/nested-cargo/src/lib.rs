//! Running cargo inside another cargo command: the host's build script runs `cargo xtask
//! components` when the transforms are missing or stale, the test artifacts' build script runs
//! `cargo xtask test-components`, and the tests build the offline agent and package the tarball
//! when no one built them first.
//!
//! The outer cargo holds the lock of the target directory it builds in while a build script (or
//! a test) runs, so a nested cargo on that directory would wait for it forever. Every nested
//! cargo therefore builds in [`target_dir`] (`target/test-build`): xtask itself, and whatever
//! xtask builds with cargo without naming a directory of its own (`CARGO_TARGET_DIR` is set for
//! it). One directory for every caller, so each thing is compiled there once.
//!
//! Std only, and no dependency: the shipped binary's build script uses it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the outer cargo sets for its own build that would steer a nested one: its rustflags
/// (`CARGO_ENCODED_RUSTFLAGS` wins over the `RUSTFLAGS` xtask gives the wasm build), its target
/// and its directories (and clippy's driver: see [`without_lint_driver`]).
const OUTER_ONLY: [&str; 4] = [
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_BUILD_TARGET",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_BUILD_DIR",
];

/// Clippy's driver as the workspace's compiler: set by `cargo clippy`, and by CI for every host
/// build (`.ci/run`: each crate linted as it compiles).
const LINT_DRIVER: [&str; 2] = ["RUSTC_WORKSPACE_WRAPPER", "CLIPPY_ARGS"];

/// Removes clippy's driver from `command`: a nested build, or a build that driver cannot serve
/// (another toolchain's, such as the wasm components' or the nightly fuzz targets', or a tool
/// from crates.io, built as published rather than linted as this workspace is).
pub fn without_lint_driver(command: &mut Command) -> &mut Command {
    for name in LINT_DRIVER {
        command.env_remove(name);
    }
    command
}

/// What cargo sets for the package whose program it runs (a build script, a test, `cargo run`):
/// the package's identity and directories. A cargo started from that program inherits them,
/// and cargo checks the variables a build script watches (`rerun-if-env-changed`) in its own
/// environment: `ring`'s build script watches `CARGO_MANIFEST_DIR`, so a build started from
/// xtask and one started from a shell rebuilt ring and everything above it each time they
/// alternated. `CARGO_PKG_*` are removed by prefix.
const PACKAGE_CONTEXT: [&str; 7] = [
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "OUT_DIR",
];

/// Removes from `command` the variables cargo set for the program running it (see
/// [`PACKAGE_CONTEXT`]), so that a cargo it starts builds as one started from a shell would.
pub fn without_package_context(command: &mut Command) -> &mut Command {
    for name in PACKAGE_CONTEXT {
        command.env_remove(name);
    }
    for (name, _) in std::env::vars_os() {
        if name
            .to_str()
            .is_some_and(|name| name.starts_with("CARGO_PKG_"))
        {
            command.env_remove(name);
        }
    }
    command
}

/// Where every nested cargo builds: `target/test-build` of the workspace at `root`.
pub fn target_dir(root: &Path) -> PathBuf {
    root.join("target").join("test-build")
}

/// Where `cargo xtask test-components` leaves the test components when it is run ahead of the
/// tests' build (`cargo xtask test` and CI do): `target/test-components` of the workspace at
/// `root`. The test artifacts crate's build script takes them from there while no file they
/// were built from has changed since, instead of building them itself in a nested cargo.
pub fn test_components_dir(root: &Path) -> PathBuf {
    root.join("target").join("test-components")
}

/// `cargo ARGS` for the workspace at `root`, building in [`target_dir`], with none of the
/// outer command's steering variables nor the calling package's context. `CARGO` (set for build scripts and for the programs
/// `cargo run` and `cargo test` start) names the outer command's cargo, so the nested one is
/// the same toolchain.
pub fn cargo(root: &Path, args: &[&str]) -> Command {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(program);
    command
        .current_dir(root)
        .args(args)
        .env("CARGO_TARGET_DIR", target_dir(root));
    for name in OUTER_ONLY {
        command.env_remove(name);
    }
    without_lint_driver(&mut command);
    without_package_context(&mut command);
    command
}

/// `cargo xtask ARGS` for the workspace at `root`: xtask built in [`target_dir`] and run.
pub fn xtask(root: &Path, args: &[&str]) -> Command {
    let mut command = cargo(
        root,
        &["run", "--quiet", "--locked", "--package", "xtask", "--"],
    );
    command.args(args);
    command
}

/// An exclusive lock on `target/test-build/<name>`, held until the file is dropped: two cargo
/// commands at once (a build and a test run, say) make a thing once, the second waiting and
/// then finding it made.
pub fn lock(root: &Path, name: &str) -> std::io::Result<File> {
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

/// The last `count` lines of a nested command's output, for a message that says why it failed
/// without drowning the rest.
pub fn tail(output: &[u8], count: usize) -> String {
    let text = String::from_utf8_lossy(output);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_cargo_builds_in_its_own_directory_without_the_outer_steering() {
        let root = Path::new("/checkout");
        let command = cargo(root, &["build", "-p", "mock-devin"]);
        let envs: Vec<(String, Option<String>)> = command
            .get_envs()
            .map(|(name, value)| {
                (
                    name.to_string_lossy().into_owned(),
                    value.map(|value| value.to_string_lossy().into_owned()),
                )
            })
            .collect();
        assert!(envs.contains(&(
            "CARGO_TARGET_DIR".to_owned(),
            Some("/checkout/target/test-build".to_owned())
        )));
        for name in OUTER_ONLY.iter().chain(&PACKAGE_CONTEXT) {
            assert!(
                envs.contains(&((*name).to_owned(), None)),
                "{name} is not removed"
            );
        }
        assert_eq!(command.get_current_dir(), Some(root));
        let args: Vec<_> = command.get_args().collect();
        assert_eq!(args, ["build", "-p", "mock-devin"]);
    }

    #[test]
    fn the_package_context_cargo_set_for_this_test_is_not_passed_on() {
        // cargo sets CARGO_PKG_NAME for the test it runs.
        assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
        let mut command = Command::new("cargo");
        without_package_context(&mut command);
        let removed: Vec<String> = command
            .get_envs()
            .filter(|(_, value)| value.is_none())
            .map(|(name, _)| name.to_string_lossy().into_owned())
            .collect();
        assert!(
            removed.contains(&"CARGO_PKG_NAME".to_owned()),
            "{removed:?}"
        );
        assert!(
            removed.contains(&"CARGO_MANIFEST_DIR".to_owned()),
            "{removed:?}"
        );
        assert!(!removed.contains(&"CARGO".to_owned()), "{removed:?}");
    }

    #[test]
    fn xtask_runs_through_cargo_with_its_arguments_after_the_separator() {
        let command = xtask(Path::new("/checkout"), &["components"]);
        let args: Vec<_> = command
            .get_args()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "run",
                "--quiet",
                "--locked",
                "--package",
                "xtask",
                "--",
                "components"
            ]
        );
    }

    #[test]
    fn a_second_lock_waits_for_the_first() {
        let dir = std::env::temp_dir().join(format!("nested-cargo-lock-{}", std::process::id()));
        let held = lock(&dir, "thing.lock").expect("first lock");
        let path = target_dir(&dir).join("thing.lock");
        let other = File::open(&path).expect("open");
        let second = other.try_lock();
        drop(held);
        let after = other.try_lock();
        std::fs::remove_dir_all(&dir).expect("remove the test directory");
        assert!(
            matches!(second, Err(std::fs::TryLockError::WouldBlock)),
            "a second lock was granted while the first is held"
        );
        after.expect("free once the first is dropped");
    }

    #[test]
    fn the_tail_keeps_the_last_lines() {
        assert_eq!(tail(b"one\ntwo\nthree\n", 2), "two\nthree");
        assert_eq!(tail(b"only", 5), "only");
    }
}
