//! The listener: accept, enforce the connection cap, read the request head, dispatch.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::addr::SelfAddrs;
use super::audit::{AuditLog, Decision, Pending};
use super::head::{self, HeadError};
use super::policy::GuardPolicy;
use super::state::{GuardStats, Shared};
use super::{connect, http, GuardError};

/// Answer to a connection over the cap, written without waiting.
const BUSY: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// A bound egress guard, ready to [`serve`](Guard::serve).
#[derive(Debug)]
pub struct Guard {
    listener: TcpListener,
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    permits: Arc<Semaphore>,
    stop_tx: watch::Sender<bool>,
}

impl Guard {
    /// Validate the policy, open the audit file, and bind the listen address.
    pub async fn bind(policy: GuardPolicy) -> Result<Self, GuardError> {
        let compiled = policy.compile()?;
        let listener =
            TcpListener::bind(compiled.listen)
                .await
                .map_err(|source| GuardError::Bind {
                    addr: compiled.listen,
                    source,
                })?;
        Self::with_listener(compiled, listener)
    }

    /// Like [`bind`](Guard::bind), on a socket that is already listening (the policy's
    /// `listen` is ignored). The socket may belong to another network namespace: a guard that
    /// accepts inside a session's namespace while it dials from the host's.
    pub fn from_listener(
        policy: GuardPolicy,
        listener: std::net::TcpListener,
    ) -> Result<Self, GuardError> {
        let compiled = policy.compile()?;
        let addr = compiled.listen;
        let listener = listener
            .set_nonblocking(true)
            .and_then(|()| TcpListener::from_std(listener))
            .map_err(|source| GuardError::Bind { addr, source })?;
        Self::with_listener(compiled, listener)
    }

    fn with_listener(
        policy: super::policy::CompiledPolicy,
        listener: TcpListener,
    ) -> Result<Self, GuardError> {
        let audit = AuditLog::open(&policy.audit)?;
        let local_addr = listener.local_addr().map_err(|source| GuardError::Bind {
            addr: policy.listen,
            source,
        })?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let permits = Arc::new(Semaphore::new(policy.connection_limits.max_connections));
        let shared = Arc::new(Shared {
            self_addrs: SelfAddrs::new(local_addr),
            policy,
            audit,
            stats: Arc::new(GuardStats::default()),
            shutdown: stop_rx,
        });
        Ok(Self {
            listener,
            local_addr,
            shared,
            permits,
            stop_tx,
        })
    }

    /// Bind and serve on a background task until [`RunningGuard::shutdown`] (or drop).
    pub async fn spawn(policy: GuardPolicy) -> Result<RunningGuard, GuardError> {
        Ok(Self::bind(policy).await?.run_in_background())
    }

    /// Serve on a background task until [`RunningGuard::shutdown`] (or drop).
    pub fn run_in_background(self) -> RunningGuard {
        let guard = self;
        let local_addr = guard.local_addr();
        let stats = guard.stats();
        let audit_path = guard.audit_path().to_owned();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(guard.serve(async move {
            let _ = rx.await;
        }));
        RunningGuard {
            local_addr,
            stats,
            audit_path,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Live counters.
    pub fn stats(&self) -> Arc<GuardStats> {
        self.shared.stats.clone()
    }

    /// The audit file.
    pub fn audit_path(&self) -> &Path {
        self.shared.audit.path()
    }

    /// Accept connections until `shutdown` resolves, then stop accepting, tell every open
    /// connection to close (each writes its audit line) and wait up to the policy's grace.
    pub async fn serve<F>(self, shutdown: F) -> Result<(), GuardError>
    where
        F: Future<Output = ()>,
    {
        let Guard {
            listener,
            shared,
            permits,
            stop_tx,
            ..
        } = self;
        let next_id = AtomicU64::new(1);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let id = next_id.fetch_add(1, Ordering::Relaxed);
                        accept_one(&shared, &permits, stream, peer, id);
                    }
                    Err(error) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
            }
        }
        drop(listener);
        let _ = stop_tx.send(true);
        let max =
            u32::try_from(shared.policy.connection_limits.max_connections).unwrap_or(u32::MAX);
        let grace = shared.policy.connection_limits.shutdown_grace();
        if tokio::time::timeout(grace, permits.acquire_many(max))
            .await
            .is_err()
        {
            tracing::warn!(
                still_open = shared.stats.active.load(Ordering::Relaxed),
                "shutdown grace elapsed with connections still open"
            );
        }
        Ok(())
    }
}

fn accept_one(
    shared: &Arc<Shared>,
    permits: &Arc<Semaphore>,
    stream: TcpStream,
    peer: SocketAddr,
    id: u64,
) {
    shared.stats.accepted.fetch_add(1, Ordering::Relaxed);
    match permits.clone().try_acquire_owned() {
        Ok(permit) => {
            let span = tracing::info_span!("guard_conn", id, client = %peer);
            tokio::spawn(handle(shared.clone(), stream, peer, id, permit).instrument(span));
        }
        Err(_) => {
            shared.stats.refused_busy.fetch_add(1, Ordering::Relaxed);
            let _ = stream.try_write(BUSY);
            drop(stream);
            let pending = Pending::new(id, peer);
            shared.decide(
                &pending,
                Decision::Deny,
                "too_many_connections",
                None,
                (0, 0),
            );
        }
    }
}

async fn handle(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    peer: SocketAddr,
    id: u64,
    permit: OwnedSemaphorePermit,
) {
    shared.stats.active.fetch_add(1, Ordering::Relaxed);
    let _ = stream.set_nodelay(true);
    let mut pending = Pending::new(id, peer);
    let limits = shared.policy.connection_limits;
    if !shared.audit.healthy() {
        shared
            .deny_with(
                &mut stream,
                &pending,
                (503, "Service Unavailable"),
                "audit_unavailable",
            )
            .await;
    } else {
        match head::read_request_head(
            &mut stream,
            limits.header_max_bytes,
            limits.header_timeout(),
        )
        .await
        {
            Err(HeadError::Closed { empty: true }) => {
                tracing::debug!("client closed without a request");
            }
            Err(error) => match error.status() {
                Some(status) => {
                    shared
                        .deny_with(&mut stream, &pending, status, error.reason())
                        .await;
                }
                None => shared.decide(&pending, Decision::Deny, error.reason(), None, (0, 0)),
            },
            Ok((request, rest)) => {
                pending.method = Some(super::audit::sanitize(&request.method));
                if request.method == "CONNECT" {
                    connect::handle(&shared, stream, pending, request, rest).await;
                } else {
                    http::handle(&shared, stream, pending, request, rest).await;
                }
            }
        }
    }
    shared.stats.active.fetch_sub(1, Ordering::Relaxed);
    drop(permit);
}

/// A guard serving on a background task (see [`Guard::spawn`]). Dropping it asks the guard to
/// stop; [`shutdown`](RunningGuard::shutdown) also waits for it.
#[derive(Debug)]
pub struct RunningGuard {
    local_addr: SocketAddr,
    stats: Arc<GuardStats>,
    audit_path: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), GuardError>>>,
}

impl RunningGuard {
    /// The address the guard listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Live counters.
    pub fn stats(&self) -> &GuardStats {
        &self.stats
    }

    /// The audit file.
    pub fn audit_path(&self) -> &Path {
        &self.audit_path
    }

    /// Stop accepting, let open connections close, and wait for the guard to finish.
    pub async fn shutdown(mut self) -> Result<(), GuardError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await.map_err(|e| GuardError::Task(e.to_string()))?,
            None => Ok(()),
        }
    }
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
