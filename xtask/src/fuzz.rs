//! `cargo xtask fuzz`: the libFuzzer targets in `fuzz/`, built with the nightly toolchain and
//! libFuzzer's coverage instrumentation (the build cargo-fuzz makes, without cargo-fuzz), and
//! run from seed inputs (a transform's golden fixtures, or a native parser's seed files).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use devin_bridge_test_setup::debian::{self, Need};
use devin_bridge_types::TransformKind;

use crate::components::build_components;
use crate::workspace::{build_workspace_tool, run, without_lint_driver, workspace_root};

const USAGE: &str = "usage: cargo xtask fuzz <target|all> [--seconds N] [--jobs N] [--build-only]";

/// What `cargo xtask fuzz` was asked: the target (a name of [`FUZZ_TARGETS`] or `all`), how long
/// each runs, how many run at once (a libFuzzer run uses one core), and whether only to build.
#[derive(Debug, PartialEq, Eq)]
struct Options {
    target: String,
    seconds: u64,
    jobs: usize,
    build_only: bool,
}

impl Options {
    fn parse(args: &[String]) -> Result<Self> {
        let Some((target, flags)) = args.split_first() else {
            bail!("{USAGE}\n(targets: {})", FUZZ_TARGETS.join(", "))
        };
        if target != "all" && !FUZZ_TARGETS.contains(&target.as_str()) {
            bail!(
                "unknown fuzz target {target:?} (targets: {}, or all)",
                FUZZ_TARGETS.join(", ")
            )
        }
        let mut options = Options {
            target: target.clone(),
            seconds: 30,
            jobs: 1,
            build_only: false,
        };
        let mut flags = flags.iter();
        while let Some(flag) = flags.next() {
            match flag.as_str() {
                "--build-only" => options.build_only = true,
                "--seconds" => options.seconds = number(flag, flags.next())?,
                "--jobs" => {
                    options.jobs = number(flag, flags.next())?;
                    if options.jobs == 0 {
                        bail!("--jobs needs a number above 0");
                    }
                }
                other => bail!("unknown option {other:?}\n{USAGE}"),
            }
        }
        Ok(options)
    }

    /// The targets it names, in [`FUZZ_TARGETS`] order.
    fn targets(&self) -> Vec<&'static str> {
        FUZZ_TARGETS
            .into_iter()
            .filter(|name| self.target == "all" || self.target == *name)
            .collect()
    }
}

/// The number after `flag`.
fn number<T: std::str::FromStr>(flag: &str, value: Option<&String>) -> Result<T> {
    value
        .and_then(|value| value.parse().ok())
        .with_context(|| format!("{flag} needs a number"))
}

pub(crate) fn fuzz(args: &[String]) -> Result<()> {
    let options = Options::parse(args)?;
    let targets = options.targets();
    let seconds = options.seconds;
    ensure_fuzz_build_needs()?;
    let triple = host_triple()?;
    let mut build = fuzz_build(&triple);
    if targets.len() < FUZZ_TARGETS.len() {
        for target in &targets {
            build.args(["--bin", target]);
        }
    }
    if options.build_only {
        // The targets read the components when they run, so a build needs none.
        eprintln!("xtask: building the fuzz targets {}", targets.join(", "));
        return Ok(run(&mut build)?);
    }
    // A target named as a transform fuzzes its component against its library.
    let transform = |t: &str| t.parse::<TransformKind>().is_ok();
    // The transforms' targets and the envelope's streaming target run components, compiled
    // into the cache they load them from; the native parsers' targets need none.
    let components = if targets
        .iter()
        .any(|t| transform(t) || *t == "envelope-stream")
    {
        let components = build_components()?;
        precompile(&components)?;
        Some(components)
    } else {
        None
    };
    eprintln!("xtask: building the fuzz targets {}", targets.join(", "));
    run(&mut build)?;
    let root = workspace_root();
    let mut runs = Vec::new();
    for target in targets {
        let corpus = root.join("target").join("fuzz-corpus").join(target);
        std::fs::create_dir_all(&corpus)?;
        let seeds = if transform(target) {
            let seeds = root.join("target").join("fuzz-seeds").join(target);
            let count = write_seeds(target, &seeds)?;
            eprintln!("xtask: {count} seed inputs for {target} from tests/fixtures/{target}");
            eprintln!(
                "xtask: fuzzing {target} for {seconds} s (native coverage + wasm differential)"
            );
            seeds
        } else {
            eprintln!("xtask: fuzzing {target} for {seconds} s (seeds in fuzz/seeds/{target})");
            root.join("fuzz").join("seeds").join(target)
        };
        let artifacts = root.join("fuzz").join("artifacts").join(target);
        std::fs::create_dir_all(&artifacts)?;
        let mut fuzz = Command::new(fuzz_binary(&triple, target));
        // libFuzzer's own options; a crash, leak or timeout is written under the artifacts
        // directory, where running the binary with that file as its only argument replays it.
        fuzz.arg(format!("-artifact_prefix={}/", artifacts.display()))
            .arg(format!("-max_total_time={seconds}"))
            .arg("-print_final_stats=1")
            .arg("-rss_limit_mb=4096")
            .arg(&corpus)
            .arg(&seeds);
        if let Some(components) = &components {
            fuzz.env("DEVIN_BRIDGE_COMPONENTS", components);
        }
        runs.push((target, fuzz));
    }
    if options.jobs == 1 {
        for (_, mut fuzz) in runs {
            run(&mut fuzz)?;
        }
        return Ok(());
    }
    run_at_once(runs, options.jobs)
}

/// Runs the fuzz `runs`, `jobs` at a time; each run's output is printed whole when it ends,
/// so the runs' lines do not interleave. Fails naming every target whose run failed.
fn run_at_once(runs: Vec<(&'static str, Command)>, jobs: usize) -> Result<()> {
    let queue = std::sync::Mutex::new(runs.into_iter());
    let failed = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let next = queue.lock().map(|mut runs| runs.next());
                let Ok(Some((target, mut fuzz))) = next else {
                    break;
                };
                let started = std::time::Instant::now();
                let outcome = fuzz.output();
                let seconds = started.elapsed().as_secs_f64();
                // One lock for printing and recording, so whole outputs follow each other.
                let Ok(mut failed) = failed.lock() else {
                    break;
                };
                match outcome {
                    Ok(output) => {
                        eprintln!(
                            "xtask: the {target} run ended ({}) after {seconds:.1} s",
                            output.status
                        );
                        eprint!("{}", String::from_utf8_lossy(&output.stdout));
                        eprint!("{}", String::from_utf8_lossy(&output.stderr));
                        if !output.status.success() {
                            failed.push(target);
                        }
                    }
                    Err(error) => {
                        eprintln!("xtask: cannot start the {target} run: {error}");
                        failed.push(target);
                    }
                }
            });
        }
    });
    let failed = failed
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a fuzz run's thread panicked"))?;
    if failed.is_empty() {
        Ok(())
    } else {
        bail!("fuzz runs failed: {}", failed.join(", "))
    }
}

/// The coverage instrumentation libFuzzer steers by, as cargo-fuzz sets it for a release
/// build without a sanitizer: the sanitizer-coverage pass with inline 8-bit counters, the
/// PC table and comparison tracing, branch folding off (each branch keeps its own counter),
/// stack-depth tracking, and one codegen unit (the coverage pass otherwise keeps ThinLTO from
/// inlining across units); `--cfg fuzzing` is the cfg libfuzzer-sys and fuzzed crates test.
const COVERAGE_FLAGS: [&str; 10] = [
    "-Cpasses=sancov-module",
    "-Cllvm-args=-sanitizer-coverage-level=4",
    "-Cllvm-args=-sanitizer-coverage-inline-8bit-counters",
    "-Cllvm-args=-sanitizer-coverage-pc-table",
    "-Cllvm-args=-sanitizer-coverage-trace-compares",
    "-Cllvm-args=-simplifycfg-branch-fold-threshold=0",
    "-Cllvm-args=-sanitizer-coverage-stack-depth",
    "-Ccodegen-units=1",
    "--cfg",
    "fuzzing",
];

/// `cargo +nightly build --release` of the fuzz targets (every binary of `fuzz/`) with
/// [`COVERAGE_FLAGS`], for the host's triple named explicitly: cargo then gives `RUSTFLAGS` to
/// the targets and the crates they link only, never to build scripts and proc macros, which
/// cannot link the coverage pass's hooks (libFuzzer provides them, in the targets).
///
/// This is the build `cargo fuzz build --release --sanitizer none` makes, without installing
/// cargo-fuzz (a minute of CPU on a fresh machine) or going through it for every run. No
/// sanitizer: the transforms are safe Rust, and AddressSanitizer would triple the build of
/// wasmtime that every target links. Release: debug assertions and overflow checks are then
/// the fuzz crate's profile's, which keeps them for the project's own crates only. The user's
/// `RUSTFLAGS` are not added: the targets' build is this one.
fn fuzz_build(triple: &str) -> Command {
    let root = workspace_root();
    let mut build = Command::new("cargo");
    build
        .current_dir(&root)
        .args([
            "+nightly",
            "build",
            "--locked",
            "--release",
            "--manifest-path",
        ])
        .arg(root.join("fuzz").join("Cargo.toml"))
        .args(["--target", triple])
        .env("RUSTFLAGS", COVERAGE_FLAGS.join(" "))
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO")
        .env_remove("RUSTUP_TOOLCHAIN");
    without_lint_driver(&mut build);
    build
}

/// Where [`fuzz_build`] leaves a target's binary.
fn fuzz_binary(triple: &str, target: &str) -> PathBuf {
    workspace_root()
        .join("fuzz")
        .join("target")
        .join(triple)
        .join("release")
        .join(target)
}

/// Compiles the components in `components` into the tests' compile cache
/// (`target/test-compile-cache`), where the fuzz targets load them: their build has no
/// compiler. `devin-bridge-precompile` compiles them with the bridge's engine settings, as the
/// tests do, so after the tests this only finds them there.
fn precompile(components: &Path) -> Result<()> {
    let cache = workspace_root().join("target").join("test-compile-cache");
    eprintln!(
        "xtask: compiling the components into {} (the fuzz targets load them from there)",
        cache.display()
    );
    let tool = build_workspace_tool("devin-bridge-precompile")?;
    run(Command::new(tool).arg(components).arg(&cache))
        .context("compiling the components into the compile cache")
}

/// The triple the nightly compiler builds for by default (its `host:` line).
fn host_triple() -> Result<String> {
    let output = Command::new("rustc")
        .args(["+nightly", "-vV"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .context("running `rustc +nightly -vV` (the fuzz targets need the nightly toolchain)")?;
    if !output.status.success() {
        bail!(
            "`rustc +nightly -vV` failed ({}): the fuzz targets need the nightly toolchain \
             (`rustup toolchain install nightly`)",
            output.status
        );
    }
    host_line(&String::from_utf8_lossy(&output.stdout))
        .context("`rustc +nightly -vV` printed no `host:` line")
}

/// The triple of a `rustc -vV` report's `host:` line.
fn host_line(report: &str) -> Option<String> {
    report
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(|triple| triple.trim().to_owned())
        .filter(|triple| !triple.is_empty())
}

/// Every fuzz target, in the order `all` runs them. One named as a transform fuzzes its
/// component against its library, seeded from its fixtures; the native parsers' seeds are the
/// files in `fuzz/seeds/<target>`.
///
/// `envelope-stream` runs the envelope component too.
const FUZZ_TARGETS: [&str; 11] = [
    "serializer",
    "envelope",
    "sse",
    "model-alias",
    "safeguard",
    "client-hello",
    "request-head",
    "proxy-target",
    "acp-frame",
    "devin-dialect",
    "envelope-stream",
];

/// Turns the golden fixtures of a transform into seed inputs in the fuzz targets' formats
/// (see `fuzz/fuzz_targets/*.rs`).
fn write_seeds(target: &str, dir: &Path) -> Result<usize> {
    use serde_json::Value;
    std::fs::create_dir_all(dir)?;
    let fixtures = workspace_root().join("tests").join("fixtures").join(target);
    let text_or_json = |args: &Value, key: &str| -> Option<String> {
        args.get(format!("{key}_raw"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| args.get(key).map(|value| value.to_string()))
    };
    let mut count = 0;
    for entry in
        std::fs::read_dir(&fixtures).with_context(|| format!("reading {}", fixtures.display()))?
    {
        let path = entry?.path();
        if path.extension().is_none_or(|ext| ext != "json") {
            continue;
        }
        let case: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
        let args = case.get("args").cloned().unwrap_or(Value::Null);
        let string = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_owned);
        let seed: Option<Vec<u8>> = match target {
            "serializer" => text_or_json(&args, "request").map(String::into_bytes),
            "envelope" => string("output").map(|output| [&[2u8][..], output.as_bytes()].concat()),
            "sse" => args
                .get("reply")
                .and_then(|reply| reply.get("value"))
                .map(|value| {
                    value
                        .as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| value.to_string())
                })
                .map(|text| [&[0u8][..], text.as_bytes()].concat())
                .or_else(|| {
                    // A `parse_events` buffer; selector 2 = a 4096-byte event limit.
                    let bytes = match args.get("buffer_bytes") {
                        Some(list) => serde_json::from_value::<Vec<u8>>(list.clone()).ok(),
                        None => string("buffer").map(String::into_bytes),
                    };
                    bytes.map(|bytes| [&[2u8][..], &bytes].concat())
                }),
            // Mode 1 of the target: the first call's shell command (else its input), or mode 0
            // for a case whose classifier context is the point (raw text).
            "safeguard" => match string("classifier_context_raw") {
                Some(context) => Some([&[0u8][..], context.as_bytes()].concat()),
                None => args
                    .get("calls")
                    .and_then(|calls| calls.get(0))
                    .and_then(|call| call.get("input"))
                    .and_then(Value::as_str)
                    .map(|input| {
                        let command = serde_json::from_str::<Value>(input)
                            .ok()
                            .and_then(|input| input["command"].as_str().map(str::to_owned))
                            .unwrap_or_else(|| input.to_owned());
                        [&[1u8][..], command.as_bytes()].concat()
                    }),
            },
            _ => {
                string("requested")
                    .or_else(|| string("reference"))
                    .map(|name| match text_or_json(&args, "catalog") {
                        Some(catalog) => format!("{name}\n{catalog}").into_bytes(),
                        None => name.into_bytes(),
                    })
            }
        };
        if let Some(seed) = seed {
            let name = path
                .file_stem()
                .and_then(|stem| stem.to_str())
                .unwrap_or("seed");
            std::fs::write(dir.join(name), seed)?;
            count += 1;
        }
    }
    Ok(count)
}

/// What building a fuzz target needs beyond Rust: libFuzzer is C++, which `libfuzzer-sys`
/// compiles with the machine's `c++` (installed when missing, as root).
const FUZZ_NEEDS: [Need; 1] = [Need::new("c++", "g++")];

fn ensure_fuzz_build_needs() -> Result<()> {
    Ok(debian::ensure(
        &FUZZ_NEEDS,
        "building the fuzz targets",
        "xtask",
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options> {
        Options::parse(&args.iter().map(|arg| (*arg).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn options_default_to_a_thirty_second_run() {
        let options = parse(&["envelope"]).expect("parses");
        assert_eq!(options.seconds, 30);
        assert!(!options.build_only);
        assert_eq!(options.jobs, 1);
        assert_eq!(options.targets(), vec!["envelope"]);
    }

    #[test]
    fn options_take_every_flag_in_any_order() {
        let options =
            parse(&["all", "--build-only", "--seconds", "5", "--jobs", "2"]).expect("parses");
        assert_eq!(
            options,
            Options {
                target: "all".to_owned(),
                seconds: 5,
                jobs: 2,
                build_only: true,
            }
        );
        assert_eq!(options.targets(), FUZZ_TARGETS.to_vec());
    }

    #[test]
    fn options_refuse_unknown_targets_flags_and_numbers() {
        for args in [
            &[][..],
            &["everything"][..],
            &["envelope", "--fast"][..],
            &["envelope", "--seconds"][..],
            &["envelope", "--seconds", "soon"][..],
            &["envelope", "--jobs", "0"][..],
        ] {
            assert!(parse(args).is_err(), "{args:?} must be refused");
        }
    }

    #[test]
    fn the_build_instruments_the_targets_for_the_named_triple_without_the_users_flags() {
        let build = fuzz_build("x86_64-unknown-linux-gnu");
        let args: Vec<String> = build
            .get_args()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args.first().map(String::as_str), Some("+nightly"));
        assert!(args
            .windows(2)
            .any(|pair| pair == ["--target", "x86_64-unknown-linux-gnu"]));
        assert!(args.iter().any(|arg| arg == "--release"));
        assert!(args.iter().any(|arg| arg.ends_with("fuzz/Cargo.toml")));
        let env = |name: &str| {
            build
                .get_envs()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.map(|value| value.to_string_lossy().into_owned()))
        };
        let rustflags = env("RUSTFLAGS").flatten().unwrap_or_default();
        assert!(rustflags.contains("-Cpasses=sancov-module"), "{rustflags}");
        assert!(rustflags.ends_with("--cfg fuzzing"), "{rustflags}");
        for removed in ["CARGO_ENCODED_RUSTFLAGS", "CARGO_TARGET_DIR"] {
            assert_eq!(env(removed), Some(None), "{removed} must be removed");
        }
        assert_eq!(
            fuzz_binary("x86_64-unknown-linux-gnu", "envelope")
                .strip_prefix(workspace_root())
                .ok(),
            Some(Path::new(
                "fuzz/target/x86_64-unknown-linux-gnu/release/envelope"
            ))
        );
    }

    #[test]
    fn the_host_triple_is_read_from_the_host_line_of_rustcs_report() {
        let report = "rustc 1.97.0-nightly (e50aa6fba 2026-11-30)\nbinary: rustc\n\
                      host: x86_64-unknown-linux-gnu\nrelease: 1.97.0-nightly\n";
        assert_eq!(
            host_line(report).as_deref(),
            Some("x86_64-unknown-linux-gnu")
        );
        assert_eq!(host_line("rustc 1.97.0\nhost: \n"), None);
        assert_eq!(host_line("rustc 1.97.0\n"), None);
    }
}
