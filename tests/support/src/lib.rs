//! What the host's integration tests (`host/tests/all`) and its benchmarks (`host/benches`)
//! share, so that each helper exists once: where the built artifacts are, and making those a
//! plain `cargo test` does not make ([`artifacts`]); the offline policies ([`policies`]); the
//! bridge in this process ([`bridge`]) and as a spawned `devin-bridge serve` ([`claude`]); the
//! HTTP clients ([`bridge`]'s raw one, [`keepalive`]); Claude Code's tool declarations and the
//! benchmarks' statistics ([`bench`]); the installed tarball ([`installed`]); the outpost rig
//! ([`outpost`]).
//!
//! The host's tests see this crate as their `common` module (`host/tests/all/common`).

// Test support: a failed expectation here is the failure of the test that called it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod artifacts;
pub mod bench;
pub mod bridge;
pub mod claude;
pub mod installed;
pub mod keepalive;
pub mod outpost;
pub mod policies;
pub mod terminal;

pub use artifacts::{component, components_dir};
pub use policies::{policy, policy_text};

use devin_bridge_engine::{CompileCache, Runtime, RuntimeConfig, Transforms};
use devin_bridge_policy::ModePolicy as _;

/// Limits small enough that the fault tests finish quickly.
pub fn test_runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        memory_bytes: 64 << 20,
        call_timeout: std::time::Duration::from_millis(500),
        max_instances: 64,
        fuel: None,
    })
    .expect("runtime")
}

/// The shared compile cache of the test run (a private directory under target/).
pub fn test_cache() -> CompileCache {
    CompileCache::open(&test_cache_dir()).expect("test compile cache")
}

/// Where [`test_cache`] keeps its entries.
pub fn test_cache_dir() -> std::path::PathBuf {
    artifacts::workspace_root()
        .join("target")
        .join("test-compile-cache")
}

pub fn transforms() -> Transforms {
    Transforms::load_with(test_runtime(), test_cache(), &policy("").engine_config())
        .expect("components load")
}

/// Follows a `devin-bridge serve` process's stderr on a thread: echoes and keeps every line,
/// and sends the address of its `listening on http://ADDR` line once, or `None` when stderr
/// ends without one (the process exited).
pub fn follow_bridge_stderr(
    pipe: std::process::ChildStderr,
) -> (
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    std::sync::mpsc::Receiver<Option<String>>,
) {
    use std::io::BufRead;
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let kept = lines.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            eprintln!("bridge: {line}");
            if let Some(addr) = claude::listening_addr(&line) {
                let _ = addr_tx.send(Some(addr.to_owned()));
            }
            kept.lock().expect("lines").push(line);
        }
        let _ = addr_tx.send(None);
    });
    (lines, addr_rx)
}

/// A loopback address with a port that was free a moment ago (bound and released), for a
/// `devin-bridge serve` child that must be told its address in advance.
pub fn free_port() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr")
}
