//! The deliberately faulty components the host's tests load, built for them at build time:
//! this crate's build script runs `cargo xtask test-components` into its `OUT_DIR`, and each
//! component is a constant here named after its file ([`TWIN`] is `twin.wasm`).
//!
//! - [`MISBEHAVING_SERIALIZER`]: a serializer that traps, loops, allocates without end or
//!   answers garbage on request, for the runtime's fault tests;
//! - [`WASI_PROBE_SERIALIZER`]: a serializer that imports WASI, which the host must refuse;
//! - [`TWIN`]: all five transforms, contract-compatible with the built ones but not
//!   byte-equal, for the swap tests;
//! - [`WRONG_ANSWERS`]: all five transforms, each breaking one promise of the contract.
//!
//! Only the tests depend on this crate (a dev-dependency of the host), so a build of the
//! binary never builds these.

use std::path::Path;

/// A built test component: its name (the file's stem) and where the build put it.
#[derive(Debug, Clone, Copy)]
pub struct TestComponent {
    pub name: &'static str,
    path: &'static str,
}

impl TestComponent {
    /// The component's file.
    pub fn path(&self) -> &'static Path {
        Path::new(self.path)
    }

    /// The component's bytes, read from [`TestComponent::path`]. Panics (this is test support)
    /// when the file is gone, which happens only when the build directory was cleaned under
    /// a built test.
    pub fn bytes(&self) -> Vec<u8> {
        std::fs::read(self.path).unwrap_or_else(|error| {
            panic!(
                "test component {} at {}: {error} (rebuild: cargo test -p devin-bridge)",
                self.name, self.path
            )
        })
    }
}

impl TestComponent {
    /// Whether the component exports the interface of the transform named `transform`
    /// (`devin-bridge:transforms/<transform>@<version>`). The twin and the wrong answers
    /// export the transforms they have a version of: a new transform may have none yet.
    pub fn exports_transform(&self, transform: &str) -> bool {
        let prefix = format!("devin-bridge:transforms/{transform}@");
        let bytes = self.bytes();
        let exports = wasmparser::Parser::new(0)
            .parse_all(&bytes)
            .filter_map(Result::ok)
            .any(|payload| match payload {
                wasmparser::Payload::ComponentExportSection(exports) => exports
                    .into_iter()
                    .filter_map(Result::ok)
                    .any(|export| export.name.name.starts_with(&prefix)),
                _ => false,
            });
        exports
    }
}

include!(concat!(env!("OUT_DIR"), "/components.rs"));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_twin_exports_the_transforms_it_has_a_version_of_and_no_other() {
        for transform in ["serializer", "envelope", "sse", "model-alias", "safeguard"] {
            assert!(TWIN.exports_transform(transform), "{transform}");
        }
        assert!(!TWIN.exports_transform("types"));
        assert!(!MISBEHAVING_SERIALIZER.exports_transform("sse"));
    }

    #[test]
    fn every_test_component_is_a_built_component() {
        for component in [
            MISBEHAVING_SERIALIZER,
            WASI_PROBE_SERIALIZER,
            TWIN,
            WRONG_ANSWERS,
        ] {
            let bytes = component.bytes();
            // A component's preamble: the wasm magic, then the component-model layer.
            assert_eq!(&bytes[..4], b"\0asm", "{}", component.name);
            assert_eq!(
                &bytes[6..8],
                &[1, 0],
                "{} is not a component",
                component.name
            );
            assert_eq!(
                component.path().file_stem().and_then(|stem| stem.to_str()),
                Some(component.name)
            );
        }
    }
}
