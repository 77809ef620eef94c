//! What the engine is configured with: where each component's bytes are and the digest they
//! must have, the limits every call runs under, and the compile cache directory.
//!
//! The engine never reads a policy file. A mode's policy deserializes the section types
//! below (`[components.<transform>]`, `[limits]`, `[engine]`), resolves their paths against
//! its own directory and hands the engine an [`EngineConfig`] of absolute locations.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::TransformKind;

/// One transform component: where its bytes are and, optionally, the digest they must have.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentSource {
    /// Path of the `.wasm` component, relative to the policy file.
    pub path: PathBuf,
    /// Hex sha256 the file must have; a mismatch refuses the component.
    pub sha256: Option<String>,
}

/// `[components.<transform>]` tables, keyed by the transform's name (a name that is no
/// transform's is refused, naming the transforms). A missing table means the built-in default
/// location.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct ComponentsTable {
    sources: BTreeMap<TransformKind, ComponentSource>,
}

/// Limits of the wasm runtime. Each call gets a fresh store with these caps.
/// `memory_mib` and `call_timeout_ms` change live on SIGHUP; `max_instances` needs a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeLimits {
    /// Linear memory cap per call, in MiB.
    pub memory_mib: u32,
    /// Wall-clock deadline per call, in milliseconds (epoch interruption).
    pub call_timeout_ms: u64,
    /// Component instances that can be live at once (the pooling allocator's size). A turn's
    /// open reply stream holds one for the attempt and a streaming response one for its
    /// events, so this must cover two per turn that may run at once plus the ordinary calls
    /// beside them.
    pub max_instances: u32,
}

impl RuntimeLimits {
    /// The largest `memory_mib` a policy may set.
    pub const MAX_MEMORY_MIB: u32 = 4096;
}

impl Default for RuntimeLimits {
    fn default() -> Self {
        Self {
            memory_mib: 256,
            call_timeout_ms: 2_000,
            max_instances: 128,
        }
    }
}

/// `[engine]`: where compiled components are cached.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineSection {
    /// Directory for precompiled components; default `$XDG_CACHE_HOME/devin-bridge`
    /// (or `~/.cache/devin-bridge`). Must be private to this user.
    pub cache_dir: Option<PathBuf>,
}

impl ComponentsTable {
    /// The configured source of one transform, if the policy names one.
    pub fn get(&self, kind: TransformKind) -> Option<&ComponentSource> {
        self.sources.get(&kind)
    }

    /// Names `source` as the component of `kind`.
    pub fn set(&mut self, kind: TransformKind, source: ComponentSource) {
        self.sources.insert(kind, source);
    }

    /// Checks that every pin is a hex sha256 digest.
    pub fn validate(&self) -> Result<(), String> {
        for kind in TransformKind::ALL {
            if let Some(pin) = self.get(kind).and_then(|source| source.sha256.as_deref()) {
                if pin.len() != 64 || !pin.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(format!(
                        "components.{kind}.sha256 must be 64 hex digits, not {pin:?}"
                    ));
                }
            }
        }
        Ok(())
    }
}

impl RuntimeLimits {
    /// Checks every limit against its range.
    pub fn validate(&self) -> Result<(), String> {
        if self.memory_mib == 0 || self.memory_mib > Self::MAX_MEMORY_MIB {
            return Err(format!(
                "limits.memory_mib must be between 1 and {}, not {}",
                Self::MAX_MEMORY_MIB,
                self.memory_mib
            ));
        }
        if self.call_timeout_ms == 0 || self.call_timeout_ms > 600_000 {
            return Err(format!(
                "limits.call_timeout_ms must be between 1 and 600000, not {}",
                self.call_timeout_ms
            ));
        }
        if self.max_instances == 0 || self.max_instances > 10_000 {
            return Err(format!(
                "limits.max_instances must be between 1 and 10000, not {}",
                self.max_instances
            ));
        }
        Ok(())
    }
}

/// Where one transform's component is read from and the pin it must match (lower-case hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentLocation {
    pub place: ComponentPlace,
    pub pin: Option<String>,
}

/// Where a component's bytes are.
#[derive(Clone, PartialEq, Eq)]
pub enum ComponentPlace {
    /// A component file (absolute once a policy resolved it).
    File(PathBuf),
    /// A component this binary carries (see [`crate::builtin`]).
    BuiltIn(&'static [u8]),
    /// The policy names no file and this binary carries no component for the transform.
    NotBuiltIn,
}

impl std::fmt::Debug for ComponentPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::BuiltIn(bytes) => write!(f, "BuiltIn({} bytes)", bytes.len()),
            Self::NotBuiltIn => f.write_str("NotBuiltIn"),
        }
    }
}

impl ComponentLocation {
    /// A component file, with an optional pin.
    pub fn file(path: impl Into<PathBuf>, pin: Option<String>) -> Self {
        Self {
            place: ComponentPlace::File(path.into()),
            pin,
        }
    }

    /// The file, when the component is one.
    pub fn path(&self) -> Option<&std::path::Path> {
        match &self.place {
            ComponentPlace::File(path) => Some(path),
            _ => None,
        }
    }

    /// How logs and messages name the component's origin: its path, or `built-in`.
    pub fn describe(&self) -> String {
        match &self.place {
            ComponentPlace::File(path) => path.display().to_string(),
            ComponentPlace::BuiltIn(_) => "built-in".to_owned(),
            ComponentPlace::NotBuiltIn => "not built in".to_owned(),
        }
    }

    /// The component's bytes: read from its file, or the ones built in.
    pub fn read(
        &self,
        kind: TransformKind,
    ) -> Result<std::borrow::Cow<'static, [u8]>, crate::EngineError> {
        match &self.place {
            ComponentPlace::File(path) => {
                std::fs::read(path)
                    .map(std::borrow::Cow::Owned)
                    .map_err(|source| crate::EngineError::Read {
                        path: path.clone(),
                        source,
                    })
            }
            ComponentPlace::BuiltIn(bytes) => Ok(std::borrow::Cow::Borrowed(bytes)),
            ComponentPlace::NotBuiltIn => Err(crate::EngineError::NotBuiltIn {
                transforms: kind.name().to_owned(),
            }),
        }
    }
}

/// Everything the engine needs to load and serve a component set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// The limits every call runs under.
    pub limits: RuntimeLimits,
    /// The compile cache directory; `None` means the per-user default.
    pub cache_dir: Option<PathBuf>,
    /// One location per transform, in [`TransformKind::ALL`] order.
    pub components: [ComponentLocation; TransformKind::COUNT],
}

impl EngineConfig {
    /// Where `kind`'s component is read from.
    pub fn location(&self, kind: TransformKind) -> &ComponentLocation {
        &self.components[kind.index()]
    }

    /// Refuses, in one error naming them all, a set in which some transform has no component
    /// (a binary built without its components, and a policy that names none).
    pub fn check_complete(&self) -> Result<(), crate::EngineError> {
        let missing: Vec<&str> = TransformKind::ALL
            .into_iter()
            .filter(|kind| self.location(*kind).place == ComponentPlace::NotBuiltIn)
            .map(TransformKind::name)
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(crate::EngineError::NotBuiltIn {
                transforms: missing.join(", "),
            })
        }
    }

    /// The pins of every transform, in [`TransformKind::ALL`] order.
    pub fn pins(&self) -> [Option<String>; TransformKind::COUNT] {
        TransformKind::ALL.map(|kind| self.location(kind).pin.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_tables_are_read_by_transform_name_and_an_unknown_one_is_refused_by_name() {
        let table: ComponentsTable = serde_json::from_str(
            r#"{"model-alias": {"path": "m.wasm"}, "sse": {"path": "s.wasm", "sha256": null}}"#,
        )
        .expect("two known transforms");
        assert_eq!(
            table.get(TransformKind::ModelAlias).map(|s| s.path.clone()),
            Some(PathBuf::from("m.wasm"))
        );
        assert_eq!(
            table.get(TransformKind::Sse).map(|s| s.path.clone()),
            Some(PathBuf::from("s.wasm"))
        );
        assert_eq!(table.get(TransformKind::Serializer), None);
        let error = serde_json::from_str::<ComponentsTable>(r#"{"tokenizer": {"path": "t.wasm"}}"#)
            .expect_err("no such transform");
        assert!(
            error
                .to_string()
                .contains("unknown transform \"tokenizer\"")
                && error.to_string().contains(&TransformKind::names()),
            "{error}"
        );
    }

    fn config(places: [ComponentPlace; TransformKind::COUNT]) -> EngineConfig {
        EngineConfig {
            limits: RuntimeLimits::default(),
            cache_dir: None,
            components: places.map(|place| ComponentLocation { place, pin: None }),
        }
    }

    #[test]
    fn a_set_without_components_is_refused_once_naming_every_missing_transform() {
        // The serializer from a file, the envelope and model-alias not built in, the rest built in.
        let place = |kind: TransformKind| match kind {
            TransformKind::Serializer => ComponentPlace::File(PathBuf::from("/c/serializer.wasm")),
            TransformKind::Envelope | TransformKind::ModelAlias => ComponentPlace::NotBuiltIn,
            _ => ComponentPlace::BuiltIn(b"\0asm"),
        };
        let set = config(TransformKind::ALL.map(place));
        let message = set.check_complete().expect_err("incomplete").to_string();
        assert!(
            message.contains("no built-in envelope, model-alias"),
            "{message}"
        );
        assert!(message.contains("cargo xtask build"), "{message}");
        assert!(!message.contains("serializer"), "{message}");
        let complete = config(TransformKind::ALL.map(|kind| match place(kind) {
            ComponentPlace::NotBuiltIn => ComponentPlace::BuiltIn(b"\0asm"),
            other => other,
        }));
        assert!(complete.check_complete().is_ok());
    }

    #[test]
    fn a_built_in_component_is_read_without_touching_the_file_system() {
        let location = ComponentLocation {
            place: ComponentPlace::BuiltIn(b"\0asm built in"),
            pin: None,
        };
        let bytes = location.read(TransformKind::Sse).expect("built in");
        assert_eq!(&*bytes, b"\0asm built in");
        assert_eq!(location.describe(), "built-in");
        assert_eq!(location.path(), None);
    }
}
