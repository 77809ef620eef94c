//! The HTTP/1.1 server: routing, authentication, body limits, connection limits and graceful
//! shutdown. Every error is an Anthropic-shaped body.

use crate::failures::HostFailure;
use devin_bridge_engine::TransformCalls as _;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use devin_bridge_types::Failure;
use http_body_util::{BodyExt, Limited};
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
use super::respond::{self, error_response, json_response};
use super::{resends, serialize};
use crate::bridge::Bridge;

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
    bridge.pool.drain().await;
    if let Some(resident) = &bridge.resident {
        resident.shutdown().await;
    }
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
    match (&method, path.as_str()) {
        (&Method::GET, "/healthz") => return health(&bridge),
        (&Method::GET, "/metrics") => return metrics(&bridge),
        (_, "/v1/messages" | "/v1/messages/count_tokens" | "/v1/models") => {}
        _ => return error_response(&bridge, HostFailure::NotFound.with("no such endpoint")).await,
    }
    if let Some(key) = &bridge.key {
        if !key.accepts(request.headers()) {
            return error_response(
                &bridge,
                HostFailure::Unauthorized.with("invalid or missing API key"),
            )
            .await;
        }
    }
    match (&method, path.as_str()) {
        (&Method::POST, "/v1/messages") => messages(bridge, request).await,
        (&Method::POST, "/v1/messages/count_tokens") => count_tokens(bridge, request).await,
        (&Method::GET, "/v1/models") => models(&bridge).await,
        _ => {
            error_response(
                &bridge,
                HostFailure::MethodNotAllowed.with("method not allowed for this endpoint"),
            )
            .await
        }
    }
}

/// Reads the body within the policy's limit (413 beyond it) as UTF-8 text.
async fn read_body(bridge: &Bridge, request: Request<Incoming>) -> Result<String, Failure> {
    let too_large = || {
        HostFailure::RequestTooLarge.with(format!("request body exceeds {} bytes", bridge.max_body))
    };
    let declared = request
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    if declared.is_some_and(|length| length > bridge.max_body) {
        return Err(too_large());
    }
    let collected = Limited::new(request.into_body(), bridge.max_body)
        .collect()
        .await
        .map_err(|error| {
            if error.is::<http_body_util::LengthLimitError>() {
                too_large()
            } else {
                HostFailure::InvalidRequest.with("the request body could not be read")
            }
        })?;
    // `Vec::from` takes over the collected buffer when nothing else holds it, instead of copying
    // a body that may be megabytes.
    String::from_utf8(Vec::from(collected.to_bytes()))
        .map_err(|_| HostFailure::InvalidRequest.with("the request body is not UTF-8"))
}

async fn messages(bridge: Arc<Bridge>, request: Request<Incoming>) -> Response<ResponseBody> {
    let conversation = super::resident::conversation_key(request.headers());
    let subagent = request
        .headers()
        .contains_key(super::resident::AGENT_HEADER);
    let body = match read_body(&bridge, request).await {
        Ok(body) => body,
        Err(failure) => return error_response(&bridge, failure).await,
    };
    let joined = bridge
        .resends
        .join(resends::digest(conversation.as_deref(), &body));
    respond::answer(&bridge, joined, body, conversation, subagent).await
}

async fn count_tokens(bridge: Arc<Bridge>, request: Request<Incoming>) -> Response<ResponseBody> {
    let body = match read_body(&bridge, request).await {
        Ok(body) => body,
        Err(failure) => return error_response(&bridge, failure).await,
    };
    match serialize::count_tokens(&bridge.codec, body).await {
        Ok(input_tokens) => json_response(
            StatusCode::OK,
            serde_json::json!({ "input_tokens": input_tokens }).to_string(),
        ),
        Err(failure) => error_response(&bridge, failure).await,
    }
}

async fn models(bridge: &Bridge) -> Response<ResponseBody> {
    let (catalog, vision) = (bridge.catalog(), bridge.vision());
    let size = catalog.len();
    match run_transform(&bridge.transforms, size, move |t| {
        t.list_models(catalog, vision)
    })
    .await
    {
        Ok(Ok(listing)) => json_response(StatusCode::OK, listing),
        Ok(Err(failure)) | Err(failure) => error_response(bridge, failure).await,
    }
}

/// Unauthenticated, like `/healthz`: counts and gauges only, nothing about any request's
/// content.
fn metrics(bridge: &Bridge) -> Response<ResponseBody> {
    let text = bridge.metrics.render(
        bridge.in_flight(),
        bridge.agent_processes(),
        bridge.resident.as_deref(),
    );
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", super::metrics::CONTENT_TYPE)
        .body(super::body::full(text))
        .unwrap_or_else(|_| Response::new(super::body::full("")))
}

fn health(bridge: &Bridge) -> Response<ResponseBody> {
    // The transform limits in force now (SIGHUP can change them).
    let limits = bridge.transforms.runtime().config();
    let (resends_running, resends_kept, resends_kept_bytes) = bridge.resends.sizes();
    let body = serde_json::json!({
        "status": "ok",
        "mode": "summarizer",
        "agent": bridge.agent,
        "components": bridge.transforms.info().into_iter().map(|c| serde_json::json!({"name": c.name, "sha256": c.sha256})).collect::<Vec<_>>(),
        "limits": {
            "memory_mib": limits.memory_bytes >> 20,
            "call_timeout_ms": u64::try_from(limits.call_timeout.as_millis()).unwrap_or(u64::MAX),
        },
        "in_flight_turns": bridge.in_flight(),
        "agent_processes": bridge.agent_processes(),
        "prewarm": bridge.pool.stats(),
        "transport": if bridge.resident.is_some() { "resident" } else { "per-turn" },
        "catalog": bridge.catalog_status(),
        "resident": bridge.resident.as_ref().map(|resident| resident.snapshot()),
        "resends": {
            "running_turns": resends_running,
            "kept_answers": resends_kept,
            "kept_bytes": resends_kept_bytes,
        },
    });
    json_response(StatusCode::OK, body.to_string())
}
