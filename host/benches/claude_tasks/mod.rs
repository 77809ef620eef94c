//! Claude Code's tasks against a `devin-bridge serve` with the offline agent, as the turns
//! benchmark (`cargo xtask bench turns`) and the compatibility matrix (`cargo xtask compat`)
//! run them: a fresh bridge per task (its log in a file), Claude Code in print mode or in a
//! terminal (tmux), and what the run cost, read from the bridge's `/metrics` and the offline
//! agent's log (every prompt it got is one Devin turn).

// Shared by two benchmarks, each of which uses a part.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use devin_bridge_test_support::bridge::request;
use devin_bridge_test_support::claude::{
    agent_events, run_in_group, write_demo_project, GroupRun, ServedBridge, Stderr,
};
use devin_bridge_test_support::policies::OfflinePolicy;
use devin_bridge_test_support::terminal::Terminal;

pub(crate) mod capture;

/// The catalog model every role of Claude Code uses.
pub(crate) use devin_bridge_test_support::claude::MODEL;
pub(crate) const DEMO_PROMPT: &str = "Fix the failing test in this project.";
pub(crate) const SUBAGENT_PROMPT: &str = "Survey this project with a subagent. [mock:subagent]";
/// What the offline agent's demo script says when the task is done.
pub(crate) const DEMO_DONE: &str = "npm test passes now";

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bridge {
    Before,
    After,
}

impl Bridge {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Bridge::Before => "before",
            Bridge::After => "after",
        }
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Client {
    Print,
    Terminal,
}

pub(crate) struct Task {
    pub(crate) name: &'static str,
    pub(crate) prompt: &'static str,
    pub(crate) client: Client,
    /// `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`.
    pub(crate) essential_only: bool,
    /// Agents that take longer to start than Claude Code waits for an answer.
    pub(crate) slow_agent: bool,
    /// What the final answer says when the task is done.
    pub(crate) done: &'static str,
    /// `MOCK_DEVIN_SCENARIO`: what the offline agent does when a prompt has no marker.
    pub(crate) scenario: Option<&'static str>,
    /// `--permission-mode auto` instead of the allowed tools: Claude Code asks the bridge to
    /// judge every call (its safeguard) and runs what is not flagged.
    pub(crate) auto_mode: bool,
    /// In a terminal, a second message typed once the task is done, and what its answer says.
    pub(crate) follow_up: Option<(&'static str, &'static str)>,
}

/// The README demo with `claude -p`, essential traffic only: the task the others vary.
pub(crate) const DEMO_PRINT: Task = Task {
    name: "demo -p",
    prompt: DEMO_PROMPT,
    client: Client::Print,
    essential_only: true,
    slow_agent: false,
    done: DEMO_DONE,
    scenario: None,
    auto_mode: false,
    follow_up: None,
};

/// A task the agent delegates with the `Agent` tool, with `claude -p`.
pub(crate) const SUBAGENT_PRINT: Task = Task {
    name: "subagent -p",
    prompt: SUBAGENT_PROMPT,
    done: "the subagent reported: Mock answer",
    // Claude Code hands the subagent's answer back in a later user message, which has no
    // marker of its own.
    scenario: Some("subagent"),
    ..DEMO_PRINT
};

/// What one run cost.
#[derive(Default)]
pub(crate) struct Counts {
    pub(crate) main_turns: u64,
    pub(crate) subagent_turns: u64,
    pub(crate) side_requests: u64,
    /// Side requests answered without an agent.
    pub(crate) side_local: u64,
    pub(crate) resends: u64,
    pub(crate) agent_turns: u64,
    /// Session-title requests answered without an agent, and by the agent.
    pub(crate) titles_local: u64,
    pub(crate) titles_agent: u64,
    /// The bridge's safeguard verdicts on Claude Code's calls (auto mode).
    pub(crate) verdicts_passed: u64,
    pub(crate) verdicts_flagged: u64,
    /// The screen or the output showed a permission prompt or a notice that the gateway
    /// cannot check actions.
    pub(crate) prompted: bool,
    pub(crate) done: bool,
    pub(crate) seconds: f64,
}

pub(crate) fn claude_version(claude: &Path) -> String {
    let output = Command::new(claude)
        .arg("--version")
        .output()
        .expect("claude --version");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// One task against a fresh bridge in `bridge`'s configuration; with `capture`, Claude Code
/// talks to the bridge through a recording proxy that writes its requests to that file.
pub(crate) fn run(
    claude: &Path,
    tmux: &Path,
    task: &Task,
    bridge: Bridge,
    capture: Option<&Path>,
) -> Counts {
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
    let addr: SocketAddr = served.addr.parse().expect("bridge address");
    let client_addr = match capture {
        Some(file) => capture::Capture::start(addr, file).addr.to_string(),
        None => served.addr.clone(),
    };
    let started = Instant::now();
    let (done, prompted) = match task.client {
        Client::Print => run_print(claude, &project, &root, &client_addr, &key, task),
        Client::Terminal => run_terminal(claude, tmux, &project, &root, &client_addr, &key, task),
    };
    let seconds = started.elapsed().as_secs_f64();
    if !done {
        eprintln!("--- bridge log ---\n{}", served.tail());
    }
    let metrics = request(addr, "GET", "/metrics", &[], "").body;
    served.stop();
    let count = |line: &str| -> u64 {
        metrics
            .lines()
            .filter_map(|l| l.strip_prefix(line))
            .filter_map(|rest| rest.trim().parse::<u64>().ok())
            .sum()
    };
    // The sum of the counters of `family` whose labels hold every one of `labels`.
    let labelled = |family: &str, labels: &[&str]| -> u64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!("{family}{{")))
            .filter(|l| labels.iter().all(|label| l.contains(label)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    Counts {
        main_turns: count("devin_bridge_messages_total{kind=\"main_turn\"}"),
        subagent_turns: count("devin_bridge_messages_total{kind=\"subagent_turn\"}"),
        side_requests: count("devin_bridge_messages_total{kind=\"side_request\"}"),
        side_local: labelled("devin_bridge_side_requests_total", &["answered=\"local\""]),
        titles_local: labelled(
            "devin_bridge_side_requests_total",
            &["purpose=\"session_title\"", "answered=\"local\""],
        ),
        titles_agent: labelled(
            "devin_bridge_side_requests_total",
            &["purpose=\"session_title\"", "answered=\"agent\""],
        ),
        verdicts_passed: labelled(
            "devin_bridge_safeguard_verdicts_total",
            &["outcome=\"not_flagged\""],
        ),
        verdicts_flagged: labelled(
            "devin_bridge_safeguard_verdicts_total",
            &["outcome=\"flagged\""],
        ),
        prompted,
        resends: count("devin_bridge_messages_total{kind=\"resend\"}"),
        agent_turns: agent_events(&agent_log)
            .iter()
            .filter(|event| event["event"] == "prompt")
            .count() as u64,
        done,
        seconds,
    }
}

pub(crate) fn write_policy(
    root: &Path,
    home: &Path,
    key_file: &Path,
    task: &Task,
    bridge: Bridge,
) -> PathBuf {
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

/// `--permission-mode auto`, or the tools a task needs allowed.
fn permission_args(task: &Task) -> [&'static str; 2] {
    if task.auto_mode {
        ["--permission-mode", "auto"]
    } else {
        ["--allowedTools", "Bash,Read,Edit,Agent,Task"]
    }
}

/// What Claude Code shows when it asks the user to approve a call, or when a gateway does not
/// answer its safeguard (auto mode then falls back to its own classifier, or holds every
/// action).
const PROMPTS: [&str; 5] = [
    "Do you want to",
    "Blocked by auto mode",
    "isn't compatible",
    "can't check actions",
    "auto-mode-classifier-billing",
];

/// `claude -p`; whether its result says the task is done, and whether it printed a prompt or
/// a notice of [`PROMPTS`].
fn run_print(
    claude: &Path,
    project: &Path,
    root: &Path,
    addr: &str,
    key: &str,
    task: &Task,
) -> (bool, bool) {
    // Whatever Claude Code left running (its tools' shells), or Claude Code itself when it
    // overstayed, ends with its group.
    let GroupRun {
        status,
        stdout,
        stderr,
    } = run_in_group(
        Command::new(claude)
            .args(["-p", task.prompt, "--output-format", "json"])
            .args(permission_args(task))
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
    let prompted = PROMPTS
        .iter()
        .any(|text| stdout.contains(text) || stderr.contains(text));
    (done, prompted)
}

/// The interactive Claude Code in a terminal, its first run already behind it: the prompt is
/// typed, and the task is done when the screen shows the final answer (and the follow-up's,
/// when the task has one). Also whether the screen ever showed a prompt of [`PROMPTS`].
fn run_terminal(
    claude: &Path,
    tmux: &Path,
    project: &Path,
    root: &Path,
    addr: &str,
    key: &str,
    task: &Task,
) -> (bool, bool) {
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
        .args(permission_args(task))
        .current_dir(project);
    let terminal = Terminal::start(tmux, "bench-turns", &command);
    let ready_texts = ["shift+tab to cycle", "? for shortcuts", "auto mode on"];
    let ready = terminal.wait_for_any(&ready_texts, Duration::from_secs(60));
    if !ready_texts.iter().any(|text| ready.contains(text)) {
        eprintln!(
            "{}: Claude Code did not reach its prompt:\n{ready}",
            task.name
        );
        return (false, false);
    }
    let mut seen = String::new();
    let mut done = true;
    let messages = std::iter::once((task.prompt, task.done)).chain(task.follow_up);
    for (message, answer) in messages {
        terminal.send(&["-l", message]);
        std::thread::sleep(Duration::from_millis(300));
        terminal.send(&["Enter"]);
        let screen = terminal.wait_for(answer, Duration::from_secs(240));
        seen.push_str(&screen);
        if !screen.contains(answer) {
            eprintln!("{}: not done:\n{screen}", task.name);
            done = false;
            break;
        }
    }
    // A moment for what Claude Code sends after the answer (a title, a summary).
    std::thread::sleep(Duration::from_secs(3));
    seen.push_str(&terminal.pane());
    let prompted = PROMPTS.iter().any(|text| seen.contains(text));
    (done, prompted)
}

fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(3000);
    let start = (start..text.len())
        .find(|index| text.is_char_boundary(*index))
        .unwrap_or(text.len());
    &text[start..]
}
