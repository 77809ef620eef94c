//! A session's network policy, enforced by its own egress guard: through proxy variables
//! only (advisory), and in a network namespace whose only way out is the guard (enforced; this
//! needs root, which CI has).

use crate::common;

use std::time::Duration;

use common::outpost::Rig;
use devin_bridge_fake_fleet::{FleetConfig, RemoteBehaviour, SessionSpec};
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(20);

/// Two loopback listeners: one the policy allows, one it does not.
struct Targets {
    _allowed: std::net::TcpListener,
    _denied: std::net::TcpListener,
    allowed: String,
    denied: String,
}

fn targets() -> Targets {
    let allowed = std::net::TcpListener::bind("127.0.0.3:0").expect("bind 127.0.0.3");
    let denied = std::net::TcpListener::bind("127.0.0.4:0").expect("bind 127.0.0.4");
    // Accept and hang up at once, so a tunnel to the allowed target ends (and is audited).
    let acceptor = allowed.try_clone().expect("clone");
    std::thread::spawn(move || {
        for connection in acceptor.incoming() {
            drop(connection);
        }
    });
    Targets {
        allowed: allowed.local_addr().expect("addr").to_string(),
        denied: denied.local_addr().expect("addr").to_string(),
        _allowed: allowed,
        _denied: denied,
    }
}

fn probe_session(rig: &Rig, targets: &Targets) -> String {
    rig.enqueue(SessionSpec {
        network_policy: Some(json!({
            "enabled": true,
            "allow": [{"ipv4": "127.0.0.3/32"}, {"hostname": "*.example.test"}]
        })),
        behaviour: RemoteBehaviour::Probe(vec![targets.allowed.clone(), targets.denied.clone()]),
        ..SessionSpec::default()
    })
}

/// The remote's probe results, by target.
async fn probe_results(rig: &Rig, session: &str) -> Vec<Value> {
    rig.wait(T, "the remote reports its probe", |f| {
        f.reports(session).iter().any(|r| r.get("probe").is_some())
    })
    .await;
    rig.fleet
        .reports(session)
        .into_iter()
        .find_map(|r| r.get("probe").and_then(Value::as_array).cloned())
        .expect("probe")
}

/// Through the guard, the allowed target (first) got a tunnel and the other (second) a 403.
fn assert_guard_decided(results: &[Value]) {
    let status = |result: &Value| result["via_proxy"].as_str().unwrap_or_default().to_owned();
    assert!(status(&results[0]).contains(" 200"), "{results:?}");
    assert!(status(&results[1]).contains(" 403"), "{results:?}");
}

fn audit_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn decision_for(lines: &[Value], host: &str) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["host"] == host)
        .map(|l| l["decision"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_namespace_the_guard_is_the_remotes_proxy_and_audits_every_decision() {
    let rig = Rig::start(FleetConfig::default()).await;
    let targets = targets();
    let worker = rig.worker("w").spawn();
    let session = probe_session(&rig, &targets);
    let results = probe_results(&rig, &session).await;
    let env = rig.remote_env(&session);
    let proxy = env["HTTPS_PROXY"]
        .as_str()
        .expect("a proxy is set")
        .to_owned();
    assert!(proxy.starts_with("http://127.0.0.1:"), "{proxy}");
    for name in ["HTTP_PROXY", "ALL_PROXY", "https_proxy"] {
        assert_eq!(env[name], proxy.as_str(), "{name}");
    }
    assert_guard_decided(&results);
    // Advisory only: a program that ignores the proxy variables still gets out.
    assert_eq!(results[1]["direct"], "connected", "{results:?}");
    assert!(
        worker.log().contains("proxy variables only"),
        "{}",
        worker.log()
    );
    // A tunnel's line is written when it closes.
    let audit_file = worker
        .paths
        .data
        .join("audit")
        .join(format!("{session}.jsonl"));
    let deadline = std::time::Instant::now() + T;
    while decision_for(&audit_lines(&audit_file), "127.0.0.3").is_empty()
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let audit = audit_lines(&audit_file);
    assert_eq!(common::outpost::mode(&audit_file), 0o600);
    assert!(
        decision_for(&audit, "127.0.0.3").contains(&"allow".to_owned()),
        "{audit:?}"
    );
    assert!(
        decision_for(&audit, "127.0.0.4").contains(&"deny".to_owned()),
        "{audit:?}"
    );
    rig.finish(&session).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_namespace_the_remote_reaches_nothing_but_its_guard() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test makes network namespaces and needs root (CI runs as root)"
    );
    let rig = Rig::start(FleetConfig::default()).await;
    let targets = targets();
    let worker = rig.worker("w").spawn_with_enforcement("namespace");
    let session = probe_session(&rig, &targets);
    let results = probe_results(&rig, &session).await;
    for result in &results {
        assert!(
            result["direct"]
                .as_str()
                .unwrap_or_default()
                .starts_with("error"),
            "a direct connection left the namespace: {results:?}"
        );
    }
    assert_guard_decided(&results);
    assert!(
        worker.log().contains("runs in a namespace"),
        "{}",
        worker.log()
    );
    let namespaces = || -> Vec<String> {
        std::fs::read_dir("/run/netns")
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(&session))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(namespaces().len(), 1, "the session has its namespace");
    rig.finish(&session).await;
    let deadline = std::time::Instant::now() + T;
    while !namespaces().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        namespaces().is_empty(),
        "the namespace outlived its session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_the_guard_cannot_express_refuses_the_session_instead_of_widening_it() {
    let rig = Rig::start(FleetConfig::default()).await;
    let worker = rig.worker("w").spawn();
    let session = rig.enqueue(SessionSpec {
        network_policy: Some(json!({"enabled": true, "allow": [{"hostname": "git*.com"}]})),
        ..SessionSpec::default()
    });
    rig.wait(T, "claimed and released", |f| {
        f.history(&session)
            .iter()
            .any(|e| e.kind == devin_bridge_fake_fleet::ClaimEventKind::Released)
    })
    .await;
    assert!(rig.fleet.connected_at(&session).is_none());
    worker
        .wait_log("not a hostname this guard can match", T)
        .await;
}
