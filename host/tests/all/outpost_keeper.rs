//! The keeper and the worker's own machine: a `devin-bridge` replaced in place (renamed over, or
//! deleted, as a package upgrade does) under a running outpost worker still starts the keeper
//! beside each remote, and a worker whose sessions cannot start on its machine stops claiming
//! instead of churning the fleet queue. Counts are the fake fleet's.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::outpost::{connections, wait_gone, Rig};
use devin_bridge_fake_fleet::{ClaimEventKind as K, FleetConfig, SessionStatus};
use nix::sys::signal::Signal;

const T: Duration = Duration::from_secs(20);

/// The canonical line a worker logs once when it stops claiming.
const STOPPED: &str = "sessions keep failing to start on this machine: claiming stopped";
const RESUMED: &str = "claiming resumed";

/// A copy of this build's `devin-bridge` in its own directory, to replace under a worker.
fn copied_binary(rig: &Rig) -> PathBuf {
    let dir = rig.dir.path().join("bin");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let copy = dir.join("devin-bridge");
    std::fs::copy(env!("CARGO_BIN_EXE_devin-bridge"), &copy).expect("copy the binary");
    copy
}

/// What a package upgrade does: a new file written beside the old one and renamed over it. The
/// new file is not a `devin-bridge` at all, so a keeper started from the path cannot work.
fn replace_by_rename(binary: &Path) {
    let next = binary.with_extension("new");
    std::fs::write(
        &next,
        "#!/bin/sh\necho 'not the running version' >&2\nexit 97\n",
    )
    .expect("write the new version");
    std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::rename(&next, binary).expect("rename over the running binary");
}

fn claims(rig: &Rig, sessions: &[String]) -> usize {
    sessions
        .iter()
        .map(|session| rig.fleet.count_events(session, K::Claimed))
        .sum()
}

/// A worker started from a copy of the binary serves a session, the copy is replaced (by
/// `replace`), and the next session still starts, with its keeper: killing the worker with
/// SIGKILL, which runs no code in it, still ends that remote.
async fn sessions_start_after(replace: impl FnOnce(&Path)) {
    let rig = Rig::start(FleetConfig::default()).await;
    let binary = copied_binary(&rig);
    let mut worker = rig.worker("w").binary(&binary).spawn();
    let before = rig.enqueue_normal();
    rig.wait_connected(&before).await;
    rig.finish(&before).await;

    replace(&binary);
    let after = rig.enqueue_normal();
    rig.wait_connected(&after).await;
    assert_eq!(
        rig.fleet.count_events(&after, K::Claimed),
        1,
        "started on the first claim: {:?}",
        rig.kinds(&after)
    );
    let log = worker.log();
    assert!(!log.contains("cannot start the remote's keeper"), "{log}");
    let remote = rig.report(&after)["pid"].as_i64().expect("pid reported");
    worker.signal(Signal::SIGKILL);
    let _ = worker.child.wait().await;
    assert!(
        wait_gone(remote, Duration::from_secs(5)).await,
        "the remote outlived its killed worker: no keeper watched it\n{}",
        worker.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_renamed_over_under_a_running_worker_still_starts_keepers() {
    sessions_start_after(replace_by_rename).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_deleted_under_a_running_worker_still_starts_keepers() {
    sessions_start_after(|binary| {
        std::fs::remove_file(binary).expect("delete the running binary");
        assert!(!binary.exists());
    })
    .await;
}

/// Sets the mode of every cached `devin-remote` build.
fn chmod_cached_builds(cache: &Path, mode: u32) {
    let blobs = cache.join("blobs");
    let mut changed = 0;
    for entry in std::fs::read_dir(&blobs).expect("the cache has blobs") {
        let path = entry.expect("entry").path();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        changed += 1;
    }
    assert!(changed > 0, "no cached build in {}", blobs.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_sessions_cannot_start_here_stops_claiming_and_a_start_resumes_it() {
    let rig = Rig::start(FleetConfig::default()).await;
    let builder = rig.worker("w");
    let cache = builder.paths().cache;
    let mut worker = builder.spawn();
    // One session served: the build is downloaded, verified and cached.
    let first = rig.enqueue_normal();
    rig.wait_connected(&first).await;
    rig.finish(&first).await;

    // The cached build can no longer be executed on this machine (a cache on a `noexec`
    // mount, a broken mode): every start fails here, whatever the session.
    chmod_cached_builds(&cache, 0o400);
    let sessions: Vec<String> = (0..30).map(|_| rig.enqueue_normal()).collect();
    worker.wait_log(STOPPED, T).await;
    let stopped_at = Instant::now();
    let at_stop = claims(&rig, &sessions);
    tokio::time::sleep(Duration::from_secs(8)).await;
    let in_window = claims(&rig, &sessions);
    eprintln!(
        "claims of {} queued sessions: {at_stop} until the stop, {} in the {:?} after it",
        sessions.len(),
        in_window - at_stop,
        stopped_at.elapsed()
    );
    let log = worker.log();
    assert_eq!(log.matches(STOPPED).count(), 1, "said once:\n{log}");
    assert!(
        log.contains("Permission denied"),
        "the line says why:\n{log}"
    );
    // Before the stop: the limit (3) plus what was already claimed beside them (max_sessions
    // 4); after it, one retry at a time, 1 s, 2 s, 4 s apart (plus jitter).
    assert!(
        at_stop <= 3 + 4,
        "{at_stop} claims before the worker stopped claiming"
    );
    assert!(
        in_window - at_stop <= 4,
        "{} claims in the {:?} after the stop",
        in_window - at_stop,
        stopped_at.elapsed()
    );
    assert!(
        sessions.iter().all(|s| rig.fleet.connected_at(s).is_none()),
        "a session started with an unusable binary"
    );

    // Mended: the next retry starts, and claiming resumes for the rest of the queue.
    chmod_cached_builds(&cache, 0o500);
    let ender = rig.end_when_connected(sessions.clone(), SessionStatus::Terminated);
    rig.wait(Duration::from_secs(40), "sessions start again", |f| {
        sessions.iter().filter(|s| connections(f, s) > 0).count() >= 3
    })
    .await;
    worker.wait_log(RESUMED, T).await;
    ender.abort();
    worker.signal(Signal::SIGTERM);
    assert_eq!(worker.exit_code(T).await, Some(0), "{}", worker.log());
}
