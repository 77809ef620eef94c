//! A client for the Agent Client Protocol over a child's stdio, in the protocol's own types
//! (`agent_client_protocol_schema::v1`). [`AgentConnection`] is the connection every ACP user
//! builds on; companion mode drives it directly with its own [`ToolGate`]. [`Agent`] (one
//! tool-less turn per process) and [`SharedAgent`] (many sessions on one long-lived process)
//! are the two forms the summarizer runs, per turn and resident; they stay here because they
//! are built from the connection's internals (its frame reader and request table), which no
//! other crate sees.

mod connection;
pub(crate) mod frame;
mod gate;
mod shared;
mod turn;
mod usage;

pub use crate::error::AcpError;
pub use connection::{
    AgentConnection, AgentLimits, AgentStopped, Ended, PromptOutcome, MAX_AGENT_MESSAGE_BYTES,
    MAX_PERMISSION_TOOLS,
};
pub use gate::{NoTools, ToolCallSeen, ToolGate, INFERENCE_TOOL_NAME_META, TOOL_NAME_META};
pub use shared::{Death, SharedAgent};
pub use turn::{
    apply_model_and_effort, prompt_blocks, takes_images, Agent, Applied, EffortApplied,
    ModelApplied, OnSharedAgent, SessionOptions, TurnOutput,
};
pub use usage::{ReportedUsage, UsageSource};

/// Where a prompt's `agent_message_chunk` text goes as it arrives, chunk by chunk, in order
/// (the prompt still collects and returns the whole text). Only text the turn accepted is
/// sent: a chunk that would pass the output cap is refused before it is sent, so what the
/// channel carries is bounded by the cap. A receiver that went away is not an error.
pub type ChunkSink = tokio::sync::mpsc::UnboundedSender<String>;
