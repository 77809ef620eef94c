//! Running the real Claude Code CLI and the real `devin-bridge serve` binary as processes:
//! the pinned Claude Code executable, an offline policy, the served bridge (which the soak
//! benchmark runs too), `claude -p` with an allowlisted environment, and its stream-json events.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use devin_bridge_agent::process::group::kill_group;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

pub use crate::artifacts::claude_code;
use crate::artifacts::{devin_bridge, mock_devin, workspace_root};
use crate::bridge::processes_in;
use crate::policies::OfflinePolicy;

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
    offline_policy_with_server(root, home, key_file, agent, &[])
}

/// [`offline_policy_with`] with boolean `[server]` settings changed as well (name, value).
pub fn offline_policy_with_server(
    root: &Path,
    home: &Path,
    key_file: &Path,
    agent: &[(&str, &str)],
    server: &[(&str, bool)],
) -> PathBuf {
    let repo = workspace_root();
    let path = OfflinePolicy::path;
    let mut policy = OfflinePolicy::load().expect("offline.toml");
    policy
        .components(&crate::artifacts::components_dir())
        .set("server", "require_key", true)
        .set("server", "api_key_file", path(key_file))
        .set("agent", "command", path(&mock_devin()))
        .set("agent", "home", path(home))
        .set(
            "agent",
            "pass_env",
            vec!["MOCK_DEVIN_LOG", "MOCK_DEVIN_IMAGES", "MOCK_DEVIN_SCENARIO"],
        );
    for (key, value) in agent {
        policy.set("agent", key, *value);
    }
    for (key, value) in server {
        policy.set("server", key, *value);
    }
    policy
        .set(
            "models",
            "catalog",
            path(&repo.join("policies/models.json")),
        )
        .set("control", "socket", path(&root.join("run/control.sock")))
        .set(
            "engine",
            "cache_dir",
            path(&crate::engine::test_cache_dir()),
        );
    let file = root.join("policy.toml");
    policy.write(&file).expect("write policy");
    file
}

/// The address of a `listening on http://ADDR (mode ...)` line of the bridge's log.
pub fn listening_addr(line: &str) -> Option<&str> {
    line.strip_prefix("listening on http://")
        .map(|rest| rest.split_whitespace().next().unwrap_or_default())
}

/// Where a served bridge's stderr (its log) goes.
pub enum Stderr {
    /// Followed on a thread of this process: echoed as `bridge: LINE` and kept for
    /// [`ServedBridge::tail`].
    Follow,
    /// Written by the bridge itself into this file, which nothing reads while it runs (so a
    /// benchmark measures no log reader of its own).
    File(PathBuf),
}

/// How to start a `devin-bridge serve`.
pub struct Launch {
    pub binary: PathBuf,
    pub policy: PathBuf,
    /// The bridge's HOME.
    pub home: PathBuf,
    /// The agents' sandbox home ([`ServedBridge::wait_for_agents`] looks there).
    pub agent_home: PathBuf,
    /// Its environment besides PATH, HOME, LANG and NO_COLOR (nothing else is inherited).
    pub env: Vec<(String, std::ffi::OsString)>,
    pub stderr: Stderr,
    /// How long its first start may take to listen (it compiles the components when the
    /// compile cache does not have them).
    pub start_timeout: Duration,
}

/// Where [`ServedBridge::tail`] reads the log.
enum Log {
    Lines(Arc<Mutex<Vec<String>>>),
    File(PathBuf),
}

/// The spawned `devin-bridge serve`, killed if the test fails before it stops it.
pub struct ServedBridge {
    child: Option<Child>,
    pub addr: String,
    pub pid: u32,
    home: PathBuf,
    log: Log,
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
        let launch = Self::launch_of(policy, root, home, agent_log, env, Stderr::Follow);
        Self::launch(launch).unwrap_or_else(|error| panic!("{error}"))
    }

    /// What [`ServedBridge::start_with_env`] launches, its log going to `stderr`.
    pub fn launch_of(
        policy: &Path,
        root: &Path,
        home: &Path,
        agent_log: &Path,
        env: &[(&str, &str)],
        stderr: Stderr,
    ) -> Launch {
        let mut all: Vec<(String, std::ffi::OsString)> = vec![
            ("DEVIN_BRIDGE_LOG".into(), "info".into()),
            ("MOCK_DEVIN_LOG".into(), agent_log.into()),
        ];
        all.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).into())));
        Launch {
            binary: devin_bridge(),
            policy: policy.to_owned(),
            home: root.join("bridge-home"),
            agent_home: home.to_owned(),
            env: all,
            stderr,
            start_timeout: BRIDGE_START_TIMEOUT,
        }
    }

    /// Starts the bridge and waits until it listens; an error (with the log's tail) when it
    /// exits or does not listen in time.
    pub fn launch(launch: Launch) -> Result<ServedBridge, String> {
        std::fs::create_dir_all(&launch.home)
            .map_err(|e| format!("{}: {e}", launch.home.display()))?;
        let mut command = Command::new(&launch.binary);
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--policy"])
            .arg(&launch.policy)
            // Nothing inherited (DEVIN_BIN, BRIDGE_API_KEY, ...): the policy says it all.
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &launch.home)
            .env("LANG", "C.UTF-8")
            .env("NO_COLOR", "1")
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        match &launch.stderr {
            Stderr::Follow => command.stderr(Stdio::piped()),
            Stderr::File(path) => command.stderr(
                std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?,
            ),
        };
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", launch.binary.display()))?;
        let pid = child.id();
        let (log, addr_rx) = match launch.stderr {
            Stderr::Follow => {
                let pipe = child.stderr.take().expect("stderr");
                let (lines, addr_rx) = follow_bridge_stderr(pipe);
                (Log::Lines(lines), Some(addr_rx))
            }
            Stderr::File(path) => (Log::File(path), None),
        };
        let mut bridge = ServedBridge {
            child: Some(child),
            addr: String::new(),
            pid,
            home: launch.agent_home,
            log,
        };
        let addr = match addr_rx {
            Some(addr_rx) => addr_rx.recv_timeout(launch.start_timeout).ok().flatten(),
            None => bridge.poll_log_for_address(launch.start_timeout),
        };
        match addr {
            Some(addr) => {
                bridge.addr = addr;
                Ok(bridge)
            }
            None => Err(format!(
                "the bridge did not start listening within {:?}\n{}",
                launch.start_timeout,
                bridge.tail()
            )),
        }
    }

    /// Reads the log file until it names the address, the bridge exits or `limit` passes.
    fn poll_log_for_address(&mut self, limit: Duration) -> Option<String> {
        let Log::File(path) = &self.log else {
            return None;
        };
        let deadline = Instant::now() + limit;
        loop {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if let Some(addr) = text.lines().find_map(listening_addr) {
                return Some(addr.to_owned());
            }
            let exited = self
                .child
                .as_mut()
                .is_none_or(|child| child.try_wait().ok().flatten().is_some());
            if exited || Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last lines of the bridge's stderr.
    pub fn tail(&self) -> String {
        let lines: Vec<String> = match &self.log {
            Log::Lines(lines) => lines.lock().expect("lines").clone(),
            Log::File(path) => std::fs::read_to_string(path)
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect(),
        };
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

    /// SIGTERM, then waits up to `limit` for the exit (killing it after that). Returns how it
    /// ended, or why it did not, and how long that took.
    pub fn try_stop(&mut self, limit: Duration) -> (Result<ExitStatus, String>, Duration) {
        let started = Instant::now();
        let Some(mut child) = self.child.take() else {
            return (Err("already stopped".into()), Duration::ZERO);
        };
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        if let Err(error) = kill(pid, Signal::SIGTERM) {
            let _ = child.kill();
            let _ = child.wait();
            return (Err(format!("SIGTERM failed: {error}")), started.elapsed());
        }
        let outcome = wait_until(&mut child, started + limit).ok_or_else(|| {
            let _ = child.kill();
            let _ = child.wait();
            format!("still running {} s after SIGTERM: killed", limit.as_secs())
        });
        (outcome, started.elapsed())
    }

    /// SIGTERM, then waits for the exit.
    pub fn stop(&mut self) -> ExitStatus {
        match self.try_stop(BRIDGE_STOP_TIMEOUT).0 {
            Ok(status) => status,
            Err(error) => panic!("the bridge did not exit: {error}\n{}", self.tail()),
        }
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

/// Follows a `devin-bridge serve` process's stderr on a thread: echoes and keeps every line,
/// and sends the address of its `listening on http://ADDR` line once, or `None` when stderr
/// ends without one (the process exited).
pub fn follow_bridge_stderr(
    pipe: std::process::ChildStderr,
) -> (
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    std::sync::mpsc::Receiver<Option<String>>,
) {
    use std::io::BufRead;
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let kept = lines.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            eprintln!("bridge: {line}");
            if let Some(addr) = listening_addr(&line) {
                let _ = addr_tx.send(Some(addr.to_owned()));
            }
            kept.lock().expect("lines").push(line);
        }
        let _ = addr_tx.send(None);
    });
    (lines, addr_rx)
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

/// What a program run in its own process group left: its status (`None` when it was still
/// running at the deadline), its stdout and its stderr.
pub struct GroupRun {
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command` as the leader of a process group of its own, with its stdout and stderr
/// read, until it exits or `limit` passes; then ends the group with the agent crate's
/// `kill_group` (whatever the program left running, such as Claude Code's tools' shells, or
/// the program itself when it overstayed), reaps it and reads its output to the end.
pub fn run_in_group(command: &mut Command, limit: Duration) -> GroupRun {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn");
    // The child leads its own group (`process_group(0)`): the group's id is its pid.
    let group = Pid::from_raw(i32::try_from(child.id()).expect("a pid fits an i32"));
    let stdout = reader(child.stdout.take());
    let stderr = reader(child.stderr.take());
    let status = wait_until(&mut child, Instant::now() + limit);
    // The readers see the end of their pipes once every member of the group is gone.
    kill_group(group);
    let _ = child.wait();
    GroupRun {
        status,
        stdout: stdout.join().expect("stdout"),
        stderr: stderr.join().expect("stderr"),
    }
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
    /// `--allowedTools` (none when empty: every call then goes through the permission mode).
    pub allowed_tools: &'a str,
    /// Arguments added after the standard ones (for example `--plugin-dir DIR`).
    pub extra_args: Vec<std::ffi::OsString>,
    /// Environment added to the allowlisted one.
    pub extra_env: Vec<(&'a str, std::ffi::OsString)>,
}

/// Every variable by which Claude Code picks a model for some purpose (the main loop, each
/// tier, the small fast model, subagents): a run against the bridge sets each to a catalog
/// model.
pub const MODEL_VARIABLES: [&str; 7] = [
    "ANTHROPIC_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_DEFAULT_FABLE_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL",
];

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
        .stdin(Stdio::null());
    // Every model Claude Code might pick for any purpose is a catalog model.
    for name in MODEL_VARIABLES {
        command.env(name, MODEL);
    }
    for (name, value) in &invocation.extra_env {
        command.env(name, value);
    }
    if let Some(bash) = on_path("bash") {
        command.env("SHELL", bash);
    }
    // Claude Code refuses --dangerously-skip-permissions (and bypassPermissions) as root;
    // allowing exactly the tools a test needs works for every user and never prompts.
    if !invocation.allowed_tools.is_empty() {
        command.args(["--allowedTools", invocation.allowed_tools]);
    }
    // Its own process group, so that the tools' shells go with it.
    let GroupRun {
        status,
        stdout,
        stderr,
    } = run_in_group(&mut command, CLAUDE_TIMEOUT);
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

const MATH_JS: &str = "function add(a, b) { return a - b; }\nmodule.exports = { add };\n";
const MATH_TEST_JS: &str = r#"const assert = require('assert');
const { add } = require('./math');
try {
  assert.strictEqual(add(2, 3), 5);
  console.log('ok 1 - add(2, 3) is 5');
  console.log('all tests passed');
} catch (error) {
  console.log('not ok 1 - add(2, 3) is 5: ' + error.message.split('\n')[0]);
  process.exit(1);
}
"#;
const PACKAGE_JSON: &str = r#"{
  "name": "e2e-project",
  "version": "1.0.0",
  "private": true,
  "scripts": { "test": "node math.test.js" }
}
"#;

/// The demo project in `project`: `math.js` subtracts where it should add, and its test fails.
pub fn write_demo_project(project: &Path) {
    std::fs::write(project.join("math.js"), MATH_JS).expect("math.js");
    std::fs::write(project.join("math.test.js"), MATH_TEST_JS).expect("math.test.js");
    std::fs::write(project.join("package.json"), PACKAGE_JSON).expect("package.json");
}
