//! Every call of the transforms' WIT functions as data, and what it answers.
//!
//! [`Call`] is one value per WIT function call, with its arguments in the plain types of
//! `devin-bridge-types`; the engine binds it to the component's typed function, and (with the
//! `native` feature) [`Call::run_native`] answers it from the plain Rust library. [`Answer`] is
//! the data form of what either answers, serialized as the fixtures' `expect`.

use std::sync::Arc;

use devin_bridge_types::{
    Failure, MessageHead, Parsed, Prompt, PromptOptions, Reply, ResolvedModel, Resume,
    ResumedPrompt, SafeguardStatus, SseFrames, ToolCall, UnseenPrompt, Usage,
};
use serde::{Deserialize, Serialize};

use crate::TransformKind;

/// One call to a transform, with its arguments: the data form of the typed calls, which the
/// golden corpus, the differential tests, the fuzz targets and the benchmarks drive. It
/// deserializes from `{"call": "<name>", "args": {...}}` once the arguments are in their plain
/// form (see [`crate::fixture::decode_call`], which turns the fixtures' text and byte encodings into it).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "call", content = "args", rename_all = "snake_case")]
pub enum Call {
    Serialize {
        request: String,
    },
    /// The request is shared, not owned: the resident transport keeps it for a replay and may
    /// serialize it more than once, and a request can be megabytes.
    SerializeUnseen {
        request: Arc<String>,
        #[serde(flatten)]
        options: PromptOptions,
    },
    SerializeResumed {
        continuation: String,
        resume: Resume,
        #[serde(flatten)]
        options: PromptOptions,
    },
    Repair {
        prompt: String,
        rejection: Failure,
    },
    Parse {
        output: String,
        tools: String,
        id_seed: String,
        /// The most envelopes the reply may hold.
        max_calls: u32,
    },
    /// A reply stream fed `chunks` in order: every push's answer, then the end (the data form
    /// of a streamed turn, for the corpus, the differential and the fuzz target).
    ParseStream {
        chunks: Vec<String>,
        tools: String,
        id_seed: String,
        max_calls: u32,
        /// The end's narration verdict is not asked for (it answers false), as a turn without
        /// tools skips it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        skip_narration: bool,
    },
    NarratesUnexecutedAction {
        output: String,
    },
    ParseReview {
        output: String,
    },
    StreamStart {
        head: MessageHead,
    },
    StreamPing,
    StreamFinish {
        reply: Reply,
        usage: Usage,
        #[serde(default)]
        safeguard: Option<SafeguardStatus>,
    },
    StreamText {
        first: bool,
        text: String,
    },
    StreamFinishAfterText {
        tail: String,
        calls: Vec<ToolCall>,
        usage: Usage,
        #[serde(default)]
        safeguard: Option<SafeguardStatus>,
    },
    RenderStream {
        head: MessageHead,
        reply: Reply,
        #[serde(default)]
        safeguard: Option<SafeguardStatus>,
    },
    RenderJson {
        head: MessageHead,
        reply: Reply,
        #[serde(default)]
        safeguard: Option<SafeguardStatus>,
    },
    ErrorEvent {
        failure: Failure,
    },
    ErrorBody {
        failure: Failure,
    },
    AgentErrorMessage {
        raw: String,
    },
    ParseEvents {
        buffer: Vec<u8>,
        max_event_bytes: u32,
    },
    Validate {
        reference: String,
        catalog: String,
    },
    ClientEnvironment {
        settings: Vec<(String, String)>,
        catalog: String,
    },
    Resolve {
        requested: String,
        catalog: String,
    },
    ListModels {
        catalog: String,
        #[serde(default)]
        vision: bool,
    },
    ContextWindows {
        catalog: String,
    },
    Judge {
        calls: Vec<ToolCall>,
        classifier_context: String,
        /// The conversation's calls before the reply; a fixture without them has none.
        #[serde(default)]
        earlier_calls: Vec<ToolCall>,
    },
}

/// What a reply stream answered: each push's released text (or its failure), then its end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamedParse {
    pub pushes: Vec<Result<String, Failure>>,
    pub end: Result<StreamedEnd, Failure>,
}

/// A stream's successful end: the shown text not released by the pushes, `parse`'s reply for
/// the concatenated chunks, and the narration verdict of a text reply.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamedEnd {
    pub tail: String,
    pub reply: Parsed,
    pub narrates: bool,
}

/// What a call answers: its value, or the failure the transform returned (a function that
/// cannot fail always answers `Ok`). Serialized as `{"ok": value}` / `{"err": failure}`, it is
/// the fixtures' `expect`.
pub type Answer = Result<Output, Failure>;

/// Defines [`Output`] and the `From` of each variant's type, so a typed function's answer
/// becomes an output with `.into()`.
macro_rules! outputs {
    ($($(#[$doc:meta])* $variant:ident($type:ty),)*) => {
        /// The value of a successful call, one variant per result type of the WIT functions.
        /// Serialized as the value alone (the fixtures' `ok`).
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum Output {
            $($(#[$doc])* $variant($type),)*
        }

        $(impl From<$type> for Output {
            fn from(value: $type) -> Self {
                Output::$variant(value)
            }
        })*
    };
}

outputs! {
    Prompt(Prompt),
    Unseen(UnseenPrompt),
    Resumed(ResumedPrompt),
    /// A prompt, an event stream or body, a model id or listing, a canonical review.
    Text(String),
    /// A parsed agent output: the reply and its recoveries.
    Parsed(Parsed),
    /// What a reply stream answered, push by push and at its end.
    Streamed(StreamedParse),
    Flag(bool),
    Environment(Vec<(String, String)>),
    Resolved(ResolvedModel),
    Frames(SseFrames),
    /// Context windows by ACP model id.
    Windows(Vec<(String, u64)>),
    /// The safeguard judge's verdicts.
    Safeguard(SafeguardStatus),
}

impl Call {
    /// The transform that answers this call.
    pub fn transform(&self) -> TransformKind {
        match self {
            Call::Serialize { .. }
            | Call::SerializeUnseen { .. }
            | Call::SerializeResumed { .. }
            | Call::Repair { .. } => TransformKind::Serializer,
            Call::Parse { .. }
            | Call::ParseStream { .. }
            | Call::NarratesUnexecutedAction { .. }
            | Call::ParseReview { .. } => TransformKind::Envelope,
            Call::StreamStart { .. }
            | Call::StreamPing
            | Call::StreamFinish { .. }
            | Call::StreamText { .. }
            | Call::StreamFinishAfterText { .. }
            | Call::RenderStream { .. }
            | Call::RenderJson { .. }
            | Call::ErrorEvent { .. }
            | Call::ErrorBody { .. }
            | Call::AgentErrorMessage { .. }
            | Call::ParseEvents { .. } => TransformKind::Sse,
            Call::Validate { .. }
            | Call::ClientEnvironment { .. }
            | Call::Resolve { .. }
            | Call::ListModels { .. }
            | Call::ContextWindows { .. } => TransformKind::ModelAlias,
            Call::Judge { .. } => TransformKind::Safeguard,
        }
    }
}
