//! The HTTP answer of a turn: one JSON message, or an event stream whose head is held until
//! the turn has run for one ping interval; and the error bodies (the sse component's, or the
//! host's own when that component is broken).

use std::sync::Arc;

use bytes::Bytes;
use devin_bridge_engine::{is_error_status, MessageHead, TransformCalls as _};
use devin_bridge_types::{error_type, Failure};
use hyper::{Response, StatusCode};
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tracing::Instrument;

use super::body::{full, ResponseBody, Streamed};
use super::calls::run_transform;
use super::failures::RETRY_AFTER_SECONDS;
use super::prepare::Prepared;
use super::safeguard;
use super::turn::run;
use super::Bridge;

/// A non-streaming answer: run the turn, render one JSON message.
pub(crate) async fn respond_json(
    bridge: &Arc<Bridge>,
    prepared: Prepared,
    permit: OwnedSemaphorePermit,
) -> Response<ResponseBody> {
    let Prepared {
        prompt,
        model_id,
        images,
        head,
        mut placement,
    } = prepared;
    let outcome = run(bridge, &prompt, &model_id, &images, &mut placement).await;
    drop(placement);
    drop(permit);
    match outcome {
        Ok((reply, usage)) => {
            let head = MessageHead { usage, ..head };
            let safeguard =
                safeguard::answer(bridge, prompt.classifier_context.as_deref(), &reply).await;
            let size = reply.content_bytes();
            match run_transform(&bridge.transforms, size, move |t| {
                t.render_json(head, reply, safeguard)
            })
            .await
            {
                Ok(json) => json_response(StatusCode::OK, json),
                Err(failure) => error_response(bridge, failure).await,
            }
        }
        Err(failure) => error_response(bridge, failure).await,
    }
}

/// A streaming answer: the turn starts at once; `message_start` goes out when the turn
/// has run for one ping interval (then `ping` while the agent works, then the content events
/// or an `error` event), or with the content when it finishes sooner. A turn that fails
/// before the stream started is answered as a plain error with its own status.
pub(crate) async fn respond_stream(
    bridge: &Arc<Bridge>,
    prepared: Prepared,
    permit: OwnedSemaphorePermit,
) -> Response<ResponseBody> {
    let (frames, receiver) = mpsc::channel::<Bytes>(8);
    let (early, early_failure) = tokio::sync::oneshot::channel::<Failure>();
    let bridge_task = bridge.clone();
    let producer = tokio::spawn(
        async move { stream_turn(bridge_task, prepared, permit, frames, early).await }
            .instrument(tracing::Span::current()),
    );
    match early_failure.await {
        // The turn failed before the stream began: a plain error, status and all.
        Ok(failure) => error_response(bridge, failure).await,
        // The stream began (or the producer ended without a failure to report).
        Err(_) => Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
            .header("x-accel-buffering", "no")
            .body(Streamed::body(receiver, producer))
            .unwrap_or_else(|_| Response::new(full(""))),
    }
}

/// The producer of a streamed answer. Until the stream has begun, a failure goes to `early`
/// (and nothing is written); dropping `early` unsent tells the caller to answer with the
/// stream.
async fn stream_turn(
    bridge: Arc<Bridge>,
    prepared: Prepared,
    permit: OwnedSemaphorePermit,
    frames: mpsc::Sender<Bytes>,
    early: tokio::sync::oneshot::Sender<Failure>,
) {
    let _permit = permit;
    let transforms = &bridge.transforms;
    let head = prepared.head.clone();
    let id = prepared.head.id.clone();
    let start = match run_transform(transforms, 0, move |t| t.stream_start(head)).await {
        Ok(start) => start,
        Err(failure) => {
            let _ = early.send(failure);
            return;
        }
    };
    let ping = run_transform(transforms, 0, |t| t.stream_ping())
        .await
        .unwrap_or_else(|_| "event: ping\ndata: {\"type\":\"ping\"}\n\n".into());
    let Prepared {
        prompt,
        model_id,
        images,
        mut placement,
        ..
    } = prepared;
    let turn = run(&bridge, &prompt, &model_id, &images, &mut placement);
    tokio::pin!(turn);
    // Before the first ping the head is held: a quick failure is still a plain HTTP error.
    let first_ping = tokio::time::sleep(bridge.ping_interval);
    tokio::pin!(first_ping);
    let mut early = Some(early);
    let finished = match early.as_mut() {
        Some(waiting) => tokio::select! {
            outcome = &mut turn => Some(outcome),
            () = &mut first_ping => None,
            // The client went away before the head was sent: the turn (and its agent) ends.
            () = waiting.closed() => {
                tracing::info!(status = 499, id = %id, "client went away during the turn; agent killed");
                return;
            }
        },
        None => None,
    };
    let outcome = match finished {
        Some(Err(failure)) => {
            if let Some(early) = early.take() {
                tracing::info!(code = %failure.code, status = failure.status, id = %id, "turn failed before the stream began");
                let _ = early.send(failure);
            }
            return;
        }
        Some(Ok(answer)) => {
            drop(early.take());
            if frames.send(Bytes::from(start)).await.is_err() {
                return;
            }
            Ok(answer)
        }
        None => {
            drop(early.take());
            if frames.send(Bytes::from(start)).await.is_err()
                || frames.send(Bytes::from(ping.clone())).await.is_err()
            {
                tracing::info!(status = 499, id = %id, "client went away during the turn; agent killed");
                return;
            }
            let mut ticker = tokio::time::interval_at(
                tokio::time::Instant::now() + bridge.ping_interval,
                bridge.ping_interval,
            );
            loop {
                tokio::select! {
                    outcome = &mut turn => break outcome,
                    _ = ticker.tick() => {
                        if frames.send(Bytes::from(ping.clone())).await.is_err() {
                            tracing::info!(status = 499, id = %id, "client went away during the turn; agent killed");
                            return;
                        }
                    }
                    _ = frames.closed() => {
                        tracing::info!(status = 499, id = %id, "client went away during the turn; agent killed");
                        return;
                    }
                }
            }
        }
    };
    let tail = match outcome {
        Ok((reply, usage)) => {
            let safeguard =
                safeguard::answer(&bridge, prompt.classifier_context.as_deref(), &reply).await;
            let size = reply.content_bytes();
            run_transform(transforms, size, move |t| {
                t.stream_finish(reply, usage, safeguard)
            })
            .await
        }
        Err(failure) => Err(failure),
    };
    let tail = match tail {
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
    };
    let _ = frames.send(Bytes::from(tail)).await;
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
pub(crate) async fn error_response(bridge: &Bridge, failure: Failure) -> Response<ResponseBody> {
    let status = answer_status(failure.status);
    tracing::info!(code = %failure.code, status = failure.status, "request failed");
    let for_body = failure.clone();
    let body = run_transform(&bridge.transforms, for_body.message.len(), move |t| {
        t.error_body(for_body)
    })
    .await
    .unwrap_or_else(|_| fallback_error_body(&failure));
    let mut response = json_response(status, body);
    if status == StatusCode::TOO_MANY_REQUESTS {
        // What a client waits before it retries (Claude Code honours it).
        response.headers_mut().insert(
            hyper::header::RETRY_AFTER,
            hyper::header::HeaderValue::from(RETRY_AFTER_SECONDS),
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
