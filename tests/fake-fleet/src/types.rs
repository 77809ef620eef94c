//! The public value types: the configuration, what a session is and does, and what the fleet
//! records.

use std::time::{Duration, Instant};

use serde_json::Value;

/// How the fleet behaves. Build it with `FleetConfig { .., ..Default::default() }`.
#[derive(Clone, Debug)]
pub struct FleetConfig {
    /// Bearer token of a worker machine: queue operations and the outposts list.
    pub machine_token: String,
    /// Bearer token of the orchestrator: everything.
    pub orchestrator_token: String,
    /// How long a claim lasts before the remote must have connected (default 30 s).
    pub claim_ttl: Duration,
    /// The longest a watch stream stays open (default 300 s, as the real service).
    pub stream_max: Duration,
    /// How long after [`crate::FakeFleet::end_session`] the entry's `session_status` changes
    /// (default 0: at once).
    pub session_status_lag: Duration,
    /// Claim responses carry no `status.gateway_url`.
    pub omit_gateway_url: bool,
    /// Send a `: keepalive` comment on idle watch streams this often.
    pub keepalive: Option<Duration>,
    /// The last row of every list page is repeated as the first row of the next page
    /// (default true, as the real service). Pages of one row never repeat (no progress else).
    pub repeat_page_boundary_row: bool,
    /// A delay before a `devin-remote` binary download is answered.
    pub download_delay: Duration,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            machine_token: "machine-token".into(),
            orchestrator_token: "orchestrator-token".into(),
            claim_ttl: Duration::from_secs(30),
            stream_max: Duration::from_secs(300),
            session_status_lag: Duration::ZERO,
            omit_gateway_url: false,
            keepalive: None,
            repeat_page_boundary_row: true,
            download_delay: Duration::ZERO,
        }
    }
}

/// `spec.kind` of a queue entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    New,
    Resume,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::New => "new",
            Kind::Resume => "resume",
        }
    }
}

/// `status.session_status` of a queue entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionStatus {
    Pending,
    Running,
    Suspended,
    Terminated,
}

impl SessionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Pending => "pending",
            SessionStatus::Running => "running",
            SessionStatus::Suspended => "suspended",
            SessionStatus::Terminated => "terminated",
        }
    }

    /// Suspended or terminated: the session is over for this outpost.
    pub fn ended(self) -> bool {
        matches!(self, SessionStatus::Suspended | SessionStatus::Terminated)
    }
}

/// What the fake remote of a session does once it has connected to the gateway. The gateway
/// sends it as the answer to the remote's `connect` long-poll.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum RemoteBehaviour {
    /// Waits until the test ends the session, then exits 0.
    #[default]
    Normal,
    /// Exits 3 right after connecting.
    Crash,
    /// Ignores SIGTERM and the exit action; sleeps forever.
    Hang,
    /// Exits 0 right after connecting although the session was not ended.
    ExitEarly,
    /// Tries each `host:port` target directly and through the CONNECT proxy of its
    /// environment, reports the results, then behaves as [`RemoteBehaviour::Normal`].
    Probe(Vec<String>),
}

/// A session to enqueue.
#[derive(Clone, Debug)]
pub struct SessionSpec {
    pub kind: Kind,
    pub platform: String,
    pub remote_binary_sha: Option<String>,
    /// `spec.network_policy`; `None` is `{"enabled":false,"allow":[]}`.
    pub network_policy: Option<Value>,
    pub behaviour: RemoteBehaviour,
}

impl Default for SessionSpec {
    fn default() -> Self {
        SessionSpec {
            kind: Kind::New,
            platform: "linux".into(),
            remote_binary_sha: None,
            network_policy: None,
            behaviour: RemoteBehaviour::Normal,
        }
    }
}

/// Which `.sha256` file a published binary gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sha256File {
    Correct,
    Wrong,
    Missing,
}

/// What happened to the claim of one session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimEventKind {
    /// A pending entry was claimed.
    Claimed,
    /// The holder claimed again: new connect token, deadline extended.
    Renewed,
    /// A claim answered 409 (held by another acceptor, session ended, or an injected conflict).
    ClaimConflict,
    /// The holder released it back to pending.
    Released,
    /// The holder released an ended session, which deleted the entry.
    ReleasedAndDeleted,
    /// A release answered 409 (not claimed, or claimed by another acceptor).
    ReleaseConflict,
    /// The claim deadline passed without a connected remote: back to pending.
    Expired,
}

#[derive(Clone, Debug)]
pub struct ClaimEvent {
    pub kind: ClaimEventKind,
    /// The acceptor that asked (for expiries: the one that lost the claim).
    pub acceptor: Option<String>,
    pub at: Instant,
}

/// One answered request (the `/_control/` API is not logged).
#[derive(Clone, Debug)]
pub struct RequestLog {
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    pub status: u16,
    pub at: Instant,
}
