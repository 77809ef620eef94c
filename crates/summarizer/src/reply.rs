//! What an agent turn produced, whichever transport ran it.

use devin_bridge_agent::acp::{ModelApplied, ReportedUsage, TurnOutput};

/// What an agent turn produced: its text, the token counts it reported, if any, and what
/// it said of the model that answered.
pub struct AgentReply {
    pub text: String,
    pub usage: Option<ReportedUsage>,
    /// The model the agent reports ran the turn.
    pub observed_model: Option<String>,
    /// How the requested model was applied (with its display name, when known).
    pub model: ModelApplied,
}

impl AgentReply {
    /// The reply of a finished ACP turn.
    pub fn of(output: TurnOutput) -> Self {
        Self {
            text: output.text,
            usage: output.usage,
            observed_model: output.observed_model,
            model: output.model,
        }
    }
}
