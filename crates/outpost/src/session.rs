//! Serving one claimed session: provision, run the remote, follow the session, release.
//!
//! Provisioning failures (no gateway, no verified binary, a network policy that cannot be
//! enforced, a remote that does not start) release the claim at once so another worker can
//! take the session, and say why in the log. Those of this machine rather than of the session
//! (the binary cache, the session's directories, the keeper or the remote that cannot be
//! started here) are told apart ([`SessionOutcome::NotStartedHere`]): the worker stops claiming when
//! they repeat. While the remote runs, the session's entry is
//! followed twice: changes pushed by the queue watch, and a poll every interval (the fallback
//! when the watch lags). The remote is ended when the session is `terminated`, when its entry
//! disappears, or when the claim is no longer ours; a stale watch event is never trusted for
//! that, only a fresh read.
//!
//! After the remote exits: exit 0 means the session ended; the entry is re-read a few times
//! (its status may lag the exit by seconds) until it shows `suspended` or `terminated`, then
//! the claim is released. Any other exit is a crash: the claim is released at once so the
//! session requeues.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::acceptor::private_dir;
use super::binaries::{BinaryCache, BinaryError};
use super::fleet::{AcceptorId, FleetClient, QueueEntry, Release, SessionId, SessionStatus};
use super::network::SessionNetwork;
use super::remote::{self, Launch, RemoteEnv, RemoteExit, RunningRemote};
use super::settings::{check_gateway_url, WorkerSettings};

/// What a session task shares with the worker.
pub(crate) struct SessionContext {
    pub settings: Arc<WorkerSettings>,
    pub client: Arc<FleetClient>,
    pub binaries: Arc<BinaryCache>,
    pub acceptor: AcceptorId,
    /// Names of this worker's network namespaces start with it.
    pub namespace_prefix: String,
}

/// How a session ended for this worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionOutcome {
    /// The remote exited 0 and the session is suspended or terminated.
    Completed,
    /// The remote exited 0 but the entry never showed the session ended.
    ExitedUnconfirmed,
    /// The remote failed (exit code, or a signal): released to requeue.
    Crashed(Option<i32>),
    /// The session was terminated or its entry disappeared: the remote was ended.
    Ended,
    /// The claim is no longer ours: the remote was ended.
    ClaimLost,
    /// It could not be provisioned (the session's own problem: no gateway, no verified build,
    /// a network policy that cannot be enforced): released.
    NotStarted(String),
    /// It could not be started because of this machine (the binary cache, the session's
    /// directories, the keeper or the remote cannot be set up or run here): released.
    NotStartedHere(String),
    /// The worker is shutting down: the remote was ended and the claim released.
    Stopped,
}

/// Why provisioning failed.
enum NotStarted {
    /// The session's own problem.
    Session(String),
    /// This machine's.
    Here(String),
}

impl From<&str> for NotStarted {
    fn from(reason: &str) -> Self {
        NotStarted::Session(reason.to_owned())
    }
}

/// Serves a session this worker has just claimed (`claimed` is the claim's answer);
/// `on_start` runs once its remote runs.
pub(crate) async fn serve(
    context: Arc<SessionContext>,
    claimed: QueueEntry,
    mut updates: watch::Receiver<Option<QueueEntry>>,
    mut stop: watch::Receiver<bool>,
    on_start: impl FnOnce(),
) -> SessionOutcome {
    let session = claimed.id().clone();
    let started = Instant::now();
    let (mut running, network) = match provision(&context, &claimed).await {
        Ok(running) => running,
        Err(NotStarted::Session(reason)) => {
            tracing::error!(session = %session, %reason, "session not started; releasing its claim");
            release(&context, &session).await;
            return SessionOutcome::NotStarted(reason);
        }
        Err(NotStarted::Here(reason)) => {
            tracing::error!(session = %session, %reason, "session not started: this machine cannot start it; releasing its claim");
            release(&context, &session).await;
            return SessionOutcome::NotStartedHere(reason);
        }
    };
    tracing::info!(session = %session, remote_group = running.group().as_raw(), provision_ms = started.elapsed().as_millis() as u64, "remote started");
    on_start();

    let mut poll = tokio::time::interval_at(
        tokio::time::Instant::now() + context.settings.poll_interval,
        context.settings.poll_interval,
    );
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut updates_open = true;
    let outcome = loop {
        tokio::select! {
            exit = running.wait() => break after_exit(&context, &session, exit, &mut updates).await,
            changed = updates.changed(), if updates_open => {
                if changed.is_err() {
                    updates_open = false;
                    continue;
                }
                let pushed = updates.borrow_and_update().clone();
                let trusted_end = pushed
                    .as_ref()
                    .is_some_and(|entry| entry.status.session_status == SessionStatus::Terminated);
                // A terminated status is final and can be trusted as pushed; anything that
                // would end the remote otherwise is confirmed by a fresh read first.
                let verdict = if trusted_end {
                    Some(SessionOutcome::Ended)
                } else if pushed.as_ref().is_none_or(|entry| !entry.claimed_by(&context.acceptor)) {
                    check(&context, &session).await
                } else {
                    None
                };
                if let Some(outcome) = verdict {
                    running.stop().await;
                    break finish_ended(&context, &session, outcome).await;
                }
            }
            _ = poll.tick() => {
                if let Some(outcome) = check(&context, &session).await {
                    running.stop().await;
                    break finish_ended(&context, &session, outcome).await;
                }
            }
            _ = stop.changed() => {
                tracing::info!(session = %session, "worker stopping: ending the remote");
                let exit = running.stop().await;
                tracing::info!(session = %session, ?exit, "remote ended");
                release(&context, &session).await;
                break SessionOutcome::Stopped;
            }
        }
    };
    if let Some(network) = network {
        network.close().await;
    }
    tracing::info!(session = %session, ?outcome, served_ms = started.elapsed().as_millis() as u64, "session done");
    outcome
}

/// Provisions and starts the remote.
async fn provision(
    context: &SessionContext,
    claimed: &QueueEntry,
) -> Result<(RunningRemote, Option<SessionNetwork>), NotStarted> {
    let here = |error: &dyn std::fmt::Display| NotStarted::Here(error.to_string());
    let settings = &context.settings;
    let session = claimed.id();
    let token = claimed
        .status
        .connect_token
        .as_ref()
        .ok_or("the claim answer carries no connect token")?;
    let gateway = claimed
        .status
        .gateway_url
        .clone()
        .or_else(|| settings.gateway_fallback.clone())
        .ok_or("the claim answer carries no gateway URL and no --gateway-url is configured")?;
    check_gateway_url(&gateway).map_err(|error| NotStarted::Session(error.to_string()))?;
    let binary_error = |error: BinaryError| match error {
        BinaryError::Cache { .. } => here(&error),
        other => NotStarted::Session(other.to_string()),
    };
    let commit = context
        .binaries
        .choose(
            claimed.spec.remote_binary_sha.as_ref(),
            settings.remote_sha.as_ref(),
        )
        .await
        .map_err(binary_error)?;
    let binary = context
        .binaries
        .ensure(&commit)
        .await
        .map_err(binary_error)?;
    let state_dir = settings.data_dir.join("sessions").join(session.as_str());
    let logs = settings.data_dir.join("logs");
    let audit = settings.data_dir.join("audit");
    for dir in [&state_dir, &logs, &audit] {
        private_dir(dir).map_err(|error| here(&error))?;
    }
    std::fs::create_dir_all(settings.work_dir.join("repos")).map_err(|error| {
        NotStarted::Here(format!(
            "work directory {}: {error}",
            settings.work_dir.display()
        ))
    })?;
    let network = match claimed.spec.network_policy.as_ref().filter(|p| p.enabled) {
        Some(policy) => Some(
            SessionNetwork::start(
                session,
                policy,
                &gateway,
                settings.network_enforcement,
                &context.namespace_prefix,
                &audit,
            )
            .await
            .map_err(|error| NotStarted::Session(error.to_string()))?,
        ),
        None => None,
    };
    let env = remote::remote_env(&RemoteEnv {
        gateway_url: &gateway,
        connect_token: token,
        session,
        state_dir: &state_dir,
        chrome_path: settings.chrome_path.as_deref(),
        desktop: settings.desktop,
        system: &settings.system_env,
        proxy: network.as_ref().map(SessionNetwork::proxy),
    });
    let launch = Launch {
        binary,
        wrapper: network
            .as_ref()
            .map(SessionNetwork::wrapper)
            .unwrap_or_default(),
        work_dir: settings.work_dir.clone(),
        env,
        log: logs.join(format!("{session}.log")),
        kill_grace: settings.remote_kill_grace,
    };
    match remote::launch(&launch).await {
        Ok(running) => Ok((running, network)),
        Err(error) => {
            if let Some(network) = network {
                network.close().await;
            }
            Err(here(&error))
        }
    }
}

/// A fresh read of the entry: `Some` when the remote must end.
async fn check(context: &SessionContext, session: &SessionId) -> Option<SessionOutcome> {
    match context.client.get(session).await {
        Ok(None) => {
            tracing::info!(session = %session, "the session's entry disappeared: ending its remote");
            Some(SessionOutcome::Ended)
        }
        Ok(Some(entry)) if entry.status.session_status == SessionStatus::Terminated => {
            tracing::info!(session = %session, "the session was terminated: ending its remote");
            Some(SessionOutcome::Ended)
        }
        Ok(Some(entry)) if !entry.claimed_by(&context.acceptor) => {
            tracing::warn!(session = %session, holder = ?entry.status.acceptor_id, phase = ?entry.status.phase, "the claim is no longer ours: ending the remote");
            Some(SessionOutcome::ClaimLost)
        }
        Ok(Some(_)) => None,
        Err(error) => {
            tracing::warn!(session = %session, %error, "cannot read the session's entry; keeping the remote");
            None
        }
    }
}

async fn finish_ended(
    context: &SessionContext,
    session: &SessionId,
    outcome: SessionOutcome,
) -> SessionOutcome {
    if outcome != SessionOutcome::ClaimLost {
        release(context, session).await;
    }
    if outcome == SessionOutcome::Ended {
        remove_state(context, session);
    }
    outcome
}

async fn after_exit(
    context: &SessionContext,
    session: &SessionId,
    exit: RemoteExit,
    updates: &mut watch::Receiver<Option<QueueEntry>>,
) -> SessionOutcome {
    match exit {
        RemoteExit::Exited(0) => {
            let confirmed = confirm_ended(context, session, updates).await;
            release(context, session).await;
            match confirmed {
                Some(status) => {
                    if status == SessionStatus::Terminated {
                        remove_state(context, session);
                    }
                    SessionOutcome::Completed
                }
                None => {
                    tracing::warn!(session = %session, reads = context.settings.exit_confirm_reads, "the remote exited 0 but the session never showed as ended; released it");
                    SessionOutcome::ExitedUnconfirmed
                }
            }
        }
        RemoteExit::Exited(code) => {
            tracing::warn!(session = %session, code, "the remote crashed; releasing the claim so the session requeues");
            release(context, session).await;
            SessionOutcome::Crashed(Some(code))
        }
        RemoteExit::Stopped => {
            tracing::warn!(session = %session, "the remote was killed by a signal; releasing the claim so the session requeues");
            release(context, session).await;
            SessionOutcome::Crashed(None)
        }
    }
}

/// Waits (a few reads) for the session to show as suspended or terminated. A status pushed by
/// the watch counts as well as a read, so a healthy watch usually saves every read.
async fn confirm_ended(
    context: &SessionContext,
    session: &SessionId,
    updates: &mut watch::Receiver<Option<QueueEntry>>,
) -> Option<SessionStatus> {
    let pushed_end = |updates: &mut watch::Receiver<Option<QueueEntry>>| {
        updates
            .borrow_and_update()
            .as_ref()
            .map(|entry| entry.status.session_status)
            .filter(|status| status.has_ended())
    };
    if let Some(status) = pushed_end(updates) {
        return Some(status);
    }
    for attempt in 0..context.settings.exit_confirm_reads {
        if attempt > 0 {
            let pause = tokio::time::sleep(context.settings.exit_confirm_interval);
            tokio::pin!(pause);
            loop {
                tokio::select! {
                    () = &mut pause => break,
                    changed = updates.changed() => {
                        if changed.is_err() {
                            (&mut pause).await;
                            break;
                        }
                        if let Some(status) = pushed_end(updates) {
                            return Some(status);
                        }
                    }
                }
            }
        }
        match context.client.get(session).await {
            Ok(Some(entry)) if entry.status.session_status.has_ended() => {
                return Some(entry.status.session_status)
            }
            Ok(None) => return Some(SessionStatus::Terminated),
            Ok(Some(_)) => {}
            Err(error) => tracing::debug!(session = %session, %error, "status re-read failed"),
        }
    }
    None
}

/// Releases the claim, retrying transient failures a few times.
pub(crate) async fn release(context: &SessionContext, session: &SessionId) {
    let mut delay = Duration::from_millis(200);
    for attempt in 1..=5 {
        match context.client.release(session, &context.acceptor).await {
            Ok(Release::Released) => {
                tracing::info!(session = %session, "claim released");
                return;
            }
            Ok(outcome) => {
                tracing::info!(session = %session, ?outcome, "nothing to release");
                return;
            }
            Err(error) if error.is_transient() && attempt < 5 => {
                tracing::warn!(session = %session, %error, attempt, "release failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            Err(error) => {
                tracing::error!(session = %session, %error, "cannot release the claim; it expires at its deadline");
                return;
            }
        }
    }
}

/// A terminated session's state (its credentials) is not kept.
fn remove_state(context: &SessionContext, session: &SessionId) {
    let dir: PathBuf = context
        .settings
        .data_dir
        .join("sessions")
        .join(session.as_str());
    if let Err(error) = std::fs::remove_dir_all(&dir) {
        if error.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(session = %session, %error, "cannot remove the session's state directory");
        }
    }
}
