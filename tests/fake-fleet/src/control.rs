//! The test control API over HTTP (`/_control/...`, no auth: the fleet listens on loopback),
//! for tests and benchmarks in another process than the fleet. Every answer is JSON.
//!
//! | request | effect |
//! |---|---|
//! | `POST /_control/outposts {"name","platform"?}` | `{"outpost_id"}` |
//! | `POST /_control/enqueue {"outpost_id","kind"?,"platform"?,"remote_binary_sha"?,"network_policy"?,"behaviour"?}` | `{"session_id"}`; behaviour `normal`, `crash`, `hang`, `exit-early` or `{"probe":["host:port",..]}` |
//! | `POST /_control/end_session {"session_id","status":"suspended"\|"terminated"}` | ends it |
//! | `POST /_control/terminate_silently {"session_id"}`, `POST /_control/delete_entry {"session_id"}` | as the Rust API |
//! | `POST /_control/publish_binary?sha=&suffix=&sha256=correct\|wrong\|missing` (body: the bytes) | publishes |
//! | `POST /_control/set_latest {"suffix","sha"}` | sets `latest_<suffix>` |
//! | `POST /_control/expire_cursors` | every cursor issued so far expires |
//! | `POST /_control/faults {"fail_next":{"n","status"}?,"unauthorized"?,"duplicate_events"?,"end_streams_after"?,"stall_next_stream_mid_event"?,"drop_gateway_url"?,"claim_conflict_next"?}` | sets the given faults |
//! | `GET /_control/entry?session=`, `/_control/history?session=`, `/_control/reports?session=` | the entry (or null), the claim history, the remote's reports |
//! | `GET /_control/stats` | requests, claim histories, connect latencies, downloads |
//!
//! Instants are milliseconds since the fleet started.

use std::sync::Arc;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::{json, Value};

use crate::http::{
    error_response, json_response, query_pairs, query_value, read_body, read_json, Body,
};
use crate::shared::Shared;
use crate::state::ApiError;
use crate::{ClaimEvent, Kind, RemoteBehaviour, SessionSpec, SessionStatus, Sha256File};

pub(crate) async fn handle(shared: &Arc<Shared>, request: Request<Incoming>) -> Response<Body> {
    handle_inner(shared, request)
        .await
        .unwrap_or_else(error_response)
}

fn millis(shared: &Shared, at: Instant) -> u64 {
    at.saturating_duration_since(shared.started).as_millis() as u64
}

fn string(body: &Value, name: &str) -> Result<String, ApiError> {
    body[name]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| ApiError::bad_request(format!("{name} must be a string")))
}

fn history_json(shared: &Shared, history: &[ClaimEvent]) -> Value {
    history
        .iter()
        .map(|event| {
            json!({
                "kind": format!("{:?}", event.kind),
                "acceptor": event.acceptor,
                "at_ms": millis(shared, event.at),
            })
        })
        .collect()
}

fn behaviour(value: &Value) -> Result<RemoteBehaviour, ApiError> {
    Ok(match value {
        Value::Null => RemoteBehaviour::Normal,
        Value::String(name) => match name.as_str() {
            "normal" => RemoteBehaviour::Normal,
            "crash" => RemoteBehaviour::Crash,
            "hang" => RemoteBehaviour::Hang,
            "exit-early" => RemoteBehaviour::ExitEarly,
            _ => return Err(ApiError::bad_request("unknown behaviour")),
        },
        Value::Object(map) => match map.get("probe").and_then(Value::as_array) {
            Some(targets) => RemoteBehaviour::Probe(
                targets
                    .iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect(),
            ),
            None => return Err(ApiError::bad_request("unknown behaviour")),
        },
        _ => return Err(ApiError::bad_request("unknown behaviour")),
    })
}

async fn handle_inner(
    shared: &Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let path = request
        .uri()
        .path()
        .trim_start_matches("/_control/")
        .to_owned();
    let pairs = query_pairs(request.uri().query());
    let session = || {
        query_value(&pairs, "session").ok_or_else(|| ApiError::bad_request("session is required"))
    };
    let ok = || Ok(json_response(200, &json!({"ok": true})));
    let method = request.method().clone();
    match (method, path.as_str()) {
        (Method::GET, "stats") => Ok(json_response(200, &stats(shared))),
        (Method::GET, "entry") => {
            let id = session()?;
            let entry = shared.with_state(|state| state.entry_json(&id));
            Ok(json_response(200, &entry.unwrap_or(Value::Null)))
        }
        (Method::GET, "history") => {
            let history = shared.lock().history(&session()?);
            Ok(json_response(200, &history_json(shared, &history)))
        }
        (Method::GET, "reports") => {
            let reports = shared.lock().reports(&session()?);
            Ok(json_response(200, &Value::Array(reports)))
        }
        (Method::POST, "outposts") => {
            let body = read_json(request).await?;
            let name = string(&body, "name")?;
            let platform = body["platform"].as_str().map(str::to_owned);
            let outpost =
                shared.with_state(|state| state.create_outpost(&name, platform.as_deref(), ""))?;
            Ok(json_response(
                200,
                &json!({"outpost_id": outpost["metadata"]["outpost_id"]}),
            ))
        }
        (Method::POST, "enqueue") => {
            let body = read_json(request).await?;
            let spec = SessionSpec {
                kind: if body["kind"] == "resume" {
                    Kind::Resume
                } else {
                    Kind::New
                },
                platform: body["platform"].as_str().unwrap_or("linux").to_owned(),
                remote_binary_sha: body["remote_binary_sha"].as_str().map(str::to_owned),
                network_policy: Some(body["network_policy"].clone()).filter(|v| !v.is_null()),
                behaviour: behaviour(&body["behaviour"])?,
            };
            let outpost = string(&body, "outpost_id")?;
            let id = shared.with_state(|state| state.enqueue(&outpost, spec));
            Ok(json_response(200, &json!({"session_id": id})))
        }
        (Method::POST, "end_session") => {
            let body = read_json(request).await?;
            let status = match body["status"].as_str() {
                Some("suspended") => SessionStatus::Suspended,
                Some("terminated") | None => SessionStatus::Terminated,
                Some(_) => return Err(ApiError::bad_request("status: suspended or terminated")),
            };
            let id = string(&body, "session_id")?;
            let config = shared.config.clone();
            shared.with_state(|state| state.end_session(&config, &id, status));
            ok()
        }
        (Method::POST, "terminate_silently") => {
            let id = string(&read_json(request).await?, "session_id")?;
            shared.with_state(|state| state.set_session_status(&id, SessionStatus::Terminated));
            ok()
        }
        (Method::POST, "delete_entry") => {
            let id = string(&read_json(request).await?, "session_id")?;
            shared.with_state(|state| state.delete_entry(&id));
            ok()
        }
        (Method::POST, "publish_binary") => {
            let sha = query_value(&pairs, "sha").ok_or_else(|| ApiError::bad_request("sha"))?;
            let suffix =
                query_value(&pairs, "suffix").ok_or_else(|| ApiError::bad_request("suffix"))?;
            let file = match query_value(&pairs, "sha256").as_deref() {
                None | Some("correct") => Sha256File::Correct,
                Some("wrong") => Sha256File::Wrong,
                Some("missing") => Sha256File::Missing,
                Some(_) => return Err(ApiError::bad_request("sha256: correct, wrong or missing")),
            };
            let bytes = read_body(request, 512 << 20).await?;
            shared
                .lock()
                .files
                .publish(&sha, &suffix, bytes.to_vec(), file);
            ok()
        }
        (Method::POST, "set_latest") => {
            let body = read_json(request).await?;
            let (suffix, sha) = (string(&body, "suffix")?, string(&body, "sha")?);
            shared.lock().files.set_latest(&suffix, &sha);
            ok()
        }
        (Method::POST, "expire_cursors") => {
            shared.with_state(|state| state.expire_cursors());
            ok()
        }
        (Method::POST, "faults") => {
            let body = read_json(request).await?;
            let faults = &shared.faults;
            if let Some(fail) = body.get("fail_next") {
                let n = fail["n"].as_u64().unwrap_or(0) as usize;
                faults.fail_next(n, fail["status"].as_u64().unwrap_or(503) as u16);
            }
            if let Some(on) = body["unauthorized"].as_bool() {
                faults.unauthorized(on);
            }
            if let Some(on) = body["duplicate_events"].as_bool() {
                faults.duplicate_events(on);
            }
            if let Some(n) = body.get("end_streams_after") {
                faults.end_streams_after(n.as_u64().map(|n| n as usize));
            }
            if body["stall_next_stream_mid_event"] == true {
                faults.stall_next_stream_mid_event();
            }
            if let Some(on) = body["drop_gateway_url"].as_bool() {
                faults.drop_gateway_url(on);
            }
            if let Some(n) = body["claim_conflict_next"].as_u64() {
                faults.claim_conflict_next(n as usize);
            }
            ok()
        }
        _ => Err(ApiError::not_found("control endpoint")),
    }
}

/// Requests, claim histories, enqueue-to-connect latencies and download counts.
pub(crate) fn stats(shared: &Shared) -> Value {
    let state = shared.lock();
    let requests: Vec<Value> = state
        .requests
        .iter()
        .map(|r| json!({"method": r.method, "path": r.path, "status": r.status, "at_ms": millis(shared, r.at)}))
        .collect();
    let mut sessions: Vec<Value> = state
        .sessions
        .iter()
        .map(|(id, record)| {
            json!({
                "session_id": id,
                "enqueued_ms": millis(shared, record.enqueued_at),
                "connected_ms": record.connected_at.map(|at| millis(shared, at)),
                "connect_latency_ms": record.connected_at.map(|at| at.saturating_duration_since(record.enqueued_at).as_secs_f64() * 1000.0),
                "disconnected_ms": record.disconnected_at.map(|at| millis(shared, at)),
                "claims": history_json(shared, &record.history),
                "reports": record.reports.len(),
            })
        })
        .collect();
    sessions.sort_by_key(|s| s["enqueued_ms"].as_u64());
    json!({
        "requests": requests,
        "sessions": sessions,
        "downloads": state.files.download_counts(),
    })
}
