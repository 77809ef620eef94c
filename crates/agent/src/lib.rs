//! How the modes run an agent: the Agent Client Protocol client over stdio (`acp`), child
//! processes with an allowlisted environment, their own process group and a kill escalation
//! (`process`), the identities those processes run under (`identity`), and the Devin CLI's
//! dialect beyond plain ACP (`devin`: client identity, errors, login, models, print mode).
//!
//! Whom each part serves today: `process` and `devin` every mode; `acp::AgentConnection` and
//! `acp::ToolGate` companion mode and the summarizer's doctor and live catalog; `acp::Agent`,
//! `acp::SharedAgent`, `acp::usage` and `identity` (a separate uid for agents, `[agent] user`)
//! the summarizer only. The summarizer's pool of prewarmed agents lives in the summarizer.

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
