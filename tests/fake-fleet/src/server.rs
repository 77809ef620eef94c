//! The accept loop, the routing of the four path groups, the request log, and the clock that
//! expires claims.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::http::{full, json_response, respond, Body};
use crate::shared::Shared;
use crate::static_files::BASE_PATH;
use crate::RequestLog;

/// Serves until the fleet stops; then every open connection is cut.
pub(crate) async fn serve(shared: Arc<Shared>, listener: TcpListener) {
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            _ = crate::shared::until_stopped(&mut shutdown) => return,
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        tokio::spawn(async move {
            let service_shared = shared.clone();
            let service = service_fn(move |request| {
                let shared = service_shared.clone();
                async move { Ok::<_, Infallible>(route(&shared, request).await) }
            });
            let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            let mut shutdown = shared.shutdown.subscribe();
            tokio::select! {
                _ = connection => {}
                _ = crate::shared::until_stopped(&mut shutdown) => {}
            }
        });
    }
}

/// Applies claim expiries and lagging status changes as time passes.
pub(crate) async fn tick_loop(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = crate::shared::until_stopped(&mut shutdown) => return,
        }
        let changed = {
            let mut state = shared.lock();
            let before = state.rv;
            state.tick(Instant::now());
            state.rv != before
        };
        if changed {
            shared.poke();
        }
    }
}

async fn route(shared: &Arc<Shared>, request: Request<Incoming>) -> Response<Body> {
    let path = request.uri().path().to_owned();
    if path.starts_with("/_control/") {
        return crate::control::handle(shared, request).await;
    }
    let method = request.method().to_string();
    let logged_path = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| path.clone());
    let response = if path.starts_with("/opbeta/outposts/") {
        crate::http::api(shared, request).await
    } else if path.starts_with("/gateway/") {
        crate::gateway::handle(shared, request).await
    } else if path.starts_with(BASE_PATH) && request.method() == Method::GET {
        static_file(shared, &path).await
    } else {
        json_response(
            404,
            &serde_json::json!({"error": {"code": "not_found", "message": "no such endpoint"}}),
        )
    };
    shared.lock().requests.push(RequestLog {
        method,
        path: logged_path,
        status: response.status().as_u16(),
        at: Instant::now(),
    });
    response
}

async fn static_file(shared: &Arc<Shared>, path: &str) -> Response<Body> {
    let answer = shared.lock().files.get(path);
    if answer.binary && !shared.config.download_delay.is_zero() {
        tokio::time::sleep(shared.config.download_delay).await;
    }
    let content_type = if answer.binary {
        "application/octet-stream"
    } else {
        "text/plain"
    };
    respond(answer.status, content_type, full(answer.body))
}
