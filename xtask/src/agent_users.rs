//! `cargo xtask modules` also checks that the agent crate's page says exactly who uses its
//! parts that serve one mode: the table under [`HEADING`] in `crates/agent/src/lib.rs` names,
//! for each such part, its items (paths from the crate root, as `acp::Agent` or `identity`)
//! and the places that use them (directories of the workspace, as `crates/summarizer`).
//!
//! The check scans every Rust file of the workspace outside the agent crate (tests, benches and
//! fuzz targets included; `target` directories and hidden ones skipped) for the agent crate's
//! paths (`devin_bridge_agent::acp::{Agent, ...}`, `devin_bridge_agent::identity::...`, a module
//! imported and then named: `use devin_bridge_agent::acp; ... acp::Agent`), and fails when
//! - a file outside a row's places uses one of the row's items, or
//! - a place a row names uses none of its items (the page would say more than is true), or
//! - the table is missing or a row is not `| part | items | places |`.
//!
//! Like the module check it is textual: it needs no compiler. Comments and string literals
//! are not code and are skipped; everything else counts, tests included.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The agent crate's page, relative to the workspace root.
pub(crate) const PAGE: &str = "crates/agent/src/lib.rs";

/// The line of the page the table follows.
pub(crate) const HEADING: &str = "## Who uses what";

/// The agent crate's name in code.
const CRATE: &str = "devin_bridge_agent";

/// One row of the page's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    /// The part, as the page names it.
    pub(crate) part: String,
    /// The items, as paths from the crate root (`acp::Agent`, `identity`).
    pub(crate) items: Vec<Vec<String>>,
    /// The places allowed to use them (workspace directories).
    pub(crate) places: Vec<String>,
}

/// Checks the page's table against the workspace's sources.
pub(crate) fn check(root: &Path) -> Result<()> {
    let page =
        std::fs::read_to_string(root.join(PAGE)).with_context(|| format!("reading {PAGE}"))?;
    let rows = table(&page)?;
    let mut uses = BTreeMap::new();
    for file in rust_files(root)? {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let relative = file.strip_prefix(root).context("under the root")?;
        uses.insert(relative.to_path_buf(), agent_paths(&text));
    }
    let failures = violations(&rows, &uses);
    if !failures.is_empty() {
        bail!(
            "{PAGE} says who uses what, and the sources disagree:\n  {}",
            failures.join("\n  ")
        );
    }
    eprintln!(
        "xtask: agent parts: {} rows of {PAGE} hold ({} files scanned)",
        rows.len(),
        uses.len()
    );
    Ok(())
}

/// The table's rows: the `//! |` lines after [`HEADING`], past the header and its rule.
pub(crate) fn table(page: &str) -> Result<Vec<Row>> {
    let doc: Vec<&str> = page
        .lines()
        .filter_map(|line| line.strip_prefix("//!"))
        .map(str::trim)
        .collect();
    let Some(start) = doc.iter().position(|line| *line == HEADING) else {
        bail!("{PAGE} has no `{HEADING}` section");
    };
    let lines: Vec<&str> = doc[start + 1..]
        .iter()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .copied()
        .collect();
    if lines.len() < 3 {
        bail!("{PAGE}: the `{HEADING}` table has no row");
    }
    lines[2..].iter().map(|line| row(line)).collect()
}

/// `| part | items | places |`; items and places are backquoted, comma-separated.
fn row(line: &str) -> Result<Row> {
    let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
    let [part, items, places] = cells[..] else {
        bail!("{PAGE}: a row is not `| part | items | places |`: {line}");
    };
    let items: Vec<Vec<String>> = quoted(items)
        .into_iter()
        .map(|item| item.split("::").map(str::to_owned).collect())
        .collect();
    let places = quoted(places);
    if items.is_empty() || places.is_empty() {
        bail!("{PAGE}: a row names no item or no place: {line}");
    }
    Ok(Row {
        part: part.to_owned(),
        items,
        places,
    })
}

/// The backquoted words of a cell.
fn quoted(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// What the table's rows get wrong about `uses` (each file's agent paths).
pub(crate) fn violations(
    rows: &[Row],
    uses: &BTreeMap<PathBuf, BTreeSet<Vec<String>>>,
) -> Vec<String> {
    let mut failures = Vec::new();
    for row in rows {
        let mut places_using = BTreeSet::new();
        for (file, paths) in uses {
            let Some(used) = paths
                .iter()
                .find(|path| row.items.iter().any(|item| names(path, item)))
            else {
                continue;
            };
            match row.places.iter().find(|place| file.starts_with(place)) {
                Some(place) => {
                    places_using.insert(place.clone());
                }
                None => failures.push(format!(
                    "{} uses `{}` ({}), which the page says only {} use",
                    file.display(),
                    used.join("::"),
                    row.part,
                    row.places.join(", ")
                )),
            }
        }
        for place in &row.places {
            if !places_using.contains(place) {
                failures.push(format!(
                    "{place} uses none of {} ({}), yet the page names it",
                    row.part,
                    row.items
                        .iter()
                        .map(|item| item.join("::"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    failures
}

/// Whether a used path names `item` or something inside it (`acp::Agent::new` names
/// `acp::Agent`); a glob (`acp::*`) names everything under its module.
fn names(path: &[String], item: &[String]) -> bool {
    match path.split_last() {
        Some((last, module)) if last == "*" => item.starts_with(module),
        _ => path.starts_with(item),
    }
}

/// The agent crate's paths a file names (from the crate root, without the crate's name): each
/// path after `devin_bridge_agent::` with its `{...}` groups spread out, and, for a module it
/// imports (`use devin_bridge_agent::acp;`, `identity::{self, ...}`), each `module::item` the
/// file names after it.
pub(crate) fn agent_paths(text: &str) -> BTreeSet<Vec<String>> {
    let code = code_only(text);
    let mut paths = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find(CRATE) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + CRATE.len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let Some(tree) = rest.strip_prefix("::") else {
            continue;
        };
        let mut found = Vec::new();
        spread(tree, &[], &mut found);
        paths.extend(found);
    }
    // A module brought in by name: its items as the file names them.
    let imported: Vec<Vec<String>> = paths.iter().cloned().collect();
    for module in imported {
        let Some(name) = module.last() else { continue };
        for item in items_after(&code, name) {
            let mut path = module.clone();
            path.push(item);
            paths.insert(path);
        }
    }
    paths
}

/// The paths of a use tree starting at `text` under `prefix` (a path, or a `{...}` group of
/// trees); `self` in a group is the prefix itself.
fn spread(text: &str, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix.to_vec();
    let mut at = 0;
    loop {
        let rest = &text[at..];
        let skipped = rest.len() - rest.trim_start().len();
        at += skipped;
        let rest = &text[at..];
        if let Some(group) = rest.strip_prefix('{') {
            at += 1 + spread_group(group, &path, out);
            return at;
        }
        if rest.starts_with('*') {
            path.push("*".to_owned());
            out.push(path);
            return at + 1;
        }
        let name = identifier(rest);
        if name.is_empty() {
            if path.len() > prefix.len() {
                out.push(path);
            }
            return at;
        }
        at += name.len();
        if name != "self" {
            path.push(name.to_owned());
        }
        let after = &text[at..];
        match after.strip_prefix("::") {
            Some(_) => at += 2,
            None => {
                if name == "self" || path.len() > prefix.len() {
                    out.push(path);
                }
                return at;
            }
        }
    }
}

/// The trees of a `{...}` group (the text after `{`) under `prefix`; returns the length read,
/// the closing `}` included.
fn spread_group(text: &str, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut at = 0;
    loop {
        at += spread(&text[at..], prefix, out);
        // Past an `as alias` and whitespace to the separator.
        let rest = &text[at..];
        let next = rest.find([',', '}']).unwrap_or(rest.len());
        at += next;
        match text[at..].chars().next() {
            Some(',') => at += 1,
            Some('}') => return at + 1,
            _ => return at,
        }
    }
}

/// The items a file names as `name::item` (not itself after `::`: `other::name::item` is
/// another crate's `name`).
fn items_after(code: &str, name: &str) -> BTreeSet<String> {
    let needle = format!("{name}::");
    let mut items = BTreeSet::new();
    let mut from = 0;
    while let Some(found) = code[from..].find(&needle) {
        let at = from + found;
        from = at + needle.len();
        let before = &code[..at];
        let joined = before.ends_with("::")
            || before
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if joined {
            continue;
        }
        let item = identifier(&code[from..]);
        if !item.is_empty() {
            items.insert(item.to_owned());
        }
    }
    items
}

fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The text with its comments (line, doc and block) and the contents of its string and
/// character literals blanked out, so that only code is searched.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut code = String::with_capacity(text.len());
    let mut at = 0;
    while at < chars.len() {
        let rest = &chars[at..];
        let skip = match rest {
            ['/', '/', ..] => rest.iter().position(|c| *c == '\n').unwrap_or(rest.len()),
            ['/', '*', ..] => block_comment(rest),
            ['"', ..] => string_end(rest, 1, 0),
            ['r', '"', ..] | ['r', '#', ..] | ['b', 'r', ..] => raw_string(rest),
            // An escaped character: past the escape's first character to the closing quote.
            ['\'', '\\', _, tail @ ..] => tail
                .iter()
                .position(|c| *c == '\'')
                .map_or(rest.len(), |end| end + 4),
            ['\'', _, '\'', ..] => 3,
            _ => 0,
        };
        if skip == 0 {
            code.push(chars[at]);
            at += 1;
        } else {
            code.push(' ');
            at += skip;
        }
    }
    code
}

/// The length of the (nested) block comment at the start of `text`.
fn block_comment(text: &[char]) -> usize {
    let mut depth = 0usize;
    let mut at = 0;
    while at < text.len() {
        match &text[at..] {
            ['/', '*', ..] => {
                depth += 1;
                at += 2;
            }
            ['*', '/', ..] => {
                depth -= 1;
                at += 2;
                if depth == 0 {
                    return at;
                }
            }
            _ => at += 1,
        }
    }
    text.len()
}

/// The length of the string literal at the start of `text` whose body starts at `open` and
/// ends at a `"` followed by `hashes` `#`s (escapes count only when `hashes` is 0: a plain
/// string).
fn string_end(text: &[char], open: usize, hashes: usize) -> usize {
    let mut at = open;
    while at < text.len() {
        match text[at] {
            '\\' if hashes == 0 => at += 2,
            '"' if text[at + 1..]
                .iter()
                .take(hashes)
                .filter(|c| **c == '#')
                .count()
                == hashes =>
            {
                return at + 1 + hashes;
            }
            _ => at += 1,
        }
    }
    text.len()
}

/// The length of the raw string literal (`r"..."`, `r#"..."#`, `br"..."`) at the start of
/// `text`, or 0 when `r` starts an identifier instead.
fn raw_string(text: &[char]) -> usize {
    let start = usize::from(text.first() == Some(&'b')) + 1;
    let hashes = text[start..].iter().take_while(|c| **c == '#').count();
    if text.get(start + hashes) != Some(&'"') {
        return 0;
    }
    string_end(text, start + hashes + 1, hashes)
}

/// Every Rust file of the workspace outside the agent crate, `target` and hidden directories.
fn rust_files(root: &Path) -> Result<Vec<PathBuf>> {
    let agent = root.join("crates/agent");
    let mut files = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))?
        {
            let path = entry?.path();
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("");
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') && path != agent {
                    pending.push(path);
                }
            } else if name.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> Vec<String> {
        text.split("::").map(str::to_owned).collect()
    }

    fn paths(texts: &[&str]) -> BTreeSet<Vec<String>> {
        texts.iter().map(|text| path(text)).collect()
    }

    #[test]
    fn use_trees_groups_self_globs_and_named_modules_are_all_read() {
        let code = "\
use devin_bridge_agent::acp::{AcpError, Agent as Worker, shared::{Death}};
use devin_bridge_agent::identity::{self, AgentIdentity};
use devin_bridge_agent::{devin::identity::ClientIdentity, process};
// use devin_bridge_agent::acp::SharedAgent;
fn f() { identity::establish(); process::spawn(); other::process::x(); }
fn g() -> devin_bridge_agent::acp::TurnOutput { devin_bridge_agent::report::Stop::new() }
use devin_bridge_agent::transcript::*;
";
        assert_eq!(
            agent_paths(code),
            paths(&[
                "acp::AcpError",
                "acp::Agent",
                "acp::shared::Death",
                "identity",
                "identity::AgentIdentity",
                "identity::establish",
                "devin::identity::ClientIdentity",
                "process",
                "process::spawn",
                "acp::TurnOutput",
                "report::Stop::new",
                "transcript::*",
            ])
        );
    }

    #[test]
    fn paths_in_comments_strings_and_char_literals_are_not_code() {
        let code = r####"
/* devin_bridge_agent::acp::Agent /* nested */ devin_bridge_agent::acp::Death */
const A: &str = "devin_bridge_agent::acp::SharedAgent \" devin_bridge_agent::identity";
const B: &str = r#"devin_bridge_agent::acp::TurnOutput "quoted""#;
const C: [char; 3] = ['"', '\'', '\u{22}'];
fn f<'a>(x: &'a str) -> devin_bridge_agent::acp::AcpError { todo!() }
"####;
        assert_eq!(agent_paths(code), paths(&["acp::AcpError"]));
    }

    fn page(rows: &str) -> String {
        format!(
            "//! The crate.\n//!\n//! {HEADING}\n//!\n//! | part | items | used by |\n//! |---|---|---|\n{rows}\npub mod acp;\n"
        )
    }

    #[test]
    fn the_table_is_read_from_the_page_and_a_malformed_one_is_refused() {
        let rows = table(&page(
            "//! | the per-turn agent | `acp::Agent`, `acp::TurnOutput` | `crates/summarizer`, `host/benches` |\n\
             //! | identities | `identity` | `crates/summarizer` |",
        ))
        .expect("table");
        assert_eq!(
            rows,
            vec![
                Row {
                    part: "the per-turn agent".to_owned(),
                    items: vec![path("acp::Agent"), path("acp::TurnOutput")],
                    places: vec!["crates/summarizer".to_owned(), "host/benches".to_owned()],
                },
                Row {
                    part: "identities".to_owned(),
                    items: vec![path("identity")],
                    places: vec!["crates/summarizer".to_owned()],
                },
            ]
        );
        assert!(table("//! No table here.\n").is_err());
        assert!(table(&page("//! | two cells | `acp::Agent` |")).is_err());
        assert!(table(&page("//! | no places | `acp::Agent` | none |")).is_err());
    }

    #[test]
    fn a_use_outside_the_places_and_a_place_without_a_use_both_fail() {
        let rows = vec![Row {
            part: "the per-turn agent".to_owned(),
            items: vec![path("acp::Agent")],
            places: vec!["crates/summarizer".to_owned(), "host/benches".to_owned()],
        }];
        let uses = |files: &[(&str, &[&str])]| -> BTreeMap<PathBuf, BTreeSet<Vec<String>>> {
            files
                .iter()
                .map(|(file, used)| (PathBuf::from(file), paths(used)))
                .collect()
        };
        let holds = uses(&[
            ("crates/summarizer/src/pool.rs", &["acp::Agent::new"]),
            ("host/benches/bridge.rs", &["acp::Agent"]),
            ("crates/companion/src/run.rs", &["acp::AgentConnection"]),
        ]);
        assert!(violations(&rows, &holds).is_empty());

        let outside = uses(&[
            ("crates/summarizer/src/pool.rs", &["acp::Agent"]),
            ("host/benches/bridge.rs", &["acp::Agent"]),
            ("crates/companion/src/run.rs", &["acp::*"]),
        ]);
        let failures = violations(&rows, &outside);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].starts_with("crates/companion/src/run.rs uses `acp::*`"));

        let stale = uses(&[("crates/summarizer/src/pool.rs", &["acp::Agent"])]);
        let failures = violations(&rows, &stale);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].starts_with("host/benches uses none of the per-turn agent"));
    }
}
