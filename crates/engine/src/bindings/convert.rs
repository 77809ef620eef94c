//! The host side of the WIT boundary: the one place where wasmtime's generated bindings become
//! the plain types of `devin-bridge-types`, and back.
//!
//! `bindgen!` generates a struct of its own for every WIT record (with wasmtime's lifting and
//! lowering derived on it) and cannot be pointed at a type of another crate, so the host has to
//! convert. Each record is listed once below, by its fields; the macro writes both directions,
//! field for field, and a field missing on either side does not compile. The guest side needs
//! no such table: wit-bindgen builds the plain types directly (`devin_bridge_types::guest_bindings!`).

use devin_bridge_types as plain;

use super::envelope_world::exports::devin_bridge::transforms::envelope as wit_envelope;
use super::model_alias_world::exports::devin_bridge::transforms::model_alias as wit_model_alias;
use super::serializer_world::exports::devin_bridge::transforms::serializer as wit_serializer;
use super::sse_world::exports::devin_bridge::transforms::sse as wit_sse;
use super::wit_types;

/// A value of one side of the boundary turned into its twin on the other.
pub(crate) trait Convert<T> {
    fn convert(self) -> T;
}

/// Types that are the same on both sides.
macro_rules! same {
    ($($type:ty),* $(,)?) => {$(
        impl Convert<$type> for $type {
            fn convert(self) -> $type {
                self
            }
        }
    )*};
}

same!(String, bool, u8, u16, u32, u64);

/// Lists, options and pairs convert element by element.
impl<A: Convert<B>, B> Convert<Vec<B>> for Vec<A> {
    fn convert(self) -> Vec<B> {
        self.into_iter().map(Convert::convert).collect()
    }
}

impl<A: Convert<B>, B> Convert<Option<B>> for Option<A> {
    fn convert(self) -> Option<B> {
        self.map(Convert::convert)
    }
}

impl<A: Convert<C>, B: Convert<D>, C, D> Convert<(C, D)> for (A, B) {
    fn convert(self) -> (C, D) {
        (self.0.convert(), self.1.convert())
    }
}

/// Records: `generated => plain { every field }`, converted both ways.
macro_rules! records {
    ($($wit:path => $plain:path { $($field:ident),+ $(,)? })*) => {$(
        impl Convert<$plain> for $wit {
            fn convert(self) -> $plain {
                $plain { $($field: self.$field.convert()),+ }
            }
        }
        impl Convert<$wit> for $plain {
            fn convert(self) -> $wit {
                $wit { $($field: self.$field.convert()),+ }
            }
        }
    )*};
}

records! {
    wit_types::Failure => plain::Failure { code, message, status, repairable }
    wit_types::ToolCall => plain::ToolCall { id, name, input }
    wit_types::Evaluation => plain::Evaluation { outcome, explanation, cited_rule }
    wit_types::ToolVerdict => plain::ToolVerdict { id, verdict }
    wit_types::Usage => plain::Usage {
        input_tokens, output_tokens, cache_read_input_tokens, cache_creation_input_tokens
    }
    wit_serializer::Prompt => plain::Prompt {
        text, tools, input_tokens, id_seed, model, stream, single_tool_call, classifier_context,
        earlier_calls, effort, local_answer
    }
    wit_serializer::LocalAnswer => plain::LocalAnswer { purpose, text }
    wit_serializer::ImageLimits => plain::ImageLimits { max_images, max_image_bytes }
    wit_serializer::PromptOptions => plain::PromptOptions { held, images }
    wit_serializer::Image => plain::Image { media_type, data }
    wit_serializer::UnseenPrompt => plain::UnseenPrompt {
        prompt, history, images, marks, tool_names
    }
    wit_serializer::MessageMark => plain::MessageMark { request_end, trace_chars, tool_uses }
    wit_serializer::Resume => plain::Resume {
        messages, history, trace_chars, tool_uses, tool_names
    }
    wit_serializer::ResumedPrompt => plain::ResumedPrompt {
        text, input_tokens, id_seed, history, marks, images, earlier_calls
    }
    wit_envelope::TextSpan => plain::TextSpan { start, length }
    wit_envelope::ToolReply => plain::ToolReply { blocks, recoveries }
    wit_envelope::StreamEnd => plain::StreamEnd { tail, reply }
    wit_sse::MessageHead => plain::MessageHead { id, model, usage }
    wit_sse::SseEvent => plain::SseEvent { event, data, id }
    wit_sse::SseFrames => plain::SseFrames { events, tail }
    wit_model_alias::ResolvedModel => plain::ResolvedModel { family, model_uid, label, acp_id }
}

/// Variants and enums: `generated => plain { every case }`, a case with a payload written
/// `Case(payload)`; converted both ways, case for case (a case missing on either side does
/// not compile: the matches are exhaustive).
macro_rules! variants {
    ($($wit:path => $plain:path { $($case:ident $(($value:ident))?),+ $(,)? })*) => {$(
        impl Convert<$plain> for $wit {
            fn convert(self) -> $plain {
                type Plain = $plain;
                match self {
                    $(Self::$case $(($value))? => Plain::$case $(($value.convert()))?),+
                }
            }
        }
        impl Convert<$wit> for $plain {
            fn convert(self) -> $wit {
                type Wit = $wit;
                match self {
                    $(Self::$case $(($value))? => Wit::$case $(($value.convert()))?),+
                }
            }
        }
    )*};
}

variants! {
    wit_types::ReplyBlock => plain::ReplyBlock { Text(text), Call(call) }
    wit_types::Reply => plain::Reply { Text(text), Tools(blocks) }
    wit_envelope::ParsedReply => plain::ParsedReply { Text(span), Tools(tools) }
    wit_envelope::ShownPiece => plain::ShownPiece { Separator, Output(span) }
    wit_envelope::Recovery => plain::Recovery {
        UnclosedEnvelope, FencedJson, TrailingComma, StrayProse
    }
    wit_types::SafeguardOutcome => plain::SafeguardOutcome { Flagged, NotFlagged }
    wit_types::CallVerdict => plain::CallVerdict { Evaluated(evaluation), Skipped, Unavailable(reason) }
    wit_types::SafeguardStatus => plain::SafeguardStatus {
        Available(verdicts), Unsupported, Unavailable(reason)
    }
}
