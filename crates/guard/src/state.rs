//! State shared by every connection of one guard, and its counters.
//!
//! A leaf of the crate's module graph: the listener (`server`) creates it and the connection
//! handlers (`connect`, `http`, `dial`) use it, so imports run one way.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::addr::SelfAddrs;
use crate::audit::{AuditLog, Decision, Pending};
use crate::head;
use crate::policy::CompiledPolicy;

/// Counters, readable while the guard runs.
#[derive(Debug, Default)]
pub struct GuardStats {
    /// Connections accepted by the listener (including refused ones).
    pub accepted: AtomicU64,
    /// Connections refused because `max_connections` were already being served.
    pub refused_busy: AtomicU64,
    /// Decisions `allow` written.
    pub allowed: AtomicU64,
    /// Decisions `deny` written.
    pub denied: AtomicU64,
    /// Name resolutions started (DNS lookups and `[resolve]` pins).
    pub resolutions: AtomicU64,
    /// Connections being served now.
    pub active: AtomicU64,
}

/// A copy of the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatsSnapshot {
    /// See [`GuardStats::accepted`].
    pub accepted: u64,
    /// See [`GuardStats::refused_busy`].
    pub refused_busy: u64,
    /// See [`GuardStats::allowed`].
    pub allowed: u64,
    /// See [`GuardStats::denied`].
    pub denied: u64,
    /// See [`GuardStats::resolutions`].
    pub resolutions: u64,
    /// See [`GuardStats::active`].
    pub active: u64,
}

impl GuardStats {
    /// Read every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StatsSnapshot {
            accepted: r(&self.accepted),
            refused_busy: r(&self.refused_busy),
            allowed: r(&self.allowed),
            denied: r(&self.denied),
            resolutions: r(&self.resolutions),
            active: r(&self.active),
        }
    }
}

/// State shared by every connection of one guard.
#[derive(Debug)]
pub(crate) struct Shared {
    pub policy: CompiledPolicy,
    pub audit: AuditLog,
    pub self_addrs: SelfAddrs,
    pub stats: Arc<GuardStats>,
    pub shutdown: watch::Receiver<bool>,
}

impl Shared {
    /// Write a decision and count it.
    pub(crate) fn decide(
        &self,
        pending: &Pending,
        decision: Decision,
        reason: &'static str,
        close: Option<&'static str>,
        bytes: (u64, u64),
    ) {
        let record = pending.record(decision, reason, close, bytes.0, bytes.1);
        self.audit.write(&record);
        match decision {
            Decision::Allow => {
                self.stats.allowed.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    host = record.host.as_deref().unwrap_or(""),
                    port = record.port.unwrap_or(0),
                    resolved = ?record.resolved,
                    reason,
                    close = close.unwrap_or(""),
                    bytes_up = bytes.0,
                    bytes_down = bytes.1,
                    "allow"
                );
            }
            Decision::Deny => {
                self.stats.denied.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    host = record.host.as_deref().unwrap_or(""),
                    port = record.port.unwrap_or(0),
                    reason,
                    "deny"
                );
            }
        }
    }

    /// Write a denial and answer the client with `status`.
    pub(crate) async fn deny_with(
        &self,
        stream: &mut TcpStream,
        pending: &Pending,
        status: (u16, &'static str),
        reason: &'static str,
    ) {
        self.decide(pending, Decision::Deny, reason, None, (0, 0));
        head::respond(stream, status.0, status.1, reason).await;
    }
}
