//! Typed calls into each transform's WIT interface.
//!
//! `wasmtime::component::bindgen!` generates one module per world; each module has its own
//! copy of the shared WIT records, so this file converts them to the plain Rust types of
//! `devin-bridge-types` (the same types the native libraries use, which is what makes the
//! differential tests a direct comparison).

use std::sync::Arc;

use devin_bridge_types::{Failure, Reply, ToolCall, Usage};
use serde::{Deserialize, Serialize};
use wasmtime::component::InstancePre;

use super::runtime::CallState;
use super::status::checked_failure;

mod serializer_world {
    wasmtime::component::bindgen!({ world: "serializer-component", path: "../../wit" });
}
mod envelope_world {
    wasmtime::component::bindgen!({ world: "envelope-component", path: "../../wit" });
}
mod sse_world {
    wasmtime::component::bindgen!({ world: "sse-component", path: "../../wit" });
}
mod model_alias_world {
    wasmtime::component::bindgen!({ world: "model-alias-component", path: "../../wit" });
}

/// The serializer's answer (mirror of the WIT `prompt` record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    pub text: String,
    pub tools: String,
    pub input_tokens: u32,
    pub id_seed: String,
    pub model: String,
    pub stream: bool,
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
pub struct ImageLimits {
    pub max_images: u32,
    pub max_image_bytes: u32,
}

/// How `serialize-unseen` serializes a request (mirror of `prompt-options`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptOptions {
    pub held: u32,
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

/// Converts between one world's copy of the shared records and the plain types.
macro_rules! shared_records {
    ($world:ident) => {
        impl From<$world::devin_bridge::transforms::types::Failure> for Failure {
            fn from(f: $world::devin_bridge::transforms::types::Failure) -> Self {
                Failure {
                    code: f.code,
                    message: f.message,
                    status: f.status,
                    repairable: f.repairable,
                }
            }
        }
        impl From<&Failure> for $world::devin_bridge::transforms::types::Failure {
            fn from(f: &Failure) -> Self {
                Self {
                    code: f.code.clone(),
                    message: f.message.clone(),
                    status: f.status,
                    repairable: f.repairable,
                }
            }
        }
    };
}
shared_records!(serializer_world);
shared_records!(envelope_world);
shared_records!(sse_world);
shared_records!(model_alias_world);

impl From<envelope_world::devin_bridge::transforms::types::Reply> for Reply {
    fn from(reply: envelope_world::devin_bridge::transforms::types::Reply) -> Self {
        use envelope_world::devin_bridge::transforms::types::Reply as Wit;
        match reply {
            Wit::Text(text) => Reply::Text(text),
            Wit::Tool(call) => Reply::Tool(ToolCall {
                id: call.id,
                name: call.name,
                input: call.input,
            }),
        }
    }
}

fn sse_reply(reply: &Reply) -> sse_world::devin_bridge::transforms::types::Reply {
    use sse_world::devin_bridge::transforms::types::{Reply as Wit, ToolCall as WitCall};
    match reply {
        Reply::Text(text) => Wit::Text(text.clone()),
        Reply::Tool(call) => Wit::Tool(WitCall {
            id: call.id.clone(),
            name: call.name.clone(),
            input: call.input.clone(),
        }),
    }
}

fn sse_usage(usage: &Usage) -> sse_world::devin_bridge::transforms::types::Usage {
    sse_world::devin_bridge::transforms::types::Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
    }
}

fn sse_head(head: &MessageHead) -> sse_world::exports::devin_bridge::transforms::sse::MessageHead {
    sse_world::exports::devin_bridge::transforms::sse::MessageHead {
        id: head.id.clone(),
        model: head.model.clone(),
        usage: sse_usage(&head.usage),
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
    pub(crate) fn new(
        kind: super::TransformKind,
        pre: InstancePre<CallState>,
    ) -> wasmtime::Result<Self> {
        use super::TransformKind as K;
        Ok(match kind {
            K::Serializer => {
                TypedPre::Serializer(serializer_world::SerializerComponentPre::new(pre)?)
            }
            K::Envelope => TypedPre::Envelope(envelope_world::EnvelopeComponentPre::new(pre)?),
            K::Sse => TypedPre::Sse(sse_world::SseComponentPre::new(pre)?),
            K::ModelAlias => {
                TypedPre::ModelAlias(model_alias_world::ModelAliasComponentPre::new(pre)?)
            }
        })
    }
}

/// One call to a transform, with its arguments. The same enum drives the hot path, the golden
/// self-test corpus and the differential tests.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Serialize {
        request: String,
    },
    /// The request is shared, not owned: the resident transport keeps it for a replay and may
    /// serialize it more than once, and a request can be megabytes.
    SerializeUnseen {
        request: Arc<String>,
        options: PromptOptions,
    },
    SerializeResumed {
        continuation: String,
        resume: Resume,
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

/// A live instance of one transform (a fresh one per call in production).
pub(crate) enum Instance {
    Serializer(serializer_world::SerializerComponent),
    Envelope(envelope_world::EnvelopeComponent),
    Sse(sse_world::SseComponent),
    ModelAlias(model_alias_world::ModelAliasComponent),
}

impl TypedPre {
    pub(crate) fn instantiate(
        &self,
        store: &mut wasmtime::Store<CallState>,
    ) -> wasmtime::Result<Instance> {
        Ok(match self {
            TypedPre::Serializer(pre) => Instance::Serializer(pre.instantiate(store)?),
            TypedPre::Envelope(pre) => Instance::Envelope(pre.instantiate(store)?),
            TypedPre::Sse(pre) => Instance::Sse(pre.instantiate(store)?),
            TypedPre::ModelAlias(pre) => Instance::ModelAlias(pre.instantiate(store)?),
        })
    }
}

/// Instantiates `pre` in `store` and performs `call`. Returns `None` when the call belongs to
/// another transform than the component (a programming error the caller reports).
pub(crate) fn invoke(
    pre: &TypedPre,
    store: &mut wasmtime::Store<CallState>,
    call: &Call,
) -> wasmtime::Result<Option<Answer>> {
    if pre_kind(pre) != call.transform() {
        return Ok(None);
    }
    let instance = pre.instantiate(store)?;
    call_instance(&instance, store, call)
}

fn pre_kind(pre: &TypedPre) -> super::TransformKind {
    use super::TransformKind as K;
    match pre {
        TypedPre::Serializer(_) => K::Serializer,
        TypedPre::Envelope(_) => K::Envelope,
        TypedPre::Sse(_) => K::Sse,
        TypedPre::ModelAlias(_) => K::ModelAlias,
    }
}

fn prompt_from_wit(
    prompt: serializer_world::exports::devin_bridge::transforms::serializer::Prompt,
) -> Prompt {
    Prompt {
        text: prompt.text,
        tools: prompt.tools,
        input_tokens: prompt.input_tokens,
        id_seed: prompt.id_seed,
        model: prompt.model,
        stream: prompt.stream,
    }
}

/// Performs `call` on an existing instance.
pub(crate) fn call_instance(
    instance: &Instance,
    store: &mut wasmtime::Store<CallState>,
    call: &Call,
) -> wasmtime::Result<Option<Answer>> {
    use super::TransformKind as K;
    // Every failure a component returns has its status checked on the way out.
    Ok(Some(match (instance, call) {
        (Instance::Serializer(instance), Call::Serialize { request }) => {
            let answer = instance
                .devin_bridge_transforms_serializer()
                .call_serialize(&mut *store, request)?;
            Answer::Prompt(
                answer
                    .map(prompt_from_wit)
                    .map_err(|f| checked_failure(K::Serializer, f.into())),
            )
        }
        (Instance::Serializer(instance), Call::SerializeUnseen { request, options }) => {
            let answer = instance
                .devin_bridge_transforms_serializer()
                .call_serialize_unseen(&mut *store, request, options_to_wit(options))?;
            Answer::Unseen(
                answer
                    .map(|unseen| UnseenPrompt {
                        prompt: prompt_from_wit(unseen.prompt),
                        history: unseen.history,
                        images: images_from_wit(unseen.images),
                        marks: marks_from_wit(unseen.marks),
                        tool_names: unseen.tool_names,
                    })
                    .map_err(|f| checked_failure(K::Serializer, f.into())),
            )
        }
        (
            Instance::Serializer(instance),
            Call::SerializeResumed {
                continuation,
                resume,
                options,
            },
        ) => {
            use serializer_world::exports::devin_bridge::transforms::serializer as wit;
            let resume = wit::Resume {
                messages: resume.messages,
                history: resume.history.clone(),
                trace_chars: resume.trace_chars,
                tool_uses: resume.tool_uses.clone(),
                tool_names: resume.tool_names.clone(),
            };
            let answer = instance
                .devin_bridge_transforms_serializer()
                .call_serialize_resumed(
                    &mut *store,
                    continuation,
                    &resume,
                    options_to_wit(options),
                )?;
            Answer::Resumed(
                answer
                    .map(|resumed| ResumedPrompt {
                        text: resumed.text,
                        input_tokens: resumed.input_tokens,
                        id_seed: resumed.id_seed,
                        history: resumed.history,
                        marks: marks_from_wit(resumed.marks),
                        images: images_from_wit(resumed.images),
                    })
                    .map_err(|f| checked_failure(K::Serializer, f.into())),
            )
        }
        (Instance::Serializer(instance), Call::Repair { prompt, rejection }) => {
            Answer::Text(instance.devin_bridge_transforms_serializer().call_repair(
                &mut *store,
                prompt,
                &rejection.into(),
            )?)
        }
        (
            Instance::Envelope(instance),
            Call::Parse {
                output,
                tools,
                id_seed,
            },
        ) => {
            let answer = instance.devin_bridge_transforms_envelope().call_parse(
                &mut *store,
                output,
                tools,
                id_seed,
            )?;
            Answer::Reply(
                answer
                    .map(Reply::from)
                    .map_err(|f| checked_failure(K::Envelope, f.into())),
            )
        }
        (Instance::Envelope(instance), Call::NarratesUnexecutedAction { output }) => Answer::Flag(
            instance
                .devin_bridge_transforms_envelope()
                .call_narrates_unexecuted_action(&mut *store, output)?,
        ),
        (Instance::Envelope(instance), Call::ParseReview { output }) => Answer::Review(
            instance
                .devin_bridge_transforms_envelope()
                .call_parse_review(&mut *store, output)?
                .map_err(|f| checked_failure(K::Envelope, f.into())),
        ),
        (
            Instance::Sse(instance),
            Call::ParseEvents {
                buffer,
                max_event_bytes,
            },
        ) => Answer::Frames(
            instance
                .devin_bridge_transforms_sse()
                .call_parse_events(&mut *store, buffer, *max_event_bytes)?
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
                .map_err(|f| checked_failure(K::Sse, f.into())),
        ),
        (Instance::Sse(instance), call) => {
            let sse = instance.devin_bridge_transforms_sse();
            Answer::Text(match call {
                Call::StreamStart { head } => {
                    sse.call_stream_start(&mut *store, &sse_head(head))?
                }
                Call::StreamPing => sse.call_stream_ping(&mut *store)?,
                Call::StreamFinish { reply, usage } => {
                    sse.call_stream_finish(&mut *store, &sse_reply(reply), sse_usage(usage))?
                }
                Call::RenderStream { head, reply } => {
                    sse.call_render_stream(&mut *store, &sse_head(head), &sse_reply(reply))?
                }
                Call::RenderJson { head, reply } => {
                    sse.call_render_json(&mut *store, &sse_head(head), &sse_reply(reply))?
                }
                Call::ErrorEvent { failure } => {
                    sse.call_error_event(&mut *store, &failure.into())?
                }
                Call::ErrorBody { failure } => sse.call_error_body(&mut *store, &failure.into())?,
                Call::AgentErrorMessage { raw } => {
                    sse.call_agent_error_message(&mut *store, raw)?
                }
                _ => return Ok(None),
            })
        }
        (Instance::ModelAlias(instance), call) => {
            let alias = instance.devin_bridge_transforms_model_alias();
            match call {
                Call::Validate { reference, catalog } => Answer::Model(
                    alias
                        .call_validate(&mut *store, reference, catalog)?
                        .map_err(|f| checked_failure(K::ModelAlias, f.into())),
                ),
                Call::ClientEnvironment { settings, catalog } => Answer::Environment(
                    alias
                        .call_client_environment(&mut *store, settings, catalog)?
                        .map_err(|f| checked_failure(K::ModelAlias, f.into())),
                ),
                Call::Resolve { requested, catalog } => Answer::Resolved(
                    alias
                        .call_resolve(&mut *store, requested, catalog)?
                        .map(|m| ResolvedModel {
                            family: m.family,
                            model_uid: m.model_uid,
                            label: m.label,
                            acp_id: m.acp_id,
                        })
                        .map_err(|f| checked_failure(K::ModelAlias, f.into())),
                ),
                Call::ListModels { catalog, vision } => Answer::Model(
                    alias
                        .call_list_models(&mut *store, catalog, *vision)?
                        .map_err(|f| checked_failure(K::ModelAlias, f.into())),
                ),
                _ => return Ok(None),
            }
        }
        _ => return Ok(None),
    }))
}

impl super::Transforms {
    /// `sse.agent-error-message`: an agent's error text, cleaned for clients.
    pub fn agent_error_message(&self, raw: String) -> Result<String, super::EngineError> {
        match self.call(&Call::AgentErrorMessage { raw })? {
            Answer::Text(text) => Ok(text),
            other => Err(super::EngineError::Interface {
                transform: super::TransformKind::Sse,
                message: format!("unexpected answer shape {other:?}"),
            }),
        }
    }
}

fn options_to_wit(
    options: &PromptOptions,
) -> serializer_world::exports::devin_bridge::transforms::serializer::PromptOptions {
    use serializer_world::exports::devin_bridge::transforms::serializer as wit;
    wit::PromptOptions {
        held: options.held,
        images: wit::ImageLimits {
            max_images: options.images.max_images,
            max_image_bytes: options.images.max_image_bytes,
        },
    }
}

fn images_from_wit(
    images: Vec<serializer_world::exports::devin_bridge::transforms::serializer::Image>,
) -> Vec<Image> {
    images
        .into_iter()
        .map(|image| Image {
            media_type: image.media_type,
            data: image.data,
        })
        .collect()
}

fn marks_from_wit(
    marks: Vec<serializer_world::exports::devin_bridge::transforms::serializer::MessageMark>,
) -> Vec<MessageMark> {
    marks
        .into_iter()
        .map(|mark| MessageMark {
            request_end: mark.request_end,
            trace_chars: mark.trace_chars,
            tool_uses: mark.tool_uses,
        })
        .collect()
}
