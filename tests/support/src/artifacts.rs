//! Where the things the tests and benchmarks run are, and making the ones a plain `cargo test`
//! does not make.
//!
//! Each has an environment variable that names it (`cargo xtask test` and `cargo xtask bench`
//! set them); when it is unset:
//! - the transform components are `target/components`, which the host's build script builds
//!   when they are missing (`host/build.rs`); the test components are not here but in
//!   `devin-bridge-test-artifacts`, which builds them for the tests at build time;
//! - the executables of other packages of this workspace (`mock-devin`, `fake-devin-remote`)
//!   are beside the running test or benchmark, in `target/<profile>/`, where a workspace
//!   `cargo test` builds them (they are default members); when they are not (`cargo test -p
//!   devin-bridge` builds only the host's own), they are built on first use with a nested
//!   `cargo build` into `target/test-build` (see `devin-bridge-nested-cargo`);
//! - the installable tarball and the pinned Claude Code are made on first use, once per
//!   process and under a file lock, so parallel tests and concurrent runs make each once: the
//!   tarball by `cargo xtask dist --binary` from the `devin-bridge` the tests run, Claude Code
//!   by the npm install of `devin-bridge-test-setup`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use devin_bridge_nested_cargo as nested;

/// The workspace root (the checkout).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/support sits two levels below the workspace root")
        .to_path_buf()
}

/// The profile directory of the running test or benchmark (`target/<profile>`): cargo puts
/// test and bench executables in its `deps/`, and the workspace's binaries in it.
fn profile_dirs() -> Vec<PathBuf> {
    let exe = std::env::current_exe().expect("the running executable");
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(Path::to_path_buf)
        .collect()
}

/// The executable `name` built into the same profile directory as the running test or
/// benchmark, if it is there.
pub fn binary(name: &str) -> Option<PathBuf> {
    profile_dirs()
        .into_iter()
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// `$variable` when set, else [`binary`]`(name)`, else where that binary would be (so a
/// message can name it).
pub fn target_binary(variable: &str, name: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(variable).filter(|path| !path.is_empty()) {
        return PathBuf::from(path);
    }
    binary(name).unwrap_or_else(|| {
        profile_dirs()
            .pop()
            .unwrap_or_else(|| workspace_root().join("target"))
            .join(name)
    })
}

/// The offline agent: `DEVIN_BRIDGE_MOCK_DEVIN`, else `target/<profile>/mock-devin`, else
/// built on first use (see [`workspace_binary`]).
pub fn mock_devin() -> PathBuf {
    static MOCK_DEVIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    MOCK_DEVIN
        .get_or_init(|| workspace_binary("DEVIN_BRIDGE_MOCK_DEVIN", "mock-devin", "mock-devin"))
        .clone()
        .unwrap_or_else(|error| panic!("{error}"))
}

/// The fake `devin-remote` the outpost rig publishes: `FAKE_DEVIN_REMOTE`, else
/// `target/<profile>/fake-devin-remote`, else built on first use (see [`workspace_binary`]).
pub fn fake_devin_remote() -> PathBuf {
    static REMOTE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    REMOTE
        .get_or_init(|| {
            workspace_binary(
                "FAKE_DEVIN_REMOTE",
                "devin-bridge-fake-fleet",
                "fake-devin-remote",
            )
        })
        .clone()
        .unwrap_or_else(|error| panic!("{error}"))
}

/// The executable `name` of the workspace package `package`: `$variable` when set (it must
/// be a file), else beside the running test ([`binary`]), else built with `cargo build
/// --package PACKAGE --bin NAME` into `target/test-build` under a file lock, so that
/// concurrent test binaries build it once and the later ones find it built. The build is
/// incremental: after the first one it costs cargo's check that nothing changed.
fn workspace_binary(variable: &str, package: &str, name: &str) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(variable).filter(|path| !path.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{variable}={} is not a file", path.display()))
        };
    }
    if let Some(path) = binary(name) {
        return Ok(path);
    }
    let root = workspace_root();
    let built = nested::target_dir(&root).join("debug").join(name);
    let _lock = nested::lock(&root, &format!("{name}.lock"))
        .map_err(|error| format!("{name} lock: {error}"))?;
    eprintln!(
        "test-support: no {name} beside this test (a workspace `cargo test` builds it there); \
         building it with `cargo build -p {package} --bin {name}` into {}",
        nested::target_dir(&root).display()
    );
    let output = nested::cargo(
        &root,
        &["build", "--locked", "--package", package, "--bin", name],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .map_err(|error| format!("cannot run cargo to build {name}: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "no {name} beside this test, and `cargo build -p {package} --bin {name}` failed \
             ({}):\n{}",
            output.status,
            nested::tail(&output.stderr, 30)
        ));
    }
    if !built.is_file() {
        return Err(format!(
            "`cargo build -p {package} --bin {name}` succeeded but wrote no {}",
            built.display()
        ));
    }
    Ok(built)
}

/// The `devin-bridge` binary of this build (`target/<profile>/devin-bridge`): for the host's
/// integration tests, the one cargo built for them.
pub fn devin_bridge() -> PathBuf {
    binary("devin-bridge").unwrap_or_else(|| {
        panic!(
            "no devin-bridge in {:?}: `cargo test -p devin-bridge` builds it",
            profile_dirs()
        )
    })
}

/// `DEVIN_BRIDGE_COMPONENTS`, else `target/components`, whether or not it holds components.
pub fn default_components_dir() -> PathBuf {
    std::env::var_os("DEVIN_BRIDGE_COMPONENTS")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target").join("components"))
}

/// The built transform components.
pub fn components_dir() -> PathBuf {
    let dir = default_components_dir();
    assert!(
        dir.join("serializer.wasm").exists(),
        "no components in {}: the host's build script builds them with `cargo xtask \
         components`; its warnings (`cargo build -p devin-bridge`) say why it could not",
        dir.display()
    );
    dir
}

pub fn component(name: &str) -> PathBuf {
    components_dir().join(format!("{name}.wasm"))
}

/// The installable tarball of the `devin-bridge` under test: `DEVIN_BRIDGE_DIST_TARBALL`
/// (`cargo xtask test` packages it before the tests), else packaged on first use by
/// `cargo xtask dist --binary` into `target/test-build/dist`.
pub fn dist_tarball() -> PathBuf {
    if let Some(path) = std::env::var_os("DEVIN_BRIDGE_DIST_TARBALL").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "no tarball at {}", path.display());
        return path;
    }
    static TARBALL: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    TARBALL
        .get_or_init(package_tarball)
        .clone()
        .unwrap_or_else(|error| panic!("{error}"))
}

fn package_tarball() -> Result<PathBuf, String> {
    let root = workspace_root();
    let binary = devin_bridge();
    let out = nested::target_dir(&root).join("dist");
    let _lock = nested::lock(&root, "dist.lock").map_err(|e| format!("dist lock: {e}"))?;
    eprintln!(
        "test-support: packaging {} with `cargo xtask dist --binary` into {}",
        binary.display(),
        out.display()
    );
    let binary_arg = binary.display().to_string();
    let out_arg = out.display().to_string();
    let output = nested::xtask(&root, &["dist", "--binary", &binary_arg, "--out", &out_arg])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run cargo xtask dist: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "`cargo xtask dist --binary {binary_arg} --out {out_arg}` failed ({}):\n{}{stdout}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    // xtask prints the tarball's path as its last line of standard output.
    let tarball = stdout
        .lines()
        .last()
        .map(PathBuf::from)
        .filter(|path| path.is_file())
        .ok_or_else(|| format!("cargo xtask dist named no tarball: {stdout:?}"))?;
    Ok(tarball)
}

/// The pinned Claude Code executable: `DEVIN_BRIDGE_CLAUDE_CODE` (`cargo xtask test` sets it),
/// else installed on first use under `target/claude-code/` (npm, once; node and npm needed).
pub fn claude_code() -> PathBuf {
    if let Some(path) = std::env::var_os("DEVIN_BRIDGE_CLAUDE_CODE").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "DEVIN_BRIDGE_CLAUDE_CODE={} is not a file",
            path.display()
        );
        return path;
    }
    static CLAUDE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    CLAUDE
        .get_or_init(|| {
            let root = workspace_root();
            let _lock =
                nested::lock(&root, "claude-code.lock").map_err(|e| format!("lock: {e}"))?;
            devin_bridge_test_setup::claude_code::ensure(&root.join("target").join("claude-code"))
                .map_err(|error| {
                    format!("Claude Code is not installed, and installing it failed: {error}")
                })
        })
        .clone()
        .unwrap_or_else(|error| panic!("{error}"))
}

/// The `node_modules` directory holding the pinned Anthropic SDK, installed on first use under
/// `target/anthropic-sdk/` (npm, once; node and npm needed).
pub fn anthropic_sdk() -> PathBuf {
    static SDK: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    SDK.get_or_init(|| {
        let root = workspace_root();
        let _lock = nested::lock(&root, "anthropic-sdk.lock").map_err(|e| format!("lock: {e}"))?;
        devin_bridge_test_setup::anthropic_sdk::ensure(&root.join("target").join("anthropic-sdk"))
            .map_err(|error| {
                format!("the Anthropic SDK is not installed, and installing it failed: {error}")
            })
    })
    .clone()
    .unwrap_or_else(|error| panic!("{error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_root_holds_the_workspace_manifest() {
        let manifest = std::fs::read_to_string(workspace_root().join("Cargo.toml"))
            .expect("the workspace manifest");
        assert!(manifest.contains("[workspace]"), "{manifest}");
    }

    #[test]
    fn a_binary_its_variable_names_is_used_and_must_be_a_file() {
        let variable = "DEVIN_BRIDGE_TEST_SUPPORT_NAMED_BINARY";
        let exe = std::env::current_exe().expect("exe");
        std::env::set_var(variable, &exe);
        assert_eq!(
            workspace_binary(variable, "no-such-package", "no-such-binary"),
            Ok(exe)
        );
        std::env::set_var(variable, "/nonexistent/agent");
        let error = workspace_binary(variable, "no-such-package", "no-such-binary")
            .expect_err("not a file");
        std::env::remove_var(variable);
        assert!(error.contains(variable), "{error}");
    }

    #[test]
    fn binaries_are_looked_up_beside_the_running_executable() {
        let exe = std::env::current_exe().expect("exe");
        let dirs = profile_dirs();
        assert_eq!(dirs.first().map(PathBuf::as_path), exe.parent());
        assert!(binary("no-such-binary-in-this-workspace").is_none());
        let fallback = target_binary("DEVIN_BRIDGE_TEST_SUPPORT_UNSET", "no-such-binary");
        assert_eq!(
            fallback.parent(),
            exe.parent().and_then(Path::parent),
            "{}",
            fallback.display()
        );
    }
}
