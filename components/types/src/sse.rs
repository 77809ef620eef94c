//! The records of the WIT `sse` interface.

use serde::{Deserialize, Serialize};
#[cfg(feature = "wasmtime")]
use wasmtime::component::{ComponentType, Lift, Lower};

use crate::Usage;

/// What `message_start` and the JSON body say about the message as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct MessageHead {
    pub id: String,
    pub model: String,
    pub usage: Usage,
}

/// One complete server-sent event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct SseEvent {
    /// The `event:` field; `message` when absent or empty.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last `id:` field of the event, if any.
    pub id: Option<String>,
}

/// What `parse_events` made of a buffer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct SseFrames {
    pub events: Vec<SseEvent>,
    /// The bytes after the last complete event: pass them back, followed by the bytes received
    /// next, on the next call.
    pub tail: Vec<u8>,
}
