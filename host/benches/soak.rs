//! Summarizer soak benchmark: `cargo xtask bench soak [--turns N]`
//! (or `cargo bench -p devin-bridge --bench soak [-- --turns N]` with release builds of
//! `devin-bridge` and `mock-devin` in place).
//!
//! Runs the release `devin-bridge serve` as a child process on 127.0.0.1, once per transport
//! (`per-turn`, then `resident`), on a policy written into a temporary directory: the offline
//! policy (`policies/offline.toml`) with the offline agent (`tests/mock-devin`, release build)
//! and these changes: a local API key in a 0600 file (`require_key = true`; the clients send
//! it as `x-api-key`), `max_concurrent_turns` = the number of clients (every client's turn
//! runs at once, none waits in the queue), `prewarm = 4` on the per-turn transport and 1 on the
//! resident one, and on the resident transport `session_idle_ms = 2000`, so that sessions and
//! processes left by the load are reaped within seconds of it (the policy's 15 minutes would
//! keep them past the end of the run). The agent runs with `MOCK_DEVIN_STARTUP_MS=0` (no
//! simulated CLI start-up) and `MOCK_DEVIN_SCENARIO=text` (a prompt without a marker gets a
//! text answer instead of the scripted session); every prompt carries its own marker. Before
//! the first transport, one bridge is started and stopped to fill the compile cache: the
//! compiler's memory would otherwise stay in the first measured bridge's RSS.
//!
//! 64 clients, each on one keep-alive HTTP/1.1 connection, run Claude-Code-like
//! conversations back to back until the transport's turn budget is spent: a side request
//! (no tools, non-streaming: the title Claude Code asks for), then four turns that grow the
//! history (a `Bash` tool call, its result, a text answer, another tool call and result), each
//! with the conversation's `X-Claude-Code-Session-Id` and the prompt-cache marker on the
//! newest message, as Claude Code sends them. Half of the conversations stream, half do not.
//! On the resident transport the conversations continue their sessions; on the per-turn one
//! the same requests send the whole conversation every turn. Each turn counts once, whatever
//! its outcome; a failure ends its conversation (and replaces its connection when that broke).
//!
//! Per transport it prints: turns done and failed (non-200, a body that is not the expected
//! Messages answer, a broken connection or a timeout) with a few examples, throughput and
//! latency percentiles; the bridge's RSS (`/proc/<pid>/status`) before load, after warm-up
//! (the first 10% of the turns), at the end of the load, once idle, and its peak; its open
//! descriptors (`/proc/<pid>/fd`) before load, after warm-up, at the end of the load and
//! once idle; its agent processes (`mock-devin` processes whose parent chain reaches the
//! bridge) at the same points; the transport's counters from `/healthz`; and how the bridge
//! stopped (SIGTERM, then a wait) and whether any agent process was left (a `/proc` scan for
//! processes whose working directory is the transport's sandbox home); and the lines of the
//! bridge's log at WARN or ERROR or of a panic (how many, the first few). "Once idle" is after
//! the clients closed their connections, when descriptors and agents are back to their
//! baseline or 20 s have passed.
//!
//! Goals (reported, never asserted; the bench exits 0 on MISS and nonzero only when it cannot
//! run): no failed turn; RSS at the end of the load less than 10% above the RSS after
//! warm-up; descriptors once idle back to their baseline; agent processes once idle back to
//! the count before load (the prewarmed ones), none a zombie; after SIGTERM the bridge exits
//! and no agent process is left.
//!
//! Knobs: `--turns N` or `BRIDGE_SOAK_TURNS` (turns per transport, default 20000),
//! `BRIDGE_SOAK_CLIENTS` (default 64), `BRIDGE_SOAK_MAX_SECONDS` (the whole run's time cap,
//! default 900; each transport gets an equal share of what is left, and stops there and
//! reports), `BRIDGE_SOAK_TRANSPORTS` (default `per-turn,resident`), `DEVIN_BRIDGE_BIN`
//! (default `target/release/devin-bridge`), `DEVIN_BRIDGE_MOCK_DEVIN` (default
//! `target/release/mock-devin`), `DEVIN_BRIDGE_COMPONENTS` (passed on to the bridge: the
//! components it serves instead of its built-in ones), `BRIDGE_SOAK_KEEP=1` (keep the
//! temporary directory with the policies and the bridges' logs, and say where it is).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failure aborts the run

use std::collections::HashMap;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use devin_bridge_agent::process::live_processes_in;
use devin_bridge_test_support::artifacts::target_binary;
use devin_bridge_test_support::bench::{
    claude_code_tools as tools, env_usize, ms, percentile, status_kib, verdict,
};
use devin_bridge_test_support::claude::{Launch, ServedBridge, Stderr};
use devin_bridge_test_support::keepalive::{connect, round_trip, Sender};
use devin_bridge_test_support::policies::{catalog, OfflinePolicy};
use serde_json::{json, Value};

/// What `[mock:text]` answers.
const EXPECTED: &str = "Mock answer: the bridge works.";
/// The command of the tool call `[mock:tool]` answers with.
const TOOL_COMMAND: &str = "echo mock";
const MODEL: &str = "devin-cli-agentic/swe-1-7";
const PATH: &str = "/v1/messages?beta=true";
/// Turns of a conversation after its side request.
const CONVERSATION_TURNS: usize = 4;
/// A request that takes longer than this fails (the policy's turn timeout is 120 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(150);
/// How long the bench waits for descriptors and agents to come back to their baseline.
const SETTLE_LIMIT: Duration = Duration::from_secs(20);
/// Failure examples kept per transport.
const EXAMPLES: usize = 5;

struct Settings {
    turns: usize,
    clients: usize,
    cap: Duration,
    transports: Vec<Transport>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Transport {
    PerTurn,
    Resident,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::PerTurn => "per-turn",
            Transport::Resident => "resident",
        }
    }

    fn prewarm(self) -> usize {
        match self {
            Transport::PerTurn => 4,
            Transport::Resident => 1,
        }
    }
}

impl Settings {
    fn from_env_and_args() -> Result<Self, String> {
        let args: Vec<String> = std::env::args().collect();
        let mut turns = env_usize("BRIDGE_SOAK_TURNS", 20_000);
        for (index, arg) in args.iter().enumerate() {
            let value = if arg == "--turns" {
                args.get(index + 1).cloned()
            } else {
                arg.strip_prefix("--turns=").map(str::to_owned)
            };
            if let Some(value) = value {
                turns = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("--turns needs a positive number, not {value:?}"))?;
            }
        }
        let transports = match std::env::var("BRIDGE_SOAK_TRANSPORTS") {
            Ok(list) => list
                .split(',')
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(|name| match name {
                    "per-turn" => Ok(Transport::PerTurn),
                    "resident" => Ok(Transport::Resident),
                    other => Err(format!(
                        "BRIDGE_SOAK_TRANSPORTS: unknown transport {other:?} (per-turn, resident)"
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?,
            Err(_) => vec![Transport::PerTurn, Transport::Resident],
        };
        if transports.is_empty() {
            return Err("BRIDGE_SOAK_TRANSPORTS names no transport".into());
        }
        Ok(Self {
            turns,
            clients: env_usize("BRIDGE_SOAK_CLIENTS", 64),
            cap: Duration::from_secs(env_usize("BRIDGE_SOAK_MAX_SECONDS", 900) as u64),
            transports,
        })
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

// ---------------------------------------------------------------------------------------------
// What /proc says about the bridge.

/// One look at the bridge process.
#[derive(Clone, Copy, Default)]
struct Sample {
    rss_kib: u64,
    fds: usize,
    agents: usize,
    zombies: usize,
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// `(command name, state, parent pid)` of every process, from `/proc/<pid>/stat`.
fn process_table() -> HashMap<u32, (String, char, u32)> {
    let mut table = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return table;
    };
    for entry in entries.filter_map(Result::ok) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; the name may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_owned();
        let mut rest = stat[close + 1..].split_whitespace();
        let state = rest.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let parent = rest.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        table.insert(pid, (name, state, parent));
    }
    table
}

/// The `mock-devin` processes whose parent chain reaches `pid`: (live, zombies).
fn agents_of(pid: u32) -> (usize, usize) {
    let table = process_table();
    let (mut live, mut zombies) = (0, 0);
    for (&candidate, (name, state, _)) in &table {
        if name != "mock-devin" {
            continue;
        }
        let mut at = candidate;
        let mut descends = false;
        for _ in 0..64 {
            match table.get(&at) {
                Some((_, _, parent)) if *parent == pid => {
                    descends = true;
                    break;
                }
                Some((_, _, parent)) if *parent > 1 => at = *parent,
                _ => break,
            }
        }
        if descends {
            if *state == 'Z' {
                zombies += 1;
            } else {
                live += 1;
            }
        }
    }
    (live, zombies)
}

fn sample(pid: u32) -> Sample {
    let (agents, zombies) = agents_of(pid);
    Sample {
        rss_kib: status_kib(Some(pid), "VmRSS:"),
        fds: open_fds(pid),
        agents,
        zombies,
    }
}

// ---------------------------------------------------------------------------------------------
// The bridge process.

/// What the bench writes into its temporary directory for one transport.
struct Layout {
    policy: PathBuf,
    home: PathBuf,
    log: PathBuf,
    bridge_home: PathBuf,
}

/// The offline policy with the soak's changes (see the module header).
/// `label` names the files and the sandbox home (the transport's name, or `prime`).
fn write_policy(
    dir: &Path,
    label: &str,
    transport: Transport,
    mock: &Path,
    key_file: &Path,
    clients: usize,
) -> Result<Layout, String> {
    let mut policy = OfflinePolicy::load()?;
    let name = transport.name();
    let home = dir.join(".sandbox").join(label);
    let path = OfflinePolicy::path;
    let int = |n: usize| toml::Value::Integer(i64::try_from(n).unwrap_or(i64::MAX));
    policy
        .set("server", "listen", "127.0.0.1:0")
        .set("server", "require_key", true)
        .set("server", "api_key_file", path(key_file))
        .set("server", "max_concurrent_turns", int(clients))
        .set("server", "max_connections", int((clients * 2).max(256)))
        .set("agent", "command", path(mock))
        .set("agent", "home", path(&home))
        .set("agent", "transport", name)
        .set("agent", "prewarm", int(transport.prewarm()));
    if transport == Transport::Resident {
        policy.set("agent", "session_idle_ms", int(2000));
    }
    policy
        .set(
            "agent",
            "pass_env",
            vec!["MOCK_DEVIN_STARTUP_MS", "MOCK_DEVIN_SCENARIO"],
        )
        .set("models", "catalog", path(&catalog()))
        .set(
            "control",
            "socket",
            path(&dir.join(format!("run-{label}")).join("control.sock")),
        )
        .set("engine", "cache_dir", path(&dir.join("compile-cache")));
    let file = dir.join(format!("soak-{label}.toml"));
    policy.write(&file)?;
    let bridge_home = dir.join(format!("bridge-home-{label}"));
    std::fs::create_dir_all(&bridge_home).map_err(|e| e.to_string())?;
    Ok(Layout {
        policy: file,
        home,
        log: dir.join(format!("bridge-{label}.log")),
        bridge_home,
    })
}

/// Starts `devin-bridge serve` on `layout`'s policy, its log in `layout.log`; the agents skip
/// the simulated start-up and answer prompts without a marker with text. Returns the bridge
/// and its address.
fn start_bridge(
    bin: &Path,
    layout: &Layout,
) -> Result<(ServedBridge, std::net::SocketAddr), String> {
    let mut env: Vec<(String, std::ffi::OsString)> = vec![
        ("MOCK_DEVIN_STARTUP_MS".into(), "0".into()),
        ("MOCK_DEVIN_SCENARIO".into(), "text".into()),
    ];
    if let Some(components) = std::env::var_os("DEVIN_BRIDGE_COMPONENTS") {
        env.push(("DEVIN_BRIDGE_COMPONENTS".into(), components));
    }
    let bridge = ServedBridge::launch(Launch {
        binary: bin.to_owned(),
        policy: layout.policy.clone(),
        home: layout.bridge_home.clone(),
        agent_home: layout.home.clone(),
        env,
        stderr: Stderr::File(layout.log.clone()),
        // The first start compiles the components (seconds on a busy machine).
        start_timeout: Duration::from_secs(300),
    })?;
    let addr = bridge
        .addr
        .parse()
        .map_err(|e| format!("the bridge's address {:?}: {e}", bridge.addr))?;
    Ok((bridge, addr))
}

/// SIGTERM, then waits (SIGKILL after 60 s): how it ended, whether cleanly, how long it took.
fn stop_bridge(bridge: &mut ServedBridge) -> (String, bool, Duration) {
    match bridge.try_stop(Duration::from_secs(60)) {
        (Ok(status), took) => (format!("{status}"), status.success(), took),
        (Err(error), took) => (error, false, took),
    }
}

// ---------------------------------------------------------------------------------------------
// The requests: a Claude Code conversation.

/// What a turn must answer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    Text,
    Tool,
}

/// An answer that passed the checks.
enum Reply {
    Text(String),
    Tool { id: String, input: Value },
}

/// One conversation: a side request, then `CONVERSATION_TURNS` turns growing its history.
struct Conversation {
    key: String,
    stream: bool,
    step: usize,
    messages: Vec<Value>,
    /// The id of the last tool call, answered by the next user message.
    pending_tool: Option<String>,
}

impl Conversation {
    fn new(key: String, stream: bool) -> Self {
        Self {
            key,
            stream,
            step: 0,
            messages: Vec::new(),
            pending_tool: None,
        }
    }

    fn finished(&self) -> bool {
        self.step > CONVERSATION_TURNS
    }

    /// The next request's body and what it must answer.
    fn next_request(&mut self, tools: &Value) -> (String, Expect) {
        if self.step == 0 {
            let body = json!({
                "model": MODEL,
                "max_tokens": 512,
                "stream": false,
                "system": [{"type": "text", "text": "Summarize this coding conversation in under 50 characters. Reply with the title only."}],
                "messages": [{"role": "user", "content": "Fix the failing test for add() in math.js [mock:text]"}]
            });
            return (body.to_string(), Expect::Text);
        }
        let turn = self.step - 1;
        let mut content = Vec::new();
        if let Some(id) = self.pending_tool.take() {
            content.push(json!({"type": "tool_result", "tool_use_id": id, "content": "mock\n"}));
        }
        let (text, expect) = match turn {
            0 => (
                "The test for add() in math.js fails. Can you look at it? [mock:tool]",
                Expect::Tool,
            ),
            1 => (
                "What did the command print? Answer in one sentence. [mock:text]",
                Expect::Text,
            ),
            2 => ("Run it once more to be sure. [mock:tool]", Expect::Tool),
            _ => ("Summarize what you found. [mock:text]", Expect::Text),
        };
        if turn == 0 {
            content.push(json!({"type": "text", "text": "<system-reminder>\nThe user opened math.js in the IDE.\n</system-reminder>"}));
        }
        content.push(json!({"type": "text", "text": text}));
        self.messages
            .push(json!({"role": "user", "content": content}));
        // Claude Code marks its newest message for the prompt cache (and moves the marker on
        // the next turn).
        let mut messages = self.messages.clone();
        if let Some(block) = messages
            .last_mut()
            .and_then(|message| message["content"].as_array_mut())
            .and_then(|blocks| blocks.last_mut())
        {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
        let body = json!({
            "model": MODEL,
            "max_tokens": 32000,
            "stream": self.stream,
            "system": [
                {"type": "text", "text": "You are Claude Code, an interactive CLI tool that helps users with software engineering tasks.", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "Working directory: /home/user/project. Is a git repository: yes. Platform: linux."}
            ],
            "tools": tools,
            "metadata": {"user_id": "user_soak_0000000000000000"},
            "messages": messages
        });
        (body.to_string(), expect)
    }

    /// Records the answer as the client's history.
    fn answered(&mut self, reply: Reply) {
        if self.step > 0 {
            let block = match reply {
                Reply::Text(text) => json!({"type": "text", "text": text}),
                Reply::Tool { id, input } => {
                    self.pending_tool = Some(id.clone());
                    json!({"type": "tool_use", "id": id, "name": "Bash", "input": input})
                }
            };
            self.messages
                .push(json!({"role": "assistant", "content": [block]}));
        }
        self.step += 1;
    }
}

/// Checks a non-streaming answer.
fn check_json(body: &str, expect: Expect) -> Result<Reply, String> {
    let message: Value = serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))?;
    if message["type"] != "message" || message["role"] != "assistant" {
        return Err("not an assistant message".into());
    }
    let blocks = message["content"].as_array().ok_or("no content")?;
    let [block] = blocks.as_slice() else {
        return Err(format!("{} content blocks, not 1", blocks.len()));
    };
    let reply = match block["type"].as_str() {
        Some("text") => Reply::Text(block["text"].as_str().unwrap_or_default().to_owned()),
        Some("tool_use") if block["name"] == "Bash" => Reply::Tool {
            id: block["id"].as_str().unwrap_or_default().to_owned(),
            input: block["input"].clone(),
        },
        _ => return Err(format!("unexpected block {block}")),
    };
    check_reply(reply, message["stop_reason"].as_str(), expect)
}

/// Checks a streamed answer: `message_start`, one content block (start, deltas, stop),
/// `message_delta`, `message_stop`, with `ping`s anywhere.
fn check_stream(body: &str, expect: Expect) -> Result<Reply, String> {
    let mut events = Vec::new();
    for frame in body.split("\n\n").filter(|frame| !frame.trim().is_empty()) {
        let mut name = None;
        let mut data = None;
        for line in frame.lines() {
            if let Some(value) = line.strip_prefix("event: ") {
                name = Some(value);
            } else if let Some(value) = line.strip_prefix("data: ") {
                data = Some(value);
            }
        }
        let (Some(name), Some(data)) = (name, data) else {
            return Err(format!("a frame without event or data: {frame:?}"));
        };
        let data: Value =
            serde_json::from_str(data).map_err(|e| format!("{name} data is not JSON: {e}"))?;
        if name == "error" {
            return Err(format!("error event: {data}"));
        }
        if name != "ping" {
            events.push((name, data));
        }
    }
    let names: Vec<&str> = events.iter().map(|(name, _)| *name).collect();
    let well_formed = names.len() >= 6
        && names[..2] == ["message_start", "content_block_start"]
        && names[2..names.len() - 3]
            .iter()
            .all(|name| *name == "content_block_delta")
        && names[names.len() - 3..] == ["content_block_stop", "message_delta", "message_stop"];
    if !well_formed {
        return Err(format!("unexpected event sequence {names:?}"));
    }
    let block = &events[1].1["content_block"];
    let deltas = &events[2..events.len() - 3];
    let reply = match block["type"].as_str() {
        Some("text") => Reply::Text(
            deltas
                .iter()
                .map(|(_, data)| data["delta"]["text"].as_str().unwrap_or_default())
                .collect(),
        ),
        Some("tool_use") if block["name"] == "Bash" => {
            let json: String = deltas
                .iter()
                .map(|(_, data)| data["delta"]["partial_json"].as_str().unwrap_or_default())
                .collect();
            Reply::Tool {
                id: block["id"].as_str().unwrap_or_default().to_owned(),
                input: serde_json::from_str(&json)
                    .map_err(|e| format!("tool input is not JSON: {e}"))?,
            }
        }
        _ => return Err(format!("unexpected block {block}")),
    };
    let stop = events[events.len() - 2].1["delta"]["stop_reason"].as_str();
    check_reply(reply, stop, expect)
}

fn check_reply(reply: Reply, stop: Option<&str>, expect: Expect) -> Result<Reply, String> {
    match (&reply, expect) {
        (Reply::Text(text), Expect::Text) if text == EXPECTED && stop == Some("end_turn") => {
            Ok(reply)
        }
        (Reply::Tool { id, input }, Expect::Tool)
            if !id.is_empty() && input["command"] == TOOL_COMMAND && stop == Some("tool_use") =>
        {
            Ok(reply)
        }
        (Reply::Text(text), _) => Err(format!(
            "unexpected text answer {:?} (stop {stop:?})",
            text.chars().take(120).collect::<String>()
        )),
        (Reply::Tool { input, .. }, _) => {
            Err(format!("unexpected tool call {input} (stop {stop:?})"))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The clients.

/// What every client shares.
struct Shared {
    addr: std::net::SocketAddr,
    key: String,
    transport: &'static str,
    total: usize,
    deadline: Instant,
    /// Turns claimed (a client claims one before it sends it).
    claimed: AtomicUsize,
    /// Turns finished, whatever their outcome.
    done: AtomicUsize,
    failures: Mutex<(usize, Vec<String>)>,
    tools: Value,
}

impl Shared {
    fn fail(&self, error: String) {
        let mut failures = self.failures.lock().unwrap();
        failures.0 += 1;
        if failures.1.len() < EXAMPLES {
            failures.1.push(error);
        }
    }

    /// Claims the next turn; false when the budget is spent or the time is up.
    fn claim(&self) -> bool {
        Instant::now() < self.deadline && self.claimed.fetch_add(1, Ordering::Relaxed) < self.total
    }
}

/// Whether a failure left the connection unusable.
enum Failure {
    Answer(String),
    Connection(String),
}

async fn exchange(
    sender: &mut Sender,
    shared: &Shared,
    conversation: &Conversation,
    body: String,
    expect: Expect,
) -> Result<Reply, Failure> {
    let answer = round_trip(
        sender,
        hyper::Method::POST,
        PATH,
        &[
            ("x-api-key", &shared.key),
            ("anthropic-version", "2023-06-01"),
            ("x-claude-code-session-id", &conversation.key),
        ],
        &Bytes::from(body),
    )
    .await
    .map_err(Failure::Connection)?;
    let event_stream = answer
        .headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    let text = &answer.body;
    let short = || answer.short(200);
    if answer.status != hyper::StatusCode::OK {
        return Err(Failure::Answer(format!(
            "status {}: {}",
            answer.status,
            short()
        )));
    }
    let streamed = conversation.step > 0 && conversation.stream;
    let checked = match (streamed, event_stream) {
        (true, true) => check_stream(text, expect),
        (false, false) => check_json(text, expect),
        _ => Err(format!(
            "content type {} for a {} request",
            if event_stream { "SSE" } else { "not SSE" },
            if streamed {
                "streaming"
            } else {
                "non-streaming"
            }
        )),
    };
    checked.map_err(|error| Failure::Answer(format!("{error}; body: {}", short())))
}

/// One client: conversations back to back on one keep-alive connection, until the budget is
/// spent. Returns the latencies of its successful turns.
async fn client(shared: Arc<Shared>, index: usize) -> Vec<Duration> {
    let mut latencies = Vec::new();
    let mut sender: Option<Sender> = None;
    let mut number = 0usize;
    'conversations: loop {
        let mut conversation = Conversation::new(
            format!("soak-{}-{index}-{number}", shared.transport),
            (index + number).is_multiple_of(2),
        );
        number += 1;
        while !conversation.finished() {
            if !shared.claim() {
                break 'conversations;
            }
            let (body, expect) = conversation.next_request(&shared.tools);
            let started = Instant::now();
            let outcome = async {
                if sender.is_none() {
                    sender = Some(connect(shared.addr).await.map_err(Failure::Connection)?);
                }
                let Some(open) = sender.as_mut() else {
                    return Err(Failure::Connection("no connection".into()));
                };
                exchange(open, &shared, &conversation, body, expect).await
            };
            let outcome = tokio::time::timeout(REQUEST_TIMEOUT, outcome)
                .await
                .unwrap_or_else(|_| {
                    Err(Failure::Connection(format!(
                        "no answer within {} s",
                        REQUEST_TIMEOUT.as_secs()
                    )))
                });
            shared.done.fetch_add(1, Ordering::Relaxed);
            match outcome {
                Ok(reply) => {
                    latencies.push(started.elapsed());
                    conversation.answered(reply);
                }
                Err(Failure::Answer(error)) => {
                    shared.fail(error);
                    continue 'conversations;
                }
                Err(Failure::Connection(error)) => {
                    shared.fail(error);
                    sender = None;
                    // A refused connection is not retried in a tight loop.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue 'conversations;
                }
            }
        }
    }
    latencies
}

/// `GET /healthz` on a connection of its own.
async fn health(addr: std::net::SocketAddr) -> Option<Value> {
    let mut sender = connect(addr).await.ok()?;
    let answer = round_trip(
        &mut sender,
        hyper::Method::GET,
        "/healthz",
        &[],
        &Bytes::new(),
    )
    .await
    .ok()?;
    serde_json::from_str(&answer.body).ok()
}

// ---------------------------------------------------------------------------------------------
// One transport.

struct Report {
    transport: Transport,
    clients: usize,
    budget: usize,
    ok: usize,
    failed: usize,
    examples: Vec<String>,
    capped: bool,
    elapsed: Duration,
    latencies: Vec<Duration>,
    baseline: Sample,
    warm: Sample,
    warm_turns: usize,
    end: Sample,
    idle: Sample,
    settled_in: Duration,
    max_rss_after_warm_kib: u64,
    peak_kib: u64,
    health: Option<Value>,
    stop_status: String,
    stopped_cleanly: bool,
    stop_time: Duration,
    left_behind: usize,
    /// Lines of the bridge's log at WARN or ERROR, or of a panic: how many, the first few.
    log_problems: (usize, Vec<String>),
}

/// The lines of a bridge log that report a problem (WARN, ERROR, a panic).
fn log_problems(log: &Path) -> (usize, Vec<String>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut count = 0;
    let mut examples = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let panic = line.contains("panicked");
        if !(panic || line.contains(" WARN ") || line.contains(" ERROR ")) {
            continue;
        }
        count += 1;
        if examples.len() < EXAMPLES {
            let mut example: String = line.chars().take(300).collect();
            // A panic's message is on the next line.
            if let Some(message) = lines.peek().filter(|_| panic) {
                example.push_str(" / ");
                example.extend(message.chars().take(200));
            }
            examples.push(example);
        }
    }
    (count, examples)
}

#[allow(clippy::too_many_arguments)]
fn run_transport(
    runtime: &tokio::runtime::Runtime,
    transport: Transport,
    settings: &Settings,
    dir: &Path,
    bin: &Path,
    mock: &Path,
    key: &str,
    key_file: &Path,
    deadline: Instant,
) -> Result<Report, String> {
    let layout = write_policy(
        dir,
        transport.name(),
        transport,
        mock,
        key_file,
        settings.clients,
    )?;
    let (mut bridge, addr) = start_bridge(bin, &layout)?;
    let pid = bridge.pid;
    eprintln!(
        "soak {}: bridge pid {pid} on http://{addr}, log {}",
        transport.name(),
        layout.log.display()
    );

    // Baseline: the prewarmed agents are up, nothing else runs.
    let prewarm = transport.prewarm();
    let started = Instant::now();
    while agents_of(pid).0 < prewarm && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let baseline = sample(pid);

    let shared = Arc::new(Shared {
        addr,
        key: key.to_owned(),
        transport: transport.name(),
        total: settings.turns,
        deadline,
        claimed: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        failures: Mutex::new((0, Vec::new())),
        tools: tools(),
    });
    let warm_mark = (settings.turns / 10).max(1);
    let (latencies, elapsed, warm, max_rss_after_warm_kib, end) = runtime.block_on(async {
        let mut clients = tokio::task::JoinSet::new();
        let begun = Instant::now();
        for index in 0..settings.clients {
            clients.spawn(client(shared.clone(), index));
        }
        let mut latencies = Vec::with_capacity(settings.turns);
        let mut warm: Option<(Sample, usize)> = None;
        let mut max_rss = 0;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                joined = clients.join_next() => match joined {
                    Some(Ok(client_latencies)) => latencies.extend(client_latencies),
                    Some(Err(error)) => shared.fail(format!("client task: {error}")),
                    None => break,
                },
                _ = tick.tick() => {
                    let done = shared.done.load(Ordering::Relaxed);
                    if warm.is_none() && done >= warm_mark {
                        warm = Some((sample(pid), done));
                    }
                    if warm.is_some() {
                        max_rss = max_rss.max(status_kib(Some(pid), "VmRSS:"));
                    }
                }
            }
        }
        let elapsed = begun.elapsed();
        let end = sample(pid);
        (latencies, elapsed, warm, max_rss.max(end.rss_kib), end)
    });
    let done = shared.done.load(Ordering::Relaxed);
    let (warm, warm_turns) = warm.unwrap_or((end, done));
    let capped = done < settings.turns;

    // Idle: the clients' connections are closed; wait for descriptors and agents to settle.
    let started = Instant::now();
    let idle = loop {
        let now = sample(pid);
        let settled = now.fds <= baseline.fds && now.agents <= baseline.agents && now.zombies == 0;
        if settled || started.elapsed() >= SETTLE_LIMIT {
            break now;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let settled_in = started.elapsed();
    let peak_kib = status_kib(Some(pid), "VmHWM:");
    let health = runtime.block_on(health(addr));

    let (stop_status, stopped_cleanly, stop_time) = stop_bridge(&mut bridge);
    let started = Instant::now();
    let left_behind = loop {
        let left = live_processes_in(&layout.home);
        if left == 0 || started.elapsed() >= Duration::from_secs(10) {
            break left;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (failed, examples) = {
        let failures = shared.failures.lock().unwrap();
        (failures.0, failures.1.clone())
    };
    let mut latencies = latencies;
    latencies.sort_unstable();
    Ok(Report {
        transport,
        clients: settings.clients,
        budget: settings.turns,
        ok: latencies.len(),
        failed,
        examples,
        capped,
        elapsed,
        latencies,
        baseline,
        warm,
        warm_turns,
        end,
        idle,
        settled_in,
        max_rss_after_warm_kib,
        peak_kib,
        health,
        stop_status,
        stopped_cleanly,
        stop_time,
        left_behind,
        log_problems: log_problems(&layout.log),
    })
}

// ---------------------------------------------------------------------------------------------
// Report.

fn print_report(report: &Report) {
    let name = report.transport.name();
    let turns = report.ok + report.failed;
    println!();
    println!(
        "{name} transport: {} clients, budget {} turns, prewarm {}",
        report.clients,
        report.budget,
        report.transport.prewarm()
    );
    println!(
        "  turns          {turns} done ({} ok, {} failed) in {:.1} s: {:.1} turns/s{}",
        report.ok,
        report.failed,
        report.elapsed.as_secs_f64(),
        turns as f64 / report.elapsed.as_secs_f64().max(1e-9),
        if report.capped {
            "  (stopped at the time cap)"
        } else {
            ""
        }
    );
    println!(
        "  latency        p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        ms(percentile(&report.latencies, 50.0)),
        ms(percentile(&report.latencies, 90.0)),
        ms(percentile(&report.latencies, 99.0)),
        ms(report.latencies.last().copied().unwrap_or_default()),
    );
    println!(
        "  bridge RSS     before load {:.1} MiB, after warm-up ({} turns) {:.1} MiB, end of load {:.1} MiB, idle {:.1} MiB; \
         highest after warm-up {:.1} MiB, peak (VmHWM) {:.1} MiB",
        mib(report.baseline.rss_kib),
        report.warm_turns,
        mib(report.warm.rss_kib),
        mib(report.end.rss_kib),
        mib(report.idle.rss_kib),
        mib(report.max_rss_after_warm_kib),
        mib(report.peak_kib),
    );
    println!(
        "  descriptors    before load {}, after warm-up {}, end of load {}, idle {} (settled in {:.1} s)",
        report.baseline.fds,
        report.warm.fds,
        report.end.fds,
        report.idle.fds,
        report.settled_in.as_secs_f64()
    );
    println!(
        "  agents         before load {}, after warm-up {}, end of load {}, idle {} (zombies {})",
        report.baseline.agents,
        report.warm.agents,
        report.end.agents,
        report.idle.agents,
        report.idle.zombies
    );
    if let Some(health) = &report.health {
        let number = |value: &Value| value.as_u64().unwrap_or(0);
        match report.transport {
            Transport::PerTurn => {
                let prewarm = &health["prewarm"];
                println!(
                    "  /healthz       prewarm ready {}, served warm {}, served cold {}",
                    number(&prewarm["ready"]),
                    number(&prewarm["served_warm"]),
                    number(&prewarm["served_cold"])
                );
            }
            Transport::Resident => {
                let resident = &health["resident"];
                let fields = [
                    "processes",
                    "processes_started",
                    "sessions",
                    "hits",
                    "misses",
                    "forks",
                    "rebuilds",
                    "replays",
                    "ephemeral",
                    "resumed",
                ];
                let counters: Vec<String> = fields
                    .iter()
                    .map(|field| format!("{field} {}", number(&resident[*field])))
                    .collect();
                println!("  /healthz       {}", counters.join(", "));
            }
        }
    } else {
        println!("  /healthz       no answer");
    }
    println!(
        "  stop           SIGTERM: {} after {:.1} s; agent processes left {}",
        report.stop_status,
        report.stop_time.as_secs_f64(),
        report.left_behind
    );
    for example in &report.examples {
        println!("  failed turn    {example}");
    }
    println!(
        "  bridge log     {} lines at WARN or ERROR, or of a panic",
        report.log_problems.0
    );
    for line in &report.log_problems.1 {
        println!("    {line}");
    }
}

fn print_goals(report: &Report) {
    let name = report.transport.name();
    let growth = (report.end.rss_kib as f64 / report.warm.rss_kib.max(1) as f64 - 1.0) * 100.0;
    println!(
        "goal: {name}: no failed turn: {} failed of {}  {}",
        report.failed,
        report.ok + report.failed,
        verdict(report.failed == 0 && report.ok > 0)
    );
    println!(
        "goal: {name}: RSS growth after warm-up < 10%: {:.1} -> {:.1} MiB ({growth:+.1}%)  {}",
        mib(report.warm.rss_kib),
        mib(report.end.rss_kib),
        verdict(report.warm.rss_kib > 0 && growth < 10.0)
    );
    println!(
        "goal: {name}: descriptors back to baseline once idle: {} vs {}  {}",
        report.idle.fds,
        report.baseline.fds,
        verdict(report.idle.fds <= report.baseline.fds)
    );
    println!(
        "goal: {name}: agent processes back to the count before load once idle: {} vs {} (zombies {})  {}",
        report.idle.agents,
        report.baseline.agents,
        report.idle.zombies,
        verdict(report.idle.agents <= report.baseline.agents && report.idle.zombies == 0)
    );
    println!(
        "goal: {name}: clean stop: {}, {} agent processes left  {}",
        report.stop_status,
        report.left_behind,
        verdict(report.stopped_cleanly && report.left_behind == 0)
    );
}

// ---------------------------------------------------------------------------------------------

fn main() -> ExitCode {
    let settings = match Settings::from_env_and_args() {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("soak: {error}");
            return ExitCode::FAILURE;
        }
    };
    let bin = target_binary("DEVIN_BRIDGE_BIN", "devin-bridge");
    let mock = target_binary("DEVIN_BRIDGE_MOCK_DEVIN", "mock-devin");
    for (path, what) in [(&bin, "devin-bridge"), (&mock, "mock-devin")] {
        if !path.is_file() {
            eprintln!(
                "soak: {} not found ({what}); run `cargo xtask bench soak`, which builds it",
                path.display()
            );
            return ExitCode::FAILURE;
        }
    }
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().to_owned();
    let _removed_at_exit = if std::env::var_os("BRIDGE_SOAK_KEEP").is_some_and(|v| v == "1") {
        eprintln!("soak: keeping {} (policies, bridge logs)", dir.display());
        let _ = temp.keep();
        None
    } else {
        Some(temp)
    };
    let key = {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).expect("random key");
        hex::encode(bytes)
    };
    let key_file = dir.join("api-key");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&key_file)
        .and_then(|mut file| file.write_all(key.as_bytes()))
        .expect("key file");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("soak-client")
        .build()
        .expect("runtime");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "soak: {} clients, {} turns per transport, time cap {} s; {cores} cores; bridge {}, agent {}",
        settings.clients,
        settings.turns,
        settings.cap.as_secs(),
        bin.display(),
        mock.display()
    );
    let begun = Instant::now();
    // A first start compiles the components into the compile cache, and the compiler's memory
    // stays in that process's RSS: start and stop one bridge first, so that every measured
    // bridge starts from the cache, as a restarted bridge does.
    let primed = write_policy(
        &dir,
        "prime",
        settings.transports[0],
        &mock,
        &key_file,
        settings.clients,
    )
    .and_then(|layout| start_bridge(&bin, &layout));
    match primed {
        Ok((mut bridge, _)) => {
            stop_bridge(&mut bridge);
            eprintln!(
                "soak: compile cache filled in {:.1} s",
                begun.elapsed().as_secs_f64()
            );
        }
        Err(error) => {
            eprintln!("soak: cannot run: {error}");
            return ExitCode::FAILURE;
        }
    }
    let mut reports = Vec::new();
    for (index, &transport) in settings.transports.iter().enumerate() {
        // Each transport gets an equal share of the time that is left.
        let left = settings.cap.saturating_sub(begun.elapsed());
        let share = left / u32::try_from(settings.transports.len() - index).unwrap_or(1);
        let deadline = Instant::now() + share;
        eprintln!(
            "soak {}: {} turns, {} clients, at most {} s",
            transport.name(),
            settings.turns,
            settings.clients,
            share.as_secs()
        );
        match run_transport(
            &runtime, transport, &settings, &dir, &bin, &mock, &key, &key_file, deadline,
        ) {
            Ok(report) => {
                print_report(&report);
                reports.push(report);
            }
            Err(error) => {
                eprintln!("soak {}: cannot run: {error}", transport.name());
                return ExitCode::FAILURE;
            }
        }
    }
    println!();
    println!("goals (reported, not asserted):");
    for report in &reports {
        print_goals(report);
    }
    println!("total soak time {:.1} s", begun.elapsed().as_secs_f64());
    ExitCode::SUCCESS
}
