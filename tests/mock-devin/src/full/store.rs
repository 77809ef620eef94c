//! The session database: one JSON file per session, `$XDG_DATA_HOME/devin/sessions/<id>.json`
//! (fallback `$HOME/.local/share/devin/sessions/`), mode 0600 in 0700 directories, replaced
//! atomically (write to a temporary file, then rename).
//!
//! ```json
//! {"sessionId": "mock-…", "cwd": "/abs", "mode": "accept-edits", "model": "swe-2",
//!  "thoughtLevel": "medium",
//!  "history": [{"role": "user", "text": "…"}, {"role": "agent", "text": "…"}]}
//! ```

use std::fs::{DirBuilder, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The largest session file read back.
const MAX_SESSION_FILE: u64 = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error("neither XDG_DATA_HOME nor HOME is set: no session database")]
    NoLocation,
    #[error("session id {0:?} is not a valid session id")]
    BadId(String),
    #[error("session {0:?} not found")]
    NotFound(String),
    #[error("session file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("session file {path} is larger than 64 MiB")]
    TooLarge { path: PathBuf },
    #[error("session file {path} is not a session record: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// Who said a history entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    User,
    Agent,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub role: Role,
    pub text: String,
}

/// One stored session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Record {
    pub session_id: String,
    pub cwd: String,
    pub mode: String,
    pub model: String,
    pub thought_level: String,
    pub history: Vec<Entry>,
}

impl Record {
    /// How many prompts the session has seen.
    pub(crate) fn turns(&self) -> usize {
        self.history
            .iter()
            .filter(|entry| entry.role == Role::User)
            .count()
    }
}

use crate::wire::data_dir;

/// Session ids are file names: letters, digits, `-` and `_`, at most 128 characters.
pub(crate) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The database directory for sessions.
#[derive(Clone, Debug)]
pub(crate) struct Store {
    dir: PathBuf,
}

impl Store {
    pub(crate) fn from_env() -> Result<Self, StoreError> {
        data_dir()
            .map(|dir| Self::new(dir.join("sessions")))
            .ok_or(StoreError::NoLocation)
    }

    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn path(&self, id: &str) -> Result<PathBuf, StoreError> {
        if !valid_id(id) {
            return Err(StoreError::BadId(id.to_owned()));
        }
        Ok(self.dir.join(format!("{id}.json")))
    }

    /// Writes `record`, replacing any earlier version.
    pub(crate) fn save(&self, record: &Record) -> Result<(), StoreError> {
        let path = self.path(&record.session_id)?;
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io)?;
        let bytes = serde_json::to_vec_pretty(record).map_err(|source| StoreError::Json {
            path: path.clone(),
            source,
        })?;
        let temporary = self
            .dir
            .join(format!(".{}.{}.tmp", record.session_id, std::process::id()));
        let written = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut file| {
                file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
                file.write_all(&bytes)?;
                file.sync_all()
            })
            .and_then(|()| std::fs::rename(&temporary, &path));
        if let Err(err) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(io(err));
        }
        Ok(())
    }

    /// Reads the session `id`; [`StoreError::NotFound`] when there is none.
    pub(crate) fn load(&self, id: &str) -> Result<Record, StoreError> {
        let path = self.path(id)?;
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound(id.to_owned()))
            }
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        let mut bytes = Vec::new();
        file.take(MAX_SESSION_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })?;
        if bytes.len() as u64 > MAX_SESSION_FILE {
            return Err(StoreError::TooLarge { path });
        }
        let record: Record = serde_json::from_slice(&bytes).map_err(|source| StoreError::Json {
            path: path.clone(),
            source,
        })?;
        if record.session_id != id {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        Ok(record)
    }

    /// Removes the stored session `id`; false when there was none.
    pub(crate) fn delete(&self, id: &str) -> Result<bool, StoreError> {
        let path = self.path(id)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(StoreError::Io { path, source }),
        }
    }

    /// Every readable stored session with its last change (RFC 3339), newest first. Files
    /// that are not session records are skipped.
    pub(crate) fn list(&self) -> Result<Vec<(Record, String)>, StoreError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(StoreError::Io {
                    path: self.dir.clone(),
                    source,
                })
            }
        };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            let modified = entry
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            if let Ok(record) = self.load(id) {
                found.push((record, modified));
            }
        }
        found.sort_by_key(|(_, modified)| std::cmp::Reverse(*modified));
        Ok(found
            .into_iter()
            .map(|(record, modified)| (record, crate::log::rfc3339(modified)))
            .collect())
    }

    #[cfg(test)]
    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> Record {
        Record {
            session_id: id.into(),
            cwd: "/w".into(),
            mode: "smart".into(),
            model: "swe-2".into(),
            thought_level: "medium".into(),
            history: vec![
                Entry {
                    role: Role::User,
                    text: "hello".into(),
                },
                Entry {
                    role: Role::Agent,
                    text: "hi".into(),
                },
            ],
        }
    }

    #[test]
    fn saves_private_files_and_loads_them_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::new(dir.path().join("devin/sessions"));
        let saved = record("mock-abc");
        store.save(&saved).expect("save");
        let file = store.dir().join("mock-abc.json");
        let mode = std::fs::metadata(&file).expect("file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(store.dir())
            .expect("dir")
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        let loaded = store.load("mock-abc").expect("load");
        assert_eq!(loaded, saved);
        assert_eq!(loaded.turns(), 1);
        // Saving again replaces the record.
        let mut changed = saved.clone();
        changed.model = "kimi-k3".into();
        store.save(&changed).expect("save");
        assert_eq!(store.load("mock-abc").expect("load").model, "kimi-k3");
    }

    #[test]
    fn unknown_and_invalid_ids() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::new(dir.path().to_owned());
        assert!(matches!(
            store.load("mock-none"),
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(store.load("../etc"), Err(StoreError::BadId(_))));
        assert!(matches!(store.load(""), Err(StoreError::BadId(_))));
        assert!(matches!(
            store.save(&record("a/b")),
            Err(StoreError::BadId(_))
        ));
        std::fs::write(dir.path().join("mock-x.json"), "not json").expect("write");
        assert!(matches!(store.load("mock-x"), Err(StoreError::Json { .. })));
        // Listing skips what is not a record; deleting removes the file once.
        store.save(&record("mock-y")).expect("save");
        let listed: Vec<String> = store
            .list()
            .expect("list")
            .into_iter()
            .map(|(r, _)| r.session_id)
            .collect();
        assert_eq!(listed, ["mock-y"]);
        assert!(store.delete("mock-y").expect("delete"));
        assert!(!store.delete("mock-y").expect("delete again"));
        assert!(matches!(store.delete("../x"), Err(StoreError::BadId(_))));
        assert!(valid_id("mock-0123abcd"));
    }
}
