//! Builds the test components into `OUT_DIR` with `cargo xtask test-components` (a nested
//! cargo in `target/test-build`, see `devin-bridge-nested-cargo`) and writes `components.rs`:
//! one constant per component, named after its file (`twin.wasm` is `TWIN`).
//!
//! When `cargo xtask test-components` was run ahead of this build (`cargo xtask test` and CI
//! run it into `target/test-components`) and no file it lists in `sources` changed after it
//! wrote that list, the components are copied from there instead: the same build, without a
//! second xtask compiled in the nested cargo's directory.
//!
//! xtask writes, beside the components, `sources`: every file they were built from (the
//! sources the wasm build read, their packages' manifests, the lockfile, the workspace
//! manifest with the wasm profile, xtask's own build code). Each is watched, so cargo runs this
//! script again exactly when one of them changes; the wasm build itself is incremental (it
//! keeps its own target directory), so a rerun rebuilds only what changed.
//!
//! A failed build fails this script, with the end of xtask's output: the tests that use these
//! components cannot be compiled without them, and saying why beats a missing constant.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_else(|| {
        panic!("cargo sets OUT_DIR for a build script");
    }));
    let manifest_dir = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|| panic!("cargo sets CARGO_MANIFEST_DIR for a build script")),
    );
    let root = manifest_dir
        .ancestors()
        .nth(2)
        .unwrap_or_else(|| panic!("tests/artifacts sits two levels below the workspace root"))
        .to_path_buf();
    let components = out_dir.join("components");
    let prebuilt = devin_bridge_nested_cargo::test_components_dir(&root);
    if is_current(&prebuilt) {
        copy_set(&prebuilt, &components);
    } else {
        build(&root, &components);
    }
    watch_sources(&components.join("sources"));
    let code = constants(&components);
    std::fs::write(out_dir.join("components.rs"), code)
        .unwrap_or_else(|error| panic!("writing OUT_DIR/components.rs: {error}"));
}

/// Whether `dir` holds a set `cargo xtask test-components` built from the files as they are:
/// its `sources` list (written after the components) is there, and no file it lists is missing
/// or newer than it.
fn is_current(dir: &Path) -> bool {
    let list = dir.join("sources");
    let (Ok(text), Ok(built)) = (
        std::fs::read_to_string(&list),
        std::fs::metadata(&list).and_then(|meta| meta.modified()),
    ) else {
        return false;
    };
    text.lines().filter(|line| !line.is_empty()).all(|source| {
        std::fs::metadata(source)
            .and_then(|meta| meta.modified())
            .is_ok_and(|modified| modified <= built)
    })
}

/// Copies the components and the `sources` list of `from` into `to`, which then holds exactly
/// that set.
fn copy_set(from: &Path, to: &Path) {
    if to.exists() {
        std::fs::remove_dir_all(to)
            .unwrap_or_else(|error| panic!("clearing {}: {error}", to.display()));
    }
    std::fs::create_dir_all(to)
        .unwrap_or_else(|error| panic!("creating {}: {error}", to.display()));
    let entries = std::fs::read_dir(from)
        .unwrap_or_else(|error| panic!("reading {}: {error}", from.display()));
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let wanted = path.extension().is_some_and(|ext| ext == "wasm")
            || path.file_name().is_some_and(|name| name == "sources");
        if wanted {
            let target = to.join(entry.file_name());
            std::fs::copy(&path, &target).unwrap_or_else(|error| {
                panic!(
                    "copying {} to {}: {error}",
                    path.display(),
                    target.display()
                )
            });
        }
    }
}

/// Builds the test components into `components` with a nested `cargo xtask test-components`.
fn build(root: &Path, components: &Path) {
    let out_arg = components.display().to_string();
    let output = devin_bridge_nested_cargo::xtask(root, &["test-components", "--out", &out_arg])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("cannot run `cargo xtask test-components`: {error}"));
    if !output.status.success() {
        panic!(
            "`cargo xtask test-components --out {out_arg}` failed ({}); the host's tests load \
             these components. Its last lines (run it yourself to see them all):\n{}",
            output.status,
            devin_bridge_nested_cargo::tail(&output.stderr, 30)
        );
    }
}

/// `cargo:rerun-if-changed` for every file `sources` lists (one path a line).
fn watch_sources(list: &Path) {
    let sources = std::fs::read_to_string(list)
        .unwrap_or_else(|error| panic!("xtask wrote no {}: {error}", list.display()));
    for source in sources.lines().filter(|line| !line.is_empty()) {
        println!("cargo:rerun-if-changed={source}");
    }
}

/// One `TestComponent` constant per `*.wasm` file in `dir`, in name order.
fn constants(dir: &Path) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("reading {}: {error}", dir.display()))
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "wasm"))
        .collect();
    files.sort();
    let mut code = String::from("// Generated by build.rs: the test components xtask built.\n");
    for path in files {
        let name = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .unwrap_or_else(|| panic!("{}: not a UTF-8 file name", path.display()));
        let constant = name.replace('-', "_").to_uppercase();
        let path = path.display().to_string();
        let _ = writeln!(
            code,
            "/// The `{name}` test component.\n\
             pub const {constant}: TestComponent = TestComponent {{ name: {name:?}, path: {path:?} }};"
        );
    }
    code
}
