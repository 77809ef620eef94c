//! A request made ready for an agent: serialized, its model resolved, and its place (a
//! per-turn agent or a leased resident session) chosen. The walk goes one way: on the
//! per-turn transport this module serializes the whole request, on the resident transport the
//! resident sessions serialize what the conversation's session has not seen; both through
//! `serialize`, the one path to the serializer. The [`Placement`] comes back by value, for the
//! turn to own.

use devin_bridge_engine::{Image, MessageHead, Prompt, UnseenPrompt};
use devin_bridge_types::{Failure, Usage};

use super::serialize::{resolve_model, serialize_whole, Codec};
use crate::conversation::ConversationKey;
use crate::sessions::{Placement, Sessions};

/// A request that passed the transforms and may now wait for an agent.
pub(crate) struct Prepared {
    pub prompt: Prompt,
    /// The ACP model id the request's model resolved to (what the agent is set to).
    pub model_id: String,
    /// The images that go with the prompt.
    pub images: Vec<Image>,
    pub head: MessageHead,
    /// Where the turn runs, handed to the turn by value.
    pub placement: Placement,
}

/// Serializes the request and validates its model. On the resident transport this also finds
/// the conversation's session (waiting for its running turn) and serializes only what that
/// session has not seen; `key` is the client's conversation key.
pub(crate) async fn prepare(
    sessions: &Sessions,
    codec: &Codec,
    body: String,
    key: Option<ConversationKey>,
) -> Result<Prepared, Failure> {
    let (UnseenPrompt { prompt, images, .. }, model_id, placement) = match &sessions.resident {
        Some(resident) => {
            let (unseen, model_id, lease) = resident.prepare(codec, body, key).await?;
            (
                unseen,
                model_id,
                Placement::Resident(resident.clone(), lease),
            )
        }
        None => {
            let (unseen, model_id) = serialize_whole(codec, body).await?;
            (unseen, model_id, sessions.per_turn())
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
        None => resolve_model(codec, &prompt.model).await?,
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
