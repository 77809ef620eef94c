//! Typed calls into each transform's WIT interface.
//!
//! `wasmtime::component::bindgen!` generates one module per world. The shared records of the
//! `types` interface are generated once, with the serializer's world, and every other world
//! reuses them (`with:`). The generated records meet the plain types of `devin-bridge-types`
//! (the same types the native libraries and the components' exports use) in one module,
//! `convert`; nothing else here knows a record's fields.
//!
//! Each WIT function has one typed function here (`serializer::serialize`, ...) that runs on an
//! instance of its world ([`World`]); `TransformCalls` calls them directly. [`Call`] (defined,
//! with [`Answer`], in `devin-bridge-calls`, which needs no wasm) is the data form of the same
//! calls, for the golden corpus, the differential tests, the fuzz targets and the benchmarks:
//! [`bind`] is the one match that maps a call onto its world and typed function.

use std::sync::Arc;

use devin_bridge_calls::{Answer, Call, Output, StreamedEnd, StreamedParse};
use devin_bridge_types::{
    Failure, MessageHead, Parsed, ParsedReply, Prompt, PromptOptions, Reply, ResolvedModel, Resume,
    ResumedPrompt, SafeguardStatus, ShownPiece, SseFrames, StreamEnd, TextSpan, ToolCall,
    UnseenPrompt, Usage,
};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{
    ComponentExportIndex, ComponentNamedList, InstancePre, Lift, Lower, ResourceAny, TypedFunc,
};
use wasmtime::Store;

use super::runtime::{arm_deadline, CallState};
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
///
/// A fresh instance serves each call, so what instantiation costs is paid per call. The
/// generated bindings' instantiation looks up and type-checks every function of the world on
/// every instance; here that check runs once, when the component loads, and a call looks up
/// only the function it runs (by the export index found at load time).
#[derive(Clone)]
pub(crate) struct TypedPre {
    kind: TransformKind,
    pre: InstancePre<CallState>,
    functions: Arc<Functions>,
}

/// The export index of each function of a transform's interface, by WIT name.
type Functions = Vec<(String, ComponentExportIndex)>;

impl TypedPre {
    /// Checks that the component exports `kind`'s interface with the right types, on one
    /// scratch instance in `store` (the generated bindings type-check every function of the
    /// world as they load it), and finds the export index of each of its functions.
    pub(crate) fn new(
        kind: TransformKind,
        pre: InstancePre<CallState>,
        store: &mut Store<CallState>,
    ) -> Result<Self, Rejected> {
        let instance = pre.instantiate(&mut *store).map_err(Rejected::Instance)?;
        let checked = match kind {
            TransformKind::Serializer => {
                serializer_world::SerializerComponent::new(&mut *store, &instance).map(drop)
            }
            TransformKind::Envelope => {
                envelope_world::EnvelopeComponent::new(&mut *store, &instance).map(drop)
            }
            TransformKind::Sse => sse_world::SseComponent::new(&mut *store, &instance).map(drop),
            TransformKind::ModelAlias => {
                model_alias_world::ModelAliasComponent::new(&mut *store, &instance).map(drop)
            }
            TransformKind::Safeguard => {
                safeguard_world::SafeguardComponent::new(&mut *store, &instance).map(drop)
            }
        };
        checked.map_err(Rejected::Interface)?;
        let component = pre.component();
        let engine = store.engine();
        let mut functions = Functions::new();
        for (name, item) in component.component_type().exports(engine) {
            let ComponentItem::ComponentInstance(interface) = item.ty else {
                continue;
            };
            let Some(interface_index) = component.get_export_index(None, name) else {
                continue;
            };
            for (function, item) in interface.exports(engine) {
                if !matches!(item.ty, ComponentItem::ComponentFunc(_)) {
                    continue;
                }
                if let Some(index) = component.get_export_index(Some(&interface_index), function) {
                    functions.push((function.to_owned(), index));
                }
            }
        }
        Ok(Self {
            kind,
            pre,
            functions: Arc::new(functions),
        })
    }

    pub(crate) fn instantiate(&self, store: &mut Store<CallState>) -> wasmtime::Result<Instance> {
        Ok(Instance {
            kind: self.kind,
            instance: self.pre.instantiate(store)?,
            functions: self.functions.clone(),
        })
    }
}

/// Why a component was refused when it loaded.
pub(crate) enum Rejected {
    /// It could not be instantiated at all.
    Instance(wasmtime::Error),
    /// Its exports are not the transform's interface.
    Interface(wasmtime::Error),
}

/// A live instance of one transform (a fresh one per call in production).
pub struct Instance {
    kind: TransformKind,
    instance: wasmtime::component::Instance,
    functions: Arc<Functions>,
}

impl Instance {
    /// The exported function `name` of the transform's interface, type-checked as `P -> R`.
    fn function<P, R>(&self, store: &mut CallStore, name: &str) -> wasmtime::Result<TypedFunc<P, R>>
    where
        P: ComponentNamedList + Lower,
        R: ComponentNamedList + Lift,
    {
        let index = self
            .functions
            .iter()
            .find_map(|(function, index)| (function == name).then_some(index))
            .ok_or_else(|| wasmtime::Error::msg(format!("the component exports no `{name}`")))?;
        self.instance.get_typed_func::<P, R>(store, index)
    }

    /// Calls the exported function `name` with `params` (its results, as a tuple).
    fn call<P, R>(&self, store: &mut CallStore, name: &str, params: P) -> wasmtime::Result<R>
    where
        P: ComponentNamedList + Lower,
        R: ComponentNamedList + Lift,
    {
        self.function::<P, R>(store, name)?.call(store, params)
    }
}

/// One transform's world: the transform whose instance answers its functions. The typed
/// functions below run on an [`Instance`] of it; [`crate::Loaded::run`] makes the fresh
/// instance they run on.
pub trait World {
    const KIND: TransformKind;
}

macro_rules! world {
    ($marker:ident, $kind:ident) => {
        pub(crate) struct $marker;
        impl World for $marker {
            const KIND: TransformKind = TransformKind::$kind;
        }
    };
}
world!(SerializerWorld, Serializer);
world!(EnvelopeWorld, Envelope);
world!(SseWorld, Sse);
world!(ModelAliasWorld, ModelAlias);
world!(SafeguardWorld, Safeguard);

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
    use super::*;
    use serializer_world::exports::devin_bridge::transforms::serializer as wit;

    const KIND: TransformKind = TransformKind::Serializer;

    pub(crate) fn serialize(
        instance: &Instance,
        store: &mut CallStore,
        request: &str,
    ) -> wasmtime::Result<Result<Prompt, Failure>> {
        let (answer,) = instance.call::<(&str,), (Result<wit::Prompt, wit_types::Failure>,)>(
            store,
            "serialize",
            (request,),
        )?;
        Ok(answered(KIND, answer))
    }

    pub(crate) fn serialize_unseen(
        instance: &Instance,
        store: &mut CallStore,
        request: &str,
        options: PromptOptions,
    ) -> wasmtime::Result<Result<UnseenPrompt, Failure>> {
        let options: wit::PromptOptions = options.convert();
        let (answer,) = instance
            .call::<(&str, wit::PromptOptions), (Result<wit::UnseenPrompt, wit_types::Failure>,)>(
                store,
                "serialize-unseen",
                (request, options),
            )?;
        Ok(answered(KIND, answer))
    }

    pub(crate) fn serialize_resumed(
        instance: &Instance,
        store: &mut CallStore,
        continuation: &str,
        resume: &Resume,
        options: PromptOptions,
    ) -> wasmtime::Result<Result<ResumedPrompt, Failure>> {
        let resume: wit::Resume = resume.clone().convert();
        let options: wit::PromptOptions = options.convert();
        let (answer,) = instance.call::<
            (&str, &wit::Resume, wit::PromptOptions),
            (Result<wit::ResumedPrompt, wit_types::Failure>,),
        >(store, "serialize-resumed", (continuation, &resume, options))?;
        Ok(answered(KIND, answer))
    }

    pub(crate) fn repair(
        instance: &Instance,
        store: &mut CallStore,
        prompt: &str,
        rejection: &Failure,
    ) -> wasmtime::Result<String> {
        let rejection: wit_types::Failure = rejection.clone().convert();
        let (text,) = instance.call::<(&str, &wit_types::Failure), (String,)>(
            store,
            "repair",
            (prompt, &rejection),
        )?;
        Ok(text)
    }
}

/// The envelope parser's functions.
pub(crate) mod envelope {
    use super::*;
    use envelope_world::exports::devin_bridge::transforms::envelope as wit;

    const KIND: TransformKind = TransformKind::Envelope;

    /// The component's answer: a text reply comes back as its span of `output` (which the host
    /// holds already), see [`reply_of`] and [`reply_of_owned`].
    pub(crate) fn parse(
        instance: &Instance,
        store: &mut CallStore,
        output: &str,
        tools: &str,
        id_seed: &str,
        max_calls: u32,
    ) -> wasmtime::Result<Result<ParsedReply, Failure>> {
        let (answer,) = instance
            .call::<(&str, &str, &str, u32), (Result<wit::ParsedReply, wit_types::Failure>,)>(
                store,
                "parse",
                (output, tools, id_seed, max_calls),
            )?;
        Ok(answered(KIND, answer))
    }

    /// The reply `parsed` stands for, its text copied out of `output`.
    pub(crate) fn reply_of(parsed: ParsedReply, output: &str) -> wasmtime::Result<Parsed> {
        let span = text_span(&parsed);
        parsed
            .resolve(output)
            .ok_or_else(|| outside(span, output.len()))
    }

    /// The reply `parsed` stands for, its text cut from `output`'s own buffer (no copy).
    pub(crate) fn reply_of_owned(parsed: ParsedReply, output: String) -> wasmtime::Result<Parsed> {
        let span = text_span(&parsed);
        let length = output.len();
        parsed
            .resolve_owned(output)
            .ok_or_else(|| outside(span, length))
    }

    fn text_span(parsed: &ParsedReply) -> Option<TextSpan> {
        match parsed {
            ParsedReply::Text(span) => Some(*span),
            ParsedReply::Tools(_) => None,
        }
    }

    /// A component that names text outside the output it was given is broken: its answer is
    /// an error, never a guess.
    fn outside(span: Option<TextSpan>, length: usize) -> wasmtime::Error {
        let (start, span_length) = span.map_or((0, 0), |span| (span.start, span.length));
        wasmtime::Error::msg(format!(
            "parse answered the text span of {span_length} bytes from byte {start}, which is \
             not a span of its {length}-byte output"
        ))
    }

    pub(crate) fn narrates_unexecuted_action(
        instance: &Instance,
        store: &mut CallStore,
        output: &str,
    ) -> wasmtime::Result<bool> {
        let (narrates,) =
            instance.call::<(&str,), (bool,)>(store, "narrates-unexecuted-action", (output,))?;
        Ok(narrates)
    }

    // The reply stream (`resource reply-stream`): its constructor, methods and destructor. The
    // handle is owned by the store the stream was opened in, which must be the store passed to
    // every later call (see `crate::stream`).

    pub(crate) fn stream_open(
        instance: &Instance,
        store: &mut CallStore,
        tools: &str,
        id_seed: &str,
        max_calls: u32,
    ) -> wasmtime::Result<ResourceAny> {
        let (handle,) = instance.call::<(&str, &str, u32), (ResourceAny,)>(
            store,
            "[constructor]reply-stream",
            (tools, id_seed, max_calls),
        )?;
        Ok(handle)
    }

    /// The stream's `push`, type-checked once: a turn pushes every chunk of the agent's output
    /// through it, so the lookup and the type check are not repeated per chunk. Valid for the
    /// instance (and store) it was taken from.
    pub(crate) struct Push(TypedFunc<(ResourceAny, String), (PushAnswer,)>);

    /// What a push answers across the boundary.
    type PushAnswer = Result<Vec<wit::ShownPiece>, wit_types::Failure>;

    pub(crate) fn stream_push_function(
        instance: &Instance,
        store: &mut CallStore,
    ) -> wasmtime::Result<Push> {
        instance
            .function(store, "[method]reply-stream.push")
            .map(Push)
    }

    pub(crate) fn stream_push(
        push: &Push,
        store: &mut CallStore,
        handle: ResourceAny,
        chunk: String,
    ) -> wasmtime::Result<Result<Vec<ShownPiece>, Failure>> {
        let (answer,) = push.0.call(&mut *store, (handle, chunk))?;
        Ok(answered(KIND, answer))
    }

    /// The text a push's `pieces` stand for, given the output pushed so far (this push's chunk
    /// included); an interface error when a span is not a span of it.
    pub(crate) fn shown_text(pieces: &[ShownPiece], output: &str) -> wasmtime::Result<String> {
        ShownPiece::resolve(pieces, output).ok_or_else(|| {
            wasmtime::Error::msg(format!(
                "a push answered a span outside the {} bytes pushed",
                output.len()
            ))
        })
    }

    pub(crate) fn stream_finish(
        instance: &Instance,
        store: &mut CallStore,
        handle: ResourceAny,
    ) -> wasmtime::Result<Result<StreamEnd, Failure>> {
        let (answer,) = instance
            .call::<(ResourceAny,), (Result<wit::StreamEnd, wit_types::Failure>,)>(
                store,
                "[method]reply-stream.finish",
                (handle,),
            )?;
        Ok(answered(KIND, answer))
    }

    pub(crate) fn stream_narrates(
        instance: &Instance,
        store: &mut CallStore,
        handle: ResourceAny,
    ) -> wasmtime::Result<bool> {
        let (narrates,) = instance.call::<(ResourceAny,), (bool,)>(
            store,
            "[method]reply-stream.narrates",
            (handle,),
        )?;
        Ok(narrates)
    }

    /// The resource's destructor (the guest frees the stream's buffer).
    pub(crate) fn stream_close(store: &mut CallStore, handle: ResourceAny) -> wasmtime::Result<()> {
        handle.resource_drop(store)
    }

    /// A whole stream on one instance: opened, fed `chunks` in order (each push with its own
    /// deadline), finished, its narration verdict read, and closed.
    pub(crate) fn parse_stream(
        instance: &Instance,
        store: &mut CallStore,
        chunks: &[String],
        tools: &str,
        id_seed: &str,
        max_calls: u32,
        judge_narration: bool,
    ) -> wasmtime::Result<StreamedParse> {
        arm_deadline(store);
        let handle = stream_open(instance, store, tools, id_seed, max_calls)?;
        let mut pushes = Vec::with_capacity(chunks.len());
        let mut output = String::new();
        for chunk in chunks {
            arm_deadline(store);
            output.push_str(chunk);
            // By reference (the data form holds the chunks): looked up per push.
            let (pushed,) = instance.call::<(ResourceAny, &str), (PushAnswer,)>(
                store,
                "[method]reply-stream.push",
                (handle, chunk),
            )?;
            let pushed = answered(KIND, pushed);
            pushes.push(match pushed {
                Ok(pieces) => Ok(shown_text(&pieces, &output)?),
                Err(failure) => Err(failure),
            });
        }
        arm_deadline(store);
        let end = stream_finish(instance, store, handle)?;
        let narrates = judge_narration && stream_narrates(instance, store, handle)?;
        stream_close(store, handle)?;
        let end = match end {
            Ok(StreamEnd { tail, reply }) => Ok(StreamedEnd {
                tail,
                reply: reply_of_owned(reply, output)?,
                narrates,
            }),
            Err(failure) => Err(failure),
        };
        Ok(StreamedParse { pushes, end })
    }

    pub(crate) fn parse_review(
        instance: &Instance,
        store: &mut CallStore,
        output: &str,
    ) -> wasmtime::Result<Result<String, Failure>> {
        let (answer,) = instance.call::<(&str,), (Result<String, wit_types::Failure>,)>(
            store,
            "parse-review",
            (output,),
        )?;
        Ok(answered(KIND, answer))
    }
}

/// The SSE component's functions. A reply is taken by value: it is converted into the
/// generated bindings' own type on its way in, and a text reply can be megabytes.
pub(crate) mod sse {
    use super::*;
    use sse_world::exports::devin_bridge::transforms::sse as wit;

    /// Calls a rendering function of `(head, reply, safeguard)`.
    fn render(
        instance: &Instance,
        store: &mut CallStore,
        name: &str,
        head: &MessageHead,
        reply: Reply,
        safeguard: Option<&SafeguardStatus>,
    ) -> wasmtime::Result<String> {
        let head: wit::MessageHead = head.clone().convert();
        let reply: wit_types::Reply = reply.convert();
        let safeguard: Option<wit_types::SafeguardStatus> = safeguard.cloned().convert();
        let (text,) =
            instance.call::<(
                &wit::MessageHead,
                &wit_types::Reply,
                Option<&wit_types::SafeguardStatus>,
            ), (String,)>(store, name, (&head, &reply, safeguard.as_ref()))?;
        Ok(text)
    }

    /// Calls a function of one failure.
    fn of_failure(
        instance: &Instance,
        store: &mut CallStore,
        name: &str,
        failure: &Failure,
    ) -> wasmtime::Result<String> {
        let failure: wit_types::Failure = failure.clone().convert();
        let (text,) =
            instance.call::<(&wit_types::Failure,), (String,)>(store, name, (&failure,))?;
        Ok(text)
    }

    pub(crate) fn stream_start(
        instance: &Instance,
        store: &mut CallStore,
        head: &MessageHead,
    ) -> wasmtime::Result<String> {
        let head: wit::MessageHead = head.clone().convert();
        let (text,) =
            instance.call::<(&wit::MessageHead,), (String,)>(store, "stream-start", (&head,))?;
        Ok(text)
    }

    pub(crate) fn stream_ping(
        instance: &Instance,
        store: &mut CallStore,
    ) -> wasmtime::Result<String> {
        let (text,) = instance.call::<(), (String,)>(store, "stream-ping", ())?;
        Ok(text)
    }

    pub(crate) fn stream_finish(
        instance: &Instance,
        store: &mut CallStore,
        reply: Reply,
        usage: Usage,
        safeguard: Option<&SafeguardStatus>,
    ) -> wasmtime::Result<String> {
        let reply: wit_types::Reply = reply.convert();
        let usage: wit_types::Usage = usage.convert();
        let safeguard: Option<wit_types::SafeguardStatus> = safeguard.cloned().convert();
        let (text,) = instance.call::<(
            &wit_types::Reply,
            wit_types::Usage,
            Option<&wit_types::SafeguardStatus>,
        ), (String,)>(
            store, "stream-finish", (&reply, usage, safeguard.as_ref())
        )?;
        Ok(text)
    }

    pub(crate) fn stream_text(
        instance: &Instance,
        store: &mut CallStore,
        first: bool,
        text: &str,
    ) -> wasmtime::Result<String> {
        let (events,) =
            instance.call::<(bool, &str), (String,)>(store, "stream-text", (first, text))?;
        Ok(events)
    }

    pub(crate) fn stream_finish_after_text(
        instance: &Instance,
        store: &mut CallStore,
        tail: &str,
        calls: Vec<ToolCall>,
        usage: Usage,
        safeguard: Option<&SafeguardStatus>,
    ) -> wasmtime::Result<String> {
        let calls: Vec<wit_types::ToolCall> = calls.convert();
        let usage: wit_types::Usage = usage.convert();
        let safeguard: Option<wit_types::SafeguardStatus> = safeguard.cloned().convert();
        let (events,) = instance.call::<(
            &str,
            &[wit_types::ToolCall],
            wit_types::Usage,
            Option<&wit_types::SafeguardStatus>,
        ), (String,)>(
            store,
            "stream-finish-after-text",
            (tail, &calls, usage, safeguard.as_ref()),
        )?;
        Ok(events)
    }

    pub(crate) fn render_stream(
        instance: &Instance,
        store: &mut CallStore,
        head: &MessageHead,
        reply: Reply,
        safeguard: Option<&SafeguardStatus>,
    ) -> wasmtime::Result<String> {
        render(instance, store, "render-stream", head, reply, safeguard)
    }

    pub(crate) fn render_json(
        instance: &Instance,
        store: &mut CallStore,
        head: &MessageHead,
        reply: Reply,
        safeguard: Option<&SafeguardStatus>,
    ) -> wasmtime::Result<String> {
        render(instance, store, "render-json", head, reply, safeguard)
    }

    pub(crate) fn error_event(
        instance: &Instance,
        store: &mut CallStore,
        failure: &Failure,
    ) -> wasmtime::Result<String> {
        of_failure(instance, store, "error-event", failure)
    }

    pub(crate) fn error_body(
        instance: &Instance,
        store: &mut CallStore,
        failure: &Failure,
    ) -> wasmtime::Result<String> {
        of_failure(instance, store, "error-body", failure)
    }

    pub(crate) fn agent_error_message(
        instance: &Instance,
        store: &mut CallStore,
        raw: &str,
    ) -> wasmtime::Result<String> {
        let (text,) = instance.call::<(&str,), (String,)>(store, "agent-error-message", (raw,))?;
        Ok(text)
    }

    pub(crate) fn parse_events(
        instance: &Instance,
        store: &mut CallStore,
        buffer: &[u8],
        max_event_bytes: u32,
    ) -> wasmtime::Result<Result<SseFrames, Failure>> {
        let (answer,) = instance
            .call::<(&[u8], u32), (Result<wit::SseFrames, wit_types::Failure>,)>(
                store,
                "parse-events",
                (buffer, max_event_bytes),
            )?;
        Ok(answered(TransformKind::Sse, answer))
    }
}

/// The model-alias validator's functions.
pub(crate) mod model_alias {
    use super::*;
    use model_alias_world::exports::devin_bridge::transforms::model_alias as wit;

    const KIND: TransformKind = TransformKind::ModelAlias;

    /// Calls a function of the catalog and one more text argument that answers a string.
    fn text_of(
        instance: &Instance,
        store: &mut CallStore,
        name: &str,
        argument: &str,
        catalog: &str,
    ) -> wasmtime::Result<Result<String, Failure>> {
        let (answer,) = instance.call::<(&str, &str), (Result<String, wit_types::Failure>,)>(
            store,
            name,
            (argument, catalog),
        )?;
        Ok(answered(KIND, answer))
    }

    pub(crate) fn validate(
        instance: &Instance,
        store: &mut CallStore,
        reference: &str,
        catalog: &str,
    ) -> wasmtime::Result<Result<String, Failure>> {
        text_of(instance, store, "validate", reference, catalog)
    }

    pub(crate) fn client_environment(
        instance: &Instance,
        store: &mut CallStore,
        settings: &[(String, String)],
        catalog: &str,
    ) -> wasmtime::Result<Result<Vec<(String, String)>, Failure>> {
        let (answer,) = instance.call::<
            (&[(String, String)], &str),
            (Result<Vec<(String, String)>, wit_types::Failure>,),
        >(store, "client-environment", (settings, catalog))?;
        Ok(answered(KIND, answer))
    }

    pub(crate) fn resolve(
        instance: &Instance,
        store: &mut CallStore,
        requested: &str,
        catalog: &str,
    ) -> wasmtime::Result<Result<ResolvedModel, Failure>> {
        let (answer,) = instance
            .call::<(&str, &str), (Result<wit::ResolvedModel, wit_types::Failure>,)>(
                store,
                "resolve",
                (requested, catalog),
            )?;
        Ok(answered(KIND, answer))
    }

    pub(crate) fn list_models(
        instance: &Instance,
        store: &mut CallStore,
        catalog: &str,
        vision: bool,
    ) -> wasmtime::Result<Result<String, Failure>> {
        let (answer,) = instance.call::<(&str, bool), (Result<String, wit_types::Failure>,)>(
            store,
            "list-models",
            (catalog, vision),
        )?;
        Ok(answered(KIND, answer))
    }

    pub(crate) fn context_windows(
        instance: &Instance,
        store: &mut CallStore,
        catalog: &str,
    ) -> wasmtime::Result<Result<Vec<(String, u64)>, Failure>> {
        let (answer,) = instance
            .call::<(&str,), (Result<Vec<(String, u64)>, wit_types::Failure>,)>(
                store,
                "context-windows",
                (catalog,),
            )?;
        Ok(answered(KIND, answer))
    }
}

/// The safeguard judge's function.
pub(crate) mod safeguard {
    use super::*;

    pub(crate) fn judge(
        instance: &Instance,
        store: &mut CallStore,
        calls: &[ToolCall],
        classifier_context: &str,
        earlier_calls: &[ToolCall],
    ) -> wasmtime::Result<SafeguardStatus> {
        let calls: Vec<wit_types::ToolCall> = calls.to_vec().convert();
        let earlier: Vec<wit_types::ToolCall> = earlier_calls.to_vec().convert();
        let (status,) = instance
            .call::<(&[wit_types::ToolCall], &str, &[wit_types::ToolCall]), (wit_types::SafeguardStatus,)>(
                store,
                "judge",
                (&calls, classifier_context, &earlier),
            )?;
        Ok(status.convert())
    }
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
    function: impl FnOnce(&Instance, &mut CallStore) -> wasmtime::Result<Result<T, Failure>> + 'a,
) -> Bound<'a> {
    Bound {
        kind: W::KIND,
        run: Box::new(move |instance, store| {
            if instance.kind != W::KIND {
                return Err(wasmtime::Error::msg(format!("not a {} instance", W::KIND)));
            }
            Ok(function(instance, store)?.map(Into::into))
        }),
    }
}

/// The one dispatch of the data form: each call's world and typed function.
pub(crate) fn bind(call: &Call) -> Bound<'_> {
    match call {
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
            match envelope::parse(i, s, output, tools, id_seed, *max_calls)? {
                Ok(parsed) => envelope::reply_of(parsed, output).map(Ok),
                Err(failure) => Ok(Err(failure)),
            }
        }),
        Call::ParseStream {
            chunks,
            tools,
            id_seed,
            max_calls,
            skip_narration,
        } => on::<EnvelopeWorld, _>(move |i, s| {
            envelope::parse_stream(i, s, chunks, tools, id_seed, *max_calls, !*skip_narration)
                .map(Ok)
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
            sse::stream_finish(i, s, reply.clone(), *usage, safeguard.as_ref()).map(Ok)
        }),
        Call::StreamText { first, text } => {
            on::<SseWorld, _>(move |i, s| sse::stream_text(i, s, *first, text).map(Ok))
        }
        Call::StreamFinishAfterText {
            tail,
            calls,
            usage,
            safeguard,
        } => on::<SseWorld, _>(move |i, s| {
            sse::stream_finish_after_text(i, s, tail, calls.clone(), *usage, safeguard.as_ref())
                .map(Ok)
        }),
        Call::RenderStream {
            head,
            reply,
            safeguard,
        } => on::<SseWorld, _>(move |i, s| {
            sse::render_stream(i, s, head, reply.clone(), safeguard.as_ref()).map(Ok)
        }),
        Call::RenderJson {
            head,
            reply,
            safeguard,
        } => on::<SseWorld, _>(move |i, s| {
            sse::render_json(i, s, head, reply.clone(), safeguard.as_ref()).map(Ok)
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
        Call::Validate { reference, catalog } => {
            on::<ModelAliasWorld, _>(move |i, s| model_alias::validate(i, s, reference, catalog))
        }
        Call::ClientEnvironment { settings, catalog } => on::<ModelAliasWorld, _>(move |i, s| {
            model_alias::client_environment(i, s, settings, catalog)
        }),
        Call::Resolve { requested, catalog } => {
            on::<ModelAliasWorld, _>(move |i, s| model_alias::resolve(i, s, requested, catalog))
        }
        Call::ListModels { catalog, vision } => {
            on::<ModelAliasWorld, _>(move |i, s| model_alias::list_models(i, s, catalog, *vision))
        }
        Call::ContextWindows { catalog } => {
            on::<ModelAliasWorld, _>(move |i, s| model_alias::context_windows(i, s, catalog))
        }
        Call::Judge {
            calls,
            classifier_context,
            earlier_calls,
        } => on::<SafeguardWorld, _>(move |i, s| {
            safeguard::judge(i, s, calls, classifier_context, earlier_calls).map(Ok)
        }),
    }
}
