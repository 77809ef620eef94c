//! The Anthropic Messages wire format: borrowing serde shapes for the small events, and
//! hand-written JSON for the parts that carry the reply's content.
//!
//! Field order is declaration (or writing) order, so the rendered bytes are stable and follow
//! the order Anthropic itself uses. Nothing is copied out of the reply: a 1 MB text is escaped
//! straight into the output buffer.
//!
//! The content-carrying parts (`content_block_delta` and the JSON body) are written by hand
//! because `serde_json` can only escape a string through its byte-at-a-time path; the string
//! literals in them go through [`crate::escape`], which writes the same bytes. The unit tests
//! hold each hand-written shape to the bytes `serde_json` writes for an equivalent derived
//! struct, so the two ways of writing cannot drift apart.

use serde::Serialize;

use crate::frame::Frame;
use crate::safeguard::Results;
use crate::tool_input::ToolInput;
use devin_bridge_types::{MessageHead, Reply, ReplyBlock, SafeguardStatus, Usage};

/// Anthropic reports `output_tokens: 1` in `message_start`, before anything was generated;
/// the real count follows in `message_delta`.
const START_OUTPUT_TOKENS: u32 = 1;

#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StopReason {
    EndTurn,
    ToolUse,
}

impl StopReason {
    /// `tool_use` when the reply asks the client to run at least one tool. A block list
    /// without a call asks for nothing, so it ends the turn like text: `tool_use` without a
    /// `tool_use` block would leave a client waiting for results it has no call to produce.
    pub(crate) fn of(reply: &Reply) -> Self {
        if reply.calls().next().is_some() {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        }
    }

    fn as_json(self) -> &'static str {
        match self {
            StopReason::EndTurn => "\"end_turn\"",
            StopReason::ToolUse => "\"tool_use\"",
        }
    }
}

/// Every usage object the bridge writes carries all four counts, so a client never has to
/// treat an absent cache count differently from 0.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WireUsage {
    input_tokens: u32,
    cache_creation_input_tokens: u32,
    cache_read_input_tokens: u32,
    output_tokens: u32,
}

impl WireUsage {
    pub(crate) fn new(usage: &Usage) -> Self {
        Self {
            input_tokens: usage.input_tokens,
            cache_creation_input_tokens: usage.cache_creation_input_tokens,
            cache_read_input_tokens: usage.cache_read_input_tokens,
            output_tokens: usage.output_tokens,
        }
    }

    /// The counts `message_start` reports: the input side is known, the output has not been
    /// counted yet.
    fn at_start(usage: &Usage) -> Self {
        Self {
            output_tokens: START_OUTPUT_TOKENS,
            ..Self::new(usage)
        }
    }
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
                usage: WireUsage::at_start(&head.usage),
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
    index: usize,
    content_block: StartBlock<'a>,
}

impl<'a> BlockStart<'a> {
    pub(crate) fn text(index: usize) -> Self {
        Self::new(index, StartBlock::Text { text: "" })
    }

    pub(crate) fn tool_use(index: usize, id: &'a str, name: &'a str) -> Self {
        Self::new(
            index,
            StartBlock::ToolUse {
                id,
                name,
                input: Empty {},
            },
        )
    }

    fn new(index: usize, content_block: StartBlock<'a>) -> Self {
        Self {
            kind: "content_block_start",
            index,
            content_block,
        }
    }
}

/// The data of `content_block_delta` with a `text_delta`:
/// `{"type":"content_block_delta","index":i,"delta":{"type":"text_delta","text":"…"}}`.
pub(crate) fn text_delta(frame: &mut Frame, index: usize, text: &str) {
    frame.raw("{\"type\":\"content_block_delta\",\"index\":");
    frame.number(index);
    frame.raw(",\"delta\":{\"type\":\"text_delta\",\"text\":");
    frame.string(text);
    frame.raw("}}");
}

/// The data of `content_block_delta` with an `input_json_delta` whose `partial_json` is the
/// whole input: `{"type":"content_block_delta","index":i,"delta":{"type":"input_json_delta",
/// "partial_json":"…"}}`.
pub(crate) fn input_json_delta(frame: &mut Frame, index: usize, json: &str) {
    frame.raw("{\"type\":\"content_block_delta\",\"index\":");
    frame.number(index);
    frame.raw(",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":");
    frame.string(json);
    frame.raw("}}");
}

#[derive(Serialize)]
pub(crate) struct BlockStop {
    #[serde(rename = "type")]
    kind: &'static str,
    index: usize,
}

impl BlockStop {
    pub(crate) fn new(index: usize) -> Self {
        Self {
            kind: "content_block_stop",
            index,
        }
    }
}

#[derive(Serialize)]
pub(crate) struct MessageDelta<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    delta: StopDelta<'a>,
    usage: WireUsage,
}

#[derive(Serialize)]
struct StopDelta<'a> {
    stop_reason: StopReason,
    stop_sequence: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    safeguard_results: Option<Results<'a>>,
}

impl<'a> MessageDelta<'a> {
    /// The usage here is the whole turn's, all four counts: clients that read usage only
    /// from the last event see the input and cache counts too. With `safeguard`, the delta
    /// carries the judge's verdicts (`safeguard_results`).
    pub(crate) fn new(
        stop_reason: StopReason,
        usage: &Usage,
        safeguard: Option<&'a SafeguardStatus>,
    ) -> Self {
        Self {
            kind: "message_delta",
            delta: StopDelta {
                stop_reason,
                stop_sequence: None,
                safeguard_results: safeguard.map(Results),
            },
            usage: WireUsage::new(usage),
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

/// The non-streaming Messages response:
/// `{"id":…,"type":"message","role":"assistant","model":…,"content":[…],"stop_reason":…,
/// "stop_sequence":null,"usage":{…}}`, with a text block `{"type":"text","text":…}` for a text
/// reply, or for a reply that calls tools one block per reply block, in order: a text block
/// per stretch of prose, a `{"type":"tool_use","id":…,"name":…,"input":{…}}` per call; with
/// `safeguard`, a last key `safeguard_results`.
pub(crate) fn body(
    frame: &mut Frame,
    head: &MessageHead,
    reply: &Reply,
    safeguard: Option<&SafeguardStatus>,
) {
    frame.raw("{\"id\":");
    frame.string(&head.id);
    frame.raw(",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    frame.string(&head.model);
    frame.raw(",\"content\":[");
    let text_block = |frame: &mut Frame, text: &str| {
        frame.raw("{\"type\":\"text\",\"text\":");
        frame.string(text);
        frame.raw("}");
    };
    match reply {
        Reply::Text(text) => text_block(frame, text),
        Reply::Tools(blocks) => {
            for (index, block) in blocks.iter().enumerate() {
                if index > 0 {
                    frame.raw(",");
                }
                match block {
                    ReplyBlock::Text(text) => text_block(frame, text),
                    ReplyBlock::Call(call) => {
                        frame.raw("{\"type\":\"tool_use\",\"id\":");
                        frame.string(&call.id);
                        frame.raw(",\"name\":");
                        frame.string(&call.name);
                        frame.raw(",\"input\":");
                        // Validated and compacted: one well-formed JSON object, embedded as
                        // it is.
                        frame.raw(ToolInput::parse(&call.input).json_text());
                        frame.raw("}");
                    }
                }
            }
        }
    }
    frame.raw("],\"stop_reason\":");
    frame.raw(StopReason::of(reply).as_json());
    frame.raw(",\"stop_sequence\":null,\"usage\":");
    frame.json(&WireUsage::new(&head.usage));
    if let Some(status) = safeguard {
        frame.raw(",\"safeguard_results\":");
        frame.json(&Results(status));
    }
    frame.raw("}");
}

#[cfg(test)]
mod tests {
    //! The hand-written shapes against `serde_json`'s rendering of derived structs.

    use super::*;
    use crate::ToolCall;
    use serde_json::value::RawValue;

    #[derive(Serialize)]
    struct SerdeBlockDelta<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        index: usize,
        delta: SerdeDelta<'a>,
    }

    #[derive(Serialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    enum SerdeDelta<'a> {
        TextDelta { text: &'a str },
        InputJsonDelta { partial_json: &'a str },
    }

    #[derive(Serialize)]
    struct SerdeBody<'a> {
        id: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
        role: &'static str,
        model: &'a str,
        content: Vec<SerdeBodyBlock<'a>>,
        stop_reason: StopReason,
        stop_sequence: Option<&'static str>,
        usage: WireUsage,
    }

    #[derive(Serialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    enum SerdeBodyBlock<'a> {
        Text {
            text: &'a str,
        },
        ToolUse {
            id: &'a str,
            name: &'a str,
            input: Box<RawValue>,
        },
    }

    fn written(write: impl FnOnce(&mut Frame)) -> String {
        let mut frame = Frame::with_capacity(0);
        write(&mut frame);
        frame.into_string()
    }

    fn serde_body(head: &MessageHead, reply: &Reply) -> String {
        let content = match reply {
            Reply::Text(text) => vec![SerdeBodyBlock::Text { text }],
            Reply::Tools(blocks) => blocks
                .iter()
                .map(|block| match block {
                    ReplyBlock::Text(text) => SerdeBodyBlock::Text { text },
                    ReplyBlock::Call(call) => SerdeBodyBlock::ToolUse {
                        id: &call.id,
                        name: &call.name,
                        input: RawValue::from_string(
                            ToolInput::parse(&call.input).json_text().to_owned(),
                        )
                        .unwrap(),
                    },
                })
                .collect(),
        };
        serde_json::to_string(&SerdeBody {
            id: &head.id,
            kind: "message",
            role: "assistant",
            model: &head.model,
            content,
            stop_reason: StopReason::of(reply),
            stop_sequence: None,
            usage: WireUsage::new(&head.usage),
        })
        .unwrap()
    }

    const TEXTS: [&str; 6] = [
        "",
        "plain",
        "line 1\nline 2\r\n\t\"q\" \\ \u{0}\u{1f}\u{7f} é中😀 </tag>",
        "{\"command\":\"npm test\",\"n\":[1,2.50e3,null]}",
        "{}",
        "\"\"\"\\\\\\",
    ];

    #[test]
    fn deltas_match_serde() {
        for text in TEXTS {
            for index in [0, 1, 9, 10, 12_345, usize::MAX] {
                let text_expected = serde_json::to_string(&SerdeBlockDelta {
                    kind: "content_block_delta",
                    index,
                    delta: SerdeDelta::TextDelta { text },
                })
                .unwrap();
                assert_eq!(
                    written(|frame| text_delta(frame, index, text)),
                    text_expected
                );
                let json_expected = serde_json::to_string(&SerdeBlockDelta {
                    kind: "content_block_delta",
                    index,
                    delta: SerdeDelta::InputJsonDelta { partial_json: text },
                })
                .unwrap();
                assert_eq!(
                    written(|frame| input_json_delta(frame, index, text)),
                    json_expected
                );
            }
        }
    }

    #[test]
    fn body_matches_serde() {
        let usage = Usage {
            input_tokens: 100,
            output_tokens: 20,
            cache_read_input_tokens: 3,
            cache_creation_input_tokens: 4,
        };
        let head = MessageHead {
            id: "msg_\"1\"\n".into(),
            model: "m/\\é".into(),
            usage,
        };
        let call = |id: &str, input: &str| ToolCall {
            id: id.into(),
            name: "Na\"me\u{1}".into(),
            input: input.into(),
        };
        let mut replies: Vec<Reply> = TEXTS.iter().map(|t| Reply::Text((*t).into())).collect();
        replies.push(Reply::Tools(Vec::new()));
        replies.push(Reply::of_calls([call("a", "{ \"x\" : 1 }")]));
        replies.push(Reply::of_calls([
            call("a", r#"{"k":"v"}"#),
            call("b\n", "not json"),
            call("c", r#"{"nested":{"deep":[{"e":"\u00e9"}]}}"#),
        ]));
        replies.push(Reply::Tools(vec![
            ReplyBlock::Text("Let me \"look\".\n".into()),
            ReplyBlock::Call(call("a", r#"{"k":"v"}"#)),
            ReplyBlock::Text("then é".into()),
            ReplyBlock::Call(call("b", "{}")),
            ReplyBlock::Text("done".into()),
        ]));
        for reply in &replies {
            assert_eq!(
                written(|frame| body(frame, &head, reply, None)),
                serde_body(&head, reply),
                "reply {reply:?}"
            );
        }
    }

    #[test]
    fn usage_has_four_counts_in_anthropic_order() {
        let usage = Usage {
            input_tokens: 1,
            output_tokens: 2,
            cache_read_input_tokens: 3,
            cache_creation_input_tokens: 4,
        };
        assert_eq!(
            serde_json::to_string(&WireUsage::new(&usage)).unwrap(),
            r#"{"input_tokens":1,"cache_creation_input_tokens":4,"cache_read_input_tokens":3,"output_tokens":2}"#
        );
        assert_eq!(
            serde_json::to_string(&WireUsage::at_start(&usage)).unwrap(),
            r#"{"input_tokens":1,"cache_creation_input_tokens":4,"cache_read_input_tokens":3,"output_tokens":1}"#
        );
    }

    #[test]
    fn stop_reason_follows_the_reply() {
        let call = ToolCall {
            id: "i".into(),
            name: "n".into(),
            input: "{}".into(),
        };
        assert_eq!(
            StopReason::of(&Reply::Text("x".into())),
            StopReason::EndTurn
        );
        assert_eq!(StopReason::of(&Reply::Tools(vec![])), StopReason::EndTurn);
        assert_eq!(
            StopReason::of(&Reply::Tools(vec![ReplyBlock::Text("only prose".into())])),
            StopReason::EndTurn
        );
        assert_eq!(
            StopReason::of(&Reply::of_calls([call.clone()])),
            StopReason::ToolUse
        );
        assert_eq!(
            StopReason::of(&Reply::Tools(vec![
                ReplyBlock::Text("first".into()),
                ReplyBlock::Call(call.clone())
            ])),
            StopReason::ToolUse
        );
        for reason in [StopReason::EndTurn, StopReason::ToolUse] {
            assert_eq!(reason.as_json(), serde_json::to_string(&reason).unwrap());
        }
    }
}
