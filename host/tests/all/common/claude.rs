//! Running the real Claude Code CLI and the real `devin-bridge serve` binary as processes:
//! the pinned Claude Code executable, an offline policy, the served bridge, `claude -p` with an
//! allowlisted environment, and its stream-json events.
#![allow(dead_code)]

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use super::bridge::{mock_devin, processes_in};

/// The model every request names: a catalog id (`policies/models.json`).
pub const MODEL: &str = "devin-cli-agentic/swe-1-7";
/// Claude Code's whole session (normally a few seconds).
pub const CLAUDE_TIMEOUT: Duration = Duration::from_secs(240);
const BRIDGE_START_TIMEOUT: Duration = Duration::from_secs(120);
/// More than the policy's shutdown grace (30 s), which only matters for turns still running.
const BRIDGE_STOP_TIMEOUT: Duration = Duration::from_secs(45);

pub fn missing_node(tool: &str) -> String {
    format!(
        "{tool} is not on PATH: the Claude Code end-to-end test needs node and npm \
         (install Node.js; .ci/run installs it in CI)"
    )
}

/// An executable named `name` on PATH.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// The Claude Code executable: `DEVIN_BRIDGE_CLAUDE_CODE`, else the platform binary that
/// `cargo xtask test` installs under target/claude-code/.
pub fn claude_code() -> PathBuf {
    if let Some(path) = std::env::var_os("DEVIN_BRIDGE_CLAUDE_CODE") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "DEVIN_BRIDGE_CLAUDE_CODE={} is not a file",
            path.display()
        );
        return path;
    }
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/claude-code/node_modules");
    std::fs::read_dir(modules.join("@anthropic-ai"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("claude-code-")
        })
        .map(|entry| entry.path().join("claude"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "Claude Code is not installed: run `cargo xtask test`, which installs the pinned \
                 version with npm into target/claude-code/ and sets DEVIN_BRIDGE_CLAUDE_CODE \
                 (node and npm needed)"
            )
        })
}

pub fn claude_version(claude: &Path) -> String {
    Command::new(claude)
        .arg("--version")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(Stdio::null())
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", claude.display()))
}

/// `policies/offline.toml` with what a test needs changed: absolute paths for the components,
/// the agent and the catalog, a temporary sandbox home, a private control socket, the shared
/// compile cache of the tests, a local key, and `MOCK_DEVIN_LOG` passed to the agent.
pub fn offline_policy(root: &Path, home: &Path, key_file: &Path) -> PathBuf {
    offline_policy_with(root, home, key_file, &[])
}

/// [`offline_policy`] with `[agent]` settings changed as well (name, TOML string value).
pub fn offline_policy_with(
    root: &Path,
    home: &Path,
    key_file: &Path,
    agent: &[(&str, &str)],
) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let offline =
        std::fs::read_to_string(repo.join("policies/offline.toml")).expect("offline.toml");
    let mut policy: toml::Table = offline.parse().expect("offline.toml is TOML");
    let path = |path: &Path| toml::Value::String(path.display().to_string());
    let mut set = |table: &str, key: &str, value: toml::Value| {
        policy
            .entry(table)
            .or_insert_with(|| toml::Table::new().into())
            .as_table_mut()
            .unwrap_or_else(|| panic!("[{table}] is a table"))
            .insert(key.into(), value);
    };
    for name in ["serializer", "envelope", "sse", "model-alias"] {
        let wasm = super::components_dir().join(format!("{name}.wasm"));
        let source = toml::Table::from_iter([("path".to_owned(), path(&wasm))]);
        set("components", name, source.into());
    }
    set("server", "require_key", true.into());
    set("server", "api_key_file", path(key_file));
    set("agent", "command", path(&mock_devin()));
    set("agent", "home", path(home));
    set(
        "agent",
        "pass_env",
        vec!["MOCK_DEVIN_LOG", "MOCK_DEVIN_IMAGES", "MOCK_DEVIN_SCENARIO"].into(),
    );
    for (key, value) in agent {
        set("agent", key, toml::Value::String((*value).to_owned()));
    }
    set(
        "models",
        "catalog",
        path(&repo.join("policies/models.json")),
    );
    set("control", "socket", path(&root.join("run/control.sock")));
    set(
        "engine",
        "cache_dir",
        path(&repo.join("target/test-compile-cache")),
    );
    let file = root.join("policy.toml");
    std::fs::write(&file, toml::to_string(&policy).expect("policy TOML")).expect("write policy");
    file
}

/// The spawned `devin-bridge serve`, killed if the test fails before it stops it.
pub struct ServedBridge {
    child: Option<Child>,
    pub addr: String,
    home: PathBuf,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl ServedBridge {
    pub fn start(policy: &Path, root: &Path, home: &Path, agent_log: &Path) -> ServedBridge {
        Self::start_with_env(policy, root, home, agent_log, &[])
    }

    /// [`ServedBridge::start`] with more environment for the bridge (which passes to the
    /// agent only what the policy's `pass_env` names).
    pub fn start_with_env(
        policy: &Path,
        root: &Path,
        home: &Path,
        agent_log: &Path,
        env: &[(&str, &str)],
    ) -> ServedBridge {
        let bridge_home = root.join("bridge-home");
        std::fs::create_dir_all(&bridge_home).expect("bridge home");
        let mut child = Command::new(env!("CARGO_BIN_EXE_devin-bridge"))
            .args(["serve", "--listen", "127.0.0.1:0", "--policy"])
            .arg(policy)
            // Nothing inherited (DEVIN_BIN, BRIDGE_API_KEY, ...): the policy says it all.
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &bridge_home)
            .env("LANG", "C.UTF-8")
            .env("NO_COLOR", "1")
            .env("DEVIN_BRIDGE_LOG", "info")
            .env("MOCK_DEVIN_LOG", agent_log)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn devin-bridge");
        let (stderr, addr_rx) = super::follow_bridge_stderr(child.stderr.take().expect("stderr"));
        let mut bridge = ServedBridge {
            child: Some(child),
            addr: String::new(),
            home: home.to_owned(),
            stderr,
        };
        match addr_rx.recv_timeout(BRIDGE_START_TIMEOUT) {
            Ok(Some(addr)) => bridge.addr = addr,
            _ => panic!("the bridge did not start listening\n{}", bridge.tail()),
        }
        bridge
    }

    /// The last lines of the bridge's stderr.
    pub fn tail(&self) -> String {
        let lines = self.stderr.lock().expect("lines");
        let start = lines.len().saturating_sub(40);
        format!(
            "--- bridge stderr (tail) ---\n{}",
            lines[start..].join("\n")
        )
    }

    /// Waits for at least one agent process in the sandbox home.
    pub fn wait_for_agents(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if processes_in(&self.home) > 0 {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// SIGTERM, then waits for the exit.
    pub fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running bridge");
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).expect("SIGTERM");
        wait_until(&mut child, Instant::now() + BRIDGE_STOP_TIMEOUT).unwrap_or_else(|| {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the bridge did not exit after SIGTERM\n{}", self.tail())
        })
    }
}

impl Drop for ServedBridge {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits for `child` until `deadline`; `None` when it is still running then.
pub fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}

/// A Claude Code run: its exit status, its stream-json events and its stderr.
pub struct ClaudeRun {
    pub status: ExitStatus,
    pub events: Vec<Value>,
    pub stdout: String,
    pub stderr: String,
}

pub struct ToolUse {
    /// Position of the assistant event in the stream.
    pub at: usize,
    pub id: String,
    pub name: String,
    pub input: Value,
}

pub struct ToolResult {
    pub is_error: bool,
    pub text: String,
}

/// What one `claude -p` run asks for.
pub struct ClaudeInvocation<'a> {
    pub prompt: &'a str,
    /// `--allowedTools`.
    pub allowed_tools: &'a str,
    /// Arguments added after the standard ones (for example `--plugin-dir DIR`).
    pub extra_args: Vec<std::ffi::OsString>,
    /// Environment added to the allowlisted one.
    pub extra_env: Vec<(&'a str, std::ffi::OsString)>,
}

/// `claude -p` in the project, with a private HOME and nothing inherited but PATH (and what
/// `invocation.extra_env` adds).
pub fn run_claude(
    claude: &Path,
    project: &Path,
    root: &Path,
    addr: &str,
    key: &str,
    invocation: &ClaudeInvocation<'_>,
) -> ClaudeRun {
    let mut command = Command::new(claude);
    command
        .args(["-p", invocation.prompt])
        .args(["--output-format", "stream-json", "--verbose"])
        .args(["--model", MODEL])
        // Claude Code refuses --dangerously-skip-permissions (and bypassPermissions) as root;
        // allowing exactly the three tools works for every user and never prompts.
        .args(["--allowedTools", invocation.allowed_tools])
        .args(&invocation.extra_args)
        .current_dir(project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root.join("claude-home"))
        .env("TMPDIR", root.join("tmp"))
        .env("LANG", "C.UTF-8")
        .env("ANTHROPIC_BASE_URL", format!("http://{addr}"))
        .env("ANTHROPIC_API_KEY", key)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        // The Bash tool's `npm test` must not ask the registry for updates either.
        .env("npm_config_update_notifier", "false")
        .env("NO_UPDATE_NOTIFIER", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that the tools' shells go with it.
        .process_group(0);
    // Every model Claude Code might pick for any purpose is a catalog model.
    for name in [
        "ANTHROPIC_MODEL",
        "ANTHROPIC_DEFAULT_OPUS_MODEL",
        "ANTHROPIC_DEFAULT_SONNET_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL",
        "ANTHROPIC_DEFAULT_FABLE_MODEL",
        "ANTHROPIC_SMALL_FAST_MODEL",
        "CLAUDE_CODE_SUBAGENT_MODEL",
    ] {
        command.env(name, MODEL);
    }
    for (name, value) in &invocation.extra_env {
        command.env(name, value);
    }
    if let Some(bash) = on_path("bash") {
        command.env("SHELL", bash);
    }
    let mut child = command.spawn().expect("spawn claude");
    let group = Pid::from_raw(child.id() as i32);
    let stdout = reader(child.stdout.take());
    let stderr = reader(child.stderr.take());
    let status = wait_until(&mut child, Instant::now() + CLAUDE_TIMEOUT);
    // Whatever it leaves running goes too (and the readers see the end of their pipes).
    let _ = kill(Pid::from_raw(-group.as_raw()), Signal::SIGKILL);
    let _ = child.wait();
    let stdout = stdout.join().expect("stdout");
    let stderr = stderr.join().expect("stderr");
    let Some(status) = status else {
        panic!(
            "claude did not finish within {CLAUDE_TIMEOUT:?}\n--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}",
            tail(&stdout, 4000),
            tail(&stderr, 4000)
        )
    };
    let events = stdout
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|error| {
                panic!("claude printed a line that is not JSON ({error}): {line}")
            })
        })
        .collect();
    ClaudeRun {
        status,
        events,
        stdout,
        stderr,
    }
}

pub fn tail(text: &str, bytes: usize) -> &str {
    let mut start = text.len().saturating_sub(bytes);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

impl ClaudeRun {
    /// Content blocks of `kind` in the messages of events of `event_type`, with positions.
    pub fn blocks<'a>(
        &'a self,
        event_type: &'a str,
        kind: &'a str,
    ) -> impl Iterator<Item = (usize, &'a Value)> + 'a {
        self.events
            .iter()
            .enumerate()
            .filter(move |(_, event)| event["type"] == event_type)
            .flat_map(|(at, event)| {
                event["message"]["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(move |block| (at, block))
            })
            .filter(move |(_, block)| block["type"] == kind)
    }

    pub fn tool_uses(&self) -> Vec<ToolUse> {
        self.blocks("assistant", "tool_use")
            .map(|(at, block)| ToolUse {
                at,
                id: block["id"].as_str().unwrap_or_default().to_owned(),
                name: block["name"].as_str().unwrap_or_default().to_owned(),
                input: block["input"].clone(),
            })
            .collect()
    }

    /// The tool_result in a user event after the tool_use that answers it.
    pub fn tool_result(&self, tool_use: &ToolUse) -> Option<ToolResult> {
        self.blocks("user", "tool_result")
            .find(|(at, block)| *at > tool_use.at && block["tool_use_id"] == tool_use.id.as_str())
            .map(|(_, block)| ToolResult {
                is_error: block["is_error"] == true,
                text: match &block["content"] {
                    Value::String(text) => text.clone(),
                    Value::Array(parts) => parts
                        .iter()
                        .filter_map(|part| part["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    other => other.to_string(),
                },
            })
    }

    pub fn result(&self) -> Option<&Value> {
        self.events
            .iter()
            .rev()
            .find(|event| event["type"] == "result")
    }

    /// Everything needed to understand a failure.
    pub fn context(&self, bridge: &str) -> String {
        let result = self
            .result()
            .map_or(Value::Null, |result| result["result"].clone());
        format!(
            "--- claude exit: {}, result: {result} ---\n--- claude stdout (tail) ---\n{}\n--- claude stderr (tail) ---\n{}\n{bridge}",
            self.status,
            tail(&self.stdout, 6000),
            tail(&self.stderr, 3000)
        )
    }
}

/// The lines of `MOCK_DEVIN_LOG`.
pub fn agent_events(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("no agent log at {}: {error}", path.display()));
    text.lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("bad agent log line ({error}): {line}"))
        })
        .collect()
}
