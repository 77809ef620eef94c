//! `cargo xtask compat [--releases N] [--versions a,b,c] [--fixtures] [--debug]`: the bridge
//! against several Claude Code releases.
//!
//! The releases are `--versions` when given, else the newest `N` on npm (6 by default) and the
//! pinned one, without duplicates, oldest first. Each is installed with npm (its cache reused)
//! into `target/claude-code-compat/<version>`; then the compatibility benchmark
//! (`host/benches/claude_compat.rs`, built on the turns benchmark's tasks) runs it against the
//! release builds of the bridge and the offline agent and writes its report into
//! `target/claude-code-compat/<version>/run`. With `--debug` the bridge, the offline agent and
//! the benchmark are the debug builds instead (what `cargo xtask test` already built: CI checks
//! its releases that way, without a release build of wasmtime and the bridge; the checks are
//! about behaviour, and only the matrix's seconds differ). The matrix (release x check, with the agent turns
//! of each task, the side requests answered locally and the request fields the bridge ignores)
//! is printed at the end. `--fixtures` also copies each release's captured requests into
//! `tests/fixtures/claude-code/releases/<version>.json`.
//!
//! It fails when the pinned release or the newest one fails a check (or cannot be installed);
//! another release's red cell is reported, not fatal.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use devin_bridge_test_setup::claude_code;
use devin_bridge_test_setup::debian::{self, Need};
use serde_json::Value;

use crate::components::build_components;
use crate::workspace::{build_bins, cargo, cargo_target_dir, run, workspace_root};

/// The programs the checks run, and their Debian packages: npm lists and installs the
/// releases, node runs them (and the demo project's `npm test`), tmux gives the interactive
/// Claude Code a terminal, the CA certificates let npm reach its registry. Installed when
/// missing (as root), as the test command does: on a fresh machine this command may be the
/// first to need them.
const COMPAT_NEEDS: [Need; 4] = [
    Need::new("node", "nodejs"),
    Need::new("npm", "npm"),
    Need::new("tmux", "tmux"),
    Need::new("update-ca-certificates", "ca-certificates"),
];

/// Releases taken from npm when `--releases` does not say.
const DEFAULT_RELEASES: usize = 6;
/// The checks, in the order the benchmark writes them (`CHECKS` there).
const CHECKS: [&str; 4] = ["demo -p", "demo tui auto", "subagent -p", "title tui"];

pub(crate) fn compat(rest: &[String]) -> Result<()> {
    let options = Options::parse(rest)?;
    debian::ensure(&COMPAT_NEEDS, "the compatibility checks", "xtask")?;
    let releases = match &options.versions {
        Some(versions) => versions.clone(),
        None => {
            let on_npm = claude_code::releases_on_npm()?;
            let newest = on_npm.len().saturating_sub(options.releases);
            let mut releases = on_npm[newest..].to_vec();
            releases.push(claude_code::VERSION.to_owned());
            releases
        }
    };
    let releases = ordered(releases);
    let Some(newest) = releases.last().cloned() else {
        bail!("no release to run");
    };
    eprintln!("xtask: Claude Code releases: {}", releases.join(", "));
    let components = build_components()?;
    if options.debug {
        // The builds `cargo xtask test` makes, selected as it selects them: the same features
        // for every dependency, so nothing it built is compiled again.
        run(cargo().args(["test", "--locked", "--workspace", "--no-run"]))?;
    } else {
        build_bins(&["devin-bridge", "mock-devin"], true)?;
    }
    let binaries = cargo_target_dir().join(if options.debug { "debug" } else { "release" });
    let base = cargo_target_dir().join("claude-code-compat");
    let mut rows = Vec::new();
    for version in &releases {
        let started = Instant::now();
        let report = claude_code::ensure_release(&base.join(version), version)
            .map_err(anyhow::Error::from)
            .and_then(|claude| {
                let out = base.join(version).join("run");
                let mut bench = cargo();
                bench
                    .args(["bench", "--locked"])
                    // Debug: the whole workspace selected, as the test build selects it (the
                    // features of every dependency then match it), the bench target alone built.
                    .args(if options.debug {
                        &["--workspace", "--profile", "dev"][..]
                    } else {
                        &["-p", "devin-bridge"][..]
                    })
                    .args(["--bench", "claude_compat", "--", "--out"])
                    .arg(&out)
                    .env("DEVIN_BRIDGE_CLAUDE_CODE", &claude)
                    .env("DEVIN_BRIDGE_BIN", binaries.join("devin-bridge"))
                    .env("DEVIN_BRIDGE_MOCK_DEVIN", binaries.join("mock-devin"))
                    .env("DEVIN_BRIDGE_COMPONENTS", &components);
                run(&mut bench)?;
                read_report(&out)
            });
        if let Err(error) = &report {
            eprintln!("xtask: Claude Code {version}: {error:#}");
        }
        rows.push(Row {
            version: version.clone(),
            report: report.ok(),
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    // Written once every release has run: a fixture is an input of the workspace's builds, so
    // writing one between releases would rebuild the benchmark for the next.
    if options.fixtures {
        for row in rows.iter().filter(|row| row.report.is_some()) {
            copy_fixture(&base.join(&row.version).join("run"), &row.version)?;
        }
    }
    print!("{}", matrix(&rows));
    let failed: Vec<&str> = rows
        .iter()
        .filter(|row| row.version == claude_code::VERSION || row.version == newest)
        .filter(|row| !row.passed())
        .map(|row| row.version.as_str())
        .collect();
    if !failed.is_empty() {
        bail!(
            "the pinned ({}) or the newest ({newest}) Claude Code failed a check: {}",
            claude_code::VERSION,
            failed.join(", ")
        );
    }
    Ok(())
}

struct Options {
    releases: usize,
    versions: Option<Vec<String>>,
    fixtures: bool,
    /// The debug builds instead of release builds.
    debug: bool,
}

impl Options {
    fn parse(rest: &[String]) -> Result<Self> {
        const USAGE: &str =
            "usage: cargo xtask compat [--releases N] [--versions a,b,c] [--fixtures] [--debug]";
        let mut options = Options {
            releases: DEFAULT_RELEASES,
            versions: None,
            fixtures: false,
            debug: false,
        };
        let mut args = rest.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--releases" => {
                    options.releases = args.next().and_then(|n| n.parse().ok()).context(USAGE)?;
                }
                "--versions" => {
                    let list = args.next().context(USAGE)?;
                    let versions: Vec<String> = list
                        .split(',')
                        .map(str::trim)
                        .filter(|v| !v.is_empty())
                        .map(str::to_owned)
                        .collect();
                    if let Some(bad) = versions.iter().find(|v| version_key(v).is_none()) {
                        bail!("{bad:?} is not a release number (such as 2.1.332)\n{USAGE}");
                    }
                    options.versions = Some(versions);
                }
                "--fixtures" => options.fixtures = true,
                "--debug" => options.debug = true,
                _ => bail!("unknown argument {arg:?}\n{USAGE}"),
            }
        }
        Ok(options)
    }
}

/// `versions` without duplicates, oldest first.
fn ordered(mut versions: Vec<String>) -> Vec<String> {
    versions.sort_by_key(|v| version_key(v).unwrap_or_default());
    versions.dedup();
    versions
}

/// A release number's numeric parts (`2.1.332` -> `[2, 1, 332]`); none for anything else
/// (a pre-release such as `2.1.0-beta.1` included).
fn version_key(version: &str) -> Option<Vec<u64>> {
    version.split('.').map(|part| part.parse().ok()).collect()
}

fn read_report(out: &Path) -> Result<Value> {
    let file = out.join("report.json");
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", file.display()))
}

/// The release's captured requests into the repository's fixtures.
fn copy_fixture(out: &Path, version: &str) -> Result<()> {
    let dir = workspace_root().join("tests/fixtures/claude-code/releases");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let to: PathBuf = dir.join(format!("{version}.json"));
    std::fs::copy(out.join("fixture.json"), &to)
        .with_context(|| format!("writing {}", to.display()))?;
    eprintln!("xtask: wrote {}", to.display());
    Ok(())
}

/// One release's run.
struct Row {
    version: String,
    /// None: it could not be installed or its run did not finish.
    report: Option<Value>,
    seconds: f64,
}

impl Row {
    fn passed(&self) -> bool {
        self.report.as_ref().is_some_and(|report| {
            CHECKS
                .iter()
                .all(|check| report["checks"][check]["pass"] == true)
        })
    }
}

/// The printed matrix: a row per release, a column per check (`ok`/`FAIL`, the agent turns the
/// task cost, and the side requests answered locally of those sent), the time the checks took
/// and the release's whole time (its install and the benchmark's start included), then the
/// fields each release sends that the bridge ignores and every failed check's problems.
fn matrix(rows: &[Row]) -> String {
    let mut out = String::from("\nClaude Code compatibility\n");
    out.push_str(&format!("{:<9}", "release"));
    for check in CHECKS {
        out.push_str(&format!(" | {check:<26}"));
    }
    out.push_str(" | checks s | total s\n");
    let mut notes = Vec::new();
    for row in rows {
        out.push_str(&format!("{:<9}", row.version));
        let Some(report) = &row.report else {
            for _ in CHECKS {
                out.push_str(&format!(" | {:<26}", "not run"));
            }
            out.push_str(&format!(" | {:>8} | {:>7.0}\n", "-", row.seconds));
            continue;
        };
        for check in CHECKS {
            let cell = &report["checks"][check];
            let pass = cell["pass"] == true;
            let number = |name: &str| cell[name].as_u64().unwrap_or(0);
            let mut text = format!(
                "{} {} turns",
                if pass { "ok" } else { "FAIL" },
                number("agent_turns")
            );
            if number("side") > 0 {
                text.push_str(&format!(
                    ", side {}/{} local",
                    number("side_local"),
                    number("side")
                ));
            }
            out.push_str(&format!(" | {text:<26}"));
            for problem in cell["problems"].as_array().into_iter().flatten() {
                notes.push(format!(
                    "{} {check}: {}",
                    row.version,
                    problem.as_str().unwrap_or_default()
                ));
            }
        }
        let checks = report["seconds"].as_f64().unwrap_or(0.0);
        out.push_str(&format!(" | {checks:>8.0} | {:>7.0}\n", row.seconds));
    }
    out.push_str("\nrequest fields sent that the bridge ignores:\n");
    for row in rows {
        let fields: Vec<&str> = row
            .report
            .iter()
            .flat_map(|report| report["ignored_fields"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        out.push_str(&format!("  {:<9} {}\n", row.version, fields.join(", ")));
    }
    if !notes.is_empty() {
        out.push_str("\nfailed checks:\n");
        for note in notes {
            out.push_str(&format!("  {note}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_are_ordered_by_number_without_duplicates() {
        let releases = ordered(
            ["2.1.332", "2.1.40", "2.1.327", "2.1.332", "2.0.99"]
                .map(String::from)
                .to_vec(),
        );
        assert_eq!(releases, ["2.0.99", "2.1.40", "2.1.327", "2.1.332"]);
        assert_eq!(version_key("2.1.332"), Some(vec![2, 1, 332]));
        assert_eq!(version_key("2.1.0-beta.1"), None);
    }

    #[test]
    fn options_parse_and_refuse_what_is_not_a_release() {
        let args = |list: &[&str]| list.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        let options = Options::parse(&args(&["--releases", "3", "--fixtures"])).expect("valid");
        assert_eq!(options.releases, 3);
        assert!(options.fixtures && options.versions.is_none());
        let options = Options::parse(&args(&["--versions", "2.1.330,2.1.332"])).expect("valid");
        assert_eq!(
            options.versions,
            Some(vec!["2.1.330".to_owned(), "2.1.332".to_owned()])
        );
        assert!(Options::parse(&args(&["--versions", "latest"])).is_err());
        assert!(Options::parse(&args(&["--releases"])).is_err());
        assert!(Options::parse(&args(&["--other"])).is_err());
    }

    #[test]
    fn a_release_passes_only_when_every_check_passed() {
        let report = |title: bool| {
            serde_json::json!({"checks": {
                "demo -p": {"pass": true}, "demo tui auto": {"pass": true},
                "subagent -p": {"pass": true}, "title tui": {"pass": title},
            }})
        };
        let row = |report| Row {
            version: "2.1.332".into(),
            report,
            seconds: 1.0,
        };
        assert!(row(Some(report(true))).passed());
        assert!(!row(Some(report(false))).passed());
        assert!(!row(None).passed());
        let printed = matrix(&[row(Some(report(false)))]);
        assert!(printed.contains("FAIL"), "{printed}");
    }
}
