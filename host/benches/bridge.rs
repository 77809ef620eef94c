//! Summarizer bridge benchmark: `cargo xtask bench bridge`
//! (or `cargo bench -p devin-bridge --bench bridge [-- --quick]`).
//!
//! In one run, with the offline agent answering instantly (`[mock:text]`) after a simulated
//! CLI start-up (`MOCK_DEVIN_STARTUP_MS`, default 50 ms), for 1, 16 and 64 concurrent clients,
//! side by side:
//! - **floor**: what the bridge cannot avoid: spawn the agent and do the same ACP exchange
//!   directly (`Agent::start` + `run_turn` with the same serialized prompt text), without HTTP
//!   and without transforms;
//! - **bridge, no prewarm** (`prewarm = 0`): the same work plus HTTP and every transform, over
//!   keep-alive connections to an in-process bridge on 127.0.0.1;
//! - **bridge, prewarm** (`prewarm = 16` by default): as above with agents started ahead of
//!   demand, measured between two no-prewarm runs (A-B-A) and compared with their mean.
//!
//! Each row reports requests/s, p50 and p99 latency, failed requests, the bridge's overhead
//! above the floor (difference of the percentiles), how many turns found a prewarmed agent,
//! CPU per request of this process (bridge + HTTP clients) and of the agents (reaped
//! children), and the host's peak RSS (VmHWM of this process, which runs the bridge and the
//! clients; the agents are separate processes). Reference lines show where the bridge's own
//! time goes: a keep-alive HTTP round trip without transforms (`GET /healthz`), the five
//! transform calls of one request back to back in wasm, and the same calls made as the bridge
//! makes them (each on the blocking pool), alone and 16 at a time.
//!
//! Then the resident transport (see `resident/mod.rs`): 20-turn conversations whose history
//! grows to about 1 MB, at the same client counts, against a direct shared-agent floor, the
//! same floor behind a minimal HTTP server, and the per-turn transport
//! (`BRIDGE_BENCH_RESIDENT=0` skips it).
//!
//! Last, the agent turns a task with independent reads takes (see `turns/mod.rs`): the offline
//! agent's default script, driven by a client that answers the tool calls, with one tool call
//! per reply (`disable_parallel_tool_use`) and with independent calls together.
//!
//! Goals (reported, never asserted; the bench exits 0 on MISS): overhead above the floor
//! <= 2 ms p50 and <= 10 ms p99 at 16 clients; zero failed requests at 64; with prewarm, p50
//! below the no-prewarm p50; fewer agent turns with independent calls together.
//!
//! Environment: `BRIDGE_BENCH_SECONDS` (per row, default 5, `--quick` 1),
//! `BRIDGE_BENCH_LEVELS` (default `1,16,64`), `BRIDGE_BENCH_PREWARM` (default 16),
//! `BRIDGE_BENCH_STARTUP_MS` (default 50), `DEVIN_BRIDGE_MOCK_DEVIN` (the offline agent;
//! default `mock-devin` beside this benchmark, `target/release/mock-devin`),
//! `DEVIN_BRIDGE_COMPONENTS` (default `target/components`), `BRIDGE_BENCH_LOG` (write the
//! bridge's log to this file instead of formatting it into a sink), `BRIDGE_BENCH_LOG_FILTER`
//! (default `info`, as the server).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failure aborts the run

use devin_bridge_engine::TransformCalls as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use devin_bridge_agent::acp::{Agent, AgentLimits};
use devin_bridge_agent::devin::ClientIdentity;
use devin_bridge_agent::identity::AgentIdentity;
use devin_bridge_agent::process::Spec;
use devin_bridge_engine::{MessageHead, Transforms};
use devin_bridge_policy::ModePolicy as _;
use devin_bridge_summarizer::policy::SummarizerPolicy;
use devin_bridge_summarizer::{self, sandbox, Bridge, INLINE_INPUT_BYTES};
use devin_bridge_test_support::artifacts::{default_components_dir, target_binary, workspace_root};
use devin_bridge_test_support::bench::{claude_code_tools, ms, percentile, status_kib, verdict};
use devin_bridge_test_support::bridge::{settle, InProcess};
use devin_bridge_test_support::keepalive::{connect, round_trip, Sender};
use devin_bridge_test_support::policies::{catalog, summarizer_policy};
use devin_bridge_types::Usage;
use serde_json::{json, Value};
use tokio::runtime::Runtime;

#[path = "resident/mod.rs"]
mod resident;
#[path = "turns/mod.rs"]
mod turns;

/// What `[mock:text]` answers.
const EXPECTED: &str = "Mock answer: the bridge works.";
const MODEL: &str = "devin-cli-agentic/swe-1-7";
const PATH: &str = "/v1/messages?beta=true";

struct Settings {
    run: Duration,
    levels: Vec<usize>,
    prewarm: usize,
    startup_ms: u64,
    quick: bool,
}

impl Settings {
    fn from_env_and_args() -> Self {
        let quick = std::env::args().any(|arg| arg == "--quick");
        let seconds = std::env::var("BRIDGE_BENCH_SECONDS")
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|s| *s > 0.0)
            .unwrap_or(if quick { 1.0 } else { 5.0 });
        let levels = std::env::var("BRIDGE_BENCH_LEVELS")
            .ok()
            .map(|v| {
                v.split(',')
                    .filter_map(|n| n.trim().parse::<usize>().ok())
                    .filter(|n| *n > 0)
                    .collect::<Vec<_>>()
            })
            .filter(|levels| !levels.is_empty())
            .unwrap_or_else(|| vec![1, 16, 64]);
        let prewarm = env_number("BRIDGE_BENCH_PREWARM", 16).clamp(1, 64) as usize;
        Self {
            run: Duration::from_secs_f64(seconds),
            levels,
            prewarm,
            startup_ms: env_number("BRIDGE_BENCH_STARTUP_MS", 50),
            quick,
        }
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

// ---------------------------------------------------------------------------------------------
// The request: a realistic ~2 KB Claude Code turn with three tools.

fn request_body() -> String {
    let tools = claude_code_tools();
    json!({
        "model": MODEL,
        "max_tokens": 32000,
        "stream": false,
        "system": [
            {"type": "text", "text": "You are Claude Code, an interactive CLI tool that helps users with software engineering tasks.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Working directory: /home/user/project. Is a git repository: yes. Platform: linux."}
        ],
        "tools": tools,
        "metadata": {"user_id": "user_bench_session_0000000000000000"},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "The test for add() in math.js fails. Can you look at it?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me read the file first."},
                {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"file_path": "/home/user/project/math.js"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "     1\tfunction add(a, b) {\n     2\t  return a - b;\n     3\t}\n     4\tmodule.exports = { add };\n"}
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "The function subtracts instead of adding. Do you want me to fix it?"}]},
            {"role": "user", "content": [{"type": "text", "text": "Not yet; first summarize what you found in one sentence. [mock:text]"}]}
        ]
    })
    .to_string()
}

// ---------------------------------------------------------------------------------------------
// Measurement.

#[derive(Default)]
struct Samples {
    latencies: Vec<Duration>,
    failures: usize,
    first_error: Option<String>,
}

impl Samples {
    fn merge(&mut self, other: Samples) {
        self.latencies.extend(other.latencies);
        self.failures += other.failures;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    fn fail(&mut self, error: String) {
        self.failures += 1;
        if self.first_error.is_none() {
            self.first_error = Some(error);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Floor,
    Cold,
    Warm,
}

struct Row {
    level: usize,
    mode: Mode,
    label: String,
    requests_per_s: f64,
    ok: usize,
    p50: Duration,
    p99: Duration,
    failures: usize,
    first_error: Option<String>,
    warm_share: Option<(usize, usize)>,
    hwm_kib: u64,
    /// CPU per successful request: this process (bridge + clients), the agents.
    host_cpu: Duration,
    agent_cpu: Duration,
}

fn row(
    level: usize,
    mode: Mode,
    label: String,
    mut samples: Samples,
    elapsed: Duration,
    warm_share: Option<(usize, usize)>,
    cpu_before: Cpu,
) -> Row {
    samples.latencies.sort();
    let ok = samples.latencies.len();
    let cpu_after = cpu();
    let per_request = |d: Duration| d / u32::try_from(ok.max(1)).unwrap_or(u32::MAX);
    Row {
        level,
        mode,
        label,
        requests_per_s: ok as f64 / elapsed.as_secs_f64().max(1e-9),
        ok,
        p50: percentile(&samples.latencies, 50.0),
        p99: percentile(&samples.latencies, 99.0),
        failures: samples.failures,
        first_error: samples.first_error,
        warm_share,
        hwm_kib: status_kib(None, "VmHWM:"),
        host_cpu: per_request(cpu_after.host.saturating_sub(cpu_before.host)),
        agent_cpu: per_request(cpu_after.children.saturating_sub(cpu_before.children)),
    }
}

/// CPU time of this process (every thread) and of its reaped children (the agents), from
/// getrusage(2), which counts to the microsecond (/proc/self/stat counts clock ticks, too coarse
/// for a short row).
#[derive(Clone, Copy)]
struct Cpu {
    host: Duration,
    children: Duration,
}

fn cpu() -> Cpu {
    use nix::sys::resource::{getrusage, UsageWho};
    let spent = |who| {
        getrusage(who).map_or(Duration::ZERO, |usage| {
            let time = |t: nix::sys::time::TimeVal| {
                Duration::new(
                    u64::try_from(t.tv_sec()).unwrap_or(0),
                    u32::try_from(t.tv_usec()).unwrap_or(0) * 1000,
                )
            };
            time(usage.user_time()) + time(usage.system_time())
        })
    };
    Cpu {
        host: spent(UsageWho::RUSAGE_SELF),
        children: spent(UsageWho::RUSAGE_CHILDREN),
    }
}

/// `run`'s result and the CPU time this process spent while it ran.
fn host_cpu_during<T>(run: impl FnOnce() -> T) -> (T, Duration) {
    let before = cpu().host;
    let result = run();
    (result, cpu().host.saturating_sub(before))
}

// ---------------------------------------------------------------------------------------------
// The floor: the agent exchange alone.

struct Floor {
    spec: Spec,
    limits: AgentLimits,
    prompt: Arc<str>,
}

impl Floor {
    async fn once(&self) -> Result<(), String> {
        let agent = Agent::start(&self.spec, self.limits, &ClientIdentity::default())
            .await
            .map_err(|e| format!("start: {e}"))?;
        let outcome = agent.run_turn(&self.spec.cwd, &self.prompt).await;
        match outcome {
            Ok(output) if output.text == EXPECTED => Ok(()),
            Ok(output) => Err(format!("unexpected reply {:?}", output.text)),
            Err(error) => Err(format!("turn: {error}")),
        }
    }

    async fn run(self: Arc<Self>, clients: usize, duration: Duration) -> (Samples, Duration) {
        gather(clients, |_, barrier| {
            let floor = self.clone();
            async move {
                let mut samples = Samples::default();
                barrier.wait().await;
                let deadline = Instant::now() + duration;
                while Instant::now() < deadline {
                    let started = Instant::now();
                    match floor.once().await {
                        Ok(()) => samples.latencies.push(started.elapsed()),
                        Err(error) => samples.fail(error),
                    }
                }
                samples
            }
        })
        .await
    }
}

/// Runs `clients` tasks; each prepares (connects), waits on the barrier it is given with all
/// the others, then measures. Returns their samples merged and the time from the common
/// start to the last one's end.
async fn gather<Fut>(
    clients: usize,
    client: impl Fn(usize, Arc<tokio::sync::Barrier>) -> Fut,
) -> (Samples, Duration)
where
    Fut: std::future::Future<Output = Samples> + Send + 'static,
{
    let barrier = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let mut tasks = tokio::task::JoinSet::new();
    for index in 0..clients {
        tasks.spawn(client(index, barrier.clone()));
    }
    barrier.wait().await;
    let started = Instant::now();
    let mut all = Samples::default();
    while let Some(samples) = tasks.join_next().await {
        match samples {
            Ok(samples) => all.merge(samples),
            Err(join) => all.fail(format!("client task: {join}")),
        }
    }
    (all, started.elapsed())
}

// ---------------------------------------------------------------------------------------------
// The bridge and its HTTP clients.

struct Setup {
    components: PathBuf,
    mock: PathBuf,
    sandbox: PathBuf,
    max_turns: usize,
}

impl Setup {
    fn policy(&self, home: &str, prewarm: usize) -> SummarizerPolicy {
        self.policy_with(home, prewarm, "")
    }

    /// The bench policy with extra `[agent]` lines.
    fn policy_with(&self, home: &str, prewarm: usize, agent: &str) -> SummarizerPolicy {
        let text = summarizer_policy(
            &self.components,
            &format!(
                "[engine]\ncache_dir = {:?}\n\
                 [server]\nlisten = \"127.0.0.1:0\"\nrequire_key = false\n\
                 max_concurrent_turns = {}\nmax_connections = 1024\n\
                 ping_interval_ms = 600000\nqueue_timeout_ms = 60000\nshutdown_grace_ms = 10000\n\
                 [agent]\ncommand = {:?}\nhome = {:?}\noffline = true\nprewarm = {prewarm}\n\
                 pass_env = [\"MOCK_DEVIN_STARTUP_MS\"]\n{agent}\n\
                 [models]\ncatalog = {:?}\n",
                workspace_root()
                    .join("target")
                    .join("bench-compile-cache")
                    .display()
                    .to_string(),
                self.max_turns,
                self.mock.display().to_string(),
                self.sandbox.join(home).display().to_string(),
                catalog().display().to_string(),
            ),
        );
        SummarizerPolicy::parse(&text, Path::new("bench-bridge.toml"), &workspace_root())
            .expect("bench policy")
    }
}

struct Running {
    addr: SocketAddr,
    bridge: Arc<Bridge>,
    home: PathBuf,
    served: InProcess,
}

async fn start_bridge(
    setup: &Setup,
    transforms: &Arc<Transforms>,
    home: &str,
    prewarm: usize,
) -> Running {
    start_bridge_with(setup, transforms, home, prewarm, "").await
}

/// [`start_bridge`] with extra `[agent]` policy lines.
async fn start_bridge_with(
    setup: &Setup,
    transforms: &Arc<Transforms>,
    home: &str,
    prewarm: usize,
    agent: &str,
) -> Running {
    let policy = setup.policy_with(home, prewarm, agent);
    let served = InProcess::start(&policy, transforms.clone()).await;
    let bridge = served.bridge.clone();
    // A prewarmed bridge is measured as it runs in production: with its pool full.
    let started = Instant::now();
    while bridge.pool().stats().ready < prewarm && started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Running {
        addr: served.addr,
        bridge,
        home: setup.sandbox.join(home),
        served,
    }
}

impl Running {
    /// Stops serving, ends the refill task, drains the pool and waits for every agent of this
    /// bridge to be gone. Returns the agents still running after 15 s (0 expected).
    async fn stop(mut self) -> usize {
        self.served.stop_serving().await;
        self.served.refill.abort();
        let _ = (&mut self.served.refill).await;
        if let Some(reaper) = &self.served.reaper {
            reaper.abort();
        }
        self.bridge.pool().drain().await;
        if let Some(resident) = self.bridge.resident() {
            resident.shutdown().await;
        }
        settle(&self.home, 0, Duration::from_secs(15)).await
    }

    /// Refills the pool after a run (so the next row is not measured against a refill).
    async fn refilled(&self, prewarm: usize) {
        let started = Instant::now();
        while self.bridge.pool().stats().ready < prewarm
            && started.elapsed() < Duration::from_secs(30)
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// One request on a keep-alive connection; Ok only for a 200 whose body carries the answer
/// (`expect`).
async fn exchange(
    sender: &mut Sender,
    method: hyper::Method,
    path: &str,
    body: &Bytes,
    expect: &str,
) -> Result<(), String> {
    let answer = round_trip(sender, method, path, &[], body).await?;
    if answer.status != hyper::StatusCode::OK {
        return Err(format!("status {}: {}", answer.status, answer.short(300)));
    }
    if !answer.body.contains(expect) {
        return Err(format!("unexpected body: {}", answer.short(300)));
    }
    Ok(())
}

/// A `/v1/messages` request on a keep-alive connection; its JSON answer when it is a 200.
async fn exchange_json(sender: &mut Sender, body: &Bytes) -> Result<Value, String> {
    let answer = round_trip(sender, hyper::Method::POST, "/v1/messages", &[], body).await?;
    if answer.status != hyper::StatusCode::OK {
        return Err(format!("status {}: {}", answer.status, answer.short(300)));
    }
    serde_json::from_str(&answer.body).map_err(|e| format!("not JSON ({e})"))
}

/// The agent turns of the scripted task with independent reads, one call per reply and
/// several together, on a fresh per-turn bridge.
fn turns_bench(
    setup: &Setup,
    transforms: &Arc<Transforms>,
    server_rt: &Runtime,
    client_rt: &Runtime,
) {
    let running = server_rt.block_on(start_bridge(setup, transforms, "turns", 0));
    let addr = running.addr;
    let serial = client_rt.block_on(turns::scripted_task(addr, false));
    let parallel = client_rt.block_on(turns::scripted_task(addr, true));
    let left = server_rt.block_on(running.stop());
    println!("agent turns for a task with independent reads (the offline agent's script):");
    match (serial, parallel) {
        (Ok(serial), Ok(parallel)) => {
            println!("  one tool call per reply (disable_parallel_tool_use): {serial} turns");
            println!("  independent calls together (the default):          {parallel} turns");
            println!(
                "goal: independent reads take fewer agent turns together: {serial} -> {parallel} ({:.2}x)  {}",
                parallel as f64 / serial as f64,
                verdict(parallel < serial)
            );
        }
        (serial, parallel) => {
            println!("  FAILED: one call per reply {serial:?}, together {parallel:?}");
            println!("goal: independent reads take fewer agent turns together: MISS");
        }
    }
    if left > 0 {
        println!("  agent processes left behind: {left}  <-- LEAK");
    }
}

/// One request on a keep-alive connection, timed: its latency goes into `samples` when it
/// succeeds. A failure is counted and the broken connection replaced (the reconnect is timed
/// with the next request, as a client would see it).
async fn timed(
    samples: &mut Samples,
    sender: &mut Result<Sender, String>,
    addr: SocketAddr,
    request: impl AsyncFnOnce(&mut Sender) -> Result<(), String>,
) {
    let started = Instant::now();
    let outcome = match sender.as_mut() {
        Ok(sender) => request(sender).await,
        Err(error) => Err(error.clone()),
    };
    match outcome {
        Ok(()) => samples.latencies.push(started.elapsed()),
        Err(error) => {
            samples.fail(error);
            *sender = connect(addr).await;
        }
    }
}

/// `clients` keep-alive connections, each sending requests back to back for `duration`.
async fn http_clients(
    addr: SocketAddr,
    body: Bytes,
    clients: usize,
    duration: Duration,
) -> (Samples, Duration) {
    gather(clients, |_, barrier| {
        let body = body.clone();
        async move {
            let mut samples = Samples::default();
            let mut sender = connect(addr).await;
            barrier.wait().await;
            let deadline = Instant::now() + duration;
            while Instant::now() < deadline {
                timed(&mut samples, &mut sender, addr, async |sender| {
                    exchange(sender, hyper::Method::POST, PATH, &body, EXPECTED).await
                })
                .await;
            }
            samples
        }
    })
    .await
}

/// Sequential round trips of `GET /healthz` (HTTP and routing, no transforms, no agent).
async fn health_round_trips(addr: SocketAddr, count: usize) -> Samples {
    let mut samples = Samples::default();
    let Ok(mut sender) = connect(addr).await else {
        samples.fail("connect".into());
        return samples;
    };
    for _ in 0..count {
        let started = Instant::now();
        match exchange(
            &mut sender,
            hyper::Method::GET,
            "/healthz",
            &Bytes::new(),
            "\"status\"",
        )
        .await
        {
            Ok(()) => samples.latencies.push(started.elapsed()),
            Err(error) => samples.fail(error),
        }
    }
    samples.latencies.sort();
    samples
}

/// The five transform calls of one successful non-streaming request, back to back, in wasm.
fn pipeline_once(transforms: &Transforms, body: &str, catalog: &str) -> Result<(), String> {
    let prompt = transforms
        .serialize(body.to_owned())
        .map_err(|e| e.to_string())?
        .map_err(|f| f.message)?;
    transforms
        .validate_model(prompt.model.clone(), catalog.to_owned())
        .map_err(|e| e.to_string())?
        .map_err(|f| f.message)?;
    if transforms
        .narrates_unexecuted_action(EXPECTED.to_owned())
        .map_err(|e| e.to_string())?
    {
        return Err("the answer was taken for a narration".into());
    }
    let reply = transforms
        .parse(EXPECTED.to_owned(), prompt.tools, prompt.id_seed, 8)
        .map_err(|e| e.to_string())?
        .map_err(|f| f.message)?
        .reply;
    let head = MessageHead {
        id: "msg_000000000000000000000000".into(),
        model: prompt.model,
        usage: Usage::estimated(prompt.input_tokens, 8),
    };
    transforms
        .render_json(head, reply, None)
        .map_err(|e| e.to_string())?;
    Ok(())
}

fn transform_pipeline(transforms: &Transforms, body: &str, catalog: &str, count: usize) -> Samples {
    // The first calls on fresh instance slots pay for mapping them (a few ms each): warm up.
    for _ in 0..100 {
        let _ = pipeline_once(transforms, body, catalog);
    }
    let mut samples = Samples::default();
    for _ in 0..count {
        let started = Instant::now();
        match pipeline_once(transforms, body, catalog) {
            Ok(()) => samples.latencies.push(started.elapsed()),
            Err(error) => samples.fail(error),
        }
    }
    samples.latencies.sort();
    samples
}

/// `pipeline_once` as the bridge runs it: each call on an input over
/// [`INLINE_INPUT_BYTES`] on the blocking pool (`spawn_blocking`), each smaller one on the
/// task's own worker, by `tasks` concurrent tasks, `count` pipelines each. Returns the
/// per-pipeline latencies and the wall time.
async fn transform_pipeline_hopping(
    transforms: &Arc<Transforms>,
    body: &str,
    catalog: &str,
    tasks: usize,
    count: usize,
) -> (Samples, Duration) {
    async fn hop<T: Send + 'static>(
        transforms: &Arc<Transforms>,
        input_bytes: usize,
        call: impl FnOnce(&Transforms) -> T + Send + 'static,
    ) -> T {
        if input_bytes <= INLINE_INPUT_BYTES {
            return call(transforms);
        }
        let transforms = transforms.clone();
        tokio::task::spawn_blocking(move || call(&transforms))
            .await
            .expect("transform task")
    }
    async fn once(
        transforms: &Arc<Transforms>,
        body: String,
        catalog: String,
    ) -> Result<(), String> {
        let prompt = hop(transforms, body.len(), move |t| t.serialize(body))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|f| f.message)?;
        let model = prompt.model.clone();
        hop(transforms, model.len() + catalog.len(), move |t| {
            t.validate_model(model, catalog)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|f| f.message)?;
        if hop(transforms, EXPECTED.len(), |t| {
            t.narrates_unexecuted_action(EXPECTED.to_owned())
        })
        .await
        .map_err(|e| e.to_string())?
        {
            return Err("the answer was taken for a narration".into());
        }
        let (tools, seed) = (prompt.tools, prompt.id_seed);
        let reply = hop(transforms, EXPECTED.len() + tools.len(), move |t| {
            t.parse(EXPECTED.to_owned(), tools, seed, 8)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|f| f.message)?
        .reply;
        let head = MessageHead {
            id: "msg_000000000000000000000000".into(),
            model: prompt.model,
            usage: Usage::estimated(prompt.input_tokens, 8),
        };
        hop(transforms, EXPECTED.len(), move |t| {
            t.render_json(head, reply, None)
        })
        .await
        .map_err(|e| e.to_string())?;
        Ok(())
    }
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..tasks {
        let (transforms, body, catalog) = (transforms.clone(), body.to_owned(), catalog.to_owned());
        set.spawn(async move {
            let mut samples = Samples::default();
            for _ in 0..count {
                let started = Instant::now();
                match once(&transforms, body.clone(), catalog.clone()).await {
                    Ok(()) => samples.latencies.push(started.elapsed()),
                    Err(error) => samples.fail(error),
                }
            }
            samples
        });
    }
    let mut all = Samples::default();
    while let Some(samples) = set.join_next().await {
        match samples {
            Ok(samples) => all.merge(samples),
            Err(join) => all.fail(format!("task: {join}")),
        }
    }
    all.latencies.sort();
    (all, started.elapsed())
}

// ---------------------------------------------------------------------------------------------
// Report.

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "{:>7}  {:<20} {:>7} {:>7} {:>7} {:>6} {:>8} {:>8} {:>10} {:>9} {:>9} {:>9}",
        "clients",
        "mode",
        "req/s",
        "p50 ms",
        "p99 ms",
        "failed",
        "+p50 ms",
        "+p99 ms",
        "warm/all",
        "host CPU",
        "agent CPU",
        "peak RSS"
    );
    println!(
        "{:>7}  {:<20} {:>7} {:>7} {:>7} {:>6} {:>8} {:>8} {:>10} {:>9} {:>9} {:>9}",
        "", "", "", "", "", "", "vs floor", "vs floor", "", "ms/req", "ms/req", "VmHWM"
    );
    println!("{}", "-".repeat(126));
    for row in rows {
        let floor = rows
            .iter()
            .find(|r| r.level == row.level && r.mode == Mode::Floor);
        let (d50, d99) = match (row.mode, floor) {
            (Mode::Floor, _) | (_, None) => ("-".to_owned(), "-".to_owned()),
            (_, Some(floor)) => (
                format!("{:+.2}", ms(row.p50) - ms(floor.p50)),
                format!("{:+.2}", ms(row.p99) - ms(floor.p99)),
            ),
        };
        let warm = row
            .warm_share
            .map(|(warm, all)| format!("{warm}/{all}"))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:>7}  {:<20} {:>7.1} {:>7.2} {:>7.2} {:>6} {:>8} {:>8} {:>10} {:>9.2} {:>9.2} {:>5} MiB",
            row.level,
            row.label,
            row.requests_per_s,
            ms(row.p50),
            ms(row.p99),
            row.failures,
            d50,
            d99,
            warm,
            ms(row.host_cpu),
            ms(row.agent_cpu),
            row.hwm_kib / 1024,
        );
    }
    for row in rows.iter().filter(|r| r.failures > 0) {
        println!(
            "  {} clients, {}: {} failed; first: {}",
            row.level,
            row.label,
            row.failures,
            row.first_error.as_deref().unwrap_or("?")
        );
    }
}

fn print_goals(rows: &[Row]) {
    let find = |level: usize, mode: Mode| rows.iter().find(|r| r.level == level && r.mode == mode);
    println!();
    println!("goals (reported, not asserted):");
    match (
        find(16, Mode::Floor),
        find(16, Mode::Cold),
        find(16, Mode::Warm),
    ) {
        (Some(floor), Some(cold), warm) => {
            let d50 = ms(cold.p50) - ms(floor.p50);
            let d99 = ms(cold.p99) - ms(floor.p99);
            println!(
                "  {}  overhead above the floor at 16 clients (bridge without prewarm, the same \
                 work as the floor): p50 {d50:+.2} ms (goal <= 2), p99 {d99:+.2} ms (goal <= 10)",
                verdict(d50 <= 2.0 && d99 <= 10.0 && cold.failures == 0)
            );
            if let Some(warm) = warm {
                println!(
                    "        (with prewarm: p50 {:+.2} ms, p99 {:+.2} ms above the floor)",
                    ms(warm.p50) - ms(floor.p50),
                    ms(warm.p99) - ms(floor.p99)
                );
            }
        }
        _ => println!("  n/a   overhead at 16 clients: level 16 not measured"),
    }
    let at64: Vec<&Row> = rows
        .iter()
        .filter(|r| r.level == 64 && r.mode != Mode::Floor)
        .collect();
    if at64.is_empty() {
        println!("  n/a   zero failed requests at 64 clients: level 64 not measured");
    } else {
        let failed: usize = at64.iter().map(|r| r.failures).sum();
        let served: usize = at64.iter().map(|r| r.ok).sum();
        println!(
            "  {}  zero failed requests at 64 clients: {failed} failed of {} (every bridge row)",
            verdict(failed == 0 && served > 0),
            failed + served
        );
    }
    let mut levels: Vec<usize> = rows.iter().map(|r| r.level).collect();
    levels.dedup();
    for level in levels {
        let colds: Vec<f64> = rows
            .iter()
            .filter(|r| r.level == level && r.mode == Mode::Cold)
            .map(|r| ms(r.p50))
            .collect();
        let (Some(warm), false) = (find(level, Mode::Warm), colds.is_empty()) else {
            continue;
        };
        let cold = colds.iter().sum::<f64>() / colds.len() as f64;
        let spread = colds.iter().copied().fold(f64::MIN, f64::max)
            - colds.iter().copied().fold(f64::MAX, f64::min);
        println!(
            "  {}  with prewarm, p50 below the no-prewarm p50 at {level} clients: {:.2} ms vs {cold:.2} ms ({:+.1}%; \
             no-prewarm p50 is the mean of the runs before and after, which differ by {spread:.2} ms)",
            verdict(ms(warm.p50) < cold && warm.ok > 0),
            ms(warm.p50),
            (ms(warm.p50) / cold.max(1e-9) - 1.0) * 100.0
        );
    }
}

// ---------------------------------------------------------------------------------------------

fn main() -> ExitCode {
    let settings = Settings::from_env_and_args();
    // Before any thread exists: the agents see this through the policy's `pass_env`.
    std::env::set_var("MOCK_DEVIN_STARTUP_MS", settings.startup_ms.to_string());
    // The server logs at info by default: format the same events, into a sink (or into the
    // file `BRIDGE_BENCH_LOG` names, to look at them).
    let filter = tracing_subscriber::EnvFilter::new(
        std::env::var("BRIDGE_BENCH_LOG_FILTER").unwrap_or_else(|_| "info".into()),
    );
    let log_file = std::env::var_os("BRIDGE_BENCH_LOG")
        .and_then(|path| std::fs::File::create(path).ok())
        .map(Arc::new);
    let _ = match log_file {
        Some(file) => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(file)
            .try_init(),
        None => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::sink)
            .try_init(),
    };

    let mock = target_binary("DEVIN_BRIDGE_MOCK_DEVIN", "mock-devin");
    if !mock.is_file() {
        eprintln!(
            "bench bridge: no offline agent at {}; build it with `cargo build --release -p \
             mock-devin` or set DEVIN_BRIDGE_MOCK_DEVIN (`cargo xtask bench bridge` does both)",
            mock.display()
        );
        return ExitCode::FAILURE;
    }
    let components = default_components_dir();
    if !components.join("serializer.wasm").exists() {
        eprintln!(
            "bench bridge: no components in {}; run `cargo xtask bench bridge`",
            components.display()
        );
        return ExitCode::FAILURE;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // The bridge runs as in production (one multi-threaded runtime, a worker per core); the
    // HTTP clients on their own single-worker runtime, as a separate client would.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bridge")
        .build()
        .expect("server runtime");
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .thread_name("client")
        .build()
        .expect("client runtime");

    let dir = tempfile::tempdir().expect("tempdir");
    let max_level = settings.levels.iter().copied().max().unwrap_or(1);
    let setup = Setup {
        components,
        mock,
        sandbox: dir.path().join(".sandbox"),
        max_turns: max_level.max(64),
    };
    let transforms = {
        let policy = setup.policy("floor", 0);
        let started = Instant::now();
        match Transforms::load(&policy.engine_config()) {
            Ok(transforms) => {
                eprintln!(
                    "bench bridge: components loaded in {:.0} ms",
                    ms(started.elapsed())
                );
                Arc::new(transforms)
            }
            Err(error) => {
                eprintln!("bench bridge: cannot load the components: {error}");
                return ExitCode::FAILURE;
            }
        }
    };
    bench(
        &settings,
        &setup,
        &transforms,
        &server_rt,
        &client_rt,
        cores,
    );
    ExitCode::SUCCESS
}

fn bench(
    settings: &Settings,
    setup: &Setup,
    transforms: &Arc<Transforms>,
    server_rt: &Runtime,
    client_rt: &Runtime,
    cores: usize,
) {
    let begun = Instant::now();
    let loaded_rss = (status_kib(None, "VmHWM:"), status_kib(None, "VmRSS:"));
    let body = request_body();
    let native = match devin_bridge_serializer::serialize(&body) {
        Ok(prompt) => prompt,
        Err(failure) => {
            eprintln!("bench bridge: the bench request does not serialize: {failure:?}");
            return;
        }
    };
    match transforms.serialize(body.clone()) {
        Ok(Ok(prompt)) if prompt.text == native.text => {}
        Ok(Ok(_)) => eprintln!(
            "bench bridge: WARNING: the native and the wasm serializer disagree on the bench request"
        ),
        other => eprintln!("bench bridge: WARNING: the wasm serializer failed: {other:?}"),
    }
    let catalog = std::fs::read_to_string(catalog()).expect("policies/models.json");
    let body_bytes = Bytes::from(body.clone());

    println!(
        "bridge benchmark: {cores} cores, {:.1} s per row{}, agent start-up {} ms \
         (MOCK_DEVIN_STARTUP_MS), prewarm {} vs 0, request {} bytes with 3 tools, prompt {} bytes",
        settings.run.as_secs_f64(),
        if settings.quick { " (--quick)" } else { "" },
        settings.startup_ms,
        settings.prewarm,
        body.len(),
        native.text.len(),
    );
    println!(
        "offline agent {}; components {}",
        setup.mock.display(),
        setup.components.display()
    );

    // Reference: the bridge's own work per request, without agents.
    let reference_count = if settings.quick { 50 } else { 300 };
    let pipeline = transform_pipeline(transforms, &body, &catalog, reference_count);
    let hopping_1 = server_rt.block_on(transform_pipeline_hopping(
        transforms,
        &body,
        &catalog,
        1,
        reference_count,
    ));
    let hopping_16 = server_rt.block_on(transform_pipeline_hopping(
        transforms,
        &body,
        &catalog,
        16,
        reference_count / 4,
    ));

    let floor_policy = setup.policy("floor", 0);
    let floor = Arc::new(Floor {
        spec: sandbox::agent_spec(&floor_policy, &AgentIdentity::shared_with_host())
            .expect("floor agent spec"),
        limits: AgentLimits {
            init_timeout: Duration::from_millis(floor_policy.agent.init_timeout_ms),
            turn_timeout: Duration::from_millis(floor_policy.agent.turn_timeout_ms),
            output_cap: floor_policy.agent.output_cap_bytes,
            stopped_wait: Duration::ZERO,
        },
        prompt: Arc::from(native.text.as_str()),
    });
    if let Err(error) = server_rt.block_on(floor.once()) {
        eprintln!("bench bridge: the floor exchange fails: {error}");
        return;
    }

    let mut rows: Vec<Row> = Vec::new();
    let mut health: Option<Samples> = None;
    let mut left_behind = 0;
    for &level in &settings.levels {
        // Floor.
        server_rt.block_on(async {
            for _ in 0..2 {
                let _ = floor.once().await;
            }
        });
        let cpu_before = cpu();
        let (samples, elapsed) = server_rt.block_on(floor.clone().run(level, settings.run));
        left_behind += server_rt.block_on(settle(&floor.spec.cwd, 0, Duration::from_secs(15)));
        rows.push(row(
            level,
            Mode::Floor,
            "floor (direct ACP)".into(),
            samples,
            elapsed,
            None,
            cpu_before,
        ));
        progress(rows.last());

        // The bridge, without and with prewarm.
        // No prewarm, prewarm, no prewarm again (A-B-A): the prewarm row is compared with the
        // mean of the runs on either side of it, which cancels a drift of the machine's speed
        // during the level, and the two no-prewarm runs show how far identical runs differ.
        let runs = [
            (Mode::Cold, 0, "cold", "bridge no-prewarm".to_owned()),
            (
                Mode::Warm,
                settings.prewarm,
                "warm",
                format!("bridge prewarm={}", settings.prewarm),
            ),
            (Mode::Cold, 0, "cold-again", "bridge no-prewarm".to_owned()),
        ];
        for (mode, prewarm, home, label) in runs {
            let running = server_rt.block_on(start_bridge(setup, transforms, home, prewarm));
            let addr = running.addr;
            if mode == Mode::Cold && health.is_none() {
                health = Some(client_rt.block_on(health_round_trips(addr, reference_count)));
            }
            let warmup = client_rt.block_on(async {
                let mut sender = connect(addr).await?;
                for _ in 0..3 {
                    exchange(
                        &mut sender,
                        hyper::Method::POST,
                        PATH,
                        &body_bytes,
                        EXPECTED,
                    )
                    .await?;
                }
                Ok::<(), String>(())
            });
            if let Err(error) = warmup {
                eprintln!("bench bridge: warm-up request failed: {error}");
            }
            server_rt.block_on(running.refilled(prewarm));
            let before = running.bridge.pool().stats();
            let cpu_before = cpu();
            let (samples, elapsed) =
                client_rt.block_on(http_clients(addr, body_bytes.clone(), level, settings.run));
            let after = running.bridge.pool().stats();
            let warm = after.served_warm - before.served_warm;
            let all = warm + after.served_cold - before.served_cold;
            // CPU is read before `stop`: draining the pool reaps idle agents.
            let row = row(
                level,
                mode,
                label,
                samples,
                elapsed,
                Some((warm, all)),
                cpu_before,
            );
            left_behind += server_rt.block_on(running.stop());
            rows.push(row);
            progress(rows.last());
        }
    }
    let resident_rows = if std::env::var("BRIDGE_BENCH_RESIDENT").is_ok_and(|v| v == "0") {
        None
    } else {
        resident_bench(
            settings, setup, transforms, server_rt, client_rt, &floor, &body,
        )
    };
    // Every agent of every sandbox home must be gone.
    for home in ["floor", "cold", "warm", "resident", "per-turn"] {
        left_behind += server_rt.block_on(settle(
            &setup.sandbox.join(home),
            0,
            Duration::from_secs(15),
        ));
    }

    print_table(&rows);
    println!();
    if let Some(health) = &health {
        println!(
            "reference: keep-alive HTTP round trip without transforms or agent (GET /healthz, 1 client): p50 {:.3} ms, p99 {:.3} ms",
            ms(percentile(&health.latencies, 50.0)),
            ms(percentile(&health.latencies, 99.0)),
        );
    }
    println!(
        "reference: the 5 transform calls of one request in wasm, back to back, 1 thread \
         (serialize, validate-model, narrates, parse, render-json): p50 {:.3} ms, p99 {:.3} ms{}",
        ms(percentile(&pipeline.latencies, 50.0)),
        ms(percentile(&pipeline.latencies, 99.0)),
        if pipeline.failures > 0 {
            format!(
                " ({} failed: {})",
                pipeline.failures,
                pipeline.first_error.as_deref().unwrap_or("?")
            )
        } else {
            String::new()
        }
    );
    for (tasks, (samples, wall)) in [(1, &hopping_1), (16, &hopping_16)] {
        println!(
            "reference: the same 5 calls as the bridge makes them (over 64 KiB of input via spawn_blocking), {tasks:>2} concurrent: \
             p50 {:.3} ms, p99 {:.3} ms, {:.0} pipelines/s",
            ms(percentile(&samples.latencies, 50.0)),
            ms(percentile(&samples.latencies, 99.0)),
            samples.latencies.len() as f64 / wall.as_secs_f64().max(1e-9),
        );
    }
    println!(
        "host RSS after loading the components, before any traffic: peak {} MiB, current {} MiB",
        loaded_rss.0 / 1024,
        loaded_rss.1 / 1024
    );
    println!(
        "host peak RSS (VmHWM, bridge + clients in this process; agents are separate processes): {} MiB, current {} MiB",
        status_kib(None, "VmHWM:") / 1024,
        status_kib(None, "VmRSS:") / 1024
    );
    print_goals(&rows);
    println!();
    if let Some((rows, script)) = &resident_rows {
        resident::report(rows, script, cores);
    }
    println!();
    turns_bench(setup, transforms, server_rt, client_rt);
    println!(
        "agent processes left behind: {left_behind}{}",
        if left_behind == 0 { "" } else { "  <-- LEAK" }
    );
    println!("total bench time {:.1} s", begun.elapsed().as_secs_f64());
}

/// The resident transport's rows (see `resident`): floor, resident bridge, per-turn bridge, for
/// each client count.
fn resident_bench(
    settings: &Settings,
    setup: &Setup,
    transforms: &Arc<Transforms>,
    server_rt: &Runtime,
    client_rt: &Runtime,
    floor: &Floor,
    body: &str,
) -> Option<(Vec<resident::Row>, resident::Script)> {
    let script = match resident::Script::new(body) {
        Ok(script) => Arc::new(script),
        Err(error) => {
            eprintln!("bench bridge: the resident conversation does not serialize: {error}");
            return None;
        }
    };
    let turns = resident::TURNS as f64;
    let unseen_average = script
        .unseen_prompts
        .iter()
        .map(|prompt| prompt.len() as f64)
        .sum::<f64>()
        / turns;
    let whole_average = script.whole_prompt_bytes.iter().sum::<usize>() as f64 / turns;
    let mut rows = Vec::new();
    for &level in &settings.levels {
        let ((samples, elapsed, processes), cpu_spent) = host_cpu_during(|| {
            server_rt.block_on(resident::floor(
                &floor.spec,
                floor.limits,
                script.clone(),
                level,
            ))
        });
        push_resident(
            &mut rows,
            resident::Row::new(
                level,
                "floor (resident ACP)",
                samples,
                elapsed,
                unseen_average,
                processes,
                cpu_spent,
            ),
        );

        match server_rt.block_on(resident::HttpFloor::start(
            &floor.spec,
            floor.limits,
            script.clone(),
            level,
        )) {
            Ok(http_floor) => {
                let ((samples, elapsed), cpu_spent) = host_cpu_during(|| {
                    client_rt.block_on(resident::conversations(
                        http_floor.addr,
                        script.clone(),
                        level,
                        "http-floor",
                    ))
                });
                let processes = server_rt.block_on(http_floor.stop());
                push_resident(
                    &mut rows,
                    resident::Row::new(
                        level,
                        "floor + HTTP",
                        samples,
                        elapsed,
                        unseen_average,
                        processes,
                        cpu_spent,
                    ),
                );
            }
            Err(error) => eprintln!("bench bridge: the HTTP floor does not start: {error}"),
        }

        let agent = format!(
            "transport = \"resident\"\nsessions_per_process = {}\nmax_sessions = 1024\n",
            resident::SESSIONS_PER_PROCESS
        );
        let running =
            server_rt.block_on(start_bridge_with(setup, transforms, "resident", 0, &agent));
        let before = running.bridge.resident().map(|r| r.snapshot());
        let ((samples, elapsed), cpu_spent) = host_cpu_during(|| {
            client_rt.block_on(resident::conversations(
                running.addr,
                script.clone(),
                level,
                "resident",
            ))
        });
        let after = running.bridge.resident().map(|r| r.snapshot());
        let (bytes, processes) = match (before, after) {
            (Some(before), Some(after)) => (
                (after.prompt_bytes - before.prompt_bytes) as f64 / (turns * level as f64),
                usize::try_from(after.processes_started - before.processes_started)
                    .unwrap_or(usize::MAX),
            ),
            _ => (0.0, 0),
        };
        server_rt.block_on(running.stop());
        push_resident(
            &mut rows,
            resident::Row::new(
                level,
                "bridge resident",
                samples,
                elapsed,
                bytes,
                processes,
                cpu_spent,
            ),
        );

        let running = server_rt.block_on(start_bridge(
            setup,
            transforms,
            "per-turn",
            settings.prewarm,
        ));
        server_rt.block_on(running.refilled(settings.prewarm));
        let before = running.bridge.pool().stats();
        let ((samples, elapsed), cpu_spent) = host_cpu_during(|| {
            client_rt.block_on(resident::conversations(
                running.addr,
                script.clone(),
                level,
                "per-turn",
            ))
        });
        let after = running.bridge.pool().stats();
        let processes =
            after.served_warm + after.served_cold - before.served_warm - before.served_cold;
        server_rt.block_on(running.stop());
        push_resident(
            &mut rows,
            resident::Row::new(
                level,
                "bridge per-turn",
                samples,
                elapsed,
                whole_average,
                processes,
                cpu_spent,
            ),
        );
    }
    let script = Arc::try_unwrap(script).ok()?;
    Some((rows, script))
}

/// Reports a measured resident row on stderr (progress on long runs) and keeps it.
fn push_resident(rows: &mut Vec<resident::Row>, row: resident::Row) {
    eprintln!(
        "bench bridge: {:>3} conversations, {:<20} {:>7.1} turns/s  p50 {:>7.2} ms  p99 {:>7.2} ms  failed {}",
        row.clients,
        row.label,
        row.turns_per_s,
        ms(row.p50),
        ms(row.p99),
        row.failures
    );
    rows.push(row);
}

fn progress(row: Option<&Row>) {
    if let Some(row) = row {
        eprintln!(
            "bench bridge: {:>3} clients, {:<20} {:>7.1} req/s  p50 {:>7.2} ms  p99 {:>7.2} ms  failed {}",
            row.level,
            row.label,
            row.requests_per_s,
            ms(row.p50),
            ms(row.p99),
            row.failures
        );
    }
}
