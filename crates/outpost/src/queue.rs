//! The queue reflector: list page by page, then watch from the list's cursor, forever.
//!
//! What it does, and why (the choices of the Kubernetes reflectors and the kube-rs watcher):
//! - A list is delivered whole ([`QueueEvent::Listed`]) so the worker swaps its store at once;
//!   rows repeated across a page boundary are merged by session id.
//! - The cursor of every event is kept once the event has been handed to the worker; a stream
//!   that ends (the server ends them within five minutes) is reopened from that cursor, so the
//!   server replays what happened in between. Duplicates are normal and harmless.
//! - A stream that delivers no byte for `idle_timeout` is presumed stalled and reopened from
//!   the cursor (a half-received event is discarded; it is replayed).
//! - A stream can also stay open and deliver nothing useful (no bytes, keepalives only, or half
//!   an event) for up to that idle timeout, or a watch can keep failing while lists work. So
//!   whenever a `poll_interval` passes without a complete event or a listing, the queue is
//!   listed again (page by page, one request for a small queue) and the listing delivered as
//!   [`QueueEvent::Listed`], like a re-sync; the open stream is kept and read on afterwards.
//!   An idle worker thus sends one list request per poll interval, a busy one none, and a
//!   session the stream hides waits at most one interval plus the listing's own time (two
//!   intervals when a poll fails).
//!   Keepalive comments do not count as fresh: a stream can keep sending them after its events
//!   stopped.
//! - "Cursor unknown or too old" means relist; any other failure retries from the same cursor
//!   after a jittered exponential backoff (0.8 s to 30 s), reset once a stream proved healthy.
//! - Events are filtered by the object's outpost (the server ignores phase filters on watch).
//! - 401/403 end the loop: the worker stops with the reason.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::backoff::Backoff;
use super::fleet::{Cursor, EventType, FleetClient, FleetError, OutpostId, QueueEntry, WatchEvent};
use super::framing::{ComponentFramer, FramingError};

/// What the worker learns about the queue.
#[derive(Debug, Clone)]
pub(crate) enum QueueEvent {
    /// A full listing: replaces everything known before.
    Listed(Vec<QueueEntry>),
    /// An entry was added or changed.
    Applied(QueueEntry),
    /// An entry is gone (the last state it had).
    Deleted(QueueEntry),
}

/// Rows per list page.
const PAGE_SIZE: u32 = 100;
/// A stream that lived this long, or delivered an event, was healthy: the backoff starts over.
const HEALTHY_AFTER: Duration = Duration::from_secs(1);

/// The list + watch loop of one outpost's queue.
pub(crate) struct Reflector {
    pub client: Arc<FleetClient>,
    pub framer: Arc<ComponentFramer>,
    pub outpost: Option<OutpostId>,
    pub idle_timeout: Duration,
    /// Without a complete event or a listing for this long, the queue is listed again.
    pub poll_interval: Duration,
}

/// Why the reflector must stop in the middle of a poll or a pause.
enum Stop {
    /// The worker is gone.
    ReceiverGone,
    /// The token was refused.
    Refused(FleetError),
}

/// How one watch stream ended.
enum StreamEnd {
    /// The server closed it (normal, at most every five minutes).
    Closed {
        healthy: bool,
    },
    /// Nothing arrived for the idle timeout.
    Stalled,
    /// The cursor is too old: relist.
    Expired,
    /// The worker is gone.
    ReceiverGone,
    Failed(FleetError),
}

impl Reflector {
    /// Runs until the token is refused (the error) or the worker stops listening (`Ok`).
    pub(crate) async fn run(self, events: mpsc::Sender<QueueEvent>) -> Result<(), FleetError> {
        let mut backoff = Backoff::queue();
        // When the worker last got a complete event or a listing; a poll is due one poll
        // interval later. Set by every listing below.
        let mut fresh: Instant;
        loop {
            let cursor = match self.list().await {
                Ok((entries, cursor)) => {
                    tracing::info!(entries = entries.len(), "queue listed");
                    if events.send(QueueEvent::Listed(entries)).await.is_err() {
                        return Ok(());
                    }
                    fresh = Instant::now();
                    cursor
                }
                Err(error) if error.is_auth() => return Err(error),
                Err(error) => {
                    // The listing is what is being retried: no poll in this pause.
                    let delay = backoff.next_delay();
                    tracing::warn!(%error, retry_in_ms = delay.as_millis() as u64, "queue listing failed");
                    tokio::time::sleep(delay).await;
                    continue;
                }
            };
            let mut cursor = cursor;
            loop {
                let paused = match self.stream(&mut cursor, &events, &mut fresh).await {
                    StreamEnd::Closed { healthy: true } => {
                        backoff.reset();
                        tracing::debug!("watch stream ended; resuming from its cursor");
                        Ok(())
                    }
                    StreamEnd::Closed { healthy: false } => {
                        let delay = backoff.next_delay();
                        tracing::info!(
                            retry_in_ms = delay.as_millis() as u64,
                            "watch stream ended at once; resuming from its cursor after a pause"
                        );
                        self.pause(delay, &events, &mut fresh).await
                    }
                    StreamEnd::Stalled => {
                        tracing::warn!(
                            idle_timeout_secs = self.idle_timeout.as_secs(),
                            "watch stream stalled; resuming from its cursor"
                        );
                        Ok(())
                    }
                    StreamEnd::Expired => {
                        tracing::info!("watch cursor expired; relisting");
                        break;
                    }
                    StreamEnd::ReceiverGone => return Ok(()),
                    StreamEnd::Failed(error) if error.is_auth() => return Err(error),
                    StreamEnd::Failed(error) => {
                        let delay = backoff.next_delay();
                        tracing::warn!(%error, retry_in_ms = delay.as_millis() as u64, "watch failed; resuming from its cursor");
                        self.pause(delay, &events, &mut fresh).await
                    }
                };
                match paused {
                    Ok(()) => {}
                    Err(Stop::ReceiverGone) => return Ok(()),
                    Err(Stop::Refused(error)) => return Err(error),
                }
            }
        }
    }

    /// When the next poll is due.
    fn poll_due(&self, fresh: Instant) -> Instant {
        fresh + self.poll_interval
    }

    /// Lists the queue while the watch is open and hands the listing to the worker. A failed
    /// poll is logged and counts as a poll, so a struggling API gets one list per interval.
    async fn poll(
        &self,
        events: &mpsc::Sender<QueueEvent>,
        fresh: &mut Instant,
    ) -> Result<(), Stop> {
        let listed = self.list().await;
        *fresh = Instant::now();
        match listed {
            Ok((entries, _)) => {
                // The listing's cursor is not used: the open stream goes on from its own,
                // which is never ahead of what the worker has seen.
                tracing::debug!(entries = entries.len(), "queue polled");
                events
                    .send(QueueEvent::Listed(entries))
                    .await
                    .map_err(|_| Stop::ReceiverGone)
            }
            Err(error) if error.is_auth() => Err(Stop::Refused(error)),
            Err(error) => {
                tracing::warn!(%error, "queue poll failed; polling again in one interval");
                Ok(())
            }
        }
    }

    /// Waits out a watch backoff, polling the queue meanwhile whenever a poll is due, so a
    /// watch that keeps failing does not hide the queue either.
    async fn pause(
        &self,
        delay: Duration,
        events: &mpsc::Sender<QueueEvent>,
        fresh: &mut Instant,
    ) -> Result<(), Stop> {
        let until = Instant::now() + delay;
        loop {
            let due = self.poll_due(*fresh);
            if due >= until {
                tokio::time::sleep_until(until).await;
                return Ok(());
            }
            tokio::time::sleep_until(due).await;
            self.poll(events, fresh).await?;
        }
    }

    /// Lists every page; returns the merged entries and the cursor to watch from.
    async fn list(&self) -> Result<(Vec<QueueEntry>, Cursor), FleetError> {
        let mut merged: BTreeMap<String, QueueEntry> = BTreeMap::new();
        let mut cursor: Option<Cursor> = None;
        loop {
            let page = self
                .client
                .list_page(self.outpost.as_ref(), cursor.as_ref(), PAGE_SIZE)
                .await?;
            for entry in page.items {
                if self.wants(&entry) {
                    merged.insert(entry.id().as_str().to_owned(), entry);
                }
            }
            let next = page.cursor;
            if !page.has_next_page {
                return Ok((merged.into_values().collect(), next));
            }
            if cursor.as_ref() == Some(&next) {
                return Err(FleetError::Invalid {
                    what: "a queue listing",
                    message: "the next page has the same cursor as this one".into(),
                });
            }
            cursor = Some(next);
        }
    }

    fn wants(&self, entry: &QueueEntry) -> bool {
        self.outpost
            .as_ref()
            .is_none_or(|outpost| &entry.metadata.outpost_id == outpost)
    }

    /// Reads one watch stream; `cursor` advances past every event handed to the worker and
    /// `fresh` to the time of the last one (or of the last poll, done while the stream is open).
    async fn stream(
        &self,
        cursor: &mut Cursor,
        events: &mpsc::Sender<QueueEvent>,
        fresh: &mut Instant,
    ) -> StreamEnd {
        let opened = Instant::now();
        let mut body = match self.client.watch(self.outpost.as_ref(), Some(cursor)).await {
            Ok(body) => body,
            Err(FleetError::CursorExpired { .. }) => return StreamEnd::Expired,
            Err(error) => return StreamEnd::Failed(error),
        };
        let mut tail: Vec<u8> = Vec::new();
        let mut delivered = 0usize;
        // The idle timeout runs from the last byte, not from the last poll: polls interrupt
        // the read below without resetting it.
        let mut last_byte = opened;
        loop {
            let read = tokio::time::timeout_at(last_byte + self.idle_timeout, body.frame());
            let due = self.poll_due(*fresh);
            // `biased`: bytes already there are read before a due poll. Dropping the read to
            // poll loses nothing (`frame()` takes a frame only when it completes).
            let frame = tokio::select! {
                biased;
                read = read => read,
                () = tokio::time::sleep_until(due) => {
                    match self.poll(events, fresh).await {
                        Ok(()) => continue,
                        Err(Stop::ReceiverGone) => return StreamEnd::ReceiverGone,
                        Err(Stop::Refused(error)) => return StreamEnd::Failed(error),
                    }
                }
            };
            let frame = match frame {
                Err(_) => return StreamEnd::Stalled,
                Ok(None) => {
                    return StreamEnd::Closed {
                        healthy: delivered > 0 || opened.elapsed() >= HEALTHY_AFTER,
                    }
                }
                Ok(Some(Err(error))) => {
                    return StreamEnd::Failed(FleetError::Network(format!(
                        "the watch stream broke off: {error}"
                    )))
                }
                Ok(Some(Ok(frame))) => {
                    last_byte = Instant::now();
                    frame
                }
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if data.is_empty() {
                continue;
            }
            let mut buffer = std::mem::take(&mut tail);
            buffer.extend_from_slice(&data);
            let (framed, rest) = match self.framer.frame(buffer) {
                Ok(result) => result,
                Err(FramingError::Stream { code, message }) => {
                    return StreamEnd::Failed(FleetError::Invalid {
                        what: "the watch stream",
                        message: format!("{code}: {message}"),
                    })
                }
                Err(FramingError::Engine(error)) => {
                    return StreamEnd::Failed(FleetError::Invalid {
                        what: "the watch stream",
                        message: error.to_string(),
                    })
                }
            };
            tail = rest;
            for event in framed {
                let parsed: WatchEvent = match serde_json::from_str(&event.data) {
                    Ok(parsed) => parsed,
                    Err(error) => {
                        // An object this worker cannot read is one it cannot act on; the
                        // next event's cursor moves past it.
                        tracing::warn!(event = %event.event, %error, "unreadable watch event skipped");
                        continue;
                    }
                };
                let WatchEvent {
                    kind,
                    object,
                    cursor: next,
                } = parsed;
                if self.wants(&object) {
                    let update = match kind {
                        EventType::Modified => QueueEvent::Applied(object),
                        EventType::Deleted => QueueEvent::Deleted(object),
                    };
                    if events.send(update).await.is_err() {
                        return StreamEnd::ReceiverGone;
                    }
                }
                *cursor = next;
                delivered += 1;
                *fresh = Instant::now();
            }
        }
    }
}
