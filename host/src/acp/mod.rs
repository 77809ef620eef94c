//! A JSON-RPC client for the Agent Client Protocol over a child's stdio, used for one
//! summarizer turn per process: `initialize`, `session/new`, `session/prompt`, collect the
//! message chunks, fail closed on anything else the agent tries.

mod error;
pub(crate) mod frame;
mod pool;
mod turn;

pub use error::AcpError;
pub use pool::{AgentPool, PoolStats};
pub use turn::{Agent, AgentLimits, TurnOutput};
