//! How every mode runs an agent: the Agent Client Protocol client over stdio (`acp`), child
//! processes with an allowlisted environment, their own process group and a kill escalation
//! (`process`), and the identities those processes run under (`identity`).

pub mod acp;
pub mod identity;
pub mod process;

#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
