//! The fake outpost gateway: plain HTTP long-poll in place of the real websocket.
//! - `POST /gateway/report` (Bearer connect token): stores the fake remote's JSON report.
//! - `GET /gateway/connect?session=ID` (Bearer connect token of that session): the remote is
//!   connected (session_status running) until the answer, which is the session's behaviour
//!   (`{"action":"crash"}`, ...) at once, or `{"action":"exit"}` once the test ends the
//!   session. A remote that goes away first is recorded as disconnected.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::{json, Value};

use crate::http::{
    bearer, error_response, json_response, query_pairs, query_value, read_json, Body,
};
use crate::shared::Shared;
use crate::state::ApiError;
use crate::RemoteBehaviour;

pub(crate) async fn handle(shared: &Arc<Shared>, request: Request<Incoming>) -> Response<Body> {
    let path = request.uri().path().to_owned();
    let result = match (request.method().clone(), path.as_str()) {
        (Method::POST, "/gateway/report") => report(shared, request).await,
        (Method::GET, "/gateway/connect") => connect(shared, request).await,
        _ => Err(ApiError::not_found("endpoint")),
    };
    result.unwrap_or_else(error_response)
}

fn unauthorized() -> ApiError {
    ApiError::new(401, "unauthorized", "missing or invalid connect token")
}

async fn report(
    shared: &Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let token = bearer(&request).ok_or_else(unauthorized)?;
    let session = shared
        .lock()
        .session_of_token(&token)
        .ok_or_else(unauthorized)?;
    let body = read_json(request).await?;
    if let Some(record) = shared.lock().sessions.get_mut(&session) {
        record.reports.push(body);
    }
    Ok(json_response(200, &json!({"ok": true})))
}

/// Keeps the connection counted while the long-poll is open; if the poll is dropped before it
/// answers (the remote went away), the disconnection is recorded.
struct Connection {
    shared: Arc<Shared>,
    session: String,
    answered: bool,
}

impl Drop for Connection {
    fn drop(&mut self) {
        let config = self.shared.config.clone();
        let dropped = !self.answered;
        self.shared
            .with_state(|state| state.disconnected(&config, &self.session, dropped));
    }
}

async fn connect(
    shared: &Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let session = query_value(&query_pairs(request.uri().query()), "session")
        .ok_or_else(|| ApiError::bad_request("session is required"))?;
    let token = bearer(&request).ok_or_else(unauthorized)?;
    let action = shared.with_state(|state| {
        let record = state.sessions.get(&session).ok_or_else(unauthorized)?;
        if record.token.as_deref() != Some(token.as_str()) {
            return Err(unauthorized());
        }
        if !state.entries.contains_key(&session) {
            return Err(ApiError::not_found("session"));
        }
        let record = state.sessions.get_mut(&session).ok_or_else(unauthorized)?;
        let action = match &record.behaviour {
            RemoteBehaviour::Normal => None,
            RemoteBehaviour::Crash => Some(json!({"action": "crash"})),
            RemoteBehaviour::Hang => Some(json!({"action": "hang"})),
            RemoteBehaviour::ExitEarly => Some(json!({"action": "exit-early"})),
            RemoteBehaviour::Probe(targets) if !record.probe_sent => {
                record.probe_sent = true;
                Some(json!({"action": "probe", "targets": targets}))
            }
            RemoteBehaviour::Probe(_) => None,
        };
        state.connected(&session);
        Ok(action)
    })?;
    let mut connection = Connection {
        shared: shared.clone(),
        session: session.clone(),
        answered: false,
    };
    let answer: Value = match action {
        Some(action) => action,
        None => {
            let mut changes = shared.changes.subscribe();
            let mut shutdown = shared.shutdown.subscribe();
            loop {
                changes.borrow_and_update();
                if shared.lock().record(&session).is_some_and(|r| r.exit) {
                    break json!({"action": "exit"});
                }
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return Err(ApiError::new(503, "unavailable", "stopping")) },
                    _ = crate::shared::until_stopped(&mut shutdown) => return Err(ApiError::new(503, "unavailable", "stopping")),
                }
            }
        }
    };
    connection.answered = true;
    drop(connection);
    Ok(json_response(200, &answer))
}
