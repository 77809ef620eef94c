//! HTTP plumbing shared by the handlers (bodies, JSON answers, queries, bearer tokens) and the
//! fleet API under `/opbeta/outposts/`.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::{json, Value};

use crate::queue::ListQuery;
use crate::shared::Shared;
use crate::state::ApiError;

pub(crate) use crate::body::{full, Body};

pub(crate) fn respond(status: u16, content_type: &str, body: Body) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("cache-control", "no-store")
        .body(body)
        .unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

pub(crate) fn json_response(status: u16, value: &Value) -> Response<Body> {
    respond(status, "application/json", full(value.to_string()))
}

pub(crate) fn error_response(error: ApiError) -> Response<Body> {
    json_response(
        error.status,
        &json!({"error": {"code": error.code, "message": error.message}}),
    )
}

/// The body, at most `limit` bytes.
pub(crate) async fn read_body(request: Request<Incoming>, limit: usize) -> Result<Bytes, ApiError> {
    Limited::new(request.into_body(), limit)
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .map_err(|_| ApiError::bad_request("the body could not be read or is too large"))
}

/// A JSON object body.
pub(crate) async fn read_json(request: Request<Incoming>) -> Result<Value, ApiError> {
    let bytes = read_body(request, 1 << 20).await?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(value) if value.is_object() => Ok(value),
        _ => Err(ApiError::bad_request("the body must be a JSON object")),
    }
}

/// The query's `name=value` pairs, percent-decoded (a `+` stays a `+`: cursors are base64).
pub(crate) fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(name), percent_decode(value))
        })
        .collect()
}

pub(crate) fn query_value(pairs: &[(String, String)], name: &str) -> Option<String> {
    pairs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, value)| value.clone())
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The token of `Authorization: Bearer <token>`.
pub(crate) fn bearer<B>(request: &Request<B>) -> Option<String> {
    let value = request.headers().get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_owned())
        .filter(|token| !token.is_empty())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    Machine,
    Orchestrator,
}

fn forbidden() -> ApiError {
    ApiError::new(
        403,
        "forbidden",
        "this token may not manage outposts; use the orchestrator token",
    )
}

/// The fleet API: faults first, then auth, then the endpoint.
pub(crate) async fn api(shared: &Arc<Shared>, request: Request<Incoming>) -> Response<Body> {
    match api_inner(shared, request).await {
        Ok(response) => response,
        Err(error) => error_response(error),
    }
}

async fn api_inner(
    shared: &Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    if let Some(status) = shared.faults.take_failure() {
        return Err(ApiError::new(
            status,
            match status {
                429 => "rate_limited",
                500..=599 => "unavailable",
                _ => "injected_failure",
            },
            "an injected failure",
        ));
    }
    let unauthorized = || ApiError::new(401, "unauthorized", "missing or invalid bearer token");
    if shared.faults.is_unauthorized() {
        return Err(unauthorized());
    }
    let scope = match bearer(&request) {
        Some(token) if token == shared.config.orchestrator_token => Scope::Orchestrator,
        Some(token) if token == shared.config.machine_token => Scope::Machine,
        _ => return Err(unauthorized()),
    };
    let path = request.uri().path().to_owned();
    let segments: Vec<&str> = path
        .trim_start_matches("/opbeta/outposts/")
        .split('/')
        .collect();
    let method = request.method().clone();
    let pairs = query_pairs(request.uri().query());
    let not_allowed = || ApiError::new(405, "method_not_allowed", "method not allowed");
    match segments.as_slice() {
        ["devins"] if method == Method::GET => devins(shared, &pairs),
        ["devins"] => Err(not_allowed()),
        ["devins", id] if method == Method::GET => shared
            .with_state(|state| state.entry_json(id))
            .map(|entry| json_response(200, &entry))
            .ok_or_else(|| ApiError::not_found("session")),
        ["devins", id, action @ ("claim" | "release")] if method == Method::POST => {
            let (id, action) = (id.to_string(), action.to_string());
            let body = read_json(request).await?;
            let acceptor = body["acceptor_id"]
                .as_str()
                .filter(|a| !a.is_empty())
                .ok_or_else(|| ApiError::bad_request("acceptor_id must be a non-empty string"))?
                .to_owned();
            let result = if action == "claim" {
                let conflict = shared.faults.take_claim_conflict();
                let gateway_url = (!shared.config.omit_gateway_url
                    && !shared.faults.dropping_gateway_url())
                .then(|| shared.gateway_url());
                let config = shared.config.clone();
                shared
                    .with_state(|state| state.claim(&config, &id, &acceptor, conflict, gateway_url))
            } else {
                let released = shared.with_state(|state| state.release(&id, &acceptor));
                if let Some(delay) = shared.faults.release_answer_delay() {
                    tokio::time::sleep(delay).await;
                }
                released
            };
            result.map(|value| json_response(200, &value))
        }
        ["devins", ..] => Err(ApiError::not_found("endpoint")),
        ["outposts"] if method == Method::GET => Ok(json_response(
            200,
            &json!({"items": shared.with_state(|state| state.outposts_json())}),
        )),
        ["outposts"] if method == Method::POST => {
            if scope != Scope::Orchestrator {
                return Err(forbidden());
            }
            let body = read_json(request).await?;
            let name = body["name"]
                .as_str()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| ApiError::bad_request("name must be a non-empty string"))?;
            let platform = match &body["platform"] {
                Value::Null => None,
                Value::String(p) if ["linux", "macos", "windows"].contains(&p.as_str()) => {
                    Some(p.as_str())
                }
                _ => {
                    return Err(ApiError::bad_request(
                        "platform must be linux, macos, windows or null",
                    ))
                }
            };
            let description = body["description"].as_str().unwrap_or("");
            shared
                .with_state(|state| state.create_outpost(name, platform, description))
                .map(|outpost| json_response(201, &outpost))
        }
        ["outposts"] => Err(not_allowed()),
        ["outposts", id] => {
            if scope != Scope::Orchestrator {
                return Err(forbidden());
            }
            let found = shared.with_state(|state| {
                let value = state.outposts.get(*id).map(|o| state.outpost_json(o));
                if method == Method::DELETE {
                    state.outposts.remove(*id);
                }
                value
            });
            match (method, found) {
                (_, None) => Err(ApiError::not_found("outpost")),
                (Method::GET | Method::DELETE, Some(outpost)) => Ok(json_response(200, &outpost)),
                _ => Err(not_allowed()),
            }
        }
        _ => Err(ApiError::not_found("endpoint")),
    }
}

/// `GET devins`: a list page, or a watch stream with `watch=true`.
fn devins(shared: &Arc<Shared>, pairs: &[(String, String)]) -> Result<Response<Body>, ApiError> {
    let outpost = query_value(pairs, "outpost").filter(|o| !o.is_empty());
    let cursor = query_value(pairs, "cursor").filter(|c| !c.is_empty());
    if query_value(pairs, "watch").as_deref() == Some("true") {
        let from = match &cursor {
            Some(cursor) => shared.with_state(|state| state.check_cursor(cursor))?.rv,
            None => 0,
        };
        return Ok(crate::watch::start(shared.clone(), outpost, from));
    }
    let first = match query_value(pairs, "first") {
        None => 100,
        Some(first) => first
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=200).contains(n))
            .ok_or_else(|| ApiError::bad_request("first must be an integer from 1 to 200"))?,
    };
    let query = ListQuery {
        outpost,
        phase: query_value(pairs, "phase").filter(|p| !p.is_empty()),
        acceptor_id: query_value(pairs, "acceptor_id").filter(|a| !a.is_empty()),
        first,
        cursor,
    };
    let config = shared.config.clone();
    shared
        .with_state(|state| state.list(&config, &query))
        .map(|page| json_response(200, &page))
}
