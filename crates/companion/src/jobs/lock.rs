//! The per-record lock: an exclusive `flock` on `<id>.lock` next to the record. The kernel
//! releases it when the holder exits in any way (even `kill -9`), so a lock is never stale.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

/// How long a writer waits for a record's lock before giving up.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Errors taking a lock.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("job record {path} is locked by another process (waited {waited:?})")]
    Timeout { path: PathBuf, waited: Duration },
    #[error("cannot open the lock file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A held lock; dropping it (closing the file) releases it.
#[derive(Debug)]
pub(crate) struct RecordLock {
    _file: File,
}

impl RecordLock {
    /// Takes the exclusive lock on `path` (created 0600, never through a symlink), waiting at
    /// most `wait`.
    pub(crate) fn acquire(path: &Path, wait: Duration) -> Result<Self, LockError> {
        let io = |source| LockError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(path)
            .map_err(io)?;
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(RecordLock { _file: file }),
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(error)) => return Err(io(error)),
            }
            let waited = started.elapsed();
            if waited >= wait {
                return Err(LockError::Timeout {
                    path: path.to_path_buf(),
                    waited,
                });
            }
            thread::sleep(pause.min(wait - waited));
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_times_out_and_succeeds_after_release() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job-0000000000000000.lock");
        let first = RecordLock::acquire(&path, LOCK_WAIT).unwrap();
        let started = Instant::now();
        let second = RecordLock::acquire(&path, Duration::from_millis(100));
        assert!(
            matches!(second, Err(LockError::Timeout { .. })),
            "{second:?}"
        );
        assert!(started.elapsed() >= Duration::from_millis(100));
        drop(first);
        RecordLock::acquire(&path, Duration::from_millis(100)).unwrap();
    }

    #[test]
    fn a_symlinked_lock_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"").unwrap();
        let path = dir.path().join("job-0000000000000000.lock");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(matches!(
            RecordLock::acquire(&path, Duration::from_millis(10)),
            Err(LockError::Io { .. })
        ));
    }
}
