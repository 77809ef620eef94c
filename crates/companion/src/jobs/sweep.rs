//! Removes run directories (`<data>/runs/<job-id>`) that outlived their job: older than a
//! threshold and whose job is terminal or unknown. Runs at most once an hour, remembered by
//! the stamp file `<data>/runs/.last-sweep`.

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::record::is_valid_job_id;
use super::store::{write_atomic, JobStore, StoreError};

/// The least time between two sweeps.
pub(crate) const SWEEP_INTERVAL: Duration = Duration::from_secs(3600);
/// The default age under which a run directory is never removed.
pub(crate) const ORPHAN_AGE: Duration = Duration::from_secs(3600);

const STAMP: &str = ".last-sweep";

/// What a sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct SweepOutcome {
    /// False when the last sweep was less than [`SWEEP_INTERVAL`] ago.
    pub ran: bool,
    pub removed: Vec<PathBuf>,
}

/// Sweeps unless a sweep ran within the last hour.
pub(crate) fn sweep_orphan_runs(
    store: &JobStore,
    older_than: Duration,
) -> Result<SweepOutcome, StoreError> {
    let stamp = store.runs_dir().join(STAMP);
    let recent = fs::symlink_metadata(&stamp)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|modified| SystemTime::now().duration_since(modified).ok())
        .is_some_and(|age| age < SWEEP_INTERVAL);
    if recent {
        return Ok(SweepOutcome::default());
    }
    // Stamp first, so two helpers starting together do not both sweep.
    write_atomic(store.runs_dir(), &stamp, b"", None, false).map_err(|source| StoreError::Io {
        action: "write",
        path: stamp.clone(),
        source,
    })?;
    sweep_now(store, older_than)
}

/// Sweeps now, whatever the stamp says.
pub(crate) fn sweep_now(
    store: &JobStore,
    older_than: Duration,
) -> Result<SweepOutcome, StoreError> {
    let runs = store.runs_dir();
    let entries = fs::read_dir(runs).map_err(|source| StoreError::Io {
        action: "list",
        path: runs.to_path_buf(),
        source,
    })?;
    let now = SystemTime::now();
    let mut outcome = SweepOutcome {
        ran: true,
        removed: Vec::new(),
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name.to_str() else { continue };
        if !is_valid_job_id(id) {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_dir() {
            continue;
        }
        let old_enough = meta
            .modified()
            .ok()
            .and_then(|modified| now.duration_since(modified).ok())
            .is_some_and(|age| age >= older_than);
        if !old_enough {
            continue;
        }
        let orphan = match store.get(None, id) {
            Ok(record) => record.is_terminal(),
            Err(StoreError::NotFound(_)) => true,
            Err(error) => {
                tracing::warn!(%id, %error, "run directory kept: its job could not be read");
                false
            }
        };
        if orphan {
            let path = entry.path();
            match fs::remove_dir_all(&path) {
                Ok(()) => outcome.removed.push(path),
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "cannot remove a run directory");
                }
            }
        }
    }
    Ok(outcome)
}
