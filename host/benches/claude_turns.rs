//! `cargo xtask bench turns`: what Claude Code costs a Devin account. The pinned Claude Code
//! runs tasks against a `devin-bridge serve` with the offline agent, and the table counts the
//! requests it sent by kind (main turns, subagent turns, tool-less side requests, resends:
//! the bridge's `/metrics`) and the agent turns they cost (the offline agent's log: every
//! prompt it got is one Devin turn a real account would pay for).
//!
//! Each task runs twice: `before`, with the bridge's savings off (`[server]
//! local_side_requests = false`, `resend_grace_ms = 0`, `resend_window_ms = 0`: every request
//! is an agent turn, as it was), and `after`, with the defaults. The tasks:
//! - `demo -p`: the end-to-end demo (fix `math.js`) with `claude -p`, with
//!   `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` as `client-env` sets it;
//! - `demo tui`: the same task typed into the interactive Claude Code (in tmux), once with that
//!   variable and once without it (then Claude Code also asks for a session title);
//! - `subagent -p`: a task the agent delegates with Claude Code's `Agent` tool;
//! - `demo -p, slow agent`: every agent takes 4 s to start, longer than Claude Code's request
//!   timeout (`API_TIMEOUT_MS=2500`), so Claude Code gives up on each request and sends it
//!   again.
//!
//! The goal: no agent turn for a request that needs no model, and no turn run twice. Counts
//! are exact, not timings, so one run of each suffices.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failure aborts the run

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use devin_bridge_test_support::bridge::request;
use devin_bridge_test_support::claude::{
    agent_events, claude_code, run_in_group, write_demo_project, GroupRun, ServedBridge, Stderr,
    MODEL,
};
use devin_bridge_test_support::policies::OfflinePolicy;
use devin_bridge_test_support::terminal::{tmux, Terminal};

const DEMO_PROMPT: &str = "Fix the failing test in this project.";
const SUBAGENT_PROMPT: &str = "Survey this project with a subagent. [mock:subagent]";
/// What the offline agent's demo script says when the task is done.
const DEMO_DONE: &str = "npm test passes now";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Bridge {
    Before,
    After,
}

impl Bridge {
    fn name(self) -> &'static str {
        match self {
            Bridge::Before => "before",
            Bridge::After => "after",
        }
    }
}

#[derive(Clone, Copy)]
enum Client {
    Print,
    Terminal,
}

struct Task {
    name: &'static str,
    prompt: &'static str,
    client: Client,
    /// `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`.
    essential_only: bool,
    /// Agents that take longer to start than Claude Code waits for an answer.
    slow_agent: bool,
    /// What the final answer says when the task is done.
    done: &'static str,
    /// `MOCK_DEVIN_SCENARIO`: what the offline agent does when a prompt has no marker.
    scenario: Option<&'static str>,
}

const TASKS: [Task; 5] = [
    Task {
        name: "demo -p",
        prompt: DEMO_PROMPT,
        client: Client::Print,
        essential_only: true,
        slow_agent: false,
        done: DEMO_DONE,
        scenario: None,
    },
    Task {
        name: "demo tui, essential only",
        prompt: DEMO_PROMPT,
        client: Client::Terminal,
        essential_only: true,
        slow_agent: false,
        done: DEMO_DONE,
        scenario: None,
    },
    Task {
        name: "demo tui, all traffic",
        prompt: DEMO_PROMPT,
        client: Client::Terminal,
        essential_only: false,
        slow_agent: false,
        done: DEMO_DONE,
        scenario: None,
    },
    Task {
        name: "subagent -p",
        prompt: SUBAGENT_PROMPT,
        client: Client::Print,
        essential_only: true,
        slow_agent: false,
        done: "the subagent reported: Mock answer",
        // Claude Code hands the subagent's answer back in a later user message, which has
        // no marker of its own.
        scenario: Some("subagent"),
    },
    Task {
        name: "demo -p, slow agent",
        prompt: DEMO_PROMPT,
        client: Client::Print,
        essential_only: true,
        slow_agent: true,
        done: DEMO_DONE,
        scenario: None,
    },
];

/// What one run cost.
#[derive(Default)]
struct Counts {
    main_turns: u64,
    subagent_turns: u64,
    side_requests: u64,
    /// Side requests answered without an agent.
    side_local: u64,
    resends: u64,
    agent_turns: u64,
    done: bool,
    seconds: f64,
}

fn main() {
    let claude = claude_code();
    let tmux = tmux();
    println!("Claude Code {}", claude_version(&claude));
    println!(
        "{:<26} {:<7} {:>5} {:>9} {:>5} {:>6} {:>8} {:>12} {:>5} {:>6}",
        "task",
        "bridge",
        "main",
        "subagent",
        "side",
        "local",
        "resends",
        "agent turns",
        "done",
        "secs"
    );
    let mut results = Vec::new();
    for task in &TASKS {
        for bridge in [Bridge::Before, Bridge::After] {
            let counts = run(&claude, &tmux, task, bridge);
            println!(
                "{:<26} {:<7} {:>5} {:>9} {:>5} {:>6} {:>8} {:>12} {:>5} {:>6.1}",
                task.name,
                bridge.name(),
                counts.main_turns,
                counts.subagent_turns,
                counts.side_requests,
                counts.side_local,
                counts.resends,
                counts.agent_turns,
                if counts.done { "yes" } else { "NO" },
                counts.seconds
            );
            results.push((task, bridge, counts));
        }
    }
    println!();
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    for (task, bridge, counts) in &results {
        if *bridge != Bridge::After {
            continue;
        }
        // Every request that needs the model is one agent turn; a side request answered
        // locally and a resend cost none.
        let needed =
            counts.main_turns + counts.subagent_turns + counts.side_requests - counts.side_local;
        let ok = counts.done && counts.agent_turns == needed;
        println!(
            "goal: {}: every agent turn answers a request that needs the model, none twice: {} agent turns for {} such requests ({} side requests answered locally, {} resends joined)  {}",
            task.name,
            counts.agent_turns,
            needed,
            counts.side_local,
            counts.resends,
            verdict(ok)
        );
    }
}

fn claude_version(claude: &Path) -> String {
    let output = Command::new(claude)
        .arg("--version")
        .output()
        .expect("claude --version");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// One task against a fresh bridge in `bridge`'s configuration.
fn run(claude: &Path, tmux: &Path, task: &Task, bridge: Bridge) -> Counts {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let project = root.join("project");
    let claude_home = root.join("claude-home");
    for path in [&project, &claude_home, &root.join("tmp")] {
        std::fs::create_dir_all(path).expect("mkdir");
    }
    write_demo_project(&project);
    let key = format!("bench-key-{}", std::process::id());
    let key_file = root.join("bridge.key");
    std::fs::write(&key_file, &key).expect("key");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let home = root.join(".sandbox").join("home");
    let agent_log = root.join("agent.jsonl");
    let policy = write_policy(&root, &home, &key_file, task, bridge);
    let mut env = Vec::new();
    if let Some(scenario) = task.scenario {
        env.push(("MOCK_DEVIN_SCENARIO", scenario));
    }
    if task.slow_agent {
        env.push(("MOCK_DEVIN_STARTUP_MS", "4000"));
    }
    // The bridge logs into a file, so the table is not buried under its lines; a task that is
    // not done prints the log's tail.
    let launch = ServedBridge::launch_of(
        &policy,
        &root,
        &home,
        &agent_log,
        &env,
        Stderr::File(root.join("bridge.log")),
    );
    let mut served = ServedBridge::launch(launch).unwrap_or_else(|error| panic!("{error}"));
    let started = Instant::now();
    let done = match task.client {
        Client::Print => run_print(claude, &project, &root, &served.addr, &key, task),
        Client::Terminal => run_terminal(claude, tmux, &project, &root, &served.addr, &key, task),
    };
    let seconds = started.elapsed().as_secs_f64();
    if !done {
        eprintln!("--- bridge log ---\n{}", served.tail());
    }
    let addr: SocketAddr = served.addr.parse().expect("bridge address");
    let metrics = request(addr, "GET", "/metrics", &[], "").body;
    served.stop();
    let count = |line: &str| -> u64 {
        metrics
            .lines()
            .filter_map(|l| l.strip_prefix(line))
            .filter_map(|rest| rest.trim().parse::<u64>().ok())
            .sum()
    };
    Counts {
        main_turns: count("devin_bridge_messages_total{kind=\"main_turn\"}"),
        subagent_turns: count("devin_bridge_messages_total{kind=\"subagent_turn\"}"),
        side_requests: count("devin_bridge_messages_total{kind=\"side_request\"}"),
        side_local: metrics
            .lines()
            .filter(|l| {
                l.starts_with("devin_bridge_side_requests_total{")
                    && l.contains("answered=\"local\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum(),
        resends: count("devin_bridge_messages_total{kind=\"resend\"}"),
        agent_turns: agent_events(&agent_log)
            .iter()
            .filter(|event| event["event"] == "prompt")
            .count() as u64,
        done,
        seconds,
    }
}

fn write_policy(root: &Path, home: &Path, key_file: &Path, task: &Task, bridge: Bridge) -> PathBuf {
    let path = OfflinePolicy::path;
    let mut policy = OfflinePolicy::load().expect("offline.toml");
    policy
        .components(&devin_bridge_test_support::components_dir())
        .set("server", "require_key", true)
        .set("server", "api_key_file", path(key_file))
        .set(
            "agent",
            "command",
            path(&devin_bridge_test_support::artifacts::mock_devin()),
        )
        .set("agent", "home", path(home))
        .set("agent", "prewarm", 0)
        .set(
            "agent",
            "pass_env",
            vec![
                "MOCK_DEVIN_LOG",
                "MOCK_DEVIN_STARTUP_MS",
                "MOCK_DEVIN_SCENARIO",
            ],
        )
        .set(
            "models",
            "catalog",
            path(
                &devin_bridge_test_support::artifacts::workspace_root()
                    .join("policies/models.json"),
            ),
        )
        .set("control", "socket", path(&root.join("run/control.sock")))
        .set(
            "engine",
            "cache_dir",
            path(&devin_bridge_test_support::test_cache_dir()),
        );
    if task.slow_agent {
        policy.set("agent", "init_timeout_ms", 20_000);
    }
    if bridge == Bridge::Before {
        policy
            .set("server", "local_side_requests", false)
            .set("server", "resend_grace_ms", 0)
            .set("server", "resend_window_ms", 0);
    }
    let file = root.join("policy.toml");
    policy.write(&file).expect("write policy");
    file
}

/// The environment Claude Code gets: the bridge, the key as a token, every role on the
/// catalog's model.
fn claude_env(root: &Path, addr: &str, key: &str, task: &Task) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        (
            "HOME".into(),
            root.join("claude-home").display().to_string(),
        ),
        ("TMPDIR".into(), root.join("tmp").display().to_string()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TERM".into(), "xterm-256color".into()),
        ("ANTHROPIC_BASE_URL".into(), format!("http://{addr}")),
        ("ANTHROPIC_AUTH_TOKEN".into(), key.into()),
        ("DISABLE_AUTOUPDATER".into(), "1".into()),
        // Subagents in the foreground: their answer is the Agent tool's result.
        ("CLAUDE_CODE_DISABLE_BACKGROUND_TASKS".into(), "1".into()),
        ("npm_config_update_notifier".into(), "false".into()),
    ];
    if task.essential_only {
        env.push((
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
            "1".into(),
        ));
    }
    if task.slow_agent {
        env.push(("API_TIMEOUT_MS".into(), "2500".into()));
        env.push(("CLAUDE_CODE_MAX_RETRIES".into(), "3".into()));
    }
    for name in devin_bridge_test_support::claude::MODEL_VARIABLES {
        env.push((name.into(), MODEL.into()));
    }
    if let Some(bash) = devin_bridge_test_support::claude::on_path("bash") {
        env.push(("SHELL".into(), bash.display().to_string()));
    }
    env
}

/// `claude -p`; whether its result says the task is done.
fn run_print(
    claude: &Path,
    project: &Path,
    root: &Path,
    addr: &str,
    key: &str,
    task: &Task,
) -> bool {
    // Whatever Claude Code left running (its tools' shells), or Claude Code itself when it
    // overstayed, ends with its group.
    let GroupRun {
        status,
        stdout,
        stderr,
    } = run_in_group(
        Command::new(claude)
            .args(["-p", task.prompt, "--output-format", "json"])
            .args(["--allowedTools", "Bash,Read,Edit,Agent,Task"])
            .current_dir(project)
            .env_clear()
            .envs(claude_env(root, addr, key, task))
            .stdin(Stdio::null()),
        Duration::from_secs(300),
    );
    let done = status.is_some_and(|status| status.success()) && stdout.contains(task.done);
    if !done {
        eprintln!(
            "{}: not done\n--- stdout ---\n{}\n--- stderr ---\n{}",
            task.name,
            tail(&stdout),
            tail(&stderr)
        );
    }
    done
}

/// The interactive Claude Code in a terminal, its first run already behind it: the prompt is
/// typed, and the task is done when the screen shows the final answer.
fn run_terminal(
    claude: &Path,
    tmux: &Path,
    project: &Path,
    root: &Path,
    addr: &str,
    key: &str,
    task: &Task,
) -> bool {
    std::fs::write(
        root.join("claude-home").join(".claude.json"),
        serde_json::json!({
            "hasCompletedOnboarding": true,
            "theme": "dark",
            "projects": {project.display().to_string(): {
                "hasTrustDialogAccepted": true,
                "hasCompletedProjectOnboarding": true
            }}
        })
        .to_string(),
    )
    .expect("claude config");
    let mut command = Command::new("env");
    command.arg("-i");
    for (name, value) in claude_env(root, addr, key, task) {
        command.arg(format!("{name}={value}"));
    }
    command
        .arg(claude)
        .args(["--allowedTools", "Bash,Read,Edit,Agent,Task"])
        .current_dir(project);
    let terminal = Terminal::start(tmux, "bench-turns", &command);
    let ready = terminal.wait_for_any(
        &["shift+tab to cycle", "? for shortcuts"],
        Duration::from_secs(60),
    );
    if !(ready.contains("shift+tab to cycle") || ready.contains("? for shortcuts")) {
        eprintln!(
            "{}: Claude Code did not reach its prompt:\n{ready}",
            task.name
        );
        return false;
    }
    terminal.send(&["-l", task.prompt]);
    std::thread::sleep(Duration::from_millis(300));
    terminal.send(&["Enter"]);
    let screen = terminal.wait_for(task.done, Duration::from_secs(240));
    let done = screen.contains(task.done);
    if !done {
        eprintln!("{}: not done:\n{screen}", task.name);
    }
    // A moment for what Claude Code sends after the answer (a title, a summary).
    std::thread::sleep(Duration::from_secs(3));
    done
}

fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(3000);
    let start = (start..text.len())
        .find(|index| text.is_char_boundary(*index))
        .unwrap_or(text.len());
    &text[start..]
}
