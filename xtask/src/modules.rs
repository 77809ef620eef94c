//! `cargo xtask modules`: no import circle between the top-level modules of any crate of the
//! workspace (`cargo xtask test` runs it first).
//!
//! A crate's top-level module A depends on its sibling B when a file of A names `crate::B`
//! (or, from a file directly under `src/`, `super::B`). Comments and `#[cfg(test)] mod tests`
//! blocks are ignored: a test may reach anywhere. The check is textual on purpose: it needs no
//! compiler, runs in milliseconds, and a circle it reports is one a reader would see too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The top-level module graph of the crate whose sources are under `src`.
pub(crate) fn module_graph(src: &Path) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in rust_files(src)? {
        let relative = file.strip_prefix(src).context("a file under src")?;
        let parts: Vec<String> = relative
            .with_extension("")
            .iter()
            .map(|part| part.to_string_lossy().into_owned())
            .collect();
        let Some(top) = parts.first().cloned() else {
            continue;
        };
        // `lib.rs`/`main.rs` are the crate root; a file of tests (`foo/tests.rs`, declared as
        // `#[cfg(test)] mod tests;`) may reach anywhere, like a `mod tests` block.
        if top == "lib" || top == "main" || parts.iter().skip(1).any(|part| part == "tests") {
            continue;
        }
        // How deep the file's module is below its top-level module (`a.rs`, `a/mod.rs`: 0).
        let depth = if parts.last().is_some_and(|last| last == "mod") {
            parts.len() - 2
        } else {
            parts.len() - 1
        };
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let code = without_tests(&without_comments(&text));
        let edges = graph.entry(top.clone()).or_default();
        edges.extend(names_after(&code, "crate::"));
        if depth == 0 {
            edges.extend(names_after(&code, "super::"));
        } else if depth == 1 {
            edges.extend(names_after(&code, "super::super::"));
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for (module, edges) in &mut graph {
        edges.retain(|target| target != module && modules.contains(target));
    }
    Ok(graph)
}

/// Strongly connected components with more than one module: the import circles.
pub(crate) fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Kosaraju on a graph of a few dozen nodes: clarity over speed.
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    for node in graph.keys() {
        finish_order(graph, node, &mut seen, &mut order);
    }
    let mut reverse: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, targets) in graph {
        for to in targets {
            reverse.entry(to.as_str()).or_default().push(from.as_str());
        }
    }
    let mut assigned = BTreeSet::new();
    let mut found = Vec::new();
    for node in order.iter().rev() {
        if assigned.contains(node.as_str()) {
            continue;
        }
        let mut component = Vec::new();
        let mut stack = vec![node.as_str()];
        while let Some(current) = stack.pop() {
            if !assigned.insert(current.to_owned()) {
                continue;
            }
            component.push(current.to_owned());
            stack.extend(reverse.get(current).into_iter().flatten().copied());
        }
        if component.len() > 1 {
            component.sort();
            found.push(component);
        }
    }
    found
}

fn finish_order(
    graph: &BTreeMap<String, BTreeSet<String>>,
    node: &str,
    seen: &mut BTreeSet<String>,
    order: &mut Vec<String>,
) {
    if !seen.insert(node.to_owned()) {
        return;
    }
    for next in graph.get(node).into_iter().flatten() {
        finish_order(graph, next, seen, order);
    }
    order.push(node.to_owned());
}

/// Identifiers that follow `prefix` (`crate::foo::bar` gives `foo`), and the first names of a
/// `prefix{a, b::c}` group.
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        // `super::super::x` must not count as `super::x` from a shallower file.
        if prefix == "super::" && (before == Some(':') || rest.starts_with("super::")) {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name = identifier(item.trim_start());
                let nested = item.trim_start()[name.len()..].starts_with("::");
                if !name.is_empty() && nested {
                    names.insert(name.to_owned());
                }
            }
        } else {
            let name = identifier(rest);
            if (!name.is_empty() && rest[name.len()..].starts_with("::"))
                || is_module_use(rest, name)
            {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// `use crate::foo;` / `use super::foo;` names the module itself.
fn is_module_use(rest: &str, name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
        && matches!(rest[name.len()..].chars().next(), Some(';' | ',' | '}'))
}

fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The text without `//` comments (line and doc comments). String literals containing `//`
/// lose their tail, which only ever removes edges, never adds one.
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text before a `#[cfg(test)]` module (tests sit at the end of a file by convention here).
fn without_tests(text: &str) -> String {
    match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in
            std::fs::read_dir(&current).with_context(|| format!("reading {}", current.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Checks every crate of the workspace (each `src/` directory beside a `Cargo.toml`).
pub(crate) fn check(root: &Path, crates: &[PathBuf]) -> Result<()> {
    let mut failures = Vec::new();
    for krate in crates {
        let src = root.join(krate).join("src");
        if !src.is_dir() {
            continue;
        }
        let graph = module_graph(&src)?;
        let found = circles(&graph);
        if found.is_empty() {
            eprintln!(
                "xtask: modules {:<28} {} top-level modules, no circle",
                krate.display(),
                graph.len()
            );
        }
        for circle in found {
            failures.push(format!("{}: {}", krate.display(), circle.join(" <-> ")));
        }
    }
    if !failures.is_empty() {
        bail!(
            "import circles between top-level modules:\n  {}",
            failures.join("\n  ")
        );
    }
    Ok(())
}

/// The crates the check covers: every directory of the workspace with a `Cargo.toml` and a
/// `src/`.
pub(crate) fn workspace_crates(root: &Path) -> Result<Vec<PathBuf>> {
    let mut crates = vec![PathBuf::from("host"), PathBuf::from("xtask")];
    for parent in ["crates", "components", "tests", "tests/components", "tools"] {
        let Ok(entries) = std::fs::read_dir(root.join(parent)) else {
            continue;
        };
        for entry in entries {
            let path = entry?.path();
            if path.join("Cargo.toml").is_file() && path.join("src").is_dir() {
                crates.push(
                    path.strip_prefix(root)
                        .context("under the root")?
                        .to_path_buf(),
                );
            }
        }
    }
    crates.sort();
    Ok(crates)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        edges
            .iter()
            .map(|(from, to)| {
                (
                    (*from).to_owned(),
                    to.iter().map(|name| (*name).to_owned()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn a_two_module_circle_is_found_and_a_chain_is_not() {
        let chain = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &[])]);
        assert!(circles(&chain).is_empty());
        let circle = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]);
        assert_eq!(circles(&circle), vec![vec!["a", "b", "c"]]);
    }

    #[test]
    fn paths_groups_and_module_uses_are_edges_comments_and_tests_are_not() {
        let dir = tempfile::tempdir().expect("temp dir");
        let src = dir.path();
        std::fs::write(src.join("lib.rs"), "mod a; mod b; mod c; mod d;").expect("write");
        std::fs::write(
            src.join("a.rs"),
            "use super::{b::Thing, x};\n// crate::c::Nope\n",
        )
        .expect("write");
        std::fs::write(src.join("b.rs"), "use crate::c;\n").expect("write");
        std::fs::write(
            src.join("c.rs"),
            "fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::a::Thing;\n}\n",
        )
        .expect("write");
        std::fs::create_dir(src.join("d")).expect("dir");
        std::fs::write(src.join("d").join("mod.rs"), "mod inner;").expect("write");
        std::fs::write(
            src.join("d").join("inner.rs"),
            "use super::super::a::Thing;",
        )
        .expect("write");
        let found = module_graph(src).expect("graph");
        assert_eq!(found["a"], ["b".to_owned()].into());
        assert_eq!(found["b"], ["c".to_owned()].into());
        assert!(found["c"].is_empty(), "{found:?}");
        assert_eq!(found["d"], ["a".to_owned()].into());
        assert!(circles(&found).is_empty());
    }
}
