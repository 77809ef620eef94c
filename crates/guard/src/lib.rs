//! The egress guard: a forward proxy that lets a client reach only an allowlist, and audits
//! every decision.
//!
//! Two guards run in the compose topology (see `docs/guard.md`): the Devin side
//! (`policies/guard-devin.toml`: `*.devin.ai`, `*.cognition.ai`, their apex names, two Codeium
//! hosts, port 443) and the Claude side (`policies/guard-deny-all.toml`: nothing at all).
//!
//! # What a connection goes through
//! 1. **ConnectionLimits.** Over `max_connections` the connection gets `503` and is closed at once; the
//!    request head is capped in size and time ([`policy::ConnectionLimits`]).
//! 2. **Request checks, before any resolution** (`connect`, `http`): `CONNECT host:port`
//!    with an allowed port and an allowlisted DNS name ([`hostmatch`]: case-insensitive,
//!    trailing dot removed, IDN to punycode, IP literals refused unless the policy's
//!    `allow_ip_literals` holds them: then the address and port alone decide, see `connect`).
//!    A refusal is `403`.
//! 3. **SNI** ([`client_hello`]): after `200 Connection Established` the TLS ClientHello is
//!    read (reassembled across records and segments, at most 64 KiB and 3 s) and its SNI must
//!    equal the CONNECT host.
//! 4. **Resolution and dial** (`dial`, [`addr`]): once, `[resolve]` pins first; every address
//!    classified (loopback, private, link-local, CGNAT, metadata, IPv4-embedding IPv6 forms,
//!    the guard itself... are denied unless the policy allows the range; metadata and the guard
//!    itself never); that exact address dialled, the buffered bytes replayed, both directions
//!    spliced with bounded buffers (`splice`).
//! 5. **Audit** ([`audit`]): one JSON line per decision, in a `0600` file.
//!
//! # Programmatic use
//! ```no_run
//! # async fn demo() -> Result<(), devin_bridge_guard::GuardError> {
//! use devin_bridge_guard::{Guard, GuardPolicy};
//! let policy = GuardPolicy {
//!     listen: "127.0.0.1:0".parse().unwrap(),
//!     audit: Some("/tmp/guard-audit.jsonl".into()),
//!     allow: vec!["*.devin.ai".into()],
//!     ..GuardPolicy::default()
//! };
//! let running = Guard::spawn(policy).await?;
//! println!("proxy at http://{}", running.local_addr());
//! running.shutdown().await?;
//! # Ok(()) }
//! ```

mod addr;
mod audit;
pub mod client;
// The parsers of untrusted bytes are crate-private; the fuzz targets reach them through
// `fuzzing`, so without that feature their fuzz-only surface is unreachable.
#[cfg_attr(not(any(test, feature = "fuzzing")), allow(unreachable_pub, dead_code))]
mod client_hello;
mod connect;
mod dial;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
#[cfg_attr(not(any(test, feature = "fuzzing")), allow(unreachable_pub, dead_code))]
mod handshake;
mod head;
#[cfg_attr(not(any(test, feature = "fuzzing")), allow(unreachable_pub, dead_code))]
mod hostmatch;
mod http;
pub mod isolation;
mod policy;
mod server;
mod splice;
mod state;
#[cfg(any(test, feature = "test-util"))]
pub mod testkit;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

pub use audit::{AuditError, AuditRecord, Decision};
pub use policy::{ConnectionLimits, GuardPolicy, GuardPolicyError, HttpPolicy};
pub use server::{Guard, RunningGuard};
pub use state::{GuardStats, StatsSnapshot};

/// Why a guard could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// The policy is invalid.
    #[error(transparent)]
    Policy(#[from] GuardPolicyError),
    /// The audit file cannot be used.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The listen address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The listen address.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The serving task panicked or was cancelled.
    #[error("guard task failed: {0}")]
    Task(String),
}

/// `devin-bridge guard`: run an egress guard until SIGTERM or SIGINT.
#[derive(Debug, Clone, clap::Args)]
pub struct GuardArgs {
    /// Guard policy file (e.g. policies/guard-devin.toml or policies/guard-deny-all.toml).
    #[arg(long, value_name = "PATH")]
    pub policy: PathBuf,
    /// Listen address, overriding the policy's `listen`.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Audit file, overriding the policy's `audit`.
    #[arg(long, value_name = "PATH")]
    pub audit: Option<PathBuf>,
}

/// Load the policy, apply the overrides, serve until SIGTERM/SIGINT, stop gracefully.
pub async fn run(args: GuardArgs) -> anyhow::Result<ExitCode> {
    let mut policy = GuardPolicy::load(&args.policy)?;
    if let Some(listen) = args.listen {
        policy.listen = listen;
    }
    if let Some(audit) = args.audit {
        policy.audit = Some(audit);
    }
    let allow = policy.allow.clone();
    let guard = Guard::bind(policy)
        .await
        .with_context(|| format!("starting the guard with {}", args.policy.display()))?;
    tracing::info!(
        listen = %guard.local_addr(),
        audit = %guard.audit_path().display(),
        allow = ?allow,
        "egress guard listening"
    );
    let stats = guard.stats();
    guard.serve(termination()).await?;
    let s = stats.snapshot();
    tracing::info!(
        accepted = s.accepted,
        allowed = s.allowed,
        denied = s.denied,
        refused_busy = s.refused_busy,
        "egress guard stopped"
    );
    Ok(ExitCode::SUCCESS)
}

/// Resolves on SIGTERM or SIGINT (or at once if the handlers cannot be installed, so that the
/// guard never runs unstoppable).
async fn termination() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers; stopping");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping"),
        _ = int.recv() => tracing::info!("SIGINT: stopping"),
    }
}
