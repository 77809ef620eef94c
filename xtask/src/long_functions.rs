//! The long-function half of `cargo xtask modules`: no function in shipped code is longer
//! than [`LIMIT`] lines, unless its doc comment says it is a state machine.
//!
//! Shipped code is every crate's `src/` and `build.rs` but those of the test doubles and
//! support (`tests/`) and of xtask itself; test code in it (`#[cfg(test)]` items, `tests.rs`
//! files and `tests/` directories below `src/`) does not count. A function's length runs from
//! its `fn` line to its closing brace. A long function that really is one loop over the states
//! of a machine, where splitting it would scatter the transitions, is allowed when its doc
//! comment has a line starting `State machine:` that names the states; everything else is
//! split into named steps.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::modules::rust_files;
use crate::rust_text;

/// The most lines a function of shipped code may have.
pub(crate) const LIMIT: usize = 120;

/// The words that start the doc line of a documented state machine.
const STATE_MACHINE: &str = "State machine:";

/// A function over the limit.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Long {
    pub(crate) file: PathBuf,
    pub(crate) name: String,
    pub(crate) line: usize,
    pub(crate) lines: usize,
}

/// The functions of `text` (the file `file`) over [`LIMIT`] lines that are not documented
/// state machines, and how many functions it has.
pub(crate) fn long_in(file: &Path, text: &str) -> (Vec<Long>, usize) {
    let code = rust_text::without_test_items(&rust_text::mask(text));
    let functions = rust_text::functions(&code);
    let count = functions.len();
    let long = functions
        .into_iter()
        .filter(|function| function.lines > LIMIT)
        .filter(|function| {
            !rust_text::doc_above(text, function.line)
                .iter()
                .any(|line| line.starts_with(STATE_MACHINE))
        })
        .map(|function| Long {
            file: file.to_path_buf(),
            name: function.name,
            line: function.line,
            lines: function.lines,
        })
        .collect();
    (long, count)
}

/// Whether the crate at `krate` (relative to the workspace root) ships.
fn ships(krate: &Path) -> bool {
    !(krate.starts_with("tests") || krate.starts_with("xtask"))
}

/// The files of shipped code of one crate: `src/` without its test files, and `build.rs`.
fn shipped_files(root: &Path, krate: &Path) -> Result<Vec<PathBuf>> {
    let src = root.join(krate).join("src");
    let mut files = Vec::new();
    for file in rust_files(&src)? {
        let relative = file.strip_prefix(&src).context("a file under src")?;
        let test_file = relative
            .with_extension("")
            .iter()
            .any(|part| part == "tests");
        if !test_file {
            files.push(file);
        }
    }
    let build = root.join(krate).join("build.rs");
    if build.is_file() {
        files.push(build);
    }
    Ok(files)
}

/// Fails on every function of shipped code over [`LIMIT`] lines that is not a documented
/// state machine, naming each.
pub(crate) fn check(root: &Path, crates: &[PathBuf]) -> Result<()> {
    let mut long = Vec::new();
    let mut functions = 0;
    for krate in crates.iter().filter(|krate| ships(krate)) {
        if !root.join(krate).join("src").is_dir() {
            continue;
        }
        for file in shipped_files(root, krate)? {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let relative = file.strip_prefix(root).unwrap_or(&file);
            let (found, count) = long_in(relative, &text);
            long.extend(found);
            functions += count;
        }
    }
    if long.is_empty() {
        eprintln!(
            "xtask: functions {functions} in shipped code, none over {LIMIT} lines but documented \
             state machines"
        );
        return Ok(());
    }
    let lines: Vec<String> = long
        .iter()
        .map(|long| {
            format!(
                "{}:{} {} ({} lines)",
                long.file.display(),
                long.line,
                long.name,
                long.lines
            )
        })
        .collect();
    bail!(
        "functions of shipped code over {LIMIT} lines (split them into named steps, or document \
         a state machine with a doc line starting `{STATE_MACHINE}`):\n  {}",
        lines.join("\n  ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(lines: usize) -> String {
        "    step();\n".repeat(lines)
    }

    #[test]
    fn a_function_over_the_limit_is_found_unless_a_documented_state_machine_or_a_test() {
        // `fn` line + body + closing brace: exactly the limit, and one line over it.
        let at_limit = format!("fn fits() {{\n{}}}\n", body(LIMIT - 2));
        let over = format!(
            "/// Does much.\n#[inline]\nfn over() {{\n{}}}\n",
            body(LIMIT - 1)
        );
        let machine = format!(
            "/// Reads the input.\n///\n/// State machine: outside, body, string.\nfn machine() {{\n{}}}\n",
            body(LIMIT)
        );
        let test = format!(
            "#[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{}    }}\n}}\n",
            body(LIMIT)
        );
        let text = format!("{at_limit}{over}{machine}{test}");
        let (long, count) = long_in(Path::new("x.rs"), &text);
        assert_eq!(count, 3, "the test's function is not counted");
        assert_eq!(
            long,
            [Long {
                file: PathBuf::from("x.rs"),
                name: "over".to_owned(),
                line: LIMIT + 3,
                lines: LIMIT + 1,
            }]
        );
    }

    #[test]
    fn tests_doubles_and_xtask_do_not_ship() {
        for krate in ["host", "crates/agent", "components/sse", "tools/containers"] {
            assert!(ships(Path::new(krate)), "{krate}");
        }
        for krate in ["tests/mock-devin", "tests/components/twin", "xtask"] {
            assert!(!ships(Path::new(krate)), "{krate}");
        }
    }
}
