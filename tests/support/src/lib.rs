//! What the host's integration tests (`host/tests/all`) and its benchmarks (`host/benches`)
//! share, so that each helper exists once: where the built artifacts are, and making those a
//! plain `cargo test` does not make ([`artifacts`]); the offline policies ([`policies`]); the
//! engine in this process ([`engine`]); the bridge in this process ([`bridge`]) and as a spawned `devin-bridge serve` ([`claude`]); the
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
pub mod engine;
pub mod installed;
pub mod keepalive;
pub mod outpost;
pub mod policies;
pub mod terminal;

pub use artifacts::{component, components_dir};
pub use claude::follow_bridge_stderr;
pub use engine::{bridge_cache_home, test_cache, test_cache_dir, test_runtime, transforms};
pub use policies::{policy, policy_text};

/// A loopback address with a port that was free a moment ago (bound and released), for a
/// `devin-bridge serve` child that must be told its address in advance.
pub fn free_port() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr")
}
