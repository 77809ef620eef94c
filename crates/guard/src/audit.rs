//! The audit file: one JSON line per decision.
//!
//! Fields: `time` (RFC 3339, UTC, ms), `id` (connection id, unique per guard process), `client`
//! (peer address), `method`, `host` and `port` (as requested, sanitised, never with userinfo),
//! `sni`, `resolved` (the address dialled), `decision` (`allow` | `deny`), `reason` (a stable
//! code), `close` (how an allowed connection ended), `bytes_up` (client to upstream),
//! `bytes_down`, `duration_ms`. Never a body, a header value, or a credential.
//!
//! The file is opened append-only with `O_NOFOLLOW`, created with mode `0600`; an existing file
//! must be a regular file with one link, owned by the guard's user, and is brought back to
//! `0600` if group or others could access it (refused if that fails). Lines are written whole
//! under one mutex, each with a single `write` on an unbuffered file (so flushed per line).
//! When a write fails the log is marked unhealthy and the guard denies every new connection
//! (`audit_unavailable`): nothing is allowed that cannot be recorded.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Why the audit file could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// Open or create failed (missing directory, a symlink, no permission...).
    #[error("cannot open audit file {path}: {source}")]
    Open {
        /// The audit file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file exists but is not safe to use.
    #[error("refusing audit file {path}: {why}")]
    Unsafe {
        /// The audit file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
}

/// The outcome of a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The connection was let through.
    Allow,
    /// The connection was refused.
    Deny,
}

/// One line of the audit file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    /// RFC 3339 UTC time of the decision's end.
    pub time: String,
    /// Connection id.
    pub id: u64,
    /// Client address.
    pub client: SocketAddr,
    /// Request method (`CONNECT`, `GET`...), when one was read.
    pub method: Option<String>,
    /// Requested host: the normalised name the decision was made on (IDNA-mapped, lower-case
    /// punycode) when the name could be normalised, else the request's text, sanitised.
    pub host: Option<String>,
    /// The host exactly as requested, escaped (see [`escape`]), present only when it differs
    /// from `host`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_raw: Option<String>,
    /// Requested port.
    pub port: Option<u16>,
    /// SNI of the ClientHello.
    pub sni: Option<String>,
    /// The address dialled (or refused after resolution).
    pub resolved: Option<SocketAddr>,
    /// Allow or deny.
    pub decision: Decision,
    /// Stable reason code.
    pub reason: &'static str,
    /// How an allowed connection ended (`eof`, `idle_timeout`, `shutdown`, `error`...).
    pub close: Option<&'static str>,
    /// Bytes from the client to the upstream.
    pub bytes_up: u64,
    /// Bytes from the upstream to the client.
    pub bytes_down: u64,
    /// Time from accept to the end of the decision (for a tunnel, its whole life).
    pub duration_ms: u64,
}

/// What a connection handler accumulates until its decision is written.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub id: u64,
    pub client: SocketAddr,
    pub started: Instant,
    pub method: Option<String>,
    pub host: Option<String>,
    pub host_raw: Option<String>,
    pub port: Option<u16>,
    pub sni: Option<String>,
    pub resolved: Option<SocketAddr>,
}

impl Pending {
    pub(crate) fn new(id: u64, client: SocketAddr) -> Self {
        Self {
            id,
            client,
            started: Instant::now(),
            method: None,
            host: None,
            host_raw: None,
            port: None,
            sni: None,
            resolved: None,
        }
    }

    pub(crate) fn record(
        &self,
        decision: Decision,
        reason: &'static str,
        close: Option<&'static str>,
        bytes_up: u64,
        bytes_down: u64,
    ) -> AuditRecord {
        AuditRecord {
            time: rfc3339(SystemTime::now()),
            id: self.id,
            client: self.client,
            method: self.method.clone(),
            host: self.host.clone(),
            host_raw: self.host_raw.clone(),
            port: self.port,
            sni: self.sni.clone(),
            resolved: self.resolved,
            decision,
            reason,
            close,
            bytes_up,
            bytes_down,
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// Make a client-supplied string safe to log: at most 255 characters, printable ASCII only,
/// everything up to a `@` (userinfo) removed.
pub(crate) fn sanitize(raw: &str) -> String {
    let raw = raw.rsplit_once('@').map(|(_, host)| host).unwrap_or(raw);
    raw.chars()
        .take(255)
        .map(|c| if c.is_ascii_graphic() { c } else { '?' })
        .collect()
}

/// Escape a client-supplied string for the audit file without losing what it was: at most 255
/// characters, everything up to a `@` (userinfo) removed, printable ASCII kept, `\\` doubled and
/// every other character written as `\u{hex}`.
pub(crate) fn escape(raw: &str) -> String {
    let raw = raw.rsplit_once('@').map(|(_, host)| host).unwrap_or(raw);
    let mut out = String::new();
    for c in raw.chars().take(255) {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_ascii_graphic() => out.push(c),
            c => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
        }
    }
    out
}

impl Pending {
    /// Record the requested host: `normalised` (when the name could be normalised) is what the
    /// decision used and becomes `host`; the raw text is kept, escaped, in `host_raw` when it
    /// differs.
    pub(crate) fn set_host(&mut self, raw: &str, normalised: Option<&str>) {
        match normalised {
            Some(name) => {
                self.host = Some(name.to_owned());
                self.host_raw = (raw != name).then(|| escape(raw));
            }
            None => {
                self.host = Some(sanitize(raw));
                self.host_raw = (!raw.chars().all(|c| c.is_ascii_graphic())).then(|| escape(raw));
            }
        }
    }
}

/// The append-only audit log.
#[derive(Debug)]
pub(crate) struct AuditLog {
    path: PathBuf,
    file: Mutex<File>,
    healthy: AtomicBool,
}

impl AuditLog {
    /// Open (or create, mode 0600) the audit file, checking an existing one.
    pub(crate) fn open(path: &Path) -> Result<Self, AuditError> {
        let open_err = |source| AuditError::Open {
            path: path.to_owned(),
            source,
        };
        let unsafe_err = |why: String| AuditError::Unsafe {
            path: path.to_owned(),
            why,
        };
        let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_CLOEXEC;
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(flags.bits())
            .open(path)
            .map_err(open_err)?;
        let meta = file.metadata().map_err(open_err)?;
        if !meta.file_type().is_file() {
            return Err(unsafe_err("not a regular file".into()));
        }
        if meta.nlink() != 1 {
            return Err(unsafe_err(format!(
                "{} hard links (expected 1)",
                meta.nlink()
            )));
        }
        let euid = nix::unistd::geteuid().as_raw();
        if meta.uid() != euid {
            return Err(unsafe_err(format!(
                "owned by uid {} (the guard runs as uid {euid})",
                meta.uid()
            )));
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(|e| unsafe_err(format!("mode {mode:o} and cannot chmod 0600: {e}")))?;
            tracing::warn!(path = %path.display(), old_mode = format!("{mode:o}"),
                "audit file was accessible to group or others; reset to 0600");
        }
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
            healthy: AtomicBool::new(true),
        })
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// False once a write has failed.
    pub(crate) fn healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Append one record as one line.
    pub(crate) fn write(&self, record: &AuditRecord) {
        let mut line = match serde_json::to_string(record) {
            Ok(line) => line,
            Err(error) => {
                tracing::error!(%error, "cannot serialise an audit record");
                self.healthy.store(false, Ordering::Relaxed);
                return;
            }
        };
        line.push('\n');
        let result = match self.file.lock() {
            Ok(mut file) => file.write_all(line.as_bytes()),
            Err(poisoned) => poisoned.into_inner().write_all(line.as_bytes()),
        };
        if let Err(error) = result {
            tracing::error!(%error, path = %self.path.display(), "audit write failed; denying new connections");
            self.healthy.store(false, Ordering::Relaxed);
        }
    }
}

/// RFC 3339 UTC with milliseconds, e.g. `2025-01-02T03:04:05.678Z` (times before 1970 print
/// as the epoch).
pub(crate) fn rfc3339(t: SystemTime) -> String {
    match jiff::Timestamp::try_from(t.max(UNIX_EPOCH)) {
        Ok(timestamp) => format!("{timestamp:.3}"),
        Err(_) => "9999-12-31T23:59:59.999Z".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn time_format() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_709_251_199_123);
        assert_eq!(rfc3339(t), "2024-02-29T23:59:59.123Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(t), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn sanitize_strips_userinfo_and_controls() {
        assert_eq!(sanitize("user:pw@host.example"), "host.example");
        assert_eq!(sanitize("a\r\nb c"), "a??b?c");
        assert_eq!(sanitize(&"x".repeat(1000)).len(), 255);
    }

    #[test]
    fn escape_keeps_non_ascii_readable_and_unambiguous() {
        assert_eq!(escape("api.devin.ai"), "api.devin.ai");
        assert_eq!(escape("\u{ff44}e.ai"), "\\u{ff44}e.ai");
        assert_eq!(escape("a\\u{41}\r\n"), "a\\\\u{41}\\u{d}\\u{a}");
        assert_eq!(escape("user:pw@host"), "host");
        let mut p = Pending::new(1, "127.0.0.1:1".parse().unwrap());
        p.set_host("API.devin.ai.", Some("api.devin.ai"));
        assert_eq!(p.host.as_deref(), Some("api.devin.ai"));
        assert_eq!(p.host_raw.as_deref(), Some("API.devin.ai."));
        p.set_host("api.devin.ai", Some("api.devin.ai"));
        assert_eq!(p.host_raw, None);
        p.set_host("a\u{7f}b", None);
        assert_eq!(p.host.as_deref(), Some("a?b"));
        assert_eq!(p.host_raw.as_deref(), Some("a\\u{7f}b"));
    }

    #[test]
    fn file_is_created_0600_and_fixed_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let p = Pending::new(7, "127.0.0.1:1".parse().unwrap());
        log.write(&p.record(Decision::Deny, "host_not_allowlisted", None, 0, 0));
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["decision"], "deny");
        assert_eq!(v["reason"], "host_not_allowlisted");

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        AuditLog::open(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(AuditLog::open(&link).is_err(), "symlink refused");
        let hard = dir.path().join("hard.jsonl");
        std::fs::hard_link(&path, &hard).unwrap();
        assert!(matches!(
            AuditLog::open(&path),
            Err(AuditError::Unsafe { .. })
        ));
    }
}
