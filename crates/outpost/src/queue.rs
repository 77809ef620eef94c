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
//! - "Cursor unknown or too old" means relist; any other failure retries from the same cursor
//!   after a jittered exponential backoff (0.8 s to 30 s), reset once a stream proved healthy.
//! - Events are filtered by the object's outpost (the server ignores phase filters on watch).
//! - 401/403 end the loop: the worker stops with the reason.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use tokio::sync::mpsc;

use super::backoff::Backoff;
use super::fleet::{Cursor, EventType, FleetClient, FleetError, OutpostId, QueueEntry, WatchEvent};
use super::framing::{ComponentFramer, FramingError};

/// What the worker learns about the queue.
#[derive(Debug, Clone)]
pub enum QueueEvent {
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
pub struct Reflector {
    pub client: Arc<FleetClient>,
    pub framer: Arc<ComponentFramer>,
    pub outpost: Option<OutpostId>,
    pub idle_timeout: Duration,
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
    pub async fn run(self, events: mpsc::Sender<QueueEvent>) -> Result<(), FleetError> {
        let mut backoff = Backoff::queue();
        loop {
            let cursor = match self.list().await {
                Ok((entries, cursor)) => {
                    tracing::info!(entries = entries.len(), "queue listed");
                    if events.send(QueueEvent::Listed(entries)).await.is_err() {
                        return Ok(());
                    }
                    cursor
                }
                Err(error) if error.is_auth() => return Err(error),
                Err(error) => {
                    let delay = backoff.next_delay();
                    tracing::warn!(%error, retry_in_ms = delay.as_millis() as u64, "queue listing failed");
                    tokio::time::sleep(delay).await;
                    continue;
                }
            };
            let mut cursor = cursor;
            loop {
                match self.stream(&mut cursor, &events).await {
                    StreamEnd::Closed { healthy: true } => {
                        backoff.reset();
                        tracing::debug!("watch stream ended; resuming from its cursor");
                    }
                    StreamEnd::Closed { healthy: false } => {
                        let delay = backoff.next_delay();
                        tracing::info!(
                            retry_in_ms = delay.as_millis() as u64,
                            "watch stream ended at once; resuming from its cursor after a pause"
                        );
                        tokio::time::sleep(delay).await;
                    }
                    StreamEnd::Stalled => {
                        tracing::warn!(
                            idle_timeout_secs = self.idle_timeout.as_secs(),
                            "watch stream stalled; resuming from its cursor"
                        );
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
                        tokio::time::sleep(delay).await;
                    }
                }
            }
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

    /// Reads one watch stream; `cursor` advances past every event handed to the worker.
    async fn stream(&self, cursor: &mut Cursor, events: &mpsc::Sender<QueueEvent>) -> StreamEnd {
        let opened = Instant::now();
        let mut body = match self.client.watch(self.outpost.as_ref(), Some(cursor)).await {
            Ok(body) => body,
            Err(FleetError::CursorExpired { .. }) => return StreamEnd::Expired,
            Err(error) => return StreamEnd::Failed(error),
        };
        let mut tail: Vec<u8> = Vec::new();
        let mut delivered = 0usize;
        loop {
            let frame = match tokio::time::timeout(self.idle_timeout, body.frame()).await {
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
                Ok(Some(Ok(frame))) => frame,
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
            }
        }
    }
}
