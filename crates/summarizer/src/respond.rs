//! The HTTP answer of a turn: one JSON message, or an event stream whose head is held until
//! the turn has run for one ping interval or its first text is certain, and whose text streams
//! as it becomes certain (coalesced, see `streamed::Coalescer`); and the error bodies (the sse
//! component's, or the host's own when that component is broken).
//!
//! A turn runs in a task of its own (the bridge's walk starts it) and publishes its stages;
//! every request that shares it (the one that started it, and resends of it: see
//! [`super::resends`]) renders the answer for its own client from those stages, with the
//! [`Responder`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use devin_bridge_engine::{is_error_status, MessageHead, TransformCalls as _, Transforms, Turn};
use devin_bridge_types::{error_type, Failure};
use hyper::{Response, StatusCode};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::body::{full, streamed, ResponseBody};
use super::calls::run_transform;
use super::failures::retry_after_of;
use super::metrics::Metrics;
use super::resends::{Answer, Finished, Stage, Waiter};
use super::shown::Shown;
use super::streamed::Coalescer;

/// What answering a request needs: the transforms (the sse component renders every answer
/// and error), the metrics of streamed answers and the ping interval of a stream. Cheap to
/// clone: a streamed answer's producer runs in a task of its own.
#[derive(Clone)]
pub(crate) struct Responder {
    pub(crate) transforms: Arc<Transforms>,
    pub(crate) metrics: Arc<Metrics>,
    /// How long a stream's head is held, and the interval of its pings.
    pub(crate) ping_interval: Duration,
}

impl Responder {
    /// A waiting request's answer: a plain error when the turn failed before it started, one
    /// JSON message, or a stream.
    pub(crate) async fn respond(&self, mut waiter: Waiter) -> Response<ResponseBody> {
        match waiter.started().await {
            Stage::Started {
                head,
                stream: true,
                shown,
            } => self.respond_stream(head, shown, waiter).await,
            Stage::Done(finished) => self.finished(&finished).await,
            Stage::Started { .. } | Stage::Preparing => {
                let finished = waiter.finished().await;
                self.finished(&finished).await
            }
        }
    }

    /// A finished turn's whole answer: JSON, a stream in one piece, or the error.
    pub(crate) async fn finished(&self, finished: &Finished) -> Response<ResponseBody> {
        render_finished(&self.transforms, finished).await
    }

    /// An Anthropic error body (see [`error_response`]).
    pub(crate) async fn error(&self, failure: Failure) -> Response<ResponseBody> {
        error_response(&self.transforms, failure).await
    }

    /// A streaming answer to a started turn: `message_start` goes out when the turn has run
    /// for one ping interval (then `ping` while the agent works, then the content events or an
    /// `error` event), or with the content when it finishes sooner. A turn that fails before
    /// the stream started is answered as a plain error with its own status.
    async fn respond_stream(
        &self,
        head: MessageHead,
        shown: Option<Arc<Shown>>,
        waiter: Waiter,
    ) -> Response<ResponseBody> {
        let (frames, receiver) = mpsc::channel::<Bytes>(8);
        let (early, early_failure) = tokio::sync::oneshot::channel::<Failure>();
        let responder = self.clone();
        let producer = tokio::spawn(
            async move { stream_turn(responder, head, shown, waiter, frames, early).await }
                .instrument(tracing::Span::current()),
        );
        match early_failure.await {
            // The turn failed before the stream began: a plain error, status and all.
            Ok(failure) => self.error(failure).await,
            // The stream began (or the producer ended without a failure to report).
            Err(_) => stream_response(streamed(receiver, producer)),
        }
    }
}

/// A finished turn's whole answer: JSON, a stream in one piece, or the error.
async fn render_finished(
    transforms: &Arc<Transforms>,
    finished: &Finished,
) -> Response<ResponseBody> {
    let (head, answer) = match (&finished.head, &finished.outcome) {
        (Some(head), Ok(answer)) => (head.clone(), answer),
        (_, Err(failure)) => return error_response(transforms, failure.clone()).await,
        (None, Ok(_)) => {
            return error_response(
                transforms,
                super::failures::HostFailure::Overloaded.with("the turn lost its answer; retry"),
            )
            .await
        }
    };
    let (reply, safeguard) = (answer.reply.clone(), answer.safeguard.clone());
    let size = reply.content_bytes();
    if finished.stream {
        let usage = answer.usage;
        let start = run_transform(transforms, 0, move |t| t.stream_start(head)).await;
        let tail = run_transform(transforms, size, move |t| {
            t.stream_finish(reply, usage, safeguard)
        })
        .await;
        return match (start, tail) {
            (Ok(start), Ok(tail)) => stream_response(full(format!("{start}{tail}"))),
            (Err(failure), _) | (_, Err(failure)) => error_response(transforms, failure).await,
        };
    }
    let head = MessageHead {
        usage: answer.usage,
        ..head
    };
    match run_transform(transforms, size, move |t| {
        t.render_json(head, reply, safeguard)
    })
    .await
    {
        Ok(json) => json_response(StatusCode::OK, json),
        Err(failure) => error_response(transforms, failure).await,
    }
}

fn stream_response(body: ResponseBody) -> Response<ResponseBody> {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .header("x-accel-buffering", "no")
        .body(body)
        .unwrap_or_else(|_| Response::new(full("")))
}

/// The producer of a streamed answer. Until the stream has begun, a failure goes to `early`
/// (and nothing is written); dropping `early` unsent tells the caller to answer with the
/// stream. Returning drops `waiter`: a client that went away no longer holds the turn.
///
/// The head (`message_start`) goes out at the turn's first certain text or at the first ping
/// interval, whichever comes first; then pings at every interval, and, when the turn's text
/// streams (`shown`), its text as `text_delta`s of one text block, coalesced (see
/// [`Coalescer`]). At the end: the text not sent yet, the calls, `message_delta` and
/// `message_stop`, or an `error` event after what was shown.
async fn stream_turn(
    responder: Responder,
    head: MessageHead,
    shown: Option<Arc<Shown>>,
    mut waiter: Waiter,
    frames: mpsc::Sender<Bytes>,
    early: tokio::sync::oneshot::Sender<Failure>,
) {
    let id = head.id.clone();
    let mut stream = match Outlet::open(&responder, head, frames, early).await {
        Some(stream) => stream,
        None => return,
    };
    let shown = shown.as_deref();
    let streamed = async {
        let finished = stream.follow_turn(&mut waiter, shown).await?;
        stream.finish(&finished, shown, &id).await
    };
    if streamed.await.is_err() {
        tracing::info!(status = 499, id = %id, "client went away during the turn");
    }
}

/// The client of a streamed answer went away (its frames' receiver is gone).
struct Gone;

/// One streamed answer as it is written: the frames to its client, and, until the head is
/// sent, the channel that makes an early failure a plain HTTP error.
struct Outlet<'b> {
    responder: &'b Responder,
    /// Every event of this answer is rendered by one instance of the sse component, kept for
    /// the answer (a turn's store: see `devin_bridge_engine::Turn`), not one per event.
    transforms: Arc<Turn>,
    frames: mpsc::Sender<Bytes>,
    /// `None` once the head is sent (or the early failure reported).
    early: Option<tokio::sync::oneshot::Sender<Failure>>,
    /// The head, `message_start`.
    start: String,
    ping: String,
    began: std::time::Instant,
    text: TextSent,
}

impl<'b> Outlet<'b> {
    /// Renders the head and the ping; a failure to render the head goes to `early` (`None`).
    async fn open(
        responder: &'b Responder,
        head: MessageHead,
        frames: mpsc::Sender<Bytes>,
        early: tokio::sync::oneshot::Sender<Failure>,
    ) -> Option<Outlet<'b>> {
        let transforms = Arc::new(Turn::open(&*responder.transforms));
        let began = std::time::Instant::now();
        let start = match run_transform(&transforms, 0, move |t| t.stream_start(head)).await {
            Ok(start) => start,
            Err(failure) => {
                let _ = early.send(failure);
                return None;
            }
        };
        let ping = run_transform(&transforms, 0, |t| t.stream_ping())
            .await
            .unwrap_or_else(|_| "event: ping\ndata: {\"type\":\"ping\"}\n\n".into());
        Some(Self {
            responder,
            transforms,
            frames,
            early: Some(early),
            start,
            ping,
            began,
            text: TextSent::default(),
        })
    }

    async fn send(&self, frame: String) -> Result<(), Gone> {
        self.frames.send(Bytes::from(frame)).await.map_err(|_| Gone)
    }

    /// Sends the head unless it was sent; from then on a failure is an `error` event.
    async fn send_head(&mut self) -> Result<(), Gone> {
        match self.early.take() {
            Some(early) => {
                drop(early);
                self.send(self.start.clone()).await
            }
            None => Ok(()),
        }
    }

    /// Waits for the turn to finish, sending the head at the first ping interval (or with
    /// the first certain text), pings at every interval after it, and the certain text as
    /// the coalescer lets it go.
    async fn follow_turn(
        &mut self,
        waiter: &mut Waiter,
        shown: Option<&Shown>,
    ) -> Result<Arc<Finished>, Gone> {
        let ping_interval = self.responder.ping_interval;
        let turn = waiter.finished();
        tokio::pin!(turn);
        // Before the first ping the head is held: a quick failure is still a plain HTTP error.
        let first_ping = tokio::time::sleep(ping_interval);
        tokio::pin!(first_ping);
        let mut ticker = tokio::time::interval_at(
            tokio::time::Instant::now() + ping_interval * 2,
            ping_interval,
        );
        let mut changes = shown.map(Shown::subscribe);
        loop {
            let due = self.text.coalescer.due();
            let head_sent = self.early.is_none();
            tokio::select! {
                finished = &mut turn => return Ok(finished),
                () = &mut first_ping, if !head_sent => {
                    self.send_head().await?;
                    self.send(self.ping.clone()).await?;
                }
                _ = ticker.tick(), if head_sent => self.send(self.ping.clone()).await?,
                changed = changed(&mut changes) => match (changed, shown) {
                    (true, Some(shown)) => self.text.take_from(shown),
                    (true, None) => {}
                    // The turn dropped its text: only its end is left to wait for.
                    (false, _) => changes = None,
                },
                () = sleep_until(due), if due.is_some() => self.send_due_text().await?,
                // Before the head, the caller stops waiting by dropping the frames' receiver
                // it holds; after, the body (which owns it) was dropped.
                () = self.frames.closed() => return Err(Gone),
            }
        }
    }

    /// Sends the text the coalescer lets go (the head first, if it was not sent) as
    /// `text_delta`s; when the sse component fails, the end renders the whole reply or the
    /// error instead.
    async fn send_due_text(&mut self) -> Result<(), Gone> {
        self.send_head().await?;
        let piece = self.text.coalescer.take();
        let first = !self.text.block_open;
        let events = run_transform(&self.transforms, piece.len(), move |t| {
            t.stream_text(first, piece)
        })
        .await;
        let Ok(events) = events else {
            return Ok(());
        };
        if first {
            self.responder
                .metrics
                .observe_first_text(self.began.elapsed().as_secs_f64());
        }
        self.text.block_open = true;
        self.text.emitted = self.text.taken - self.text.coalescer.pending_len();
        self.send(events).await
    }

    /// The end of the answer: a plain error when the turn failed before the stream began and
    /// before any text was certain; otherwise the head if not sent, then (after a failure)
    /// the text still pending, then the tail.
    async fn finish(
        &mut self,
        finished: &Finished,
        shown: Option<&Shown>,
        id: &str,
    ) -> Result<(), Gone> {
        if let Some(shown) = shown {
            // Text that became certain since the last wake-up.
            self.text.take_from(shown);
        }
        if let Err(failure) = &finished.outcome {
            // A turn that failed before any of its text was certain is a plain error; once
            // text was certain it is shown, and the error event follows it.
            if self.text.taken == 0 {
                if let Some(early) = self.early.take() {
                    tracing::info!(code = %failure.code, status = failure.status, id = %id, "turn failed before the stream began");
                    let _ = early.send(failure.clone());
                    return Ok(());
                }
            }
        }
        self.send_head().await?;
        if finished.outcome.is_err() && self.text.coalescer.pending_len() > 0 {
            // What was certain is shown before the error, as it would have been a moment later.
            let (first, piece) = (!self.text.block_open, self.text.coalescer.take());
            if let Ok(events) = run_transform(&self.transforms, piece.len(), move |t| {
                t.stream_text(first, piece)
            })
            .await
            {
                self.send(events).await?;
            }
        }
        let tail = self.tail(&finished.outcome, shown, id).await;
        let _ = self.send(tail).await;
        if shown.is_some() {
            self.responder
                .metrics
                .observe_last_byte(self.began.elapsed().as_secs_f64());
        }
        Ok(())
    }

    /// The last events: the reply (its text not sent yet, after what was), its calls,
    /// `message_delta` and `message_stop`; or the `error` event of the turn's failure.
    async fn tail(
        &self,
        outcome: &Result<Answer, Failure>,
        shown: Option<&Shown>,
        id: &str,
    ) -> String {
        let transforms = &self.transforms;
        let tail = match outcome {
            Ok(answer) => {
                let (reply, usage, safeguard) =
                    (answer.reply.clone(), answer.usage, answer.safeguard.clone());
                let size = reply.content_bytes();
                if self.text.block_open {
                    let whole = reply.shown_text();
                    let rest = whole
                        .get(self.text.emitted..)
                        .unwrap_or_default()
                        .to_owned();
                    if !whole.starts_with(&self.text.sent_prefix(shown)) {
                        tracing::error!(id = %id, "the streamed text is not a prefix of the reply's text");
                    }
                    let calls: Vec<_> = reply.calls().cloned().collect();
                    run_transform(transforms, size, move |t| {
                        t.stream_finish_after_text(rest, calls, usage, safeguard)
                    })
                    .await
                } else {
                    run_transform(transforms, size, move |t| {
                        t.stream_finish(reply, usage, safeguard)
                    })
                    .await
                }
            }
            Err(failure) => Err(failure.clone()),
        };
        match tail {
            Ok(events) => events,
            Err(failure) => {
                tracing::warn!(code = %failure.code, status = failure.status, id = %id, "turn failed after the stream started");
                let event_failure = failure.clone();
                run_transform(transforms, event_failure.message.len(), move |t| {
                    t.error_event(event_failure)
                })
                .await
                .unwrap_or_else(|_| fallback_error_event(&failure))
            }
        }
    }
}

/// What one streamed response has taken of its turn's shown text and sent.
#[derive(Default)]
struct TextSent {
    coalescer: Coalescer,
    /// Bytes of the shown text taken into the coalescer.
    taken: usize,
    /// Bytes of the shown text sent in `text_delta`s.
    emitted: usize,
    /// The text block was opened.
    block_open: bool,
}

impl TextSent {
    fn take_from(&mut self, shown: &Shown) {
        let new = shown.since(self.taken);
        self.taken += new.len();
        self.coalescer.add(&new, tokio::time::Instant::now());
    }

    /// The text sent so far (for the end's consistency check).
    fn sent_prefix(&self, shown: Option<&Shown>) -> String {
        shown
            .map(|shown| shown.text())
            .and_then(|text| text.get(..self.emitted).map(str::to_owned))
            .unwrap_or_default()
    }
}

/// Whether the shown text changed (`false` once its sender is gone); never resolves without a
/// receiver.
async fn changed(changes: &mut Option<tokio::sync::watch::Receiver<usize>>) -> bool {
    match changes {
        Some(changes) => changes.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

async fn sleep_until(due: Option<tokio::time::Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

pub(crate) fn json_response(status: StatusCode, json: String) -> Response<ResponseBody> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(full(json))
        .unwrap_or_else(|_| Response::new(full("")))
}

/// An Anthropic error body with the failure's status, rendered by the sse component, or by the
/// host itself if that component is broken (errors must always be answerable).
pub(crate) async fn error_response(
    transforms: &Arc<Transforms>,
    failure: Failure,
) -> Response<ResponseBody> {
    let status = answer_status(failure.status);
    tracing::info!(code = %failure.code, status = failure.status, "request failed");
    let for_body = failure.clone();
    let body = run_transform(transforms, for_body.message.len(), move |t| {
        t.error_body(for_body)
    })
    .await
    .unwrap_or_else(|_| fallback_error_body(&failure));
    let mut response = json_response(status, body);
    if status == StatusCode::TOO_MANY_REQUESTS {
        // What a client waits before it retries (Claude Code honours it): the wait the agent's
        // service asked for, else a default.
        response.headers_mut().insert(
            hyper::header::RETRY_AFTER,
            hyper::header::HeaderValue::from(retry_after_of(&failure)),
        );
    }
    response
}

/// The HTTP status an error is answered with. Component failures have had their status
/// checked already (`engine::is_error_status`); this keeps a non-error status from reaching
/// the wire whatever produced the failure.
fn answer_status(status: u16) -> StatusCode {
    if is_error_status(status) {
        StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY)
    } else {
        StatusCode::BAD_GATEWAY
    }
}

/// The host's own error body, for when the sse component cannot render one. The error `type`
/// comes from the same table the sse component uses.
pub(crate) fn fallback_error_body(failure: &Failure) -> String {
    serde_json::json!({ "type": "error", "error": { "type": error_type(failure.status), "message": failure.message } }).to_string()
}

fn fallback_error_event(failure: &Failure) -> String {
    format!("event: error\ndata: {}\n\n", fallback_error_body(failure))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(status: u16) -> Failure {
        Failure {
            code: "some_code".into(),
            message: "Something failed.".into(),
            status,
            repairable: false,
        }
    }

    fn error_kind(body: &str) -> String {
        let value: serde_json::Value = serde_json::from_str(body).expect("JSON body");
        value["error"]["type"]
            .as_str()
            .expect("error type")
            .to_owned()
    }

    #[test]
    fn fallback_and_sse_component_agree_on_every_error_status() {
        for status in 400..=599 {
            let failure = failure(status);
            let parse = |body: String| -> serde_json::Value {
                serde_json::from_str(&body).expect("JSON error body")
            };
            assert_eq!(
                parse(fallback_error_body(&failure)),
                parse(devin_bridge_sse::error_body(&failure)),
                "status {status}"
            );
        }
    }

    #[test]
    fn previously_divergent_statuses_get_the_shared_types() {
        // The host's old fallback answered `api_error` for all of these.
        let expected = [
            (403, "permission_error"),
            (402, "invalid_request_error"),
            (405, "invalid_request_error"),
            (409, "invalid_request_error"),
            (422, "invalid_request_error"),
            (499, "invalid_request_error"),
        ];
        for (status, kind) in expected {
            assert_eq!(error_kind(&fallback_error_body(&failure(status))), kind);
        }
    }

    #[test]
    fn non_error_statuses_are_never_answered() {
        for status in [0, 101, 200, 204, 304, 399, 600, 1000] {
            assert_eq!(answer_status(status), StatusCode::BAD_GATEWAY, "{status}");
        }
        assert_eq!(answer_status(529).as_u16(), 529);
        assert_eq!(answer_status(400), StatusCode::BAD_REQUEST);
    }
}
