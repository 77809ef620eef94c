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

use devin_bridge_types::TransformKind;

/// Defines [`Call`] and [`Call::transform`] from the table (`functions`).
macro_rules! define_call {
    ($(
        $(#[$doc:meta])*
        $variant:ident $({ $($(#[$field_attr:meta])* $field:ident: $type:ty),* $(,)? })?
            => $kind:ident $(wit[$($wit:tt)*])? $(bind[$($bind:tt)*])?
                $(guest($answer:expr))? native($native:expr);
    )*) => {
        /// One call to a transform, with its arguments: the data form of the typed calls, which
        /// the golden corpus, the differential tests, the fuzz targets and the benchmarks drive.
        /// It deserializes from `{"call": "<name>", "args": {...}}` once the arguments are in
        /// their plain form (see [`crate::fixture::decode_call`], which turns the fixtures' text
        /// and byte encodings into it). Defined by the table of the transforms' calls
        /// (`functions`), with the engine's bindings and the native answers.
        #[derive(Debug, Clone, PartialEq, Deserialize)]
        #[serde(tag = "call", content = "args", rename_all = "snake_case")]
        pub enum Call {
            $(
                $(#[$doc])*
                $variant $({ $($(#[$field_attr])* $field: $type),* })?,
            )*
        }

        impl Call {
            /// The transform that answers this call.
            pub fn transform(&self) -> TransformKind {
                match self {
                    $(Call::$variant { .. } => TransformKind::$kind,)*
                }
            }
        }
    };
}

devin_bridge_types::transform_functions!(define_call! {});

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

/// A typed function's answer as an [`Answer`]: a `Result<T, Failure>` as it is, a value of a
/// function that cannot fail as `Ok`.
pub trait IntoAnswer {
    fn into_answer(self) -> Answer;
}

impl<T: Into<Output>> IntoAnswer for Result<T, Failure> {
    fn into_answer(self) -> Answer {
        self.map(Into::into)
    }
}

/// The results of the functions that cannot fail.
macro_rules! infallible {
    ($($type:ty),* $(,)?) => {$(
        impl IntoAnswer for $type {
            fn into_answer(self) -> Answer {
                Ok(self.into())
            }
        }
    )*};
}

infallible!(String, bool, SafeguardStatus, StreamedParse);
