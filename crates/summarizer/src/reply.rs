//! What an agent turn produced, whichever transport ran it, or its failure as the client sees
//! it.

use devin_bridge_agent::acp::{AcpError, EffortApplied, ModelApplied, ReportedUsage, TurnOutput};
use devin_bridge_engine::TransformCalls as _;
use devin_bridge_types::Failure;

use super::calls::run_transform;
use super::failures::with_retry_after;
use devin_bridge_engine::Transforms;
use std::sync::Arc;

/// What an agent turn produced: its text, the token counts it reported, if any, and what
/// it said of the model that answered.
pub(crate) struct AgentReply {
    pub text: String,
    pub usage: Option<ReportedUsage>,
    /// The model the agent reports ran the turn (a display label).
    pub observed_model: Option<String>,
    /// Display-only messages and context compactions the agent reported (kept out of `text`).
    pub display_messages: u32,
    pub compactions: u32,
    /// How the requested model was applied (with its display name, when known).
    pub model: ModelApplied,
    /// How the requested effort was applied.
    pub effort: EffortApplied,
}

impl AgentReply {
    /// The reply of a finished ACP turn.
    pub(crate) fn of(output: TurnOutput) -> Self {
        Self {
            text: output.text,
            usage: output.usage,
            observed_model: output.observed_model,
            display_messages: output.display_messages,
            compactions: output.compactions,
            model: output.model,
            effort: output.effort,
        }
    }
}

/// An agent failure as the client sees it. The agent's own error text is untrusted: it is
/// cleaned by the sse component (`agent-error-message`); if that component fails, the text is
/// left out rather than passed on uncleaned. The status follows [`AcpError::status`]: a
/// retryable refusal is a 429 (whose `retry-after` is the wait the agent's service asked
/// for, when it said), used-up credits a 400 (with the service's own explanation, cleaned), a
/// refused client identity a 502 whose message names the settings to change.
pub(super) async fn agent_failure(transforms: &Arc<Transforms>, error: AcpError) -> Failure {
    tracing::warn!(code = error.code(), status = error.status(), retryable = error.retryable(), kind = ?error.error_kind(), retry_after = ?error.retry_after(), "agent failure");
    let message = match &error {
        AcpError::Rpc { message, .. } => match clean(transforms, message).await {
            Some(clean) => format!("the agent failed: {clean}"),
            None => "the agent failed".to_owned(),
        },
        AcpError::QuotaExceeded {
            message: Some(said),
        } => match clean(transforms, said).await {
            Some(clean) => format!("{error}: {clean}"),
            None => error.to_string(),
        },
        other => other.to_string(),
    };
    Failure {
        code: error.code().to_owned(),
        message: with_retry_after(message, error.retry_after()),
        status: error.status(),
        repairable: false,
    }
}

/// The agent's own words, cleaned by the sse component; `None` when it fails (the text is
/// then left out rather than passed on uncleaned).
async fn clean(transforms: &Arc<Transforms>, raw: &str) -> Option<String> {
    let raw = raw.to_owned();
    run_transform(transforms, raw.len(), move |t| t.agent_error_message(raw))
        .await
        .ok()
}
