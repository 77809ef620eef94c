//! Precompiled components on disk, so a restart does not pay for compilation again.
//!
//! An entry is keyed by the component's sha256 and a hash of the engine's compatibility
//! settings (wasmtime version, target, tunables). Deserialising precompiled code is only sound
//! for bytes this host produced, so the cache directory must be private to the current user,
//! and each artifact carries a sha256 sidecar that is checked before the bytes are used
//! (a truncated or corrupted file is recompiled, never executed).

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use wasmtime::component::Component;
use wasmtime::Engine;

use super::{sha256_hex, EngineError, TransformKind};

/// The on-disk compile cache; `None` directory means "always compile".
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: Option<PathBuf>,
}

impl CompileCache {
    /// A cache that never stores anything.
    pub fn disabled() -> Self {
        Self { dir: None }
    }

    /// Opens (creating with mode 0700) a private cache directory.
    pub fn open(dir: &Path) -> Result<Self, EngineError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|error| {
                EngineError::Cache(format!("cannot create {}: {error}", dir.display()))
            })?;
        let meta = std::fs::metadata(dir).map_err(|error| {
            EngineError::Cache(format!("cannot stat {}: {error}", dir.display()))
        })?;
        if meta.uid() != nix::unistd::geteuid().as_raw() {
            return Err(EngineError::Cache(format!(
                "{} is not owned by this user; refusing to load precompiled code from it",
                dir.display()
            )));
        }
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(EngineError::Cache(format!(
                "{} is accessible to other users (mode {:o}); make it 0700",
                dir.display(),
                meta.permissions().mode() & 0o777
            )));
        }
        Ok(Self {
            dir: Some(dir.to_owned()),
        })
    }

    /// The default location: `$XDG_CACHE_HOME/devin-bridge`, else `~/.cache/devin-bridge`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .map(|home| PathBuf::from(home).join(".cache"))
            })?;
        Some(base.join("devin-bridge"))
    }

    /// Returns the compiled component, from disk when a valid entry exists.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        transform: TransformKind,
        sha256: &str,
        bytes: &[u8],
    ) -> Result<Component, EngineError> {
        let Some(dir) = &self.dir else {
            return compile(engine, transform, bytes);
        };
        let artifact = dir.join(format!("{sha256}-{:016x}.cwasm", compatibility_key(engine)));
        if let Some(component) = load_verified(engine, &artifact) {
            tracing::debug!(%transform, path = %artifact.display(), "compiled component loaded from cache");
            return Ok(component);
        }
        let started = std::time::Instant::now();
        let compiled =
            engine
                .precompile_component(bytes)
                .map_err(|error| EngineError::Compile {
                    transform,
                    message: format!("{error:#}"),
                })?;
        tracing::info!(%transform, elapsed_ms = started.elapsed().as_millis() as u64, "component compiled");
        if let Err(error) = store(&artifact, &compiled) {
            tracing::warn!(%transform, %error, "cannot write the compile cache; continuing without it");
        }
        // SAFETY: `compiled` was produced just now by `precompile_component` of this engine.
        unsafe { Component::deserialize(engine, &compiled) }.map_err(|error| EngineError::Compile {
            transform,
            message: format!("{error:#}"),
        })
    }
}

fn compile(
    engine: &Engine,
    transform: TransformKind,
    bytes: &[u8],
) -> Result<Component, EngineError> {
    Component::new(engine, bytes).map_err(|error| EngineError::Compile {
        transform,
        message: format!("{error:#}"),
    })
}

/// A stable key for "this engine can load that artifact".
fn compatibility_key(engine: &Engine) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.finish()
}

fn sidecar(artifact: &Path) -> PathBuf {
    artifact.with_extension("cwasm.sha256")
}

/// Loads an artifact only when its sidecar digest matches; anything odd means "recompile".
fn load_verified(engine: &Engine, artifact: &Path) -> Option<wasmtime::component::Component> {
    let expected = std::fs::read_to_string(sidecar(artifact)).ok()?;
    let bytes = std::fs::read(artifact).ok()?;
    if sha256_hex(&bytes) != expected.trim() {
        tracing::warn!(path = %artifact.display(), "compile cache entry does not match its digest; recompiling");
        return None;
    }
    // SAFETY: the bytes were written by `store` below from `Engine::precompile_component` of an
    // engine with the same compatibility key, in a directory only this user can write
    // (checked in `open`), and their sha256 matches the digest recorded next to them.
    // wasmtime also re-checks the engine compatibility header and refuses a mismatch.
    match unsafe { Component::deserialize(engine, &bytes) } {
        Ok(component) => Some(component),
        Err(error) => {
            tracing::warn!(path = %artifact.display(), error = %format!("{error:#}"), "cached component rejected; recompiling");
            None
        }
    }
}

/// Writes artifact then digest, each atomically (temporary file + rename), mode 0600.
fn store(artifact: &Path, compiled: &[u8]) -> std::io::Result<()> {
    write_atomically(artifact, compiled)?;
    write_atomically(&sidecar(artifact), sha256_hex(compiled).as_bytes())
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}
