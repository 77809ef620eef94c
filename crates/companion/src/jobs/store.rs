//! The job store: one JSON file per job under `<data>/state/<workspace-key>/jobs/`.
//!
//! - Writes are atomic: a new private temporary file in the same directory, fsync, rename over
//!   the record (a hard link for creation, so an existing record is never replaced), fsync of
//!   the directory. A temporary file left by a crash is never read.
//! - Every read-modify-write holds the record's lock (`<id>.lock`, see [`RecordLock`]).
//! - Each workspace keeps an append-only index `jobs/index` of `<created unix ms> <id>` lines
//!   (appended, fsynced, before the record is written), so a listing orders by creation and
//!   parses only the records it shows, without reading the directory of records. A missing
//!   index is rebuilt from the records' mtimes, which every write sets to `createdAt`.
//! - A running job also has an empty marker `jobs/running/<id>` (removed when it ends), so a
//!   listing finds every running job without parsing the rest, and checks each one's liveness.
//! - A record that does not parse, has another schema or names another id is moved aside to
//!   `jobs/corrupt/<id>.json.corrupt-<unix-ms>` and reported; listings keep naming moved files.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::clock::{age_of, now_rfc3339, parse_rfc3339};
use super::liveness;
use super::lock::{LockError, RecordLock, LOCK_WAIT};
use super::record::{
    is_valid_job_id, Acceptance, AcceptanceState, Delivery, JobRecord, JobStatus, SCHEMA,
};
use crate::failure::{bound_text, FailureKind, JobFailure};

/// The largest record file read (a bigger one is treated as corrupt).
pub(crate) const RECORD_LIMIT: u64 = 8 * 1024 * 1024;
/// Default time a running record may exist without a worker stamp.
pub(crate) const DEFAULT_PIDLESS_GRACE: Duration = Duration::from_secs(10);
/// Between SIGTERM and SIGKILL when a dead job's engine process is ended.
pub(crate) const ENGINE_KILL_GRACE: Duration = Duration::from_secs(2);

const RECORD_SUFFIX: &str = ".json";
const CORRUPT_INFIX: &str = ".json.corrupt-";
const INDEX: &str = "index";
const INDEX_LOCK: &str = "index.lock";
const RUNNING_DIR: &str = "running";
const CORRUPT_DIR: &str = "corrupt";
/// The largest index read (about 1.5 million jobs).
const INDEX_LIMIT: u64 = 64 * 1024 * 1024;

/// Errors of the job store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("job id {0:?} is not of the form job-<16 lowercase hex digits>")]
    InvalidId(String),
    #[error("no job {0}")]
    NotFound(String),
    #[error("job {0} already exists")]
    Exists(String),
    #[error("job {0} is still running")]
    NotTerminal(String),
    #[error("job {id}: {message}")]
    Refused { id: String, message: String },
    #[error("{path} is not private to this user: {reason}")]
    Insecure { path: PathBuf, reason: String },
    #[error("job record {path} was corrupt ({reason}); moved aside to {moved_to}")]
    Corrupt {
        id: String,
        path: PathBuf,
        moved_to: PathBuf,
        reason: String,
    },
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl StoreError {
    /// The failure kind a command reports for this error.
    pub fn kind(&self) -> FailureKind {
        match self {
            StoreError::InvalidId(_)
            | StoreError::NotFound(_)
            | StoreError::Exists(_)
            | StoreError::NotTerminal(_)
            | StoreError::Refused { .. } => FailureKind::Input,
            StoreError::Insecure { .. } => FailureKind::Setup,
            StoreError::Corrupt { .. } | StoreError::Lock(_) | StoreError::Io { .. } => {
                FailureKind::Error
            }
        }
    }
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io {
        action,
        path,
        source,
    }
}

/// Where one record lives.
#[derive(Debug, Clone)]
struct Location {
    jobs_dir: PathBuf,
    id: String,
}

impl Location {
    fn record(&self) -> PathBuf {
        self.jobs_dir.join(format!("{}{RECORD_SUFFIX}", self.id))
    }
    fn lock(&self) -> PathBuf {
        self.jobs_dir.join(format!("{}.lock", self.id))
    }
    fn marker(&self) -> PathBuf {
        self.jobs_dir.join(RUNNING_DIR).join(&self.id)
    }
}

/// The job store of one data directory.
#[derive(Debug, Clone)]
pub struct JobStore {
    data_dir: PathBuf,
    state_dir: PathBuf,
    runs_dir: PathBuf,
    uid: u32,
    pidless_grace: Duration,
    engine_kill_grace: Duration,
}

impl JobStore {
    /// Opens (creating, 0700) the data directory and its `state/` and `runs/`; refuses one not
    /// owned by this user or open to group or others.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        let uid = nix::unistd::getuid().as_raw();
        if !data_dir.exists() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(data_dir)
                .map_err(io_error("create the data directory", data_dir))?;
        }
        let meta = fs::metadata(data_dir).map_err(io_error("inspect", data_dir))?;
        check_private(data_dir, &meta, uid, true)?;
        let store = JobStore {
            data_dir: data_dir.to_path_buf(),
            state_dir: data_dir.join("state"),
            runs_dir: data_dir.join("runs"),
            uid,
            pidless_grace: DEFAULT_PIDLESS_GRACE,
            engine_kill_grace: ENGINE_KILL_GRACE,
        };
        store.private_dir(&store.state_dir)?;
        store.private_dir(&store.runs_dir)?;
        Ok(store)
    }

    /// Opens the store of `settings.data_dir` with its pidless-running grace.
    pub fn from_settings(settings: &crate::settings::Settings) -> Result<Self, StoreError> {
        Ok(Self::open(&settings.data_dir)?.with_pidless_grace(settings.pidless_running_grace))
    }

    /// How long a running record without a worker stamp counts as starting, not dead.
    pub fn with_pidless_grace(mut self, grace: Duration) -> Self {
        self.pidless_grace = grace;
        self
    }

    /// Between SIGTERM and SIGKILL when a dead job's engine process group is ended.
    pub fn with_engine_kill_grace(mut self, grace: Duration) -> Self {
        self.engine_kill_grace = grace;
        self
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// `<data>/runs`: per-job run directories (`<data>/runs/<id>/config`).
    pub fn runs_dir(&self) -> &Path {
        &self.runs_dir
    }

    /// The run directory of a job (not created).
    pub fn run_dir(&self, id: &str) -> Result<PathBuf, StoreError> {
        validate_id(id)?;
        Ok(self.runs_dir.join(id))
    }

    /// `<sanitised basename>-<first 16 hex digits of sha256(canonical path)>`.
    pub fn workspace_key(workspace: &Path) -> String {
        let canonical = fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
        let digest = Sha256::digest(canonical.as_os_str().as_bytes());
        let base: String = canonical
            .file_name()
            .map(OsStr::to_string_lossy)
            .unwrap_or_default()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        let base = base.trim_start_matches('.');
        let base = if base.is_empty() { "root" } else { base };
        format!("{base}-{}", &hex::encode(digest)[..16])
    }

    /// Creates a record; fails with [`StoreError::Exists`] if its id is taken.
    pub fn create(&self, record: &JobRecord) -> Result<(), StoreError> {
        validate_id(&record.id)?;
        let location = self.prepare_workspace(&record.workspace, &record.id)?;
        let _lock = RecordLock::acquire(&location.lock(), LOCK_WAIT)?;
        if location.record().symlink_metadata().is_ok() {
            return Err(StoreError::Exists(record.id.clone()));
        }
        if !record.is_terminal() {
            let running = location.jobs_dir.join(RUNNING_DIR);
            write_atomic(&running, &location.marker(), b"", None, false)
                .map_err(io_error("write", &location.marker()))?;
        }
        let created_ms = parse_rfc3339(&record.created_at)
            .unwrap_or_else(SystemTime::now)
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        self.append_index(&location.jobs_dir, created_ms, &record.id)?;
        let mut record = record.clone();
        record.enforce_bounds();
        self.write_record(&location, &record, true)
    }

    /// A record by id, in `workspace` or (None) in any workspace. A running record's worker
    /// is checked; a dead one is finished as `died` first.
    pub fn get(&self, workspace: Option<&Path>, id: &str) -> Result<JobRecord, StoreError> {
        let location = self.locate(workspace, id)?;
        self.load_checked(&location)
    }

    /// Changes a running record under its lock. The id, workspace, creation time and status
    /// cannot be changed here. A terminal record is left as it is and returned.
    pub fn update_running(
        &self,
        workspace: &Path,
        id: &str,
        change: impl FnOnce(&mut JobRecord),
    ) -> Result<JobRecord, StoreError> {
        let location = self.locate(Some(workspace), id)?;
        let _lock = RecordLock::acquire(&location.lock(), LOCK_WAIT)?;
        let current = self.read_locked(&location)?;
        if current.is_terminal() {
            return Ok(current);
        }
        let mut next = current.clone();
        change(&mut next);
        next.id = current.id;
        next.workspace = current.workspace;
        next.created_at = current.created_at;
        next.status = JobStatus::Running;
        next.finished_at = None;
        next.updated_at = now_rfc3339();
        next.enforce_bounds();
        self.write_record(&location, &next, false)?;
        Ok(next)
    }

    /// Ends a running record with a terminal `status` after `apply` filled in the outcome.
    /// A record that is already terminal is left unchanged and returned (so a cancel that
    /// happened first wins). A non-`done` record always carries a failure (a default one of
    /// the matching kind if `apply` set none); a `done` record carries none. The job's
    /// private config directory under `<data>/runs` is removed.
    pub fn finish(
        &self,
        workspace: &Path,
        id: &str,
        status: JobStatus,
        apply: impl FnOnce(&mut JobRecord),
    ) -> Result<JobRecord, StoreError> {
        self.try_finish(workspace, id, status, apply)
            .map(|(record, _)| record)
    }

    /// [`JobStore::finish`], also saying whether this call ended the job (false: it had
    /// already ended and nothing changed).
    pub fn try_finish(
        &self,
        workspace: &Path,
        id: &str,
        status: JobStatus,
        apply: impl FnOnce(&mut JobRecord),
    ) -> Result<(JobRecord, bool), StoreError> {
        let location = self.locate(Some(workspace), id)?;
        self.finish_at(&location, status, apply)
    }

    /// Records the caller's acceptance of a terminal job, once. A job whose delivery failed
    /// is only accepted with `allow_failed_delivery`.
    pub fn record_acceptance(
        &self,
        workspace: Option<&Path>,
        id: &str,
        acceptance: Acceptance,
        allow_failed_delivery: bool,
    ) -> Result<JobRecord, StoreError> {
        let location = self.locate(workspace, id)?;
        // Settle liveness first: a running record whose worker is gone becomes died.
        self.load_checked(&location)?;
        let _lock = RecordLock::acquire(&location.lock(), LOCK_WAIT)?;
        let mut record = self.read_locked(&location)?;
        if !record.is_terminal() {
            return Err(StoreError::NotTerminal(record.id));
        }
        if let Some(existing) = &record.acceptance {
            return Err(StoreError::Refused {
                id: record.id,
                message: format!(
                    "acceptance is already recorded as {}",
                    existing.acceptance.as_str()
                ),
            });
        }
        if acceptance.acceptance == AcceptanceState::Accepted
            && record.delivery == Delivery::Failed
            && !allow_failed_delivery
        {
            return Err(StoreError::Refused {
                id: record.id,
                message: "its delivery failed; accepting it needs --accept-failed-transport"
                    .to_owned(),
            });
        }
        record.acceptance = Some(acceptance);
        record.enforce_bounds();
        self.write_record(&location, &record, false)?;
        Ok(record)
    }

    /// The newest `limit` records of `workspace`, or of every workspace, newest first,
    /// followed by any older job that is still running; and warnings (corrupt records moved
    /// aside, unreadable entries). "Newest" is the order in which jobs were stored (a job's
    /// `createdAt` is set just before); each index is read from its end, and only the shown
    /// records and the running ones are parsed, so the cost does not grow with history.
    pub fn list(
        &self,
        workspace: Option<&Path>,
        limit: usize,
    ) -> Result<(Vec<JobRecord>, Vec<String>), StoreError> {
        let dirs: Vec<PathBuf> = match workspace {
            Some(workspace) => vec![self
                .state_dir
                .join(Self::workspace_key(workspace))
                .join("jobs")],
            None => self
                .workspace_dirs()?
                .into_iter()
                .map(|d| d.join("jobs"))
                .collect(),
        };
        let mut warnings = BTreeSet::new();
        let mut cursors: Vec<IndexCursor> = Vec::new();
        let mut running: Vec<Location> = Vec::new();
        for (number, dir) in dirs.iter().enumerate() {
            if fs::symlink_metadata(dir).is_err() {
                continue;
            }
            cursors.push(IndexCursor::new(self.index_text(dir)?, number));
            for id in names_in(&dir.join(RUNNING_DIR)) {
                if is_valid_job_id(&id) {
                    running.push(Location {
                        jobs_dir: dir.clone(),
                        id,
                    });
                }
            }
            for name in names_in(&dir.join(CORRUPT_DIR)) {
                if name.contains(CORRUPT_INFIX) {
                    warnings.insert(format!(
                        "a corrupt job record was moved aside: {}",
                        dir.join(CORRUPT_DIR).join(name).display()
                    ));
                }
            }
        }
        // Each index is read from its end (the newest entries) and only as far as needed;
        // several workspaces are merged by creation time.
        let mut shown: Vec<JobRecord> = Vec::new();
        let mut seen = BTreeSet::new();
        while shown.len() < limit {
            let Some(cursor) = cursors
                .iter_mut()
                .filter(|cursor| cursor.head.is_some())
                .max_by_key(|cursor| cursor.head.as_ref().map(|(created, _)| *created))
            else {
                break;
            };
            let Some((_, id)) = cursor.advance() else {
                break;
            };
            if !seen.insert(id.clone()) {
                continue;
            }
            let location = Location {
                jobs_dir: dirs[cursor.dir].clone(),
                id,
            };
            match self.load_checked(&location) {
                Ok(record) => shown.push(record),
                Err(error) => note(&mut warnings, error),
            }
        }
        shown.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        let shown_ids: BTreeSet<String> = shown.iter().map(|r| r.id.clone()).collect();
        let mut older_running = Vec::new();
        for location in running {
            if shown_ids.contains(&location.id) {
                continue;
            }
            match self.load_checked(&location) {
                Ok(record) if !record.is_terminal() => older_running.push(record),
                Ok(_) => {
                    let _ = fs::remove_file(location.marker());
                }
                Err(StoreError::NotFound(_)) => {
                    // A marker whose record is gone (a crash between the two writes).
                    let _ = fs::remove_file(location.marker());
                }
                Err(error) => note(&mut warnings, error),
            }
        }
        older_running.sort_by(|a, b| b.created_at.cmp(&a.created_at));
        shown.extend(older_running);
        Ok((shown, warnings.into_iter().collect()))
    }

    /// The newest record of `workspace` (in listing order) for which `predicate` holds, e.g.
    /// the session to resume. Records are read one at a time from the newest, and the walk
    /// stops at the first match; unreadable or corrupt records are skipped.
    pub fn newest_matching(
        &self,
        workspace: &Path,
        predicate: impl Fn(&JobRecord) -> bool,
    ) -> Result<Option<JobRecord>, StoreError> {
        let dir = self
            .state_dir
            .join(Self::workspace_key(workspace))
            .join("jobs");
        if fs::symlink_metadata(&dir).is_err() {
            return Ok(None);
        }
        let mut cursor = IndexCursor::new(self.index_text(&dir)?, 0);
        let mut seen = BTreeSet::new();
        while let Some((_, id)) = cursor.advance() {
            if !seen.insert(id.clone()) {
                continue;
            }
            let location = Location {
                jobs_dir: dir.clone(),
                id,
            };
            match self.load_checked(&location) {
                Ok(record) if predicate(&record) => return Ok(Some(record)),
                Ok(_) | Err(StoreError::NotFound(_)) | Err(StoreError::Corrupt { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(None)
    }

    /// The canonical paths of every workspace that has records.
    pub fn workspaces(&self) -> Result<Vec<PathBuf>, StoreError> {
        let mut paths = Vec::new();
        for dir in self.workspace_dirs()? {
            let file = dir.join("workspace");
            if let Ok(text) = read_private(&file, 4096, self.uid) {
                let text = String::from_utf8_lossy(&text);
                let path = text.trim_end_matches('\n');
                if !path.is_empty() {
                    paths.push(PathBuf::from(path));
                }
            }
        }
        paths.sort();
        Ok(paths)
    }

    /// Every running record of every workspace (found from the running markers), each
    /// checked for liveness first; plus warnings.
    pub fn running(&self) -> Result<(Vec<JobRecord>, Vec<String>), StoreError> {
        let mut records = Vec::new();
        let mut warnings = BTreeSet::new();
        for dir in self.workspace_dirs()? {
            let jobs = dir.join("jobs");
            for id in names_in(&jobs.join(RUNNING_DIR)) {
                if !is_valid_job_id(&id) {
                    continue;
                }
                let location = Location {
                    jobs_dir: jobs.clone(),
                    id,
                };
                match self.load_checked(&location) {
                    Ok(record) if !record.is_terminal() => records.push(record),
                    Ok(_) | Err(StoreError::NotFound(_)) => {
                        let _ = fs::remove_file(location.marker());
                    }
                    Err(error) => note(&mut warnings, error),
                }
            }
        }
        Ok((records, warnings.into_iter().collect()))
    }

    /// Removes a job's config directory if it lies inside `<data>/runs` (anything else is
    /// refused and left alone), then its run directory if that is left empty.
    pub fn remove_config_dir(&self, config_dir: &Path) -> Result<(), StoreError> {
        let runs = fs::canonicalize(&self.runs_dir).map_err(io_error("resolve", &self.runs_dir))?;
        let target = match fs::canonicalize(config_dir) {
            Ok(target) => target,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(io_error("resolve", config_dir)(error)),
        };
        if target == runs || !target.starts_with(&runs) {
            return Err(StoreError::Insecure {
                path: config_dir.to_path_buf(),
                reason: format!("a job's config directory must be inside {}", runs.display()),
            });
        }
        fs::remove_dir_all(&target).map_err(io_error("remove", &target))?;
        if let Some(parent) = target.parent() {
            if parent != runs && parent.starts_with(&runs) {
                // Only succeeds when empty; a worker log may still be there.
                let _ = fs::remove_dir(parent);
            }
        }
        Ok(())
    }

    // ---- internals ----

    /// Appends `<created ms> <id>` to a workspace's index (rebuilding a missing index first),
    /// under the index lock, synced.
    fn append_index(&self, jobs_dir: &Path, created_ms: u128, id: &str) -> Result<(), StoreError> {
        let _lock = RecordLock::acquire(&jobs_dir.join(INDEX_LOCK), LOCK_WAIT)?;
        let index = jobs_dir.join(INDEX);
        if index.symlink_metadata().is_err() {
            self.rebuild_index(jobs_dir)?;
        }
        let mut file = OpenOptions::new()
            .append(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(&index)
            .map_err(io_error("open", &index))?;
        let meta = file.metadata().map_err(io_error("inspect", &index))?;
        check_private(&index, &meta, self.uid, false)?;
        file.write_all(format!("{created_ms} {id}\n").as_bytes())
            .and_then(|()| file.sync_data())
            .map_err(io_error("append to", &index))
    }

    /// The text of a workspace's index; a missing index is rebuilt.
    fn index_text(&self, jobs_dir: &Path) -> Result<String, StoreError> {
        let index = jobs_dir.join(INDEX);
        let bytes = match read_private(&index, INDEX_LIMIT, self.uid) {
            Ok(bytes) => bytes,
            Err(ReadError::NotFound) => {
                let _lock = RecordLock::acquire(&jobs_dir.join(INDEX_LOCK), LOCK_WAIT)?;
                if index.symlink_metadata().is_err() {
                    self.rebuild_index(jobs_dir)?;
                }
                match read_private(&index, INDEX_LIMIT, self.uid) {
                    Ok(bytes) => bytes,
                    Err(ReadError::NotFound) => return Ok(String::new()),
                    Err(ReadError::TooLarge) => return Err(index_too_large(&index)),
                    Err(ReadError::Store(error)) => return Err(error),
                }
            }
            Err(ReadError::TooLarge) => return Err(index_too_large(&index)),
            Err(ReadError::Store(error)) => return Err(error),
        };
        Ok(String::from_utf8(bytes)
            .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned()))
    }

    /// Writes a workspace's index from its records (the mtime of each is its creation time).
    /// Called with the index lock held.
    fn rebuild_index(&self, jobs_dir: &Path) -> Result<(), StoreError> {
        let mut entries: Vec<(u128, String)> = Vec::new();
        let listing = match fs::read_dir(jobs_dir) {
            Ok(listing) => listing,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(io_error("list", jobs_dir)(error)),
        };
        for entry in listing.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(RECORD_SUFFIX)) else {
                continue;
            };
            if !is_valid_job_id(id) {
                continue;
            }
            let created = entry
                .metadata()
                .and_then(|meta| meta.modified())
                .ok()
                .and_then(|mtime| mtime.duration_since(UNIX_EPOCH).ok())
                .unwrap_or_default()
                .as_millis();
            entries.push((created, id.to_owned()));
        }
        entries.sort();
        let text: String = entries
            .iter()
            .map(|(created, id)| format!("{created} {id}\n"))
            .collect();
        let index = jobs_dir.join(INDEX);
        write_atomic(jobs_dir, &index, text.as_bytes(), None, false)
            .map_err(io_error("write", &index))
    }

    fn workspace_dirs(&self) -> Result<Vec<PathBuf>, StoreError> {
        let entries = match fs::read_dir(&self.state_dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(io_error("list", &self.state_dir)(error)),
        };
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
            .map(|entry| entry.path())
            .collect();
        dirs.sort();
        Ok(dirs)
    }

    fn locate(&self, workspace: Option<&Path>, id: &str) -> Result<Location, StoreError> {
        validate_id(id)?;
        let candidates = match workspace {
            Some(workspace) => vec![self.state_dir.join(Self::workspace_key(workspace))],
            None => self.workspace_dirs()?,
        };
        for dir in candidates {
            let location = Location {
                jobs_dir: dir.join("jobs"),
                id: id.to_owned(),
            };
            if location.record().symlink_metadata().is_ok() {
                return Ok(location);
            }
        }
        Err(StoreError::NotFound(id.to_owned()))
    }

    fn prepare_workspace(&self, workspace: &Path, id: &str) -> Result<Location, StoreError> {
        let dir = self.state_dir.join(Self::workspace_key(workspace));
        self.private_dir(&dir)?;
        let jobs_dir = dir.join("jobs");
        self.private_dir(&jobs_dir)?;
        self.private_dir(&jobs_dir.join(RUNNING_DIR))?;
        let name_file = dir.join("workspace");
        if name_file.symlink_metadata().is_err() {
            let canonical = fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
            let mut text = canonical.as_os_str().as_bytes().to_vec();
            text.push(b'\n');
            match write_atomic(&dir, &name_file, &text, None, true) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(io_error("write", &name_file)(error)),
            }
        }
        Ok(Location {
            jobs_dir,
            id: id.to_owned(),
        })
    }

    fn private_dir(&self, dir: &Path) -> Result<(), StoreError> {
        match fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(io_error("create", dir)(error)),
        }
        let meta = fs::symlink_metadata(dir).map_err(io_error("inspect", dir))?;
        check_private(dir, &meta, self.uid, true)
    }

    /// Reads a record without its lock. Corruption is confirmed and handled under the lock.
    fn read_unlocked(&self, location: &Location) -> Result<JobRecord, StoreError> {
        match self.parse(location) {
            Ok(record) => Ok(record),
            Err(Parsed::Corrupt(_)) => {
                let _lock = RecordLock::acquire(&location.lock(), LOCK_WAIT)?;
                self.read_locked(location)
            }
            Err(Parsed::Store(error)) => Err(error),
        }
    }

    /// Reads a record while holding its lock, moving a corrupt one aside.
    fn read_locked(&self, location: &Location) -> Result<JobRecord, StoreError> {
        match self.parse(location) {
            Ok(record) => Ok(record),
            Err(Parsed::Store(error)) => Err(error),
            Err(Parsed::Corrupt(reason)) => {
                let path = location.record();
                let now_ms = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_millis();
                let corrupt_dir = location.jobs_dir.join(CORRUPT_DIR);
                self.private_dir(&corrupt_dir)?;
                let moved_to = corrupt_dir.join(format!("{}{CORRUPT_INFIX}{now_ms}", location.id));
                fs::rename(&path, &moved_to).map_err(io_error("move aside", &path))?;
                let _ = fs::remove_file(location.marker());
                sync_dir(&location.jobs_dir);
                tracing::warn!(path = %path.display(), moved_to = %moved_to.display(), %reason, "corrupt job record moved aside");
                Err(StoreError::Corrupt {
                    id: location.id.clone(),
                    path,
                    moved_to,
                    reason,
                })
            }
        }
    }

    fn parse(&self, location: &Location) -> Result<JobRecord, Parsed> {
        let path = location.record();
        let bytes = match read_private(&path, RECORD_LIMIT, self.uid) {
            Ok(bytes) => bytes,
            Err(ReadError::NotFound) => {
                return Err(Parsed::Store(StoreError::NotFound(location.id.clone())))
            }
            Err(ReadError::TooLarge) => {
                return Err(Parsed::Corrupt(format!("larger than {RECORD_LIMIT} bytes")))
            }
            Err(ReadError::Store(error)) => return Err(Parsed::Store(error)),
        };
        let value: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|error| Parsed::Corrupt(format!("not JSON: {error}")))?;
        let schema = value.get("schema").and_then(serde_json::Value::as_u64);
        if schema != Some(u64::from(SCHEMA)) {
            return Err(Parsed::Corrupt(format!(
                "schema {} instead of {SCHEMA}",
                schema.map_or_else(|| "missing".to_owned(), |s| s.to_string())
            )));
        }
        let record: JobRecord = serde_json::from_value(value).map_err(|error| {
            Parsed::Corrupt(format!(
                "not a job record: {}",
                bound_text(&error.to_string(), 200)
            ))
        })?;
        if record.id != location.id {
            return Err(Parsed::Corrupt(format!(
                "it names job {:?}",
                bound_text(&record.id, 64)
            )));
        }
        Ok(record)
    }

    /// Reads a record; a running one whose worker is gone is finished as died.
    fn load_checked(&self, location: &Location) -> Result<JobRecord, StoreError> {
        let record = self.read_unlocked(location)?;
        if record.is_terminal() || self.death_reason(&record).is_none() {
            return Ok(record);
        }
        let mut died = false;
        let record = {
            let _lock = RecordLock::acquire(&location.lock(), LOCK_WAIT)?;
            let current = self.read_locked(location)?;
            match (current.is_terminal(), self.death_reason(&current)) {
                (false, Some(reason)) => {
                    died = true;
                    self.finish_locked(location, current, JobStatus::Died, |record| {
                        record.failure = Some(JobFailure::new(FailureKind::Died, reason));
                    })?
                }
                _ => current,
            }
        };
        if died {
            self.after_finish(&record);
            if let Some(engine) = &record.engine_process {
                if liveness::terminate(&[engine], self.engine_kill_grace) {
                    tracing::warn!(job = %record.id, pid = engine.pid, "the engine process outlived its dead worker; its process group was ended");
                }
                if liveness::end_orphaned_group(engine, self.engine_kill_grace) {
                    tracing::warn!(job = %record.id, pid = engine.pid, "processes the engine started outlived it and its dead worker; their process group was ended");
                }
            }
        }
        Ok(record)
    }

    /// Why a running record is dead, if it is.
    fn death_reason(&self, record: &JobRecord) -> Option<String> {
        match &record.worker {
            Some(worker) if worker.is_alive() => None,
            Some(worker) => Some(format!(
                "the worker process (pid {}) ended without finishing the job",
                worker.pid
            )),
            None => {
                let age = age_of(&record.created_at, SystemTime::now())
                    .or_else(|| age_of(&record.updated_at, SystemTime::now()));
                match age {
                    Some(age) if age <= self.pidless_grace => None,
                    _ => Some(format!(
                        "no worker process started the job within {} ms",
                        self.pidless_grace.as_millis()
                    )),
                }
            }
        }
    }

    fn finish_at(
        &self,
        location: &Location,
        status: JobStatus,
        apply: impl FnOnce(&mut JobRecord),
    ) -> Result<(JobRecord, bool), StoreError> {
        if !status.is_terminal() {
            return Err(StoreError::Refused {
                id: location.id.clone(),
                message: "a job can only be finished with a terminal state".to_owned(),
            });
        }
        let record = {
            let _lock = RecordLock::acquire(&location.lock(), LOCK_WAIT)?;
            let current = self.read_locked(location)?;
            if current.is_terminal() {
                return Ok((current, false));
            }
            self.finish_locked(location, current, status, apply)?
        };
        self.after_finish(&record);
        Ok((record, true))
    }

    fn finish_locked(
        &self,
        location: &Location,
        current: JobRecord,
        status: JobStatus,
        apply: impl FnOnce(&mut JobRecord),
    ) -> Result<JobRecord, StoreError> {
        let mut next = current.clone();
        apply(&mut next);
        next.id = current.id;
        next.workspace = current.workspace;
        next.created_at = current.created_at;
        next.acceptance = current.acceptance;
        next.status = status;
        let now = now_rfc3339();
        next.finished_at = Some(now.clone());
        next.updated_at = now;
        match status {
            JobStatus::Done => next.failure = None,
            _ if next.failure.is_some() => {}
            JobStatus::Cancelled => {
                next.failure = Some(JobFailure::new(
                    FailureKind::Cancelled,
                    "cancelled by the user",
                ));
            }
            JobStatus::Died => {
                next.failure = Some(JobFailure::new(
                    FailureKind::Died,
                    "the worker process is gone",
                ));
            }
            _ => next.failure = Some(JobFailure::new(FailureKind::Error, "the job failed")),
        }
        next.enforce_bounds();
        self.write_record(location, &next, false)?;
        let _ = fs::remove_file(location.marker());
        Ok(next)
    }

    fn after_finish(&self, record: &JobRecord) {
        if let Some(config_dir) = &record.config_dir {
            if let Err(error) = self.remove_config_dir(config_dir) {
                tracing::warn!(job = %record.id, %error, "the job's config directory was not removed");
            }
        }
    }

    fn write_record(
        &self,
        location: &Location,
        record: &JobRecord,
        exclusive: bool,
    ) -> Result<(), StoreError> {
        let mut bytes = serde_json::to_vec_pretty(record).map_err(|error| StoreError::Io {
            action: "serialise",
            path: location.record(),
            source: std::io::Error::other(error),
        })?;
        bytes.push(b'\n');
        // The mtime carries the creation time, so listings order without parsing.
        let mtime = parse_rfc3339(&record.created_at);
        match write_atomic(
            &location.jobs_dir,
            &location.record(),
            &bytes,
            mtime,
            exclusive,
        ) {
            Ok(()) => Ok(()),
            Err(error) if exclusive && error.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(StoreError::Exists(record.id.clone()))
            }
            Err(error) => Err(io_error("write", &location.record())(error)),
        }
    }
}

/// Walks one index from its end (newest entries first), skipping malformed lines.
struct IndexCursor {
    text: String,
    end: usize,
    dir: usize,
    head: Option<(u128, String)>,
}

impl IndexCursor {
    fn new(text: String, dir: usize) -> Self {
        let mut cursor = IndexCursor {
            end: text.len(),
            text,
            dir,
            head: None,
        };
        cursor.head = cursor.previous();
        cursor
    }

    /// Returns the current head and moves to the entry before it.
    fn advance(&mut self) -> Option<(u128, String)> {
        let head = self.head.take();
        self.head = self.previous();
        head
    }

    fn previous(&mut self) -> Option<(u128, String)> {
        while self.end > 0 {
            let before = &self.text[..self.end];
            let line_end = before.strip_suffix('\n').map_or(before.len(), str::len);
            let start = before[..line_end].rfind('\n').map_or(0, |at| at + 1);
            let line = &before[start..line_end];
            self.end = start;
            if let Some((created, id)) = line.split_once(' ') {
                if let (Ok(created), true) = (created.parse::<u128>(), is_valid_job_id(id)) {
                    return Some((created, id.to_owned()));
                }
            }
        }
        None
    }
}

enum Parsed {
    Corrupt(String),
    Store(StoreError),
}

enum ReadError {
    NotFound,
    TooLarge,
    Store(StoreError),
}

/// The names in a directory (none if it is absent or unreadable).
fn names_in(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn index_too_large(index: &Path) -> StoreError {
    StoreError::Io {
        action: "read",
        path: index.to_path_buf(),
        source: std::io::Error::other(format!("the index is larger than {INDEX_LIMIT} bytes")),
    }
}

fn note(warnings: &mut BTreeSet<String>, error: StoreError) {
    match error {
        StoreError::NotFound(_) => {}
        StoreError::Corrupt {
            moved_to, reason, ..
        } => {
            warnings.insert(format!(
                "a corrupt job record was moved aside: {} ({reason})",
                moved_to.display()
            ));
        }
        other => {
            warnings.insert(other.to_string());
        }
    }
}

fn validate_id(id: &str) -> Result<(), StoreError> {
    if is_valid_job_id(id) {
        Ok(())
    } else {
        Err(StoreError::InvalidId(bound_text(id, 64)))
    }
}

fn check_private(
    path: &Path,
    meta: &fs::Metadata,
    uid: u32,
    directory: bool,
) -> Result<(), StoreError> {
    let insecure = |reason: String| StoreError::Insecure {
        path: path.to_path_buf(),
        reason,
    };
    if directory && !meta.is_dir() {
        return Err(insecure("not a directory".to_owned()));
    }
    if !directory && !meta.is_file() {
        return Err(insecure("not a regular file".to_owned()));
    }
    if meta.uid() != uid {
        return Err(insecure(format!("owned by uid {}, not {uid}", meta.uid())));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(insecure(format!(
            "mode {mode:03o} gives access to group or others (`chmod {}` it, or point \
             DEVIN_COMPANION_DATA at a private directory)",
            if directory { "700" } else { "600" }
        )));
    }
    Ok(())
}

/// Reads a private file (never through a symlink; owned by `uid`, no group/other bits), at
/// most `limit` bytes.
fn read_private(path: &Path, limit: u64, uid: u32) -> Result<Vec<u8>, ReadError> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(ReadError::NotFound)
        }
        Err(error) if error.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(ReadError::Store(StoreError::Insecure {
                path: path.to_path_buf(),
                reason: "a symbolic link".to_owned(),
            }))
        }
        Err(error) => return Err(ReadError::Store(io_error("open", path)(error))),
    };
    let meta = file
        .metadata()
        .map_err(|error| ReadError::Store(io_error("inspect", path)(error)))?;
    check_private(path, &meta, uid, false).map_err(ReadError::Store)?;
    if meta.len() > limit {
        return Err(ReadError::TooLarge);
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| ReadError::Store(io_error("read", path)(error)))?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge);
    }
    Ok(bytes)
}

/// A name for a temporary file that no other writer uses.
fn temporary_name(target: &Path) -> String {
    let mut nonce = [0u8; 8];
    if getrandom::fill(&mut nonce).is_err() {
        let fallback = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
            .to_le_bytes();
        nonce.copy_from_slice(&fallback[..8]);
    }
    format!(
        ".{}.tmp-{}-{}",
        target
            .file_name()
            .map(OsStr::to_string_lossy)
            .unwrap_or_default(),
        std::process::id(),
        hex::encode(nonce)
    )
}

/// Writes `bytes` to `target` atomically: a new 0600 temporary file in `dir` (exclusive, no
/// symlink followed), fsync, then rename over the target (or, when `exclusive`, a hard link
/// that fails if the target exists), then fsync of the directory.
pub(crate) fn write_atomic(
    dir: &Path,
    target: &Path,
    bytes: &[u8],
    mtime: Option<SystemTime>,
    exclusive: bool,
) -> std::io::Result<()> {
    let temporary = dir.join(temporary_name(target));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(&temporary)?;
        file.write_all(bytes)?;
        if let Some(mtime) = mtime {
            file.set_modified(mtime)?;
        }
        file.sync_all()?;
        drop(file);
        if exclusive {
            fs::hard_link(&temporary, target)?;
            fs::remove_file(&temporary)
        } else {
            fs::rename(&temporary, target)
        }
    })();
    if written.is_err() || exclusive {
        let _ = fs::remove_file(&temporary);
    }
    written?;
    sync_dir(dir);
    Ok(())
}

fn sync_dir(dir: &Path) {
    if let Err(error) = File::open(dir).and_then(|dir| dir.sync_all()) {
        tracing::warn!(dir = %dir.display(), %error, "cannot sync a job directory");
    }
}
