//! Outpost benchmark: `cargo xtask bench outpost`
//! (or `cargo bench -p devin-bridge --bench outpost`).
//!
//! Against the fake fleet API on loopback, with release builds of `devin-bridge` and the fake
//! `devin-remote`, in one run:
//! - **direct**: the floor. This program itself claims each session as it is enqueued and
//!   starts the cached remote binary with the same environment (no watch, no keeper, no
//!   verification): what any orchestrator pays for a claim and a process start.
//! - **1 worker** and **4 workers** (`devin-bridge outpost start`, `max_sessions = 8` each):
//!   sessions are enqueued one by one while the workers watch the queue (the binary is cached
//!   by a warm-up session first), and ended as soon as their remote connects to the gateway.
//!
//! For each: time from enqueue (the watch event) to the remote connected (p50/p99), fleet API
//! requests per served session (list and watch opens included), claim conflicts, and each
//! worker's peak RSS (VmHWM) with the anonymous part of its RSS at the end. The worker's overhead over the floor is printed as a ratio.
//!
//! Goals (reported, never asserted; the bench exits 0 on MISS): p50 < 100 ms from a watch
//! event to the remote started; <= 4 API requests per served session; worker RSS < 30 MiB.
//!
//! Environment: `OUTPOST_BENCH_SESSIONS` (default 200), `OUTPOST_BENCH_INTERVAL_MS` (pause
//! between two enqueues, default 15), `DEVIN_BRIDGE_BIN` (default
//! `target/release/devin-bridge`), `FAKE_DEVIN_REMOTE` (default
//! `target/release/fake-devin-remote`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failure aborts the run

use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use devin_bridge_fake_fleet::{ClaimEventKind, FakeFleet, FleetConfig, SessionSpec, SessionStatus};
use devin_bridge_test_support::artifacts::target_binary;
use devin_bridge_test_support::bench::{env_usize, percentile, status_kib, verdict};
use devin_bridge_test_support::outpost::{Worker, WorkerBuilder};
use tokio::process::Command;

const SHA: &str = "abc1234";
const SUFFIX: &str = "linux_x64";

/// What one scenario measured.
struct Run {
    name: String,
    latencies_ms: Vec<f64>,
    api_requests: usize,
    served: usize,
    conflicts: usize,
    rss_kib: Vec<u64>,
    /// Of each worker's current RSS at the end: anonymous memory (heap, stacks) in KiB.
    anon_kib: Vec<u64>,
}

impl Run {
    /// The `p`th percentile latency, in milliseconds.
    fn p(&self, p: f64) -> f64 {
        let mut sorted: Vec<Duration> = self
            .latencies_ms
            .iter()
            .map(|ms| Duration::from_secs_f64(ms / 1e3))
            .collect();
        sorted.sort_unstable();
        percentile(&sorted, p).as_secs_f64() * 1e3
    }
    fn requests_per_session(&self) -> f64 {
        self.api_requests as f64 / self.served.max(1) as f64
    }
}

/// Fleet API requests (not the static files or the gateway) answered so far.
fn api_requests(fleet: &FakeFleet) -> usize {
    fleet
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/opbeta/"))
        .count()
}

fn conflicts(fleet: &FakeFleet, sessions: &[String]) -> usize {
    sessions
        .iter()
        .map(|s| {
            fleet
                .history(s)
                .iter()
                .filter(|e| e.kind == ClaimEventKind::ClaimConflict)
                .count()
        })
        .sum()
}

fn anonymous_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|rollup| {
            rollup
                .lines()
                .find(|line| line.starts_with("Anonymous:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

/// Ends each session as soon as its remote connects; returns when all are gone.
async fn end_on_connect(fleet: FakeFleet, sessions: Vec<String>) {
    let mut waiting = sessions;
    let mut ended: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    while (!waiting.is_empty() || !ended.is_empty()) && Instant::now() < deadline {
        waiting.retain(|id| {
            if fleet.connected_at(id).is_some() {
                fleet.end_session(id, SessionStatus::Terminated);
                ended.push(id.clone());
                false
            } else {
                true
            }
        });
        ended.retain(|id| fleet.entry(id).is_some());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// `devin-bridge outpost start` as the benchmark runs it: up to 8 sessions, the policy's poll
/// interval and exit confirmation reads, a 100 ms confirmation interval, warnings logged.
fn spawn_worker(bin: &Path, fleet: &FakeFleet, root: &Path, name: &str) -> Worker {
    [
        "watch_idle_timeout_secs",
        "exit_confirm_reads",
        "remote_kill_grace_ms",
        "shutdown_grace_ms",
        "request_timeout_ms",
    ]
    .into_iter()
    .fold(WorkerBuilder::new(fleet, root, name), |worker, key| {
        worker.setting(key, None)
    })
    .binary(bin)
    .outpost("bench")
    .poll_interval(None)
    .log_filter("warn")
    .max_sessions(8)
    .setting("exit_confirm_interval_ms", Some("100"))
    .spawn()
}

/// Workers serving sessions enqueued one by one.
async fn workers_run(
    bin: &Path,
    remote: &Path,
    workers: usize,
    sessions: usize,
    interval: Duration,
) -> Run {
    let fleet = FakeFleet::start(FleetConfig::default())
        .await
        .expect("fleet");
    let outpost = fleet.create_outpost("bench", Some("linux"));
    fleet
        .publish_fake_remote(remote, SHA, SUFFIX)
        .expect("publish");
    let root = tempfile::tempdir().expect("tempdir");
    let mut children: Vec<Worker> = (0..workers)
        .map(|i| spawn_worker(bin, &fleet, root.path(), &format!("w{i}")))
        .collect();
    // Warm-up: every worker has listed and watches; the binary is downloaded and cached.
    let warmups: Vec<String> = (0..workers)
        .map(|_| fleet.enqueue(&outpost, SessionSpec::default()))
        .collect();
    end_on_connect(fleet.clone(), warmups.clone()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = api_requests(&fleet);
    let mut ids = Vec::with_capacity(sessions);
    let queued = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let ender = {
        let fleet = fleet.clone();
        let queued = queued.clone();
        tokio::spawn(async move {
            // Ends sessions as their remotes connect, until aborted.
            loop {
                let waiting: Vec<String> = queued.lock().map(|q| q.clone()).unwrap_or_default();
                let mut connected = Vec::new();
                for id in waiting {
                    if fleet.connected_at(&id).is_some() {
                        fleet.end_session(&id, SessionStatus::Terminated);
                        connected.push(id);
                    }
                }
                if let Ok(mut queue) = queued.lock() {
                    queue.retain(|id| !connected.contains(id));
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    for _ in 0..sessions {
        let id = fleet.enqueue(&outpost, SessionSpec::default());
        if let Ok(mut queue) = queued.lock() {
            queue.push(id.clone());
        }
        ids.push(id);
        tokio::time::sleep(interval).await;
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    while Instant::now() < deadline && ids.iter().any(|id| fleet.entry(id).is_some()) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ender.abort();
    let api = api_requests(&fleet) - before;
    let latencies_ms = ids
        .iter()
        .filter_map(|id| {
            let enqueued = fleet.enqueued_at(id)?;
            let connected = fleet.connected_at(id)?;
            Some(connected.saturating_duration_since(enqueued).as_secs_f64() * 1e3)
        })
        .collect::<Vec<_>>();
    let rss_kib = children
        .iter()
        .filter_map(|w| w.child.id())
        .map(|pid| status_kib(Some(pid), "VmHWM:"))
        .collect();
    let anon_kib = children
        .iter()
        .filter_map(|w| w.child.id())
        .map(anonymous_kib)
        .collect();
    let served = latencies_ms.len();
    let conflicts = conflicts(&fleet, &ids);
    for worker in &mut children {
        if let Some(pid) = worker.child.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = tokio::time::timeout(Duration::from_secs(20), worker.child.wait()).await;
    }
    Run {
        name: format!("{workers} worker{}", if workers == 1 { "" } else { "s" }),
        latencies_ms,
        api_requests: api,
        served,
        conflicts,
        rss_kib,
        anon_kib,
    }
}

/// The floor: claim over HTTP and spawn the binary directly, per session.
async fn direct_run(remote: &Path, sessions: usize, interval: Duration) -> Run {
    let fleet = FakeFleet::start(FleetConfig::default())
        .await
        .expect("fleet");
    let outpost = fleet.create_outpost("bench", Some("linux"));
    let root = tempfile::tempdir().expect("tempdir");
    let client = reqwest_like::Client::new(fleet.api_url());
    let mut ids = Vec::with_capacity(sessions);
    let mut children = Vec::new();
    for _ in 0..sessions {
        let id = fleet.enqueue(&outpost, SessionSpec::default());
        let claimed = client.claim(&id).await;
        let token = claimed["status"]["connect_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let gateway = claimed["status"]["gateway_url"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let state = root.path().join(&id);
        std::fs::create_dir_all(&state).expect("state dir");
        let child = Command::new(remote)
            .arg("serve")
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("DEVIN_OUTPOST_GATEWAY_URL", gateway)
            .env("DEVIN_OUTPOST_CONNECT_TOKEN", token)
            .env("DEVIN_OUTPOST_SESSION_ID", &id)
            .env("DEVIN_REMOTE_STATE_DIR", &state)
            .current_dir(root.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("remote starts");
        children.push(child);
        ids.push(id);
        tokio::time::sleep(interval).await;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline && ids.iter().any(|id| fleet.connected_at(id).is_none()) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let latencies_ms: Vec<f64> = ids
        .iter()
        .filter_map(|id| {
            Some(
                fleet
                    .connected_at(id)?
                    .saturating_duration_since(fleet.enqueued_at(id)?)
                    .as_secs_f64()
                    * 1e3,
            )
        })
        .collect();
    for id in &ids {
        fleet.end_session(id, SessionStatus::Terminated);
    }
    for mut child in children {
        let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    }
    Run {
        name: "direct (floor)".into(),
        served: latencies_ms.len(),
        latencies_ms,
        api_requests: sessions,
        conflicts: 0,
        rss_kib: Vec::new(),
        anon_kib: Vec::new(),
    }
}

/// A minimal claim client for the floor (one request per claim, like any orchestrator).
mod reqwest_like {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::{connect::HttpConnector, Client as Hyper};
    use hyper_util::rt::TokioExecutor;
    use serde_json::Value;

    pub(crate) struct Client {
        http: Hyper<HttpConnector, Full<Bytes>>,
        base: String,
    }

    impl Client {
        pub(crate) fn new(base: String) -> Self {
            Self {
                http: Hyper::builder(TokioExecutor::new()).build(HttpConnector::new()),
                base,
            }
        }

        pub(crate) async fn claim(&self, id: &str) -> Value {
            let request =
                hyper::Request::post(format!("{}/opbeta/outposts/devins/{id}/claim", self.base))
                    .header("authorization", "Bearer machine-token")
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(r#"{"acceptor_id":"floor"}"#)))
                    .expect("request");
            let response = self.http.request(request).await.expect("claim");
            let body = response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes();
            serde_json::from_slice(&body).unwrap_or(Value::Null)
        }
    }
}

fn main() -> ExitCode {
    let sessions = env_usize("OUTPOST_BENCH_SESSIONS", 200);
    let interval = Duration::from_millis(env_usize("OUTPOST_BENCH_INTERVAL_MS", 15) as u64);
    let bin = target_binary("DEVIN_BRIDGE_BIN", "devin-bridge");
    let remote = target_binary("FAKE_DEVIN_REMOTE", "fake-devin-remote");
    for (path, what) in [(&bin, "devin-bridge"), (&remote, "fake-devin-remote")] {
        if !path.is_file() {
            eprintln!("outpost bench: {} not found ({what}); run `cargo xtask bench outpost`, which builds it", path.display());
            return ExitCode::FAILURE;
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let runs = runtime.block_on(async {
        vec![
            direct_run(&remote, sessions, interval).await,
            workers_run(&bin, &remote, 1, sessions, interval).await,
            workers_run(&bin, &remote, 4, sessions, interval).await,
        ]
    });
    println!(
        "outpost: {sessions} sessions enqueued {} ms apart, ended as soon as their remote connects",
        interval.as_millis()
    );
    println!(
        "{:<16} {:>7} {:>10} {:>10} {:>13} {:>10} {:>16}",
        "", "served", "p50 ms", "p99 ms", "API req/sess", "conflicts", "peak RSS MiB"
    );
    for run in &runs {
        let rss = if run.rss_kib.is_empty() {
            "-".to_owned()
        } else {
            run.rss_kib
                .iter()
                .map(|kib| format!("{:.1}", *kib as f64 / 1024.0))
                .collect::<Vec<_>>()
                .join("/")
        };
        println!(
            "{:<16} {:>7} {:>10.2} {:>10.2} {:>13.2} {:>10} {:>16}",
            run.name,
            run.served,
            run.p(50.0),
            run.p(99.0),
            run.requests_per_session(),
            run.conflicts,
            rss
        );
    }
    for run in &runs[1..] {
        let anon: Vec<String> = run
            .anon_kib
            .iter()
            .map(|kib| format!("{:.1}", *kib as f64 / 1024.0))
            .collect();
        println!(
            "{}: anonymous memory at the end {} MiB (the rest of the RSS is the executable's own pages)",
            run.name,
            anon.join("/")
        );
    }
    let floor = &runs[0];
    for run in &runs[1..] {
        println!(
            "{}: p50 {:.2} ms = {:.2}x the floor ({:+.2} ms)",
            run.name,
            run.p(50.0),
            run.p(50.0) / floor.p(50.0),
            run.p(50.0) - floor.p(50.0)
        );
    }
    println!("goals:");
    for run in &runs[1..] {
        let rss_max = run.rss_kib.iter().copied().max().unwrap_or(0) as f64 / 1024.0;
        println!(
            "  {}: p50 < 100 ms: {:.2} {}; <= 4 API requests per session: {:.2} {}; RSS < 30 MiB: {:.1} {}; all served: {} {}",
            run.name,
            run.p(50.0),
            verdict(run.p(50.0) < 100.0),
            run.requests_per_session(),
            verdict(run.requests_per_session() <= 4.0),
            rss_max,
            verdict(rss_max > 0.0 && rss_max < 30.0),
            run.served,
            verdict(run.served == sessions)
        );
    }
    ExitCode::SUCCESS
}
