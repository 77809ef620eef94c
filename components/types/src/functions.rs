//! The one table of the transforms' WIT functions, as calls: a row per call of the data form
//! (`devin_bridge_calls::Call`), which is a WIT function call (or, for `ParseStream`, a whole
//! reply stream).
//!
//! A row reads
//!
//! ```text
//! /// docs of the call
//! Variant { field: Type, ... } => Transform
//!     wit[("wit-name") fn rust_name(param: Type, ...) -> Result = (argument, ...)]
//!     native(expression);
//! ```
//!
//! - `Variant { ... }`: the call's variant and its fields, with their serde attributes (the
//!   fixtures' `args`); no braces for a call without arguments.
//! - `Transform`: the transform that answers it (`devin_bridge_calls::TransformKind`).
//! - `wit[...]`: the WIT function: its name, its parameter and result types (the plain types
//!   of this crate, or `&str`, `&[T]`, `u32`, ... for WIT's own types; `Result<T, Failure>` is
//!   a WIT `result<T, failure>`), and after `=` the arguments the host passes from the call's
//!   fields (bound by reference). The parameters are named as the fields they come from.
//! - `bind[...]` instead of the arguments: the host binds the call by hand (an expression of
//!   the fields), for a call whose answer needs more than one function's result.
//! - `guest(...)`: what a component's export answers, when it is not the native answer.
//! - `native(...)`: the library's answer, an expression of the fields (bound by reference)
//!   over the libraries, named by their crate names (`devin_bridge_sse::...`; a component names
//!   itself so with `extern crate self as devin_bridge_sse;`): a `Result<T, Failure>` or a
//!   value that cannot fail.
//!
//! Each user passes the table to a macro of its own ([`transform_functions!`]):
//! `devin-bridge-calls` makes the `Call` enum, `Call::transform` and `Call::run_native` of
//! it, the engine its typed calls, `bind` and the load-time type check, and every component
//! (the transforms and the test components) its exports ([`guest_exports!`]: a trait whose
//! default methods answer as the library does, which a component overrides where it differs).
//! So a new WIT function is one row here, with its WIT, its library code, its fixtures and
//! its docs.
//!
//! Invariant: a row's WIT names, parameter and result types are checked against a component's
//! exports when the host loads it (the engine refuses a component that does not export every
//! function of its transform's rows with these types), wit-bindgen checks the exports against
//! the WIT when a component builds, and the golden fixtures are answered both natively (the
//! golden test) and by the components (the engine's self-test corpus, the differential test).

/// Calls `$callback! { $prefix... rows... }` with the table of the transforms' calls (see the
/// module documentation of `functions` for the form of a row). The callback is an identifier
/// in scope, or a path in brackets (`[$crate::guest_exports]`).
#[macro_export]
macro_rules! transform_functions {
    ($callback:ident! { $($prefix:tt)* }) => {
        $crate::transform_functions!([$callback] { $($prefix)* });
    };
    ([$($callback:tt)*] { $($prefix:tt)* }) => {
        $($callback)*! {
            $($prefix)*

            Serialize { request: String } => Serializer
                wit[("serialize") fn serialize(request: &str) -> Result<Prompt, Failure>
                    = (request)]
                native(devin_bridge_serializer::serialize(request));
            /// The request is shared, not owned: the resident transport keeps it for a replay
            /// and may serialize it more than once, and a request can be megabytes.
            SerializeUnseen {
                request: Arc<String>,
                #[serde(flatten)]
                options: PromptOptions,
            } => Serializer
                wit[("serialize-unseen")
                    fn serialize_unseen(request: &str, options: PromptOptions)
                        -> Result<UnseenPrompt, Failure>
                    = (request, *options)]
                native(devin_bridge_serializer::serialize_unseen(request, *options));
            SerializeResumed {
                continuation: String,
                resume: Resume,
                #[serde(flatten)]
                options: PromptOptions,
            } => Serializer
                wit[("serialize-resumed")
                    fn serialize_resumed(continuation: &str, resume: &Resume, options: PromptOptions)
                        -> Result<ResumedPrompt, Failure>
                    = (continuation, resume, *options)]
                native(devin_bridge_serializer::serialize_resumed(continuation, resume, *options));
            Repair { prompt: String, rejection: Failure } => Serializer
                wit[("repair") fn repair(prompt: &str, rejection: &Failure) -> String
                    = (prompt, rejection)]
                native(devin_bridge_serializer::repair(prompt, rejection));

            /// The component answers a text reply as its span of `output` (the host holds the
            /// output already), which the binding resolves against it.
            Parse {
                output: String,
                tools: String,
                id_seed: String,
                /// The most envelopes the reply may hold.
                max_calls: u32,
            } => Envelope
                wit[("parse")
                    fn parse(output: &str, tools: &str, id_seed: &str, max_calls: u32)
                        -> Result<ParsedReply, Failure>]
                bind[bind_parse(output, tools, id_seed, *max_calls)]
                guest(devin_bridge_envelope::parse_span(output, tools, id_seed, *max_calls))
                native(devin_bridge_envelope::parse(output, tools, id_seed, *max_calls));
            /// A reply stream fed `chunks` in order: every push's answer, then the end (the
            /// data form of a streamed turn, for the corpus, the differential and the fuzz
            /// target).
            ParseStream {
                chunks: Vec<String>,
                tools: String,
                id_seed: String,
                max_calls: u32,
                /// The end's narration verdict is not asked for (it answers false), as a turn
                /// without tools skips it.
                #[serde(default, skip_serializing_if = "std::ops::Not::not")]
                skip_narration: bool,
            } => Envelope
                bind[bind_parse_stream(chunks, tools, id_seed, *max_calls, !skip_narration)]
                native(parse_stream(chunks, tools, id_seed, *max_calls, !skip_narration));
            NarratesUnexecutedAction { output: String } => Envelope
                wit[("narrates-unexecuted-action") fn narrates_unexecuted_action(output: &str) -> bool
                    = (output)]
                native(devin_bridge_envelope::narrates_unexecuted_action(output));
            ParseReview { output: String } => Envelope
                wit[("parse-review") fn parse_review(output: &str) -> Result<String, Failure>
                    = (output)]
                native(devin_bridge_envelope::parse_review(output));

            StreamStart { head: MessageHead } => Sse
                wit[("stream-start") fn stream_start(head: &MessageHead) -> String = (head)]
                native(devin_bridge_sse::stream_start(head));
            StreamPing => Sse
                wit[("stream-ping") fn stream_ping() -> String = ()]
                native(devin_bridge_sse::stream_ping());
            StreamFinish {
                reply: Reply,
                usage: Usage,
                #[serde(default)]
                safeguard: Option<SafeguardStatus>,
            } => Sse
                wit[("stream-finish")
                    fn stream_finish(reply: &Reply, usage: &Usage, safeguard: Option<&SafeguardStatus>)
                        -> String
                    = (reply, usage, safeguard.as_ref())]
                native(devin_bridge_sse::stream_finish(reply, usage, safeguard.as_ref()));
            StreamText { first: bool, text: String } => Sse
                wit[("stream-text") fn stream_text(first: bool, text: &str) -> String
                    = (*first, text)]
                native(devin_bridge_sse::stream_text(*first, text));
            StreamFinishAfterText {
                tail: String,
                calls: Vec<ToolCall>,
                usage: Usage,
                #[serde(default)]
                safeguard: Option<SafeguardStatus>,
            } => Sse
                wit[("stream-finish-after-text")
                    fn stream_finish_after_text(
                        tail: &str,
                        calls: &[ToolCall],
                        usage: &Usage,
                        safeguard: Option<&SafeguardStatus>,
                    ) -> String
                    = (tail, calls, usage, safeguard.as_ref())]
                native(devin_bridge_sse::stream_finish_after_text(tail, calls, usage, safeguard.as_ref()));
            RenderStream {
                head: MessageHead,
                reply: Reply,
                #[serde(default)]
                safeguard: Option<SafeguardStatus>,
            } => Sse
                wit[("render-stream")
                    fn render_stream(head: &MessageHead, reply: &Reply, safeguard: Option<&SafeguardStatus>)
                        -> String
                    = (head, reply, safeguard.as_ref())]
                native(devin_bridge_sse::render_stream(head, reply, safeguard.as_ref()));
            RenderJson {
                head: MessageHead,
                reply: Reply,
                #[serde(default)]
                safeguard: Option<SafeguardStatus>,
            } => Sse
                wit[("render-json")
                    fn render_json(head: &MessageHead, reply: &Reply, safeguard: Option<&SafeguardStatus>)
                        -> String
                    = (head, reply, safeguard.as_ref())]
                native(devin_bridge_sse::render_json(head, reply, safeguard.as_ref()));
            ErrorEvent { failure: Failure } => Sse
                wit[("error-event") fn error_event(failure: &Failure) -> String = (failure)]
                native(devin_bridge_sse::error_event(failure));
            ErrorBody { failure: Failure } => Sse
                wit[("error-body") fn error_body(failure: &Failure) -> String = (failure)]
                native(devin_bridge_sse::error_body(failure));
            AgentErrorMessage { raw: String } => Sse
                wit[("agent-error-message") fn agent_error_message(raw: &str) -> String = (raw)]
                native(devin_bridge_sse::agent_error_message(raw));
            ParseEvents { buffer: Vec<u8>, max_event_bytes: u32 } => Sse
                wit[("parse-events")
                    fn parse_events(buffer: &[u8], max_event_bytes: u32) -> Result<SseFrames, Failure>
                    = (buffer, *max_event_bytes)]
                native(devin_bridge_sse::parse_events(buffer, *max_event_bytes));

            Validate { reference: String, catalog: String } => ModelAlias
                wit[("validate") fn validate(reference: &str, catalog: &str) -> Result<String, Failure>
                    = (reference, catalog)]
                native(devin_bridge_model_alias::validate(reference, catalog));
            ClientEnvironment { settings: Vec<(String, String)>, catalog: String } => ModelAlias
                wit[("client-environment")
                    fn client_environment(settings: &[(String, String)], catalog: &str)
                        -> Result<Vec<(String, String)>, Failure>
                    = (settings, catalog)]
                native(devin_bridge_model_alias::client_environment(settings, catalog));
            Resolve { requested: String, catalog: String } => ModelAlias
                wit[("resolve")
                    fn resolve(requested: &str, catalog: &str) -> Result<ResolvedModel, Failure>
                    = (requested, catalog)]
                native(devin_bridge_model_alias::resolve(requested, catalog));
            ListModels {
                catalog: String,
                #[serde(default)]
                vision: bool,
            } => ModelAlias
                wit[("list-models") fn list_models(catalog: &str, vision: bool) -> Result<String, Failure>
                    = (catalog, *vision)]
                native(devin_bridge_model_alias::list_models(catalog, *vision));
            ContextWindows { catalog: String } => ModelAlias
                wit[("context-windows")
                    fn context_windows(catalog: &str) -> Result<Vec<(String, u64)>, Failure>
                    = (catalog)]
                native(devin_bridge_model_alias::context_windows(catalog));

            Judge {
                calls: Vec<ToolCall>,
                classifier_context: String,
                /// The conversation's calls before the reply; a fixture without them has none.
                #[serde(default)]
                earlier_calls: Vec<ToolCall>,
            } => Safeguard
                wit[("judge")
                    fn judge(calls: &[ToolCall], classifier_context: &str, earlier_calls: &[ToolCall])
                        -> SafeguardStatus
                    = (calls, classifier_context, earlier_calls)]
                native(devin_bridge_safeguard::judge_in_conversation(calls, classifier_context, earlier_calls));
        }
    };
}
