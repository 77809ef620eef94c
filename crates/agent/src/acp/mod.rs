//! A client for the Agent Client Protocol over a child's stdio, in the protocol's own types
//! (`agent_client_protocol_schema::v1`). [`AgentConnection`] serves every mode: the summarizer
//! runs one tool-less turn per process ([`Agent`], [`AgentPool`]); companion mode runs the full
//! agent with its own [`ToolGate`].

mod connection;
mod error;
pub(crate) mod frame;
mod gate;
mod pool;
#[cfg(test)]
mod scripted;
mod shared;
mod turn;
mod usage;

pub use connection::{
    AgentConnection, AgentLimits, AgentStopped, Ended, PromptOutcome, MAX_AGENT_MESSAGE_BYTES,
};
pub use error::AcpError;
pub use gate::{NoTools, ToolCallSeen, ToolGate, TOOL_NAME_META};
pub use pool::{AgentPool, PoolStats};
pub use shared::{Death, SharedAgent};
pub use turn::{apply_model, prompt_blocks, takes_images, Agent, ModelApplied, TurnOutput};
pub use usage::ReportedUsage;
