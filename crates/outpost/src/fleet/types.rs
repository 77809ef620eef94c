//! Fleet API objects, read by strict types.
//!
//! Every field the worker acts on is typed: phases, kinds and session states are closed
//! enums (an unknown value makes the object unreadable rather than silently misread), and
//! identifiers that end up in URLs and file names are validated newtypes. Fields the worker
//! does not know are ignored, so the service can add fields without stopping every worker;
//! sizes are capped before parsing, by the client.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest identifier accepted (session, outpost, acceptor ids).
pub(crate) const MAX_ID_LEN: usize = 128;
/// Longest cursor accepted.
pub(crate) const MAX_CURSOR_LEN: usize = 4096;

/// Why a fleet value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidValue {
    #[error(
        "{what} must be 1 to {max} characters of A-Z a-z 0-9 . _ - not starting with '.' or '-'"
    )]
    Identifier { what: &'static str, max: usize },
    #[error("a cursor must be 1 to {MAX_CURSOR_LEN} printable ASCII characters")]
    Cursor,
    #[error("a devin-remote commit must be 7 to 40 lowercase hex digits")]
    Commit,
}

fn is_identifier(value: &str, max: usize) -> bool {
    !value.is_empty()
        && value.len() <= max
        && !value.starts_with('.')
        && !value.starts_with('-')
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

macro_rules! identifier {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = InvalidValue;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                if is_identifier(&value, MAX_ID_LEN) {
                    Ok(Self(value))
                } else {
                    Err(InvalidValue::Identifier { what: $what, max: MAX_ID_LEN })
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = InvalidValue;
            fn from_str(value: &str) -> Result<Self, Self::Err> {
                Self::try_from(value.to_owned())
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

identifier!(
    /// A Devin session id. Safe as a URL path segment and as a file name.
    SessionId,
    "a session id"
);
identifier!(
    /// An outpost id (`outpost_env-...`).
    OutpostId,
    "an outpost id"
);
identifier!(
    /// A worker identity used for claims.
    AcceptorId,
    "an acceptor id"
);

/// An opaque list/watch position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Cursor(String);

impl Cursor {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Cursor {
    type Error = InvalidValue;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        if !value.is_empty()
            && value.len() <= MAX_CURSOR_LEN
            && value.bytes().all(|b| b.is_ascii_graphic())
        {
            Ok(Self(value))
        } else {
            Err(InvalidValue::Cursor)
        }
    }
}

impl From<Cursor> for String {
    fn from(value: Cursor) -> String {
        value.0
    }
}

/// A `devin-remote` build: the abbreviated (or full) git commit it was built from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Commit(String);

impl Commit {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Commit {
    type Error = InvalidValue;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        let trimmed = value.trim();
        if (7..=40).contains(&trimmed.len())
            && trimmed
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(Self(trimmed.to_owned()))
        } else {
            Err(InvalidValue::Commit)
        }
    }
}

impl std::str::FromStr for Commit {
    type Err = InvalidValue;
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Self::try_from(value.to_owned())
    }
}

impl From<Commit> for String {
    fn from(value: Commit) -> String {
        value.0
    }
}

impl fmt::Display for Commit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A credential: never printed, never logged.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub(crate) struct Secret(String);

impl Secret {
    pub(crate) fn new(value: String) -> Self {
        Self(value)
    }
    /// The value, for the one place that must send it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Phase {
    Pending,
    Claimed,
}

/// `spec.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Kind {
    New,
    Resume,
}

/// `status.session_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SessionStatus {
    Pending,
    Running,
    Suspended,
    Terminated,
}

impl SessionStatus {
    /// The session is over (for now): its remote should not be running.
    pub(crate) fn has_ended(self) -> bool {
        matches!(self, SessionStatus::Suspended | SessionStatus::Terminated)
    }
}

/// One destination a session's network policy allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum AllowRule {
    /// A hostname pattern (`github.com`, `*.github.com`).
    Hostname(String),
    /// An IPv4 address or CIDR.
    Ipv4(String),
    /// An IPv6 address or CIDR.
    Ipv6(String),
}

/// `spec.network_policy`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NetworkPolicy {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub allow: Vec<AllowRule>,
}

/// `metadata` of a queue entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EntryMetadata {
    pub session_id: SessionId,
    pub outpost_id: OutpostId,
    #[serde(default)]
    pub created_at: i64,
    #[serde(default)]
    pub updated_at: i64,
}

/// `spec` of a queue entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EntrySpec {
    pub kind: Kind,
    #[serde(default)]
    pub platform: Option<String>,
    #[serde(default)]
    pub remote_binary_sha: Option<Commit>,
    #[serde(default)]
    pub network_policy: Option<NetworkPolicy>,
}

/// `status` of a queue entry. The gateway credentials appear only in a claim's answer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct EntryStatus {
    pub phase: Phase,
    #[serde(default)]
    pub acceptor_id: Option<String>,
    #[serde(default)]
    pub claim_deadline: Option<i64>,
    pub session_status: SessionStatus,
    #[serde(default)]
    pub connect_token: Option<Secret>,
    #[serde(default)]
    pub gateway_url: Option<String>,
}

/// A queued session (`devins`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct QueueEntry {
    pub metadata: EntryMetadata,
    pub spec: EntrySpec,
    pub status: EntryStatus,
}

impl QueueEntry {
    pub(crate) fn id(&self) -> &SessionId {
        &self.metadata.session_id
    }

    /// Held by `acceptor`.
    pub(crate) fn claimed_by(&self, acceptor: &AcceptorId) -> bool {
        self.status.phase == Phase::Claimed
            && self.status.acceptor_id.as_deref() == Some(acceptor.as_str())
    }
}

/// One page of `GET /devins`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ListPage {
    pub items: Vec<QueueEntry>,
    pub cursor: Cursor,
    #[serde(default)]
    pub has_next_page: bool,
}

/// The kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum EventType {
    Modified,
    Deleted,
}

/// The `data` of one watch event.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WatchEvent {
    #[serde(rename = "type")]
    pub kind: EventType,
    pub object: QueueEntry,
    pub cursor: Cursor,
}

/// `metadata` of an outpost.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct OutpostMetadata {
    pub outpost_id: OutpostId,
    #[serde(default)]
    pub account_id: Option<String>,
    #[serde(default)]
    pub created_at: i64,
}

/// `spec` of an outpost.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct OutpostSpec {
    pub name: String,
    #[serde(default)]
    pub platform: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
}

/// `status` of an outpost.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct OutpostStatus {
    #[serde(default)]
    pub queue_depth: u64,
    #[serde(default)]
    pub active_claims: u64,
}

/// An outpost: a named queue served by your machines.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Outpost {
    pub metadata: OutpostMetadata,
    pub spec: OutpostSpec,
    #[serde(default)]
    pub status: OutpostStatus,
}

/// `GET /outposts`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct OutpostList {
    pub items: Vec<Outpost>,
}

/// The platforms an outpost can have.
pub(crate) const PLATFORMS: [&str; 3] = ["linux", "macos", "windows"];

#[cfg(test)]
mod tests {
    use super::*;

    const ENTRY: &str = r#"{"metadata":{"session_id":"devin-abc","outpost_id":"outpost_env-1","created_at":1781050000,"updated_at":1781050000},
        "spec":{"kind":"new","platform":"linux","remote_binary_sha":null,"network_policy":{"enabled":true,"allow":[{"hostname":"*.github.com"},{"ipv4":"10.0.0.0/8"},{"ipv6":"2001:db8::/32"}]}},
        "status":{"phase":"pending","acceptor_id":null,"claim_deadline":null,"session_status":"pending","future_field":1}}"#;

    #[test]
    fn an_entry_is_read_with_its_network_policy_and_unknown_fields_are_ignored() {
        let entry: QueueEntry = serde_json::from_str(ENTRY).expect("entry parses");
        assert_eq!(entry.id().as_str(), "devin-abc");
        assert_eq!(entry.status.phase, Phase::Pending);
        let policy = entry.spec.network_policy.expect("policy");
        assert!(policy.enabled);
        assert_eq!(
            policy.allow,
            vec![
                AllowRule::Hostname("*.github.com".into()),
                AllowRule::Ipv4("10.0.0.0/8".into()),
                AllowRule::Ipv6("2001:db8::/32".into()),
            ]
        );
    }

    #[test]
    fn an_unknown_phase_or_session_status_makes_the_entry_unreadable() {
        let bad_phase = ENTRY.replace(r#""phase":"pending""#, r#""phase":"leased""#);
        assert!(serde_json::from_str::<QueueEntry>(&bad_phase).is_err());
        let bad_status = ENTRY.replace(
            r#""session_status":"pending""#,
            r#""session_status":"sleeping""#,
        );
        assert!(serde_json::from_str::<QueueEntry>(&bad_status).is_err());
    }

    #[test]
    fn session_ids_that_could_escape_a_path_or_url_are_refused() {
        for bad in [
            "../etc",
            "a/b",
            ".hidden",
            "-flag",
            "",
            "a b",
            "a%2f",
            "a\u{0}b",
            &"x".repeat(MAX_ID_LEN + 1),
        ] {
            let text = ENTRY.replace("devin-abc", bad);
            assert!(
                serde_json::from_str::<QueueEntry>(&text).is_err(),
                "{bad:?} was accepted"
            );
        }
        assert!("devin-0123_ab.c".parse::<SessionId>().is_ok());
    }

    #[test]
    fn commits_are_short_or_full_lowercase_hex() {
        assert!("abc1234".parse::<Commit>().is_ok());
        assert!("0123456789abcdef0123456789abcdef01234567"
            .parse::<Commit>()
            .is_ok());
        for bad in ["abc", "ABC1234", "abc1234/..", "zzzzzzz", &"a".repeat(41)] {
            assert!(bad.parse::<Commit>().is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn a_secret_is_never_printed() {
        let secret = Secret::new("tok-123".into());
        assert!(!format!("{secret:?}").contains("tok-123"));
    }

    #[test]
    fn a_watch_event_needs_a_known_type_and_a_cursor() {
        let event = format!(r#"{{"type":"MODIFIED","object":{ENTRY},"cursor":"djE6MQ=="}}"#);
        let parsed: WatchEvent = serde_json::from_str(&event).expect("event parses");
        assert_eq!(parsed.kind, EventType::Modified);
        let unknown = event.replace("MODIFIED", "BOOKMARK");
        assert!(serde_json::from_str::<WatchEvent>(&unknown).is_err());
        let no_cursor = format!(r#"{{"type":"DELETED","object":{ENTRY}}}"#);
        assert!(serde_json::from_str::<WatchEvent>(&no_cursor).is_err());
    }
}
