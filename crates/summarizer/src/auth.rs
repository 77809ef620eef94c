//! The local API key: from `BRIDGE_API_KEY` or a private file, accepted as `x-api-key` or
//! `Authorization: Bearer`, compared in constant time.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use sha2::{Digest, Sha256};

/// Why the key could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("a live policy needs a local API key: set BRIDGE_API_KEY or [server] api_key_file")]
    Missing,
    #[error("API key file {path}: {message}")]
    File { path: String, message: String },
}

/// The key in `path`, trimmed: the file must belong to this user, be readable by no one else,
/// and hold a key.
pub fn read_key_file(path: &Path) -> Result<String, KeyError> {
    let error = |message: String| KeyError::File {
        path: path.display().to_string(),
        message,
    };
    let meta = std::fs::metadata(path).map_err(|e| error(e.to_string()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(error(format!(
            "is readable by others (mode {:o}); chmod 600 it",
            meta.permissions().mode() & 0o777
        )));
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(error("is not owned by this user".into()));
    }
    let key = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(error("is empty".into()));
    }
    Ok(key.to_owned())
}

/// The key's digest; the key itself is not kept.
#[derive(Clone)]
pub struct ApiKey {
    digest: [u8; 32],
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl ApiKey {
    pub fn new(key: &str) -> Self {
        Self {
            digest: Sha256::digest(key.as_bytes()).into(),
        }
    }

    /// `BRIDGE_API_KEY`, else the file; `None` when neither is set.
    pub fn load(file: Option<&Path>) -> Result<Option<Self>, KeyError> {
        Self::load_from(std::env::var("BRIDGE_API_KEY").ok(), file)
    }

    fn load_from(from_env: Option<String>, file: Option<&Path>) -> Result<Option<Self>, KeyError> {
        if let Some(key) = from_env.filter(|key| !key.trim().is_empty()) {
            return Ok(Some(Self::new(key.trim())));
        }
        let Some(path) = file else { return Ok(None) };
        Ok(Some(Self::new(&read_key_file(path)?)))
    }

    /// Checks the request's `x-api-key` or `Authorization: Bearer` value.
    pub fn accepts(&self, headers: &hyper::HeaderMap) -> bool {
        let presented = headers
            .get("x-api-key")
            .and_then(|value| value.to_str().ok())
            .or_else(|| {
                headers
                    .get(hyper::header::AUTHORIZATION)
                    .and_then(|value| value.to_str().ok())
                    .and_then(|value| {
                        value
                            .strip_prefix("Bearer ")
                            .or_else(|| value.strip_prefix("bearer "))
                    })
            });
        match presented {
            // Comparing digests makes the comparison independent of the key's length; the
            // fold touches every byte whatever the first difference.
            Some(candidate) => {
                let digest: [u8; 32] = Sha256::digest(candidate.trim().as_bytes()).into();
                digest
                    .iter()
                    .zip(self.digest.iter())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_header_styles_are_accepted_and_wrong_keys_refused() {
        let key = ApiKey::new("local-secret");
        let mut headers = hyper::HeaderMap::new();
        assert!(!key.accepts(&headers));
        headers.insert("x-api-key", "local-secret".parse().expect("header"));
        assert!(key.accepts(&headers));
        headers.insert("x-api-key", "local-secreT".parse().expect("header"));
        assert!(!key.accepts(&headers));
        let mut bearer = hyper::HeaderMap::new();
        bearer.insert(
            "authorization",
            "Bearer local-secret".parse().expect("header"),
        );
        assert!(key.accepts(&bearer));
        bearer.insert(
            "authorization",
            "Basic local-secret".parse().expect("header"),
        );
        assert!(!key.accepts(&bearer));
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
    }

    #[test]
    fn a_key_file_open_to_others_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("key");
        std::fs::write(&path, "k\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(matches!(
            ApiKey::load_from(None, Some(&path)),
            Err(KeyError::File { .. })
        ));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert!(ApiKey::load_from(None, Some(&path))
            .expect("loads")
            .is_some());
        assert!(ApiKey::load_from(None, None).expect("no key").is_none());
    }
}
