//! Typed calls into each transform's WIT interface.
//!
//! `wasmtime::component::bindgen!` generates one module per world. The shared records of the
//! `types` interface are generated once, with the serializer's world, and every other world
//! reuses them (`with:`). The generated records meet the plain types of `devin-bridge-types`
//! (the same types the native libraries and the components' exports use) in one module,
//! `convert`; nothing else here knows a record's fields.
//!
//! Each WIT function has one typed function here (`serializer::serialize`, ...) that runs on an
//! instance of its world ([`World`]); `TransformCalls` calls them directly. [`Call`] is the data
//! form of the same calls, for the golden corpus, the differential tests, the fuzz targets and
//! the benchmarks, and [`Answer`] the data form of what they answer: [`Call::bind`] is the one
//! match that maps a call onto its world and typed function.

use std::sync::Arc;

use devin_bridge_types::{
    Failure, MessageHead, Prompt, PromptOptions, Reply, ResolvedModel, Resume, ResumedPrompt,
    SafeguardStatus, SseFrames, ToolCall, UnseenPrompt, Usage,
};
use serde::{Deserialize, Serialize};
use wasmtime::component::InstancePre;

use wasmtime::Store;

use super::runtime::CallState;
use super::status::checked_failure;
use super::TransformKind;

mod convert;

use convert::Convert;

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
mod safeguard_world {
    wasmtime::component::bindgen!({
        world: "safeguard-component",
        path: "../../wit",
        with: { "devin-bridge:transforms/types": crate::bindings::wit_types },
    });
}

/// The shared records, generated once. `pub` because every other world's bindings re-export
/// them (`with:`); the module itself is private.
#[allow(unreachable_pub)]
pub use serializer_world::devin_bridge::transforms::types as wit_types;

/// A component pre-instantiated against the host's linker, with its exports type-checked.
#[derive(Clone)]
pub(crate) enum TypedPre {
    Serializer(serializer_world::SerializerComponentPre<CallState>),
    Envelope(envelope_world::EnvelopeComponentPre<CallState>),
    Sse(sse_world::SseComponentPre<CallState>),
    ModelAlias(model_alias_world::ModelAliasComponentPre<CallState>),
    Safeguard(safeguard_world::SafeguardComponentPre<CallState>),
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
            TransformKind::Safeguard => {
                TypedPre::Safeguard(safeguard_world::SafeguardComponentPre::new(pre)?)
            }
        })
    }

    pub(crate) fn instantiate(&self, store: &mut Store<CallState>) -> wasmtime::Result<Instance> {
        Ok(match self {
            TypedPre::Serializer(pre) => Instance::Serializer(pre.instantiate(store)?),
            TypedPre::Envelope(pre) => Instance::Envelope(pre.instantiate(store)?),
            TypedPre::Sse(pre) => Instance::Sse(pre.instantiate(store)?),
            TypedPre::ModelAlias(pre) => Instance::ModelAlias(pre.instantiate(store)?),
            TypedPre::Safeguard(pre) => Instance::Safeguard(pre.instantiate(store)?),
        })
    }
}

/// A live instance of one transform (a fresh one per call in production).
pub enum Instance {
    Serializer(serializer_world::SerializerComponent),
    Envelope(envelope_world::EnvelopeComponent),
    Sse(sse_world::SseComponent),
    ModelAlias(model_alias_world::ModelAliasComponent),
    Safeguard(safeguard_world::SafeguardComponent),
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
        pub(crate) struct $marker;
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
world!(
    SafeguardWorld,
    Safeguard,
    safeguard_world::SafeguardComponent
);

/// A call's store; every function below runs in one.
type CallStore = Store<CallState>;

/// A component's answer in plain types; a failure has its status checked on the way out.
fn answered<W: Convert<P>, P>(
    kind: TransformKind,
    answer: Result<W, wit_types::Failure>,
) -> Result<P, Failure> {
    answer
        .map(Convert::convert)
        .map_err(|failure| checked_failure(kind, failure.convert()))
}

/// The serializer's functions.
pub(crate) mod serializer {
    use super::serializer_world::SerializerComponent as Component;
    use super::*;

    const KIND: TransformKind = TransformKind::Serializer;

    pub(crate) fn serialize(
        instance: &Component,
        store: &mut CallStore,
        request: &str,
    ) -> wasmtime::Result<Result<Prompt, Failure>> {
        let answer = instance
            .devin_bridge_transforms_serializer()
            .call_serialize(store, request)?;
        Ok(answered(KIND, answer))
    }

    pub(crate) fn serialize_unseen(
        instance: &Component,
        store: &mut CallStore,
        request: &str,
        options: PromptOptions,
    ) -> wasmtime::Result<Result<UnseenPrompt, Failure>> {
        let answer = instance
            .devin_bridge_transforms_serializer()
            .call_serialize_unseen(store, request, options.convert())?;
        Ok(answered(KIND, answer))
    }

    pub(crate) fn serialize_resumed(
        instance: &Component,
        store: &mut CallStore,
        continuation: &str,
        resume: &Resume,
        options: PromptOptions,
    ) -> wasmtime::Result<Result<ResumedPrompt, Failure>> {
        let answer = instance
            .devin_bridge_transforms_serializer()
            .call_serialize_resumed(
                store,
                continuation,
                &resume.clone().convert(),
                options.convert(),
            )?;
        Ok(answered(KIND, answer))
    }

    pub(crate) fn repair(
        instance: &Component,
        store: &mut CallStore,
        prompt: &str,
        rejection: &Failure,
    ) -> wasmtime::Result<String> {
        instance.devin_bridge_transforms_serializer().call_repair(
            store,
            prompt,
            &rejection.clone().convert(),
        )
    }
}

/// The envelope parser's functions.
pub(crate) mod envelope {
    use super::envelope_world::EnvelopeComponent as Component;
    use super::*;

    const KIND: TransformKind = TransformKind::Envelope;

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
        Ok(answered(KIND, answer))
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
        Ok(answered(KIND, answer))
    }
}

/// The SSE component's functions.
pub(crate) mod sse {
    use super::sse_world::SseComponent as Component;
    use super::*;

    pub(crate) fn stream_start(
        instance: &Component,
        store: &mut CallStore,
        head: &MessageHead,
    ) -> wasmtime::Result<String> {
        instance
            .devin_bridge_transforms_sse()
            .call_stream_start(store, &head.clone().convert())
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
        safeguard: Option<&SafeguardStatus>,
    ) -> wasmtime::Result<String> {
        instance.devin_bridge_transforms_sse().call_stream_finish(
            store,
            &reply.clone().convert(),
            usage.convert(),
            safeguard.cloned().convert().as_ref(),
        )
    }

    pub(crate) fn render_stream(
        instance: &Component,
        store: &mut CallStore,
        head: &MessageHead,
        reply: &Reply,
        safeguard: Option<&SafeguardStatus>,
    ) -> wasmtime::Result<String> {
        instance.devin_bridge_transforms_sse().call_render_stream(
            store,
            &head.clone().convert(),
            &reply.clone().convert(),
            safeguard.cloned().convert().as_ref(),
        )
    }

    pub(crate) fn render_json(
        instance: &Component,
        store: &mut CallStore,
        head: &MessageHead,
        reply: &Reply,
        safeguard: Option<&SafeguardStatus>,
    ) -> wasmtime::Result<String> {
        instance.devin_bridge_transforms_sse().call_render_json(
            store,
            &head.clone().convert(),
            &reply.clone().convert(),
            safeguard.cloned().convert().as_ref(),
        )
    }

    pub(crate) fn error_event(
        instance: &Component,
        store: &mut CallStore,
        failure: &Failure,
    ) -> wasmtime::Result<String> {
        instance
            .devin_bridge_transforms_sse()
            .call_error_event(store, &failure.clone().convert())
    }

    pub(crate) fn error_body(
        instance: &Component,
        store: &mut CallStore,
        failure: &Failure,
    ) -> wasmtime::Result<String> {
        instance
            .devin_bridge_transforms_sse()
            .call_error_body(store, &failure.clone().convert())
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
        Ok(answered(TransformKind::Sse, answer))
    }
}

/// The model-alias validator's functions.
pub(crate) mod model_alias {
    use super::model_alias_world::ModelAliasComponent as Component;
    use super::*;

    const KIND: TransformKind = TransformKind::ModelAlias;

    pub(crate) fn validate(
        instance: &Component,
        store: &mut CallStore,
        reference: &str,
        catalog: &str,
    ) -> wasmtime::Result<Result<String, Failure>> {
        let answer = instance
            .devin_bridge_transforms_model_alias()
            .call_validate(store, reference, catalog)?;
        Ok(answered(KIND, answer))
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
        Ok(answered(KIND, answer))
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
        Ok(answered(KIND, answer))
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
        Ok(answered(KIND, answer))
    }

    pub(crate) fn context_windows(
        instance: &Component,
        store: &mut CallStore,
        catalog: &str,
    ) -> wasmtime::Result<Result<Vec<(String, u64)>, Failure>> {
        let answer = instance
            .devin_bridge_transforms_model_alias()
            .call_context_windows(store, catalog)?;
        Ok(answered(KIND, answer))
    }
}

/// The safeguard judge's function.
pub(crate) mod safeguard {
    use super::safeguard_world::SafeguardComponent as Component;
    use super::*;

    pub(crate) fn judge(
        instance: &Component,
        store: &mut CallStore,
        calls: &[ToolCall],
        classifier_context: &str,
    ) -> wasmtime::Result<SafeguardStatus> {
        let calls: Vec<wit_types::ToolCall> = calls.to_vec().convert();
        let status = instance.devin_bridge_transforms_safeguard().call_judge(
            store,
            &calls,
            classifier_context,
        )?;
        Ok(status.convert())
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
    },
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
    Reply(Reply),
    Flag(bool),
    Environment(Vec<(String, String)>),
    Resolved(ResolvedModel),
    Frames(SseFrames),
    /// Context windows by ACP model id.
    Windows(Vec<(String, u64)>),
    /// The safeguard judge's verdicts.
    Safeguard(SafeguardStatus),
}

/// A call bound to the world that answers it: the transform, and the typed function to run on
/// an instance of it.
pub(crate) struct Bound<'a> {
    pub(crate) kind: TransformKind,
    run: Job<'a>,
}

type Job<'a> = Box<dyn FnOnce(&Instance, &mut CallStore) -> wasmtime::Result<Answer> + 'a>;

impl Bound<'_> {
    /// Runs the call on `instance`, which must be of `self.kind` (an instance of another
    /// transform is an error, not an answer).
    pub(crate) fn run(
        self,
        instance: &Instance,
        store: &mut CallStore,
    ) -> wasmtime::Result<Answer> {
        (self.run)(instance, store)
    }
}

/// Binds a typed function of world `W` (its answer a result; `.map(Ok)` for one that cannot
/// fail).
fn on<'a, W: World, T: Into<Output>>(
    function: impl FnOnce(&W::Instance, &mut CallStore) -> wasmtime::Result<Result<T, Failure>> + 'a,
) -> Bound<'a> {
    Bound {
        kind: W::KIND,
        run: Box::new(move |instance, store| {
            let instance = W::of(instance)
                .ok_or_else(|| wasmtime::Error::msg(format!("not a {} instance", W::KIND)))?;
            Ok(function(instance, store)?.map(Into::into))
        }),
    }
}

impl Call {
    /// The transform that answers this call.
    pub fn transform(&self) -> TransformKind {
        self.bind().kind
    }

    /// The one dispatch of the data form: each call's world and typed function.
    pub(crate) fn bind(&self) -> Bound<'_> {
        match self {
            Call::Serialize { request } => {
                on::<SerializerWorld, _>(move |i, s| serializer::serialize(i, s, request))
            }
            Call::SerializeUnseen { request, options } => on::<SerializerWorld, _>(move |i, s| {
                serializer::serialize_unseen(i, s, request, *options)
            }),
            Call::SerializeResumed {
                continuation,
                resume,
                options,
            } => on::<SerializerWorld, _>(move |i, s| {
                serializer::serialize_resumed(i, s, continuation, resume, *options)
            }),
            Call::Repair { prompt, rejection } => on::<SerializerWorld, _>(move |i, s| {
                serializer::repair(i, s, prompt, rejection).map(Ok)
            }),
            Call::Parse {
                output,
                tools,
                id_seed,
                max_calls,
            } => on::<EnvelopeWorld, _>(move |i, s| {
                envelope::parse(i, s, output, tools, id_seed, *max_calls)
            }),
            Call::NarratesUnexecutedAction { output } => on::<EnvelopeWorld, _>(move |i, s| {
                envelope::narrates_unexecuted_action(i, s, output).map(Ok)
            }),
            Call::ParseReview { output } => {
                on::<EnvelopeWorld, _>(move |i, s| envelope::parse_review(i, s, output))
            }
            Call::StreamStart { head } => {
                on::<SseWorld, _>(move |i, s| sse::stream_start(i, s, head).map(Ok))
            }
            Call::StreamPing => on::<SseWorld, _>(|i, s| sse::stream_ping(i, s).map(Ok)),
            Call::StreamFinish {
                reply,
                usage,
                safeguard,
            } => on::<SseWorld, _>(move |i, s| {
                sse::stream_finish(i, s, reply, *usage, safeguard.as_ref()).map(Ok)
            }),
            Call::RenderStream {
                head,
                reply,
                safeguard,
            } => on::<SseWorld, _>(move |i, s| {
                sse::render_stream(i, s, head, reply, safeguard.as_ref()).map(Ok)
            }),
            Call::RenderJson {
                head,
                reply,
                safeguard,
            } => on::<SseWorld, _>(move |i, s| {
                sse::render_json(i, s, head, reply, safeguard.as_ref()).map(Ok)
            }),
            Call::ErrorEvent { failure } => {
                on::<SseWorld, _>(move |i, s| sse::error_event(i, s, failure).map(Ok))
            }
            Call::ErrorBody { failure } => {
                on::<SseWorld, _>(move |i, s| sse::error_body(i, s, failure).map(Ok))
            }
            Call::AgentErrorMessage { raw } => {
                on::<SseWorld, _>(move |i, s| sse::agent_error_message(i, s, raw).map(Ok))
            }
            Call::ParseEvents {
                buffer,
                max_event_bytes,
            } => on::<SseWorld, _>(move |i, s| sse::parse_events(i, s, buffer, *max_event_bytes)),
            Call::Validate { reference, catalog } => on::<ModelAliasWorld, _>(move |i, s| {
                model_alias::validate(i, s, reference, catalog)
            }),
            Call::ClientEnvironment { settings, catalog } => {
                on::<ModelAliasWorld, _>(move |i, s| {
                    model_alias::client_environment(i, s, settings, catalog)
                })
            }
            Call::Resolve { requested, catalog } => {
                on::<ModelAliasWorld, _>(move |i, s| model_alias::resolve(i, s, requested, catalog))
            }
            Call::ListModels { catalog, vision } => on::<ModelAliasWorld, _>(move |i, s| {
                model_alias::list_models(i, s, catalog, *vision)
            }),
            Call::ContextWindows { catalog } => {
                on::<ModelAliasWorld, _>(move |i, s| model_alias::context_windows(i, s, catalog))
            }
            Call::Judge {
                calls,
                classifier_context,
            } => on::<SafeguardWorld, _>(move |i, s| {
                safeguard::judge(i, s, calls, classifier_context).map(Ok)
            }),
        }
    }
}
