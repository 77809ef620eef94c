//! `cargo xtask modules`: no import circle between the top-level modules of any crate of the
//! workspace, and no long function in shipped code (`cargo xtask test` runs it first).
//!
//! A crate's top-level module A depends on its sibling B when a file of A names `crate::B`
//! (or, from a file directly under `src/`, `super::B`). Comments, literals and every
//! `#[cfg(test)]` item are ignored (see [`crate::rust_text`]): a test may reach anywhere, and
//! so may the crate's own `src/tests.rs` and every `tests.rs` or `tests/` below a module. The
//! check is textual on purpose: it needs no compiler, runs in milliseconds, and a circle it
//! reports is one a reader would see too.
//!
//! The crate root (`lib.rs`/`main.rs`) is a node too, [`ROOT`]: a module that names an item the
//! root holds (`crate::Item`, or `super::Item` from a file directly under `src/`, where `Item`
//! is no module) depends on the root, and the root depends on every module whose items it names
//! (a path `m::...`, `crate::m`, `use m;`), beyond declaring it with `mod m;` or re-exporting
//! its items (`pub use m::Item;`): a module that names a re-exported item depends on `m`, the
//! module that defines it. An item the root re-exports from another crate is the root's for
//! this purpose: a module names the other crate's item by that crate's path, not through the
//! root.
//!
//! The long-function half is [`crate::long_functions`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::rust_text;

/// The crate root's node (a keyword: no module has this name).
pub(crate) const ROOT: &str = "crate";

/// The top-level module graph of the crate whose sources are under `src`, the crate root a
/// node of it (see the module doc).
pub(crate) fn module_graph(src: &Path) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // What each file of a top-level module names through the root, resolved once the set of
    // modules is known.
    let mut through_root: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut root_code = None;
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
        // `lib.rs`/`main.rs` are the crate root; a file of tests (`tests.rs`, `foo/tests.rs`,
        // declared as `#[cfg(test)] mod tests;`) may reach anywhere, like a `mod tests` block.
        if parts.len() == 1 && (top == "lib" || top == "main") {
            root_code = Some(code_of(&file)?);
            continue;
        }
        if parts.iter().any(|part| part == "tests") {
            continue;
        }
        // How deep the file's module is below its top-level module (`a.rs`, `a/mod.rs`: 0).
        let depth = if parts.last().is_some_and(|last| last == "mod") {
            parts.len() - 2
        } else {
            parts.len() - 1
        };
        let code = code_of(&file)?;
        let edges = graph.entry(top.clone()).or_default();
        edges.extend(names_after(&code, "crate::"));
        let parent = match depth {
            0 => Some("super::"),
            1 => Some("super::super::"),
            _ => None,
        };
        if let Some(parent) = parent {
            edges.extend(names_after(&code, parent));
        }
        let named = through_root.entry(top.clone()).or_default();
        named.extend(first_names_after(&code, "crate::"));
        if let Some(parent) = parent {
            named.extend(first_names_after(&code, parent));
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for (module, edges) in &mut graph {
        edges.retain(|target| target != module && modules.contains(target));
    }
    if let Some(code) = root_code {
        let reexported = reexports(&code, &modules);
        for (module, names) in &through_root {
            for name in names {
                if modules.contains(name) {
                    continue;
                }
                let target = reexported.get(name).map_or(ROOT, String::as_str);
                if target != module {
                    graph
                        .entry(module.clone())
                        .or_default()
                        .insert(target.to_owned());
                }
            }
        }
        graph.insert(
            ROOT.to_owned(),
            root_uses(&without_reexports(&code), &modules),
        );
    }
    Ok(graph)
}

/// The modules the root's own code names: paths `m::...` (not a path's later segment, such as
/// `other_crate::m::...`), `crate::m`/`self::m`, and `use m;`; `mod m;` declares, not uses.
fn root_uses(code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for prefix in ["crate::", "self::"] {
        used.extend(names_after(code, prefix));
        used.extend(first_names_after(code, prefix));
    }
    let mut rest = code;
    let mut before: Option<char> = None;
    while !rest.is_empty() {
        let name = identifier(rest);
        if name.is_empty() {
            let mut chars = rest.chars();
            before = chars.next();
            rest = chars.as_str();
            continue;
        }
        let after = &rest[name.len()..];
        // A path's first segment: not after `::` or inside another identifier.
        let starts_path = before != Some(':');
        if starts_path
            && modules.contains(name)
            && (after.starts_with("::") || is_use_of(code, rest, after))
        {
            used.insert(name.to_owned());
        }
        before = name.chars().next_back();
        rest = after;
    }
    used.retain(|name| modules.contains(name));
    used
}

/// `use m;` / `pub use m;` at `rest` (a module named alone in a `use`).
fn is_use_of(code: &str, rest: &str, after: &str) -> bool {
    let at = code.len() - rest.len();
    after.starts_with(';') && code[..at].trim_end().ends_with("use")
}

/// The root's code without its re-exports (`pub use ...;`, `pub(crate) use ...;`): like `mod`,
/// a re-export declares the crate's surface; a module naming a re-exported item depends on the
/// module that defines it (see [`reexports`]), not on the root.
fn without_reexports(code: &str) -> String {
    code.split_inclusive(';')
        .filter(|statement| {
            let statement = statement.trim_start();
            !(statement.starts_with("pub use ") || statement.starts_with("pub(crate) use "))
        })
        .collect()
}

/// The items the root re-exports by name from one of its modules (`pub use m::Item;`,
/// `pub use m::{A, B as C};`): the name a module reaches them by, and the module.
fn reexports(code: &str, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for statement in code.split(';') {
        let statement = statement.trim();
        let Some(path) = statement
            .strip_prefix("pub use ")
            .or_else(|| statement.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let path = path
            .trim_start_matches("crate::")
            .trim_start_matches("self::");
        let module = identifier(path);
        if !modules.contains(module) {
            continue;
        }
        let tail = &path[module.len()..];
        let Some(tail) = tail.strip_prefix("::") else {
            continue;
        };
        let items: Vec<&str> = match tail.strip_prefix('{') {
            Some(group) => group.trim_end_matches('}').split(',').collect(),
            None => vec![tail.rsplit("::").next().unwrap_or(tail)],
        };
        for item in items {
            let item = item.trim();
            let name = item
                .rsplit_once(" as ")
                .map_or(item, |(_, alias)| alias.trim());
            let name = name.rsplit("::").next().unwrap_or(name);
            if !name.is_empty() && name != "*" {
                found.insert(name.to_owned(), module.to_owned());
            }
        }
    }
    found
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
        // `other_crate::x` is no `crate::x`, and `super::super::x` must not count as
        // `super::x` from a shallower file.
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            || (prefix == "super::" && (before == Some(':') || rest.starts_with("super::")))
        {
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

/// Every first name after `prefix` (`crate::Bridge`, `crate::foo::x` and each name of
/// `crate::{A, b::C}`), whatever follows it: the caller tells modules from the root's items.
fn first_names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c == ':' || c.is_ascii_alphanumeric() || c == '_')
            || (prefix == "super::" && rest.starts_with("super::"))
        {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name = identifier(item.trim_start());
                if !name.is_empty() && name != "self" {
                    names.insert(name.to_owned());
                }
            }
        } else {
            let name = identifier(rest);
            if !name.is_empty() && name != "self" {
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

/// A file's code: without comments, literals' contents and `#[cfg(test)]` items.
fn code_of(file: &Path) -> Result<String> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    Ok(rust_text::without_test_items(&rust_text::mask(&text)))
}

pub(crate) fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
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

/// Checks every crate of the workspace (each `src/` directory beside a `Cargo.toml`) for
/// circles, its root a node of its graph.
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
            failures.push(format!(
                "{}: {} ({})",
                krate.display(),
                circle.join(" <-> "),
                edges_within(&graph, &circle).join(", ")
            ));
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

/// The edges between the modules of one circle (`a -> b`), which say what to move.
fn edges_within(graph: &BTreeMap<String, BTreeSet<String>>, circle: &[String]) -> Vec<String> {
    let mut edges = Vec::new();
    for from in circle {
        for to in graph.get(from).into_iter().flatten() {
            if circle.contains(to) {
                edges.push(format!("{from} -> {to}"));
            }
        }
    }
    edges
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
    fn paths_groups_and_module_uses_are_edges_comments_literals_and_tests_are_not() {
        let dir = tempfile::tempdir().expect("temp dir");
        let src = dir.path();
        std::fs::write(
            src.join("lib.rs"),
            "mod a; mod b; mod c; mod d; mod e;\n#[cfg(test)]\nmod tests;",
        )
        .expect("write");
        std::fs::write(
            src.join("a.rs"),
            "use super::b::Thing;\n// crate::c::Nope\nconst S: &str = \"crate::e::Nope\";\n",
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
        // A test-only helper module of any name, and the crate's own tests, reach anywhere.
        std::fs::write(
            src.join("e.rs"),
            "pub fn g() {}\n#[cfg(test)]\npub(crate) mod reference {\n    use super::super::d;\n}\n",
        )
        .expect("write");
        std::fs::write(
            src.join("tests.rs"),
            "use crate::e::g;\nuse crate::Nothing;\n",
        )
        .expect("write");
        let found = module_graph(src).expect("graph");
        assert_eq!(found["a"], ["b".to_owned()].into());
        assert_eq!(found["b"], ["c".to_owned()].into());
        assert!(found["c"].is_empty(), "{found:?}");
        assert_eq!(found["d"], ["a".to_owned()].into());
        assert!(found["e"].is_empty(), "{found:?}");
        assert!(!found.contains_key("tests"), "{found:?}");
        assert!(found[ROOT].is_empty(), "{found:?}");
        assert!(circles(&found).is_empty());
    }

    #[test]
    fn the_root_is_a_node_both_ways() {
        let dir = tempfile::tempdir().expect("temp dir");
        let src = dir.path();
        // The root uses `a`'s item and `c` through a path; `b` only re-exported; `Failure`
        // re-exported from another crate.
        std::fs::write(
            src.join("lib.rs"),
            "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\npub use b::{Key, Other as Renamed};\n\
             pub use other_crate::Failure;\n\
             pub struct Hub(a::Part);\nfn f() { c::g(); other_crate::d::h(); }\n",
        )
        .expect("write");
        // `a` names the root's own item: a circle through the root.
        std::fs::write(src.join("a.rs"), "use crate::Hub;\npub struct Part;\n").expect("write");
        // `c` names an item the root re-exports from `b`: that is `b`'s, not the root's.
        std::fs::write(src.join("c.rs"), "use super::Key;\npub fn g() {}\n").expect("write");
        std::fs::write(src.join("b.rs"), "pub struct Key;\npub struct Other;\n").expect("write");
        // `d` names the root's item only in its tests.
        std::fs::write(
            src.join("d.rs"),
            "pub fn h() {}\n#[cfg(test)]\nmod tests {\n    use crate::Hub;\n}\n",
        )
        .expect("write");
        // `e` names another crate's item through the root.
        std::fs::write(src.join("e.rs"), "use crate::Failure;\n").expect("write");

        let graph = module_graph(src).expect("graph");
        assert_eq!(
            graph[ROOT],
            ["a".to_owned(), "c".to_owned()].into(),
            "the root uses what its code names, not what it declares, re-exports, or another \
             crate's `d`"
        );
        assert_eq!(graph["a"], [ROOT.to_owned()].into());
        assert_eq!(graph["c"], ["b".to_owned()].into());
        assert!(graph["d"].is_empty(), "{graph:?}");
        assert_eq!(graph["e"], [ROOT.to_owned()].into());
        assert_eq!(circles(&graph), vec![vec!["a".to_owned(), ROOT.to_owned()]]);
    }
}
