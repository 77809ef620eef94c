//! The static download server of `devin-remote` binaries:
//! `latest_<suffix>` (the SHA and a newline), `devin-remote_<sha>_<suffix>` (the bytes) and
//! `devin-remote_<sha>_<suffix>.sha256` (hex SHA-256 and a newline, a wrong one, or 404).

use std::collections::HashMap;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::Sha256File;

pub(crate) const BASE_PATH: &str = "/static/devin-rs/remote";

#[derive(Default)]
pub(crate) struct StaticFiles {
    /// File name -> contents.
    files: HashMap<String, Bytes>,
    /// Full path -> GETs.
    downloads: HashMap<String, usize>,
}

/// What a static GET answers.
pub(crate) struct StaticAnswer {
    pub status: u16,
    pub body: Bytes,
    /// A binary download: answered after the configured delay.
    pub binary: bool,
}

impl StaticFiles {
    pub(crate) fn publish(
        &mut self,
        sha: &str,
        suffix: &str,
        bytes: Vec<u8>,
        sha256_file: Sha256File,
    ) {
        let name = format!("devin-remote_{sha}_{suffix}");
        let digest = hex::encode(Sha256::digest(&bytes));
        let checksum_name = format!("{name}.sha256");
        match sha256_file {
            Sha256File::Correct => {
                self.files
                    .insert(checksum_name, Bytes::from(format!("{digest}\n")));
            }
            Sha256File::Wrong => {
                let wrong = hex::encode(Sha256::digest(format!("not {digest}")));
                self.files
                    .insert(checksum_name, Bytes::from(format!("{wrong}\n")));
            }
            Sha256File::Missing => {
                self.files.remove(&checksum_name);
            }
        }
        self.files.insert(name, Bytes::from(bytes));
    }

    pub(crate) fn set_latest(&mut self, suffix: &str, sha: &str) {
        self.files
            .insert(format!("latest_{suffix}"), Bytes::from(format!("{sha}\n")));
    }

    pub(crate) fn downloads(&self, path: &str) -> usize {
        let full = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("{BASE_PATH}/{path}")
        };
        self.downloads.get(&full).copied().unwrap_or(0)
    }

    pub(crate) fn download_counts(&self) -> serde_json::Value {
        serde_json::json!(self.downloads)
    }

    /// Answers a GET of `path` (which starts with [`BASE_PATH`]) and counts it.
    pub(crate) fn get(&mut self, path: &str) -> StaticAnswer {
        *self.downloads.entry(path.to_owned()).or_default() += 1;
        let name = path
            .strip_prefix(BASE_PATH)
            .and_then(|rest| rest.strip_prefix('/'))
            .unwrap_or("");
        match self.files.get(name) {
            Some(body) => StaticAnswer {
                status: 200,
                body: body.clone(),
                binary: name.starts_with("devin-remote_") && !name.ends_with(".sha256"),
            },
            None => StaticAnswer {
                status: 404,
                body: Bytes::from_static(b"not found\n"),
                binary: false,
            },
        }
    }
}
