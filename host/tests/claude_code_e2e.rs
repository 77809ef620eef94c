//! End-to-end with the real Claude Code CLI.
//!
//! The real `devin-bridge serve` binary runs a copy of `policies/offline.toml` (absolute paths,
//! a temporary sandbox home, a local key) with the offline agent `mock-devin`; `claude -p` runs
//! in a temporary project whose test fails. The agent's default script leads Claude Code through
//! Bash `pwd`, Read `math.js`, Edit and Bash `npm test`. The test checks that Claude Code ran
//! every tool itself (its stream-json events, the file on disk, `npm test`), that the agent only
//! ever answered with envelopes (its `MOCK_DEVIN_LOG`), and that SIGTERM stops the bridge
//! cleanly with no agent process left behind.
//!
//! Needs node and npm, and the Claude Code executable in `DEVIN_BRIDGE_CLAUDE_CODE`:
//! `cargo xtask test` installs the pinned version into `target/claude-code/` and sets it.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use common::bridge::{mock_devin, processes_in};

/// The model every request names: a catalog id (`policies/models.json`).
const MODEL: &str = "devin-cli-agentic/swe-1-7";
const PROMPT: &str = "Fix the failing test in this project.";
/// Claude Code's whole session (normally about two seconds).
const CLAUDE_TIMEOUT: Duration = Duration::from_secs(240);
const BRIDGE_START_TIMEOUT: Duration = Duration::from_secs(120);
/// More than the policy's shutdown grace (30 s), which only matters for turns still running.
const BRIDGE_STOP_TIMEOUT: Duration = Duration::from_secs(45);
const NPM_TEST_TIMEOUT: Duration = Duration::from_secs(60);

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

#[test]
fn claude_code_fixes_the_project_through_the_bridge() {
    let node = on_path("node").unwrap_or_else(|| panic!("{}", missing_node("node")));
    let npm = on_path("npm").unwrap_or_else(|| panic!("{}", missing_node("npm")));
    let claude = claude_code();
    eprintln!("node {}, npm {}", node.display(), npm.display());
    eprintln!("claude {} ({})", claude.display(), claude_version(&claude));

    let dir = tempfile::tempdir().expect("tempdir");
    // Canonical, so that the working directories of processes compare equal to its paths.
    let root = dir.path().canonicalize().expect("canonical tempdir");
    let home = root.join(".sandbox").join("home");
    let project = root.join("project");
    let agent_log = root.join("mock-devin.jsonl");
    for path in [&project, &root.join("claude-home"), &root.join("tmp")] {
        std::fs::create_dir_all(path).expect("create dir");
    }
    std::fs::write(project.join("math.js"), MATH_JS).expect("math.js");
    std::fs::write(project.join("math.test.js"), MATH_TEST_JS).expect("math.test.js");
    std::fs::write(project.join("package.json"), PACKAGE_JSON).expect("package.json");
    let key = format!("e2e-local-key-{}", std::process::id());
    let key_file = root.join("bridge.key");
    std::fs::write(&key_file, &key).expect("key file");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");

    // The project's test really fails before Claude Code touches it.
    let (status, output) = npm_test(&npm, &project, &root);
    assert!(
        !status.success(),
        "npm test passed before the fix:\n{output}"
    );

    let policy = write_policy(&root, &home, &key_file);
    let mut bridge = Bridge::start(&policy, &root, &home, &agent_log);
    eprintln!("bridge listening on {}", bridge.addr);

    let started = Instant::now();
    let run = run_claude(&claude, &project, &root, &bridge.addr, &key);
    eprintln!(
        "claude finished in {:.1} s with {} ({} events)",
        started.elapsed().as_secs_f64(),
        run.status,
        run.events.len()
    );
    {
        let context = || run.context(&bridge.tail());
        assert!(run.status.success(), "claude failed\n{}", context());
        let turns = check_the_client_ran_the_tools(&run, &project, &context);
        check_the_agent_only_answered(&agent_log, turns, &context);
    }

    // The file on disk, and the project's test run by this test.
    let fixed = std::fs::read_to_string(project.join("math.js")).expect("math.js");
    assert!(
        fixed.contains("return a + b;") && !fixed.contains("a - b"),
        "math.js was not fixed:\n{fixed}"
    );
    let (status, output) = npm_test(&npm, &project, &root);
    assert!(status.success(), "npm test fails after the fix:\n{output}");

    // SIGTERM: the bridge exits 0 and leaves no agent behind. Its prewarmed agent shows first
    // that the count can see agents at all.
    assert!(
        bridge.wait_for_agents(Duration::from_secs(30)),
        "no prewarmed agent in {}\n{}",
        home.display(),
        bridge.tail()
    );
    let status = bridge.stop();
    assert_eq!(
        status.code(),
        Some(0),
        "bridge exit after SIGTERM: {status}\n{}",
        bridge.tail()
    );
    assert_eq!(
        processes_in(&home),
        0,
        "processes left in the sandbox home after the bridge stopped\n{}",
        bridge.tail()
    );
}

/// The stream-json events: assistant tool_use for Bash, Read, Edit and Bash in that order, a
/// user tool_result from Claude Code for each, and a successful result. Returns the number of
/// model answers (agent turns) the session needed.
fn check_the_client_ran_the_tools(
    run: &ClaudeRun,
    project: &Path,
    context: &dyn Fn() -> String,
) -> usize {
    let uses = run.tool_uses();
    let names: Vec<&str> = uses.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["Bash", "Read", "Edit", "Bash"], "{}", context());
    let math = project.join("math.js").display().to_string();
    let inputs = [
        ("command", "pwd"),
        ("file_path", math.as_str()),
        ("file_path", math.as_str()),
        ("command", "npm test"),
    ];
    for (tool_use, (field, value)) in uses.iter().zip(inputs) {
        assert_eq!(tool_use.input[field], value, "{}", context());
    }
    assert_eq!(
        uses[2].input["old_string"],
        "return a - b;",
        "{}",
        context()
    );
    assert_eq!(
        uses[2].input["new_string"],
        "return a + b;",
        "{}",
        context()
    );

    let results: Vec<ToolResult> = uses
        .iter()
        .map(|tool_use| {
            run.tool_result(tool_use).unwrap_or_else(|| {
                panic!(
                    "no tool_result for {} {}\n{}",
                    tool_use.name,
                    tool_use.id,
                    context()
                )
            })
        })
        .collect();
    for (tool_use, result) in uses.iter().zip(&results) {
        assert!(
            !result.is_error,
            "{} failed in Claude Code: {}\n{}",
            tool_use.name,
            result.text,
            context()
        );
    }
    // `pwd` ran in Claude Code's working directory (the project), not in the agent's (the
    // sandbox home); Read saw the bug; the last `npm test` passed.
    assert_eq!(
        results[0].text.trim(),
        project.display().to_string(),
        "{}",
        context()
    );
    assert!(results[1].text.contains("return a - b;"), "{}", context());
    assert!(
        results[3].text.contains("all tests passed") && !results[3].text.contains("not ok"),
        "{}",
        context()
    );

    let result = run
        .result()
        .unwrap_or_else(|| panic!("no result event\n{}", context()));
    assert_eq!(result["subtype"], "success", "{}", context());
    assert_eq!(result["is_error"], false, "{}", context());
    assert!(
        result["result"]
            .as_str()
            .is_some_and(|text| text.contains("npm test passes")),
        "{}",
        context()
    );
    uses.len() + 1
}

/// `MOCK_DEVIN_LOG`: the agent answered `turns` prompts of the default script with the four
/// envelopes and a final text, needed no repair, and never ran or asked to run anything itself.
fn check_the_agent_only_answered(log: &Path, turns: usize, context: &dyn Fn() -> String) {
    let agent = agent_events(log);
    let of = |name: &str| -> Vec<&Value> {
        agent
            .iter()
            .filter(|event| event["event"] == name)
            .collect()
    };
    for forbidden in [
        "tool_call",
        "agent_request",
        "permission_answer",
        "grandchild",
        "hang",
    ] {
        assert!(
            of(forbidden).is_empty(),
            "the agent logged {forbidden}\n{}",
            context()
        );
    }
    let field = |events: Vec<&Value>, name: &str| -> Vec<String> {
        events
            .iter()
            .map(|event| event[name].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(
        field(of("tool_envelope"), "name"),
        ["Bash", "Read", "Edit", "Bash"],
        "{}",
        context()
    );
    assert_eq!(
        field(of("reply"), "kind"),
        ["tool", "tool", "tool", "tool", "text"],
        "{}",
        context()
    );
    let prompts = of("prompt");
    assert_eq!(prompts.len(), turns, "{}", context());
    assert!(
        prompts
            .iter()
            .all(|p| p["repair"] == false && p["scenario"] == "script"),
        "{}",
        context()
    );
}

fn missing_node(tool: &str) -> String {
    format!(
        "{tool} is not on PATH: the Claude Code end-to-end test needs node and npm \
         (install Node.js; .ci/run installs it in CI)"
    )
}

/// An executable named `name` on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
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
fn claude_code() -> PathBuf {
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

fn claude_version(claude: &Path) -> String {
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
fn write_policy(root: &Path, home: &Path, key_file: &Path) -> PathBuf {
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
        let wasm = common::components_dir().join(format!("{name}.wasm"));
        let source = toml::Table::from_iter([("path".to_owned(), path(&wasm))]);
        set("components", name, source.into());
    }
    set("server", "require_key", true.into());
    set("server", "api_key_file", path(key_file));
    set("agent", "command", path(&mock_devin()));
    set("agent", "home", path(home));
    set("agent", "pass_env", vec!["MOCK_DEVIN_LOG"].into());
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
struct Bridge {
    child: Option<Child>,
    addr: String,
    home: PathBuf,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Bridge {
    fn start(policy: &Path, root: &Path, home: &Path, agent_log: &Path) -> Bridge {
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
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn devin-bridge");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (addr_tx, addr_rx) = mpsc::channel();
        {
            let lines = stderr.clone();
            let pipe = child.stderr.take().expect("stderr");
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    eprintln!("bridge: {line}");
                    // `listening on http://127.0.0.1:PORT (mode ...)`
                    if let Some(rest) = line.strip_prefix("listening on http://") {
                        let addr = rest.split_whitespace().next().unwrap_or_default();
                        let _ = addr_tx.send(addr.to_owned());
                    }
                    lines.lock().expect("lines").push(line);
                }
            });
        }
        let mut bridge = Bridge {
            child: Some(child),
            addr: String::new(),
            home: home.to_owned(),
            stderr,
        };
        match addr_rx.recv_timeout(BRIDGE_START_TIMEOUT) {
            Ok(addr) => bridge.addr = addr,
            Err(_) => panic!("the bridge did not start listening\n{}", bridge.tail()),
        }
        bridge
    }

    /// The last lines of the bridge's stderr.
    fn tail(&self) -> String {
        let lines = self.stderr.lock().expect("lines");
        let start = lines.len().saturating_sub(40);
        format!(
            "--- bridge stderr (tail) ---\n{}",
            lines[start..].join("\n")
        )
    }

    /// Waits for at least one agent process in the sandbox home.
    fn wait_for_agents(&self, limit: Duration) -> bool {
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
    fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running bridge");
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).expect("SIGTERM");
        wait_until(&mut child, Instant::now() + BRIDGE_STOP_TIMEOUT).unwrap_or_else(|| {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the bridge did not exit after SIGTERM\n{}", self.tail())
        })
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits for `child` until `deadline`; `None` when it is still running then.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
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

/// `npm test` in the project, without the network (no update check): (status, output).
fn npm_test(npm: &Path, project: &Path, root: &Path) -> (ExitStatus, String) {
    let mut child = Command::new(npm)
        .arg("test")
        .current_dir(project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root.join("claude-home"))
        .env("npm_config_update_notifier", "false")
        .env("NO_UPDATE_NOTIFIER", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn npm test");
    let stdout = reader(child.stdout.take());
    let stderr = reader(child.stderr.take());
    let status = wait_until(&mut child, Instant::now() + NPM_TEST_TIMEOUT).unwrap_or_else(|| {
        let _ = child.kill();
        panic!("npm test did not finish within {NPM_TEST_TIMEOUT:?}")
    });
    let output = format!(
        "{}{}",
        stdout.join().expect("stdout"),
        stderr.join().expect("stderr")
    );
    (status, output)
}

fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}

/// A Claude Code run: its exit status, its stream-json events and its stderr.
struct ClaudeRun {
    status: ExitStatus,
    events: Vec<Value>,
    stdout: String,
    stderr: String,
}

struct ToolUse {
    /// Position of the assistant event in the stream.
    at: usize,
    id: String,
    name: String,
    input: Value,
}

struct ToolResult {
    is_error: bool,
    text: String,
}

/// `claude -p` in the project, with a private HOME and nothing inherited but PATH.
fn run_claude(claude: &Path, project: &Path, root: &Path, addr: &str, key: &str) -> ClaudeRun {
    let mut command = Command::new(claude);
    command
        .args(["-p", PROMPT])
        .args(["--output-format", "stream-json", "--verbose"])
        .args(["--model", MODEL])
        // Claude Code refuses --dangerously-skip-permissions (and bypassPermissions) as root;
        // allowing exactly the three tools works for every user and never prompts.
        .args(["--allowedTools", "Bash,Read,Edit"])
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

fn tail(text: &str, bytes: usize) -> &str {
    let mut start = text.len().saturating_sub(bytes);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

impl ClaudeRun {
    /// Content blocks of `kind` in the messages of events of `event_type`, with positions.
    fn blocks<'a>(
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

    fn tool_uses(&self) -> Vec<ToolUse> {
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
    fn tool_result(&self, tool_use: &ToolUse) -> Option<ToolResult> {
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

    fn result(&self) -> Option<&Value> {
        self.events
            .iter()
            .rev()
            .find(|event| event["type"] == "result")
    }

    /// Everything needed to understand a failure.
    fn context(&self, bridge: &str) -> String {
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
fn agent_events(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("no agent log at {}: {error}", path.display()));
    text.lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("bad agent log line ({error}): {line}"))
        })
        .collect()
}
