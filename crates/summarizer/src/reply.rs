//! What an agent turn produced, whichever transport ran it, or its failure as the client sees
//! it.

use devin_bridge_agent::acp::{AcpError, EffortApplied, ModelApplied, ReportedUsage, TurnOutput};
use devin_bridge_engine::TransformCalls as _;
use devin_bridge_types::Failure;

use super::calls::run_transform;
use super::Bridge;

/// What an agent turn produced: its text, the token counts it reported, if any, and what
/// it said of the model that answered.
pub struct AgentReply {
    pub text: String,
    pub usage: Option<ReportedUsage>,
    /// The model the agent reports ran the turn.
    pub observed_model: Option<String>,
    /// How the requested model was applied (with its display name, when known).
    pub model: ModelApplied,
    /// How the requested effort was applied.
    pub effort: EffortApplied,
}

impl AgentReply {
    /// The reply of a finished ACP turn.
    pub fn of(output: TurnOutput) -> Self {
        Self {
            text: output.text,
            usage: output.usage,
            observed_model: output.observed_model,
            model: output.model,
            effort: output.effort,
        }
    }
}

/// An agent failure as the client sees it. The agent's own error text is untrusted: it is
/// cleaned by the sse component (`agent-error-message`); if that component fails, the text is
/// left out rather than passed on uncleaned. The status follows [`AcpError::status`]: a
/// retryable refusal is a 429, used-up credits a 400, a refused client identity a 502 whose
/// message names the settings to change.
pub(super) async fn agent_failure(bridge: &Bridge, error: AcpError) -> Failure {
    tracing::warn!(code = error.code(), status = error.status(), retryable = error.retryable(), kind = ?error.error_kind(), "agent failure");
    let message = match error {
        AcpError::Rpc { ref message, .. } => {
            let raw = message.clone();
            match run_transform(&bridge.transforms, raw.len(), move |t| {
                t.agent_error_message(raw)
            })
            .await
            {
                Ok(clean) => format!("the agent failed: {clean}"),
                Err(_) => "the agent failed".to_owned(),
            }
        }
        ref other => other.to_string(),
    };
    Failure {
        code: error.code().to_owned(),
        message,
        status: error.status(),
        repairable: false,
    }
}
