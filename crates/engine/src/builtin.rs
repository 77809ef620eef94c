//! The transform components a binary carries.
//!
//! The `devin-bridge` binary embeds the components `cargo xtask build` (or `dist`) built, and
//! installs them here once, first thing in `main`. A policy that names no file for a
//! transform then gets the built-in one, so the binary runs anywhere, away from the tree it
//! was built in.
//!
//! Invariants: the set is installed at most once per process and never changes afterwards;
//! a library user (a test, a benchmark) that installs nothing gets no built-in component,
//! and a policy naming none is refused with [`crate::EngineError::NotBuiltIn`].

use std::sync::OnceLock;

use crate::TransformKind;

/// One embedded component and its sha256 (computed when the binary was built).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltInComponent {
    pub bytes: &'static [u8],
    pub sha256: &'static str,
}

/// The components a binary carries, in [`TransformKind::ALL`] order (`None`: not built in).
pub type BuiltInSet = [Option<BuiltInComponent>; TransformKind::COUNT];

static INSTALLED: OnceLock<BuiltInSet> = OnceLock::new();

/// Installs the binary's components. Returns false (and changes nothing) when a set was
/// already installed and differs from `set`.
pub fn install(set: BuiltInSet) -> bool {
    INSTALLED.get_or_init(|| set) == &set
}

/// The built-in component of `kind`, when this process installed one.
pub fn get(kind: TransformKind) -> Option<BuiltInComponent> {
    INSTALLED.get().and_then(|set| set[kind.index()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_installed_set_is_what_get_returns_and_cannot_be_replaced() {
        static SSE: &[u8] = b"\0asm sse";
        let mut set: BuiltInSet = [None; TransformKind::COUNT];
        set[TransformKind::Sse.index()] = Some(BuiltInComponent {
            bytes: SSE,
            sha256: "00",
        });
        assert!(install(set));
        assert!(install(set), "installing the same set again is fine");
        assert_eq!(get(TransformKind::Sse).map(|c| c.bytes), Some(SSE));
        assert_eq!(get(TransformKind::Envelope), None);
        assert!(
            !install([None; TransformKind::COUNT]),
            "a different set is refused"
        );
        assert_eq!(get(TransformKind::Sse).map(|c| c.bytes), Some(SSE));
    }
}
