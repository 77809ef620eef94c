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

include!(concat!(env!("OUT_DIR"), "/components.rs"));

#[cfg(test)]
mod tests {
    use super::*;

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
