//! `cargo xtask bench transforms --against REV [--rounds N]`: the transforms benchmark of the
//! current tree and of another revision, side by side in one run.
//!
//! REV is checked out in a worktree of its own, `target/bench-against/<commit>` (detached,
//! reused by later runs; one with local changes is refused, its numbers would not be REV's).
//! Each tree builds its own transform components with its own `cargo xtask components` and
//! its own bench binary (`cargo bench --no-run`), and each binary runs on its own tree's
//! components (`DEVIN_BRIDGE_COMPONENTS`). Both trees are built by the same cargo, so with the
//! same compiler.
//!
//! The checkout builds in its own target directory (`<checkout>/target`), never in the
//! current tree's: cargo names the artifacts of a workspace crate by its path relative to its
//! workspace root, so a crate whose dependencies did not change between the trees gets the
//! same file in both (the components' libraries, cdylibs too, carry no hash in their names at
//! all), and cargo judges a workspace crate fresh by modification times; in one shared
//! directory a tree could link the other tree's build of such a crate. Its build script is
//! given its components to embed (`DEVIN_BRIDGE_EMBED_COMPONENTS`), so that it builds none of
//! its own (an older one also wants the test components, which `components` does not build).
//!
//! Then the two binaries run alternately, old then new, N rounds (default 3); each run's
//! output is kept in `target/bench-against/runs-<commit>/`, its rows are read
//! ([`crate::bench_table`]) and set against each other ([`crate::bench_compare`]). The table
//! informs and never fails the command: a slower row is printed, not an error.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use devin_bridge_types::TransformKind;
use sha2::{Digest, Sha256};

use crate::bench_compare::{compare, Rounds};
use crate::bench_table;
use crate::components::build_components;
use crate::workspace::{cargo, cargo_target_dir, run, workspace_root};

/// What `--against REV [--rounds N]` asks for.
#[derive(Debug, PartialEq)]
pub(crate) struct Options {
    pub rev: String,
    pub rounds: usize,
}

const DEFAULT_ROUNDS: usize = 3;
const USAGE: &str = "usage: cargo xtask bench transforms --against REV [--rounds N]";

/// The options of a transforms benchmark run (its arguments after `transforms`): `None` when
/// `--against` is not among them (a plain run).
pub(crate) fn options(args: &[String]) -> Result<Option<Options>> {
    if !args.iter().any(|arg| arg == "--against") {
        return Ok(None);
    }
    let (mut rev, mut rounds) = (None, DEFAULT_ROUNDS);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{arg} needs a value ({USAGE})"));
        match arg.as_str() {
            "--against" => rev = Some(value?.clone()),
            "--rounds" => {
                rounds = value?
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .with_context(|| format!("--rounds needs a number above 0 ({USAGE})"))?;
            }
            other => bail!("{other:?} does not go with --against ({USAGE})"),
        }
    }
    Ok(rev.map(|rev| Options { rev, rounds }))
}

/// A tree to benchmark: where it is, its components and its bench binary.
struct Tree {
    /// `REV (commit)` or `current tree`.
    label: String,
    root: PathBuf,
    components: PathBuf,
    bench: PathBuf,
}

/// Builds both trees, runs their benchmarks alternately and prints the comparison.
pub(crate) fn run_against(options: &Options) -> Result<()> {
    let clock = Clock(Instant::now());
    let root = workspace_root();
    let commit = resolve(&root, &options.rev)?;
    let short = &commit[..12];
    let base = root.join("target").join("bench-against");
    let checkout = base.join(short);
    clock.say(&format!(
        "comparing the transforms bench of {} (commit {commit}) with the current tree: \
         builds of both trees in release (a cold build compiles wasmtime: many minutes), then \
         {} alternating rounds",
        options.rev, options.rounds
    ));
    ensure_checkout(&clock, &root, &checkout, &commit)?;
    let new = build_current(&clock, &root)?;
    let old = build_checkout(&clock, &checkout, label(&options.rev, &commit))?;
    let built = clock.0.elapsed();
    say_components(&old, &new)?;
    let runs = base.join(format!("runs-{short}"));
    let (old_rounds, new_rounds) = run_rounds(&clock, &old, &new, options.rounds, &runs)?;
    let comparison = compare(&old_rounds, &new_rounds);
    print!(
        "\n{}",
        comparison.report(&old.label, &new.label, options.rounds)
    );
    clock.say(&format!(
        "done: builds {}, rounds {}, in all {} (each run's output: {})",
        minutes(built),
        minutes(clock.0.elapsed() - built),
        minutes(clock.0.elapsed()),
        runs.display()
    ));
    Ok(())
}

/// How the report names REV: as given when it is an abbreviated commit, else with its commit.
fn label(rev: &str, commit: &str) -> String {
    if commit.starts_with(rev) {
        rev.to_owned()
    } else {
        format!("{rev} ({})", &commit[..12])
    }
}

/// Time since the start, for the progress lines.
struct Clock(Instant);

impl Clock {
    fn say(&self, what: &str) {
        eprintln!("xtask: [{}] {what}", minutes(self.0.elapsed()));
    }
}

fn minutes(elapsed: std::time::Duration) -> String {
    let seconds = elapsed.as_secs();
    format!("{}:{:02}", seconds / 60, seconds % 60)
}

/// The full commit REV names in the current repository.
fn resolve(root: &Path, rev: &str) -> Result<String> {
    let output = Command::new("git")
        .current_dir(root)
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("{rev}^{{commit}}"))
        .output()
        .context("running git rev-parse")?;
    let commit = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !output.status.success() || commit.len() < 12 {
        bail!("{rev:?} names no commit of this repository");
    }
    Ok(commit)
}

/// `git ... ` in `dir`, its standard output trimmed; an error naming the command when it fails.
fn git_output(dir: &Path, args: &[&str]) -> Result<String> {
    let output = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .with_context(|| format!("running git {}", args.join(" ")))?;
    if !output.status.success() {
        bail!(
            "git {} in {} failed: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The detached worktree of `commit` at `checkout`: made when missing, else checked to be that
/// commit's own worktree without local changes.
fn ensure_checkout(clock: &Clock, root: &Path, checkout: &Path, commit: &str) -> Result<()> {
    if !checkout.exists() {
        clock.say(&format!(
            "checking {commit} out into {} (git worktree add --detach)",
            checkout.display()
        ));
        // `--force`: a worktree once registered there and deleted by hand is made again.
        return Ok(run(Command::new("git")
            .current_dir(root)
            .args(["worktree", "add", "--detach", "--force"])
            .arg(checkout)
            .arg(commit))?);
    }
    // Inside the current tree's `target/`, a directory that is not a worktree of its own would
    // answer git with the current tree: its top level must be itself.
    let top = git_output(checkout, &["rev-parse", "--show-toplevel"])?;
    if Path::new(&top).canonicalize().ok() != checkout.canonicalize().ok() {
        bail!(
            "{} is not a worktree (remove it and run again)",
            checkout.display()
        );
    }
    let head = git_output(checkout, &["rev-parse", "HEAD"])?;
    let changes = git_output(checkout, &["status", "--porcelain", "--untracked-files=no"])?;
    if head != commit || !changes.is_empty() {
        bail!(
            "{} is not {commit} as committed (HEAD {head}{}): remove it with `git worktree remove \
             --force {}` and run again",
            checkout.display(),
            if changes.is_empty() {
                ""
            } else {
                ", local changes"
            },
            checkout.display()
        );
    }
    clock.say(&format!(
        "reusing the checkout of {commit} in {}",
        checkout.display()
    ));
    Ok(())
}

/// The current tree: its components as `cargo xtask components` builds them, and its bench
/// binary in its target directory.
fn build_current(clock: &Clock, root: &Path) -> Result<Tree> {
    clock.say("current tree: building its transform components (cargo xtask components)");
    let components = build_components()?;
    clock.say(&format!(
        "current tree: building its transforms bench binary in {} (release)",
        cargo_target_dir().display()
    ));
    let bench = build_bench(cargo(), &cargo_target_dir())?;
    clock.say(&format!("current tree: bench binary {}", bench.display()));
    Ok(Tree {
        label: "current tree".into(),
        root: root.to_owned(),
        components,
        bench,
    })
}

/// The checkout: its own `cargo xtask components` (which writes `target/components` in the
/// checkout), then its bench binary, both in `<checkout>/target`.
fn build_checkout(clock: &Clock, checkout: &Path, label: String) -> Result<Tree> {
    let target = checkout.join("target");
    clock.say(&format!(
        "{label}: building its transform components with its own xtask (cargo xtask \
         components in {}; target directory {}; a cold build compiles wasmtime for its \
         pre-initialisation: several minutes)",
        checkout.display(),
        target.display()
    ));
    run(checkout_cargo(checkout).args(["xtask", "components"]))
        .with_context(|| format!("building the components of {label}"))?;
    let components = target.join("components");
    for kind in TransformKind::ALL {
        let file = components.join(kind.file_name());
        if !file.is_file() {
            bail!(
                "{label}: its `cargo xtask components` wrote no {}",
                file.display()
            );
        }
    }
    clock.say(&format!(
        "{label}: building its transforms bench binary in {} (release; a cold build compiles \
         wasmtime again: many minutes)",
        target.display()
    ));
    let mut cargo = checkout_cargo(checkout);
    cargo.env("DEVIN_BRIDGE_EMBED_COMPONENTS", &components);
    let bench = build_bench(cargo, &target)?;
    clock.say(&format!("{label}: bench binary {}", bench.display()));
    Ok(Tree {
        label,
        root: checkout.to_owned(),
        components,
        bench,
    })
}

/// The cargo that runs xtask itself, in `checkout` and its own target directory, without what
/// `cargo run` set for this xtask (its package's name and directories).
fn checkout_cargo(checkout: &Path) -> Command {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(checkout)
        .env("CARGO_TARGET_DIR", checkout.join("target"));
    devin_bridge_nested_cargo::without_package_context(&mut cargo);
    cargo
}

/// `cargo bench --no-run` of the transforms bench with `cargo` (set up for its tree), and the
/// executable it reports, which must be in `target_dir`.
fn build_bench(mut cargo: Command, target_dir: &Path) -> Result<PathBuf> {
    cargo
        .args([
            "bench",
            "--no-run",
            "--locked",
            "-p",
            "devin-bridge",
            "--bench",
            "transforms",
            "--message-format=json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let output = cargo.output().context("running cargo bench --no-run")?;
    if !output.status.success() {
        bail!("cargo bench --no-run failed with {}", output.status);
    }
    let bench = bench_executable(&String::from_utf8_lossy(&output.stdout))
        .context("cargo reported no executable of the transforms bench")?;
    let inside = bench
        .canonicalize()
        .ok()
        .zip(target_dir.canonicalize().ok());
    if !inside.is_some_and(|(bench, target)| bench.starts_with(target)) {
        bail!(
            "the bench binary {} is not in {}",
            bench.display(),
            target_dir.display()
        );
    }
    Ok(bench)
}

/// The executable of the `transforms` bench target in cargo's JSON messages.
pub(crate) fn bench_executable(messages: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| {
            message["reason"] == "compiler-artifact"
                && message["target"]["name"] == "transforms"
                && message["target"]["kind"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|kind| kind == "bench"))
        })
        .filter_map(|message| message["executable"].as_str().map(PathBuf::from))
        .next_back()
}

/// Says which components differ between the trees (by sha256): a reader sees that each side
/// runs its own.
fn say_components(old: &Tree, new: &Tree) -> Result<()> {
    let digest = |dir: &Path, name: &str| -> Result<String> {
        let path = dir.join(format!("{name}.wasm"));
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        Ok(hex::encode(Sha256::digest(bytes))[..12].to_owned())
    };
    for kind in TransformKind::ALL {
        let (before, after) = (
            digest(&old.components, kind.name())?,
            digest(&new.components, kind.name())?,
        );
        eprintln!(
            "xtask: component {:<12} {}: {before}  {}: {after}  {}",
            kind.name(),
            old.label,
            new.label,
            if before == after { "same" } else { "differ" }
        );
    }
    Ok(())
}

/// Runs old then new, `rounds` times, keeping each output in `runs`, and reads their rows.
fn run_rounds(
    clock: &Clock,
    old: &Tree,
    new: &Tree,
    rounds: usize,
    runs: &Path,
) -> Result<(Rounds, Rounds)> {
    std::fs::create_dir_all(runs)?;
    let (mut old_rounds, mut new_rounds) = (Rounds::default(), Rounds::default());
    for round in 1..=rounds {
        for (side, tree, into) in [("old", old, &mut old_rounds), ("new", new, &mut new_rounds)] {
            let started = Instant::now();
            let output = run_bench(tree)?;
            let file = runs.join(format!("{side}-{round}.txt"));
            std::fs::write(&file, &output)
                .with_context(|| format!("writing {}", file.display()))?;
            let parsed = bench_table::parse(&output);
            if parsed.rows.is_empty() {
                bail!(
                    "{}: no timed row in its output ({})",
                    tree.label,
                    file.display()
                );
            }
            for line in &parsed.unread {
                eprintln!("xtask: warning: {}: a row not read: {line}", tree.label);
            }
            into.add(&parsed.rows);
            clock.say(&format!(
                "round {round}/{rounds}: {side} ({}) ran in {:.0} s, {} rows",
                tree.label,
                started.elapsed().as_secs_f64(),
                parsed.rows.len()
            ));
        }
    }
    Ok((old_rounds, new_rounds))
}

/// One run of a tree's bench binary on its own components; its standard output.
fn run_bench(tree: &Tree) -> Result<String> {
    let output = Command::new(&tree.bench)
        .current_dir(&tree.root)
        .env("DEVIN_BRIDGE_COMPONENTS", &tree.components)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", tree.bench.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
        bail!(
            "{}: the bench failed with {}:\n{}",
            tree.label,
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn options_read_against_and_rounds() {
        assert_eq!(options(&args(&[])).ok(), Some(None));
        assert_eq!(
            options(&args(&["--against", "c2d4e65"])).ok().flatten(),
            Some(Options {
                rev: "c2d4e65".into(),
                rounds: 3
            })
        );
        assert_eq!(
            options(&args(&["--rounds", "5", "--against", "main"]))
                .ok()
                .flatten(),
            Some(Options {
                rev: "main".into(),
                rounds: 5
            })
        );
    }

    #[test]
    fn options_refuse_zero_rounds_a_missing_value_and_other_arguments() {
        for bad in [
            &["--against", "main", "--rounds", "0"][..],
            &["--against"],
            &["--against", "main", "--typescript", "dir"],
        ] {
            assert!(options(&args(bad)).is_err(), "{bad:?}");
        }
    }

    /// Two messages of a real `cargo bench --no-run --message-format=json` (the host binary,
    /// an executable too, and the bench), then an example of the same name as the bench and
    /// another bench.
    const MESSAGES: &str = r#"{"reason":"compiler-artifact","package_id":"path+file:///work/wt-bench/host#devin-bridge@0.1.0","manifest_path":"/work/wt-bench/host/Cargo.toml","target":{"kind":["bin"],"crate_types":["bin"],"name":"devin-bridge","src_path":"/work/wt-bench/host/src/main.rs","edition":"2021","doc":true,"doctest":false,"test":true},"profile":{"opt_level":"3","debuginfo":"line-tables-only","debug_assertions":false,"overflow_checks":false,"test":false},"features":[],"filenames":["/work/wt-bench/target/release/devin-bridge"],"executable":"/work/wt-bench/target/release/devin-bridge","fresh":false}
{"reason":"compiler-artifact","package_id":"path+file:///work/wt-bench/host#devin-bridge@0.1.0","manifest_path":"/work/wt-bench/host/Cargo.toml","target":{"kind":["bench"],"crate_types":["bin"],"name":"transforms","src_path":"/work/wt-bench/host/benches/transforms.rs","edition":"2021","doc":false,"doctest":false,"test":false},"profile":{"opt_level":"3","debuginfo":"line-tables-only","debug_assertions":false,"overflow_checks":false,"test":true},"features":[],"filenames":["/work/wt-bench/target/release/deps/transforms-f71c5125c1d223fc"],"executable":"/work/wt-bench/target/release/deps/transforms-f71c5125c1d223fc","fresh":false}
{"reason":"compiler-artifact","package_id":"path+file:///work/wt-bench/host#devin-bridge@0.1.0","target":{"kind":["example"],"crate_types":["bin"],"name":"transforms"},"executable":"/work/wt-bench/target/release/examples/transforms","fresh":true}
{"reason":"compiler-artifact","package_id":"path+file:///work/wt-bench/host#devin-bridge@0.1.0","target":{"kind":["bench"],"crate_types":["bin"],"name":"bridge"},"executable":"/work/wt-bench/target/release/deps/bridge-0123456789abcdef","fresh":true}
{"reason":"build-finished","success":true}"#;

    #[test]
    fn the_bench_executable_is_the_transforms_bench_artifact() {
        assert_eq!(
            bench_executable(MESSAGES),
            Some(PathBuf::from(
                "/work/wt-bench/target/release/deps/transforms-f71c5125c1d223fc"
            ))
        );
        assert_eq!(bench_executable(r#"{"reason":"build-finished"}"#), None);
    }
}
