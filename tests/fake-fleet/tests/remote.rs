//! The fake `devin-remote` binary against the fake gateway: real processes, real sockets.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use devin_bridge_fake_fleet::{
    FakeFleet, FleetConfig, RemoteBehaviour, SessionSpec, SessionStatus,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

const SECOND: Duration = Duration::from_secs(1);

struct Started {
    fleet: FakeFleet,
    session: String,
    token: String,
}

/// A fleet with one session of `behaviour`, claimed by `w1` over HTTP.
async fn claimed(behaviour: RemoteBehaviour) -> Started {
    let fleet = FakeFleet::start(FleetConfig::default()).await.unwrap();
    let outpost = fleet.create_outpost("rhel", Some("linux"));
    let session = fleet.enqueue(
        &outpost,
        SessionSpec {
            behaviour,
            ..SessionSpec::default()
        },
    );
    let mut stream = tokio::net::TcpStream::connect(fleet.api_url().trim_start_matches("http://"))
        .await
        .unwrap();
    let body = json!({"acceptor_id": "w1"}).to_string();
    let request = format!(
        "POST /opbeta/outposts/devins/{session}/claim HTTP/1.1\r\nHost: f\r\nAuthorization: Bearer machine-token\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let json_start = raw.find("\r\n\r\n").unwrap() + 4;
    let claim: Value = serde_json::from_str(&raw[json_start..]).unwrap();
    let token = claim["status"]["connect_token"]
        .as_str()
        .unwrap()
        .to_owned();
    Started {
        fleet,
        session,
        token,
    }
}

fn remote(started: &Started) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fake-devin-remote"));
    command
        .arg("serve")
        .env("DEVIN_OUTPOST_GATEWAY_URL", started.fleet.gateway_url())
        .env("DEVIN_OUTPOST_CONNECT_TOKEN", &started.token)
        .env("DEVIN_OUTPOST_SESSION_ID", &started.session)
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

async fn exits(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    tokio::time::timeout(within, child.wait())
        .await
        .ok()
        .map(|status| status.unwrap())
}

#[tokio::test]
async fn a_normal_remote_reports_connects_and_exits_when_the_session_ends() {
    let started = claimed(RemoteBehaviour::Normal).await;
    let state = tempfile::tempdir().unwrap();
    std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut child = remote(&started)
        .env("DEVIN_REMOTE_STATE_DIR", state.path())
        .spawn()
        .unwrap();
    let (fleet, session) = (&started.fleet, started.session.as_str());
    assert!(
        fleet
            .wait_until(5 * SECOND, |f| f.connected_at(session).is_some())
            .await
    );
    let report = &fleet.reports(session)[0];
    assert_eq!(report["argv"][1], "serve");
    assert_eq!(report["state_dir_mode"], "0700");
    assert_eq!(report["pid"], child.id().unwrap());
    assert!(report["pgid"].as_u64().is_some());
    assert_eq!(report["env"]["DEVIN_OUTPOST_SESSION_ID"], session);
    assert!(state.path().join("report.json").exists());
    assert_eq!(
        fleet.entry(session).unwrap()["status"]["session_status"],
        "running"
    );
    fleet.end_session(session, SessionStatus::Terminated);
    assert_eq!(exits(&mut child, 5 * SECOND).await.unwrap().code(), Some(0));
    assert!(fleet.disconnected_at(session).is_none());
}

#[tokio::test]
async fn a_killed_remote_is_seen_disconnecting() {
    let started = claimed(RemoteBehaviour::Normal).await;
    let mut child = remote(&started).spawn().unwrap();
    let (fleet, session) = (&started.fleet, started.session.as_str());
    assert!(
        fleet
            .wait_until(5 * SECOND, |f| f.connected_at(session).is_some())
            .await
    );
    child.kill().await.unwrap();
    assert!(
        fleet
            .wait_until(5 * SECOND, |f| f.disconnected_at(session).is_some())
            .await
    );
}

#[tokio::test]
async fn crash_exit_early_and_hang() {
    let started = claimed(RemoteBehaviour::Crash).await;
    let mut child = remote(&started).spawn().unwrap();
    assert_eq!(exits(&mut child, 5 * SECOND).await.unwrap().code(), Some(3));

    let started = claimed(RemoteBehaviour::ExitEarly).await;
    let mut child = remote(&started).spawn().unwrap();
    assert_eq!(exits(&mut child, 5 * SECOND).await.unwrap().code(), Some(0));
    let entry = started.fleet.entry(&started.session).unwrap();
    assert_eq!(entry["status"]["session_status"], "running");

    let started = claimed(RemoteBehaviour::Hang).await;
    let mut child = remote(&started).spawn().unwrap();
    let session = started.session.as_str();
    assert!(
        started
            .fleet
            .wait_until(5 * SECOND, |f| f.connected_at(session).is_some())
            .await
    );
    // Wait until it catches SIGTERM (bit 15 of SigCgt in /proc/<pid>/status).
    let pid = child.id().unwrap().to_string();
    let catches_term = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|status| {
                let mask = status.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
                u64::from_str_radix(mask.trim(), 16).ok()
            })
            .is_some_and(|mask| mask & (1 << 14) != 0)
    };
    for _ in 0..250 {
        if catches_term() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(catches_term(), "the hanging remote handles SIGTERM");
    let pid: i32 = pid.parse().expect("a pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM to the remote");
    assert!(exits(&mut child, Duration::from_millis(500))
        .await
        .is_none());
    child.kill().await.unwrap();
}

#[tokio::test]
async fn a_remote_without_its_environment_exits_2() {
    let started = claimed(RemoteBehaviour::Normal).await;
    let mut child = remote(&started)
        .env_remove("DEVIN_OUTPOST_CONNECT_TOKEN")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert_eq!(exits(&mut child, 5 * SECOND).await.unwrap().code(), Some(2));
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-devin-remote"))
        .arg("run")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert_eq!(exits(&mut child, 5 * SECOND).await.unwrap().code(), Some(2));
}

#[tokio::test]
async fn a_probing_remote_reports_direct_and_proxied_attempts() {
    let target = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target_addr = target.local_addr().unwrap().to_string();
    // A proxy that refuses a CONNECT to the probe's target and tunnels the rest (the remote
    // reaches its gateway through HTTPS_PROXY too).
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let refused = target_addr.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = proxy.accept().await {
            let refused = refused.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut byte).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => head.push(byte[0]),
                    }
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let authority = head
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned();
                if authority == refused {
                    let _ = stream
                        .write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                        .await;
                    return;
                }
                let Ok(mut upstream) = tokio::net::TcpStream::connect(&authority).await else {
                    return;
                };
                let _ = stream
                    .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                    .await;
                let _ = tokio::io::copy_bidirectional(&mut stream, &mut upstream).await;
            });
        }
    });
    let started = claimed(RemoteBehaviour::Probe(vec![target_addr.clone()])).await;
    let mut child = remote(&started)
        .env("HTTPS_PROXY", &proxy_url)
        .spawn()
        .unwrap();
    let (fleet, session) = (&started.fleet, started.session.as_str());
    assert!(
        fleet
            .wait_until(5 * SECOND, |f| f.reports(session).len() == 2)
            .await
    );
    let probe = &fleet.reports(session)[1]["probe"][0];
    assert_eq!(probe["target"], target_addr.as_str());
    assert_eq!(probe["direct"], "connected");
    assert_eq!(probe["via_proxy"], "HTTP/1.1 403 Forbidden");
    // Then it behaves normally.
    tokio::time::sleep(Duration::from_millis(100)).await;
    fleet.end_session(session, SessionStatus::Suspended);
    assert_eq!(exits(&mut child, 5 * SECOND).await.unwrap().code(), Some(0));
    drop(target);
}

#[tokio::test]
async fn a_remote_that_loses_the_gateway_exits_1() {
    let started = claimed(RemoteBehaviour::Normal).await;
    let mut child = remote(&started).stderr(Stdio::null()).spawn().unwrap();
    let session = started.session.clone();
    assert!(
        started
            .fleet
            .wait_until(5 * SECOND, |f| f.connected_at(&session).is_some())
            .await
    );
    started.fleet.shutdown().await;
    assert_eq!(exits(&mut child, 5 * SECOND).await.unwrap().code(), Some(1));
}

#[tokio::test]
async fn the_fake_remote_can_be_served_as_the_latest_binary() {
    let fleet = FakeFleet::start(FleetConfig::default()).await.unwrap();
    let path = std::path::Path::new(env!("CARGO_BIN_EXE_fake-devin-remote"));
    fleet
        .publish_fake_remote(path, "f00dfee", "linux_x64")
        .unwrap();
    let base = fleet.static_base_url();
    let static_path = base.trim_start_matches(&fleet.api_url());
    let mut stream = tokio::net::TcpStream::connect(fleet.api_url().trim_start_matches("http://"))
        .await
        .unwrap();
    let request = format!(
        "GET {static_path}/devin-remote_f00dfee_linux_x64 HTTP/1.1\r\nHost: f\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let body_start = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert_eq!(raw[body_start..], std::fs::read(path).unwrap()[..]);
    assert_eq!(fleet.downloads("devin-remote_f00dfee_linux_x64"), 1);
}
