//! The gate before Claude Code may talk to a bridge container, shared by `launch`, `test-live`
//! and `test-container`: the bridge is up and healthy, the host and the agent run under their
//! own uids, the agent's uid cannot use the host's files, the bridge has no route but the
//! Devin-side guard, and models are discovered. Also the readers of Claude Code's stream and
//! of the guards' audits.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use anyhow::{bail, Context, Result};

use crate::compose::{http, internal_address, processes, wait_healthy, Compose};
use crate::image::{AGENT_UID, HOST_UID};

/// A running bridge container of a compose project.
pub(crate) struct Started {
    pub container: String,
    pub address: String,
    pub key: String,
    pub health: serde_json::Value,
}

/// Brings up the bridge and both guards of the profile and waits until the bridge is healthy.
pub(crate) fn start_bridge(compose: &Compose, offline: bool) -> Result<Started> {
    let (bridge, guard) = if offline {
        ("bridge-offline", "network-guard-offline")
    } else {
        ("bridge-live", "network-guard")
    };
    compose.run(&["up", "-d", bridge, "claude-guard", guard])?;
    let container = compose.container(bridge)?;
    let address = internal_address(compose, &container)?;
    let health = wait_healthy(&address, compose.key())?;
    println!(
        "bridge at {address}: agent identity {}",
        health["agent"]["identity"]
    );
    Ok(Started {
        container,
        address,
        key: compose.key().to_owned(),
        health,
    })
}

/// The launch gate: separate identities, the agent's uid kept out of the host's files, and
/// no route but the Devin-side guard.
pub(crate) fn recheck_isolation(_compose: &Compose, started: &Started) -> Result<()> {
    check_identities(&started.container, &started.health)?;
    exec_verify(
        &started.container,
        &format!("{AGENT_UID}:{AGENT_UID}"),
        &agent_private_args(),
    )?;
    exec_verify(
        &started.container,
        &format!("{HOST_UID}:{HOST_UID}"),
        &bridge_route_args(),
    )?;
    println!("isolation re-checked: identities, private host files, routes");
    Ok(())
}

pub(crate) fn agent_private_args() -> Vec<&'static str> {
    vec![
        "--private",
        "/run/devin-bridge/cache",
        "--private",
        "/run/devin-bridge/control.sock",
        "--private",
        "/run/devin-bridge-secrets/bridge_api_key",
        "--proxy",
        "http://claude-guard:8080",
    ]
}

pub(crate) fn bridge_route_args() -> Vec<&'static str> {
    vec![
        "--proxy",
        "http://claude-guard:8080",
        "--direct",
        "--reach",
        "network-guard:8080",
    ]
}

/// `GET /v1/models` through the bridge (live: proves the Devin login and model discovery).
pub(crate) fn discover_models(started: &Started) -> Result<Vec<String>> {
    let (status, body) = http(&started.address, "GET", "/v1/models", &started.key, "")?;
    if status != 200 {
        bail!("model discovery failed with {status}: {body}");
    }
    let listing: serde_json::Value = serde_json::from_str(&body)?;
    let ids: Vec<String> = listing["data"]
        .as_array()
        .map(|models| {
            models
                .iter()
                .filter_map(|m| m["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if ids.is_empty() {
        bail!("the bridge lists no model");
    }
    Ok(ids)
}

/// Whether a process's command line is the offline agent's ACP server, with or without a
/// `--model` before its subcommand (`mock-devin --model swe-1-7 acp ...`).
pub(crate) fn is_agent_argv(args: &str) -> bool {
    args.starts_with("/usr/local/bin/mock-devin ")
        && args.split_whitespace().any(|word| word == "acp")
}

pub(crate) fn check_identities(bridge: &str, health: &serde_json::Value) -> Result<String> {
    let list = processes(bridge)?;
    let host = list
        .iter()
        // (not the init process, whose arguments name the host's command line too)
        .find(|(_, _, args)| args.starts_with("/usr/local/bin/devin-bridge serve"))
        .context("no devin-bridge serve process")?;
    let agent = list
        .iter()
        .find(|(_, _, args)| is_agent_argv(args))
        .context("no agent process (prewarm 1)")?;
    if host.0 != HOST_UID || agent.0 != AGENT_UID {
        bail!(
            "host uid {} and agent uid {} (want {HOST_UID} and {AGENT_UID})",
            host.0,
            agent.0
        );
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", host.1))?;
    let caps = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .map(str::trim)
        .unwrap_or_default()
        .to_owned();
    if caps != "00000000000000e0" {
        bail!("host effective capabilities {caps}, want only SETUID, SETGID, KILL (e0)");
    }
    let agent_status = std::fs::read_to_string(format!("/proc/{}/status", agent.1))?;
    let agent_caps = agent_status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .map(str::trim)
        .unwrap_or_default();
    if agent_caps != "0000000000000000" {
        bail!("the agent holds capabilities {agent_caps}");
    }
    if health["agent"]["identity"] != format!("separate uid {AGENT_UID} gid {AGENT_UID}") {
        bail!("/healthz says {}", health["agent"]["identity"]);
    }
    Ok(format!(
        "host uid {HOST_UID} with CapEff e0, agent uid {AGENT_UID} with no capability"
    ))
}

/// `devin-bridge verify-isolation` inside the bridge container, as `user`.
pub(crate) fn exec_verify(container: &str, user: &str, args: &[&str]) -> Result<String> {
    let output = Command::new("docker")
        .args([
            "exec",
            "-u",
            user,
            container,
            "/usr/local/bin/devin-bridge",
            "verify-isolation",
            "--timeout-ms",
            "3000",
        ])
        .args(args)
        .output()?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        bail!(
            "verify-isolation failed:\n{text}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(text
        .lines()
        .filter(|line| line.starts_with("PASS"))
        .count()
        .to_string()
        + " checks passed")
}

/// The `result` event of a `stream-json` run; fails unless it is a success.
pub(crate) fn final_result(output: &Output) -> Result<String> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let result = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|event| event["type"] == "result")
        .with_context(|| {
            format!(
                "no result event (exit {}):\n{}\n{}",
                output.status,
                stdout
                    .chars()
                    .rev()
                    .take(2000)
                    .collect::<String>()
                    .chars()
                    .rev()
                    .collect::<String>(),
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
    if result["subtype"] != "success" || result["is_error"] == true {
        bail!("Claude Code did not succeed: {result}");
    }
    Ok(result["result"]
        .as_str()
        .unwrap_or_default()
        .chars()
        .take(80)
        .collect())
}

/// The Claude-side guard's audit: no `allow` decision at all; with `require_denials`, it must
/// have recorded the isolation probes' denials (so an empty file cannot pass for an audit).
pub(crate) fn claude_audit_has_no_allow(path: &Path, require_denials: bool) -> Result<String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(_) if !require_denials => String::new(),
        Err(error) => bail!("reading {}: {error}", path.display()),
    };
    let mut denied = 0;
    for line in text.lines() {
        let entry: serde_json::Value = serde_json::from_str(line)?;
        match entry["decision"].as_str() {
            Some("deny") => denied += 1,
            other => bail!("the Claude-side guard decided {other:?}: {line}"),
        }
    }
    if denied == 0 && require_denials {
        bail!("the Claude-side guard recorded nothing, not even the isolation probes");
    }
    Ok(format!("{denied} denials, no allowed connection"))
}

/// The Devin-side guard's audit after a live run: at least one allowed connection, and every
/// allowed one to a name the Devin-side policy (`policies/guard-devin.toml`) allowlists.
pub(crate) fn devin_audit_allows_only_devin(path: &Path) -> Result<()> {
    let policy = crate::workspace::workspace_root().join("policies/guard-devin.toml");
    let allow = allowlist(
        &std::fs::read_to_string(&policy)
            .with_context(|| format!("reading {}", policy.display()))?,
    )?;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut allowed = 0;
    for line in text.lines() {
        let entry: serde_json::Value = serde_json::from_str(line)?;
        if entry["decision"] == "allow" {
            let host = entry["host"].as_str().unwrap_or_default();
            if !allowlisted(host, &allow) {
                bail!("the Devin-side guard allowed {host}, which its policy does not list");
            }
            allowed += 1;
        }
    }
    if allowed == 0 {
        bail!("the Devin-side guard allowed nothing: the live run did not reach Devin through it");
    }
    Ok(())
}

/// Where the Devin CLI keeps its login, inside the `devin-auth` volume (the live bridge's HOME).
const CREDENTIALS_IN_VOLUME: &str = ".local/share/devin/credentials.toml";

/// Checks that `volume` holds a Devin login (a non-empty credentials file), in a throwaway
/// container of the Claude image with no network, as the agent's uid, the volume read-only.
/// Nothing of the file is read out: only `test -s` runs.
pub(crate) fn require_devin_login(volume: &str) -> Result<()> {
    let status = Command::new("docker")
        .args([
            "run",
            "--rm",
            "--pull=never",
            "--network",
            "none",
            "--read-only",
        ])
        .args(["-u", &format!("{AGENT_UID}:{AGENT_UID}")])
        .arg("-v")
        .arg(format!("{volume}:/home/bridge:ro"))
        .args(["--entrypoint", "/bin/sh"])
        .arg(crate::image::claude_tag())
        .args([
            "-c",
            &format!("test -s /home/bridge/{CREDENTIALS_IN_VOLUME}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("docker run (the login check)")?;
    if !status.success() {
        bail!(
            "no Devin login in the {volume} volume: run `ENABLE_LIVE_DEVIN_TESTS=1 cargo xtask login-devin` first"
        );
    }
    Ok(())
}

/// The `allow` list of a guard policy.
fn allowlist(policy: &str) -> Result<Vec<String>> {
    let table: toml::Table = policy.parse().context("the guard policy is not TOML")?;
    table
        .get("allow")
        .and_then(toml::Value::as_array)
        .context("the guard policy has no allow list")?
        .iter()
        .map(|entry| {
            entry
                .as_str()
                .map(str::to_ascii_lowercase)
                .context("an allow entry is not a string")
        })
        .collect()
}

/// Whether the guard's rule admits `host`: `*.suffix` any name under the suffix (not the
/// suffix itself), anything else exactly; case-insensitive, one trailing dot ignored.
fn allowlisted(host: &str, allow: &[String]) -> bool {
    let host = host.to_ascii_lowercase();
    let host = host.strip_suffix('.').unwrap_or(&host);
    allow.iter().any(|entry| match entry.strip_prefix("*.") {
        Some(suffix) => host
            .strip_suffix(suffix)
            .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        None => host == entry,
    })
}

/// The names of the tools Claude Code ran (`tool_use` blocks of assistant events).
pub(crate) fn tools_used(output: &Output) -> Result<Vec<String>> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    Ok(stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["type"] == "assistant")
        .flat_map(|event| {
            event["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|block| block["type"] == "tool_use")
        .filter_map(|block| block["name"].as_str().map(str::to_owned))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_is_known_by_its_subcommand_with_or_without_a_model_flag() {
        assert!(is_agent_argv(
            "/usr/local/bin/mock-devin acp --agent-type summarizer"
        ));
        assert!(is_agent_argv(
            "/usr/local/bin/mock-devin --model swe-1-7 acp --agent-type summarizer"
        ));
        assert!(!is_agent_argv(
            "/usr/local/bin/mock-devin --grandchild-sleep 300"
        ));
        assert!(!is_agent_argv("/usr/local/bin/devin-bridge serve acp"));
    }

    #[test]
    fn every_name_the_devin_policy_lists_is_accepted_and_nothing_else() {
        let policy = std::fs::read_to_string(
            crate::workspace::workspace_root().join("policies/guard-devin.toml"),
        )
        .expect("policy");
        let allow = allowlist(&policy).expect("allow list");
        for host in [
            "devin.ai",
            "api.devin.ai",
            "cognition.ai",
            "app.cognition.ai",
            "server.codeium.com",
            "unleash.codeium.com",
            "API.Devin.AI.",
        ] {
            assert!(allowlisted(host, &allow), "{host}");
        }
        for host in [
            "evil.com",
            "devin.ai.evil.com",
            "notdevin.ai",
            ".devin.ai",
            "codeium.com",
            "x.server.codeium.com",
            "",
        ] {
            assert!(!allowlisted(host, &allow), "{host}");
        }
    }
}
