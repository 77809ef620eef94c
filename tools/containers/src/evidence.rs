//! Token-free evidence of a container run, exported to `.sandbox/evidence/`.
//!
//! Each source is checked before it is copied: a regular file (not a symlink), one link (a
//! hard link could make a file of someone else's look like ours), owned by an expected uid,
//! not readable by group or others, and holding none of the run's secrets. The copy is
//! written 0600 beside its final name and renamed into place, so a reader never sees half a
//! file. The file opened is checked to be the file inspected (same device and inode).

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Files larger than this are not evidence of a short run: refuse rather than copy them.
const MAX_BYTES: u64 = 64 << 20;

/// The evidence directory.
pub(crate) struct Evidence {
    dir: PathBuf,
}

impl Evidence {
    /// `.sandbox/evidence/` of this checkout (made 0700; a symlink there is refused).
    pub(crate) fn open() -> Result<Self> {
        Self::at(
            crate::workspace::workspace_root()
                .join(".sandbox")
                .join("evidence"),
        )
    }

    pub(crate) fn at(dir: PathBuf) -> Result<Self> {
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if !meta.is_dir() => bail!("{} is not a directory", dir.display()),
            Ok(_) => {}
            Err(_) => std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?,
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        Ok(Self { dir })
    }

    /// Copies `source` as `name` after the checks above; `owners` are the uids it may have.
    pub(crate) fn copy(
        &self,
        source: &Path,
        name: &str,
        owners: &[u32],
        secrets: &[&str],
    ) -> Result<PathBuf> {
        let inspected = std::fs::symlink_metadata(source)
            .with_context(|| format!("evidence source {}", source.display()))?;
        check_source(source, &inspected, owners)?;
        let mut file = std::fs::File::open(source)?;
        let opened = file.metadata()?;
        if (opened.dev(), opened.ino()) != (inspected.dev(), inspected.ino()) {
            bail!(
                "evidence source {} changed while it was checked",
                source.display()
            );
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(&mut file, MAX_BYTES + 1),
            &mut bytes,
        )?;
        if bytes.len() as u64 > MAX_BYTES {
            bail!(
                "evidence source {} is larger than {MAX_BYTES} bytes",
                source.display()
            );
        }
        self.write(name, &bytes, secrets)
    }

    /// Writes `bytes` (produced by this run) as `name`, refusing any that hold a secret.
    pub(crate) fn write(&self, name: &str, bytes: &[u8], secrets: &[&str]) -> Result<PathBuf> {
        if name.contains('/') || name.starts_with('.') {
            bail!("evidence name {name:?} is not a plain file name");
        }
        let text = String::from_utf8_lossy(bytes);
        if secrets
            .iter()
            .any(|secret| !secret.is_empty() && text.contains(secret))
        {
            bail!("{name} holds a secret of this run: not exported");
        }
        let target = self.dir.join(name);
        let partial = self.dir.join(format!(".{name}.partial"));
        let _ = std::fs::remove_file(&partial);
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)?;
        out.write_all(bytes)?;
        out.sync_all()?;
        std::fs::rename(&partial, &target)?;
        Ok(target)
    }
}

fn check_source(path: &Path, meta: &std::fs::Metadata, owners: &[u32]) -> Result<()> {
    let shown = path.display();
    if meta.file_type().is_symlink() || !meta.is_file() {
        bail!("evidence source {shown} is not a regular file");
    }
    if meta.nlink() != 1 {
        bail!("evidence source {shown} has {} links", meta.nlink());
    }
    if !owners.contains(&meta.uid()) {
        bail!(
            "evidence source {shown} belongs to uid {}, expected one of {owners:?}",
            meta.uid()
        );
    }
    if meta.mode() & 0o077 != 0 {
        bail!(
            "evidence source {shown} is accessible to group or others (mode {:o})",
            meta.mode() & 0o777
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uid(path: &Path) -> u32 {
        std::fs::metadata(path).expect("meta").uid()
    }

    #[test]
    fn a_private_file_of_an_expected_owner_is_copied_0600() {
        let dir = tempfile::tempdir().expect("tempdir");
        let source = dir.path().join("audit.jsonl");
        std::fs::write(&source, "{\"decision\":\"deny\"}\n").expect("write");
        std::fs::set_permissions(&source, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let evidence = Evidence::at(dir.path().join("evidence")).expect("open");
        let copied = evidence
            .copy(&source, "egress.jsonl", &[uid(&source)], &["key-123"])
            .expect("copied");
        assert_eq!(
            std::fs::read(&copied).expect("read"),
            std::fs::read(&source).expect("read")
        );
        assert_eq!(
            std::fs::metadata(&copied).expect("meta").mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn symlinks_hard_links_loose_modes_strangers_and_secrets_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let evidence = Evidence::at(dir.path().join("evidence")).expect("open");
        let source = dir.path().join("audit.jsonl");
        std::fs::write(&source, "x\n").expect("write");
        std::fs::set_permissions(&source, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let me = uid(&source);

        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&source, &link).expect("symlink");
        let error = evidence.copy(&link, "a", &[me], &[]).expect_err("symlink");
        assert!(error.to_string().contains("not a regular file"), "{error}");

        let hard = dir.path().join("hard");
        std::fs::hard_link(&source, &hard).expect("hard link");
        let error = evidence
            .copy(&source, "a", &[me], &[])
            .expect_err("two links");
        assert!(error.to_string().contains("2 links"), "{error}");
        std::fs::remove_file(&hard).expect("rm");

        let error = evidence
            .copy(&source, "a", &[me + 1], &[])
            .expect_err("owner");
        assert!(error.to_string().contains("belongs to uid"), "{error}");

        std::fs::set_permissions(&source, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let error = evidence.copy(&source, "a", &[me], &[]).expect_err("mode");
        assert!(error.to_string().contains("group or others"), "{error}");
        std::fs::set_permissions(&source, std::fs::Permissions::from_mode(0o600)).expect("chmod");

        std::fs::write(&source, "token key-123 here\n").expect("write");
        let error = evidence
            .copy(&source, "a", &[me], &["key-123"])
            .expect_err("secret");
        assert!(error.to_string().contains("holds a secret"), "{error}");
        assert!(!dir.path().join("evidence/a").exists());
    }
}
