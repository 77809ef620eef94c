//! Typed calls into each transform's WIT interface.
//!
//! `wasmtime::component::bindgen!` generates one module per world. The shared records of the
//! `types` interface are generated once, with the serializer's world, and every other world
//! reuses them (`with:`), so there is one conversion between them and the plain Rust types of
//! `devin-bridge-types` (the same types the native libraries use, which is what makes the
//! differential tests a direct comparison).
//!
//! Each WIT function has one typed function here (`serializer::serialize`, ...) that runs on a
//! fresh instance of its world ([`World`]); the registry's methods call them directly. The
//! [`Call`] and [`Answer`] enums are the data form of the same calls, for the golden corpus,
//! the differential tests, the fuzz targets and the benchmarks: [`call_instance`] maps a
//! `Call` onto the typed function.

use std::sync::Arc;

use devin_bridge_types::{Failure, Reply, ToolCall, Usage};
use serde::{Deserialize, Serialize};
use wasmtime::component::InstancePre;

use wasmtime::Store;

use super::runtime::CallState;
use super::status::checked_failure;
use super::TransformKind;

mod serializer_world {
    wasmtime::component::bindgen!({ world: "serializer-component", path: "../../wit" });
}
mod envelope_world {
    wasmtime::component::bindgen!({
        world: "envelope-component",
        path: "../../wit",
        with: { "devin-bridge:transforms/types": crate::bindings::wit_types },
    });
}
mod sse_world {
    wasmtime::component::bindgen!({
        world: "sse-component",
        path: "../../wit",
        with: { "devin-bridge:transforms/types": crate::bindings::wit_types },
    });
}
mod model_alias_world {
    wasmtime::component::bindgen!({
        world: "model-alias-component",
        path: "../../wit",
        with: { "devin-bridge:transforms/types": crate::bindings::wit_types },
    });
}

/// The shared records, generated once.
pub use serializer_world::devin_bridge::transforms::types as wit_types;

/// The serializer's answer (mirror of the WIT `prompt` record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    pub text: String,
    pub tools: String,
    pub input_tokens: u32,
    pub id_seed: String,
    pub model: String,
    pub stream: bool,
    /// `tool_choice.disable_parallel_tool_use`: at most one tool call per reply.
    #[serde(default)]
    pub single_tool_call: bool,
}

/// The serializer's answer for a session that may hold part of the conversation (mirror of
/// the WIT `unseen-prompt` record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnseenPrompt {
    pub prompt: Prompt,
    /// The identity of the trace up to the end of each message.
    pub history: Vec<String>,
    /// The images that go with the prompt.
    pub images: Vec<Image>,
    /// Where each message ends and the trace's state there, for a later continuation.
    pub marks: Vec<MessageMark>,
    /// The tool names the request declares.
    pub tool_names: Vec<String>,
}

/// Where a message of a request ends, and the trace's state there (mirror of `message-mark`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageMark {
    pub request_end: u32,
    pub trace_chars: u64,
    pub tool_uses: Vec<String>,
}

/// What a continuation's serialization needs of the messages before it (mirror of `resume`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Resume {
    pub messages: u32,
    pub history: String,
    pub trace_chars: u64,
    pub tool_uses: Vec<String>,
    pub tool_names: Vec<String>,
}

/// What `serialize-resumed` says of a request (mirror of `resumed-prompt`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumedPrompt {
    pub text: String,
    pub input_tokens: u32,
    pub id_seed: String,
    /// The identities of the continuation's messages.
    pub history: Vec<String>,
    /// Their marks, `request_end` counted from the continuation's start.
    pub marks: Vec<MessageMark>,
    pub images: Vec<Image>,
}

/// An image that goes with a prompt (mirror of `image`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    pub media_type: String,
    /// Base64.
    pub data: String,
}

/// Which images go with a prompt (mirror of `image-limits`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ImageLimits {
    pub max_images: u32,
    pub max_image_bytes: u32,
}

/// How `serialize-unseen` serializes a request (mirror of `prompt-options`).
///
/// In a call's data form its three numbers stand beside the other arguments, each 0 when
/// absent (`held`, `max_images`, `max_image_bytes`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PromptOptions {
    pub held: u32,
    #[serde(flatten)]
    pub images: ImageLimits,
}

/// What `message_start` and a JSON body need besides the reply (mirror of `message-head`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageHead {
    pub id: String,
    pub model: String,
    pub usage: Usage,
}

/// One complete server-sent event (mirror of `sse-event`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SseEvent {
    /// The `event:` field; `message` when absent.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last `id:` field of the event, if any.
    pub id: Option<String>,
}

/// The events framed from a buffer and the bytes left over (mirror of `sse-frames`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SseFrames {
    pub events: Vec<SseEvent>,
    /// Bytes after the last complete event, to be passed back before the next bytes read.
    pub tail: Vec<u8>,
}

/// A resolved catalog entry (mirror of `resolved-model`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedModel {
    pub family: String,
    pub model_uid: String,
    pub label: String,
    pub acp_id: String,
}

impl From<wit_types::Failure> for Failure {
    fn from(f: wit_types::Failure) -> Self {
        Failure {
            code: f.code,
            message: f.message,
            status: f.status,
            repairable: f.repairable,
        }
    }
}

impl From<&Failure> for wit_types::Failure {
    fn from(f: &Failure) -> Self {
        Self {
            code: f.code.clone(),
            message: f.message.clone(),
            status: f.status,
            repairable: f.repairable,
        }
    }
}

impl From<wit_types::ToolCall> for ToolCall {
    fn from(call: wit_types::ToolCall) -> Self {
        ToolCall {
            id: call.id,
            name: call.name,
            input: call.input,
        }
    }
}

impl From<&ToolCall> for wit_types::ToolCall {
    fn from(call: &ToolCall) -> Self {
        Self {
            id: call.id.clone(),
            name: call.name.clone(),
            input: call.input.clone(),
        }
    }
}

impl From<wit_types::Reply> for Reply {
    fn from(reply: wit_types::Reply) -> Self {
        match reply {
            wit_types::Reply::Text(text) => Reply::Text(text),
            wit_types::Reply::Tools(calls) => {
                Reply::Tools(calls.into_iter().map(ToolCall::from).collect())
            }
        }
    }
}

impl From<&Reply> for wit_types::Reply {
    fn from(reply: &Reply) -> Self {
        match reply {
            Reply::Text(text) => wit_types::Reply::Text(text.clone()),
            Reply::Tools(calls) => {
                wit_types::Reply::Tools(calls.iter().map(wit_types::ToolCall::from).collect())
            }
        }
    }
}

impl From<Usage> for wit_types::Usage {
    fn from(usage: Usage) -> Self {
        Self {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cache_read_input_tokens: usage.cache_read_input_tokens,
            cache_creation_input_tokens: usage.cache_creation_input_tokens,
        }
    }
}

/// A component pre-instantiated against the host's linker, with its exports type-checked.
#[derive(Clone)]
pub(crate) enum TypedPre {
    Serializer(serializer_world::SerializerComponentPre<CallState>),
    Envelope(envelope_world::EnvelopeComponentPre<CallState>),
    Sse(sse_world::SseComponentPre<CallState>),
    ModelAlias(model_alias_world::ModelAliasComponentPre<CallState>),
}

impl TypedPre {
    /// Checks that the component exports `kind`'s interface with the right types.
    pub(crate) fn new(kind: TransformKind, pre: InstancePre<CallState>) -> wasmtime::Result<Self> {
        Ok(match kind {
            TransformKind::Serializer => {
                TypedPre::Serializer(serializer_world::SerializerComponentPre::new(pre)?)
            }
            TransformKind::Envelope => {
                TypedPre::Envelope(envelope_world::EnvelopeComponentPre::new(pre)?)
            }
            TransformKind::Sse => TypedPre::Sse(sse_world::SseComponentPre::new(pre)?),
            TransformKind::ModelAlias => {
                TypedPre::ModelAlias(model_alias_world::ModelAliasComponentPre::new(pre)?)
            }
        })
    }

    pub(crate) fn instantiate(&self, store: &mut Store<CallState>) -> wasmtime::Result<Instance> {
        Ok(match self {
            TypedPre::Serializer(pre) => Instance::Serializer(pre.instantiate(store)?),
            TypedPre::Envelope(pre) => Instance::Envelope(pre.instantiate(store)?),
            TypedPre::Sse(pre) => Instance::Sse(pre.instantiate(store)?),
            TypedPre::ModelAlias(pre) => Instance::ModelAlias(pre.instantiate(store)?),
        })
    }
}

/// A live instance of one transform (a fresh one per call in production).
pub enum Instance {
    Serializer(serializer_world::SerializerComponent),
    Envelope(envelope_world::EnvelopeComponent),
    Sse(sse_world::SseComponent),
    ModelAlias(model_alias_world::ModelAliasComponent),
}

/// One transform's world: which instance answers its functions. The typed functions below take
/// `W::Instance`; [`crate::Loaded::run`] makes the fresh instance they run on.
pub trait World {
    const KIND: TransformKind;
    type Instance;
    /// This world's instance, or `None` when `instance` is another transform's.
    fn of(instance: &Instance) -> Option<&Self::Instance>;
}

macro_rules! world {
    ($marker:ident, $kind:ident, $instance:ty) => {
        pub struct $marker;
        impl World for $marker {
            const KIND: TransformKind = TransformKind::$kind;
            type Instance = $instance;
            fn of(instance: &Instance) -> Option<&Self::Instance> {
                match instance {
                    Instance::$kind(instance) => Some(instance),
                    _ => None,
                }
            }
        }
    };
}
world!(
    SerializerWorld,
    Serializer,
    serializer_world::SerializerComponent
);
world!(EnvelopeWorld, Envelope, envelope_world::EnvelopeComponent);
world!(SseWorld, Sse, sse_world::SseComponent);
world!(
    ModelAliasWorld,
    ModelAlias,
    model_alias_world::ModelAliasComponent
);

/// A call's store; every function below runs in one.
type CallStore = Store<CallState>;

/// The serializer's functions. Every failure a component returns has its status checked on
/// the way out.
pub(crate) mod serializer {
    use super::serializer_world::exports::devin_bridge::transforms::serializer as wit;
    use super::serializer_world::SerializerComponent as Component;
    use super::*;

    fn failed(f: super::wit_types::Failure) -> Failure {
        checked_failure(TransformKind::Serializer, f.into())
    }

    pub(crate) fn serialize(
        instance: &Component,
        store: &mut CallStore,
        request: &str,
    ) -> wasmtime::Result<Result<Prompt, Failure>> {
        let answer = instance
            .devin_bridge_transforms_serializer()
            .call_serialize(store, request)?;
        Ok(answer.map(prompt_from_wit).map_err(failed))
    }

    pub(crate) fn serialize_unseen(
        instance: &Component,
        store: &mut CallStore,
        request: &str,
        options: &PromptOptions,
    ) -> wasmtime::Result<Result<UnseenPrompt, Failure>> {
        let answer = instance
            .devin_bridge_transforms_serializer()
            .call_serialize_unseen(store, request, options_to_wit(options))?;
        Ok(answer
            .map(|unseen| UnseenPrompt {
                prompt: prompt_from_wit(unseen.prompt),
                history: unseen.history,
                images: images_from_wit(unseen.images),
                marks: marks_from_wit(unseen.marks),
                tool_names: unseen.tool_names,
            })
            .map_err(failed))
    }

    pub(crate) fn serialize_resumed(
        instance: &Component,
        store: &mut CallStore,
        continuation: &str,
        resume: &Resume,
        options: &PromptOptions,
    ) -> wasmtime::Result<Result<ResumedPrompt, Failure>> {
        let resume = wit::Resume {
            messages: resume.messages,
            history: resume.history.clone(),
            trace_chars: resume.trace_chars,
            tool_uses: resume.tool_uses.clone(),
            tool_names: resume.tool_names.clone(),
        };
        let answer = instance
            .devin_bridge_transforms_serializer()
            .call_serialize_resumed(store, continuation, &resume, options_to_wit(options))?;
        Ok(answer
            .map(|resumed| ResumedPrompt {
                text: resumed.text,
                input_tokens: resumed.input_tokens,
                id_seed: resumed.id_seed,
                history: resumed.history,
                marks: marks_from_wit(resumed.marks),
                images: images_from_wit(resumed.images),
            })
            .map_err(failed))
    }

    pub(crate) fn repair(
        instance: &Component,
        store: &mut CallStore,
        prompt: &str,
        rejection: &Failure,
    ) -> wasmtime::Result<String> {
        instance
            .devin_bridge_transforms_serializer()
            .call_repair(store, prompt, &rejection.into())
    }

    fn prompt_from_wit(prompt: wit::Prompt) -> Prompt {
        Prompt {
            text: prompt.text,
            tools: prompt.tools,
            input_tokens: prompt.input_tokens,
            id_seed: prompt.id_seed,
            model: prompt.model,
            stream: prompt.stream,
            single_tool_call: prompt.single_tool_call,
        }
    }

    fn options_to_wit(options: &PromptOptions) -> wit::PromptOptions {
        wit::PromptOptions {
            held: options.held,
            images: wit::ImageLimits {
                max_images: options.images.max_images,
                max_image_bytes: options.images.max_image_bytes,
            },
        }
    }

    fn images_from_wit(images: Vec<wit::Image>) -> Vec<Image> {
        images
            .into_iter()
            .map(|image| Image {
                media_type: image.media_type,
                data: image.data,
            })
            .collect()
    }

    fn marks_from_wit(marks: Vec<wit::MessageMark>) -> Vec<MessageMark> {
        marks
            .into_iter()
            .map(|mark| MessageMark {
                request_end: mark.request_end,
                trace_chars: mark.trace_chars,
                tool_uses: mark.tool_uses,
            })
            .collect()
    }
}

/// The envelope parser's functions.
pub(crate) mod envelope {
    use super::envelope_world::EnvelopeComponent as Component;
    use super::*;

    fn failed(f: super::wit_types::Failure) -> Failure {
        checked_failure(TransformKind::Envelope, f.into())
    }

    pub(crate) fn parse(
        instance: &Component,
        store: &mut CallStore,
        output: &str,
        tools: &str,
        id_seed: &str,
        max_calls: u32,
    ) -> wasmtime::Result<Result<Reply, Failure>> {
        let answer = instance
            .devin_bridge_transforms_envelope()
            .call_parse(store, output, tools, id_seed, max_calls)?;
        Ok(answer.map(Reply::from).map_err(failed))
    }

    pub(crate) fn narrates_unexecuted_action(
        instance: &Component,
        store: &mut CallStore,
        output: &str,
    ) -> wasmtime::Result<bool> {
        instance
            .devin_bridge_transforms_envelope()
            .call_narrates_unexecuted_action(store, output)
    }

    pub(crate) fn parse_review(
        instance: &Component,
        store: &mut CallStore,
        output: &str,
    ) -> wasmtime::Result<Result<String, Failure>> {
        let answer = instance
            .devin_bridge_transforms_envelope()
            .call_parse_review(store, output)?;
        Ok(answer.map_err(failed))
    }
}

/// The SSE component's functions.
pub(crate) mod sse {
    use super::sse_world::exports::devin_bridge::transforms::sse as wit;
    use super::sse_world::SseComponent as Component;
    use super::*;

    fn head_to_wit(head: &MessageHead) -> wit::MessageHead {
        wit::MessageHead {
            id: head.id.clone(),
            model: head.model.clone(),
            usage: head.usage.into(),
        }
    }

    pub(crate) fn stream_start(
        instance: &Component,
        store: &mut CallStore,
        head: &MessageHead,
    ) -> wasmtime::Result<String> {
        instance
            .devin_bridge_transforms_sse()
            .call_stream_start(store, &head_to_wit(head))
    }

    pub(crate) fn stream_ping(
        instance: &Component,
        store: &mut CallStore,
    ) -> wasmtime::Result<String> {
        instance
            .devin_bridge_transforms_sse()
            .call_stream_ping(store)
    }

    pub(crate) fn stream_finish(
        instance: &Component,
        store: &mut CallStore,
        reply: &Reply,
        usage: Usage,
    ) -> wasmtime::Result<String> {
        instance.devin_bridge_transforms_sse().call_stream_finish(
            store,
            &reply.into(),
            usage.into(),
        )
    }

    pub(crate) fn render_stream(
        instance: &Component,
        store: &mut CallStore,
        head: &MessageHead,
        reply: &Reply,
    ) -> wasmtime::Result<String> {
        instance.devin_bridge_transforms_sse().call_render_stream(
            store,
            &head_to_wit(head),
            &reply.into(),
        )
    }

    pub(crate) fn render_json(
        instance: &Component,
        store: &mut CallStore,
        head: &MessageHead,
        reply: &Reply,
    ) -> wasmtime::Result<String> {
        instance.devin_bridge_transforms_sse().call_render_json(
            store,
            &head_to_wit(head),
            &reply.into(),
        )
    }

    pub(crate) fn error_event(
        instance: &Component,
        store: &mut CallStore,
        failure: &Failure,
    ) -> wasmtime::Result<String> {
        instance
            .devin_bridge_transforms_sse()
            .call_error_event(store, &failure.into())
    }

    pub(crate) fn error_body(
        instance: &Component,
        store: &mut CallStore,
        failure: &Failure,
    ) -> wasmtime::Result<String> {
        instance
            .devin_bridge_transforms_sse()
            .call_error_body(store, &failure.into())
    }

    pub(crate) fn agent_error_message(
        instance: &Component,
        store: &mut CallStore,
        raw: &str,
    ) -> wasmtime::Result<String> {
        instance
            .devin_bridge_transforms_sse()
            .call_agent_error_message(store, raw)
    }

    pub(crate) fn parse_events(
        instance: &Component,
        store: &mut CallStore,
        buffer: &[u8],
        max_event_bytes: u32,
    ) -> wasmtime::Result<Result<SseFrames, Failure>> {
        let answer = instance.devin_bridge_transforms_sse().call_parse_events(
            store,
            buffer,
            max_event_bytes,
        )?;
        Ok(answer
            .map(|frames| SseFrames {
                events: frames
                    .events
                    .into_iter()
                    .map(|event| SseEvent {
                        event: event.event,
                        data: event.data,
                        id: event.id,
                    })
                    .collect(),
                tail: frames.tail,
            })
            .map_err(|f| checked_failure(TransformKind::Sse, f.into())))
    }
}

/// The model-alias validator's functions.
pub(crate) mod model_alias {
    use super::model_alias_world::ModelAliasComponent as Component;
    use super::*;

    fn failed(f: super::wit_types::Failure) -> Failure {
        checked_failure(TransformKind::ModelAlias, f.into())
    }

    pub(crate) fn validate(
        instance: &Component,
        store: &mut CallStore,
        reference: &str,
        catalog: &str,
    ) -> wasmtime::Result<Result<String, Failure>> {
        let answer = instance
            .devin_bridge_transforms_model_alias()
            .call_validate(store, reference, catalog)?;
        Ok(answer.map_err(failed))
    }

    pub(crate) fn client_environment(
        instance: &Component,
        store: &mut CallStore,
        settings: &[(String, String)],
        catalog: &str,
    ) -> wasmtime::Result<Result<Vec<(String, String)>, Failure>> {
        let answer = instance
            .devin_bridge_transforms_model_alias()
            .call_client_environment(store, settings, catalog)?;
        Ok(answer.map_err(failed))
    }

    pub(crate) fn resolve(
        instance: &Component,
        store: &mut CallStore,
        requested: &str,
        catalog: &str,
    ) -> wasmtime::Result<Result<ResolvedModel, Failure>> {
        let answer = instance
            .devin_bridge_transforms_model_alias()
            .call_resolve(store, requested, catalog)?;
        Ok(answer
            .map(|m| ResolvedModel {
                family: m.family,
                model_uid: m.model_uid,
                label: m.label,
                acp_id: m.acp_id,
            })
            .map_err(failed))
    }

    pub(crate) fn list_models(
        instance: &Component,
        store: &mut CallStore,
        catalog: &str,
        vision: bool,
    ) -> wasmtime::Result<Result<String, Failure>> {
        let answer = instance
            .devin_bridge_transforms_model_alias()
            .call_list_models(store, catalog, vision)?;
        Ok(answer.map_err(failed))
    }
}

/// One call to a transform, with its arguments: the data form of the typed calls, which the
/// golden corpus, the differential tests, the fuzz targets and the benchmarks drive. It
/// deserializes from `{"call": "<name>", "args": {...}}` once the arguments are in their plain
/// form (see `corpus::decode_call`, which turns the fixtures' text and byte encodings into it).
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
    },
    RenderStream {
        head: MessageHead,
        reply: Reply,
    },
    RenderJson {
        head: MessageHead,
        reply: Reply,
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
}

/// The answer of a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Prompt(Result<Prompt, Failure>),
    Unseen(Result<UnseenPrompt, Failure>),
    Resumed(Result<ResumedPrompt, Failure>),
    Text(String),
    Reply(Result<Reply, Failure>),
    Flag(bool),
    Model(Result<String, Failure>),
    Environment(Result<Vec<(String, String)>, Failure>),
    Resolved(Result<ResolvedModel, Failure>),
    /// A review reply in canonical JSON, or why it was refused.
    Review(Result<String, Failure>),
    /// The events framed from an event-stream buffer, or why the stream was refused.
    Frames(Result<SseFrames, Failure>),
}

impl Call {
    /// The transform that answers this call.
    pub fn transform(&self) -> super::TransformKind {
        use super::TransformKind as K;
        match self {
            Call::Serialize { .. }
            | Call::SerializeUnseen { .. }
            | Call::SerializeResumed { .. }
            | Call::Repair { .. } => K::Serializer,
            Call::Parse { .. }
            | Call::NarratesUnexecutedAction { .. }
            | Call::ParseReview { .. } => K::Envelope,
            Call::StreamStart { .. }
            | Call::StreamPing
            | Call::StreamFinish { .. }
            | Call::RenderStream { .. }
            | Call::RenderJson { .. }
            | Call::ErrorEvent { .. }
            | Call::ErrorBody { .. }
            | Call::AgentErrorMessage { .. }
            | Call::ParseEvents { .. } => K::Sse,
            Call::Validate { .. }
            | Call::ClientEnvironment { .. }
            | Call::Resolve { .. }
            | Call::ListModels { .. } => K::ModelAlias,
        }
    }
}

/// Performs `call` (the data form of a call) on an existing instance through the typed
/// function it names. `None`: the call belongs to another transform than the instance.
pub(crate) fn call_instance(
    instance: &Instance,
    store: &mut CallStore,
    call: &Call,
) -> wasmtime::Result<Option<Answer>> {
    let answer = match (instance, call) {
        (Instance::Serializer(i), Call::Serialize { request }) => {
            Answer::Prompt(serializer::serialize(i, store, request)?)
        }
        (Instance::Serializer(i), Call::SerializeUnseen { request, options }) => {
            Answer::Unseen(serializer::serialize_unseen(i, store, request, options)?)
        }
        (
            Instance::Serializer(i),
            Call::SerializeResumed {
                continuation,
                resume,
                options,
            },
        ) => Answer::Resumed(serializer::serialize_resumed(
            i,
            store,
            continuation,
            resume,
            options,
        )?),
        (Instance::Serializer(i), Call::Repair { prompt, rejection }) => {
            Answer::Text(serializer::repair(i, store, prompt, rejection)?)
        }
        (
            Instance::Envelope(i),
            Call::Parse {
                output,
                tools,
                id_seed,
                max_calls,
            },
        ) => Answer::Reply(envelope::parse(
            i, store, output, tools, id_seed, *max_calls,
        )?),
        (Instance::Envelope(i), Call::NarratesUnexecutedAction { output }) => {
            Answer::Flag(envelope::narrates_unexecuted_action(i, store, output)?)
        }
        (Instance::Envelope(i), Call::ParseReview { output }) => {
            Answer::Review(envelope::parse_review(i, store, output)?)
        }
        (Instance::Sse(i), Call::StreamStart { head }) => {
            Answer::Text(sse::stream_start(i, store, head)?)
        }
        (Instance::Sse(i), Call::StreamPing) => Answer::Text(sse::stream_ping(i, store)?),
        (Instance::Sse(i), Call::StreamFinish { reply, usage }) => {
            Answer::Text(sse::stream_finish(i, store, reply, *usage)?)
        }
        (Instance::Sse(i), Call::RenderStream { head, reply }) => {
            Answer::Text(sse::render_stream(i, store, head, reply)?)
        }
        (Instance::Sse(i), Call::RenderJson { head, reply }) => {
            Answer::Text(sse::render_json(i, store, head, reply)?)
        }
        (Instance::Sse(i), Call::ErrorEvent { failure }) => {
            Answer::Text(sse::error_event(i, store, failure)?)
        }
        (Instance::Sse(i), Call::ErrorBody { failure }) => {
            Answer::Text(sse::error_body(i, store, failure)?)
        }
        (Instance::Sse(i), Call::AgentErrorMessage { raw }) => {
            Answer::Text(sse::agent_error_message(i, store, raw)?)
        }
        (
            Instance::Sse(i),
            Call::ParseEvents {
                buffer,
                max_event_bytes,
            },
        ) => Answer::Frames(sse::parse_events(i, store, buffer, *max_event_bytes)?),
        (Instance::ModelAlias(i), Call::Validate { reference, catalog }) => {
            Answer::Model(model_alias::validate(i, store, reference, catalog)?)
        }
        (Instance::ModelAlias(i), Call::ClientEnvironment { settings, catalog }) => {
            Answer::Environment(model_alias::client_environment(
                i, store, settings, catalog,
            )?)
        }
        (Instance::ModelAlias(i), Call::Resolve { requested, catalog }) => {
            Answer::Resolved(model_alias::resolve(i, store, requested, catalog)?)
        }
        (Instance::ModelAlias(i), Call::ListModels { catalog, vision }) => {
            Answer::Model(model_alias::list_models(i, store, catalog, *vision)?)
        }
        _ => return Ok(None),
    };
    Ok(Some(answer))
}
