//! Watch streams (`text/event-stream`): the retained events after the cursor, then live ones,
//! until the maximum duration. Faults can duplicate events, end a stream early, or stall it
//! in the middle of an event.

use std::sync::Arc;

use bytes::Bytes;
use hyper::Response;
use tokio::sync::mpsc;
use tokio::time::{interval_at, sleep_until, Instant, MissedTickBehavior};

use crate::body::{self, Body};
use crate::shared::Shared;

/// Answers a watch of `outpost` (all outposts if `None`) from resource version `from`.
pub(crate) fn start(shared: Arc<Shared>, outpost: Option<String>, from: u64) -> Response<Body> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(stream(shared, outpost, from, tx));
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body::channel(rx))
        .unwrap_or_else(|_| Response::new(body::full(Bytes::new())))
}

async fn stream(shared: Arc<Shared>, outpost: Option<String>, from: u64, tx: mpsc::Sender<Bytes>) {
    let mut shutdown = shared.shutdown.subscribe();
    let mut changes = shared.changes.subscribe();
    let deadline = Instant::now() + shared.config.stream_max;
    let stall = shared.faults.take_stall();
    let limit = shared.faults.stream_limit();
    let keepalive = shared.config.keepalive.filter(|_| !stall);
    let mut ticks = keepalive.map(|every| {
        let mut ticks = interval_at(Instant::now() + every, every);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ticks
    });
    if limit == Some(0) {
        return;
    }
    let mut last = from;
    let mut sent = 0usize;
    loop {
        changes.borrow_and_update();
        let events = shared.lock().events_after(last, outpost.as_deref());
        for (rv, data) in events {
            last = rv;
            let frame = Bytes::from(format!("data: {data}\n\n"));
            if stall {
                let half = frame.slice(..frame.len() / 2);
                if tx.send(half).await.is_ok() {
                    // Hang with the connection open until the client gives up or the fleet
                    // stops; the sender stays alive so the body never ends.
                    tokio::select! {
                        _ = tx.closed() => {}
                        _ = crate::shared::until_stopped(&mut shutdown) => {}
                    }
                }
                return;
            }
            let copies = if shared.faults.duplicating() { 2 } else { 1 };
            for _ in 0..copies {
                if tx.send(frame.clone()).await.is_err() {
                    return;
                }
            }
            sent += 1;
            if limit.is_some_and(|limit| sent >= limit) {
                return;
            }
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            _ = sleep_until(deadline) => return,
            _ = async { if let Some(ticks) = ticks.as_mut() { ticks.tick().await; } }, if ticks.is_some() => {
                if tx.send(Bytes::from_static(b": keepalive\n\n")).await.is_err() {
                    return;
                }
            }
            _ = tx.closed() => return,
            _ = crate::shared::until_stopped(&mut shutdown) => return,
        }
    }
}
