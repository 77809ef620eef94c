//! Typed failures of companion jobs: the 17 failure kinds, which of them are engine-wide, the
//! billing pool a quota or rate limit applies to, and the exit code of every outcome.
//!
//! Exit codes (documented in docs/companion.md):
//! - 0: the job is done, or status/history/cancel printed what was asked;
//! - 1: the job ended in error or died;
//! - 2: `input`: bad flags or input, no job created;
//! - 3: the job was cancelled;
//! - 4: engine-wide setup problems (`missing_cli`, `setup`, `auth`);
//! - 5: `result --wait` returned while the job is still running.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Exit code: done, or a status/history listing printed.
pub(crate) const EXIT_DONE: u8 = 0;
/// Exit code: the job ended in error or died.
pub(crate) const EXIT_FAILED: u8 = 1;
/// Exit code: bad flags or input; no job was created.
pub(crate) const EXIT_INPUT: u8 = 2;
/// Exit code: the job was cancelled.
pub(crate) const EXIT_CANCELLED: u8 = 3;
/// Exit code: an engine-wide setup problem (missing CLI, setup, authentication).
pub(crate) const EXIT_SETUP: u8 = 4;
/// Exit code: `result --wait` ran out of time while the job still runs.
pub(crate) const EXIT_RUNNING: u8 = 5;

/// The longest failure message kept (bytes); longer ones are cut at a character boundary.
pub(crate) const MESSAGE_LIMIT: usize = 2048;

/// Why a job (or a companion command) failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    MissingCli,
    Setup,
    Auth,
    Quota,
    RateLimited,
    Network,
    Permission,
    Policy,
    Refused,
    Protocol,
    Timeout,
    Process,
    Cancelled,
    Died,
    Input,
    Resource,
    Error,
}

impl FailureKind {
    /// Every kind, in the documented order.
    pub const ALL: [FailureKind; 17] = [
        FailureKind::MissingCli,
        FailureKind::Setup,
        FailureKind::Auth,
        FailureKind::Quota,
        FailureKind::RateLimited,
        FailureKind::Network,
        FailureKind::Permission,
        FailureKind::Policy,
        FailureKind::Refused,
        FailureKind::Protocol,
        FailureKind::Timeout,
        FailureKind::Process,
        FailureKind::Cancelled,
        FailureKind::Died,
        FailureKind::Input,
        FailureKind::Resource,
        FailureKind::Error,
    ];

    /// The stable string of the kind (the same as its JSON form).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::MissingCli => "missing_cli",
            FailureKind::Setup => "setup",
            FailureKind::Auth => "auth",
            FailureKind::Quota => "quota",
            FailureKind::RateLimited => "rate_limited",
            FailureKind::Network => "network",
            FailureKind::Permission => "permission",
            FailureKind::Policy => "policy",
            FailureKind::Refused => "refused",
            FailureKind::Protocol => "protocol",
            FailureKind::Timeout => "timeout",
            FailureKind::Process => "process",
            FailureKind::Cancelled => "cancelled",
            FailureKind::Died => "died",
            FailureKind::Input => "input",
            FailureKind::Resource => "resource",
            FailureKind::Error => "error",
        }
    }

    /// Whether the failure concerns the engine as a whole (every later job would fail the
    /// same way) rather than this one job.
    pub fn engine_wide(self) -> bool {
        matches!(
            self,
            FailureKind::Auth
                | FailureKind::MissingCli
                | FailureKind::Setup
                | FailureKind::Protocol
                | FailureKind::Permission
                | FailureKind::Policy
        )
    }

    /// Whether a failure of this kind names the billing pool it applies to.
    pub fn carries_billing_pool(self) -> bool {
        matches!(self, FailureKind::Quota | FailureKind::RateLimited)
    }

    /// The process exit code of a command that ends with this failure.
    pub fn exit_code(self) -> u8 {
        match self {
            FailureKind::Input => EXIT_INPUT,
            FailureKind::Cancelled => EXIT_CANCELLED,
            FailureKind::MissingCli | FailureKind::Setup | FailureKind::Auth => EXIT_SETUP,
            _ => EXIT_FAILED,
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not one of the 17 failure kinds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown failure kind {0:?}")]
pub struct UnknownFailureKind(pub String);

impl FromStr for FailureKind {
    type Err = UnknownFailureKind;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        FailureKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
            .ok_or_else(|| UnknownFailureKind(bound_text(text, 64)))
    }
}

/// The billing pool a model's usage counts against: Devin's own `swe-*` models are
/// first-party, every other model is billed as API usage.
pub(crate) fn billing_pool_for(model: &str) -> &'static str {
    if model.trim().to_ascii_lowercase().starts_with("swe-") {
        "first-party"
    } else {
        "api"
    }
}

/// A typed failure as stored in a job record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobFailure {
    pub kind: FailureKind,
    pub message: String,
    pub engine_wide: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub billing_pool: Option<String>,
}

impl JobFailure {
    /// A failure of `kind`; the message is cleaned (control characters dropped, credentials
    /// redacted) and bounded.
    pub fn new(kind: FailureKind, message: impl AsRef<str>) -> Self {
        JobFailure {
            kind,
            message: clean_message(message.as_ref()),
            engine_wide: kind.engine_wide(),
            billing_pool: None,
        }
    }

    /// A quota or rate-limit failure names the billing pool of `model`; other kinds ignore it.
    pub fn with_model(mut self, model: Option<&str>) -> Self {
        if self.kind.carries_billing_pool() {
            self.billing_pool = Some(billing_pool_for(model.unwrap_or_default()).to_owned());
        }
        self
    }

    /// The process exit code for a job that ended with this failure.
    pub fn exit_code(&self) -> u8 {
        self.kind.exit_code()
    }
}

impl fmt::Display for JobFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// Cuts `text` to at most `limit` bytes at a character boundary, marking the cut.
pub(crate) fn bound_text(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    const MARK: &str = "…[truncated]";
    let mut end = limit.saturating_sub(MARK.len());
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MARK}", &text[..end])
}

/// Words after which the next token is a credential.
const SECRET_MARKERS: [&str; 8] = [
    "bearer ",
    "token=",
    "token:",
    "api_key=",
    "apikey=",
    "password=",
    "secret=",
    "authorization:",
];

/// Makes text safe to store and print: control characters become spaces, anything that
/// follows a credential marker (`Bearer`, `token=`, ...) and the value of `WINDSURF_API_KEY`
/// are replaced by `[redacted]`, and the result is bounded to [`MESSAGE_LIMIT`].
pub(crate) fn clean_message(text: &str) -> String {
    let mut cleaned: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if let Ok(key) = std::env::var("WINDSURF_API_KEY") {
        if key.len() >= 8 {
            cleaned = cleaned.replace(&key, "[redacted]");
        }
    }
    let cleaned = redact_after_markers(&cleaned);
    bound_text(cleaned.trim(), MESSAGE_LIMIT)
}

/// The end of a stream's text (a child's stderr) made safe to store and print over several
/// lines: lines are kept, other control characters become spaces, credentials are redacted as
/// in [`clean_message`], and only the last `limit` bytes are kept (cut at a character boundary,
/// marked with a leading `…`), because the end of stderr is where a failing CLI says why.
pub(crate) fn clean_tail(text: &str, limit: usize) -> String {
    let mut cleaned: String = text
        .chars()
        .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
        .collect();
    if let Ok(key) = std::env::var("WINDSURF_API_KEY") {
        if key.len() >= 8 {
            cleaned = cleaned.replace(&key, "[redacted]");
        }
    }
    let cleaned = redact_after_markers(&cleaned);
    let trimmed = cleaned.trim_matches(|c: char| c.is_whitespace());
    if trimmed.len() <= limit {
        return trimmed.to_owned();
    }
    const MARK: &str = "…";
    let mut start = trimmed.len() - limit.saturating_sub(MARK.len());
    while start < trimmed.len() && !trimmed.is_char_boundary(start) {
        start += 1;
    }
    format!("{MARK}{}", &trimmed[start..])
}

fn redact_after_markers(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut index = 0;
    while index < text.len() {
        let found = SECRET_MARKERS
            .iter()
            .filter_map(|marker| lower[index..].find(marker).map(|at| (at, marker.len())))
            .min();
        let Some((at, marker_len)) = found else {
            out.push_str(&text[index..]);
            break;
        };
        let value_start = index + at + marker_len;
        out.push_str(&text[index..value_start]);
        let rest = &text[value_start..];
        let skip_spaces = rest.len() - rest.trim_start().len();
        let token_end = |from: usize| {
            rest[from..]
                .find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == ',')
                .unwrap_or(rest.len() - from)
        };
        let mut value_len = token_end(skip_spaces);
        let scheme = rest[skip_spaces..skip_spaces + value_len].to_ascii_lowercase();
        if scheme == "bearer" || scheme == "basic" {
            // `Authorization: Bearer <token>`: the credential is the token after the scheme.
            let after = skip_spaces + value_len;
            let gap = rest[after..].len() - rest[after..].trim_start().len();
            value_len += gap + token_end(after + gap);
        }
        if value_len > 0 {
            out.push_str(&rest[..skip_spaces]);
            out.push_str("[redacted]");
        }
        index = value_start + skip_spaces + value_len;
        if value_len == 0 {
            // Nothing to redact after this marker; move past it.
            out.push_str(&text[value_start..index]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_serialises_to_its_documented_string_and_parses_back() {
        let expected = [
            "missing_cli",
            "setup",
            "auth",
            "quota",
            "rate_limited",
            "network",
            "permission",
            "policy",
            "refused",
            "protocol",
            "timeout",
            "process",
            "cancelled",
            "died",
            "input",
            "resource",
            "error",
        ];
        assert_eq!(FailureKind::ALL.len(), expected.len());
        for (kind, text) in FailureKind::ALL.into_iter().zip(expected) {
            assert_eq!(serde_json::to_value(kind).unwrap(), serde_json::json!(text));
            assert_eq!(kind.to_string(), text);
            assert_eq!(text.parse::<FailureKind>().unwrap(), kind);
            let back: FailureKind = serde_json::from_value(serde_json::json!(text)).unwrap();
            assert_eq!(back, kind);
        }
        assert!("Died".parse::<FailureKind>().is_err());
        assert!("".parse::<FailureKind>().is_err());
    }

    #[test]
    fn engine_wide_kinds_are_exactly_the_six_documented() {
        let wide: Vec<&str> = FailureKind::ALL
            .into_iter()
            .filter(|kind| kind.engine_wide())
            .map(FailureKind::as_str)
            .collect();
        assert_eq!(
            wide,
            [
                "missing_cli",
                "setup",
                "auth",
                "permission",
                "policy",
                "protocol"
            ]
        );
        assert!(JobFailure::new(FailureKind::Auth, "x").engine_wide);
        assert!(!JobFailure::new(FailureKind::Died, "x").engine_wide);
    }

    #[test]
    fn billing_pool_is_first_party_only_for_swe_models() {
        assert_eq!(billing_pool_for("swe-1-5"), "first-party");
        assert_eq!(billing_pool_for("SWE-1.5"), "first-party");
        assert_eq!(billing_pool_for("claude-sonnet-4-5"), "api");
        assert_eq!(billing_pool_for(""), "api");
        let quota = JobFailure::new(FailureKind::Quota, "out").with_model(Some("swe-1-5"));
        assert_eq!(quota.billing_pool.as_deref(), Some("first-party"));
        let limited = JobFailure::new(FailureKind::RateLimited, "slow").with_model(Some("gpt-5"));
        assert_eq!(limited.billing_pool.as_deref(), Some("api"));
        let other = JobFailure::new(FailureKind::Network, "down").with_model(Some("swe-1-5"));
        assert_eq!(other.billing_pool, None);
    }

    #[test]
    fn exit_codes_follow_the_documented_table() {
        assert_eq!(FailureKind::Input.exit_code(), 2);
        assert_eq!(FailureKind::Cancelled.exit_code(), 3);
        for kind in [
            FailureKind::MissingCli,
            FailureKind::Setup,
            FailureKind::Auth,
        ] {
            assert_eq!(kind.exit_code(), 4, "{kind}");
        }
        for kind in [
            FailureKind::Died,
            FailureKind::Error,
            FailureKind::Quota,
            FailureKind::Protocol,
            FailureKind::Timeout,
        ] {
            assert_eq!(kind.exit_code(), 1, "{kind}");
        }
        assert_eq!(FailureKind::Input.exit_code(), 2);
    }

    #[test]
    fn failure_json_uses_camel_case_and_omits_an_absent_pool() {
        let failure = JobFailure::new(FailureKind::Died, "gone");
        let json = serde_json::to_value(&failure).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "died", "message": "gone", "engineWide": false})
        );
    }

    #[test]
    fn a_tail_keeps_its_lines_and_end_and_loses_credentials() {
        let text = format!(
            "{}\nfirst\r\n\u{1b}[31mtoken=s3cret\nthe real reason\n\n",
            "é".repeat(100)
        );
        let tail = clean_tail(&text, 64);
        assert!(tail.len() <= 64, "{}", tail.len());
        assert!(tail.starts_with('…'), "{tail}");
        assert!(tail.ends_with("[redacted]\nthe real reason"), "{tail:?}");
        assert!(!tail.contains('\u{1b}') && !tail.contains('\r'), "{tail:?}");
        assert!(!tail.contains("s3cret"), "{tail}");
        assert_eq!(clean_tail("  short\n", 64), "short");
        assert_eq!(clean_tail("", 64), "");
    }

    #[test]
    fn messages_are_bounded_and_lose_control_characters_and_credentials() {
        let long = "é".repeat(MESSAGE_LIMIT);
        let bounded = JobFailure::new(FailureKind::Error, &long).message;
        assert!(bounded.len() <= MESSAGE_LIMIT, "{}", bounded.len());
        assert!(bounded.ends_with("[truncated]"));
        let message = JobFailure::new(
            FailureKind::Auth,
            "denied\n\u{1b}[31m Authorization: Bearer abc.def-123 token=xyz9 ok",
        )
        .message;
        assert!(!message.contains('\n') && !message.contains('\u{1b}'));
        assert!(!message.contains("abc.def-123"), "{message}");
        assert!(!message.contains("xyz9"), "{message}");
        assert!(message.ends_with("ok"), "{message}");
    }
}
