//! The outpost worker's queue poll, against the fake fleet: a watch stream that stays open and
//! delivers nothing must not hide a pending session for long, and the poll that guarantees it
//! costs an idle worker at most one list request per poll interval (none on a busy queue).
//!
//! Every worker of the rig runs with `--poll-interval-secs 1`.

use crate::common;

use std::time::{Duration, Instant};

use common::outpost::Rig;
use devin_bridge_fake_fleet::{ClaimEventKind as K, FakeFleet, FleetConfig, SessionSpec};
use nix::sys::signal::Signal;

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
