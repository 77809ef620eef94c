//! The queue: enqueueing, lists with their cursors, session endings, and the claim CAS.

use std::time::Instant;

use serde_json::{json, Value};

use crate::cursor::Cursor;
use crate::state::{random_hex, unix_now, ApiError, Entry, Phase, SessionRecord, State};
use crate::{ClaimEvent, ClaimEventKind, FleetConfig, SessionSpec, SessionStatus};

/// A list request's parameters.
pub(crate) struct ListQuery {
    pub outpost: Option<String>,
    pub phase: Option<String>,
    pub acceptor_id: Option<String>,
    pub first: usize,
    pub cursor: Option<String>,
}

impl State {
    // ---- entries ----

    pub(crate) fn enqueue(&mut self, outpost_id: &str, spec: SessionSpec) -> String {
        let session_id = format!("devin-{}", random_hex(16));
        let now = unix_now();
        self.next_row += 1;
        self.entries.insert(
            session_id.clone(),
            Entry {
                session_id: session_id.clone(),
                outpost_id: outpost_id.to_owned(),
                row: self.next_row,
                created_at: now,
                updated_at: now,
                kind: spec.kind,
                platform: spec.platform,
                remote_binary_sha: spec.remote_binary_sha,
                network_policy: spec
                    .network_policy
                    .unwrap_or_else(|| json!({"enabled": false, "allow": []})),
                phase: Phase::Pending,
                acceptor_id: None,
                claim_deadline: None,
                claim_expires: None,
                session_status: SessionStatus::Pending,
            },
        );
        self.sessions.insert(
            session_id.clone(),
            SessionRecord {
                behaviour: spec.behaviour,
                probe_sent: false,
                token: None,
                enqueued_at: Instant::now(),
                connected_at: None,
                disconnected_at: None,
                connections: 0,
                exit: false,
                pending_status: None,
                history: Vec::new(),
                reports: Vec::new(),
            },
        );
        self.modified(&session_id);
        session_id
    }

    pub(crate) fn entry_json(&self, session_id: &str) -> Option<Value> {
        self.entries.get(session_id).map(Entry::to_json)
    }

    pub(crate) fn set_session_status(&mut self, session_id: &str, status: SessionStatus) {
        let Some(entry) = self.entries.get_mut(session_id) else {
            return;
        };
        if entry.session_status != status {
            entry.session_status = status;
            self.modified(session_id);
        }
    }

    pub(crate) fn end_session(
        &mut self,
        config: &FleetConfig,
        session_id: &str,
        status: SessionStatus,
    ) {
        if let Some(record) = self.sessions.get_mut(session_id) {
            record.exit = true;
            if !config.session_status_lag.is_zero() {
                record.pending_status = Some((Instant::now() + config.session_status_lag, status));
                return;
            }
        }
        self.set_session_status(session_id, status);
    }

    pub(crate) fn delete_entry(&mut self, session_id: &str) {
        self.deleted(session_id);
        if let Some(record) = self.sessions.get_mut(session_id) {
            record.pending_status = None;
        }
    }

    pub(crate) fn list(&self, config: &FleetConfig, query: &ListQuery) -> Result<Value, ApiError> {
        if query
            .phase
            .as_deref()
            .is_some_and(|p| p != "pending" && p != "claimed")
        {
            return Err(ApiError::bad_request("phase must be pending or claimed"));
        }
        let cursor = match &query.cursor {
            Some(cursor) => self.check_cursor(cursor)?,
            None => Cursor {
                rv: self.rv,
                row: None,
            },
        };
        let mut matching: Vec<&Entry> = self
            .entries
            .values()
            .filter(|e| query.outpost.as_deref().is_none_or(|o| e.outpost_id == o))
            .filter(|e| {
                query.phase.as_deref().is_none_or(|p| match e.phase {
                    Phase::Pending => p == "pending",
                    Phase::Claimed => p == "claimed",
                })
            })
            .filter(|e| {
                query
                    .acceptor_id
                    .as_deref()
                    .is_none_or(|a| e.acceptor_id.as_deref() == Some(a))
            })
            .collect();
        matching.sort_by_key(|e| e.row);
        let total = matching.len();
        let from = cursor.row.unwrap_or(0);
        let rest: Vec<&Entry> = matching.into_iter().filter(|e| e.row >= from).collect();
        let has_next_page = rest.len() > query.first;
        let page = &rest[..rest.len().min(query.first)];
        let next = match page.last() {
            Some(last) if has_next_page => {
                let repeat = config.repeat_page_boundary_row && query.first > 1;
                Cursor {
                    rv: cursor.rv,
                    row: Some(if repeat { last.row } else { last.row + 1 }),
                }
            }
            // The final page: the version the list started at, so a watch from it replays
            // every change made while the pages were fetched.
            _ => Cursor {
                rv: cursor.rv,
                row: None,
            },
        };
        Ok(json!({
            "items": page.iter().map(|e| e.to_json()).collect::<Vec<_>>(),
            "cursor": next.encode(),
            "has_next_page": has_next_page,
            "total": total,
        }))
    }

    // ---- claims ----

    fn push_history(&mut self, session_id: &str, kind: ClaimEventKind, acceptor: &str) {
        if let Some(record) = self.sessions.get_mut(session_id) {
            record.history.push(ClaimEvent {
                kind,
                acceptor: Some(acceptor.to_owned()),
                at: Instant::now(),
            });
        }
    }

    /// The claim CAS. On success: the entry with `connect_token` (and `gateway_url` if given).
    pub(crate) fn claim(
        &mut self,
        config: &FleetConfig,
        session_id: &str,
        acceptor: &str,
        injected_conflict: bool,
        gateway_url: Option<String>,
    ) -> Result<Value, ApiError> {
        let Some(entry) = self.entries.get_mut(session_id) else {
            return Err(ApiError::not_found("session"));
        };
        let conflict = if injected_conflict {
            Some("claimed by another acceptor".to_owned())
        } else if entry.session_status.ended() {
            Some(format!("the session is {}", entry.session_status.as_str()))
        } else {
            match &entry.acceptor_id {
                Some(holder) if entry.phase == Phase::Claimed && holder != acceptor => {
                    Some("claimed by another acceptor".to_owned())
                }
                _ => None,
            }
        };
        if let Some(message) = conflict {
            self.push_history(session_id, ClaimEventKind::ClaimConflict, acceptor);
            return Err(ApiError::conflict(message));
        }
        let renewal = entry.phase == Phase::Claimed;
        entry.phase = Phase::Claimed;
        entry.acceptor_id = Some(acceptor.to_owned());
        entry.claim_deadline = Some(unix_now() + config.claim_ttl.as_secs_f64().ceil() as u64);
        entry.claim_expires = Some(Instant::now() + config.claim_ttl);
        let token = format!("ct_{}", random_hex(24));
        if let Some(record) = self.sessions.get_mut(session_id) {
            record.token = Some(token.clone());
        }
        let kind = if renewal {
            ClaimEventKind::Renewed
        } else {
            ClaimEventKind::Claimed
        };
        self.push_history(session_id, kind, acceptor);
        self.modified(session_id);
        let mut value = self.entry_json(session_id).unwrap_or(Value::Null);
        value["status"]["connect_token"] = json!(token);
        if let Some(url) = gateway_url {
            value["status"]["gateway_url"] = json!(url);
        }
        Ok(value)
    }

    pub(crate) fn release(&mut self, session_id: &str, acceptor: &str) -> Result<Value, ApiError> {
        let Some(entry) = self.entries.get_mut(session_id) else {
            return Err(ApiError::not_found("session"));
        };
        if entry.phase != Phase::Claimed || entry.acceptor_id.as_deref() != Some(acceptor) {
            self.push_history(session_id, ClaimEventKind::ReleaseConflict, acceptor);
            return Err(ApiError::conflict("not claimed by this acceptor"));
        }
        if let Some(record) = self.sessions.get_mut(session_id) {
            record.token = None;
        }
        if entry.session_status.ended() {
            let last = entry.to_json();
            self.push_history(session_id, ClaimEventKind::ReleasedAndDeleted, acceptor);
            self.deleted(session_id);
            return Ok(last);
        }
        entry.phase = Phase::Pending;
        entry.acceptor_id = None;
        entry.claim_deadline = None;
        entry.claim_expires = None;
        self.push_history(session_id, ClaimEventKind::Released, acceptor);
        self.modified(session_id);
        Ok(self.entry_json(session_id).unwrap_or(Value::Null))
    }
}
