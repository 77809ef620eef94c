//! The operator's flow on docker/compose.yml: log in the isolated Devin auth volume, launch
//! Claude Code in its own container, and the opt-in live suite. The live parts need a Devin
//! account and the `devin-bridge:live` image (docker/Dockerfile.live); without them they refuse
//! and say what is missing. Their offline twins run in `cargo xtask test-container`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::compose::{self, Compose, SandboxDirs};
use crate::gate;
use crate::image;

const LIVE_IMAGE: &str = "devin-bridge:live";
const OPT_IN: &str = "ENABLE_LIVE_DEVIN_TESTS";

fn require_opt_in(what: &str) -> Result<()> {
    if std::env::var(OPT_IN).as_deref() != Ok("1") {
        let after = if what == "login-devin" {
            ""
        } else {
            " (after `cargo xtask login-devin`)"
        };
        bail!(
            "{what} talks to a real Devin account: it is opt-in. Set {OPT_IN}=1{after} to run it."
        );
    }
    Ok(())
}

fn require_live_image() -> Result<()> {
    let found = Command::new("docker")
        .args(["image", "inspect", LIVE_IMAGE])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        bail!(
            "no {LIVE_IMAGE} image: run `cargo xtask image`, then build docker/Dockerfile.live with \
             the official Devin CLI archive's URL and sha256 digests (see that file)"
        );
    }
    Ok(())
}

/// `cargo xtask clean [--all]`: stops and removes this project's containers and networks (the
/// operator's project and the tests'), keeping the named volumes (the Devin login) unless
/// `--all` is given.
pub(crate) fn clean(rest: &[String]) -> Result<()> {
    let all = match rest {
        [] => false,
        [flag] if flag == "--all" => true,
        _ => bail!("usage: cargo xtask clean [--all]"),
    };
    image::require_docker()?;
    // `down` needs no key, but compose.yml requires one to be set to read the file.
    let placeholder = "clean".to_owned();
    for compose in [
        Compose::operator("offline", placeholder.clone())?,
        Compose::operator("live", placeholder.clone())?,
        Compose::test_profile("offline", placeholder.clone())?,
        Compose::test_profile("live", placeholder.clone())?,
    ] {
        compose.clean(all)?;
    }
    if all {
        println!("removed this project's containers, networks and volumes (the Devin login too)");
    } else {
        println!("removed this project's containers and networks; the Devin login volume is kept (`clean --all` removes it)");
    }
    Ok(())
}

/// `cargo xtask login-devin`: the Devin CLI's login, run once in a throwaway container on the
/// devin-auth volume as the agent's uid. The token is typed at the CLI's own prompt: it is never
/// an argument, an environment variable or a file of ours.
pub(crate) fn login_devin() -> Result<()> {
    require_opt_in("login-devin")?;
    image::require_docker()?;
    require_live_image()?;
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        bail!("login-devin needs a terminal: the token is typed at the Devin CLI's prompt");
    }
    let compose = Compose::operator("live", compose::existing_or_new_key()?)?;
    SandboxDirs::ensure()?;
    compose.run(&["up", "-d", "network-guard"])?;
    let status = compose
        .command()
        .args([
            "run",
            "--rm",
            "--no-deps",
            "-u",
            "10002:10002",
            "-e",
            "HTTPS_PROXY=http://network-guard:8080",
            "-e",
            "HTTP_PROXY=http://network-guard:8080",
            "-e",
            "HOME=/home/bridge",
            "--entrypoint",
            "/usr/local/bin/devin",
            "bridge-live",
            "auth",
            "login",
        ])
        .status()
        .context("running the Devin CLI's login")?;
    if !status.success() {
        bail!("the Devin CLI's login failed ({status})");
    }
    println!("logged in: the credentials live only in the devin-auth volume");
    Ok(())
}

/// `cargo xtask launch [--offline] [--stop] [-- claude args]`: brings up the bridge and both guards,
/// re-checks isolation and model discovery (and, live, Devin authentication), then starts
/// Claude Code in its own container, attached to this terminal.
pub(crate) fn launch(components: &Path, rest: &[String]) -> Result<()> {
    let offline = rest.iter().any(|arg| arg == "--offline");
    let profile = if offline { "offline" } else { "live" };
    if rest.iter().any(|arg| arg == "--stop") {
        // Stops the containers and networks; the devin-auth volume (the login) is kept.
        let compose = Compose::operator(profile, compose::existing_or_new_key()?)?;
        compose.run(&["down", "--remove-orphans", "-t", "5"])?;
        println!("stopped the {profile} profile; the devin-auth volume is kept");
        return Ok(());
    }
    let claude_args: Vec<&str> = rest
        .iter()
        .skip_while(|arg| arg.as_str() != "--")
        .skip(1)
        .map(String::as_str)
        .collect();
    image::require_docker()?;
    image::build_images(components)?;
    if !offline {
        require_live_image()?;
    }
    SandboxDirs::ensure()?;
    let compose = Compose::operator(profile, compose::existing_or_new_key()?)?;
    if !offline {
        gate::require_devin_login(&compose.auth_volume())?;
    }
    let started = gate::start_bridge(&compose, offline)?;
    gate::recheck_isolation(&compose, &started)?;
    let models = gate::discover_models(&started)?;
    println!("models: {}", models.join(", "));
    let client = client_variables()?;
    let mut run = compose.command();
    run.args(["run", "--rm"]);
    for (name, value) in &client {
        run.arg("-e").arg(format!("{name}={value}"));
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        // No terminal to attach: Claude Code runs in print mode (`-- -p "..."`).
        run.arg("-T");
    }
    let status = run
        .arg("claude")
        .args(&claude_args)
        .status()
        .context("starting Claude Code's container")?;
    let stop = if offline {
        "cargo xtask launch --offline --stop"
    } else {
        "cargo xtask launch --stop"
    };
    println!("Claude Code exited ({status}); `{stop}` stops the bridge and the guards");
    Ok(())
}

/// Claude Code's variables for the bridge container, from `devin-bridge client-env` run in the
/// checkout (so `.env.devin-bridge` there and the BRIDGE_*_MODEL environment are read and
/// checked against the catalog); a refused value stops the launch with its message.
fn client_variables() -> Result<Vec<(String, String)>> {
    let binary = crate::workspace::workspace_root().join("target/debug/devin-bridge");
    let output = Command::new(&binary)
        .args(["client-env", "--base-url", "http://bridge:20128"])
        .current_dir(crate::workspace::workspace_root())
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {} client-env", binary.display()))?;
    if !output.status.success() {
        bail!(
            "the model settings were refused: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    parse_exports(&String::from_utf8_lossy(&output.stdout))
}

/// `export NAME='value'` lines (what `client-env` prints) as pairs.
fn parse_exports(text: &str) -> Result<Vec<(String, String)>> {
    text.lines()
        .map(|line| {
            let (name, value) = line
                .strip_prefix("export ")
                .and_then(|rest| rest.split_once('='))
                .with_context(|| format!("not an export line: {line:?}"))?;
            let value = value
                .strip_prefix('\'')
                .and_then(|v| v.strip_suffix('\''))
                .filter(|v| !v.contains('\''))
                .with_context(|| format!("not a plain quoted value: {line:?}"))?;
            Ok((name.to_owned(), value.to_owned()))
        })
        .collect()
}

/// The three live scenarios, spaced out; each checks Claude Code's structured stream events,
/// then the Devin guard must have allowed only Devin hosts and the Claude guard nothing.
pub(crate) fn test_live() -> Result<()> {
    require_opt_in("test-live")?;
    image::require_docker()?;
    require_live_image()?;
    let dirs = SandboxDirs::ensure()?;
    let compose = Compose::operator("live", compose::existing_or_new_key()?)?;
    gate::require_devin_login(&compose.auth_volume())?;
    let started = gate::start_bridge(&compose, false)?;
    gate::recheck_isolation(&compose, &started)?;
    let evidence = crate::evidence::Evidence::open()?;
    let scenarios: [(&str, &[&str]); 3] = [
        (
            "Read math.js and math.test.js and explain the defect. Do not edit anything.",
            &["Read"],
        ),
        ("Fix the failing test in this project.", &["Edit", "Bash"]),
        ("/bridge-check", &["Read", "Bash"]),
    ];
    std::fs::create_dir_all(dirs.workspace().join(".claude/commands"))?;
    std::fs::write(
        dirs.workspace().join(".claude/commands/bridge-check.md"),
        "Read package.json, run `npm test` with Bash, and report whether it passes.\n",
    )?;
    for (index, (prompt, tools)) in scenarios.iter().enumerate() {
        if index > 0 {
            // Live ACP sessions opened in a burst fail more often: space them out.
            std::thread::sleep(Duration::from_secs(20));
        }
        compose::write_demo_project(&dirs.workspace(), Some(image::HOST_UID))?;
        let output = compose.run_claude_print(prompt)?;
        evidence.write(
            &format!("live-scenario-{}.jsonl", index + 1),
            &output.stdout,
            &[compose.key()],
        )?;
        let used = gate::tools_used(&output)?;
        for tool in *tools {
            if !used.iter().any(|name| name == tool) {
                bail!(
                    "scenario {}: Claude Code never ran {tool} (ran {used:?})",
                    index + 1
                );
            }
        }
        gate::final_result(&output)?;
        println!("PASS live scenario {}: {prompt}", index + 1);
    }
    evidence.copy(
        &dirs.devin_audit(),
        "live-egress.jsonl",
        &[10001],
        &[compose.key()],
    )?;
    evidence.copy(
        &dirs.claude_audit(),
        "live-claude-egress.jsonl",
        &[10001],
        &[compose.key()],
    )?;
    gate::devin_audit_allows_only_devin(&dirs.devin_audit())?;
    gate::claude_audit_has_no_allow(&dirs.claude_audit(), false)?;
    println!(
        "PASS live audits: Devin guard allowed only Devin hosts; Claude guard allowed nothing"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_lines_parse_and_anything_else_is_refused() {
        let pairs =
            parse_exports("export A='x'\nexport B='devin-cli-agentic/swe-2'\n").expect("parsed");
        assert_eq!(
            pairs,
            vec![
                ("A".to_owned(), "x".to_owned()),
                ("B".to_owned(), "devin-cli-agentic/swe-2".to_owned())
            ]
        );
        assert!(parse_exports("A=x\n").is_err());
        assert!(parse_exports("export A=x\n").is_err());
        assert!(parse_exports("export A='a'\\''b'\n").is_err());
    }
}
