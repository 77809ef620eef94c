//! The worker: keeps a store of the queue, claims what it can serve, runs sessions, recovers
//! its own claims after a restart, and shuts down cleanly.
//!
//! One task owns all state (the store, the running sessions); the reflector, the sessions and
//! the signals talk to it over channels, so no lock is held across an await.
//!
//! Sessions that fail to start because of this machine ([`SessionOutcome::NotStartedHere`]: the
//! keeper, the remote or its files cannot be set up here) are not the queue's problem: after
//! [`LOCAL_FAILURE_LIMIT`] in a row the worker stops claiming and says why in one line, then
//! claims one session at a time after a growing delay ([`Backoff::local_failures`]) until one
//! starts, which resumes claiming and resets the delay. So a broken machine costs the fleet a
//! few claims a minute, not a claim and a release for every queued session.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::backoff::Backoff;
use super::fleet::{Claim, FleetClient, FleetError, Phase, QueueEntry, SessionId};
use super::queue::QueueEvent;
use super::session::{self, SessionContext, SessionOutcome};

/// Why the worker stopped with an error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkerError {
    #[error("the fleet API refused this worker's token; stopping: {0}")]
    Unauthorized(FleetError),
    #[error("the queue watch stopped unexpectedly")]
    QueueGone,
    #[error("cannot install a signal handler: {0}")]
    Signals(std::io::Error),
}

/// How the worker ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct WorkerTally {
    pub served: usize,
    pub completed: usize,
    pub failed: usize,
}

struct Running {
    updates: watch::Sender<Option<QueueEntry>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// The worker's state.
pub(crate) struct Worker {
    context: Arc<SessionContext>,
    client: Arc<FleetClient>,
    store: BTreeMap<SessionId, QueueEntry>,
    running: HashMap<SessionId, Running>,
    /// Sessions whose claim was just lost (or that just crashed here): not claimed again by
    /// this worker until a poll interval has passed. Watch events do not clear it, since a
    /// duplicate of an old `pending` event is normal.
    lost: HashMap<SessionId, Instant>,
    /// Entries for another platform, logged once each.
    skipped_platform: std::collections::HashSet<SessionId>,
    /// True once the first listing was reconciled (own claims recovered).
    recovered: bool,
    claims_started: usize,
    /// A refused token seen by a claim or release: the worker stops.
    fatal: Option<FleetError>,
    /// Another worker was seen serving this queue: claims are spread (see `claim_delay`).
    peers_seen: bool,
    /// When each pending session may be claimed by this worker (only with peers).
    not_before: HashMap<SessionId, Instant>,
    /// A transient failure paused claiming until this instant.
    paused_until: Option<Instant>,
    /// Sessions that failed to start because of this machine.
    local: LocalFailures,
    summary: WorkerTally,
    done_tx: mpsc::UnboundedSender<(SessionId, SessionOutcome)>,
    done_rx: mpsc::UnboundedReceiver<(SessionId, SessionOutcome)>,
    /// Sessions whose remote started.
    started_tx: mpsc::UnboundedSender<SessionId>,
    started_rx: mpsc::UnboundedReceiver<SessionId>,
}

impl Worker {
    pub(crate) fn new(context: Arc<SessionContext>) -> Self {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let (started_tx, started_rx) = mpsc::unbounded_channel();
        Self {
            client: context.client.clone(),
            context,
            store: BTreeMap::new(),
            running: HashMap::new(),
            lost: HashMap::new(),
            skipped_platform: Default::default(),
            recovered: false,
            claims_started: 0,
            fatal: None,
            peers_seen: false,
            not_before: HashMap::new(),
            paused_until: None,
            local: LocalFailures::new(),
            summary: WorkerTally::default(),
            done_tx,
            done_rx,
            started_tx,
            started_rx,
        }
    }

    fn once(&self) -> bool {
        self.context.settings.once
    }

    /// Claiming stops in `--once` mode after the first claim.
    fn may_claim(&self) -> bool {
        !(self.once() && self.claims_started > 0)
    }

    /// Runs until SIGTERM/SIGINT (or, with `--once`, one session served), then ends every
    /// remote, releases every claim and returns.
    pub(crate) async fn run(
        mut self,
        mut queue: mpsc::Receiver<QueueEvent>,
        reflector: JoinHandle<Result<(), FleetError>>,
    ) -> Result<WorkerTally, WorkerError> {
        let mut terminate = signal(SignalKind::terminate()).map_err(WorkerError::Signals)?;
        let mut interrupt = signal(SignalKind::interrupt()).map_err(WorkerError::Signals)?;
        let poll_interval = self.context.settings.poll_interval;
        let mut poll = tokio::time::interval(poll_interval);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut reflector = reflector;
        let result = loop {
            if let Some(error) = self.fatal.take() {
                break Err(WorkerError::Unauthorized(error));
            }
            let due = self.next_due();
            tokio::select! {
                event = queue.recv() => match event {
                    Some(event) => {
                        self.apply(event).await;
                        self.reconcile().await;
                    }
                    // The reflector dropped its sender: it has ended or is about to. Its own
                    // result says why (a refused token must not read as a vanished queue).
                    None => break reflector_ended((&mut reflector).await),
                },
                Some(session) = self.started_rx.recv() => {
                    if self.local.started(&session) {
                        tracing::info!(session = %session, "a session started on this machine again: claiming resumed");
                    }
                    self.reconcile().await;
                }
                Some((session, outcome)) = self.done_rx.recv() => {
                    self.finished(session, outcome);
                    if self.once() && self.claims_started > 0 && self.running.is_empty() {
                        break Ok(());
                    }
                    self.reconcile().await;
                }
                () = sleep_until_due(due) => {
                    self.reconcile().await;
                }
                _ = poll.tick() => {
                    self.lost.retain(|_, at| at.elapsed() < poll_interval);
                    self.reconcile().await;
                }
                _ = terminate.recv() => {
                    tracing::info!("SIGTERM: no new claims; ending the remotes and releasing their claims");
                    break Ok(());
                }
                _ = interrupt.recv() => {
                    tracing::info!("SIGINT: no new claims; ending the remotes and releasing their claims");
                    break Ok(());
                }
                joined = &mut reflector => break reflector_ended(joined),
            }
        };
        reflector.abort();
        self.shutdown().await;
        result.map(|()| self.summary.clone())
    }

    async fn apply(&mut self, event: QueueEvent) {
        match event {
            QueueEvent::Listed(entries) => {
                let listed: BTreeMap<SessionId, QueueEntry> = entries
                    .into_iter()
                    .map(|entry| (entry.id().clone(), entry))
                    .collect();
                // Sessions that vanished from the listing are gone for the running tasks too.
                // The store holds what each running task was last sent, so an unchanged entry
                // is not sent again: listings come every poll interval on an idle queue, and a
                // push that looks unlike this worker's claim costs the task a fresh read.
                for (id, running) in &self.running {
                    let entry = listed.get(id);
                    if entry != self.store.get(id) {
                        let _ = running.updates.send(entry.cloned());
                    }
                }
                for entry in listed.values() {
                    self.note_peer(entry);
                }
                self.not_before.retain(|id, _| listed.contains_key(id));
                self.store = listed;
                if !self.recovered {
                    self.recovered = true;
                    self.recover().await;
                }
            }
            QueueEvent::Applied(entry) => {
                self.note_peer(&entry);
                let id = entry.id().clone();
                if entry.status.phase != Phase::Pending {
                    self.not_before.remove(&id);
                }
                if let Some(running) = self.running.get(&id) {
                    let _ = running.updates.send(Some(entry.clone()));
                }
                self.store.insert(id, entry);
            }
            QueueEvent::Deleted(entry) => {
                let id = entry.id().clone();
                self.not_before.remove(&id);
                if let Some(running) = self.running.get(&id) {
                    let _ = running.updates.send(None);
                }
                self.store.remove(&id);
            }
        }
    }

    /// After a restart: sessions this acceptor still holds are served again (the claim is
    /// renewed, which gives fresh gateway credentials) or released when that fails, right
    /// after the first listing, so none waits for its claim deadline.
    async fn recover(&mut self) {
        let acceptor = self.context.acceptor.clone();
        let held: Vec<QueueEntry> = self
            .store
            .values()
            .filter(|entry| entry.claimed_by(&acceptor) && !self.running.contains_key(entry.id()))
            .cloned()
            .collect();
        for entry in held {
            let id = entry.id().clone();
            let serve = !entry.status.session_status.has_ended()
                && self.may_claim()
                && self.running.len() < self.context.settings.max_sessions
                && self.platform_ok(&entry);
            if serve {
                tracing::info!(session = %id, "recovering a session this worker held before it restarted");
                match self.client.claim(&id, &acceptor).await {
                    Ok(Claim::Won(claimed)) => {
                        self.claims_started += 1;
                        self.store.insert(id.clone(), (*claimed).clone());
                        self.start(*claimed);
                    }
                    Err(error) if error.is_auth() => {
                        self.fatal = Some(error);
                        return;
                    }
                    Ok(Claim::Lost) | Err(_) => {
                        tracing::info!(session = %id, "its claim cannot be renewed; releasing it");
                        session::release(&self.context, &id).await;
                    }
                }
            } else {
                tracing::info!(session = %id, "releasing a claim left by an earlier run of this worker");
                session::release(&self.context, &id).await;
            }
        }
    }

    /// An entry held by another acceptor means other workers serve this queue.
    fn note_peer(&mut self, entry: &QueueEntry) {
        if !self.peers_seen
            && entry
                .status
                .acceptor_id
                .as_deref()
                .is_some_and(|holder| holder != self.context.acceptor.as_str())
        {
            tracing::info!("other workers serve this queue: claims are spread to avoid races");
            self.peers_seen = true;
        }
    }

    /// The earliest instant a delayed claim becomes due.
    fn next_due(&self) -> Option<Instant> {
        if self.running.len() >= self.context.settings.max_sessions {
            return None;
        }
        let now = Instant::now();
        let retry = self.local.retry_at().filter(|at| *at > now);
        self.not_before.values().copied().chain(retry).min()
    }

    fn platform_ok(&mut self, entry: &QueueEntry) -> bool {
        let ours = &self.context.settings.platform;
        match entry.spec.platform.as_deref() {
            None => true,
            Some(platform) if platform_matches(platform, ours) => true,
            Some(platform) => {
                if self.skipped_platform.insert(entry.id().clone()) {
                    tracing::warn!(session = %entry.id(), platform, machine = %ours, "not claiming a session for another platform");
                }
                false
            }
        }
    }

    /// Claims pending sessions while slots are free, oldest first.
    async fn reconcile(&mut self) {
        if !self.recovered {
            return;
        }
        if self
            .paused_until
            .is_some_and(|until| Instant::now() < until)
        {
            return;
        }
        let max = self.context.settings.max_sessions;
        for next in self.due_candidates(max) {
            if self.running.len() >= max || !self.may_claim() || self.fatal.is_some() {
                return;
            }
            let probe = match self.local.allowance(Instant::now()) {
                Allowance::Any => false,
                Allowance::One => true,
                Allowance::None => return,
            };
            if !self.claim(&next).await {
                return;
            }
            if probe && self.running.contains_key(next.id()) {
                self.local.probing(next.id().clone());
            }
        }
    }

    /// The pending sessions this worker may claim now, oldest first: its outpost and platform,
    /// not ended, not running here, not just lost, and (with peers) past their claim delay.
    fn due_candidates(&mut self, max: usize) -> Vec<QueueEntry> {
        let mut candidates: Vec<QueueEntry> = self
            .store
            .values()
            .filter(|entry| {
                entry.status.phase == Phase::Pending
                    && !entry.status.session_status.has_ended()
                    && !self.running.contains_key(entry.id())
                    && !self.lost.contains_key(entry.id())
            })
            .cloned()
            .collect();
        candidates.retain(|entry| self.platform_ok(entry));
        if self.peers_seen {
            let now = Instant::now();
            let load = (self.running.len() as u32, max as u32);
            let acceptor = self.context.acceptor.clone();
            let spread = self.context.settings.claim_spread;
            candidates.retain(|entry| {
                let due = *self
                    .not_before
                    .entry(entry.id().clone())
                    .or_insert_with(|| now + claim_delay(&acceptor, entry.id(), spread, load));
                due <= now
            });
        }
        candidates.sort_by_key(|entry| (entry.metadata.created_at, entry.id().clone()));
        candidates
    }

    /// Claims one session and, when won, starts serving it. False: stop claiming for now.
    async fn claim(&mut self, entry: &QueueEntry) -> bool {
        let id = entry.id().clone();
        match self.client.claim(&id, &self.context.acceptor).await {
            Ok(Claim::Won(claimed)) => {
                tracing::info!(session = %id, kind = ?claimed.spec.kind, "claimed");
                self.not_before.remove(&id);
                self.claims_started += 1;
                self.store.insert(id.clone(), (*claimed).clone());
                self.start(*claimed);
                true
            }
            Ok(Claim::Lost) => {
                tracing::debug!(session = %id, "another worker has it");
                self.peers_seen = true;
                self.not_before.remove(&id);
                self.lost.insert(id.clone(), Instant::now());
                true
            }
            Err(error) if error.is_auth() => {
                self.fatal = Some(error);
                false
            }
            Err(error) => {
                // The API is struggling: claim nothing more until the next poll.
                tracing::warn!(session = %id, %error, "claim failed; pausing claims until the next poll");
                self.paused_until = Some(Instant::now() + self.context.settings.poll_interval);
                false
            }
        }
    }

    fn start(&mut self, claimed: QueueEntry) {
        let id = claimed.id().clone();
        let (updates_tx, updates_rx) = watch::channel(Some(claimed.clone()));
        let (stop_tx, stop_rx) = watch::channel(false);
        let context = self.context.clone();
        let done = self.done_tx.clone();
        let session_id = id.clone();
        let started = self.started_tx.clone();
        let started_id = id.clone();
        let task = tokio::spawn(async move {
            let on_start = move || {
                let _ = started.send(started_id);
            };
            let outcome = session::serve(context, claimed, updates_rx, stop_rx, on_start).await;
            let _ = done.send((session_id, outcome));
        });
        self.running.insert(
            id,
            Running {
                updates: updates_tx,
                stop: stop_tx,
                task,
            },
        );
    }

    fn finished(&mut self, session: SessionId, outcome: SessionOutcome) {
        self.running.remove(&session);
        // An entry still showing this worker's claim predates the release: forget it; the
        // watch re-adds it if the session requeues. Any other entry came from an event after
        // the claim (the requeue's event can overtake the release's answer) and stays.
        if self
            .store
            .get(&session)
            .is_some_and(|entry| entry.claimed_by(&self.context.acceptor))
        {
            self.store.remove(&session);
        }
        self.summary.served += 1;
        if let SessionOutcome::NotStartedHere(reason) = &outcome {
            match self.local.failed(&session, Instant::now()) {
                Failed::Stopped { in_a_row, retry_in } => tracing::error!(
                    failures_in_a_row = in_a_row,
                    last = %reason,
                    retry_in_ms = retry_in.as_millis() as u64,
                    "sessions keep failing to start on this machine: claiming stopped; one session is tried at a time, with backoff, until one starts"
                ),
                Failed::StillStopped { retry_in } => tracing::debug!(
                    session = %session,
                    retry_in_ms = retry_in.as_millis() as u64,
                    "still failing to start sessions on this machine"
                ),
                Failed::Counted => {}
            }
        } else {
            self.local.settled(&session);
        }
        match outcome {
            SessionOutcome::Completed | SessionOutcome::Ended => self.summary.completed += 1,
            _ => {
                // Requeued: give other workers the first chance at it.
                self.lost.insert(session, Instant::now());
                self.summary.failed += 1;
            }
        }
    }

    /// Ends every running session (each releases its claim) within the shutdown grace.
    async fn shutdown(&mut self) {
        if self.running.is_empty() {
            return;
        }
        let grace = self.context.settings.shutdown_grace;
        for running in self.running.values() {
            let _ = running.stop.send(true);
        }
        let deadline = tokio::time::Instant::now() + grace + Duration::from_secs(5);
        let sessions: Vec<(SessionId, Running)> = self.running.drain().collect();
        for (id, running) in sessions {
            let mut task = running.task;
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                tracing::error!(session = %id, "session did not end within the shutdown grace; abandoning it");
                task.abort();
            }
        }
        while let Ok((session, outcome)) = self.done_rx.try_recv() {
            tracing::debug!(session = %session, ?outcome, "ended at shutdown");
            self.summary.served += 1;
        }
    }
}

/// How long this worker waits before claiming `session` when other workers watch the same
/// queue: a fraction of `spread` fixed by hashing the acceptor and session ids (so workers
/// spread without talking to each other), plus up to another `spread` in proportion to how
/// busy this worker is (so idle workers tend to win). A worker that sees the session claimed
/// meanwhile (the winner's claim arrives as a watch event within milliseconds) never sends
/// its claim, which keeps 409s rare.
pub(crate) fn claim_delay(
    acceptor: &super::fleet::AcceptorId,
    session: &SessionId,
    spread: Duration,
    (running, max): (u32, u32),
) -> Duration {
    use sha2::Digest;
    let digest = sha2::Sha256::new()
        .chain_update(acceptor.as_str().as_bytes())
        .chain_update([0u8])
        .chain_update(session.as_str().as_bytes())
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let fraction = u64::from_be_bytes(first) as f64 / u64::MAX as f64;
    let load = f64::from(running) / f64::from(max.max(1));
    spread.mul_f64(fraction + load)
}

/// How many sessions in a row may fail to start because of this machine before the worker
/// stops claiming.
pub(crate) const LOCAL_FAILURE_LIMIT: usize = 3;

/// How many claims the worker may make now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Allowance {
    Any,
    /// Claiming is stopped and the retry is due: one session, to see whether it starts.
    One,
    None,
}

/// What a local failure changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failed {
    /// Below the limit: claiming goes on.
    Counted,
    /// The limit was reached: claiming stops (said once).
    Stopped { in_a_row: usize, retry_in: Duration },
    /// Claiming was already stopped and the retry failed too: the next one comes later.
    StillStopped { retry_in: Duration },
}

/// Sessions that failed to start because of this machine, in a row, and whether claiming is
/// stopped for it.
struct LocalFailures {
    in_a_row: usize,
    backoff: Backoff,
    /// Claiming is stopped; one session may be claimed from this instant on.
    retry_at: Option<Instant>,
    /// The one session claimed while stopped, until it starts or ends.
    probe: Option<SessionId>,
}

impl LocalFailures {
    fn new() -> Self {
        Self {
            in_a_row: 0,
            backoff: Backoff::local_failures(),
            retry_at: None,
            probe: None,
        }
    }

    fn allowance(&self, now: Instant) -> Allowance {
        match self.retry_at {
            None => Allowance::Any,
            Some(at) if at <= now && self.probe.is_none() => Allowance::One,
            Some(_) => Allowance::None,
        }
    }

    /// When claiming is stopped, the instant the next session may be claimed.
    fn retry_at(&self) -> Option<Instant> {
        self.retry_at.filter(|_| self.probe.is_none())
    }

    fn probing(&mut self, session: SessionId) {
        self.probe = Some(session);
    }

    /// A session ended (in any way): it is no longer the probe.
    fn settled(&mut self, session: &SessionId) {
        if self.probe.as_ref() == Some(session) {
            self.probe = None;
        }
    }

    /// `session` failed to start here. Once claiming is stopped, only the failed retry moves
    /// the next one further out; a session claimed before the stop that fails too does not.
    fn failed(&mut self, session: &SessionId, now: Instant) -> Failed {
        let was_probe = self.probe.as_ref() == Some(session);
        self.settled(session);
        self.in_a_row += 1;
        if self.in_a_row < LOCAL_FAILURE_LIMIT {
            return Failed::Counted;
        }
        match self.retry_at {
            Some(at) if !was_probe => Failed::StillStopped {
                retry_in: at.saturating_duration_since(now),
            },
            Some(_) => {
                let retry_in = self.backoff.next_delay();
                self.retry_at = Some(now + retry_in);
                Failed::StillStopped { retry_in }
            }
            None => {
                let retry_in = self.backoff.next_delay();
                self.retry_at = Some(now + retry_in);
                Failed::Stopped {
                    in_a_row: self.in_a_row,
                    retry_in,
                }
            }
        }
    }

    /// A session's remote started: the count and the delay start over. True when this resumed
    /// claiming.
    fn started(&mut self, session: &SessionId) -> bool {
        self.settled(session);
        self.in_a_row = 0;
        self.backoff.reset();
        self.retry_at.take().is_some()
    }
}

/// Why the queue reflector ended, as the worker reports it.
fn reflector_ended(
    joined: Result<Result<(), FleetError>, tokio::task::JoinError>,
) -> Result<(), WorkerError> {
    match joined {
        Ok(Err(error)) if error.is_auth() => Err(WorkerError::Unauthorized(error)),
        _ => Err(WorkerError::QueueGone),
    }
}

async fn sleep_until_due(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due.into()).await,
        None => std::future::pending().await,
    }
}

/// `linux` matches `linux`, `linux_x64`, `linux-arm64`...
pub(crate) fn platform_matches(entry_platform: &str, ours: &str) -> bool {
    let lower = entry_platform.to_ascii_lowercase();
    lower == ours
        || lower
            .strip_prefix(ours)
            .is_some_and(|rest| rest.starts_with(['_', '-']))
}

/// `--session ID`: claim that one session (or recover it if this acceptor holds it), serve it,
/// and return its outcome.
pub(crate) async fn serve_one(
    context: Arc<SessionContext>,
    session: SessionId,
) -> Result<SessionOutcome, WorkerError> {
    let client = context.client.clone();
    let entry = loop {
        match client.get(&session).await {
            Ok(Some(entry)) => break entry,
            Ok(None) => {
                return Ok(SessionOutcome::NotStarted(format!(
                    "session {session} is not in the queue"
                )))
            }
            Err(error) if error.is_auth() => return Err(WorkerError::Unauthorized(error)),
            Err(error) => {
                tracing::warn!(%error, "cannot read the session's entry; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    if entry.status.session_status.has_ended() {
        return Ok(SessionOutcome::NotStarted(format!(
            "session {session} has already ended"
        )));
    }
    if !platform_matches(
        entry
            .spec
            .platform
            .as_deref()
            .unwrap_or(&context.settings.platform),
        &context.settings.platform,
    ) {
        return Ok(SessionOutcome::NotStarted(format!(
            "session {session} is for platform {:?}, this machine is {}",
            entry.spec.platform, context.settings.platform
        )));
    }
    let claimed = match client.claim(&session, &context.acceptor).await {
        Ok(Claim::Won(claimed)) => *claimed,
        Ok(Claim::Lost) => {
            return Ok(SessionOutcome::NotStarted(format!(
                "session {session} is claimed by another worker"
            )))
        }
        Err(error) if error.is_auth() => return Err(WorkerError::Unauthorized(error)),
        Err(error) => return Ok(SessionOutcome::NotStarted(format!("claim failed: {error}"))),
    };
    let (_updates_tx, updates_rx) = watch::channel(Some(claimed.clone()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut terminate = signal(SignalKind::terminate()).map_err(WorkerError::Signals)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(WorkerError::Signals)?;
    let mut task = tokio::spawn(session::serve(context, claimed, updates_rx, stop_rx, || {}));
    let outcome = tokio::select! {
        joined = &mut task => joined.ok(),
        _ = terminate.recv() => None,
        _ = interrupt.recv() => None,
    };
    match outcome {
        Some(outcome) => Ok(outcome),
        None => {
            let _ = stop_tx.send(true);
            Ok(task.await.unwrap_or(SessionOutcome::Stopped))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_delays_differ_between_workers_stay_within_the_spread_and_grow_with_load() {
        let spread = Duration::from_millis(40);
        let session: SessionId = "devin-1".parse().expect("id");
        let a: super::super::fleet::AcceptorId = "worker-a".parse().expect("id");
        let b: super::super::fleet::AcceptorId = "worker-b".parse().expect("id");
        let idle_a = claim_delay(&a, &session, spread, (0, 4));
        let idle_b = claim_delay(&b, &session, spread, (0, 4));
        assert_ne!(idle_a, idle_b);
        assert!(idle_a < spread && idle_b < spread);
        assert_eq!(idle_a, claim_delay(&a, &session, spread, (0, 4)), "stable");
        let busy_a = claim_delay(&a, &session, spread, (3, 4));
        assert_eq!(busy_a, idle_a + spread.mul_f64(0.75));
    }

    #[test]
    fn local_failures_stop_claiming_at_the_limit_allow_one_retry_and_a_start_resumes() {
        let now = Instant::now();
        let mut local = LocalFailures::new();
        let session = |n: u32| -> SessionId { format!("devin-{n}").parse().expect("id") };
        for n in 1..LOCAL_FAILURE_LIMIT as u32 {
            assert_eq!(local.failed(&session(10 + n), now), Failed::Counted);
            assert_eq!(local.allowance(now), Allowance::Any);
        }
        let Failed::Stopped { in_a_row, retry_in } = local.failed(&session(10), now) else {
            panic!("the limit stops claiming");
        };
        assert_eq!(in_a_row, LOCAL_FAILURE_LIMIT);
        assert_eq!(
            local.allowance(now),
            Allowance::None,
            "not before the delay"
        );
        let due = now + retry_in;
        assert_eq!(local.retry_at(), Some(due));
        assert!(
            matches!(local.failed(&session(9), now), Failed::StillStopped { retry_in } if retry_in == due - now),
            "a session claimed before the stop does not move the retry"
        );
        assert_eq!(local.allowance(due), Allowance::One);
        local.probing(session(1));
        assert_eq!(local.allowance(due), Allowance::None, "one retry at a time");
        assert_eq!(
            local.retry_at(),
            None,
            "nothing is due while the retry runs"
        );
        let Failed::StillStopped { retry_in: longer } = local.failed(&session(1), due) else {
            panic!("a failed retry keeps claiming stopped, and is not announced again");
        };
        assert!(longer >= Duration::from_secs(1));
        let due = due + longer;
        assert_eq!(local.allowance(due), Allowance::One);
        local.probing(session(2));
        assert!(local.started(&session(2)), "a start resumes claiming");
        assert_eq!(local.allowance(due), Allowance::Any);
        assert_eq!(
            local.failed(&session(4), due),
            Failed::Counted,
            "the count starts over"
        );
        assert!(!local.started(&session(3)), "already claiming");
    }

    #[test]
    fn platforms_match_by_operating_system() {
        assert!(platform_matches("linux", "linux"));
        assert!(platform_matches("Linux_x64", "linux"));
        assert!(platform_matches("linux-arm64", "linux"));
        assert!(!platform_matches("linuxish", "linux"));
        assert!(!platform_matches("macos", "linux"));
        assert!(!platform_matches("windows", "linux"));
    }
}
