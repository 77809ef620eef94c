//! One compose project of docker/compose.yml and what the host side needs around it: the
//! mounted directories under `.sandbox/container/` (key, workspace, audits), HTTP to the
//! bridge on the internal network, and the containers' processes as the host sees them.
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

use crate::image::HOST_UID;
use crate::workspace::workspace_root;

/// The compose project of the tests (the operator's flow uses `devin-bridge`).
pub(crate) const TEST_PROJECT: &str = "devin-bridge-test";
pub(crate) const OPERATOR_PROJECT: &str = "devin-bridge";
pub(crate) const BRIDGE_PORT: u16 = 20128;
/// How every non-interactive Claude Code run here is made: client-owned tools only, and the
/// structured event stream to check instead of its prose.
pub(crate) const CLAUDE_PRINT_FLAGS: [&str; 5] = [
    "--allowedTools",
    "Bash,Read,Edit",
    "--output-format",
    "stream-json",
    "--verbose",
];
pub(crate) const DEMO_PROMPT: &str = "Fix the failing test in this project.";

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
pub(crate) struct Compose {
    program: Vec<String>,
    project: String,
    profile: String,
    key: String,
}

impl Compose {
    /// The test project (`devin-bridge-test`), offline profile.
    pub(crate) fn test(key: String) -> Result<Self> {
        Self::test_profile("offline", key)
    }

    /// The test project in `profile`.
    pub(crate) fn test_profile(profile: &str, key: String) -> Result<Self> {
        Ok(Self {
            program: compose_program()?,
            project: TEST_PROJECT.into(),
            profile: profile.into(),
            key,
        })
    }

    /// The operator's project (`devin-bridge`) in `profile`.
    pub(crate) fn operator(profile: &str, key: String) -> Result<Self> {
        Ok(Self {
            program: compose_program()?,
            project: OPERATOR_PROJECT.into(),
            profile: profile.into(),
            key,
        })
    }

    /// Claude Code's container, once, in print mode with `prompt` (stream-json events out).
    pub(crate) fn run_claude_print(&self, prompt: &str) -> Result<Output> {
        Ok(self
            .command()
            .args(["run", "--rm", "-T", "claude", "-p", prompt])
            .args(CLAUDE_PRINT_FLAGS)
            .stdin(Stdio::null())
            .output()?)
    }

    /// The compose project's name.
    pub(crate) fn project(&self) -> &str {
        &self.project
    }

    /// The bridge's local key that this project's clients present.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    pub(crate) fn command(&self) -> Command {
        let mut command = Command::new(&self.program[0]);
        command
            .args(&self.program[1..])
            .arg("-f")
            .arg(workspace_root().join("docker/compose.yml"))
            .args(["-p", &self.project, "--profile", &self.profile])
            .env("BRIDGE_API_KEY", &self.key);
        command
    }

    pub(crate) fn run(&self, args: &[&str]) -> Result<Output> {
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

    pub(crate) fn container(&self, service: &str) -> Result<String> {
        let output = self.run(&["ps", "-q", service])?;
        let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if id.is_empty() {
            bail!("service {service} has no container");
        }
        Ok(id)
    }

    /// The containers of this project, running or not.
    pub(crate) fn leftovers(&self) -> Result<Vec<String>> {
        let output = Command::new("docker")
            .args(["ps", "-aq", "--filter"])
            .arg(format!("label=com.docker.compose.project={}", self.project))
            .output()?;
        Ok(String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect())
    }

    pub(crate) fn down(&self) -> Result<()> {
        self.run(&["down", "-v", "--remove-orphans", "-t", "5"])
            .map(drop)
    }

    /// Stops and removes this project's containers and networks; with `volumes`, its named
    /// volumes too (the Devin login in `devin-auth`), which are kept otherwise.
    pub(crate) fn clean(&self, volumes: bool) -> Result<()> {
        let mut args = vec!["down", "--remove-orphans", "-t", "5"];
        if volumes {
            args.push("-v");
        }
        self.run(&args).map(drop)
    }

    /// The networks of this project that exist.
    pub(crate) fn networks(&self) -> Result<Vec<String>> {
        self.docker_names(&["network", "ls", "--format", "{{.Name}}", "--filter"])
    }

    /// The named volumes of this project that exist.
    pub(crate) fn volumes(&self) -> Result<Vec<String>> {
        self.docker_names(&["volume", "ls", "--format", "{{.Name}}", "--filter"])
    }

    /// The login volume's name in this project (`<project>_devin-auth`).
    pub(crate) fn auth_volume(&self) -> String {
        format!("{}_devin-auth", self.project)
    }

    fn docker_names(&self, args: &[&str]) -> Result<Vec<String>> {
        let output = Command::new("docker")
            .args(args)
            .arg(format!("label=com.docker.compose.project={}", self.project))
            .output()?;
        if !output.status.success() {
            bail!(
                "docker {args:?} failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect())
    }
}

/// The host directories the compose file mounts, under `.sandbox/container/`.
pub(crate) struct SandboxDirs {
    root: PathBuf,
}

pub(crate) fn sandbox_root() -> PathBuf {
    workspace_root().join(".sandbox").join("container")
}

/// The local key of the operator's bridge: kept across launches, made once.
pub(crate) fn existing_or_new_key() -> Result<String> {
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
    pub(crate) fn prepare() -> Result<(Self, String)> {
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
    pub(crate) fn ensure() -> Result<Self> {
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
    pub(crate) fn write_key(&self, key: &str) -> Result<()> {
        let key_file = self.root.join("secrets/bridge_api_key");
        std::fs::write(&key_file, format!("{key}\n"))?;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600))?;
        chown(&key_file, Some(HOST_UID), Some(HOST_UID))?;
        Ok(())
    }

    pub(crate) fn workspace(&self) -> PathBuf {
        self.root.join("workspace")
    }

    pub(crate) fn claude_audit(&self) -> PathBuf {
        self.root.join("claude-audit/claude-egress.jsonl")
    }

    pub(crate) fn devin_audit(&self) -> PathBuf {
        self.root.join("devin-audit/egress.jsonl")
    }
}

pub(crate) fn random_key() -> Result<String> {
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// The small project whose failing test the offline agent leads Claude Code to fix.
pub(crate) fn write_demo_project(dir: &Path, owner: Option<u32>) -> Result<()> {
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
pub(crate) fn demo_fixed(dir: &Path) -> Result<()> {
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
pub(crate) fn internal_address(compose: &Compose, container: &str) -> Result<String> {
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
pub(crate) fn http(
    address: &str,
    method: &str,
    path: &str,
    key: &str,
    body: &str,
) -> Result<(u16, String)> {
    http_with(address, method, path, key, &[], body)
}

/// [`http`] with extra request headers.
pub(crate) fn http_with(
    address: &str,
    method: &str,
    path: &str,
    key: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<(u16, String)> {
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let mut stream = TcpStream::connect_timeout(
        &format!("{address}:{BRIDGE_PORT}").parse()?,
        Duration::from_secs(5),
    )?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: bridge\r\nConnection: close\r\nx-api-key: {key}\r\n\
         {extra}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
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

pub(crate) fn wait_healthy(address: &str, key: &str) -> Result<serde_json::Value> {
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
pub(crate) fn processes(container: &str) -> Result<Vec<(u32, u32, String)>> {
    let output = Command::new("docker")
        .args(["top", container, "-eo", "uid,pid,args"])
        .output()?;
    if !output.status.success() {
        bail!(
            "docker top {container} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
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
