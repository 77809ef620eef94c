//! The HTTP/1.1 server: routing, authentication, body limits, connection limits and graceful
//! shutdown. Every error is an Anthropic-shaped body.
//!
//! The edge: the only module that reads a request's headers. It reads what they say of the
//! conversation once ([`Conversation::of`]) and hands the typed value down; it holds the
//! [`Bridge`] and gives each handler the parts it uses.

use crate::failures::HostFailure;
use devin_bridge_engine::TransformCalls as _;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tracing::Instrument;

use super::body::ResponseBody;
use super::calls::run_transform;
use super::respond::{json_response, Responder};
use super::serialize::{self, Codec};
use crate::admission::Admission;
use crate::bridge::Bridge;
use crate::conversation::Conversation;
use crate::resends;

/// Serves until `shutdown` resolves, then stops accepting, lets requests finish for up to
/// `grace`, and aborts the rest (which kills their agents).
pub async fn serve(
    bridge: Arc<Bridge>,
    listener: TcpListener,
    max_connections: usize,
    grace: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(max_connections));
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => match permit { Ok(permit) => permit, Err(_) => break },
            _ = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let bridge = bridge.clone();
        let service = service_fn(move |request| {
            let bridge = bridge.clone();
            async move { Ok::<_, Infallible>(route(bridge, request).await) }
        });
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_secs(30))
            .max_buf_size(256 << 10)
            .serve_connection(TokioIo::new(stream), service);
        let watched = graceful.watch(connection);
        connections.spawn(async move {
            let _permit = permit;
            if let Err(error) = watched.await {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
        });
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    tracing::info!(
        in_flight = bridge.in_flight(),
        grace_ms = grace.as_millis() as u64,
        "no longer accepting; letting running requests finish"
    );
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("all connections finished"),
        _ = tokio::time::sleep(grace) => {
            tracing::warn!(in_flight = bridge.in_flight(), "shutdown grace elapsed; killing the remaining turns");
        }
    }
    connections.shutdown().await;
    // Turns run in tasks of their own (a resend may join them): they end here.
    bridge.resends.close(Duration::from_secs(5)).await;
    bridge.sessions.shutdown().await;
}

/// Every request runs in its own span (attached with `instrument`, so concurrent requests on
/// one worker never nest into each other's spans).
async fn route(bridge: Arc<Bridge>, request: Request<Incoming>) -> Response<ResponseBody> {
    let span =
        tracing::info_span!("request", method = %request.method(), path = %request.uri().path());
    let path = request.uri().path().to_owned();
    let response = dispatch(bridge.clone(), request).instrument(span).await;
    bridge
        .metrics
        .count_request(&path, response.status().as_u16());
    response
}

async fn dispatch(bridge: Arc<Bridge>, request: Request<Incoming>) -> Response<ResponseBody> {
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    let responder = &bridge.responder;
    match (&method, path.as_str()) {
        (&Method::GET, "/healthz") => return health(&bridge),
        (&Method::GET, "/metrics") => return metrics(&bridge),
        (_, "/v1/messages" | "/v1/messages/count_tokens" | "/v1/models") => {}
        _ => {
            return responder
                .error(HostFailure::NotFound.with("no such endpoint"))
                .await
        }
    }
    if !bridge.admission.accepts(request.headers()) {
        let failure = HostFailure::Unauthorized.with("invalid or missing API key");
        return responder.error(failure).await;
    }
    match (&method, path.as_str()) {
        (&Method::POST, "/v1/messages") => messages(&bridge, request).await,
        (&Method::POST, "/v1/messages/count_tokens") => {
            let codec = &bridge.turns.codec;
            count_tokens(&bridge.admission, codec, responder, request).await
        }
        (&Method::GET, "/v1/models") => models(&bridge.turns.codec, responder).await,
        _ => {
            let failure =
                HostFailure::MethodNotAllowed.with("method not allowed for this endpoint");
            responder.error(failure).await
        }
    }
}

/// `/v1/messages`: the conversation read from the headers once, the body within the limit,
/// the request joined to its turn (a resend) or starting it.
async fn messages(bridge: &Arc<Bridge>, request: Request<Incoming>) -> Response<ResponseBody> {
    let conversation = Conversation::of(request.headers());
    let body = match bridge.admission.read_body(request).await {
        Ok(body) => body,
        Err(failure) => return bridge.responder.error(failure).await,
    };
    let joined = bridge
        .resends
        .join(resends::digest(conversation.key_str(), &body));
    bridge.answer(joined, body, conversation).await
}

/// `/v1/messages/count_tokens`: the serializer's estimate (see `serialize::count_tokens`).
async fn count_tokens(
    admission: &Admission,
    codec: &Codec,
    responder: &Responder,
    request: Request<Incoming>,
) -> Response<ResponseBody> {
    let body = match admission.read_body(request).await {
        Ok(body) => body,
        Err(failure) => return responder.error(failure).await,
    };
    match serialize::count_tokens(codec, body).await {
        Ok(input_tokens) => json_response(
            StatusCode::OK,
            serde_json::json!({ "input_tokens": input_tokens }).to_string(),
        ),
        Err(failure) => responder.error(failure).await,
    }
}

/// `/v1/models`: the catalog in force, listed by the model-alias transform (with vision when
/// images reach the agent).
async fn models(codec: &Codec, responder: &Responder) -> Response<ResponseBody> {
    let (catalog, vision) = (codec.catalog(), codec.images.max_images > 0);
    let size = catalog.len();
    match run_transform(&codec.transforms, size, move |t| {
        t.list_models(catalog, vision)
    })
    .await
    {
        Ok(Ok(listing)) => json_response(StatusCode::OK, listing),
        Ok(Err(failure)) | Err(failure) => responder.error(failure).await,
    }
}

/// Unauthenticated, like `/healthz`: counts and gauges only, nothing about any request's
/// content.
fn metrics(bridge: &Bridge) -> Response<ResponseBody> {
    let text = bridge.metrics.render(
        bridge.in_flight(),
        bridge.agent_processes(),
        bridge.resident().map(Arc::as_ref),
    );
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", super::metrics::CONTENT_TYPE)
        .body(super::body::full(text))
        .unwrap_or_else(|_| Response::new(super::body::full("")))
}

fn health(bridge: &Bridge) -> Response<ResponseBody> {
    // The transform limits in force now (SIGHUP can change them).
    let transforms = bridge.transforms();
    let limits = transforms.runtime().config();
    let (resends_running, resends_kept, resends_kept_bytes) = bridge.resends.sizes();
    let body = serde_json::json!({
        "status": "ok",
        "mode": "summarizer",
        "agent": bridge.agent,
        "components": transforms.info().into_iter().map(|c| serde_json::json!({"name": c.name, "sha256": c.sha256})).collect::<Vec<_>>(),
        "limits": {
            "memory_mib": limits.memory_bytes >> 20,
            "call_timeout_ms": u64::try_from(limits.call_timeout.as_millis()).unwrap_or(u64::MAX),
        },
        "in_flight_turns": bridge.in_flight(),
        "agent_processes": bridge.agent_processes(),
        "prewarm": bridge.pool().stats(),
        "transport": bridge.sessions.transport(),
        "catalog": bridge.catalog_status(),
        "resident": bridge.resident().map(|resident| resident.snapshot()),
        "resends": {
            "running_turns": resends_running,
            "kept_answers": resends_kept,
            "kept_bytes": resends_kept_bytes,
        },
    });
    json_response(StatusCode::OK, body.to_string())
}
