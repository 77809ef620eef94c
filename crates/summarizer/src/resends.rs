//! Resends join the running turn: a request identical to one in flight waits for that turn's
//! answer instead of starting another, and one that arrives just after it finished gets the
//! same answer.
//!
//! Claude Code sends a request again when its API timeout or its stream-idle watchdog fires
//! (and after a dropped connection); each Devin turn costs the user minutes and money, so a
//! bridge that did not notice would run the turn twice. Invariants:
//! - Two requests are the same request when their conversation key and their bodies are equal
//!   byte for byte (a SHA-256 of both). A body that differs in any byte is a new turn; a
//!   request without a conversation key is never joined (nothing says it comes from the same
//!   client).
//! - Every turn runs in a task of its own that outlives the request which started it: a
//!   client that goes away leaves it running for `grace` (so its resend can join it), after
//!   which a turn no request waits for is dropped, which kills its agent. A turn without a
//!   conversation key has no grace: it ends with its only client, as it always did.
//! - A turn that succeeded is kept for `window` after it finished, at most [`MAX_RECENT`]
//!   answers and [`MAX_RECENT_BYTES`] of reply content (the oldest go first). A failed turn is
//!   never kept: its resend runs again, which is what a retry is for.
//! - When the server stops, every turn still running ends with it (its agent killed), whatever
//!   its grace.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use devin_bridge_engine::MessageHead;
use devin_bridge_types::{Failure, Reply, SafeguardStatus, Usage};
use sha2::{Digest, Sha256};
use tokio::sync::{watch, Notify};

use crate::shown::Shown;

/// Finished answers kept for resends at most.
pub(crate) const MAX_RECENT: usize = 64;
/// Reply content the kept answers may hold together.
pub(crate) const MAX_RECENT_BYTES: usize = 16 << 20;

/// The identity of a request: its conversation key and body.
pub(crate) type RequestDigest = [u8; 32];

/// The digest of a request, when it has a conversation key.
pub(crate) fn digest(conversation: Option<&str>, body: &str) -> Option<RequestDigest> {
    let conversation = conversation?;
    let mut hasher = Sha256::new();
    hasher.update((conversation.len() as u64).to_le_bytes());
    hasher.update(conversation.as_bytes());
    hasher.update(body.as_bytes());
    Some(hasher.finalize().into())
}

/// A successful turn's answer, rendered anew for every request that shares it.
#[derive(Debug)]
pub(crate) struct Answer {
    pub reply: Reply,
    pub usage: Usage,
    pub safeguard: Option<SafeguardStatus>,
}

/// How far a shared turn has come.
#[derive(Debug, Clone)]
pub(crate) enum Stage {
    /// Serializing and waiting for an agent slot.
    Preparing,
    /// The agent is working: what a streamed answer's head says, and, when its text streams,
    /// the text made certain so far.
    Started {
        head: MessageHead,
        stream: bool,
        shown: Option<Arc<Shown>>,
    },
    /// The turn's end. `head` is absent when it failed before it started.
    Done(Arc<Finished>),
}

#[derive(Debug)]
pub(crate) struct Finished {
    pub head: Option<MessageHead>,
    pub stream: bool,
    pub outcome: Result<Answer, Failure>,
}

/// How many requests wait for a turn, and a signal when that changes.
#[derive(Default)]
struct Interest {
    waiting: AtomicUsize,
    changed: Notify,
}

/// One request's claim on a turn; dropping it (the client went away) lets the turn end.
pub(crate) struct InterestGuard(Arc<Interest>);

impl InterestGuard {
    fn new(interest: &Arc<Interest>) -> Self {
        interest.waiting.fetch_add(1, Ordering::SeqCst);
        interest.changed.notify_waiters();
        Self(interest.clone())
    }
}

impl Drop for InterestGuard {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

/// A request's view of its turn.
pub(crate) struct Waiter {
    pub stage: watch::Receiver<Stage>,
    _interest: InterestGuard,
}

impl Waiter {
    /// The turn once it has started or ended.
    pub(crate) async fn started(&mut self) -> Stage {
        let waited = self
            .stage
            .wait_for(|stage| !matches!(stage, Stage::Preparing))
            .await
            .map(|stage| stage.clone());
        // The sender went without a last word only if its task was dropped (shutdown).
        waited.unwrap_or_else(|_| Stage::Done(Arc::new(abandoned())))
    }

    /// The turn's end.
    pub(crate) async fn finished(&mut self) -> Arc<Finished> {
        let waited = self
            .stage
            .wait_for(|stage| matches!(stage, Stage::Done(_)))
            .await
            .map(|stage| stage.clone());
        match waited {
            Ok(Stage::Done(finished)) => finished,
            _ => Arc::new(abandoned()),
        }
    }
}

fn abandoned() -> Finished {
    Finished {
        head: None,
        stream: false,
        outcome: Err(crate::failures::HostFailure::Overloaded
            .with("the bridge is shutting down; retry later")),
    }
}

/// A turn in flight, as the table holds it.
struct Running {
    stage: watch::Receiver<Stage>,
    interest: Arc<Interest>,
}

/// An answer kept after its turn.
struct Recent {
    digest: RequestDigest,
    until: Instant,
    bytes: usize,
    finished: Arc<Finished>,
}

#[derive(Default)]
struct Table {
    running: HashMap<RequestDigest, Running>,
    recent: VecDeque<Recent>,
    recent_bytes: usize,
}

/// What a request found.
pub(crate) enum Joined {
    /// No such turn: this request starts it, and reports to `publisher`.
    Leader(Publisher, Waiter),
    /// A turn of the same request is running: wait for it.
    Running(Waiter),
    /// The same request was answered a moment ago.
    Finished(Arc<Finished>),
}

/// The turn's side of the channel: its stages, and whether anyone still waits.
pub(crate) struct Publisher {
    stage: watch::Sender<Stage>,
    interest: Arc<Interest>,
    digest: Option<RequestDigest>,
    grace: Duration,
}

impl Publisher {
    pub(crate) fn started(&self, head: MessageHead, stream: bool, shown: Option<Arc<Shown>>) {
        self.stage.send_replace(Stage::Started {
            head,
            stream,
            shown,
        });
    }

    /// Resolves once no request has waited for the turn for the grace period: the turn may
    /// then be dropped.
    pub(crate) async fn abandoned(&self) {
        loop {
            let changed = self.interest.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.interest.waiting.load(Ordering::SeqCst) > 0 {
                changed.await;
                continue;
            }
            if self.grace.is_zero() {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep(self.grace) => {
                    if self.interest.waiting.load(Ordering::SeqCst) == 0 {
                        return;
                    }
                }
                () = &mut changed => {}
            }
        }
    }
}

/// The running and recently finished turns, by request digest.
pub(crate) struct Resends {
    table: Mutex<Table>,
    /// Set when the server stops: every turn still running ends (and kills its agent).
    closing: watch::Sender<bool>,
    /// Turn tasks alive, and a signal when one ends.
    tasks: AtomicUsize,
    task_ended: Notify,
    /// How long a turn keeps running with no request waiting for it.
    grace: Duration,
    /// How long a finished answer is kept.
    window: Duration,
}

impl Resends {
    pub(crate) fn new(grace: Duration, window: Duration) -> Self {
        Self {
            table: Mutex::default(),
            closing: watch::Sender::new(false),
            tasks: AtomicUsize::new(0),
            task_ended: Notify::new(),
            grace,
            window,
        }
    }

    /// Marks a turn task alive until the returned guard drops.
    pub(crate) fn task(self: &Arc<Self>) -> TaskGuard {
        self.tasks.fetch_add(1, Ordering::SeqCst);
        TaskGuard(self.clone())
    }

    /// Resolves when the server stops.
    pub(crate) async fn closed(&self) {
        let mut closing = self.closing.subscribe();
        let _ = closing.wait_for(|closing| *closing).await;
    }

    /// Ends every running turn (each kills its agent as it goes) and waits up to `limit` for
    /// their tasks to finish.
    pub(crate) async fn close(&self, limit: Duration) {
        self.closing.send_replace(true);
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let ended = self.task_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.tasks.load(Ordering::SeqCst) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                tracing::warn!(
                    turns = self.tasks.load(Ordering::SeqCst),
                    "turns still ending at shutdown"
                );
                return;
            }
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // The table holds no invariant a panicking holder could break halfway.
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Joins the running or recent turn of the same request, or registers a new one.
    pub(crate) fn join(&self, digest: Option<RequestDigest>) -> Joined {
        let Some(digest) = digest else {
            return self.lead(None);
        };
        let mut table = self.table();
        let now = Instant::now();
        expire(&mut table, now);
        if let Some(running) = table.running.get(&digest) {
            return Joined::Running(Waiter {
                stage: running.stage.clone(),
                _interest: InterestGuard::new(&running.interest),
            });
        }
        if let Some(recent) = table.recent.iter().find(|recent| recent.digest == digest) {
            return Joined::Finished(recent.finished.clone());
        }
        let (publisher, waiter) = self.channel(Some(digest));
        table.running.insert(
            digest,
            Running {
                stage: waiter.stage.clone(),
                interest: publisher.interest.clone(),
            },
        );
        Joined::Leader(publisher, waiter)
    }

    fn lead(&self, digest: Option<RequestDigest>) -> Joined {
        let (publisher, waiter) = self.channel(digest);
        Joined::Leader(publisher, waiter)
    }

    fn channel(&self, digest: Option<RequestDigest>) -> (Publisher, Waiter) {
        let (stage, receiver) = watch::channel(Stage::Preparing);
        let interest = Arc::new(Interest::default());
        let waiter = Waiter {
            stage: receiver,
            _interest: InterestGuard::new(&interest),
        };
        let grace = if digest.is_some() {
            self.grace
        } else {
            Duration::ZERO
        };
        (
            Publisher {
                stage,
                interest,
                digest,
                grace,
            },
            waiter,
        )
    }

    /// The turn's end: its waiters get `finished`, and a success is kept for resends.
    pub(crate) fn finish(&self, publisher: Publisher, finished: Finished) {
        let finished = Arc::new(finished);
        let mut table = self.table();
        if let Some(digest) = publisher.digest {
            table.running.remove(&digest);
            if let Ok(answer) = &finished.outcome {
                let bytes = answer.reply.content_bytes();
                if bytes <= MAX_RECENT_BYTES && !self.window.is_zero() {
                    table.recent_bytes += bytes;
                    table.recent.push_back(Recent {
                        digest,
                        until: Instant::now() + self.window,
                        bytes,
                        finished: finished.clone(),
                    });
                    while table.recent.len() > MAX_RECENT || table.recent_bytes > MAX_RECENT_BYTES {
                        drop_oldest(&mut table);
                    }
                }
            }
        }
        drop(table);
        publisher.stage.send_replace(Stage::Done(finished));
    }

    /// A turn dropped because nobody waited for it: it leaves the table.
    pub(crate) fn forget(&self, publisher: &Publisher) {
        if let Some(digest) = publisher.digest {
            self.table().running.remove(&digest);
        }
    }

    /// Turns running, answers kept and their bytes (for `/healthz`).
    pub(crate) fn sizes(&self) -> (usize, usize, usize) {
        let mut table = self.table();
        expire(&mut table, Instant::now());
        (table.running.len(), table.recent.len(), table.recent_bytes)
    }
}

/// A live turn task; dropping it counts the task as ended.
pub(crate) struct TaskGuard(Arc<Resends>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.tasks.fetch_sub(1, Ordering::SeqCst);
        self.0.task_ended.notify_waiters();
    }
}

fn expire(table: &mut Table, now: Instant) {
    while table
        .recent
        .front()
        .is_some_and(|recent| recent.until <= now)
    {
        drop_oldest(table);
    }
}

fn drop_oldest(table: &mut Table) {
    if let Some(oldest) = table.recent.pop_front() {
        table.recent_bytes -= oldest.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(text: &str) -> Finished {
        Finished {
            head: None,
            stream: false,
            outcome: Ok(Answer {
                reply: Reply::Text(text.to_owned()),
                usage: Usage::estimated(1, 1),
                safeguard: None,
            }),
        }
    }

    fn failed() -> Finished {
        Finished {
            head: None,
            stream: false,
            outcome: Err(crate::failures::HostFailure::Overloaded.with("busy")),
        }
    }

    #[test]
    fn the_digest_covers_the_key_and_every_byte_of_the_body() {
        let base = digest(Some("s-1"), "{\"a\":1}");
        assert_eq!(base, digest(Some("s-1"), "{\"a\":1}"));
        assert_ne!(base, digest(Some("s-1"), "{\"a\":2}"));
        assert_ne!(base, digest(Some("s-1"), "{\"a\":1} "));
        assert_ne!(base, digest(Some("s-2"), "{\"a\":1}"));
        // The key's length is hashed: moving bytes between key and body changes the digest.
        assert_ne!(
            digest(Some("s-1{"), "\"a\":1}"),
            digest(Some("s-1"), "{\"a\":1}")
        );
        assert_eq!(digest(None, "{}"), None);
    }

    #[tokio::test]
    async fn a_resend_joins_the_running_turn_and_the_next_one_gets_its_answer() {
        let resends = Resends::new(Duration::from_secs(5), Duration::from_secs(60));
        let key = digest(Some("s"), "body");
        let Joined::Leader(publisher, mut first) = resends.join(key) else {
            panic!("the first request leads");
        };
        let Joined::Running(mut second) = resends.join(key) else {
            panic!("the resend joins the running turn");
        };
        // Another body is another turn.
        assert!(matches!(
            resends.join(digest(Some("s"), "body2")),
            Joined::Leader(..)
        ));
        resends.finish(publisher, answer("done"));
        for waiter in [&mut first, &mut second] {
            let finished = waiter.finished().await;
            assert!(matches!(&finished.outcome, Ok(a) if a.reply == Reply::Text("done".into())));
        }
        match resends.join(key) {
            Joined::Finished(finished) => assert!(finished.outcome.is_ok()),
            _ => panic!("a resend just after the turn gets its answer"),
        }
    }

    #[tokio::test]
    async fn a_failed_turn_is_not_kept_and_keyless_requests_never_join() {
        let resends = Resends::new(Duration::from_secs(5), Duration::from_secs(60));
        let key = digest(Some("s"), "body");
        let Joined::Leader(publisher, _waiter) = resends.join(key) else {
            panic!("leads");
        };
        resends.finish(publisher, failed());
        assert!(matches!(resends.join(key), Joined::Leader(..)));
        let Joined::Leader(keyless, _w) = resends.join(None) else {
            panic!("leads");
        };
        assert!(matches!(resends.join(None), Joined::Leader(..)));
        resends.finish(keyless, answer("x"));
        assert!(matches!(resends.join(None), Joined::Leader(..)));
    }

    #[test]
    fn kept_answers_are_bounded_in_count_bytes_and_time() {
        let resends = Resends::new(Duration::from_secs(5), Duration::from_secs(60));
        for index in 0..(MAX_RECENT + 10) {
            let Joined::Leader(publisher, _w) = resends.join(digest(Some("s"), &index.to_string()))
            else {
                panic!("leads");
            };
            resends.finish(publisher, answer("x"));
        }
        assert_eq!(resends.sizes().1, MAX_RECENT);
        // The oldest went first.
        assert!(matches!(
            resends.join(digest(Some("s"), "0")),
            Joined::Leader(..)
        ));
        let big = "y".repeat(MAX_RECENT_BYTES / 2 + 1);
        for index in 0..3 {
            let Joined::Leader(publisher, _w) =
                resends.join(digest(Some("big"), &index.to_string()))
            else {
                panic!("leads");
            };
            resends.finish(publisher, answer(&big));
        }
        assert!(resends.sizes().2 <= MAX_RECENT_BYTES);

        let brief = Resends::new(Duration::from_secs(5), Duration::from_millis(1));
        let key = digest(Some("s"), "b");
        let Joined::Leader(publisher, _w) = brief.join(key) else {
            panic!("leads");
        };
        brief.finish(publisher, answer("x"));
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(brief.join(key), Joined::Leader(..)));
    }

    #[tokio::test]
    async fn a_turn_nobody_waits_for_is_abandoned_after_the_grace_only() {
        let resends = Resends::new(Duration::from_millis(200), Duration::from_secs(60));
        let key = digest(Some("s"), "body");
        let Joined::Leader(publisher, waiter) = resends.join(key) else {
            panic!("leads");
        };
        let started = Instant::now();
        drop(waiter);
        // A resend within the grace keeps it alive.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let Joined::Running(resend) = resends.join(key) else {
            panic!("joins");
        };
        let abandoned = tokio::time::timeout(Duration::from_millis(400), publisher.abandoned());
        assert!(abandoned.await.is_err(), "abandoned while a request waits");
        drop(resend);
        tokio::time::timeout(Duration::from_secs(2), publisher.abandoned())
            .await
            .expect("abandoned once nobody waits");
        assert!(started.elapsed() >= Duration::from_millis(300));

        // Without a key, the turn ends with its client.
        let Joined::Leader(keyless, waiter) = resends.join(None) else {
            panic!("leads");
        };
        drop(waiter);
        tokio::time::timeout(Duration::from_millis(50), keyless.abandoned())
            .await
            .expect("no grace without a key");
    }
}
