//! SSE framing of the watch stream, done in the `sse` transform component: the bytes of the
//! stream are untrusted, so they are cut into events inside the wasm sandbox, and only complete
//! events (plus the unconsumed tail) come back to the host.

use crate::policy::OutpostPolicy;
use devin_bridge_engine::{Component, EngineError, SseEvent, TransformCalls, TransformKind};
use devin_bridge_policy::ModePolicy;

/// Why a chunk could not be framed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FramingError {
    /// The stream broke the framing rules (too large an event, not UTF-8): drop the stream.
    #[error("unusable watch stream ({code}): {message}")]
    Stream { code: String, message: String },
    /// The component itself failed (trap, deadline).
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// The `sse` component of a policy.
pub(crate) struct ComponentFramer {
    component: Component,
    max_event_bytes: u32,
}

impl ComponentFramer {
    /// Loads the policy's `sse` component (compiled once, cached like every component).
    pub(crate) fn load(policy: &OutpostPolicy, max_event_bytes: u32) -> Result<Self, EngineError> {
        // One watch stream frames one chunk at a time: a pool of two instances is plenty, and
        // the pool's size is most of what the engine keeps resident (a worker's memory budget
        // is tight: many of them run per machine).
        let mut limits = policy.limits;
        limits.max_instances = limits.max_instances.min(2);
        let config = policy.engine_config();
        let component = devin_bridge_engine::load_one(
            config.location(TransformKind::Sse),
            limits,
            TransformKind::Sse,
        )?;
        Ok(Self {
            component,
            max_event_bytes,
        })
    }
}

impl ComponentFramer {
    /// `buffer` is the previous tail followed by new bytes: returns the complete events and the
    /// new tail.
    pub(crate) fn frame(&self, buffer: Vec<u8>) -> Result<(Vec<SseEvent>, Vec<u8>), FramingError> {
        match self.component.parse_events(buffer, self.max_event_bytes)? {
            Ok(frames) => Ok((frames.events, frames.tail)),
            Err(failure) => Err(FramingError::Stream {
                code: failure.code,
                message: failure.message,
            }),
        }
    }
}
