//! The resident transport in the bridge benchmark: `clients` concurrent conversations of
//! `TURNS` turns each, whose history grows to about 1 MB at the last turn, side by side:
//! - **floor (resident ACP)**: the same continuation prompts sent straight to shared agent
//!   processes (8 sessions per process), without HTTP and transforms;
//! - **floor + HTTP**: the same, behind a minimal HTTP server that reads each request as the
//!   bridge does (the whole body, within the limit, as UTF-8) and sends the turn's continuation
//!   without looking at the body: what carrying Claude Code's requests over HTTP costs on its
//!   own, so the bridge's row above it is what its transforms and sessions add;
//! - **bridge resident**: the bridge on the resident transport, conversations keyed by
//!   `X-Claude-Code-Session-Id`;
//! - **bridge per-turn**: the same conversations on the per-turn transport (the whole prompt
//!   on every turn, on a new process).
//!
//! Per row: turns per second, per-turn p50/p99 over every turn of every conversation, bytes
//! sent to the agent per turn (measured by the resident transport's counters; for the per-turn
//! transport it is the whole prompt, computed with the native serializer), and agent
//! processes started, and the CPU time this process (the bridge and the clients, or the floor's
//! ACP client) spent per turn. Goals (reported, never asserted): resident overhead above its
//! floor < 1 ms p50 at 16 clients; on turn 20 at least 10x fewer bytes than per-turn; processes
//! started <= one per conversation.
//!
//! The CPU column explains the overhead under load: when every core is busy, each turn also
//! waits for the CPU time of the turns queued ahead of it, so the bridge's extra CPU per turn,
//! times the conversations per core, bounds from below what it adds to p50.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use devin_bridge_agent::acp::{AgentLimits, SharedAgent};
use devin_bridge_agent::devin::ClientIdentity;
use devin_bridge_agent::process::Spec;
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

use super::{connect, gather, ms, percentile, round_trip, timed, Samples, EXPECTED, PATH};

/// Turns per conversation.
pub(crate) const TURNS: usize = 20;
/// The history's size at the last turn.
const LAST_TURN_BYTES: usize = 1 << 20;
/// Which turn of its conversation a request is (read by the HTTP floor only).
const TURN_HEADER: &str = "x-bench-turn";
/// The HTTP floor's body limit, the bridge's default.
const MAX_BODY: usize = 32 << 20;
/// Sessions per agent process, as the bench policy sets it.
pub(crate) const SESSIONS_PER_PROCESS: usize = 8;

/// One conversation, turn by turn: the requests, the whole prompts, the unseen prompts.
pub(crate) struct Script {
    pub requests: Vec<Bytes>,
    /// What the per-turn transport sends on each turn (the whole prompt).
    pub whole_prompt_bytes: Vec<usize>,
    /// What a session that holds the previous turn's messages receives on each turn.
    pub unseen_prompts: Vec<Arc<str>>,
}

impl Script {
    /// `base` (a Claude Code request ending with a user message that asks for `[mock:text]`)
    /// grown by one assistant reply and one user message per turn, to about 1 MB at the last.
    pub(crate) fn new(base: &str) -> Result<Self, String> {
        let mut request: Value = serde_json::from_str(base).map_err(|e| e.to_string())?;
        let per_turn = LAST_TURN_BYTES.saturating_sub(base.len()) / (TURNS - 1);
        let mut requests = Vec::with_capacity(TURNS);
        let mut whole_prompt_bytes = Vec::with_capacity(TURNS);
        let mut unseen_prompts = Vec::with_capacity(TURNS);
        let mut held = 0u32;
        for turn in 0..TURNS {
            if turn > 0 {
                let messages = request["messages"]
                    .as_array_mut()
                    .ok_or("the base request has no messages")?;
                messages.push(
                    json!({"role": "assistant", "content": [{"type": "text", "text": EXPECTED}]}),
                );
                let filler = format!("log line {turn}: all quiet\n").repeat(per_turn / 24 + 1);
                messages.push(json!({"role": "user", "content": [
                    {"type": "text", "text": format!("{}\nTurn {turn}: summarize again. [mock:text]", &filler[..per_turn.min(filler.len())])}
                ]}));
            }
            let text = request.to_string();
            let whole = devin_bridge_serializer::serialize(&text).map_err(|f| f.message)?;
            let unseen = devin_bridge_serializer::serialize_unseen(
                &text,
                devin_bridge_serializer::PromptOptions::held(held),
            )
            .map_err(|f| f.message)?;
            held = u32::try_from(unseen.history.len()).unwrap_or(u32::MAX);
            whole_prompt_bytes.push(whole.text.len());
            unseen_prompts.push(Arc::from(unseen.prompt.text.as_str()));
            requests.push(Bytes::from(text));
        }
        Ok(Self {
            requests,
            whole_prompt_bytes,
            unseen_prompts,
        })
    }
}

/// `clients` conversations over keep-alive connections, each turn after the previous answer.
/// Returns every turn's latency and the wall time.
pub(crate) async fn conversations(
    addr: SocketAddr,
    script: Arc<Script>,
    clients: usize,
    label: &str,
) -> (Samples, Duration) {
    gather(clients, |client, barrier| {
        let script = script.clone();
        let key = format!("bench-{label}-{client}");
        async move {
            let mut samples = Samples::default();
            let mut sender = connect(addr).await;
            barrier.wait().await;
            for (index, body) in script.requests.iter().enumerate() {
                timed(&mut samples, &mut sender, addr, async |sender| {
                    turn(sender, &key, index, body).await
                })
                .await;
            }
            samples
        }
    })
    .await
}

/// One turn of a conversation on its keep-alive connection: the request with its
/// conversation's key and its index, a 200 with the offline agent's answer expected.
async fn turn(
    sender: &mut super::Sender,
    key: &str,
    index: usize,
    body: &Bytes,
) -> Result<(), String> {
    let index = index.to_string();
    let headers = [
        ("x-claude-code-session-id", key),
        (TURN_HEADER, index.as_str()),
    ];
    let answer = round_trip(sender, hyper::Method::POST, PATH, &headers, body).await?;
    if answer.status != hyper::StatusCode::OK || !answer.body.contains(EXPECTED) {
        return Err(format!("status {}: {}", answer.status, answer.short(300)));
    }
    Ok(())
}

/// The floor: each conversation's prompts sent straight to a session on a shared agent (one
/// process per `SESSIONS_PER_PROCESS` conversations), the same prompts the resident bridge
/// sends when every turn continues its session. Returns the samples, the wall time and the
/// processes started.
pub(crate) async fn floor(
    spec: &Spec,
    limits: AgentLimits,
    script: Arc<Script>,
    clients: usize,
) -> (Samples, Duration, usize) {
    let mut agents = Vec::new();
    for _ in 0..clients.div_ceil(SESSIONS_PER_PROCESS) {
        match SharedAgent::start(spec, limits, &ClientIdentity::default()).await {
            Ok(agent) => agents.push(agent),
            Err(error) => {
                let mut samples = Samples::default();
                samples.fail(format!("start: {error}"));
                return (samples, Duration::ZERO, agents.len());
            }
        }
    }
    let (all, elapsed) = gather(clients, |client, barrier| {
        let agent = agents[client / SESSIONS_PER_PROCESS].clone();
        let (script, cwd) = (script.clone(), spec.cwd.clone());
        async move {
            let mut samples = Samples::default();
            let session = agent
                .new_session(&cwd)
                .await
                .map(|created| created.session_id.0.to_string());
            barrier.wait().await;
            let Ok(session) = session else {
                samples.fail("session/new failed".into());
                return samples;
            };
            for prompt in &script.unseen_prompts {
                let started = Instant::now();
                match agent.prompt(&session, prompt.to_string()).await {
                    Ok(output) if output.text == EXPECTED => {
                        samples.latencies.push(started.elapsed());
                    }
                    Ok(output) => samples.fail(format!("unexpected reply {:?}", output.text)),
                    Err(error) => samples.fail(format!("turn: {error}")),
                }
            }
            samples
        }
    })
    .await;
    let processes = agents.len();
    for agent in agents {
        agent.close().await;
    }
    (all, elapsed, processes)
}

/// The HTTP floor's server: shared agents behind HTTP (see the module header).
pub(crate) struct HttpFloor {
    pub addr: SocketAddr,
    agents: Vec<Arc<SharedAgent>>,
    server: tokio::task::JoinHandle<()>,
}

struct FloorState {
    script: Arc<Script>,
    agents: Vec<Arc<SharedAgent>>,
    cwd: std::path::PathBuf,
    /// The session of each conversation key.
    sessions: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

impl HttpFloor {
    /// Starts the agents (one per `SESSIONS_PER_PROCESS` conversations) and the server.
    pub(crate) async fn start(
        spec: &Spec,
        limits: AgentLimits,
        script: Arc<Script>,
        clients: usize,
    ) -> Result<Self, String> {
        let mut agents = Vec::new();
        for _ in 0..clients.div_ceil(SESSIONS_PER_PROCESS) {
            agents.push(
                SharedAgent::start(spec, limits, &ClientIdentity::default())
                    .await
                    .map_err(|e| format!("start: {e}"))?,
            );
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("bind: {e}"))?;
        let addr = listener.local_addr().map_err(|e| format!("addr: {e}"))?;
        let state = Arc::new(FloorState {
            script,
            agents: agents.clone(),
            cwd: spec.cwd.clone(),
            sessions: Default::default(),
        });
        let server = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let state = state.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let state = state.clone();
                        async move {
                            Ok::<_, std::convert::Infallible>(floor_turn(&state, request).await)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self {
            addr,
            agents,
            server,
        })
    }

    /// Stops the server and the agents; returns the processes started.
    pub(crate) async fn stop(self) -> usize {
        self.server.abort();
        let processes = self.agents.len();
        for agent in self.agents {
            agent.close().await;
        }
        processes
    }
}

/// One turn of the HTTP floor: the body read as the bridge reads it, then the turn's
/// continuation on the conversation's session.
async fn floor_turn(
    state: &FloorState,
    request: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<Full<Bytes>> {
    let answer = |status: u16, text: String| {
        let body = json!({"type": "message", "content": [{"type": "text", "text": text}]});
        hyper::Response::builder()
            .status(status)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap_or_default()
    };
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let (Some(key), Some(index)) = (
        header("x-claude-code-session-id"),
        header(TURN_HEADER).and_then(|turn| turn.parse::<usize>().ok()),
    ) else {
        return answer(400, "no conversation key or turn".into());
    };
    let body = match http_body_util::Limited::new(request.into_body(), MAX_BODY)
        .collect()
        .await
    {
        Ok(collected) => String::from_utf8(Vec::from(collected.to_bytes())),
        Err(error) => return answer(400, format!("body: {error}")),
    };
    if body.is_err() {
        return answer(400, "the body is not UTF-8".into());
    }
    let client = key
        .rsplit('-')
        .next()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0);
    let Some(agent) = state.agents.get(client / SESSIONS_PER_PROCESS) else {
        return answer(500, "no agent for this client".into());
    };
    let known = state
        .sessions
        .lock()
        .ok()
        .and_then(|sessions| sessions.get(&key).cloned());
    let session = match known {
        Some(session) => session,
        None => match agent
            .new_session(&state.cwd)
            .await
            .map(|created| created.session_id.0.to_string())
        {
            Ok(session) => {
                if let Ok(mut sessions) = state.sessions.lock() {
                    sessions.insert(key, session.clone());
                }
                session
            }
            Err(error) => return answer(502, format!("session/new: {error}")),
        },
    };
    let Some(prompt) = state.script.unseen_prompts.get(index) else {
        return answer(400, "no such turn".into());
    };
    match agent.prompt(&session, prompt.to_string()).await {
        Ok(output) => answer(200, output.text),
        Err(error) => answer(502, format!("turn: {error}")),
    }
}

/// One row of the resident table.
pub(crate) struct Row {
    pub clients: usize,
    pub label: &'static str,
    pub turns_per_s: f64,
    pub p50: Duration,
    pub p99: Duration,
    pub failures: usize,
    pub first_error: Option<String>,
    /// Average bytes sent to agents per turn.
    pub bytes_per_turn: f64,
    pub processes: usize,
    /// CPU time of this process per turn (every thread: bridge, clients, floor).
    pub cpu_per_turn: Duration,
}

impl Row {
    pub(crate) fn new(
        clients: usize,
        label: &'static str,
        mut samples: Samples,
        elapsed: Duration,
        bytes_per_turn: f64,
        processes: usize,
        cpu: Duration,
    ) -> Self {
        samples.latencies.sort();
        let turns = u32::try_from(samples.latencies.len().max(1)).unwrap_or(u32::MAX);
        Self {
            cpu_per_turn: cpu / turns,
            clients,
            label,
            turns_per_s: samples.latencies.len() as f64 / elapsed.as_secs_f64().max(1e-9),
            p50: percentile(&samples.latencies, 50.0),
            p99: percentile(&samples.latencies, 99.0),
            failures: samples.failures,
            first_error: samples.first_error,
            bytes_per_turn,
            processes,
        }
    }
}

/// The table and the goals.
pub(crate) fn report(rows: &[Row], script: &Script, cores: usize) {
    println!();
    let mut levels: Vec<String> = rows.iter().map(|row| row.clients.to_string()).collect();
    levels.dedup();
    println!(
        "resident transport: {} conversations x {TURNS} turns, history {} KB at turn 1 and {} KB at turn {TURNS}",
        levels.join("/"),
        script.requests.first().map_or(0, Bytes::len) / 1000,
        script.requests.last().map_or(0, Bytes::len) / 1000,
    );
    println!(
        "{:>7}  {:<22} {:>8} {:>9} {:>9} {:>6} {:>9} {:>12} {:>10} {:>13}",
        "clients",
        "mode",
        "turns/s",
        "p50 ms",
        "p99 ms",
        "failed",
        "+p50 ms",
        "bytes/turn",
        "processes",
        "cpu/turn ms"
    );
    println!("{}", "-".repeat(114));
    for row in rows {
        let floor = rows
            .iter()
            .find(|r| r.clients == row.clients && r.label.starts_with("floor"));
        let over = match floor {
            Some(floor) if !std::ptr::eq(floor, row) => {
                format!("{:+.3}", ms(row.p50) - ms(floor.p50))
            }
            _ => "-".into(),
        };
        println!(
            "{:>7}  {:<22} {:>8.1} {:>9.3} {:>9.3} {:>6} {:>9} {:>12.0} {:>10} {:>13.3}",
            row.clients,
            row.label,
            row.turns_per_s,
            ms(row.p50),
            ms(row.p99),
            row.failures,
            over,
            row.bytes_per_turn,
            row.processes,
            ms(row.cpu_per_turn)
        );
    }
    for row in rows.iter().filter(|r| r.failures > 0) {
        println!(
            "  {} clients, {}: {} failed; first: {}",
            row.clients,
            row.label,
            row.failures,
            row.first_error.as_deref().unwrap_or("?")
        );
    }
    let last = TURNS - 1;
    let whole = script.whole_prompt_bytes[last];
    let unseen = script.unseen_prompts[last].len();
    let ratio = whole as f64 / unseen.max(1) as f64;
    println!();
    println!(
        "turn {TURNS}: per-turn sends {whole} bytes (the whole prompt), resident sends {unseen} bytes (the unseen messages): {ratio:.1}x fewer"
    );
    println!("goals (reported, not asserted):");
    if let (Some(resident), Some(floor)) = (
        rows.iter()
            .find(|r| r.clients == 16 && r.label == "bridge resident"),
        rows.iter()
            .find(|r| r.clients == 16 && r.label.starts_with("floor")),
    ) {
        let over = ms(resident.p50) - ms(floor.p50);
        println!(
            "  resident overhead above its floor at 16 clients, p50: {over:+.3} ms (goal < 1 ms)  {}",
            if over < 1.0 { "PASS" } else { "MISS" }
        );
        let extra_cpu = ms(resident.cpu_per_turn) - ms(floor.cpu_per_turn);
        let per_core = 16.0 / cores.max(1) as f64;
        println!(
            "    the bridge and its HTTP clients spend {extra_cpu:.3} ms more CPU per turn than the floor; with {per_core:.0} \
             conversations per core ({cores} cores) that alone queues a turn by about {:.1} ms",
            extra_cpu * per_core
        );
        if let Some(http) = rows
            .iter()
            .find(|r| r.clients == 16 && r.label == "floor + HTTP")
        {
            println!(
                "    of which carrying the requests over HTTP (floor + HTTP above the floor): p50 {:+.3} ms, CPU {:+.3} ms per turn",
                ms(http.p50) - ms(floor.p50),
                ms(http.cpu_per_turn) - ms(floor.cpu_per_turn)
            );
            println!(
                "    and the bridge's transforms and sessions (bridge resident above floor + HTTP): p50 {:+.3} ms, CPU {:+.3} ms per turn",
                ms(resident.p50) - ms(http.p50),
                ms(resident.cpu_per_turn) - ms(http.cpu_per_turn)
            );
        }
    }
    println!(
        "  bytes sent on turn {TURNS}, per-turn / resident: {ratio:.1}x (goal >= 10x)  {}",
        if ratio >= 10.0 { "PASS" } else { "MISS" }
    );
    for row in rows.iter().filter(|r| r.label == "bridge resident") {
        println!(
            "  processes started for {} conversations: {} (goal <= {})  {}",
            row.clients,
            row.processes,
            row.clients,
            if row.processes <= row.clients {
                "PASS"
            } else {
                "MISS"
            }
        );
    }
}
