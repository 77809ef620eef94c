//! How every mode runs an agent: the Agent Client Protocol client over stdio (`acp`), child
//! processes with an allowlisted environment, their own process group and a kill escalation
//! (`process`), the identities those processes run under (`identity`), and the Devin CLI's
//! dialect beyond plain ACP (`devin`: client identity, errors, login, models, print mode).

pub mod acp;
pub mod devin;
pub mod identity;
pub mod process;

#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
