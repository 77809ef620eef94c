//! `devin-remote` binaries: which build, download, verify, cache.
//!
//! - The build is the session's `spec.remote_binary_sha`, else the configured fallback, else
//!   `latest_<platform>` from the static base URL (remembered for a minute).
//! - `devin-remote_<commit>_<platform>` and its `.sha256` are downloaded without credentials;
//!   the bytes are hashed while they stream to a private temporary file, and only a file whose
//!   digest equals the published one is renamed into the cache. A mismatch deletes the file and
//!   fails the session (its claim is released by the caller): nothing unverified ever runs.
//! - The cache is content addressed: `blobs/<sha256>` (0500) plus `commits/<commit>_<platform>`
//!   naming the digest. Two sessions needing the same build download it once: one lock per
//!   build in this process, and an advisory file lock across processes sharing the directory.
//! - A cached blob is re-hashed once per process before its first use, so a file changed on disk
//!   after it was verified is noticed (and downloaded again) rather than run.
//! - A build that failed verification is refused without a new download for ten minutes.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use sha2::{Digest, Sha256};

use super::fleet::{BaseUrl, Commit, FleetError, PublicFetcher};

/// Largest binary accepted.
const MAX_BINARY_BYTES: u64 = 1 << 30;
/// How long a `latest_*` answer is reused.
const LATEST_TTL: Duration = Duration::from_secs(60);
/// How long a build whose published digest did not match is refused without downloading it
/// again (its session keeps being requeued; the download would fail the same way).
const MISMATCH_TTL: Duration = Duration::from_secs(600);

/// Why no verified binary is available.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BinaryError {
    #[error("cannot fetch {what}: {source}")]
    Fetch {
        what: String,
        #[source]
        source: FleetError,
    },
    #[error("{what} answered {status}")]
    Status { what: String, status: u16 },
    #[error("the published latest build for {platform} is not a commit: {text:?}")]
    BadLatest { platform: String, text: String },
    #[error("the published checksum of {file} is not a sha256: {text:?}")]
    BadChecksum { file: String, text: String },
    #[error("{file} has sha256 {actual}, but {expected} is published: refusing to run it")]
    DigestMismatch {
        file: String,
        expected: String,
        actual: String,
    },
    #[error("{file} is larger than {MAX_BINARY_BYTES} bytes")]
    TooLarge { file: String },
    #[error("binary cache {path}: {source}")]
    Cache {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn cache_error(path: &Path) -> impl FnOnce(std::io::Error) -> BinaryError + '_ {
    move |source| BinaryError::Cache {
        path: path.to_owned(),
        source,
    }
}

/// The binary cache of one worker.
pub(crate) struct BinaryCache {
    dir: PathBuf,
    base: BaseUrl,
    /// `linux_x64`, `macos_arm64`, ...
    suffix: String,
    fetcher: PublicFetcher,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    verified: Mutex<HashSet<String>>,
    latest: Mutex<Option<(Commit, Instant)>>,
    /// Builds that failed verification, with when and how.
    mismatched: Mutex<HashMap<String, (Instant, String, String)>>,
}

impl BinaryCache {
    /// Opens (creating, 0700) the cache directory.
    pub(crate) fn open(
        dir: PathBuf,
        base: BaseUrl,
        suffix: String,
        fetcher: PublicFetcher,
    ) -> Result<Self, BinaryError> {
        for sub in ["", "blobs", "commits", "locks", "tmp"] {
            let path = dir.join(sub);
            std::fs::create_dir_all(&path).map_err(cache_error(&path))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))
                .map_err(cache_error(&path))?;
        }
        Ok(Self {
            dir,
            base,
            suffix,
            fetcher,
            locks: Mutex::new(HashMap::new()),
            verified: Mutex::new(HashSet::new()),
            latest: Mutex::new(None),
            mismatched: Mutex::new(HashMap::new()),
        })
    }

    /// The build a session runs: its own pin, else `fallback`, else the latest published.
    pub(crate) async fn choose(
        &self,
        pinned: Option<&Commit>,
        fallback: Option<&Commit>,
    ) -> Result<Commit, BinaryError> {
        if let Some(commit) = pinned.or(fallback) {
            return Ok(commit.clone());
        }
        if let Ok(latest) = self.latest.lock() {
            if let Some((commit, at)) = latest.as_ref() {
                if at.elapsed() < LATEST_TTL {
                    return Ok(commit.clone());
                }
            }
        }
        let file = format!("latest_{}", self.suffix);
        let url = self.base.join(&format!("/{file}"));
        let text = self
            .fetcher
            .get_text(&url, 256)
            .await
            .map_err(|source| BinaryError::Fetch {
                what: file.clone(),
                source,
            })?;
        let commit: Commit = text.trim().parse().map_err(|_| BinaryError::BadLatest {
            platform: self.suffix.clone(),
            text: text.chars().take(80).collect(),
        })?;
        if let Ok(mut latest) = self.latest.lock() {
            *latest = Some((commit.clone(), Instant::now()));
        }
        Ok(commit)
    }

    /// A verified executable for `commit`, downloading it if needed.
    pub(crate) async fn ensure(&self, commit: &Commit) -> Result<PathBuf, BinaryError> {
        let name = format!("devin-remote_{commit}_{}", self.suffix);
        let lock = {
            let mut locks = self
                .locks
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            locks.entry(name.clone()).or_default().clone()
        };
        let _guard = lock.lock().await;
        if let Some(path) = self.cached(&name).await? {
            return Ok(path);
        }
        if let Some((expected, actual)) = self.recent_mismatch(&name) {
            return Err(BinaryError::DigestMismatch {
                file: name,
                expected,
                actual,
            });
        }
        // Another process sharing this directory may be downloading the same build.
        let lock_path = self.dir.join("locks").join(format!("{name}.lock"));
        let file_lock = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .open(&lock_path)?;
            file.lock()?;
            Ok(file)
        })
        .await
        .map_err(|error| BinaryError::Cache {
            path: self.dir.clone(),
            source: std::io::Error::other(error),
        })?
        .map_err(cache_error(&self.dir))?;
        let result = match self.cached(&name).await? {
            Some(path) => Ok(path),
            None => self.download(&name).await,
        };
        if let Err(BinaryError::DigestMismatch {
            expected, actual, ..
        }) = &result
        {
            if let Ok(mut mismatched) = self.mismatched.lock() {
                mismatched.insert(
                    name.clone(),
                    (Instant::now(), expected.clone(), actual.clone()),
                );
            }
        }
        drop(file_lock);
        result
    }

    /// The digests of a recent failed verification of `name`, if any.
    fn recent_mismatch(&self, name: &str) -> Option<(String, String)> {
        let mismatched = self.mismatched.lock().ok()?;
        let (at, expected, actual) = mismatched.get(name)?;
        (at.elapsed() < MISMATCH_TTL).then(|| (expected.clone(), actual.clone()))
    }

    /// The cached blob for `name`, re-verified once per process.
    async fn cached(&self, name: &str) -> Result<Option<PathBuf>, BinaryError> {
        let index = self.dir.join("commits").join(name);
        let digest = match std::fs::read_to_string(&index) {
            Ok(text) => text.trim().to_owned(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(cache_error(&index)(error)),
        };
        if !is_sha256_hex(&digest) {
            let _ = std::fs::remove_file(&index);
            return Ok(None);
        }
        let blob = self.dir.join("blobs").join(&digest);
        if self
            .verified
            .lock()
            .map(|set| set.contains(&digest))
            .unwrap_or(false)
            && blob.is_file()
        {
            return Ok(Some(blob));
        }
        let check = blob.clone();
        let actual = tokio::task::spawn_blocking(move || hash_file(&check))
            .await
            .ok()
            .and_then(Result::ok);
        if actual.as_deref() == Some(digest.as_str()) {
            if let Ok(mut set) = self.verified.lock() {
                set.insert(digest);
            }
            Ok(Some(blob))
        } else {
            tracing::warn!(file = %name, "cached binary no longer matches its digest; downloading it again");
            let _ = std::fs::remove_file(&index);
            let _ = std::fs::remove_file(&blob);
            Ok(None)
        }
    }

    async fn download(&self, name: &str) -> Result<PathBuf, BinaryError> {
        let started = Instant::now();
        let checksum_file = format!("{name}.sha256");
        let checksum_text = self
            .fetcher
            .get_text(&self.base.join(&format!("/{checksum_file}")), 1024)
            .await
            .map_err(|source| BinaryError::Fetch {
                what: checksum_file.clone(),
                source,
            })?;
        let expected = checksum_text
            .split_whitespace()
            .next()
            .map(str::to_ascii_lowercase)
            .filter(|hex| is_sha256_hex(hex))
            .ok_or_else(|| BinaryError::BadChecksum {
                file: checksum_file.clone(),
                text: checksum_text.chars().take(80).collect(),
            })?;
        let (status, mut body) = self
            .fetcher
            .get(&self.base.join(&format!("/{name}")))
            .await
            .map_err(|source| BinaryError::Fetch {
                what: name.to_owned(),
                source,
            })?;
        if !status.is_success() {
            return Err(BinaryError::Status {
                what: name.to_owned(),
                status: status.as_u16(),
            });
        }
        let temp = tempfile::Builder::new()
            .prefix(".download-")
            .tempfile_in(self.dir.join("tmp"))
            .map_err(cache_error(&self.dir))?;
        let mut file = temp
            .as_file()
            .try_clone()
            .map_err(cache_error(temp.path()))?;
        let mut hasher = Sha256::new();
        let mut size: u64 = 0;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|error| BinaryError::Fetch {
                what: name.to_owned(),
                source: FleetError::Network(format!("the download broke off: {error}")),
            })?;
            if let Ok(data) = frame.into_data() {
                size += data.len() as u64;
                if size > MAX_BINARY_BYTES {
                    return Err(BinaryError::TooLarge {
                        file: name.to_owned(),
                    });
                }
                hasher.update(&data);
                file.write_all(&data).map_err(cache_error(temp.path()))?;
            }
        }
        file.sync_all().map_err(cache_error(temp.path()))?;
        let actual = hex::encode(hasher.finalize());
        if actual != expected {
            // `temp` is deleted when dropped.
            return Err(BinaryError::DigestMismatch {
                file: name.to_owned(),
                expected,
                actual,
            });
        }
        let blob = self.dir.join("blobs").join(&actual);
        std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o500))
            .map_err(cache_error(temp.path()))?;
        temp.persist(&blob)
            .map_err(|error| cache_error(&blob)(error.error))?;
        write_atomically(&self.dir.join("commits").join(name), actual.as_bytes())?;
        sync_dir(&self.dir.join("blobs"));
        if let Ok(mut set) = self.verified.lock() {
            set.insert(actual.clone());
        }
        tracing::info!(file = %name, bytes = size, sha256 = %actual, elapsed_ms = started.elapsed().as_millis() as u64, "devin-remote downloaded and verified");
        Ok(blob)
    }
}

fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), BinaryError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::Builder::new()
        .prefix(".index-")
        .tempfile_in(dir)
        .map_err(cache_error(dir))?;
    temp.write_all(bytes).map_err(cache_error(path))?;
    temp.as_file().sync_all().map_err(cache_error(path))?;
    temp.persist(path)
        .map_err(|error| cache_error(path)(error.error))?;
    sync_dir(dir);
    Ok(())
}

fn sync_dir(dir: &Path) {
    if let Ok(handle) = std::fs::File::open(dir) {
        let _ = handle.sync_all();
    }
}

/// The binary suffix of this machine (`linux_x64`, `linux_arm64`, `macos_arm64`,
/// `windows_x64.exe`), or `None` when no build is published for it.
pub(crate) fn machine_suffix() -> Option<&'static str> {
    match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => Some("linux_x64"),
        ("linux", "aarch64") => Some("linux_arm64"),
        ("macos", "aarch64") => Some("macos_arm64"),
        ("windows", "x86_64") => Some("windows_x64.exe"),
        _ => None,
    }
}
