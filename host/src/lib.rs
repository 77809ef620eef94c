//! devin-bridge: the trusted native host.
//!
//! The host owns everything with side effects (sockets, subprocesses, the egress guard); every
//! transform of untrusted data runs as a WebAssembly component (`engine`).

pub mod acp;
pub mod cli;
pub mod companion;
pub mod control;
pub mod engine;
#[doc(hidden)]
pub mod fuzzing;
pub mod guard;
pub mod identity;
pub mod logging;
pub mod outpost;
pub mod policy;
pub mod process;
pub mod reload;
pub mod summarizer;
