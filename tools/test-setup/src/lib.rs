//! What the tests need on this machine besides the Rust toolchain, installed on demand so that
//! `cargo xtask test` works on a fresh Debian machine: the pinned Claude Code ([`claude_code`],
//! an npm install into `target/claude-code/`), the pinned Anthropic SDK ([`anthropic_sdk`],
//! into `target/anthropic-sdk/`) and the Debian packages whose programs the tests
//! run ([`debian`]).
//!
//! Two tools use it: xtask (the cargo tests' programs, and the Claude Code the end-to-end test
//! runs) and `devin-bridge-containers` (the container proof's programs, and the Claude Code it
//! runs and copies into its image). Each step that installs something is printed first.
//! Both also find the workspace root and run their programs through [`workspace`].

pub mod anthropic_sdk;
pub mod claude_code;
pub mod debian;
pub mod npm;
pub mod workspace;
