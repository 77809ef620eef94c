//! The `outpost_worker_in_image` container check: the image the Kubernetes manifests name
//! (`devin-bridge:outpost`) runs the worker the way the StatefulSet does (uid 10001, read-only
//! root filesystem, no capabilities, the ConfigMap's policy, the token and acceptor id from the
//! environment) against the fake fleet API on this machine's loopback: it claims a queued
//! session, runs the verified remote with its contract's environment, and on `docker stop`
//! (SIGTERM) ends the remote, releases the claim and exits 0.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::chown;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::image::{HOST_UID, OUTPOST_TAG};
use crate::workspace::workspace_root;

const CONTAINER: &str = "devin-bridge-outpost-check";
const TOKEN: &str = "outpost-check-token";

/// The fake fleet, stopped when dropped.
struct Fleet {
    child: Child,
    api: String,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Fleet {
    fn start() -> Result<Self> {
        let binary = workspace_root().join("target/debug/fake-fleet");
        let mut child = Command::new(&binary)
            .args(["--listen", "127.0.0.1:0", "--machine-token", TOKEN])
            .args(["--orchestrator-token", "outpost-check-orchestrator"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let urls: Value = serde_json::from_str(&line).context("the fake fleet's address line")?;
        let api = urls["api_url"].as_str().context("api_url")?.to_owned();
        Ok(Self { child, api })
    }

    /// A control call (`curl`, already a CI dependency); the JSON answer.
    fn control(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        file: Option<&Path>,
    ) -> Result<Value> {
        let mut curl = Command::new("curl");
        curl.args([
            "-sSf",
            "-X",
            method,
            &format!("{}/_control/{path}", self.api),
        ]);
        if let Some(body) = body {
            curl.args(["-d", body]);
        }
        if let Some(file) = file {
            curl.arg("--data-binary")
                .arg(format!("@{}", file.display()));
        }
        let output = curl.output().context("curl")?;
        if !output.status.success() {
            bail!(
                "{method} {path}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(serde_json::from_slice(&output.stdout).unwrap_or(Value::Null))
    }
}

/// The policy the ConfigMap mounts (the block under `outpost.toml: |`).
fn configmap_policy() -> Result<String> {
    let text = std::fs::read_to_string(workspace_root().join("deploy/kubernetes/configmap.yaml"))?;
    let mut lines = text
        .lines()
        .skip_while(|line| !line.trim_start().starts_with("outpost.toml: |"));
    lines.next().context("configmap.yaml has no outpost.toml")?;
    let block: Vec<&str> = lines
        .take_while(|line| line.is_empty() || line.starts_with("    "))
        .collect();
    Ok(block
        .iter()
        .map(|line| line.strip_prefix("    ").unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n"))
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> Result<bool>) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if done()? {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!("timed out waiting for {what}")
}

fn docker(args: &[&str]) -> Result<String> {
    let output = Command::new("docker")
        .args(args)
        .output()
        .context("docker")?;
    if !output.status.success() {
        bail!(
            "docker {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Runs the check; the line it prints on success.
pub(crate) fn outpost_worker_in_image(scratch: &Path) -> Result<String> {
    let _ = docker(&["rm", "-f", CONTAINER]);
    let fleet = Fleet::start()?;
    let policy = configmap_policy()?;
    let session = queue_session(&fleet, &policy)?;
    start_worker(&fleet, scratch, &policy)?;
    let result = check_worker(&fleet, &session);
    if result.is_err() {
        if let Ok(logs) = docker(&["logs", "--tail", "40", CONTAINER]) {
            eprintln!("{logs}");
        }
    }
    let _ = docker(&["rm", "-f", CONTAINER]);
    result
}

/// Publishes the remote, registers the policy's outpost and queues a session for it; the
/// session's id.
fn queue_session(fleet: &Fleet, policy: &str) -> Result<String> {
    let remote = workspace_root().join("target/debug/fake-devin-remote");
    fleet.control(
        "POST",
        "publish_binary?sha=abc1234&suffix=linux_x64&sha256=correct",
        None,
        Some(&remote),
    )?;
    fleet.control(
        "POST",
        "set_latest",
        Some(r#"{"suffix":"linux_x64","sha":"abc1234"}"#),
        None,
    )?;
    let outpost_name = policy
        .lines()
        .find_map(|line| line.trim().strip_prefix("outpost = "))
        .map(|name| name.trim_matches('"').to_owned())
        .context("the ConfigMap's policy names its outpost")?;
    let outpost = fleet.control(
        "POST",
        "outposts",
        Some(&format!(
            r#"{{"name":"{outpost_name}","platform":"linux"}}"#
        )),
        None,
    )?;
    let outpost_id = outpost["outpost_id"]
        .as_str()
        .context("outpost id")?
        .to_owned();
    let queued = fleet.control(
        "POST",
        "enqueue",
        Some(&format!(r#"{{"outpost_id":"{outpost_id}"}}"#)),
        None,
    )?;
    Ok(queued["session_id"]
        .as_str()
        .context("session id")?
        .to_owned())
}

/// Starts the worker's container as the StatefulSet runs it: uid 10001, read-only root, no
/// capabilities, the ConfigMap's policy and a state volume mounted, the token and acceptor id
/// in its environment.
fn start_worker(fleet: &Fleet, scratch: &Path, policy: &str) -> Result<()> {
    let volume = scratch.join("state");
    std::fs::create_dir_all(&volume)?;
    chown(&volume, Some(HOST_UID), Some(HOST_UID))?;
    let policy_file = scratch.join("outpost.toml");
    std::fs::write(&policy_file, policy)?;
    let mount_state = format!("{}:/var/lib/devin-bridge", volume.display());
    let mount_policy = format!(
        "{}:/etc/devin-bridge/outpost.toml:ro",
        policy_file.display()
    );
    let user = format!("{HOST_UID}:{HOST_UID}");
    let env_token = format!("DEVIN_OUTPOSTS_TOKEN={TOKEN}");
    let env_api = format!("DEVIN_API_URL={}", fleet.api);
    let env_static = format!(
        "DEVIN_WORKER_STATIC_BASE_URL={}/static/devin-rs/remote",
        fleet.api
    );
    docker(&[
        "run",
        "-d",
        "--pull=never",
        "--name",
        CONTAINER,
        "--network",
        "host",
        "--read-only",
        "--user",
        &user,
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--tmpfs",
        "/tmp",
        "-v",
        &mount_state,
        "-v",
        &mount_policy,
        "-e",
        &env_token,
        "-e",
        "DEVIN_WORKER_ACCEPTOR_ID=devin-outpost-0",
        "-e",
        &env_api,
        "-e",
        "DEVIN_WORKER_CACHE_DIR=/var/lib/devin-bridge/cache",
        "-e",
        &env_static,
        "--entrypoint",
        "devin-bridge",
        OUTPOST_TAG,
        "outpost",
        "start",
        "--policy",
        "/etc/devin-bridge/outpost.toml",
    ])?;
    Ok(())
}

/// Waits for the remote's report, checks what it saw, stops the container and checks the
/// claim's history; the line the check prints.
fn check_worker(fleet: &Fleet, session: &str) -> Result<String> {
    wait_for(
        "the remote to report from the container",
        Duration::from_secs(60),
        || {
            let reports =
                fleet.control("GET", &format!("reports?session={session}"), None, None)?;
            Ok(reports.as_array().is_some_and(|r| !r.is_empty()))
        },
    )?;
    let reports = fleet.control("GET", &format!("reports?session={session}"), None, None)?;
    let env = reports[0]["env"]
        .as_object()
        .context("the remote's environment")?;
    if env.values().any(|value| value.as_str() == Some(TOKEN)) {
        bail!("the fleet token reached the remote");
    }
    let cwd = reports[0]["cwd"].as_str().unwrap_or_default().to_owned();
    if cwd != "/var/lib/devin-bridge/work" {
        bail!("the remote ran in {cwd}, not the policy's work_dir");
    }
    docker(&["stop", "-t", "60", CONTAINER])?;
    let code = docker(&["inspect", "-f", "{{.State.ExitCode}}", CONTAINER])?;
    if code != "0" {
        bail!("the worker exited {code} on SIGTERM");
    }
    let history = fleet.control("GET", &format!("history?session={session}"), None, None)?;
    let kinds: Vec<&str> = history
        .as_array()
        .map(|events| events.iter().filter_map(|e| e["kind"].as_str()).collect())
        .unwrap_or_default();
    if kinds != ["Claimed", "Released"] {
        bail!("claim history {kinds:?}, expected a claim by the pod's acceptor id and its release");
    }
    let acceptor = history[0]["acceptor"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Ok(format!(
        "{OUTPOST_TAG} as uid {HOST_UID} (read-only root, no capabilities) claimed {session} as {acceptor}, ran the remote in {cwd} without the token, and on SIGTERM released it and exited 0"
    ))
}
