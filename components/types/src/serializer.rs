//! The records of the WIT `serializer` interface.

use serde::{Deserialize, Serialize};
#[cfg(feature = "wasmtime")]
use wasmtime::component::{ComponentType, Lift, Lower};

use crate::ToolCall;

/// The prompt for one agent turn, and what the later transforms need to know about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct Prompt {
    /// The whole prompt: framing, `[Execution Trace]`, then the serialized request.
    pub text: String,
    /// The request's `tools` array as compact JSON (`[]` when absent), for the envelope parser.
    pub tools: String,
    /// `max(1, ceil(chars / 4))` of the trace (the text after the framing).
    #[cfg_attr(feature = "wasmtime", component(name = "input-tokens"))]
    pub input_tokens: u32,
    /// 24 hex digits derived from the trace; seeds deterministic tool-call ids.
    #[cfg_attr(feature = "wasmtime", component(name = "id-seed"))]
    pub id_seed: String,
    /// The request's `model`, verbatim.
    pub model: String,
    /// The request's `stream` flag, false when absent.
    pub stream: bool,
    /// The request's `tool_choice.disable_parallel_tool_use`: the `[Tool Choice]` section asks
    /// for at most one tool per output, and the host accepts at most one envelope.
    #[serde(default)]
    #[cfg_attr(feature = "wasmtime", component(name = "single-tool-call"))]
    pub single_tool_call: bool,
    /// The `classifier_context` of the request's `dangerous_tool_use` safeguard, as compact
    /// JSON text; none when the request asks for no such safeguard. It is not in `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "wasmtime", component(name = "classifier-context"))]
    pub classifier_context: Option<String>,
    /// The request's earlier tool calls when it asks for the safeguard (empty otherwise), each
    /// input reduced to its `command`, `file_path` and `notebook_path` string members: what
    /// the judge reads of the conversation. It is not in `text`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "wasmtime", component(name = "earlier-calls"))]
    pub earlier_calls: Vec<ToolCall>,
    /// The effort the request asks for, lowercased (`output_config.effort`, else derived from
    /// an enabled thinking budget); none when it asks for none. It is not in `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// The answer the host may give without an agent turn: some only when the request has,
    /// exactly, the shape of a side request the serializer knows; none otherwise. It is not
    /// in `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "wasmtime", component(name = "local-answer"))]
    pub local_answer: Option<LocalAnswer>,
}

/// A side request's answer, made without the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct LocalAnswer {
    /// What the request asked for (`session_title`).
    pub purpose: String,
    /// The reply's text, as the client expects it (for `session_title`, `{"title":"..."}`).
    pub text: String,
}

/// Which images go with a prompt.
///
/// In a call's data form (the golden fixtures) each number stands beside the other
/// arguments, 0 when absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
#[serde(default)]
pub struct ImageLimits {
    /// Images attached to one prompt at most; 0: the agent takes none, and an image block is
    /// an `unsupported_visual_block` failure.
    #[cfg_attr(feature = "wasmtime", component(name = "max-images"))]
    pub max_images: u32,
    /// Largest image attached, decoded bytes; a larger one stays a placeholder.
    #[cfg_attr(feature = "wasmtime", component(name = "max-image-bytes"))]
    pub max_image_bytes: u32,
}

impl ImageLimits {
    /// No image is accepted.
    pub const NONE: ImageLimits = ImageLimits {
        max_images: 0,
        max_image_bytes: 0,
    };
}

/// How `serialize_unseen` and `serialize_resumed` serialize a request.
///
/// In a call's data form its three numbers stand beside the other arguments, each 0 when
/// absent (`held`, `max_images`, `max_image_bytes`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
#[serde(default)]
pub struct PromptOptions {
    /// Messages the session already holds (0: a new session, the whole prompt).
    pub held: u32,
    /// Which images are attached (none: an image is an `unsupported_visual_block` failure).
    #[serde(flatten)]
    pub images: ImageLimits,
}

impl PromptOptions {
    /// A session that holds `held` messages, for an agent that takes no image.
    pub fn held(held: u32) -> Self {
        Self {
            held,
            images: ImageLimits::NONE,
        }
    }
}

/// An image attached to a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct Image {
    #[cfg_attr(feature = "wasmtime", component(name = "media-type"))]
    pub media_type: String,
    /// Base64, as the request carried it.
    pub data: String,
}

/// A prompt for a session that may already hold the start of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct UnseenPrompt {
    /// `text` is the whole prompt when `held` is 0; otherwise the continuation framing and the
    /// messages after the first `held` ones. The other fields describe the whole request.
    pub prompt: Prompt,
    /// `history[i]`: the identity of the trace up to the end of message `i`. Two requests whose
    /// first `n` messages serialize identically, under the same system prompt and tools, share
    /// `history[..n]`.
    pub history: Vec<String>,
    /// The images that go with the prompt, in the order they appear.
    pub images: Vec<Image>,
    /// One mark per message: what a later request that repeats this one up to the end of the
    /// message needs to be serialized from there on (see `serialize_resumed`).
    pub marks: Vec<MessageMark>,
    /// The tool names the request declares, in request order.
    #[cfg_attr(feature = "wasmtime", component(name = "tool-names"))]
    pub tool_names: Vec<String>,
}

/// Where a message of a request ends, and the state of the trace there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct MessageMark {
    /// The byte offset in the request just after the message's JSON value.
    #[cfg_attr(feature = "wasmtime", component(name = "request-end"))]
    pub request_end: u32,
    /// Characters (Unicode scalar values) of the trace up to the end of the message.
    #[cfg_attr(feature = "wasmtime", component(name = "trace-chars"))]
    pub trace_chars: u64,
    /// The tool-use ids the message introduced.
    #[cfg_attr(feature = "wasmtime", component(name = "tool-uses"))]
    pub tool_uses: Vec<String>,
}

/// What `serialize_resumed` needs to know of the messages before its continuation, all of it
/// from an earlier [`UnseenPrompt`] of a request with the same bytes up to there.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct Resume {
    /// How many messages come before the continuation (at least 1).
    pub messages: u32,
    /// `history[messages - 1]` of the earlier request.
    pub history: String,
    /// `marks[messages - 1].trace_chars` of the earlier request.
    #[cfg_attr(feature = "wasmtime", component(name = "trace-chars"))]
    pub trace_chars: u64,
    /// The tool-use ids of `marks[..messages]`.
    #[cfg_attr(feature = "wasmtime", component(name = "tool-uses"))]
    pub tool_uses: Vec<String>,
    /// The earlier request's `tool_names`.
    #[cfg_attr(feature = "wasmtime", component(name = "tool-names"))]
    pub tool_names: Vec<String>,
}

/// `serialize_unseen`'s answer for a request given as a continuation: the fields that depend
/// on its messages. The rest of the request is the earlier one's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct ResumedPrompt {
    /// The prompt text, as [`UnseenPrompt::prompt`] has it.
    pub text: String,
    #[cfg_attr(feature = "wasmtime", component(name = "input-tokens"))]
    pub input_tokens: u32,
    #[cfg_attr(feature = "wasmtime", component(name = "id-seed"))]
    pub id_seed: String,
    /// The identities of the continuation's messages (of the whole trace up to each of them).
    pub history: Vec<String>,
    /// The marks of the continuation's messages, `request_end` counted from the continuation's
    /// start.
    pub marks: Vec<MessageMark>,
    pub images: Vec<Image>,
    /// The `tool_use` blocks of the continuation's messages, reduced as
    /// [`Prompt::earlier_calls`] are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "wasmtime", component(name = "earlier-calls"))]
    pub earlier_calls: Vec<ToolCall>,
}
