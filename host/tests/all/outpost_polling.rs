//! The outpost worker against the fake fleet: its queue poll, and how it picks its outpost.
//!
//! - The poll: a watch stream that stays open and delivers nothing must not hide a pending
//!   session for long, and the poll that guarantees it costs an idle worker at most one list
//!   request per poll interval (none on a busy queue).
//! - The outpost: `--outpost ID` is looked up alone (`GET /outposts/{id}`); without
//!   `--outpost`, a worker on a terminal asks which outpost to serve.
//!
//! Every worker runs with `--poll-interval-secs 1`.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::components_dir;
use common::outpost::Rig;
use devin_bridge_fake_fleet::{
    ClaimEventKind as K, FakeFleet, FleetConfig, SessionSpec, SessionStatus,
};
use nix::sys::signal::Signal;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

const T: Duration = Duration::from_secs(20);
/// The rig's `--poll-interval-secs`.
const POLL: Duration = Duration::from_secs(1);

/// Fleet API requests answered by `deadline` (downloads and the gateway excluded).
fn api_requests(fleet: &FakeFleet, deadline: Instant) -> Vec<String> {
    fleet
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/opbeta/outposts/") && r.at <= deadline)
        .map(|r| r.path)
        .collect()
}

fn is_list(path: &str) -> bool {
    path.starts_with("/opbeta/outposts/devins?") && !path.contains("watch=true")
}

fn is_watch(path: &str) -> bool {
    path.starts_with("/opbeta/outposts/devins?") && path.contains("watch=true")
}

/// Waits until the worker has listed the queue and opened its watch.
async fn wait_watching(rig: &Rig) {
    rig.wait(T, "the worker watches the queue", |f| {
        f.requests().iter().any(|r| is_watch(&r.path))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_queued_behind_a_stalled_watch_is_claimed_within_a_few_poll_intervals() {
    let rig = Rig::start(FleetConfig::default()).await;
    // The first watch stream sends nothing (no keepalive) until an event exists, then half of
    // that event, and then nothing more while the connection stays open. With a 300 s idle
    // timeout only the poll can find the session within this test's bound.
    rig.fleet.faults().stall_next_stream_mid_event();
    let mut worker = rig.worker("w").watch_idle_timeout_secs(300).spawn();
    wait_watching(&rig).await;
    let session = rig.enqueue_normal();
    let enqueued = Instant::now();
    rig.wait(
        Duration::from_secs(30),
        "the session is claimed although the watch stream stalled",
        |f| f.history(&session).iter().any(|e| e.kind == K::Claimed),
    )
    .await;
    let took = enqueued.elapsed();
    eprintln!(
        "claimed {took:?} after it was queued behind a stalled stream (poll interval {POLL:?})"
    );
    let requests = api_requests(&rig.fleet, Instant::now());
    let watches = requests.iter().filter(|p| is_watch(p)).count();
    assert_eq!(
        watches, 1,
        "the stalled stream was still the only one (the poll found the session, not a reopened watch): {requests:?}"
    );
    assert!(
        requests.iter().filter(|p| is_list(p)).count() >= 2,
        "a poll listed the queue: {requests:?}"
    );
    assert!(
        !worker.log().contains("watch stream stalled"),
        "the 300 s idle timeout cannot have passed:\n{}",
        worker.log()
    );
    rig.wait_connected(&session).await;
    rig.finish(&session).await;
    worker.signal(Signal::SIGTERM);
    assert_eq!(worker.exit_code(T).await, Some(0), "{}", worker.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_polls_a_stalled_watch_is_still_dropped_at_its_idle_timeout_and_resumed_from_its_cursor(
) {
    let rig = Rig::start(FleetConfig::default()).await;
    rig.fleet.faults().stall_next_stream_mid_event();
    let mut worker = rig.worker("w").watch_idle_timeout_secs(3).spawn();
    wait_watching(&rig).await;
    let session = rig.enqueue_normal();
    rig.wait_connected(&session).await;
    // The polls go on while the stream is silent; they do not reset its idle timeout.
    worker.wait_log("watch stream stalled", T).await;
    rig.wait(T, "the watch is reopened", |f| {
        f.requests().iter().filter(|r| is_watch(&r.path)).count() >= 2
    })
    .await;
    let watches: Vec<String> = api_requests(&rig.fleet, Instant::now())
        .into_iter()
        .filter(|p| is_watch(p))
        .collect();
    assert!(
        watches[1].contains("cursor="),
        "the second watch resumed from a cursor: {watches:?}"
    );
    assert!(
        !worker.log().contains("watch cursor expired"),
        "a stall is resumed, not relisted:\n{}",
        worker.log()
    );
    rig.finish(&session).await;
    worker.signal(Signal::SIGTERM);
    assert_eq!(worker.exit_code(T).await, Some(0), "{}", worker.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_with_a_healthy_stream_lists_at_most_once_per_poll_interval() {
    const INTERVALS: u32 = 8;
    let rig = Rig::start(FleetConfig::default()).await;
    let spawned = Instant::now();
    let mut worker = rig.worker("w").spawn();
    wait_watching(&rig).await;
    let deadline = spawned + POLL * INTERVALS;
    tokio::time::sleep_until(deadline.into()).await;
    let requests = api_requests(&rig.fleet, deadline);
    let lists = requests.iter().filter(|p| is_list(p)).count();
    let watches = requests.iter().filter(|p| is_watch(p)).count();
    eprintln!(
        "{INTERVALS} poll intervals after start: {lists} list requests (1 at start-up), {watches} watch, {} requests in all",
        requests.len()
    );
    assert!(
        lists <= INTERVALS as usize + 1,
        "at most one list per interval plus the start-up listing: {requests:?}"
    );
    // Not vacuous: the poll runs (a generous floor, the machine may be busy).
    assert!(
        lists > INTERVALS as usize / 2,
        "the idle worker polls: {requests:?}"
    );
    assert_eq!(watches, 1, "the healthy stream stayed open: {requests:?}");
    assert_eq!(
        requests.len(),
        lists + watches + 1,
        "nothing but the outpost lookup, the listings and the watch: {requests:?}"
    );
    worker.signal(Signal::SIGTERM);
    assert_eq!(worker.exit_code(T).await, Some(0), "{}", worker.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_delivers_events_makes_the_poll_unnecessary() {
    let rig = Rig::start(FleetConfig::default()).await;
    let mut worker = rig.worker("w").spawn();
    wait_watching(&rig).await;
    // Entries for another platform are events the worker reads but never claims: a busy
    // queue without sessions to serve.
    let windows = SessionSpec {
        platform: "windows".into(),
        ..SessionSpec::default()
    };
    let first = Instant::now();
    for _ in 0..25 {
        rig.enqueue(windows.clone());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let last = Instant::now();
    // From one interval after the first event, every interval has seen several events.
    let lists = rig
        .fleet
        .requests()
        .into_iter()
        .filter(|r| is_list(&r.path) && r.at > first + POLL && r.at <= last)
        .count();
    eprintln!(
        "{lists} list requests in {:?} of events every 200 ms",
        last - (first + POLL)
    );
    assert!(
        lists <= 1,
        "events every 200 ms leave no poll due (one allowed for a stall of the machine): {lists}"
    );
    worker.signal(Signal::SIGTERM);
    assert_eq!(worker.exit_code(T).await, Some(0), "{}", worker.log());
}

// --- Which outpost: the lookup by id and the prompt.

const ORCHESTRATOR: &str = "orchestrator-token";

fn outpost_lookups(fleet: &FakeFleet) -> Vec<(String, u16)> {
    fleet
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/opbeta/outposts/outposts/"))
        .map(|r| (r.path, r.status))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_outpost_id_is_a_one_line_error_naming_it() {
    let rig = Rig::start(FleetConfig::default()).await;
    let missing = "outpost_env-000000000000";
    let mut worker = rig
        .worker("w")
        .outpost(missing)
        .env("DEVIN_OUTPOSTS_TOKEN", ORCHESTRATOR)
        .spawn();
    assert_eq!(worker.exit_code(T).await, Some(1), "{}", worker.log());
    let log = worker.log();
    let last = log.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        format!(
            "devin-bridge: no outpost {missing} in this account (`devin-bridge outpost list` shows its outposts)"
        ),
        "{log}"
    );
    assert_eq!(
        outpost_lookups(&rig.fleet),
        vec![(format!("/opbeta/outposts/outposts/{missing}"), 404)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_outpost_id_is_looked_up_alone_and_served() {
    let rig = Rig::start(FleetConfig::default()).await;
    let mut worker = rig
        .worker("w")
        .outpost(&rig.outpost_id)
        .env("DEVIN_OUTPOSTS_TOKEN", ORCHESTRATOR)
        .spawn();
    let session = rig.enqueue_normal();
    rig.wait_connected(&session).await;
    assert_eq!(
        outpost_lookups(&rig.fleet),
        vec![(format!("/opbeta/outposts/outposts/{}", rig.outpost_id), 200)]
    );
    assert!(
        !rig.fleet
            .requests()
            .iter()
            .any(|r| r.path == "/opbeta/outposts/outposts"),
        "no outpost list when the id was found"
    );
    rig.finish(&session).await;
    worker.signal(Signal::SIGTERM);
    assert_eq!(worker.exit_code(T).await, Some(0), "{}", worker.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outpost_id_the_token_may_not_read_alone_is_found_in_the_list() {
    let rig = Rig::start(FleetConfig::default()).await;
    // The fake fleet refuses `GET /outposts/{id}` to the machine token (403) and lets it list.
    let mut worker = rig.worker("w").outpost(&rig.outpost_id).spawn();
    let session = rig.enqueue_normal();
    rig.wait_connected(&session).await;
    assert_eq!(
        outpost_lookups(&rig.fleet),
        vec![(format!("/opbeta/outposts/outposts/{}", rig.outpost_id), 403)]
    );
    assert!(rig
        .fleet
        .requests()
        .iter()
        .any(|r| r.path == "/opbeta/outposts/outposts" && r.status == 200));
    rig.finish(&session).await;
    worker.signal(Signal::SIGTERM);
    assert_eq!(worker.exit_code(T).await, Some(0), "{}", worker.log());
}

/// `outpost start` without `--outpost`, with `--once`, as the rig's workers otherwise run.
fn start_without_outpost(rig: &Rig, name: &str) -> (Vec<String>, std::path::PathBuf) {
    let root = rig.dir.path().join(name);
    let (work, data, home) = (root.join("work"), root.join("data"), root.join("home"));
    for dir in [&work, &home] {
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    let policy = root.join("outpost.toml");
    std::fs::write(
        &policy,
        format!(
            "mode = \"outpost\"\n[components.sse]\npath = {sse:?}\n[outpost]\nwork_dir = {work:?}\ndata_dir = {data:?}\ncache_dir = {cache:?}\nexit_confirm_reads = 15\nexit_confirm_interval_ms = 200\nremote_kill_grace_ms = 1000\nshutdown_grace_ms = 5000\nrequest_timeout_ms = 5000\nnetwork_enforcement = \"proxy\"\n",
            sse = components_dir().join("sse.wasm").display().to_string(),
            work = work.display().to_string(),
            data = data.display().to_string(),
            cache = rig.dir.path().join("cache").display().to_string(),
        ),
    )
    .expect("policy");
    let argv = vec![
        env!("CARGO_BIN_EXE_devin-bridge").to_owned(),
        "outpost".into(),
        "start".into(),
        "--once".into(),
        "--poll-interval-secs".into(),
        "1".into(),
        "--policy".into(),
        policy.display().to_string(),
        "--api-url".into(),
        rig.fleet.api_url(),
        "--static-base-url".into(),
        rig.fleet.static_base_url(),
    ];
    (argv, home)
}

fn worker_env(command: &mut Command, home: &Path) {
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CACHE_HOME", common::bridge_cache_home())
        .env("DEVIN_BRIDGE_LOG", "info")
        .env("DEVIN_OUTPOSTS_TOKEN", "machine-token")
        .kill_on_drop(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_terminal_several_outposts_stop_the_worker_with_their_ids() {
    let rig = Rig::start(FleetConfig::default()).await;
    let other = rig.fleet.create_outpost("alpha-fleet", Some("linux"));
    let (argv, home) = start_without_outpost(&rig, "w");
    let mut command = Command::new(&argv[0]);
    command.args(&argv[1..]).stdin(Stdio::null());
    worker_env(&mut command, &home);
    let output = tokio::time::timeout(T, command.output())
        .await
        .expect("the worker exits")
        .expect("the worker runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("devin-bridge: --outpost is required: this account has 2 outposts")
            && last.contains(&format!("alpha-fleet = {other}"))
            && last.contains(&format!("linux-fleet = {}", rig.outpost_id)),
        "{stderr}"
    );
    assert!(
        !stderr.contains("Outpost number"),
        "no prompt without a terminal: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_the_worker_asks_which_outpost_to_serve() {
    // util-linux `script` gives the worker a pseudo-terminal as its stdin and stderr.
    let Ok(script) = which("script") else {
        eprintln!("SKIPPED: no `script` (util-linux) on PATH to run the worker on a terminal");
        return;
    };
    let rig = Rig::start(FleetConfig::default()).await;
    let alpha = rig.fleet.create_outpost("alpha-fleet", Some("linux"));
    let zulu = rig.fleet.create_outpost("zulu-fleet", Some("linux"));
    let (argv, home) = start_without_outpost(&rig, "w");
    let mut command = Command::new(script);
    command
        .args(["-q", "-e", "-f", "-c", &argv.join(" "), "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    worker_env(&mut command, &home);
    let mut child = command.spawn().expect("script runs");
    let mut terminal = child.stdout.take().expect("stdout");
    let mut keys = child.stdin.take().expect("stdin");
    let mut screen = String::new();
    let prompt = "Outpost number (1-3): ";
    let deadline = Instant::now() + T;
    while !screen.contains(prompt) {
        let mut buffer = [0u8; 4096];
        let read = tokio::time::timeout_at(deadline.into(), terminal.read(&mut buffer))
            .await
            .unwrap_or_else(|_| panic!("no prompt on the terminal:\n{screen}"))
            .expect("read the terminal");
        assert!(read > 0, "the terminal closed before the prompt:\n{screen}");
        screen.push_str(&String::from_utf8_lossy(&buffer[..read]));
    }
    // Sorted by name: alpha-fleet, linux-fleet, zulu-fleet.
    for (number, name, id) in [
        (1, "alpha-fleet", alpha.as_str()),
        (2, "linux-fleet", rig.outpost_id.as_str()),
        (3, "zulu-fleet", zulu.as_str()),
    ] {
        let row = screen
            .lines()
            .find(|line| line.contains(&format!("{number}) {name}")))
            .unwrap_or_else(|| panic!("no row {number} for {name}:\n{screen}"));
        assert!(row.contains(id), "{row}");
    }
    keys.write_all(b"3\n").await.expect("answer");
    keys.flush().await.expect("answer");
    // The worker serves zulu-fleet: its session is claimed, then `--once` ends the worker.
    let session = rig.fleet.enqueue(&zulu, SessionSpec::default());
    let mut rest = Vec::new();
    let reader = tokio::spawn(async move {
        let _ = terminal.read_to_end(&mut rest).await;
        rest
    });
    rig.wait(T, "the chosen outpost's session is served", |f| {
        f.connected_at(&session).is_some()
    })
    .await;
    rig.fleet.end_session(&session, SessionStatus::Terminated);
    let status = tokio::time::timeout(T, child.wait())
        .await
        .expect("the worker exits after its one session")
        .expect("wait");
    screen.push_str(&String::from_utf8_lossy(&reader.await.unwrap_or_default()));
    assert_eq!(status.code(), Some(0), "{screen}");
    assert!(screen.contains("outpost chosen at the prompt"), "{screen}");
    // The worker percent-encodes everything but letters and digits in a query value.
    let encoded = zulu.replace('_', "%5F").replace('-', "%2D");
    let watched: Vec<String> = api_requests(&rig.fleet, Instant::now())
        .into_iter()
        .filter(|p| is_watch(p))
        .collect();
    assert!(
        !watched.is_empty()
            && watched
                .iter()
                .all(|p| p.contains(&format!("outpost={encoded}&"))),
        "{watched:?}"
    );
}

/// The path of `program` on PATH.
fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
        .ok_or(())
}
