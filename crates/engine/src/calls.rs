//! The typed calls of every transform, on whatever serves them: the live, hot-swappable set
//! ([`crate::Transforms`]) or one component loaded on its own ([`crate::Component`]).
//!
//! Each method runs its WIT function (see `bindings`) on a fresh instance in a fresh store, or,
//! on a [`crate::Turn`], on the turn's instance in the turn's store.
//! Arguments are taken by value so request bodies move into the call without a copy.

use std::sync::Arc;

use devin_bridge_types::{
    Failure, MessageHead, Parsed, Prompt, PromptOptions, Reply, ResolvedModel, Resume,
    ResumedPrompt, SafeguardStatus, SseFrames, ToolCall, UnseenPrompt, Usage,
};

use crate::bindings::functions as wit;
use crate::bindings::reply::reply_of_owned;
use crate::bindings::Instance;
use crate::runtime::{CallState, Runtime};
use crate::{EngineError, Loaded, ReplyStream, TransformKind, Turn};

/// The version of a transform that answers a call, and the runtime it runs on.
pub struct Serving<'a> {
    pub(crate) loaded: Arc<Loaded>,
    pub(crate) runtime: &'a Runtime,
}

/// The typed calls; implemented by everything that serves transforms.
pub trait TransformCalls {
    /// The version of `kind` that answers now.
    fn serving(&self, kind: TransformKind) -> Serving<'_>;

    #[doc(hidden)]
    fn serving_run<T>(
        &self,
        kind: TransformKind,
        call: impl FnOnce(&Instance, &mut wasmtime::Store<CallState>) -> wasmtime::Result<T>,
    ) -> Result<T, EngineError> {
        let serving = self.serving(kind);
        serving.loaded.run(kind, serving.runtime, call)
    }

    fn serialize(&self, request: String) -> Result<Result<Prompt, Failure>, EngineError> {
        self.serving_run(TransformKind::Serializer, |i, store| {
            wit::serialize(i, store, &request)
        })
    }

    /// The prompt for a session that holds the conversation's first `options.held` messages.
    fn serialize_unseen(
        &self,
        request: Arc<String>,
        options: PromptOptions,
    ) -> Result<Result<UnseenPrompt, Failure>, EngineError> {
        self.serving_run(TransformKind::Serializer, |i, store| {
            wit::serialize_unseen(i, store, &request, options)
        })
    }

    /// The prompt for a request given as the continuation of an earlier one (see the WIT
    /// `serialize-resumed`).
    fn serialize_resumed(
        &self,
        continuation: String,
        resume: Resume,
        options: PromptOptions,
    ) -> Result<Result<ResumedPrompt, Failure>, EngineError> {
        self.serving_run(TransformKind::Serializer, |i, store| {
            wit::serialize_resumed(i, store, &continuation, &resume, options)
        })
    }

    fn repair(&self, prompt: String, rejection: Failure) -> Result<String, EngineError> {
        self.serving_run(TransformKind::Serializer, |i, store| {
            wit::repair(i, store, &prompt, &rejection)
        })
    }

    /// The agent's output as a reply, and the recoveries the envelope parser took on it.
    fn parse(
        &self,
        output: String,
        tools: String,
        id_seed: String,
        max_calls: u32,
    ) -> Result<Result<Parsed, Failure>, EngineError> {
        self.serving_run(TransformKind::Envelope, |i, store| {
            // A text reply comes back as its span of `output`: cut from this buffer, not copied.
            match wit::parse(i, store, &output, &tools, &id_seed, max_calls)? {
                Ok(parsed) => reply_of_owned(parsed, output).map(Ok),
                Err(failure) => Ok(Err(failure)),
            }
        })
    }

    /// Opens a reply stream in a turn of its own (see [`crate::ReplyStream`]): a store and an
    /// instance of the envelope version serving now, kept for the stream. A turn that makes
    /// other calls too opens the stream in its store instead ([`crate::Turn::reply_stream`]).
    fn reply_stream(
        &self,
        tools: &str,
        id_seed: &str,
        max_calls: u32,
    ) -> Result<ReplyStream, EngineError>
    where
        Self: Sized,
    {
        Arc::new(Turn::open(self)).reply_stream(tools, id_seed, max_calls)
    }

    fn narrates_unexecuted_action(&self, output: String) -> Result<bool, EngineError> {
        self.serving_run(TransformKind::Envelope, |i, store| {
            wit::narrates_unexecuted_action(i, store, &output)
        })
    }

    /// A read-only reviewer's reply, validated by the envelope component: the first JSON object
    /// of `output` in canonical form, or `review_missing` / `review_invalid`.
    fn parse_review(&self, output: String) -> Result<Result<String, Failure>, EngineError> {
        self.serving_run(TransformKind::Envelope, |i, store| {
            wit::parse_review(i, store, &output)
        })
    }

    fn stream_start(&self, head: MessageHead) -> Result<String, EngineError> {
        self.serving_run(TransformKind::Sse, |i, store| {
            wit::stream_start(i, store, &head)
        })
    }

    fn stream_ping(&self) -> Result<String, EngineError> {
        self.serving_run(TransformKind::Sse, wit::stream_ping)
    }

    /// `message_delta` and `message_stop` for a finished reply; with `safeguard`, the delta's
    /// `safeguard_results`.
    fn stream_finish(
        &self,
        reply: Reply,
        usage: Usage,
        safeguard: Option<SafeguardStatus>,
    ) -> Result<String, EngineError> {
        self.serving_run(TransformKind::Sse, |i, store| {
            wit::stream_finish(i, store, &reply, &usage, safeguard.as_ref())
        })
    }

    /// Streamed text of the reply's one text block (with `first`, the block's start).
    fn stream_text(&self, first: bool, text: String) -> Result<String, EngineError> {
        self.serving_run(TransformKind::Sse, |i, store| {
            wit::stream_text(i, store, first, &text)
        })
    }

    /// The end of a reply whose text block was streamed: the tail, the block's stop, the calls
    /// from index 1, `message_delta` and `message_stop`.
    fn stream_finish_after_text(
        &self,
        tail: String,
        calls: Vec<ToolCall>,
        usage: Usage,
        safeguard: Option<SafeguardStatus>,
    ) -> Result<String, EngineError> {
        self.serving_run(TransformKind::Sse, |i, store| {
            wit::stream_finish_after_text(i, store, &tail, &calls, &usage, safeguard.as_ref())
        })
    }

    /// A non-streaming response body; with `safeguard`, its top-level `safeguard_results`.
    fn render_json(
        &self,
        head: MessageHead,
        reply: Reply,
        safeguard: Option<SafeguardStatus>,
    ) -> Result<String, EngineError> {
        self.serving_run(TransformKind::Sse, |i, store| {
            wit::render_json(i, store, &head, &reply, safeguard.as_ref())
        })
    }

    /// The safeguard judge's verdict on each of `calls`, after the conversation's `earlier_calls`.
    fn judge(
        &self,
        calls: Vec<ToolCall>,
        classifier_context: String,
        earlier_calls: Vec<ToolCall>,
    ) -> Result<SafeguardStatus, EngineError> {
        self.serving_run(TransformKind::Safeguard, |i, store| {
            wit::judge(i, store, &calls, &classifier_context, &earlier_calls)
        })
    }

    fn error_event(&self, failure: Failure) -> Result<String, EngineError> {
        self.serving_run(TransformKind::Sse, |i, store| {
            wit::error_event(i, store, &failure)
        })
    }

    fn error_body(&self, failure: Failure) -> Result<String, EngineError> {
        self.serving_run(TransformKind::Sse, |i, store| {
            wit::error_body(i, store, &failure)
        })
    }

    /// `sse.agent-error-message`: an agent's error text, cleaned for clients.
    fn agent_error_message(&self, raw: String) -> Result<String, EngineError> {
        self.serving_run(TransformKind::Sse, |i, store| {
            wit::agent_error_message(i, store, &raw)
        })
    }

    /// Frames the complete events of an event stream read from an untrusted server, in the
    /// sse component: `buffer` is the previous call's tail followed by the bytes read since.
    /// `sse_event_too_large` / `sse_invalid_utf8` end the stream.
    fn parse_events(
        &self,
        buffer: Vec<u8>,
        max_event_bytes: u32,
    ) -> Result<Result<SseFrames, Failure>, EngineError> {
        self.serving_run(TransformKind::Sse, |i, store| {
            wit::parse_events(i, store, &buffer, max_event_bytes)
        })
    }

    fn client_environment(
        &self,
        settings: Vec<(String, String)>,
        catalog: String,
    ) -> Result<Result<Vec<(String, String)>, Failure>, EngineError> {
        self.serving_run(TransformKind::ModelAlias, |i, store| {
            wit::client_environment(i, store, &settings, &catalog)
        })
    }

    fn resolve_model(
        &self,
        requested: String,
        catalog: String,
    ) -> Result<Result<ResolvedModel, Failure>, EngineError> {
        self.serving_run(TransformKind::ModelAlias, |i, store| {
            wit::resolve(i, store, &requested, &catalog)
        })
    }

    fn list_models(
        &self,
        catalog: String,
        vision: bool,
    ) -> Result<Result<String, Failure>, EngineError> {
        self.serving_run(TransformKind::ModelAlias, |i, store| {
            wit::list_models(i, store, &catalog, vision)
        })
    }

    /// The context window of every listed model whose catalog entry states one, by ACP id.
    fn context_windows(
        &self,
        catalog: String,
    ) -> Result<Result<Vec<(String, u64)>, Failure>, EngineError> {
        self.serving_run(TransformKind::ModelAlias, |i, store| {
            wit::context_windows(i, store, &catalog)
        })
    }

    /// The model-alias component's `validate`.
    fn validate_model(
        &self,
        reference: String,
        catalog: String,
    ) -> Result<Result<String, Failure>, EngineError> {
        self.serving_run(TransformKind::ModelAlias, |i, store| {
            wit::validate(i, store, &reference, &catalog)
        })
    }
}

/// One transform component on a runtime of its own, for commands that call a single transform
/// directly rather than serve the whole set (see [`crate::load_one`]).
pub struct Component {
    pub runtime: Runtime,
    pub loaded: Arc<Loaded>,
}

impl TransformCalls for Component {
    fn serving(&self, _kind: TransformKind) -> Serving<'_> {
        Serving {
            loaded: self.loaded.clone(),
            runtime: &self.runtime,
        }
    }
}

// A turn is opened from whatever serves transforms, and serves the typed calls itself; both
// are here, beside the trait, so that `turn` (the store and its instances) knows nothing of it.
impl Turn {
    /// A turn served by the versions `source` serves now, on a store of its own.
    pub fn open(source: &impl TransformCalls) -> Self {
        let versions = TransformKind::ALL.map(|kind| source.serving(kind).loaded);
        let runtime = source.serving(TransformKind::Envelope).runtime.clone();
        Turn::new(runtime, versions)
    }
}

impl TransformCalls for Turn {
    fn serving(&self, kind: TransformKind) -> Serving<'_> {
        Serving {
            loaded: self.version(kind).clone(),
            runtime: self.runtime(),
        }
    }

    fn serving_run<T>(
        &self,
        kind: TransformKind,
        call: impl FnOnce(&Instance, &mut wasmtime::Store<CallState>) -> wasmtime::Result<T>,
    ) -> Result<T, EngineError> {
        self.run(kind, call)
    }
}
