//! Borrowing serde shapes of the Anthropic Messages wire format.
//!
//! Field order is declaration order, so the rendered bytes are stable and follow the order
//! Anthropic itself uses. Everything borrows from the reply: a 1 MB text is escaped straight
//! into the output buffer without an intermediate copy.

use serde::Serialize;

use crate::tool_input::ToolInput;
use crate::MessageHead;

/// Anthropic reports `output_tokens: 1` in `message_start`, before anything was generated;
/// the real count follows in `message_delta`.
const START_OUTPUT_TOKENS: u32 = 1;

/// The only content block of a reply is always block 0.
const BLOCK_INDEX: u32 = 0;

#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StopReason {
    EndTurn,
    ToolUse,
}

#[derive(Serialize)]
struct WireUsage {
    input_tokens: u32,
    output_tokens: u32,
}

#[derive(Serialize)]
pub(crate) struct Ping {
    #[serde(rename = "type")]
    kind: &'static str,
}

impl Ping {
    pub(crate) fn new() -> Self {
        Self { kind: "ping" }
    }
}

#[derive(Serialize)]
pub(crate) struct MessageStart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: StartMessage<'a>,
}

#[derive(Serialize)]
struct StartMessage<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    content: [(); 0],
    model: &'a str,
    stop_reason: Option<StopReason>,
    stop_sequence: Option<&'static str>,
    usage: WireUsage,
}

impl<'a> MessageStart<'a> {
    pub(crate) fn new(head: &'a MessageHead) -> Self {
        Self {
            kind: "message_start",
            message: StartMessage {
                id: &head.id,
                kind: "message",
                role: "assistant",
                content: [],
                model: &head.model,
                stop_reason: None,
                stop_sequence: None,
                usage: WireUsage {
                    input_tokens: head.usage.input_tokens,
                    output_tokens: START_OUTPUT_TOKENS,
                },
            },
        }
    }
}

/// `content_block` of `content_block_start`: a tool block starts with an empty input,
/// which the single `input_json_delta` then fills.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock<'a> {
    Text {
        text: &'static str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Empty,
    },
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
pub(crate) struct BlockStart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    index: u32,
    content_block: StartBlock<'a>,
}

impl<'a> BlockStart<'a> {
    pub(crate) fn text() -> Self {
        Self::new(StartBlock::Text { text: "" })
    }

    pub(crate) fn tool_use(id: &'a str, name: &'a str) -> Self {
        Self::new(StartBlock::ToolUse {
            id,
            name,
            input: Empty {},
        })
    }

    fn new(content_block: StartBlock<'a>) -> Self {
        Self {
            kind: "content_block_start",
            index: BLOCK_INDEX,
            content_block,
        }
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Delta<'a> {
    TextDelta { text: &'a str },
    InputJsonDelta { partial_json: &'a str },
}

#[derive(Serialize)]
pub(crate) struct BlockDelta<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    index: u32,
    delta: Delta<'a>,
}

impl<'a> BlockDelta<'a> {
    pub(crate) fn text(text: &'a str) -> Self {
        Self::new(Delta::TextDelta { text })
    }

    pub(crate) fn input_json(partial_json: &'a str) -> Self {
        Self::new(Delta::InputJsonDelta { partial_json })
    }

    fn new(delta: Delta<'a>) -> Self {
        Self {
            kind: "content_block_delta",
            index: BLOCK_INDEX,
            delta,
        }
    }
}

#[derive(Serialize)]
pub(crate) struct BlockStop {
    #[serde(rename = "type")]
    kind: &'static str,
    index: u32,
}

impl BlockStop {
    pub(crate) fn new() -> Self {
        Self {
            kind: "content_block_stop",
            index: BLOCK_INDEX,
        }
    }
}

#[derive(Serialize)]
pub(crate) struct MessageDelta {
    #[serde(rename = "type")]
    kind: &'static str,
    delta: StopDelta,
    usage: OutputUsage,
}

#[derive(Serialize)]
struct StopDelta {
    stop_reason: StopReason,
    stop_sequence: Option<&'static str>,
}

#[derive(Serialize)]
struct OutputUsage {
    output_tokens: u32,
}

impl MessageDelta {
    pub(crate) fn new(stop_reason: StopReason, output_tokens: u32) -> Self {
        Self {
            kind: "message_delta",
            delta: StopDelta {
                stop_reason,
                stop_sequence: None,
            },
            usage: OutputUsage { output_tokens },
        }
    }
}

#[derive(Serialize)]
pub(crate) struct MessageStop {
    #[serde(rename = "type")]
    kind: &'static str,
}

impl MessageStop {
    pub(crate) fn new() -> Self {
        Self {
            kind: "message_stop",
        }
    }
}

/// The non-streaming Messages response.
#[derive(Serialize)]
pub(crate) struct Body<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: &'a str,
    content: [BodyBlock<'a>; 1],
    stop_reason: StopReason,
    stop_sequence: Option<&'static str>,
    usage: WireUsage,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum BodyBlock<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a ToolInput,
    },
}

impl<'a> Body<'a> {
    pub(crate) fn new(
        head: &'a MessageHead,
        block: BodyBlock<'a>,
        stop_reason: StopReason,
    ) -> Self {
        Self {
            id: &head.id,
            kind: "message",
            role: "assistant",
            model: &head.model,
            content: [block],
            stop_reason,
            stop_sequence: None,
            usage: WireUsage {
                input_tokens: head.usage.input_tokens,
                output_tokens: head.usage.output_tokens,
            },
        }
    }
}
