//! What a set of components was built from, for a build script to watch: the files the wasm
//! build read (from the dep-info cargo writes beside each core module, which names every source
//! of the package and of its path dependencies, the WIT files its bindings include among them),
//! the manifests of the packages those files belong to, and what decides a build beyond its
//! sources: the lockfile (dependency versions), the workspace manifest (the `wasm` profile)
//! and xtask's own build code. Registry sources are not listed: the lockfile pins them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Every file a build of the core modules at `modules` (their dep-info files, `<lib>.d`) read,
/// plus the build's fixed inputs under `root`, sorted and without duplicates.
pub(crate) fn of_build(root: &Path, dep_infos: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut sources = BTreeSet::new();
    for dep_info in dep_infos {
        let text = std::fs::read_to_string(dep_info)
            .with_context(|| format!("reading {}", dep_info.display()))?;
        for file in dependencies(&text) {
            if let Some(manifest) = package_manifest(root, &file) {
                sources.insert(manifest);
            }
            sources.insert(file);
        }
    }
    sources.insert(root.join("Cargo.lock"));
    sources.insert(root.join("Cargo.toml"));
    sources.insert(root.join("xtask").join("src").join("wasm.rs"));
    sources.insert(root.join("xtask").join("src").join("sources.rs"));
    Ok(sources.into_iter().collect())
}

/// The prerequisites of a makefile-style dep-info text (`target: dep dep ...`), where a space
/// inside a path is written `\ `.
fn dependencies(text: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for line in text.lines() {
        // A rule's target ends at the first `: ` (a path may contain `:` but not `: `).
        let Some((_, prerequisites)) = line.split_once(": ") else {
            continue;
        };
        let mut current = String::new();
        let mut chars = prerequisites.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => {
                    current.push(' ');
                    chars.next();
                }
                ' ' => {
                    if !current.is_empty() {
                        files.push(PathBuf::from(std::mem::take(&mut current)));
                    }
                }
                c => current.push(c),
            }
        }
        if !current.is_empty() {
            files.push(PathBuf::from(current));
        }
    }
    files
}

/// The `Cargo.toml` of the package `file` belongs to: the nearest one above it, inside `root`.
fn package_manifest(root: &Path, file: &Path) -> Option<PathBuf> {
    file.ancestors()
        .skip(1)
        .take_while(|dir| dir.starts_with(root))
        .map(|dir| dir.join("Cargo.toml"))
        .find(|manifest| manifest.is_file())
}

/// Writes `sources` to `path`, one absolute path a line.
pub(crate) fn write(path: &Path, sources: &[PathBuf]) -> Result<()> {
    let mut text = String::new();
    for source in sources {
        text.push_str(&source.display().to_string());
        text.push('\n');
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dep_info_rule_lists_its_prerequisites_with_escaped_spaces() {
        let text = "/t/x.wasm: /a/src/lib.rs /a/my\\ dir/wit/w.wit /b/src/lib.rs\n\n";
        assert_eq!(
            dependencies(text),
            [
                PathBuf::from("/a/src/lib.rs"),
                PathBuf::from("/a/my dir/wit/w.wit"),
                PathBuf::from("/b/src/lib.rs"),
            ]
        );
    }

    #[test]
    fn the_sources_name_each_package_manifest_and_the_build_inputs() {
        let root = tempfile::tempdir().expect("tempdir");
        let package = root.path().join("tests/components/twin");
        std::fs::create_dir_all(package.join("src")).expect("mkdir");
        std::fs::write(package.join("Cargo.toml"), "").expect("manifest");
        let lib = package.join("src/lib.rs");
        std::fs::write(&lib, "").expect("lib");
        let dep_info = root.path().join("twin.d");
        std::fs::write(&dep_info, format!("/t/twin.wasm: {}\n", lib.display())).expect("d");
        let sources = of_build(root.path(), &[dep_info]).expect("sources");
        for expected in [
            lib.clone(),
            package.join("Cargo.toml"),
            root.path().join("Cargo.lock"),
            root.path().join("Cargo.toml"),
            root.path().join("xtask/src/wasm.rs"),
        ] {
            assert!(
                sources.contains(&expected),
                "{expected:?} not in {sources:?}"
            );
        }
        assert_eq!(
            sources.iter().filter(|path| **path == lib).count(),
            1,
            "listed once"
        );
    }
}
