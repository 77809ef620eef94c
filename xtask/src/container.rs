//! The compose topology, run for real: `cargo xtask test-container` proves the isolation in
//! running containers by trying; `login-devin`, `launch` and `test-live` are the operator's flow.
//!
//! Everything stays on this machine: the containers of docker/compose.yml (internal network
//! 172.29.77.0/24, no route out, no outside name resolves) and loopback. Every wait is bounded.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{chown, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::image::{self, AGENT_UID, HOST_UID};
use crate::{claude_code, workspace_root};

/// The compose project of the tests (the operator's flow uses `devin-bridge`).
const TEST_PROJECT: &str = "devin-bridge-test";
const OPERATOR_PROJECT: &str = "devin-bridge";
const BRIDGE_PORT: u16 = 20128;
const DEMO_PROMPT: &str = "Fix the failing test in this project.";

/// `docker compose` (the plugin) when present, else `docker-compose`.
fn compose_program() -> Result<Vec<String>> {
    let plugin = Command::new("docker")
        .args(["compose", "version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if plugin.is_ok_and(|status| status.success()) {
        return Ok(vec!["docker".into(), "compose".into()]);
    }
    if Command::new("docker-compose")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
    {
        return Ok(vec!["docker-compose".into()]);
    }
    bail!("neither `docker compose` nor `docker-compose` is installed (apt-get install docker-compose)")
}

/// One compose project of docker/compose.yml.
pub struct Compose {
    program: Vec<String>,
    project: String,
    profile: String,
    key: String,
}

impl Compose {
    /// The operator's project (`devin-bridge`) in `profile`.
    pub fn operator(profile: &str, key: String) -> Result<Self> {
        Ok(Self {
            program: compose_program()?,
            project: OPERATOR_PROJECT.into(),
            profile: profile.into(),
            key,
        })
    }

    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program[0]);
        command
            .args(&self.program[1..])
            .arg("-f")
            .arg(workspace_root().join("docker/compose.yml"))
            .args(["-p", &self.project, "--profile", &self.profile])
            .env("BRIDGE_API_KEY", &self.key);
        command
    }

    pub fn run(&self, args: &[&str]) -> Result<Output> {
        let output = self
            .command()
            .args(args)
            .output()
            .with_context(|| format!("compose {args:?}"))?;
        if !output.status.success() {
            bail!(
                "compose {args:?} failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(output)
    }

    fn container(&self, service: &str) -> Result<String> {
        let output = self.run(&["ps", "-q", service])?;
        let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if id.is_empty() {
            bail!("service {service} has no container");
        }
        Ok(id)
    }

    /// The containers of this project, running or not.
    fn leftovers(&self) -> Result<Vec<String>> {
        let output = Command::new("docker")
            .args(["ps", "-aq", "--filter"])
            .arg(format!("label=com.docker.compose.project={}", self.project))
            .output()?;
        Ok(String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect())
    }

    fn down(&self) -> Result<()> {
        self.run(&["down", "-v", "--remove-orphans", "-t", "5"])
            .map(drop)
    }
}

/// The host directories the compose file mounts, under `.sandbox/container/`.
pub struct SandboxDirs {
    root: PathBuf,
}

fn sandbox_root() -> PathBuf {
    workspace_root().join(".sandbox").join("container")
}

/// The local key of the operator's bridge: kept across launches, made once.
pub fn existing_or_new_key() -> Result<String> {
    let file = sandbox_root().join("secrets/bridge_api_key");
    if let Ok(key) = std::fs::read_to_string(&file) {
        return Ok(key.trim().to_owned());
    }
    let dirs = SandboxDirs::ensure()?;
    let key = random_key()?;
    dirs.write_key(&key)?;
    Ok(key)
}

impl SandboxDirs {
    /// Fresh directories with the owners the containers need, a new random key, and the
    /// demo project in the workspace.
    fn prepare() -> Result<(Self, String)> {
        let root = sandbox_root();
        if root.exists() {
            std::fs::remove_dir_all(&root)?;
        }
        let dirs = Self::ensure()?;
        let key = random_key()?;
        dirs.write_key(&key)?;
        write_demo_project(&dirs.workspace(), Some(HOST_UID))?;
        Ok((dirs, key))
    }

    /// The directories, made with their owners where missing; existing content is kept.
    pub fn ensure() -> Result<Self> {
        let root = sandbox_root();
        std::fs::create_dir_all(&root)?;
        let dirs = Self { root };
        for (name, mode) in [
            ("secrets", 0o700),
            ("claude-audit", 0o700),
            ("devin-audit", 0o700),
            ("workspace", 0o755),
        ] {
            let dir = dirs.root.join(name);
            std::fs::create_dir_all(&dir)?;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode))?;
            chown(&dir, Some(HOST_UID), Some(HOST_UID))?;
        }
        Ok(dirs)
    }

    /// The key file: 0600, owned by the host's uid, in a 0700 directory of that uid.
    fn write_key(&self, key: &str) -> Result<()> {
        let key_file = self.root.join("secrets/bridge_api_key");
        std::fs::write(&key_file, format!("{key}\n"))?;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600))?;
        chown(&key_file, Some(HOST_UID), Some(HOST_UID))?;
        Ok(())
    }

    pub fn workspace(&self) -> PathBuf {
        self.root.join("workspace")
    }

    pub fn claude_audit(&self) -> PathBuf {
        self.root.join("claude-audit/claude-egress.jsonl")
    }

    pub fn devin_audit(&self) -> PathBuf {
        self.root.join("devin-audit/egress.jsonl")
    }
}

fn random_key() -> Result<String> {
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// The small project whose failing test the offline agent leads Claude Code to fix.
pub fn write_demo_project(dir: &Path, owner: Option<u32>) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let files = [
        ("math.js", "function add(a, b) {\n  return a - b;\n}\nmodule.exports = { add };\n"),
        (
            "math.test.js",
            "const assert = require(\"assert\");\nconst { add } = require(\"./math\");\nassert.strictEqual(add(2, 3), 5);\nconsole.log(\"all tests passed\");\n",
        ),
        (
            "package.json",
            "{ \"name\": \"demo\", \"scripts\": { \"test\": \"node math.test.js\" } }\n",
        ),
    ];
    for (name, text) in files {
        let file = dir.join(name);
        std::fs::write(&file, text)?;
        if let Some(uid) = owner {
            chown(&file, Some(uid), Some(uid))?;
        }
    }
    Ok(())
}

/// Checks the demo project was fixed and its test passes.
fn demo_fixed(dir: &Path) -> Result<()> {
    let math = std::fs::read_to_string(dir.join("math.js"))?;
    if !math.contains("return a + b;") {
        bail!("math.js was not fixed:\n{math}");
    }
    let test = Command::new("node")
        .arg("math.test.js")
        .current_dir(dir)
        .output()?;
    if !test.status.success() {
        bail!("the demo test still fails");
    }
    Ok(())
}

/// The IPv4 address of a container on the project's internal network.
fn internal_address(compose: &Compose, container: &str) -> Result<String> {
    let format = format!(
        "{{{{(index .NetworkSettings.Networks \"{}_internal\").IPAddress}}}}",
        compose.project
    );
    let output = Command::new("docker")
        .args(["inspect", "-f", &format, container])
        .output()?;
    let address = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !output.status.success() || address.is_empty() {
        bail!("container {container} has no address on the internal network");
    }
    Ok(address)
}

/// A bounded HTTP/1.1 request; returns (status, body).
fn http(address: &str, method: &str, path: &str, key: &str, body: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(
        &format!("{address}:{BRIDGE_PORT}").parse()?,
        Duration::from_secs(5),
    )?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: bridge\r\nConnection: close\r\nx-api-key: {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").context("no HTTP head")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .context("no status")?;
    Ok((status, body.to_owned()))
}

fn wait_healthy(address: &str, key: &str) -> Result<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Ok((200, body)) = http(address, "GET", "/healthz", key, "") {
            return Ok(serde_json::from_str(&body)?);
        }
        if Instant::now() > deadline {
            bail!("the bridge at {address} did not become healthy within 90 s");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Processes of a container as (uid, pid, command), from the host's view (`docker top`).
fn processes(container: &str) -> Result<Vec<(u32, u32, String)>> {
    let output = Command::new("docker")
        .args(["top", container, "-eo", "uid,pid,args"])
        .output()?;
    if !output.status.success() {
        bail!("docker top {container} failed");
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let uid = words.next()?.parse().ok()?;
            let pid = words.next()?.parse().ok()?;
            Some((uid, pid, words.collect::<Vec<_>>().join(" ")))
        })
        .collect())
}

/// Counts results and prints one line per check.
#[derive(Default)]
struct Report {
    passed: usize,
    failed: Vec<String>,
}

impl Report {
    fn check(&mut self, name: &str, outcome: Result<String>) {
        match outcome {
            Ok(detail) => {
                self.passed += 1;
                println!("PASS {name}: {detail}");
            }
            Err(error) => {
                println!("FAIL {name}: {error:#}");
                self.failed.push(name.to_owned());
            }
        }
    }
}

/// `cargo xtask test-container`.
pub fn test_container(components: &Path) -> Result<()> {
    image::require_docker()?;
    let program = compose_program()?;
    image::build_images(components)?;
    let (dirs, key) = SandboxDirs::prepare()?;
    let compose = Compose {
        program,
        project: TEST_PROJECT.into(),
        profile: "offline".into(),
        key: key.clone(),
    };
    // A project left by an interrupted run goes first.
    let _ = compose.down();
    let mut report = Report::default();
    let outcome = run_checks(&compose, &dirs, &key, &mut report);
    if let Err(error) = &outcome {
        report.check("setup", Err(anyhow::anyhow!("{error:#}")));
        let logs = compose
            .command()
            .args(["logs", "--no-color", "--tail", "60"])
            .output();
        if let Ok(logs) = logs {
            eprintln!("{}", String::from_utf8_lossy(&logs.stdout));
        }
    }
    let down = compose.down();
    report.check(
        "down_leaves_nothing",
        down.and_then(|()| {
            let left = compose.leftovers()?;
            if left.is_empty() {
                Ok("no container of the project remains".into())
            } else {
                bail!("containers left: {left:?}")
            }
        }),
    );
    println!(
        "test-container: {} passed, {} failed",
        report.passed,
        report.failed.len()
    );
    if !report.failed.is_empty() {
        bail!("container checks failed: {}", report.failed.join(", "));
    }
    Ok(())
}

/// A running bridge container of a compose project.
pub struct Started {
    container: String,
    address: String,
    key: String,
    health: serde_json::Value,
}

/// Brings up the bridge and both guards of the profile and waits until the bridge is healthy.
pub fn start_bridge(compose: &Compose, offline: bool) -> Result<Started> {
    let (bridge, guard) = if offline {
        ("bridge-offline", "network-guard-offline")
    } else {
        ("bridge-live", "network-guard")
    };
    compose.run(&["up", "-d", bridge, "claude-guard", guard])?;
    let container = compose.container(bridge)?;
    let address = internal_address(compose, &container)?;
    let health = wait_healthy(&address, &compose.key)?;
    println!(
        "bridge at {address}: agent identity {}",
        health["agent"]["identity"]
    );
    Ok(Started {
        container,
        address,
        key: compose.key.clone(),
        health,
    })
}

/// The launch gate: separate identities, the agent's uid kept out of the host's files, and
/// no route but the Devin-side guard.
pub fn recheck_isolation(_compose: &Compose, started: &Started) -> Result<()> {
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

fn agent_private_args() -> Vec<&'static str> {
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

fn bridge_route_args() -> Vec<&'static str> {
    vec![
        "--proxy",
        "http://claude-guard:8080",
        "--direct",
        "--reach",
        "network-guard:8080",
    ]
}

/// `GET /v1/models` through the bridge (live: proves the Devin login and model discovery).
pub fn discover_models(started: &Started) -> Result<Vec<String>> {
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

fn run_checks(compose: &Compose, dirs: &SandboxDirs, key: &str, report: &mut Report) -> Result<()> {
    let started = start_bridge(compose, true)?;
    let bridge = started.container.clone();
    let address = started.address.clone();
    let health = started.health.clone();

    report.check("identities_differ", check_identities(&bridge, &health));
    report.check("hostile_turn_denied", hostile_turn(&address, key));
    report.check(
        "agent_uid_cannot_use_host_files",
        exec_verify(
            &bridge,
            &format!("{AGENT_UID}:{AGENT_UID}"),
            &agent_private_args(),
        ),
    );
    report.check(
        "bridge_reaches_only_the_devin_guard",
        exec_verify(
            &bridge,
            &format!("{HOST_UID}:{HOST_UID}"),
            &bridge_route_args(),
        ),
    );
    report.check(
        "model_discovery",
        discover_models(&started).map(|ids| ids.join(", ")),
    );
    report.check(
        "devin_guard_refuses_anthropic",
        exec_verify(
            &bridge,
            &format!("{HOST_UID}:{HOST_UID}"),
            &["--proxy", "http://network-guard:8080"],
        ),
    );
    report.check(
        "host_claude_code_completes_the_task",
        host_claude_code(&address, key),
    );
    report.check(
        "claude_container_completes_the_task",
        claude_container(compose, dirs),
    );
    report.check(
        "claude_guard_allowed_nothing",
        claude_audit_has_no_allow(&dirs.claude_audit(), true),
    );
    report.check(
        "client_hangup_kills_the_agent_group",
        hangup_kills_agent_group(&address, key, &bridge),
    );
    report.check("no_agent_outlives_its_turn", agents_settled(&bridge));
    Ok(())
}

fn check_identities(bridge: &str, health: &serde_json::Value) -> Result<String> {
    let list = processes(bridge)?;
    let host = list
        .iter()
        // (not the init process, whose arguments name the host's command line too)
        .find(|(_, _, args)| args.starts_with("/usr/local/bin/devin-bridge serve"))
        .context("no devin-bridge serve process")?;
    let agent = list
        .iter()
        .find(|(_, _, args)| args.starts_with("/usr/local/bin/mock-devin acp"))
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

/// A turn whose agent tries to reach the host's files; every probe must be denied.
fn hostile_turn(address: &str, key: &str) -> Result<String> {
    let private = [
        "probe-read /run/devin-bridge-secrets/bridge_api_key",
        "probe-write /run/devin-bridge/cache",
        "probe-write /run/devin-bridge",
        "probe-connect /run/devin-bridge/control.sock",
    ];
    let prompt = format!(
        "[mock:probe]\n{}\nprobe-write /home/bridge/tmp\n",
        private.join("\n")
    );
    let body = serde_json::json!({
        "model": "devin-cli-agentic/swe-1-7",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": prompt}],
    })
    .to_string();
    let (status, body) = http(address, "POST", "/v1/messages", key, &body)?;
    if status != 200 {
        bail!("status {status}: {body}");
    }
    let reply: serde_json::Value = serde_json::from_str(&body)?;
    let text = reply["content"][0]["text"].as_str().unwrap_or_default();
    for probe in private {
        let denied = text
            .lines()
            .any(|line| line.starts_with(probe) && line.contains(": denied"));
        if !denied {
            bail!("{probe} was not denied:\n{text}");
        }
    }
    if !text.contains("probe-write /home/bridge/tmp: allowed") {
        bail!("the probe could not even use its own TMPDIR:\n{text}");
    }
    if !text
        .lines()
        .any(|line| line == format!("Uid: {AGENT_UID} {AGENT_UID} {AGENT_UID} {AGENT_UID}"))
    {
        bail!("the agent did not run as {AGENT_UID}:\n{text}");
    }
    Ok("key file, compile cache, host directory and control socket all denied".into())
}

/// `devin-bridge verify-isolation` inside the bridge container, as `user`.
fn exec_verify(container: &str, user: &str, args: &[&str]) -> Result<String> {
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

/// The pinned Claude Code on this machine, against the containerised bridge.
fn host_claude_code(address: &str, key: &str) -> Result<String> {
    let claude = claude_code::ensure_claude_code()?;
    let work = tempdir("host-claude")?;
    let project = work.join("project");
    write_demo_project(&project, None)?;
    let home = work.join("home");
    std::fs::create_dir_all(&home)?;
    let output = Command::new(claude)
        .args([
            "-p",
            DEMO_PROMPT,
            "--allowedTools",
            "Bash,Read,Edit",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .current_dir(&project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://{address}:{BRIDGE_PORT}"),
        )
        .env("ANTHROPIC_API_KEY", key)
        .env("ANTHROPIC_MODEL", "devin-cli-agentic/swe-1-7")
        .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", "devin-cli-agentic/swe-1-7")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(Stdio::null())
        .output()?;
    let result = final_result(&output)?;
    demo_fixed(&project)?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(format!("math.js fixed, npm test passes; result: {result}"))
}

/// The offline twin of `launch`: Claude Code in its own container, proxy = deny-all guard.
fn claude_container(compose: &Compose, dirs: &SandboxDirs) -> Result<String> {
    let output = compose
        .command()
        .args([
            "run",
            "--rm",
            "-T",
            "claude",
            "-p",
            DEMO_PROMPT,
            "--allowedTools",
            "Bash,Read,Edit",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .stdin(Stdio::null())
        .output()?;
    let result = final_result(&output)?;
    demo_fixed(&dirs.workspace())?;
    Ok(format!(
        "math.js fixed inside the Claude container; result: {result}"
    ))
}

/// The `result` event of a `stream-json` run; fails unless it is a success.
pub fn final_result(output: &Output) -> Result<String> {
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
pub fn claude_audit_has_no_allow(path: &Path, require_denials: bool) -> Result<String> {
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

/// A turn whose agent starts a grandchild (`mock-devin --grandchild-sleep 300`) and hangs; the client hangs up, and
/// the host (uid 10001) must kill the agent's whole process group (uid 10002): CAP_KILL at work.
fn hangup_kills_agent_group(address: &str, key: &str, bridge: &str) -> Result<String> {
    let body = serde_json::json!({
        "model": "devin-cli-agentic/swe-1-7",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "[mock:grandchild]"}],
    })
    .to_string();
    let mut stream = TcpStream::connect_timeout(
        &format!("{address}:{BRIDGE_PORT}").parse()?,
        Duration::from_secs(5),
    )?;
    write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nHost: bridge\r\nx-api-key: {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let grandchild = |list: &[(u32, u32, String)]| {
        list.iter()
            .any(|(uid, _, args)| *uid == AGENT_UID && args.contains("--grandchild-sleep"))
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while !grandchild(&processes(bridge)?) {
        if Instant::now() > deadline {
            bail!("the agent's grandchild never started");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(stream);
    let hung_up = Instant::now();
    while grandchild(&processes(bridge)?) {
        if hung_up.elapsed() > Duration::from_secs(15) {
            bail!("the agent's grandchild outlived the client's hang-up by 15 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(format!(
        "agent and grandchild (uid {AGENT_UID}) gone {} ms after the hang-up",
        hung_up.elapsed().as_millis()
    ))
}

/// After the turns: at most the prewarmed agent is alive, and nothing else of the agent's uid.
fn agents_settled(bridge: &str) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let agents: Vec<_> = processes(bridge)?
            .into_iter()
            .filter(|(uid, _, _)| *uid == AGENT_UID)
            .collect();
        let stray = agents
            .iter()
            .any(|(_, _, args)| !args.contains("mock-devin acp"));
        if agents.len() <= 1 && !stray {
            return Ok(format!(
                "{} agent process(es) of uid {AGENT_UID}: the prewarmed one",
                agents.len()
            ));
        }
        if Instant::now() > deadline {
            bail!("agent processes still alive: {agents:?}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn tempdir(name: &str) -> Result<PathBuf> {
    let dir = workspace_root()
        .join("target")
        .join("container-tests")
        .join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The Devin-side guard's audit after a live run: at least one allowed connection, and every
/// allowed one to a Devin host.
pub fn devin_audit_allows_only_devin(path: &Path) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut allowed = 0;
    for line in text.lines() {
        let entry: serde_json::Value = serde_json::from_str(line)?;
        if entry["decision"] == "allow" {
            let host = entry["host"]
                .as_str()
                .unwrap_or_default()
                .to_ascii_lowercase();
            if host != "devin.ai" && !host.ends_with(".devin.ai") {
                bail!("the Devin-side guard allowed {host}");
            }
            allowed += 1;
        }
    }
    if allowed == 0 {
        bail!("the Devin-side guard allowed nothing: the live run did not reach Devin through it");
    }
    Ok(())
}

/// The names of the tools Claude Code ran (`tool_use` blocks of assistant events).
pub fn tools_used(output: &Output) -> Result<Vec<String>> {
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
