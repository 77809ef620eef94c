//! `cargo xtask build | serve | test | bench | fuzz`: the project's build tool.
//!
//! It builds (the components, the binaries, the tarball) and runs what it built. Two steps are
//! binaries of their own that xtask builds and runs, so that xtask links no wasmtime:
//! pre-initialising the components (`tools/preinit`, a step of every component build) and the
//! container proof with the operator's flow (`tools/containers`: `image`, `test-container`,
//! `launch`, `login-devin`, `test-live`, `clean`).

mod agent_users;
mod bench_against;
mod bench_compare;
mod bench_table;
mod compat;
mod components;
mod dist;
mod fuzz;
mod long_functions;
mod modules;
mod rust_text;
mod sources;
mod wasm;
mod workspace;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Result};
use devin_bridge_test_setup::claude_code;
use devin_bridge_test_setup::debian::{self, Need};

use components::{build_components, build_test_components, components_dir};
use workspace::{build_bins, cargo, cargo_target_dir, run, workspace_root};

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  build                     build the transform components (wasm) and the host
  serve [ARGS...]           build, then start the bridge on the embedded default policy
                            (extra ARGS go to `devin-bridge serve`, e.g. --listen 127.0.0.1:8080)
  test [ARGS...]            build everything and run every test: the cargo tests, then
                            test-container (needs root and a running Docker daemon); with
                            ARGS (passed to cargo test) only the cargo tests
  modules                   check that no crate has an import circle between its top-level
                            modules, its root counted as one, and that no function of shipped
                            code is over 120 lines but a documented state machine (also the
                            first step of `test`); and that the agent crate's page says exactly
                            who uses its parts that serve one mode
  bench <transforms|bridge|guard|companion|outpost|soak|turns|stream> [ARGS...]
                            run a benchmark and print its table (ARGS go to the benchmark,
                            e.g. `bench soak --turns 5000`)
  bench transforms --against REV [--rounds N]
                            the transforms benchmark of REV and of the current tree side by
                            side: REV checked out in target/bench-against/<commit> (reused),
                            each tree's own components and release bench binary built (the
                            checkout in its own target directory: a cold build compiles
                            wasmtime twice, many minutes), the two binaries run alternately N
                            rounds (default 3), and per row and column each side's best, the
                            ratio new/old, each side's spread between rounds and a verdict
                            (slower: every new round above every old one and the new best over
                            10% and 0.25 µs above the old best); it informs, it never fails on
                            a slower row
  compat [--releases N] [--versions a,b,c] [--fixtures] [--debug]
                            run Claude Code releases (default: the newest 6 on npm and the
                            pinned one) against release builds of the bridge and the offline
                            agent and print the compatibility matrix; fails when the pinned or
                            the newest release fails a check (--fixtures: also write each
                            release's captured requests to tests/fixtures/claude-code/releases;
                            --debug: against the debug builds instead, as CI runs it)
  fuzz <target|all> [--seconds N] [--jobs N] [--build-only]
                            run a libFuzzer target (a transform or a native parser; default 30 s;
                            --jobs: how many run at once, default 1; --build-only: build the
                            targets, run nothing)
  dist [--profile release|dev] [--out DIR] [--binary PATH]
                            build the installable tarball
                            target/dist/devin-bridge-<version>-<target>.tar.gz (the binary with
                            its components embedded, policies, plugin, docs, license);
                            --binary packages that already-built devin-bridge instead
  components                build only the transform components into target/components
  test-components --out DIR build the deliberately faulty test components into DIR, with
                            DIR/sources listing every file they were built from (the test
                            artifacts crate's build script runs it: tests/artifacts)
  image                     build the container images (bridge + guards, Claude Code, the
                            replicas' HAProxy) and print their ids and sizes (needs root and a
                            running Docker daemon)
  test-container            build the images, bring up docker/compose.yml's offline profile
                            and prove the isolation in the running containers, then the
                            replicas profile's affinity
  login-devin               log the Devin CLI in on the isolated devin-auth volume (live)
  launch [--offline] [--stop] [-- CLAUDE_ARGS...]
                            re-check isolation, then start Claude Code in its own container
                            (--stop: stop the bridge and guards, keep the Devin login)
  clean [--all]             stop and remove this project's containers and networks, keeping
                            the Devin login volume (--all: remove the volumes too)
  test-live                 the opt-in live suite (ENABLE_LIVE_DEVIN_TESTS=1 and an account)

image, test-container, launch, login-devin, clean and test-live are commands of
devin-bridge-containers (tools/containers), which xtask builds first; test-container installs
the Debian packages it needs and starts dockerd when it runs as root.
";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = args.first() else {
        eprint!("{USAGE}");
        bail!("no command given");
    };
    let rest = &args[1..];
    match command.as_str() {
        "build" => build_all(),
        "components" => match rest {
            [] => build_components().map(drop),
            _ => bail!("usage: cargo xtask components"),
        },
        "test-components" => match rest {
            [flag, out] if flag == "--out" => build_test_components(Path::new(out)),
            _ => bail!("usage: cargo xtask test-components --out DIR"),
        },
        "dist" => dist::dist(rest).map(drop),
        "serve" => serve(rest),
        "test" => test(rest),
        "modules" => match rest {
            [] => check_modules(),
            _ => bail!("usage: cargo xtask modules"),
        },
        "bench" => bench(rest),
        "compat" => compat::compat(rest),
        "fuzz" => fuzz::fuzz(rest),
        // The commands of the container tool; those that build images need the components
        // and the binaries the images carry.
        "image" | "test-container" | "launch" => {
            build_for_images().and_then(|components| containers(Some(&components), &args))
        }
        "login-devin" | "test-live" | "clean" => containers(None, &args),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(())
        }
        other => {
            eprint!("{USAGE}");
            bail!("unknown command {other:?}")
        }
    }
}

/// `cargo build` of every binary of the workspace (the host, the offline agent, the fake
/// fleet, the tools), saying so first: the first build compiles wasmtime.
fn build_binaries() -> Result<()> {
    eprintln!(
        "xtask: building the binaries (devin-bridge, mock-devin, the fake fleet, the tools): \
         cargo build --workspace --bins (the first build compiles wasmtime: several minutes)"
    );
    Ok(run(cargo().args([
        "build",
        "--locked",
        "--workspace",
        "--bins",
    ]))?)
}

/// `cargo build` of every target of every workspace crate: the binaries the tests start, built
/// in the one build that also makes the tests. Cargo gives a build that includes tests the
/// dev-dependencies' features too (the crates' test helpers), so binaries built apart from the
/// tests (`cargo build --bins`) would compile every workspace crate a second time, with other
/// features; built here, `cargo test` after it finds everything done, and the binaries the
/// tests start are the ones it would have built for them.
fn build_for_tests() -> Result<()> {
    eprintln!(
        "xtask: building the binaries and the tests: cargo build --workspace --all-targets (the \
         first build compiles wasmtime: several minutes)"
    );
    Ok(run(cargo().args([
        "build",
        "--locked",
        "--workspace",
        "--all-targets",
    ]))?)
}

/// `cargo build` of the binaries `names` only. `--workspace` names every package, so the
/// dependencies get the features they get in every other build of this tool and in `cargo
/// test --workspace`: the wasmtime pre-initialisation compiled is the one these link.
fn build_named_binaries(names: &[&str]) -> Result<()> {
    eprintln!(
        "xtask: building {} (the first build compiles wasmtime: several minutes)",
        names.join(" and ")
    );
    let mut build = cargo();
    build.args(["build", "--locked", "--workspace"]);
    for name in names {
        build.args(["--bin", name]);
    }
    Ok(run(&mut build)?)
}

/// Builds the components and the host. The host is a dev build on purpose: its dependencies
/// (wasmtime, hyper, ...) are optimised even in dev builds (see the workspace profile), and the
/// tests share those artifacts, so `serve` after `test` compiles only the project's own crates
/// again (the tests' build gives some of them their test helpers).
fn build_all() -> Result<()> {
    build_components()?;
    build_binaries()
}

/// The components and the binaries the images carry.
fn build_for_images() -> Result<PathBuf> {
    let components = build_components()?;
    build_binaries()?;
    Ok(components)
}

/// Runs `devin-bridge-containers` with `args` (a command and its arguments), built first when
/// it is not (a no-op after [`build_binaries`]).
fn containers(components: Option<&Path>, args: &[String]) -> Result<()> {
    let mut containers = cargo();
    containers.args(["run", "--locked", "-p", "devin-bridge-containers", "--"]);
    if let Some(components) = components {
        containers.arg("--components").arg(components);
    }
    Ok(run(containers.args(args))?)
}

/// Runs the container tool [`build_for_tests`] built, with `args`: `cargo run -p` would build
/// it again, with the features of that one package.
fn built_containers(components: &Path, args: &[String]) -> Result<()> {
    let tool = cargo_target_dir()
        .join("debug")
        .join("devin-bridge-containers");
    Ok(run(Command::new(tool)
        .current_dir(workspace_root())
        .arg("--components")
        .arg(components)
        .args(args))?)
}

/// The programs the cargo tests run, and their Debian packages: `curl` is a real client in the
/// egress guard tests, `git` makes the companion tests' workspaces and diffs, node and npm
/// install and run the pinned Claude Code (and the demo project's `npm test`), `ip` and
/// `nsenter` put outpost sessions with a network policy into network namespaces, the CA
/// certificates let npm reach its registry, and `tmux` gives the interactive Claude Code a
/// terminal.
const TEST_NEEDS: [Need; 8] = [
    Need::new("curl", "curl"),
    Need::new("git", "git"),
    Need::new("node", "nodejs"),
    Need::new("npm", "npm"),
    Need::new("ip", "iproute2"),
    Need::new("nsenter", "util-linux"),
    Need::new("update-ca-certificates", "ca-certificates"),
    Need::new("tmux", "tmux"),
];

/// Installs the cargo tests' programs that are missing (as root). Without root it says what is
/// missing and how to install it, and the tests go on: those that need a missing program fail
/// and name it.
fn ensure_test_programs() -> Result<()> {
    match debian::ensure(&TEST_NEEDS, "the cargo tests", "xtask") {
        Ok(()) => Ok(()),
        Err(error) if error.is_not_root() => {
            eprintln!("xtask: warning: {error}");
            Ok(())
        }
        Err(error) => Err(error.into()),
    }
}

/// No import circle between the top-level modules of any crate, the crate roots counted (see
/// `modules`), no long function in shipped code (see `long_functions`), and the agent crate's page
/// true of who uses its parts (see `agent_users`). Every check runs and reports, whichever fails.
fn check_modules() -> Result<()> {
    let root = workspace_root();
    let crates = modules::workspace_crates(&root)?;
    let failures: Vec<String> = [
        modules::check(&root, &crates),
        long_functions::check(&root, &crates),
        agent_users::check(&root),
    ]
    .into_iter()
    .filter_map(|outcome| outcome.err().map(|error| format!("{error:#}")))
    .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        bail!("{}", failures.join("\n"))
    }
}

fn test(rest: &[String]) -> Result<()> {
    check_modules()?;
    ensure_test_programs()?;
    let components = build_components()?;
    // The test artifacts crate's build script takes these instead of building them in a
    // nested cargo, which would compile xtask a second time.
    build_test_components(&devin_bridge_nested_cargo::test_components_dir(
        &workspace_root(),
    ))?;
    // The tests start real binaries (the host, the offline agent): build them first.
    build_for_tests()?;
    let mut test = cargo();
    // The installed-tarball tests run the dev binary packaged as `dist` packages it.
    eprintln!("xtask: packaging the dev binary for the installed-tarball tests");
    test.env("DEVIN_BRIDGE_DIST_TARBALL", dist::package_for_tests()?);
    // The end-to-end test runs the real Claude Code; without it, that one test fails and says why.
    match claude_code::ensure(&workspace_root().join("target").join("claude-code")) {
        Ok(claude) => {
            test.env("DEVIN_BRIDGE_CLAUDE_CODE", claude);
        }
        Err(error) => eprintln!("xtask: no Claude Code for the end-to-end test: {error}"),
    }
    eprintln!("xtask: building and running the cargo tests (cargo test --workspace)");
    test.args(["test", "--locked", "--workspace", "--no-fail-fast"])
        .args(rest)
        .env("DEVIN_BRIDGE_COMPONENTS", &components)
        .env(
            "DEVIN_BRIDGE_MOCK_DEVIN",
            workspace_root()
                .join("target")
                .join("debug")
                .join("mock-devin"),
        );
    let unit_and_integration = run(&mut test).map_err(anyhow::Error::from);
    if !rest.is_empty() {
        // A filtered run (`cargo xtask test <filter>`) is about the cargo tests only.
        return unit_and_integration;
    }
    // The container proof runs after the cargo tests, whatever their outcome, so one run
    // reports both.
    eprintln!("xtask: container tests (cargo xtask test-container)");
    let containers = built_containers(&components, &["test-container".to_owned()]);
    unit_and_integration.and(containers)
}

fn serve(rest: &[String]) -> Result<()> {
    let root = workspace_root();
    // Which policy first, so the first lines say what this run builds and then serves.
    // The binaries it runs: the host, and the offline agent when that is the policy's agent.
    let (policy, binaries) = match devin_cli() {
        Some(devin) => {
            eprintln!("xtask: found a devin CLI at {}: serving the live policy (policies/summarizer.toml)", devin.display());
            (
                root.join("policies").join("summarizer.toml"),
                vec!["devin-bridge"],
            )
        }
        None => {
            eprintln!("xtask: no devin CLI on PATH (or DEVIN_BIN): serving the offline agent (policies/offline.toml)");
            (
                root.join("policies").join("offline.toml"),
                vec!["devin-bridge", "mock-devin"],
            )
        }
    };
    eprintln!(
        "xtask: serve builds the five transform components, then {}, then starts the bridge",
        binaries.join(" and ")
    );
    build_components()?;
    build_named_binaries(&binaries)?;
    let binary = root.join("target").join("debug").join("devin-bridge");
    let mut serve = Command::new(&binary);
    serve
        .arg("serve")
        .arg("--policy")
        .arg(&policy)
        .args(rest)
        .env("DEVIN_BRIDGE_COMPONENTS", components_dir());
    eprintln!(
        "xtask: starting {} serve --policy {}",
        binary.display(),
        policy.display()
    );
    Ok(run(&mut serve)?)
}

/// `DEVIN_BIN`, else `devin` on PATH, when it is an executable file.
fn devin_cli() -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if let Some(bin) = std::env::var_os("DEVIN_BIN").filter(|b| !b.is_empty()) {
        let bin = PathBuf::from(bin);
        return executable(&bin).then_some(bin);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("devin"))
        .find(|path| executable(path))
}

fn bench(rest: &[String]) -> Result<()> {
    let Some(name) = rest.first() else {
        bail!("usage: cargo xtask bench <transforms|bridge|guard|companion|outpost|soak|turns|stream>")
    };
    if ![
        "transforms",
        "bridge",
        "guard",
        "companion",
        "outpost",
        "soak",
        "turns",
        "stream",
    ]
    .contains(&name.as_str())
    {
        bail!(
            "unknown benchmark {name:?} (transforms, bridge, guard, companion, outpost, soak, turns or stream)"
        );
    }
    if name == "transforms" {
        if let Some(options) = bench_against::options(&rest[1..])? {
            return bench_against::run_against(&options);
        }
    } else if rest[1..].iter().any(|arg| arg == "--against") {
        bail!("--against is an option of the transforms benchmark only");
    }
    let components = build_components()?;
    let mut bench = cargo();
    // Release binaries are where cargo writes them (`CARGO_TARGET_DIR` when set).
    let release = cargo_target_dir().join("release");
    if name == "bridge" || name == "stream" {
        // The bridge and stream benchmarks spawn the offline agent: an optimised one, so the
        // agent's own cost stays small next to what is measured.
        run(cargo().args(["build", "--locked", "--release", "-p", "mock-devin"]))?;
        bench.env("DEVIN_BRIDGE_MOCK_DEVIN", release.join("mock-devin"));
    }
    // The companion, soak and turns benchmarks run the host (and their stand-ins) as
    // processes, optimised as users run them.
    if name == "companion" || name == "soak" || name == "turns" {
        build_bins(&["devin-bridge", "mock-devin"], true)?;
        bench
            .env("DEVIN_BRIDGE_BIN", release.join("devin-bridge"))
            .env("DEVIN_BRIDGE_MOCK_DEVIN", release.join("mock-devin"));
    }
    // The turns benchmark (Claude Code against the bridge) is the bench target `claude_turns`.
    let target = if name == "turns" {
        "claude_turns"
    } else {
        name.as_str()
    };
    if name == "outpost" {
        build_bins(&["devin-bridge", "devin-bridge-fake-fleet"], true)?;
        bench
            .env("DEVIN_BRIDGE_BIN", release.join("devin-bridge"))
            .env("FAKE_DEVIN_REMOTE", release.join("fake-devin-remote"));
    }
    bench
        .args([
            "bench",
            "--locked",
            "-p",
            "devin-bridge",
            "--bench",
            target,
            "--",
        ])
        .args(&rest[1..])
        .env("DEVIN_BRIDGE_COMPONENTS", &components);
    Ok(run(&mut bench)?)
}
