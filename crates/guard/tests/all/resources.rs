//! Resource bounds of the egress guard: a flood of idle connections is capped, refused
//! connections are audited, idle ones are reaped, memory stays bounded, and the guard still
//! serves a good client afterwards. Its own test binary, so that RSS is this test's alone.

use crate::support as guard_support;

use std::time::Duration;

use devin_bridge_guard::{ConnectionLimits, Guard};
use guard_support::*;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const FLOOD: usize = 500;
const MAX: usize = 64;

async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_flood_is_capped_reaped_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(&["api.devin.ai"]);
    let echo = tls_server(pki.server.clone(), ServerMode::Echo).await;
    let mut policy = test_policy(dir.path(), &[("api.devin.ai", echo.to_string())]);
    policy.connection_limits = ConnectionLimits {
        max_connections: MAX,
        header_timeout_ms: 2_000,
        idle_timeout_ms: 8_000,
        client_hello_timeout_ms: 1_000,
        shutdown_grace_ms: 1_000,
        ..ConnectionLimits::default()
    };
    let guard = Guard::spawn(policy).await.unwrap();
    let addr = guard.local_addr();
    let audit = guard.audit_path().to_owned();

    // Warm up allocator and runtime with one good tunnel, then take the baseline.
    let tls = tls_via_guard(addr, "api.devin.ai:443", "api.devin.ai", pki.client.clone())
        .await
        .unwrap();
    let data = pattern(200_000, 4);
    assert!(echo_roundtrip(tls, data.clone()).await == data);
    wait_audit(&audit, 1).await;
    let rss_before = rss_kib();

    // Phase 1: 500 connections that never send a byte.
    let mut idle = Vec::with_capacity(FLOOD);
    for _ in 0..FLOOD {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    let stats = guard.stats();
    wait_until("every connection accepted", || {
        stats.snapshot().accepted == 1 + FLOOD as u64
    })
    .await;
    let s = stats.snapshot();
    assert_eq!(s.refused_busy, (FLOOD - MAX) as u64, "{s:?}");
    assert_eq!(s.active, MAX as u64, "{s:?}");
    let rss_flood = rss_kib();

    // Refused ones were answered 503 and closed at once.
    let mut refused = 0;
    let mut held = Vec::new();
    for mut s in idle {
        let mut buf = vec![0u8; 128];
        match tokio::time::timeout(Duration::from_millis(5), s.read(&mut buf)).await {
            Ok(Ok(n)) if buf[..n].starts_with(b"HTTP/1.1 503") => refused += 1,
            Ok(Ok(n)) => {
                buf.truncate(n);
                held.push((s, buf));
            }
            Ok(Err(e)) => panic!("read: {e}"),
            Err(_) => held.push((s, Vec::new())),
        }
    }
    assert_eq!(refused, FLOOD - MAX);
    assert_eq!(held.len(), MAX);

    // The held ones are reaped by the header timeout (408, audited).
    wait_until("idle connections reaped", || stats.snapshot().active == 0).await;
    for (mut s, mut got) in held {
        let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut got)).await;
        assert!(
            got.starts_with(b"HTTP/1.1 408"),
            "{:?}",
            String::from_utf8_lossy(&got)
        );
    }
    let lines = wait_audit(&audit, 1 + FLOOD).await;
    let count = |reason: &str| lines.iter().filter(|l| l["reason"] == reason).count();
    assert_eq!(count("too_many_connections"), FLOOD - MAX);
    assert_eq!(count("header_timeout"), MAX);

    // Phase 2: MAX established tunnels left idle are reaped by the idle timeout.
    let mut tunnels = Vec::new();
    for _ in 0..MAX {
        let mut tls = tls_via_guard(addr, "api.devin.ai:443", "api.devin.ai", pki.client.clone())
            .await
            .unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut tls, b"x")
            .await
            .unwrap();
        let mut b = [0u8; 1];
        tls.read_exact(&mut b).await.unwrap();
        tunnels.push(tls);
    }
    assert_eq!(stats.snapshot().active, MAX as u64);
    let rss_tunnels = rss_kib();
    wait_until("idle tunnels reaped", || stats.snapshot().active == 0).await;
    let lines = wait_audit(&audit, 1 + FLOOD + MAX).await;
    let reaped = lines
        .iter()
        .filter(|l| l["close"] == "idle_timeout" && l["decision"] == "allow")
        .count();
    assert_eq!(reaped, MAX);
    drop(tunnels);

    // Still serving.
    let tls = tls_via_guard(addr, "api.devin.ai:443", "api.devin.ai", pki.client.clone())
        .await
        .unwrap();
    let data = pattern(1_000_000, 5);
    assert!(echo_roundtrip(tls, data.clone()).await == data);
    let rss_after = rss_kib();
    eprintln!(
        "RSS KiB: before {rss_before}, with {FLOOD} idle connections {rss_flood}, with {MAX} idle tunnels {rss_tunnels}, after {rss_after}"
    );
    // Generous: the flood and the tunnels (clients, TLS state and the echo server live in this
    // process too) must not cost more than 64 MiB, and nothing must stay behind.
    assert!(
        rss_flood.saturating_sub(rss_before) < 64 * 1024,
        "flood grew RSS too much"
    );
    assert!(
        rss_tunnels.saturating_sub(rss_before) < 64 * 1024,
        "tunnels grew RSS too much"
    );
    assert!(
        rss_after.saturating_sub(rss_before) < 64 * 1024,
        "RSS did not come back"
    );
    guard.shutdown().await.unwrap();
}
