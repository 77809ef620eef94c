//! How the modes run an agent: the Agent Client Protocol client over stdio (`acp`), child
//! processes with an allowlisted environment, their own process group and a kill escalation
//! (`process`), the identities those processes run under (`identity`), and the Devin CLI's
//! dialect beyond plain ACP (`devin`: client identity, errors, login, models, print mode).
//!
//! ## Who uses what
//!
//! `process`, `devin`, `transcript`, `acp::AcpError`, `acp::AgentLimits` and `acp::ChunkSink`
//! serve every mode. The parts below serve one or two modes, and the table says exactly where
//! they are used: `cargo xtask modules` reads it and fails when a place it does not name uses
//! one of a row's items, or a place it names uses none of them. The per-turn agent, the shared
//! agent and its usage stay here, not in the summarizer, because they are built from the
//! connection's internals (its frame reader and request table), which no other crate sees.
//!
//! | part | items | used by |
//! |---|---|---|
//! | the connection a client drives itself (`acp/connection.rs`, `acp/gate.rs`) | `acp::AgentConnection`, `acp::ToolGate`, `acp::NoTools`, `acp::ToolCallSeen`, `acp::PromptOutcome` | `crates/companion`, `crates/summarizer` |
//! | the per-turn agent and its turn (`acp/turn.rs`) | `acp::Agent`, `acp::TurnOutput`, `acp::ModelApplied`, `acp::EffortApplied`, `acp::Applied`, `acp::SessionOptions`, `acp::OnSharedAgent`, `acp::apply_model_and_effort`, `acp::prompt_blocks`, `acp::takes_images` | `crates/summarizer`, `host/benches` |
//! | the shared agent (`acp/shared.rs`) | `acp::SharedAgent`, `acp::Death` | `crates/summarizer`, `host/benches` |
//! | the usage an agent reports (`acp/usage.rs`) | `acp::ReportedUsage`, `acp::UsageSource` | `crates/summarizer` |
//! | the host's and agents' identities (`identity`: `[server] user`, `[agent] user`) | `identity` | `crates/summarizer`, `host/src`, `host/benches`, `tests/support` |
//!
//! The places beyond the summarizer are its harness: the binary establishes the agents'
//! identity through the summarizer's start-up (before any thread exists) and hands it back to
//! `serve` and `doctor`; the benchmarks measure the summarizer's agents alone; the test support
//! starts the summarizer's bridge in process. The summarizer's pool of prewarmed agents lives
//! in the summarizer.

pub mod acp;
pub mod devin;
mod error;
pub mod identity;
pub mod process;
mod report;
pub mod transcript;

#[cfg(any(test, feature = "test-util"))]
pub mod testkit;

#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
