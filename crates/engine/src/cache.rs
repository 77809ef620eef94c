//! Precompiled components on disk, so a restart does not pay for compilation again.
//!
//! Deserialising precompiled code runs whatever native code the file holds, so an entry is
//! only used when it is authenticated as this host's own output:
//!
//! - the cache directory is created 0700 and must belong to the current user;
//! - on first use a random 32-byte key is written to `cache.key` in it (0600, owned by us,
//!   a regular file); a key file that is not exactly that (loose mode, other owner, symlink,
//!   wrong size) is replaced by a fresh key, which invalidates every entry made under the old one;
//! - an entry is `<component sha256>-<engine compatibility hash>.cwasm` plus a `.cwasm.mac`
//!   sidecar holding HMAC-SHA256 under that key of a domain tag, the component sha256, the
//!   engine compatibility hash and the artifact bytes. The MAC binds the artifact to the key
//!   it is stored under: an entry copied to another component's key, a digest sidecar
//!   recomputed by whoever can write the directory, a truncated or corrupted file, all fail
//!   verification, are logged with the component digest, and are recompiled (and replaced),
//!   never deserialised.
//!
//! A build without the compiler (the engine's `compiler` feature off: the fuzz targets) cannot
//! name its own compatibility hash, which is the compiler's. It only loads, and takes any entry
//! of the component's digest that verifies with the hash its name carries and that wasmtime's
//! own check of the artifact's engine settings accepts.
//!
//! This protects against anyone who can write the cache directory but cannot read the key
//! file; a process that can read the key as well is as trusted as the host.

#[cfg(feature = "compiler")]
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use wasmtime::component::Component;
use wasmtime::Engine;

use super::{EngineError, TransformKind};

/// The name of the key file inside the cache directory.
pub const KEY_FILE: &str = "cache.key";
const KEY_BYTES: usize = 32;
/// Separates this use of the key from any other, and versions the entry format.
const DOMAIN: &[u8] = b"devin-bridge compiled component v1\0";

/// The MAC key; never printed.
struct Key([u8; KEY_BYTES]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

/// The on-disk compile cache; `None` directory means "always compile".
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: Option<(PathBuf, Arc<Key>)>,
}

impl CompileCache {
    /// A cache that never stores anything.
    pub fn disabled() -> Self {
        Self { dir: None }
    }

    /// Opens (creating with mode 0700) a private cache directory and its key.
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
        let key = load_or_create_key(dir)?;
        Ok(Self {
            dir: Some((dir.to_owned(), Arc::new(key))),
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

    /// Returns the compiled component, from disk when an authenticated entry exists.
    #[cfg(feature = "compiler")]
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        transform: TransformKind,
        sha256: &str,
        bytes: &[u8],
    ) -> Result<Component, EngineError> {
        let Some((dir, key)) = &self.dir else {
            return compile(engine, transform, bytes);
        };
        let compatibility = format!("{:016x}", compatibility_key(engine));
        let artifact = dir.join(format!("{sha256}-{compatibility}.cwasm"));
        let entry = Entry {
            key,
            sha256,
            compatibility: &compatibility,
        };
        if let Some(component) = entry.load(engine, transform, &artifact) {
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
        if let Err(error) = entry.store(&artifact, &compiled) {
            tracing::warn!(%transform, %error, "cannot write the compile cache; continuing without it");
        }
        // SAFETY: `compiled` was produced just now by `precompile_component` of this engine.
        #[allow(unsafe_code)] // wasmtime's only way to load a precompiled component
        unsafe { Component::deserialize(engine, &compiled) }.map_err(|error| EngineError::Compile {
            transform,
            message: format!("{error:#}"),
        })
    }

    /// Returns the compiled component from an authenticated entry on disk: a build without the
    /// compiler cannot compile it.
    #[cfg(not(feature = "compiler"))]
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        transform: TransformKind,
        sha256: &str,
        _bytes: &[u8],
    ) -> Result<Component, EngineError> {
        let place = match &self.dir {
            Some((dir, _)) => dir.display().to_string(),
            None => "a disabled compile cache".to_owned(),
        };
        self.load_any_compatible(engine, transform, sha256)?
            .ok_or_else(|| EngineError::Compile {
                transform,
                message: format!(
                    "this build has no compiler (the engine's `compiler` feature) and {place} \
                     holds no component {sha256} compiled for its engine settings"
                ),
            })
    }

    /// The component `sha256` from any authenticated entry this engine accepts. A build without
    /// the compiler has no engine compatibility hash (it is the compiler's), so every entry of
    /// the digest is a candidate: each must verify under the key with the hash its name
    /// carries, and wasmtime refuses one compiled for other engine settings.
    #[cfg(any(not(feature = "compiler"), test))]
    fn load_any_compatible(
        &self,
        engine: &Engine,
        transform: TransformKind,
        sha256: &str,
    ) -> Result<Option<Component>, EngineError> {
        let Some((dir, key)) = &self.dir else {
            return Ok(None);
        };
        let entries = std::fs::read_dir(dir).map_err(|error| {
            EngineError::Cache(format!("cannot list {}: {error}", dir.display()))
        })?;
        let mut names: Vec<String> = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .collect();
        // Deterministic order: the same entry wins every time.
        names.sort();
        for name in names {
            let Some(compatibility) = entry_compatibility(&name, sha256) else {
                continue;
            };
            let entry = Entry {
                key,
                sha256,
                compatibility,
            };
            if let Some(component) = entry.load(engine, transform, &dir.join(&name)) {
                tracing::debug!(%transform, %name, "compiled component loaded from cache");
                return Ok(Some(component));
            }
        }
        Ok(None)
    }
}

/// The engine compatibility hash in the name of a cache entry of `sha256`
/// (`<sha256>-<16 hex digits>.cwasm`), or `None` for any other file.
#[cfg(any(not(feature = "compiler"), test))]
fn entry_compatibility<'a>(name: &'a str, sha256: &str) -> Option<&'a str> {
    let hash = name
        .strip_prefix(sha256)?
        .strip_prefix('-')?
        .strip_suffix(".cwasm")?;
    (hash.len() == 16 && hash.bytes().all(|byte| byte.is_ascii_hexdigit())).then_some(hash)
}

/// Reads the cache key, or writes a fresh one when there is none or it cannot be trusted.
fn load_or_create_key(dir: &Path) -> Result<Key, EngineError> {
    let path = dir.join(KEY_FILE);
    match read_key(&path) {
        Ok(Some(key)) => return Ok(key),
        Ok(None) => {}
        Err(problem) => {
            tracing::warn!(path = %path.display(), %problem, "compile cache key cannot be trusted; replacing it (existing entries will be recompiled)");
            std::fs::remove_file(&path).map_err(|error| {
                EngineError::Cache(format!("cannot remove {}: {error}", path.display()))
            })?;
        }
    }
    let mut key = [0u8; KEY_BYTES];
    getrandom::fill(&mut key)
        .map_err(|error| EngineError::Cache(format!("no randomness for the cache key: {error}")))?;
    // Written under a temporary name and linked into place: a concurrent host that created
    // the key first wins, and both then use its key.
    let temporary = dir.join(format!("{KEY_FILE}.{}", temporary_suffix()));
    let written = (|| {
        create_private(&temporary, &key)?;
        std::fs::hard_link(&temporary, &path)
    })();
    let _ = std::fs::remove_file(&temporary);
    match written {
        Ok(()) => Ok(Key(key)),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => match read_key(&path) {
            Ok(Some(key)) => Ok(key),
            _ => Err(EngineError::Cache(format!(
                "{} appeared while creating it and cannot be trusted",
                path.display()
            ))),
        },
        Err(error) => Err(EngineError::Cache(format!(
            "cannot write {}: {error}",
            path.display()
        ))),
    }
}

/// `Ok(None)`: no key yet. `Err`: a key file exists but is not one we may trust.
fn read_key(path: &Path) -> Result<Option<Key>, String> {
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot open it ({error})")),
    };
    let meta = file
        .metadata()
        .map_err(|error| format!("cannot stat it ({error})"))?;
    if !meta.file_type().is_file() {
        return Err("it is not a regular file".into());
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(format!("it belongs to uid {}", meta.uid()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "it is readable or writable by others (mode {:o})",
            meta.permissions().mode() & 0o777
        ));
    }
    if meta.len() != KEY_BYTES as u64 {
        return Err(format!("it holds {} bytes, not {KEY_BYTES}", meta.len()));
    }
    let mut key = [0u8; KEY_BYTES];
    file.read_exact(&mut key)
        .map_err(|error| format!("cannot read it ({error})"))?;
    Ok(Some(Key(key)))
}

#[cfg(feature = "compiler")]
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
#[cfg(feature = "compiler")]
fn compatibility_key(engine: &Engine) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.finish()
}

fn mac_sidecar(artifact: &Path) -> PathBuf {
    artifact.with_extension("cwasm.mac")
}

/// One cache slot: the key it is stored under and the MAC key.
struct Entry<'a> {
    key: &'a Key,
    sha256: &'a str,
    compatibility: &'a str,
}

impl Entry<'_> {
    /// HMAC-SHA256 over the domain tag, the slot's name and the artifact bytes.
    fn mac(&self, artifact: &[u8]) -> Hmac<Sha256> {
        // Cannot fail: HMAC takes keys of any length.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
        for part in [
            DOMAIN,
            self.sha256.as_bytes(),
            b"\0",
            self.compatibility.as_bytes(),
            b"\0",
            &(artifact.len() as u64).to_le_bytes(),
        ] {
            mac.update(part);
        }
        mac.update(artifact);
        mac
    }

    /// Loads an artifact only when its MAC verifies; anything odd means "recompile".
    fn load(
        &self,
        engine: &Engine,
        transform: TransformKind,
        artifact: &Path,
    ) -> Option<Component> {
        let bytes = match std::fs::read(artifact) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
            Err(error) => {
                tracing::warn!(%transform, sha256 = %self.sha256, %error, "compile cache entry unreadable; recompiling");
                return None;
            }
        };
        let tag = std::fs::read_to_string(mac_sidecar(artifact))
            .ok()
            .and_then(|text| hex::decode(text.trim()).ok());
        let authentic = tag.is_some_and(|tag| self.mac(&bytes).verify_slice(&tag).is_ok());
        if !authentic {
            tracing::warn!(%transform, sha256 = %self.sha256, path = %artifact.display(), "compile cache entry is not authenticated by this host's key (tampered, moved, corrupt or from an older format); recompiling, not loading it");
            return None;
        }
        // SAFETY: the bytes carry a valid HMAC under the private key of this cache, bound to
        // this component digest and engine compatibility hash, so they are exactly what
        // `store` below wrote from `Engine::precompile_component` of a compatible engine.
        // wasmtime also re-checks the engine compatibility header and refuses a mismatch.
        #[allow(unsafe_code)] // wasmtime's only way to load a precompiled component
        match unsafe { Component::deserialize(engine, &bytes) } {
            Ok(component) => Some(component),
            Err(error) => {
                tracing::warn!(%transform, sha256 = %self.sha256, error = %format!("{error:#}"), "cached component rejected; recompiling");
                None
            }
        }
    }

    /// Writes artifact then MAC, each atomically (temporary file + rename), mode 0600.
    #[cfg(feature = "compiler")]
    fn store(&self, artifact: &Path, compiled: &[u8]) -> std::io::Result<()> {
        write_atomically(artifact, compiled)?;
        let tag = hex::encode(self.mac(compiled).finalize().into_bytes());
        write_atomically(&mac_sidecar(artifact), tag.as_bytes())
    }
}

/// A name for a temporary file no other thread or process of ours uses at the same time.
fn temporary_suffix() -> String {
    let mut nonce = [0u8; 8];
    if getrandom::fill(&mut nonce).is_err() {
        // Without randomness the thread id still separates writers of this process.
        let thread = format!("{:?}", std::thread::current().id());
        nonce.copy_from_slice(&<Sha256 as sha2::Digest>::digest(thread.as_bytes())[..8]);
    }
    format!("tmp{}-{}", std::process::id(), hex::encode(nonce))
}

/// Creates `path` (never following a link, never reusing a file) as 0600 with `bytes`, synced.
fn create_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(feature = "compiler")]
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = path.with_extension(temporary_suffix());
    let written = (|| {
        create_private(&temporary, bytes)?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::Config;

    /// The smallest component: the header of an empty one.
    const EMPTY_COMPONENT: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
    const SHA: &str = "0000000000000000000000000000000000000000000000000000000000000001";

    fn engine(fuel: bool) -> Engine {
        let mut config = Config::new();
        config.wasm_component_model(true).consume_fuel(fuel);
        Engine::new(&config).expect("engine")
    }

    #[test]
    fn an_entry_name_gives_its_compatibility_hash_only_for_its_own_digest() {
        let name = format!("{SHA}-0123456789abcdef.cwasm");
        assert_eq!(entry_compatibility(&name, SHA), Some("0123456789abcdef"));
        for other in [
            format!("{SHA}-0123456789abcdef.cwasm.mac"),
            format!("{SHA}-0123456789abcde.cwasm"),
            format!("{SHA}-0123456789abcdeg.cwasm"),
            format!("{SHA}0123456789abcdef.cwasm"),
            KEY_FILE.to_owned(),
        ] {
            assert_eq!(entry_compatibility(&other, SHA), None, "{other}");
        }
        let other_digest = SHA.replace('1', "2");
        assert_eq!(entry_compatibility(&name, &other_digest), None);
    }

    /// What a build without the compiler relies on: it finds the entry a compiling build
    /// stored, refuses it when compiled for other engine settings, and never loads an entry
    /// whose MAC does not verify. (Making the entry takes the compiler.)
    #[cfg(feature = "compiler")]
    #[test]
    fn the_compilerless_lookup_loads_only_an_authentic_entry_of_matching_settings() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = CompileCache::open(&dir.path().join("cache")).expect("cache");
        let plain = engine(false);
        let transform = TransformKind::ModelAlias;
        assert!(cache
            .load_any_compatible(&plain, transform, SHA)
            .expect("lookup")
            .is_none());
        cache
            .load_or_compile(&plain, transform, SHA, &EMPTY_COMPONENT)
            .expect("compiled and stored");
        assert!(cache
            .load_any_compatible(&plain, transform, SHA)
            .expect("lookup")
            .is_some());
        // Metered code is other machine code: its engine refuses the entry.
        assert!(cache
            .load_any_compatible(&engine(true), transform, SHA)
            .expect("lookup")
            .is_none());
        // A sidecar that does not verify: the entry is never deserialised.
        let sidecar = std::fs::read_dir(dir.path().join("cache"))
            .expect("list")
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .find(|path| path.to_string_lossy().ends_with(".cwasm.mac"))
            .expect("a MAC sidecar");
        std::fs::write(&sidecar, "00".repeat(32)).expect("forge the MAC");
        assert!(cache
            .load_any_compatible(&plain, transform, SHA)
            .expect("lookup")
            .is_none());
    }
}
