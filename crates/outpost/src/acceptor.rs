//! The worker's private directories and its persisted acceptor id.
//!
//! The acceptor id is the worker's identity for claims: it survives restarts (so the sessions
//! a crashed worker held are recognised and recovered), and it is generated per data
//! directory, so two machines never share one unless an operator copies the directory.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::fleet::AcceptorId;

const ACCEPTOR_FILE: &str = "acceptor-id";

/// Why a private directory or the id cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AcceptorIdError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a private directory of this user: {why}")]
    NotPrivate { path: PathBuf, why: String },
    #[error("{path} holds no valid acceptor id: {why}")]
    BadId { path: PathBuf, why: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AcceptorIdError + '_ {
    move |source| AcceptorIdError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Creates `path` (and parents) if needed and makes sure it is a real directory of this user
/// with mode 0700 (tightening it if it was looser).
pub(crate) fn private_dir(path: &Path) -> Result<(), AcceptorIdError> {
    std::fs::create_dir_all(path).map_err(io(path))?;
    let metadata = std::fs::symlink_metadata(path).map_err(io(path))?;
    let not_private = |why: &str| AcceptorIdError::NotPrivate {
        path: path.to_owned(),
        why: why.to_owned(),
    };
    if metadata.file_type().is_symlink() || !metadata.is_dir() {
        return Err(not_private("a symlink or not a directory"));
    }
    if metadata.uid() != nix::unistd::geteuid().as_raw() {
        return Err(not_private("it belongs to another user"));
    }
    if metadata.permissions().mode() & 0o777 != 0o700 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(io(path))?;
    }
    Ok(())
}

/// The acceptor id stored in `data_dir`, created on first use.
pub(crate) fn persisted_acceptor(data_dir: &Path) -> Result<AcceptorId, AcceptorIdError> {
    private_dir(data_dir)?;
    let path = data_dir.join(ACCEPTOR_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => text
            .trim()
            .parse::<AcceptorId>()
            .map_err(|error| AcceptorIdError::BadId {
                path: path.clone(),
                why: error.to_string(),
            }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let id = generate().map_err(|error| AcceptorIdError::BadId {
                path: path.clone(),
                why: error.to_string(),
            })?;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .map_err(io(&path))?;
            file.write_all(format!("{id}\n").as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(io(&path))?;
            tracing::info!(acceptor_id = %id, file = %path.display(), "generated this worker's acceptor id");
            Ok(id)
        }
        Err(error) => Err(io(&path)(error)),
    }
}

/// `<hostname>-<12 random hex>`: readable in the web app, unique without coordination.
fn generate() -> Result<AcceptorId, super::fleet::types::InvalidValue> {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .map(|name| {
            name.chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
                .take(48)
                .collect::<String>()
        })
        .filter(|name| !name.is_empty() && !name.starts_with('-'))
        .unwrap_or_else(|| "worker".into());
    let mut bytes = [0u8; 6];
    let suffix = if getrandom::fill(&mut bytes).is_ok() {
        hex::encode(bytes)
    } else {
        format!("{:012x}", std::process::id())
    };
    format!("{host}-{suffix}").parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_acceptor_id_is_generated_once_and_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let first = persisted_acceptor(&data).expect("generated");
        let second = persisted_acceptor(&data).expect("read back");
        assert_eq!(first, second);
        let mode = std::fs::metadata(data.join(ACCEPTOR_FILE))
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let other = persisted_acceptor(&dir.path().join("other")).expect("other machine");
        assert_ne!(first, other, "two data directories share an id");
    }

    #[test]
    fn a_loose_data_directory_is_tightened_and_a_symlink_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        std::fs::create_dir(&data).expect("mkdir");
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        private_dir(&data).expect("tightened");
        let mode = std::fs::metadata(&data).expect("dir").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&data, &link).expect("symlink");
        assert!(matches!(
            private_dir(&link),
            Err(AcceptorIdError::NotPrivate { .. })
        ));
    }

    #[test]
    fn a_tampered_id_file_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        private_dir(dir.path()).expect("private");
        std::fs::write(dir.path().join(ACCEPTOR_FILE), "../../etc\n").expect("write");
        assert!(matches!(
            persisted_acceptor(dir.path()),
            Err(AcceptorIdError::BadId { .. })
        ));
    }
}
