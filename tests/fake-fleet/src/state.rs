//! The fleet's state: outposts, queue entries, the event log, the clock-driven transitions,
//! and what the gateway and the tests record per session. Everything here is synchronous and
//! runs under one lock; the queue operations are in `queue.rs`.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::cursor::Cursor;
use crate::static_files::StaticFiles;
use crate::{
    ClaimEvent, ClaimEventKind, FleetConfig, Kind, RemoteBehaviour, RequestLog, SessionStatus,
};

/// An error answer of the API: `{"error":{"code":..,"message":..}}` with `status`.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub(crate) fn new(status: u16, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub(crate) fn not_found(what: &str) -> ApiError {
        ApiError::new(404, "not_found", format!("{what} not found"))
    }

    pub(crate) fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(409, "conflict", message)
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_request", message)
    }

    pub(crate) fn cursor_expired() -> ApiError {
        ApiError::new(
            410,
            "cursor_expired",
            "the cursor is unknown or expired; list again",
        )
    }
}

/// A random lowercase hex string of `bytes` bytes.
pub(crate) fn random_hex(bytes: usize) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut out = String::with_capacity(bytes * 2);
    while out.len() < bytes * 2 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let word = RandomState::new().hash_one((n, Instant::now()));
        out.push_str(&format!("{word:016x}"));
    }
    out.truncate(bytes * 2);
    out
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub(crate) struct Outpost {
    pub id: String,
    pub name: String,
    pub platform: Option<String>,
    pub description: String,
    pub created_at: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Pending,
    Claimed,
}

pub(crate) struct Entry {
    pub session_id: String,
    pub outpost_id: String,
    /// Position in lists: the order of enqueueing.
    pub row: u64,
    pub created_at: u64,
    pub updated_at: u64,
    pub kind: Kind,
    pub platform: String,
    pub remote_binary_sha: Option<String>,
    pub network_policy: Value,
    pub phase: Phase,
    pub acceptor_id: Option<String>,
    pub claim_deadline: Option<u64>,
    /// When the claim expires unless the remote is connected by then.
    pub claim_expires: Option<Instant>,
    pub session_status: SessionStatus,
}

impl Entry {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "metadata": {
                "session_id": self.session_id,
                "outpost_id": self.outpost_id,
                "created_at": self.created_at,
                "updated_at": self.updated_at,
            },
            "spec": {
                "kind": self.kind.as_str(),
                "platform": self.platform,
                "remote_binary_sha": self.remote_binary_sha,
                "network_policy": self.network_policy,
            },
            "status": {
                "phase": match self.phase { Phase::Pending => "pending", Phase::Claimed => "claimed" },
                "acceptor_id": self.acceptor_id,
                "claim_deadline": self.claim_deadline,
                "session_status": self.session_status.as_str(),
            },
        })
    }
}

/// One change in the retained log.
pub(crate) struct Event {
    pub rv: u64,
    pub outpost_id: String,
    /// The SSE `data:` JSON, without the trailing blank line.
    pub data: String,
}

/// What the gateway and the tests keep per session; it outlives the queue entry.
pub(crate) struct SessionRecord {
    pub behaviour: RemoteBehaviour,
    pub probe_sent: bool,
    /// The connect token of the current claim.
    pub token: Option<String>,
    pub enqueued_at: Instant,
    pub connected_at: Option<Instant>,
    pub disconnected_at: Option<Instant>,
    /// Gateway connections open now.
    pub connections: usize,
    /// The test ended the session: the remote is told to exit.
    pub exit: bool,
    /// A `session_status` change waiting for the configured lag.
    pub pending_status: Option<(Instant, SessionStatus)>,
    pub history: Vec<ClaimEvent>,
    pub reports: Vec<Value>,
}

#[derive(Default)]
pub(crate) struct State {
    /// The global resource version: bumped by every change.
    pub rv: u64,
    /// Cursors below this resource version are expired.
    pub cursor_floor: u64,
    pub next_row: u64,
    pub outposts: BTreeMap<String, Outpost>,
    pub entries: HashMap<String, Entry>,
    pub log: Vec<Event>,
    pub sessions: HashMap<String, SessionRecord>,
    pub requests: Vec<RequestLog>,
    pub files: StaticFiles,
}

impl State {
    // ---- events ----

    fn log_event(&mut self, kind: &str, outpost_id: String, object: Value) {
        self.rv += 1;
        let cursor = Cursor {
            rv: self.rv,
            row: None,
        }
        .encode();
        let data = json!({"type": kind, "object": object, "cursor": cursor}).to_string();
        self.log.push(Event {
            rv: self.rv,
            outpost_id,
            data,
        });
    }

    /// Records a change of the entry: updated_at, a new resource version, a MODIFIED event.
    pub(crate) fn modified(&mut self, session_id: &str) {
        let Some(entry) = self.entries.get_mut(session_id) else {
            return;
        };
        entry.updated_at = unix_now();
        let (outpost, object) = (entry.outpost_id.clone(), entry.to_json());
        self.log_event("MODIFIED", outpost, object);
    }

    pub(crate) fn deleted(&mut self, session_id: &str) {
        if let Some(entry) = self.entries.remove(session_id) {
            let object = entry.to_json();
            self.log_event("DELETED", entry.outpost_id, object);
        }
    }

    /// Checks a cursor: decodable, issued by this fleet, not expired.
    pub(crate) fn check_cursor(&self, cursor: &str) -> Result<Cursor, ApiError> {
        match Cursor::decode(cursor) {
            Some(c) if c.rv >= self.cursor_floor && c.rv <= self.rv => Ok(c),
            _ => Err(ApiError::cursor_expired()),
        }
    }

    pub(crate) fn expire_cursors(&mut self) {
        // A bump without an event, so that cursors issued from now on differ from every
        // earlier one.
        self.rv += 1;
        self.cursor_floor = self.rv;
    }

    /// The SSE data of the events after `rv` (for `outpost`, if given), with their versions.
    pub(crate) fn events_after(&self, rv: u64, outpost: Option<&str>) -> Vec<(u64, String)> {
        let start = self.log.partition_point(|event| event.rv <= rv);
        self.log[start..]
            .iter()
            .filter(|event| outpost.is_none_or(|o| event.outpost_id == o))
            .map(|event| (event.rv, event.data.clone()))
            .collect()
    }

    // ---- time ----

    /// Applies what time has made due: lagging session_status changes and claim expiries.
    pub(crate) fn tick(&mut self, now: Instant) {
        let due: Vec<(String, SessionStatus)> = self
            .sessions
            .iter_mut()
            .filter_map(|(id, record)| match record.pending_status {
                Some((at, status)) if at <= now => {
                    record.pending_status = None;
                    Some((id.clone(), status))
                }
                _ => None,
            })
            .collect();
        for (id, status) in due {
            self.set_session_status(&id, status);
        }
        let expired: Vec<String> = self
            .entries
            .values()
            .filter(|entry| entry.phase == Phase::Claimed)
            .filter(|entry| entry.claim_expires.is_some_and(|at| at <= now))
            .filter(|entry| {
                self.sessions
                    .get(&entry.session_id)
                    .is_none_or(|record| record.connections == 0)
            })
            .map(|entry| entry.session_id.clone())
            .collect();
        for id in expired {
            let acceptor = self.entries.get_mut(&id).and_then(|entry| {
                entry.phase = Phase::Pending;
                entry.claim_deadline = None;
                entry.claim_expires = None;
                entry.acceptor_id.take()
            });
            if let Some(record) = self.sessions.get_mut(&id) {
                record.token = None;
                record.history.push(ClaimEvent {
                    kind: ClaimEventKind::Expired,
                    acceptor,
                    at: now,
                });
            }
            self.modified(&id);
        }
    }

    // ---- outposts ----

    pub(crate) fn outpost_json(&self, outpost: &Outpost) -> Value {
        let entries = self
            .entries
            .values()
            .filter(|entry| entry.outpost_id == outpost.id);
        let (mut queue_depth, mut active_claims) = (0, 0);
        for entry in entries {
            match entry.phase {
                Phase::Pending => queue_depth += 1,
                Phase::Claimed => active_claims += 1,
            }
        }
        json!({
            "metadata": {"outpost_id": outpost.id, "account_id": "acct-fakefleet", "created_at": outpost.created_at},
            "spec": {"name": outpost.name, "platform": outpost.platform, "description": outpost.description},
            "status": {"queue_depth": queue_depth, "active_claims": active_claims},
        })
    }

    pub(crate) fn create_outpost(
        &mut self,
        name: &str,
        platform: Option<&str>,
        description: &str,
    ) -> Result<Value, ApiError> {
        if self.outposts.values().any(|outpost| outpost.name == name) {
            return Err(ApiError::conflict(format!(
                "an outpost named {name:?} exists"
            )));
        }
        let outpost = Outpost {
            id: format!("outpost_env-{}", random_hex(12)),
            name: name.to_owned(),
            platform: platform.map(str::to_owned),
            description: description.to_owned(),
            created_at: unix_now(),
        };
        let value = self.outpost_json(&outpost);
        self.outposts.insert(outpost.id.clone(), outpost);
        Ok(value)
    }

    pub(crate) fn outposts_json(&self) -> Vec<Value> {
        let mut outposts: Vec<&Outpost> = self.outposts.values().collect();
        outposts.sort_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));
        outposts.into_iter().map(|o| self.outpost_json(o)).collect()
    }

    // ---- gateway ----

    pub(crate) fn record(&self, session_id: &str) -> Option<&SessionRecord> {
        self.sessions.get(session_id)
    }

    pub(crate) fn history(&self, session_id: &str) -> Vec<ClaimEvent> {
        self.record(session_id)
            .map(|r| r.history.clone())
            .unwrap_or_default()
    }

    pub(crate) fn reports(&self, session_id: &str) -> Vec<Value> {
        self.record(session_id)
            .map(|r| r.reports.clone())
            .unwrap_or_default()
    }

    /// The session whose current connect token is `token`.
    pub(crate) fn session_of_token(&self, token: &str) -> Option<String> {
        self.sessions
            .iter()
            .find(|(_, record)| record.token.as_deref() == Some(token))
            .map(|(id, _)| id.clone())
    }

    /// The remote connected: `session_status` becomes running (unless the session ended).
    pub(crate) fn connected(&mut self, session_id: &str) {
        if let Some(record) = self.sessions.get_mut(session_id) {
            record.connections += 1;
            record.connected_at.get_or_insert_with(Instant::now);
        }
        let running = self
            .entries
            .get(session_id)
            .is_some_and(|e| !e.session_status.ended());
        if running {
            self.set_session_status(session_id, SessionStatus::Running);
        }
    }

    /// A gateway connection ended. `dropped`: the remote went away without being told to.
    /// Once no connection is left, a claimed entry's deadline starts again from now: the
    /// worker has one claim TTL to reconnect a remote, renew or release.
    pub(crate) fn disconnected(&mut self, config: &FleetConfig, session_id: &str, dropped: bool) {
        let Some(record) = self.sessions.get_mut(session_id) else {
            return;
        };
        record.connections = record.connections.saturating_sub(1);
        if dropped {
            record.disconnected_at = Some(Instant::now());
        }
        if record.connections > 0 {
            return;
        }
        if let Some(entry) = self.entries.get_mut(session_id) {
            if entry.phase == Phase::Claimed {
                entry.claim_deadline =
                    Some(unix_now() + config.claim_ttl.as_secs_f64().ceil() as u64);
                entry.claim_expires = Some(Instant::now() + config.claim_ttl);
                self.modified(session_id);
            }
        }
    }
}
