//! `devin-bridge outpost start` against the fake fleet API over real loopback HTTP: the real
//! worker binary, the real keeper, a fake `devin-remote` downloaded, verified and run.

use crate::common;

use std::time::Duration;

use common::outpost::{alive, connections, mode, wait_gone, Rig, REMOTE_SHA, SUFFIX};
use devin_bridge_fake_fleet::{
    ClaimEventKind as K, FleetConfig, RemoteBehaviour, SessionSpec, SessionStatus, Sha256File,
};
use nix::sys::signal::Signal;

const T: Duration = Duration::from_secs(20);

fn remote_pid(rig: &Rig, session: &str) -> i64 {
    rig.report(session)["pid"].as_i64().expect("pid reported")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_session_is_served_in_the_work_directory_and_released_when_it_ends() {
    let rig = Rig::start(FleetConfig::default()).await;
    let worker = rig.worker("w").spawn();
    let session = rig.enqueue_normal();
    rig.wait_connected(&session).await;
    let report = rig.report(&session);
    assert_eq!(report["argv"][1], "serve");
    assert_eq!(
        report["cwd"].as_str(),
        Some(worker.paths.work.to_str().expect("utf-8"))
    );
    assert!(worker.paths.work.join("repos").is_dir());
    let state_dir = worker.paths.data.join("sessions").join(&session);
    assert_eq!(report["state_dir_mode"], "0700");
    assert_eq!(mode(&state_dir), 0o700);
    let pid = remote_pid(&rig, &session);
    assert_eq!(
        report["pgid"].as_i64(),
        Some(pid),
        "the remote leads its own process group"
    );
    rig.fleet.end_session(&session, SessionStatus::Suspended);
    rig.wait(T, "the claim is released and the entry removed", |f| {
        f.entry(&session).is_none()
    })
    .await;
    assert!(wait_gone(pid, T).await, "the remote exited");
    assert_eq!(rig.kinds(&session), vec![K::Claimed, K::ReleasedAndDeleted]);
    assert!(state_dir.is_dir(), "a suspended session keeps its state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remote_sees_exactly_the_allowed_environment_and_none_of_the_workers_secrets() {
    let rig = Rig::start(FleetConfig::default()).await;
    let worker = rig
        .worker("w")
        .env("AWS_SECRET_ACCESS_KEY", "planted-aws")
        .env("ANTHROPIC_API_KEY", "planted-anthropic")
        .env("GITHUB_TOKEN", "planted-github")
        .env("DEVIN_WORKER_ACCEPTOR_ID", "acceptor-env")
        .env("DEVIN_API_URL", "http://127.0.0.1:1")
        .env("LANG", "C.UTF-8")
        .env("TZ", "UTC")
        .env("USER", "worker")
        .env("SSH_AUTH_SOCK", "/tmp/planted.sock")
        .spawn();
    let session = rig.enqueue_normal();
    rig.wait_connected(&session).await;
    let env = rig.remote_env(&session);
    let mut names: Vec<&str> = env.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "DEVIN_OUTPOST_CONNECT_TOKEN",
            "DEVIN_OUTPOST_GATEWAY_URL",
            "DEVIN_OUTPOST_SESSION_ID",
            "DEVIN_REMOTE_STATE_DIR",
            "HOME",
            "LANG",
            "PATH",
            "TZ",
            "USER"
        ]
    );
    let values: Vec<&str> = env.values().filter_map(|v| v.as_str()).collect();
    for planted in ["planted", "machine-token"] {
        assert!(
            !values.iter().any(|v| v.contains(planted)),
            "{planted} reached the remote"
        );
    }
    assert_eq!(env["DEVIN_OUTPOST_SESSION_ID"], session.as_str());
    assert!(
        rig.fleet.history(&session)[0].acceptor.as_deref() == Some("acceptor-env"),
        "DEVIN_WORKER_ACCEPTOR_ID names the claimer"
    );
    assert!(
        !worker.log().contains("machine-token"),
        "the token was logged"
    );
    rig.finish(&session).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_whose_digest_does_not_match_never_runs_and_the_claim_is_released() {
    let rig = Rig::start(FleetConfig::default()).await;
    rig.fleet.publish_binary(
        "bad0001",
        SUFFIX,
        b"#!/bin/sh\ntouch /tmp/should-never-run\n".to_vec(),
        Sha256File::Wrong,
    );
    let worker = rig.worker("w").spawn();
    let session = rig.enqueue(SessionSpec {
        remote_binary_sha: Some("bad0001".into()),
        ..SessionSpec::default()
    });
    rig.wait(T, "claimed and released twice", |f| {
        f.count_events(&session, K::Released) >= 2
    })
    .await;
    worker.wait_log("refusing to run it", T).await;
    assert_eq!(
        rig.fleet
            .downloads(&format!("devin-remote_bad0001_{SUFFIX}")),
        1,
        "a build that failed verification is not downloaded again at once"
    );
    assert!(rig.fleet.connected_at(&session).is_none());
    let blobs = std::fs::read_dir(worker.paths.cache.join("blobs"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(blobs, 0, "an unverified binary was cached");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_needing_the_same_build_download_it_once() {
    let rig = Rig::start(FleetConfig {
        download_delay: Duration::from_millis(400),
        ..FleetConfig::default()
    })
    .await;
    let sessions: Vec<String> = (0..3).map(|_| rig.enqueue_normal()).collect();
    let _worker = rig.worker("w").max_sessions(3).spawn();
    for session in &sessions {
        rig.wait(T, "every remote connects", |f| {
            f.connected_at(session).is_some()
        })
        .await;
    }
    assert_eq!(
        rig.fleet
            .downloads(&format!("devin-remote_{REMOTE_SHA}_{SUFFIX}")),
        1
    );
    let ender = rig.end_when_connected(sessions.clone(), SessionStatus::Terminated);
    for session in &sessions {
        rig.wait(T, "released", |f| f.entry(session).is_none())
            .await;
    }
    ender.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_remote_is_released_at_once_so_its_session_requeues() {
    let rig = Rig::start(FleetConfig::default()).await;
    let session = rig.enqueue(SessionSpec {
        behaviour: RemoteBehaviour::Crash,
        ..SessionSpec::default()
    });
    let _worker = rig.worker("w").spawn();
    rig.wait(T, "claimed, crashed and released", |f| {
        f.history(&session).iter().any(|e| e.kind == K::Released)
    })
    .await;
    let entry = rig.fleet.entry(&session).expect("still queued");
    assert!(
        entry["status"]["phase"] == "pending" || entry["status"]["phase"] == "claimed",
        "{entry}"
    );
    let kinds = rig.kinds(&session);
    assert_eq!(&kinds[..2], &[K::Claimed, K::Released], "{kinds:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_requeued_before_its_release_is_answered_is_claimed_again() {
    // The requeue's watch event reaches the worker before the answer to its release does:
    // the worker must not then forget the requeued entry as stale.
    let rig = Rig::start(FleetConfig::default()).await;
    rig.fleet
        .faults()
        .delay_release_answers(Some(Duration::from_millis(500)));
    let session = rig.enqueue(SessionSpec {
        behaviour: RemoteBehaviour::Crash,
        ..SessionSpec::default()
    });
    let _worker = rig.worker("w").spawn();
    rig.wait(T, "claimed, released and claimed again", |f| {
        f.count_events(&session, K::Claimed) >= 2
    })
    .await;
    let kinds = rig.kinds(&session);
    assert_eq!(
        &kinds[..3],
        &[K::Claimed, K::Released, K::Claimed],
        "{kinds:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_terminated_while_its_remote_runs_has_the_remote_killed_even_if_it_ignores_sigterm(
) {
    let rig = Rig::start(FleetConfig::default()).await;
    let session = rig.enqueue(SessionSpec {
        behaviour: RemoteBehaviour::Hang,
        ..SessionSpec::default()
    });
    let _worker = rig.worker("w").spawn();
    rig.wait_connected(&session).await;
    let pid = remote_pid(&rig, &session);
    rig.fleet.terminate_silently(&session);
    assert!(wait_gone(pid, T).await, "the hung remote was killed");
    rig.wait(T, "released", |f| f.entry(&session).is_none())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_that_disappears_ends_its_remote() {
    let rig = Rig::start(FleetConfig::default()).await;
    let session = rig.enqueue_normal();
    let _worker = rig.worker("w").spawn();
    rig.wait_connected(&session).await;
    let pid = remote_pid(&rig, &session);
    rig.fleet.delete_entry(&session);
    assert!(wait_gone(pid, T).await, "the remote was ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_exit_waits_for_the_lagging_status_before_releasing() {
    let rig = Rig::start(FleetConfig {
        session_status_lag: Duration::from_millis(1500),
        ..FleetConfig::default()
    })
    .await;
    let session = rig.enqueue_normal();
    let _worker = rig.worker("w").spawn();
    rig.wait_connected(&session).await;
    rig.fleet.end_session(&session, SessionStatus::Suspended);
    rig.wait(T, "released", |f| f.entry(&session).is_none())
        .await;
    // Released only once the status said suspended: the entry was deleted, never requeued.
    assert_eq!(rig.kinds(&session), vec![K::Claimed, K::ReleasedAndDeleted]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_that_exits_cleanly_without_its_session_ending_is_released_to_requeue() {
    let rig = Rig::start(FleetConfig::default()).await;
    let session = rig.enqueue(SessionSpec {
        behaviour: RemoteBehaviour::ExitEarly,
        ..SessionSpec::default()
    });
    let worker = rig.worker("w").spawn();
    rig.wait(T, "released back to the queue", |f| {
        f.history(&session).iter().any(|e| e.kind == K::Released)
    })
    .await;
    worker.wait_log("never showed as ended", T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_lost_to_another_worker_is_not_an_error_and_is_retried_later() {
    let rig = Rig::start(FleetConfig::default()).await;
    rig.fleet.faults().claim_conflict_next(1);
    let session = rig.enqueue_normal();
    let worker = rig.worker("w").spawn();
    rig.wait(T, "served after the conflict", |f| {
        f.connected_at(&session).is_some()
    })
    .await;
    assert_eq!(&rig.kinds(&session)[..2], &[K::ClaimConflict, K::Claimed]);
    assert!(!worker.log().contains("ERROR"), "{}", worker.log());
    rig.finish(&session).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_remotes_releases_their_claims_and_exits_zero() {
    let rig = Rig::start(FleetConfig::default()).await;
    let sessions: Vec<String> = (0..2).map(|_| rig.enqueue_normal()).collect();
    let mut worker = rig.worker("w").max_sessions(2).spawn();
    for session in &sessions {
        rig.wait(T, "connected", |f| f.connected_at(session).is_some())
            .await;
    }
    let pids: Vec<i64> = sessions.iter().map(|s| remote_pid(&rig, s)).collect();
    worker.signal(Signal::SIGTERM);
    assert_eq!(worker.exit_code(T).await, Some(0), "{}", worker.log());
    for (session, pid) in sessions.iter().zip(pids) {
        assert!(!alive(pid), "a remote outlived the worker");
        assert_eq!(rig.kinds(session), vec![K::Claimed, K::Released]);
        assert_eq!(
            rig.fleet.entry(session).expect("requeued")["status"]["phase"],
            "pending"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_takes_the_remotes_down_and_the_restarted_worker_recovers_its_claims_within_a_poll()
{
    let rig = Rig::start(FleetConfig::default()).await;
    let session = rig.enqueue_normal();
    let mut first = rig.worker("w").spawn();
    rig.wait_connected(&session).await;
    let pid = remote_pid(&rig, &session);
    first.signal(Signal::SIGKILL);
    let _ = first.child.wait().await;
    assert!(
        wait_gone(pid, Duration::from_secs(5)).await,
        "the remote outlived its killed worker"
    );
    assert_eq!(
        rig.kinds(&session),
        vec![K::Claimed],
        "nothing released yet"
    );
    let restarted_at = std::time::Instant::now();
    let _second = rig.worker("w").spawn();
    rig.wait(T, "served again", |f| connections(f, &session) == 2)
        .await;
    let recovered = rig
        .fleet
        .history(&session)
        .iter()
        .find(|e| e.kind == K::Renewed || e.kind == K::Released)
        .map(|e| e.at)
        .expect("renewed or released");
    assert!(
        recovered.saturating_duration_since(restarted_at) < Duration::from_secs(10),
        "recovery took longer than a start plus one poll interval (the claim deadline is 30 s)"
    );
    rig.finish(&session).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_stops_the_worker_with_a_clear_message() {
    let rig = Rig::start(FleetConfig::default()).await;
    let mut worker = rig.worker("w").spawn();
    worker.wait_log("queue listed", T).await;
    rig.fleet.faults().unauthorized(true);
    rig.fleet.faults().end_streams_after(Some(0));
    let session = rig.enqueue_normal();
    let code = worker.exit_code(T).await;
    assert_ne!(code, Some(0));
    assert!(worker.log().contains("refused"), "{}", worker.log());
    assert!(rig.fleet.history(&session).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_server_errors_is_retried_with_backoff() {
    let rig = Rig::start(FleetConfig::default()).await;
    rig.fleet.faults().fail_next(3, 503);
    let session = rig.enqueue_normal();
    let worker = rig.worker("w").spawn();
    rig.wait(Duration::from_secs(40), "served despite the 503s", |f| {
        f.connected_at(&session).is_some()
    })
    .await;
    assert!(worker.log().contains("503"), "{}", worker.log());
    rig.finish(&session).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_watch_is_detected_and_resumed_from_its_cursor_without_losing_the_event() {
    let rig = Rig::start(FleetConfig::default()).await;
    // The first watch stream will write half of its first event and then go silent.
    rig.fleet.faults().stall_next_stream_mid_event();
    // Polls are far apart, so what finds the session is the stall detection and the resumed
    // watch, not a listing.
    let worker = rig
        .worker("w")
        .watch_idle_timeout_secs(2)
        .poll_interval_secs(60)
        .spawn();
    worker.wait_log("queue listed", T).await;
    let session = rig.enqueue_normal();
    rig.wait(T, "the event is replayed and served", |f| {
        f.connected_at(&session).is_some()
    })
    .await;
    assert!(
        worker.log().contains("watch stream stalled"),
        "{}",
        worker.log()
    );
    let watches: Vec<String> = rig
        .fleet
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("watch=true"))
        .map(|r| r.path)
        .collect();
    assert!(watches.len() >= 2, "{watches:?}");
    assert!(
        watches[1].contains("cursor="),
        "the second watch resumed from a cursor: {watches:?}"
    );
    assert_eq!(
        rig.fleet
            .requests()
            .iter()
            .filter(|r| r.path.starts_with("/opbeta/outposts/devins?")
                && !r.path.contains("watch=true"))
            .count(),
        1,
        "a stall must not cost a relist"
    );
    rig.finish(&session).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_cursor_makes_the_worker_relist() {
    let rig = Rig::start(FleetConfig::default()).await;
    // Every stream ends at once, so the worker keeps reconnecting from its cursor.
    rig.fleet.faults().end_streams_after(Some(0));
    let worker = rig.worker("w").spawn();
    worker.wait_log("queue listed", T).await;
    rig.fleet.expire_cursors_before_now();
    worker.wait_log("relisting", T).await;
    rig.fleet.faults().end_streams_after(None);
    let session = rig.enqueue_normal();
    rig.wait(T, "served after the relist", |f| {
        f.connected_at(&session).is_some()
    })
    .await;
    rig.finish(&session).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_watch_events_do_not_serve_a_session_twice() {
    let rig = Rig::start(FleetConfig::default()).await;
    rig.fleet.faults().duplicate_events(true);
    let worker = rig.worker("w").spawn();
    worker.wait_log("queue listed", T).await;
    let sessions: Vec<String> = (0..5).map(|_| rig.enqueue_normal()).collect();
    let ender = rig.end_when_connected(sessions.clone(), SessionStatus::Terminated);
    for session in &sessions {
        rig.wait(T, "released", |f| f.entry(session).is_none())
            .await;
        assert_eq!(connections(&rig.fleet, session), 1);
        assert_eq!(rig.kinds(session), vec![K::Claimed, K::ReleasedAndDeleted]);
    }
    ender.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outpost_for_another_platform_is_refused_before_any_claim() {
    let rig = Rig::start(FleetConfig::default()).await;
    let mac = rig.fleet.create_outpost("mac-fleet", Some("macos"));
    let session = rig.fleet.enqueue(
        &mac,
        SessionSpec {
            platform: "macos".into(),
            ..SessionSpec::default()
        },
    );
    let mut worker = rig.worker("w").outpost("mac-fleet").spawn();
    assert_ne!(worker.exit_code(T).await, Some(0));
    assert!(
        worker
            .log()
            .contains("serves macos machines and this one is linux"),
        "{}",
        worker.log()
    );
    assert!(rig.fleet.history(&session).is_empty(), "claimed anyway");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_for_another_platform_are_left_alone() {
    let rig = Rig::start(FleetConfig::default()).await;
    let windows = rig.enqueue(SessionSpec {
        platform: "windows".into(),
        ..SessionSpec::default()
    });
    let linux = rig.enqueue_normal();
    let worker = rig.worker("w").spawn();
    rig.wait(T, "the linux one is served", |f| {
        f.connected_at(&linux).is_some()
    })
    .await;
    worker.wait_log("another platform", T).await;
    assert!(rig.fleet.history(&windows).is_empty());
    rig.finish(&linux).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_serves_one_session_and_exits() {
    let rig = Rig::start(FleetConfig::default()).await;
    let sessions = [rig.enqueue_normal(), rig.enqueue_normal()];
    let mut worker = rig.worker("w").arg("--once").spawn();
    rig.wait(T, "one is served", |f| {
        sessions.iter().any(|s| f.connected_at(s).is_some())
    })
    .await;
    let (served, other) = if rig.fleet.connected_at(&sessions[0]).is_some() {
        (&sessions[0], &sessions[1])
    } else {
        (&sessions[1], &sessions[0])
    };
    rig.fleet.end_session(served, SessionStatus::Terminated);
    assert_eq!(worker.exit_code(T).await, Some(0), "{}", worker.log());
    assert!(rig.fleet.history(other).is_empty(), "--once claimed twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_serves_exactly_that_session_and_exits() {
    let rig = Rig::start(FleetConfig::default()).await;
    let other = rig.enqueue_normal();
    let wanted = rig.enqueue_normal();
    let mut worker = rig.worker("w").arg("--session").arg(&wanted).spawn();
    rig.wait(T, "served", |f| f.connected_at(&wanted).is_some())
        .await;
    rig.fleet.end_session(&wanted, SessionStatus::Terminated);
    assert_eq!(worker.exit_code(T).await, Some(0), "{}", worker.log());
    assert!(rig.fleet.history(&other).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_gateway_in_the_claim_the_fallback_is_used_and_without_one_the_claim_is_released()
{
    let rig = Rig::start(FleetConfig {
        omit_gateway_url: true,
        ..FleetConfig::default()
    })
    .await;
    let session = rig.enqueue_normal();
    let worker = rig.worker("w").spawn();
    rig.wait(T, "released for want of a gateway", |f| {
        f.history(&session).iter().any(|e| e.kind == K::Released)
    })
    .await;
    worker.wait_log("no gateway URL", T).await;
    drop(worker);
    let gateway = rig.fleet.gateway_url();
    let _worker = rig.worker("w2").arg("--gateway-url").arg(&gateway).spawn();
    rig.wait(T, "served through the fallback gateway", |f| {
        f.connected_at(&session).is_some()
    })
    .await;
    rig.finish(&session).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_anywhere_is_a_one_line_error() {
    let rig = Rig::start(FleetConfig::default()).await;
    let mut worker = rig.worker("w").env("DEVIN_OUTPOSTS_TOKEN", "").spawn();
    assert_ne!(worker.exit_code(T).await, Some(0));
    let log = worker.log();
    let line = log
        .lines()
        .find(|l| l.contains("no fleet API token"))
        .unwrap_or_else(|| panic!("{log}"));
    for needle in ["--token", "DEVIN_OUTPOSTS_TOKEN", "token_file"] {
        assert!(line.contains(needle), "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_serve_a_hundred_queued_sessions_exactly_once_and_release_every_claim() {
    let rig = Rig::start(FleetConfig::default()).await;
    let sessions: Vec<String> = (0..100).map(|_| rig.enqueue_normal()).collect();
    let ender = rig.end_when_connected(sessions.clone(), SessionStatus::Terminated);
    let mut first = rig.worker("a").max_sessions(8).spawn();
    let mut second = rig.worker("b").max_sessions(8).spawn();
    rig.wait(
        Duration::from_secs(120),
        "every session served and released",
        |f| sessions.iter().all(|s| f.entry(s).is_none()),
    )
    .await;
    ender.abort();
    let mut per_worker = std::collections::HashMap::new();
    for session in &sessions {
        assert_eq!(
            connections(&rig.fleet, session),
            1,
            "{session} served twice"
        );
        let history = rig.fleet.history(session);
        let claims: Vec<_> = history
            .iter()
            .filter(|e| matches!(e.kind, K::Claimed | K::Renewed))
            .collect();
        assert_eq!(claims.len(), 1, "{session}: {history:?}");
        assert_eq!(
            history.last().map(|e| &e.kind),
            Some(&K::ReleasedAndDeleted),
            "{session}: {history:?}"
        );
        *per_worker
            .entry(claims[0].acceptor.clone())
            .or_insert(0usize) += 1;
    }
    assert_eq!(per_worker.len(), 2, "both workers served: {per_worker:?}");
    for worker in [&mut first, &mut second] {
        worker.signal(Signal::SIGTERM);
        assert_eq!(worker.exit_code(T).await, Some(0), "{}", worker.log());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_over_several_pages_merges_the_rows_repeated_at_page_boundaries() {
    let rig = Rig::start(FleetConfig::default()).await;
    for _ in 0..250 {
        rig.enqueue_normal();
    }
    let mut worker = rig.worker("w").max_sessions(1).spawn();
    worker.wait_log("queue listed entries=250", T).await;
    let pages = rig
        .fleet
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/opbeta/outposts/devins?") && !r.path.contains("watch="))
        .count();
    assert!(
        pages >= 3,
        "250 rows at 100 a page take 3 pages, saw {pages}"
    );
    worker.signal(Signal::SIGTERM);
    assert_eq!(worker.exit_code(T).await, Some(0), "{}", worker.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_workers_claim_expires_and_another_worker_serves_the_session() {
    let rig = Rig::start(FleetConfig {
        claim_ttl: Duration::from_secs(1),
        ..FleetConfig::default()
    })
    .await;
    let session = rig.enqueue_normal();
    let mut first = rig.worker("a").spawn();
    rig.wait_connected(&session).await;
    first.signal(Signal::SIGKILL);
    let _ = first.child.wait().await;
    rig.wait(T, "the claim expired and the session requeued", |f| {
        f.history(&session).iter().any(|e| e.kind == K::Expired)
    })
    .await;
    let _second = rig.worker("b").spawn();
    rig.wait(T, "another worker serves it", |f| {
        connections(f, &session) == 2
    })
    .await;
    let claimers: Vec<Option<String>> = rig
        .fleet
        .history(&session)
        .into_iter()
        .filter(|e| e.kind == K::Claimed)
        .map(|e| e.acceptor)
        .collect();
    assert_eq!(claimers.len(), 2);
    assert_ne!(claimers[0], claimers[1]);
    rig.finish(&session).await;
}
