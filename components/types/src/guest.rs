//! The guest side of the WIT boundary: `wit_bindgen::generate!` told to use this crate's
//! types for every record, so a component's export functions take and return them directly.
//!
//! wit-bindgen maps a WIT type onto an existing Rust type through its `with` option: the
//! generated lifting and lowering code builds and destructures the type by its field (and
//! case) names, so it works exactly when the Rust type has the record's fields, in Rust
//! spelling, with the types wit-bindgen would have generated. The types of this crate are
//! written that way, which is what lets the native libraries, the wasm exports and the host
//! share one definition: a record whose fields drift from the WIT does not compile in any
//! component. The `with` table lives here, once, in `guest_bindings!`.

/// `wit_bindgen::generate!` for a world that exports interfaces of `wit/transforms.wit`, with
/// every WIT record of those interfaces (and of `types`) mapped onto its type in this crate.
///
/// The list in brackets names the interfaces the world exports (`serializer`, `envelope`,
/// `sse`, `model_alias`, `safeguard`; wit-bindgen refuses a mapping for a type the world does not use);
/// the braces hold the other options of `generate!`, as they would be written there.
///
/// ```text
/// devin_bridge_types::guest_bindings!([serializer] { world: "serializer-component", path: "../../wit" });
/// ```
///
/// The calling crate depends on `wit-bindgen` and on this crate as `devin-bridge-types`.
#[macro_export]
macro_rules! guest_bindings {
    ([$($export:ident),* $(,)?] { $($options:tt)* }) => {
        $crate::guest_bindings!(@with [$($export)*] [] { $($options)* });
    };
    (@with [serializer $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::guest_bindings!(@with [$($rest)*] [$($with)*
            "devin-bridge:transforms/serializer@0.1.0/prompt": devin_bridge_types::Prompt,
            "devin-bridge:transforms/serializer@0.1.0/local-answer": devin_bridge_types::LocalAnswer,
            "devin-bridge:transforms/serializer@0.1.0/image-limits": devin_bridge_types::ImageLimits,
            "devin-bridge:transforms/serializer@0.1.0/prompt-options": devin_bridge_types::PromptOptions,
            "devin-bridge:transforms/serializer@0.1.0/image": devin_bridge_types::Image,
            "devin-bridge:transforms/serializer@0.1.0/unseen-prompt": devin_bridge_types::UnseenPrompt,
            "devin-bridge:transforms/serializer@0.1.0/message-mark": devin_bridge_types::MessageMark,
            "devin-bridge:transforms/serializer@0.1.0/resume": devin_bridge_types::Resume,
            "devin-bridge:transforms/serializer@0.1.0/resumed-prompt": devin_bridge_types::ResumedPrompt,
        ] $options);
    };
    (@with [envelope $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::guest_bindings!(@with [$($rest)*] [$($with)*
            "devin-bridge:transforms/envelope@0.1.0/text-span": devin_bridge_types::TextSpan,
            "devin-bridge:transforms/envelope@0.1.0/parsed-reply": devin_bridge_types::ParsedReply,
            "devin-bridge:transforms/envelope@0.1.0/tool-reply": devin_bridge_types::ToolReply,
            "devin-bridge:transforms/envelope@0.1.0/recovery": devin_bridge_types::Recovery,
            "devin-bridge:transforms/envelope@0.1.0/stream-end": devin_bridge_types::StreamEnd,
            "devin-bridge:transforms/envelope@0.1.0/shown-piece": devin_bridge_types::ShownPiece,
        ] $options);
    };
    (@with [sse $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::guest_bindings!(@with [$($rest)*] [$($with)*
            "devin-bridge:transforms/sse@0.1.0/message-head": devin_bridge_types::MessageHead,
            "devin-bridge:transforms/sse@0.1.0/sse-event": devin_bridge_types::SseEvent,
            "devin-bridge:transforms/sse@0.1.0/sse-frames": devin_bridge_types::SseFrames,
        ] $options);
    };
    (@with [model_alias $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::guest_bindings!(@with [$($rest)*] [$($with)*
            "devin-bridge:transforms/model-alias@0.1.0/resolved-model": devin_bridge_types::ResolvedModel,
        ] $options);
    };
    (@with [] [$($with:tt)*] { $($options:tt)* }) => {
        wit_bindgen::generate!({
            with: {
                "devin-bridge:transforms/types@0.1.0/failure": devin_bridge_types::Failure,
                "devin-bridge:transforms/types@0.1.0/tool-call": devin_bridge_types::ToolCall,
                "devin-bridge:transforms/types@0.1.0/reply-block": devin_bridge_types::ReplyBlock,
                "devin-bridge:transforms/types@0.1.0/reply": devin_bridge_types::Reply,
                "devin-bridge:transforms/types@0.1.0/usage": devin_bridge_types::Usage,
                "devin-bridge:transforms/types@0.1.0/safeguard-outcome": devin_bridge_types::SafeguardOutcome,
                "devin-bridge:transforms/types@0.1.0/evaluation": devin_bridge_types::Evaluation,
                "devin-bridge:transforms/types@0.1.0/call-verdict": devin_bridge_types::CallVerdict,
                "devin-bridge:transforms/types@0.1.0/tool-verdict": devin_bridge_types::ToolVerdict,
                "devin-bridge:transforms/types@0.1.0/safeguard-status": devin_bridge_types::SafeguardStatus,
                $($with)*
            },
            $($options)*
        });
    };
    // An interface whose records are all in `types` (the safeguard's) maps nothing of its own.
    (@with [$other:ident $($rest:ident)*] $with:tt $options:tt) => {
        $crate::guest_bindings!(@with [$($rest)*] $with $options);
    };
}
