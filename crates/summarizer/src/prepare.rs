//! A request made ready for an agent: serialized, its model resolved, and its place (a
//! per-turn agent or a leased resident session) chosen.

use std::sync::Arc;

use devin_bridge_engine::{Image, MessageHead, Prompt, UnseenPrompt};
use devin_bridge_types::{Failure, Usage};

use super::resident::{Lease, Resident};
use super::serialize::{resolve_model, serialize_whole};
use crate::bridge::Bridge;

/// A request that passed the transforms and may now wait for an agent.
pub(crate) struct Prepared {
    pub prompt: Prompt,
    /// The ACP model id the request's model resolved to (what the agent is set to).
    pub model_id: String,
    /// The images that go with the prompt.
    pub images: Vec<Image>,
    pub head: MessageHead,
    /// Where the turn runs.
    pub placement: Placement,
}

/// Where a turn runs: the transport the policy selected, with what it holds for this turn.
pub(crate) enum Placement {
    /// A fresh agent process from the pool, sent the whole conversation.
    PerTurn,
    /// The resident transport: the conversation's session, leased for this turn.
    Resident(Arc<Resident>, Lease),
}

/// Serializes the request and validates its model. On the resident transport this also finds
/// the conversation's session (waiting for its running turn) and serializes only what that
/// session has not seen; `conversation` is the client's conversation key.
pub(crate) async fn prepare(
    bridge: &Bridge,
    body: String,
    conversation: Option<String>,
) -> Result<Prepared, Failure> {
    let (UnseenPrompt { prompt, images, .. }, model_id, placement) = match &bridge.resident {
        Some(resident) => {
            let (unseen, model_id, lease) =
                resident.prepare(&bridge.codec, body, conversation).await?;
            (
                unseen,
                model_id,
                Placement::Resident(resident.clone(), lease),
            )
        }
        None => {
            let (unseen, model_id) = serialize_whole(&bridge.codec, body).await?;
            (unseen, model_id, Placement::PerTurn)
        }
    };
    let head = MessageHead {
        id: message_id(),
        model: prompt.model.clone(),
        // `message_start` goes out before the agent answers: its usage is the estimate.
        usage: Usage::estimated(prompt.input_tokens, 1),
    };
    // The admission resolved the model already; only a path that admitted nothing asks again.
    let model_id = match model_id {
        Some(model_id) => model_id,
        None => resolve_model(&bridge.codec, &prompt.model).await?,
    };
    Ok(Prepared {
        model_id,
        prompt,
        images,
        head,
        placement,
    })
}

/// `msg_` + 24 random hex digits.
fn message_id() -> String {
    let mut bytes = [0u8; 12];
    if getrandom::fill(&mut bytes).is_err() {
        // No entropy source: fall back to time and a counter (ids need uniqueness, not secrecy).
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let count = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        bytes[..8].copy_from_slice(&(nanos as u64).to_le_bytes());
        bytes[8..].copy_from_slice(&(count as u32).to_le_bytes());
    }
    format!("msg_{}", hex::encode(bytes))
}

impl Placement {
    /// After an accepted reply: the resident session keeps the conversation's new history
    /// (a subagent's is released when `reply` is its final answer, see `Lease::commit`).
    pub(crate) fn commit(&mut self, reply: &devin_bridge_types::Reply) {
        if let Placement::Resident(_, lease) = self {
            lease.commit(matches!(reply, devin_bridge_types::Reply::Text(_)));
        }
    }
}
