//! What this binary carries: the transform components embedded when it was built (see
//! `build.rs`) and the default model catalog, and the `--version` text that names them.

use std::fmt::Write as _;
use std::sync::OnceLock;

use devin_bridge_engine::builtin::{BuiltInComponent, BuiltInSet};
use devin_bridge_engine::TransformKind;
use sha2::{Digest, Sha256};

mod generated {
    include!(concat!(env!("OUT_DIR"), "/builtin_components.rs"));
}

/// The embedded components, in `TransformKind::ALL` order.
pub fn components() -> BuiltInSet {
    generated::COMPONENTS
        .map(|component| component.map(|(bytes, sha256)| BuiltInComponent { bytes, sha256 }))
}

/// Makes the embedded components the default of every policy that names none. Called once,
/// first thing in `main`.
pub fn install() {
    // The only caller installs once, so this cannot find another set already there.
    let _ = devin_bridge_engine::builtin::install(components());
}

/// `devin-bridge --version`: the version, then the sha256 of every embedded component and of
/// the built-in catalog, or how to build a binary that has them.
pub fn long_version() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let mut text = String::from(env!("CARGO_PKG_VERSION"));
        let set = components();
        for (kind, component) in TransformKind::ALL.into_iter().zip(set) {
            let _ = match component {
                Some(component) => write!(
                    text,
                    "\ncomponent {:<12} sha256:{} ({} bytes)",
                    kind.name(),
                    component.sha256,
                    component.bytes.len()
                ),
                None => write!(text, "\ncomponent {:<12} not built in", kind.name()),
            };
        }
        let catalog = Sha256::digest(devin_bridge_policy::BUILTIN_CATALOG.as_bytes());
        let _ = write!(text, "\ncatalog   {:<12} sha256:", "models.json");
        for byte in catalog {
            let _ = write!(text, "{byte:02x}");
        }
        if set.iter().any(Option::is_none) {
            text.push_str(
                "\nthis binary was built without (some of) its transform components: build it \
                 with `cargo xtask build` or `cargo xtask dist` to embed them, or name component \
                 files in the policy",
            );
        }
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_text_names_every_transform_and_the_catalog() {
        let text = long_version();
        for kind in TransformKind::ALL {
            assert!(
                text.contains(&format!("component {:<12} ", kind.name())),
                "{kind:?} missing from {text}"
            );
        }
        assert!(text.contains("catalog   models.json"));
    }

    #[test]
    fn each_embedded_digest_is_the_sha256_of_its_bytes() {
        for component in components().into_iter().flatten() {
            let digest = Sha256::digest(component.bytes);
            let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
            assert_eq!(hex, component.sha256);
        }
    }
}
