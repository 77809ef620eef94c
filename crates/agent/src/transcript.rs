//! Recorded ACP exchanges ("traces"): one JSON line per JSON-RPC message, redacted as each
//! message is recorded, so nothing unredacted is kept or written.
//!
//! The file format (version [`VERSION`]):
//! - the first line is a [`Header`]: `{"format": "devin-bridge-trace", "version": 1, ...}`
//!   with the bridge and CLI versions and the list of what was redacted;
//! - every other line is an [`Entry`]: `{"dir": "to_agent" | "from_agent", "msg": <message>}`,
//!   in the order the messages crossed the pipe. A line the agent wrote that was not JSON is
//!   kept as `{"unparseable": "<placeholder>"}` in place of the message.
//!
//! Invariants:
//! - a [`Recorder`] only ever holds messages that went through its [`Redactor`]; the raw bytes
//!   are dropped as soon as they are parsed;
//! - it is bounded ([`MAX_ENTRIES`], [`MAX_BYTES`]): beyond that, messages are counted in the
//!   header's `dropped` and not kept;
//! - [`Recorder::write`] creates the file `0600` (and makes an existing one `0600` before
//!   writing to it), refusing a symlink.
//!
//! The redaction rules are in [`redact`].

pub mod redact;

use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use redact::Redactor;

/// The `format` of a trace's header line.
pub const FORMAT: &str = "devin-bridge-trace";
/// The version of the format this code writes and reads.
pub const VERSION: u32 = 1;
/// Messages a recorder keeps at most.
pub const MAX_ENTRIES: usize = 10_000;
/// Bytes of (redacted) messages a recorder keeps at most.
pub const MAX_BYTES: usize = 16 << 20;

/// Which way a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// From the bridge to the agent (its stdin).
    ToAgent,
    /// From the agent to the bridge (its stdout).
    FromAgent,
}

/// One message of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub dir: Direction,
    pub msg: Value,
}

/// The first line of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    pub version: u32,
    /// What wrote it (`devin-bridge 0.1.0 doctor`).
    pub recorded_by: String,
    /// The agent's own `--version` answer, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli_version: Option<String>,
    /// What was replaced by placeholders ([`redact::REDACTED`]).
    pub redacted: Vec<String>,
    /// Messages not kept because the recorder was full.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl Header {
    /// A header for a trace written by `recorded_by`.
    pub fn new(recorded_by: impl Into<String>, cli_version: Option<String>) -> Self {
        Self {
            format: FORMAT.to_owned(),
            version: VERSION,
            recorded_by: recorded_by.into(),
            cli_version,
            redacted: redact::REDACTED.iter().map(|s| (*s).to_owned()).collect(),
            dropped: 0,
        }
    }
}

/// Why a trace cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    #[error("line {line}: not JSON: {message}")]
    NotJson { line: usize, message: String },
    #[error("line {line}: not a trace entry ({{\"dir\", \"msg\"}}) or header")]
    NotAnEntry { line: usize },
    #[error("line {line}: trace format version {version} is not {VERSION}")]
    Version { line: usize, version: u32 },
    #[error("cannot write the trace {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// A trace read back: its header (when it has one) and its entries with their line numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    pub header: Option<Header>,
    /// `(line number, entry)`, lines counted from 1.
    pub entries: Vec<(usize, Entry)>,
}

/// Reads a trace. Blank lines are skipped; the header is optional (a hand-written trace may
/// start with its first message).
pub fn read(text: &str) -> Result<Transcript, TranscriptError> {
    let mut header = None;
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value =
            serde_json::from_str(line).map_err(|error| TranscriptError::NotJson {
                line: number,
                message: error.to_string(),
            })?;
        if value.get("format").and_then(Value::as_str) == Some(FORMAT) {
            let read = Header::deserialize(&value)
                .map_err(|_| TranscriptError::NotAnEntry { line: number })?;
            if read.version != VERSION {
                return Err(TranscriptError::Version {
                    line: number,
                    version: read.version,
                });
            }
            header = Some(read);
            continue;
        }
        let entry =
            Entry::deserialize(&value).map_err(|_| TranscriptError::NotAnEntry { line: number })?;
        entries.push((number, entry));
    }
    Ok(Transcript { header, entries })
}

/// Collects the messages of a connection, redacted as they arrive. Cheap to clone: clones
/// share one recording.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Mutex<Recording>>,
}

struct Recording {
    redactor: Redactor,
    entries: Vec<Entry>,
    bytes: usize,
    dropped: u64,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recorder")
    }
}

impl Recorder {
    pub fn new(redactor: Redactor) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Recording {
                redactor,
                entries: Vec::new(),
                bytes: 0,
                dropped: 0,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recording> {
        // A recorder is plain data: a panic elsewhere cannot leave it inconsistent.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records one line that crossed the pipe (one JSON-RPC message, newline optional).
    pub fn record(&self, dir: Direction, line: &[u8]) {
        let line = line.trim_ascii();
        if line.is_empty() {
            return;
        }
        let mut recording = self.lock();
        if recording.entries.len() >= MAX_ENTRIES || recording.bytes >= MAX_BYTES {
            recording.dropped = recording.dropped.saturating_add(1);
            return;
        }
        let msg = match serde_json::from_slice::<Value>(line) {
            Ok(mut msg) => {
                recording.redactor.redact(&mut msg);
                msg
            }
            Err(_) => serde_json::json!({
                "unparseable": redact::text_placeholder(String::from_utf8_lossy(line).chars().count()),
            }),
        };
        let size = msg.to_string().len();
        recording.bytes = recording.bytes.saturating_add(size);
        recording.entries.push(Entry { dir, msg });
    }

    /// The messages recorded so far (redacted).
    pub fn entries(&self) -> Vec<Entry> {
        self.lock().entries.clone()
    }

    /// Messages not kept because the recorder was full.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// The whole trace as text: `header` (with the dropped count filled in), then one line per
    /// entry.
    pub fn to_text(&self, mut header: Header) -> String {
        let recording = self.lock();
        header.dropped = recording.dropped;
        let mut out = serde_json::to_string(&header).unwrap_or_default();
        out.push('\n');
        for entry in &recording.entries {
            out.push_str(&serde_json::to_string(entry).unwrap_or_default());
            out.push('\n');
        }
        out
    }

    /// Writes the trace to `path`, mode `0600`, replacing what was there; a symlink is refused.
    pub fn write(&self, path: &Path, header: Header) -> Result<(), TranscriptError> {
        let text = self.to_text(header);
        write_private(path, text.as_bytes()).map_err(|source| TranscriptError::Write {
            path: path.display().to_string(),
            source,
        })
    }
}

/// Writes `bytes` to `path` as a file only its owner can read.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    // `mode` applies only to a file this call created: an existing one is closed first.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests;
