//! The agent's own account of one prompt turn: what the Devin CLI says about the turn beside
//! its reply. Both ACP clients (one process per connection, and a process shared by sessions)
//! gather it in this one type, so a new fact of the dialect is read in one place.
//!
//! Invariants: every field starts empty and only the turn's own session's notices fill it;
//! counters saturate; the last `turn_stats` and `agent_stopped` of the turn win (the CLI's
//! statistics are cumulative).

use serde_json::Value;

use super::notices::COMPACTION;
use super::stats::{AGENT_STOPPED, TURN_STATS};
use super::usage::TokenCounts;
use crate::error::AcpError;
use crate::report::AgentStopped;

/// What the agent reported about one turn, apart from its reply text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnAccount {
    /// From `_cognition.ai/agent_stopped` for this session.
    pub stopped: Option<AgentStopped>,
    /// The `model` response dimension of `_cognition.ai/turn_stats`.
    pub turn_stats_model: Option<String>,
    /// The `model` dimension of a `usage_update`'s `_meta`.
    pub usage_update_model: Option<String>,
    /// The turn's sums from `_cognition.ai/turn_stats`, when it reported them.
    pub turn_sums: Option<TokenCounts>,
    /// Display-only message chunks (the CLI's status lines), kept out of the reply.
    pub display_messages: u32,
    /// `_cognition.ai/compaction` notifications.
    pub compactions: u32,
}

impl TurnAccount {
    /// Whether `method` is a vendor notification about a turn ([`TurnAccount::note`] reads it).
    pub fn is_turn_notice(method: &str) -> bool {
        matches!(method, AGENT_STOPPED | TURN_STATS | COMPACTION)
    }

    /// Reads one of the turn's vendor notifications (others are ignored).
    pub fn note(&mut self, method: &str, params: &Value) {
        match method {
            AGENT_STOPPED => self.stopped = Some(super::stopped::read(params)),
            TURN_STATS => {
                if let Some(model) = super::stats::turn_stats_model(params) {
                    self.turn_stats_model = Some(model);
                }
                // Cumulative: the last report of the turn holds its sums.
                if let Some(sums) = TokenCounts::of_turn_stats(params) {
                    self.turn_sums = Some(sums);
                }
            }
            COMPACTION => {
                tracing::debug!("the agent compacted the session's context");
                self.compactions = self.compactions.saturating_add(1);
            }
            _ => {}
        }
    }

    /// A display-only message chunk was kept out of the reply.
    pub fn note_display_chunk(&mut self) {
        self.display_messages = self.display_messages.saturating_add(1);
    }

    /// A `usage_update` named the model (`None`: it did not; the earlier name stays).
    pub fn note_usage_model(&mut self, model: Option<String>) {
        if model.is_some() {
            self.usage_update_model = model;
        }
    }

    /// The model the agent says ran the turn: `agent_stopped`'s label, else the `model`
    /// dimension of `turn_stats`, else of a `usage_update`.
    pub fn observed_model(&self) -> Option<String> {
        self.stopped
            .as_ref()
            .and_then(|stopped| stopped.model_label.clone())
            .or_else(|| self.turn_stats_model.clone())
            .or_else(|| self.usage_update_model.clone())
    }

    /// The failure the agent's account makes of the turn, whatever its stop reason says
    /// ([`super::stopped::failure`]).
    pub fn failure(&self) -> Option<AcpError> {
        self.stopped.as_ref().and_then(super::stopped::failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_label_of_agent_stopped_wins_then_turn_stats_then_usage_update() {
        let mut account = TurnAccount::default();
        account.note_usage_model(Some("from usage".into()));
        assert_eq!(account.observed_model().as_deref(), Some("from usage"));
        account.note(
            TURN_STATS,
            &json!({"sessionId": "s", "responseDimensions": [
                {"uid": "model", "label": "Model", "kind": {"type": "metric", "value": "SWE-1.7"}}
            ]}),
        );
        assert_eq!(account.observed_model().as_deref(), Some("SWE-1.7"));
        account.note(
            AGENT_STOPPED,
            &json!({"cause": "complete", "sessionId": "s", "stats": {"modelLabel": "SWE-2 High"}}),
        );
        assert_eq!(account.observed_model().as_deref(), Some("SWE-2 High"));
        // A later update without a model keeps the name it had.
        account.note_usage_model(None);
        assert_eq!(account.usage_update_model.as_deref(), Some("from usage"));
    }

    #[test]
    fn chatter_is_counted_and_a_failing_cause_is_the_turns_failure() {
        let mut account = TurnAccount::default();
        assert!(TurnAccount::is_turn_notice(COMPACTION));
        assert!(!TurnAccount::is_turn_notice("session/update"));
        account.note(COMPACTION, &json!({"sessionId": "s"}));
        account.note_display_chunk();
        account.note_display_chunk();
        assert_eq!((account.display_messages, account.compactions), (2, 1));
        assert!(account.failure().is_none());
        account.note(
            AGENT_STOPPED,
            &json!({"cause": "quota_exhausted", "sessionId": "s", "errorMessage": "out"}),
        );
        assert!(matches!(
            account.failure(),
            Some(AcpError::QuotaExceeded { .. })
        ));
    }
}
