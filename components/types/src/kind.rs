//! The five transforms, one component each: the one list of them, with every fact about a
//! transform that is not its code (its name, its cargo package, its place in per-transform
//! tables).
//!
//! Everything that handles "every transform" iterates [`TransformKind::ALL`]: the engine's
//! slots and corpora, the policy's `[components.<name>]` tables, the host's build script (what
//! it embeds), xtask's component build and fuzz targets, pre-initialisation and the tests. So
//! a new transform is a variant here, whose arms the compiler asks for, and nothing else in
//! those places.
//!
//! Invariant: `ALL[k.index()] == k` for every `k`, and `name()` is unique; the cargo package of
//! a transform is `devin-bridge-<name>` (checked by xtask when it builds them).

/// The five transforms, one component each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransformKind {
    Serializer,
    Envelope,
    Sse,
    ModelAlias,
    Safeguard,
}

impl TransformKind {
    /// How many transforms there are: the length of every per-transform table.
    pub const COUNT: usize = 5;

    pub const ALL: [TransformKind; Self::COUNT] = [
        TransformKind::Serializer,
        TransformKind::Envelope,
        TransformKind::Sse,
        TransformKind::ModelAlias,
        TransformKind::Safeguard,
    ];

    /// The name used in policies, file names, fixture directories, logs and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            TransformKind::Serializer => "serializer",
            TransformKind::Envelope => "envelope",
            TransformKind::Sse => "sse",
            TransformKind::ModelAlias => "model-alias",
            TransformKind::Safeguard => "safeguard",
        }
    }

    /// Every transform's name, in [`TransformKind::ALL`] order, comma-separated (for messages
    /// that list them).
    pub fn names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }

    /// The cargo package of its library.
    pub fn package(self) -> String {
        format!("devin-bridge-{}", self.name())
    }

    /// The cargo package its component is built from: the export shell over the library.
    pub fn component_package(self) -> String {
        format!("devin-bridge-{}-component", self.name())
    }

    /// File name of the built component.
    pub fn file_name(self) -> String {
        format!("{}.wasm", self.name())
    }

    /// The transform's place in [`TransformKind::ALL`], for tables indexed by transform.
    pub fn index(self) -> usize {
        match self {
            TransformKind::Serializer => 0,
            TransformKind::Envelope => 1,
            TransformKind::Sse => 2,
            TransformKind::ModelAlias => 3,
            TransformKind::Safeguard => 4,
        }
    }
}

impl std::fmt::Display for TransformKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is none of the transforms'.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown transform {0:?} (expected one of: {names})", names = TransformKind::names())]
pub struct UnknownTransform(pub String);

impl serde::Serialize for TransformKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for TransformKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

impl std::str::FromStr for TransformKind {
    type Err = UnknownTransform;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        TransformKind::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| UnknownTransform(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_transform_is_found_by_its_name_at_its_index() {
        for (index, kind) in TransformKind::ALL.into_iter().enumerate() {
            assert_eq!(kind.index(), index);
            assert_eq!(kind.name().parse::<TransformKind>(), Ok(kind));
        }
        assert_eq!(
            TransformKind::ModelAlias.package(),
            "devin-bridge-model-alias"
        );
        assert_eq!(
            TransformKind::ModelAlias.component_package(),
            "devin-bridge-model-alias-component"
        );
        assert_eq!(
            "models".parse::<TransformKind>(),
            Err(UnknownTransform("models".into()))
        );
    }
}
