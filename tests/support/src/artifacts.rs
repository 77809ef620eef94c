//! Where the things the tests and benchmarks run are, and making the ones a plain `cargo test`
//! does not make.
//!
//! Each has an environment variable that names it (`cargo xtask test` and `cargo xtask bench`
//! set them); when it is unset:
//! - the transform and test components are `target/components` and `target/components/test`,
//!   which the host's build script builds when they are missing (`host/build.rs`);
//! - the executables of this workspace (`devin-bridge`, `mock-devin`, `fake-devin-remote`) are
//!   beside the running test or benchmark, in `target/<profile>/`, where a workspace
//!   `cargo test` builds them (they are default members);
//! - the installable tarball and the pinned Claude Code are made on first use, once per
//!   process and under a file lock, so parallel tests and concurrent runs make each once: the
//!   tarball by `cargo xtask dist --binary` from the `devin-bridge` the tests run, Claude Code
//!   by the npm install of `devin-bridge-test-setup`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::xtask;

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

/// The offline agent (`DEVIN_BRIDGE_MOCK_DEVIN`, else `target/<profile>/mock-devin`).
pub fn mock_devin() -> PathBuf {
    let path = target_binary("DEVIN_BRIDGE_MOCK_DEVIN", "mock-devin");
    assert!(
        path.is_file(),
        "no offline agent at {}: a workspace `cargo test` builds it (or `cargo build -p mock-devin`)",
        path.display()
    );
    path
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
        "no components in {}: the host's build script builds them with `cargo xtask components \
         --tests`; its warnings (`cargo build -p devin-bridge`) say why it could not",
        dir.display()
    );
    dir
}

/// The deliberately faulty components built for the tests (`DEVIN_BRIDGE_TEST_COMPONENTS`,
/// else `test/` beside the transforms).
pub fn test_components_dir() -> PathBuf {
    let dir = std::env::var_os("DEVIN_BRIDGE_TEST_COMPONENTS")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| default_components_dir().join("test"));
    assert!(
        dir.join("misbehaving-serializer.wasm").exists(),
        "no test components in {}: the host's build script builds them with `cargo xtask \
         components --tests`; its warnings (`cargo build -p devin-bridge`) say why it could not",
        dir.display()
    );
    dir
}

pub fn component(name: &str) -> PathBuf {
    components_dir().join(format!("{name}.wasm"))
}

pub fn test_component(name: &str) -> PathBuf {
    test_components_dir().join(format!("{name}.wasm"))
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
    let out = xtask::target_dir(&root).join("dist");
    let _lock = xtask::lock(&root, "dist.lock").map_err(|e| format!("dist lock: {e}"))?;
    eprintln!(
        "test-support: packaging {} with `cargo xtask dist --binary` into {}",
        binary.display(),
        out.display()
    );
    let binary_arg = binary.display().to_string();
    let out_arg = out.display().to_string();
    let output = xtask::command(&root, &["dist", "--binary", &binary_arg, "--out", &out_arg])
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
            let _lock = xtask::lock(&root, "claude-code.lock").map_err(|e| format!("lock: {e}"))?;
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
        let _lock = xtask::lock(&root, "anthropic-sdk.lock").map_err(|e| format!("lock: {e}"))?;
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
