//! A twin of all five transforms: it keeps every promise of the WIT contract but differs from
//! the real components byte for byte, the way a legitimate rebuild may: other failure wording,
//! another framing sentence, JSON with spaces after `:` and `,`. The host must accept it as a
//! swap candidate for each transform, and requests served by it must be indistinguishable
//! from the real ones to a client that parses what it receives.

#[cfg(target_arch = "wasm32")]
mod wasm {
    devin_bridge_types::guest_bindings!([serializer, envelope, sse, model_alias, safeguard] {
        world: "devin-bridge:twin/twin",
        path: ["../../../wit", "wit"],
        generate_all,
    });

    use devin_bridge_types::{
        Failure, MessageHead, ParsedReply, Prompt, PromptOptions, Reply, ResolvedModel, Resume,
        ResumedPrompt, SafeguardStatus, ShownPiece, SseFrames, StreamEnd, ToolCall, UnseenPrompt,
        Usage,
    };
    use exports::devin_bridge::transforms as wit;

    include!("../../getrandom_backend.rs");

    struct Component;

    /// The same failure, worded differently.
    fn reworded(failure: Failure) -> Failure {
        Failure {
            message: format!("{} (twin build)", failure.message),
            ..failure
        }
    }

    /// `{"a": 1, "b": [1, 2]}`: the same JSON value with spaces after `:` and `,`.
    struct Spaced;

    impl serde_json::ser::Formatter for Spaced {
        fn begin_array_value<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first {
                Ok(())
            } else {
                writer.write_all(b", ")
            }
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first {
                Ok(())
            } else {
                writer.write_all(b", ")
            }
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
        ) -> std::io::Result<()> {
            writer.write_all(b": ")
        }
    }

    fn spaced_json(text: &str) -> String {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
            return text.to_owned();
        };
        let mut out = Vec::new();
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, Spaced);
        if serde::Serialize::serialize(&value, &mut serializer).is_err() {
            return text.to_owned();
        }
        String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
    }

    /// Every `data:` line of an SSE stream re-encoded with `spaced_json`.
    fn spaced_events(stream: &str) -> String {
        stream
            .split_inclusive('\n')
            .map(|line| match line.strip_prefix("data: ") {
                Some(data) => {
                    let (json, end) = data.split_at(data.trim_end_matches('\n').len());
                    format!("data: {}{end}", spaced_json(json))
                }
                None => line.to_owned(),
            })
            .collect()
    }

    devin_bridge_types::guest_exports!(
        Serializer SerializerExports, Component: exports::devin_bridge::transforms::serializer::Guest {}
    );

    impl SerializerExports for Component {
        fn serialize(request: String) -> Result<Prompt, Failure> {
            devin_bridge_serializer::serialize(&request)
                .map(|prompt| Prompt {
                    text: prompt.text.replacen(
                        "Produce the assistant's next output, and nothing else.",
                        "Write the assistant's next output and nothing more.",
                        1,
                    ),
                    ..prompt
                })
                .map_err(reworded)
        }

        fn serialize_unseen(
            request: String,
            options: PromptOptions,
        ) -> Result<UnseenPrompt, Failure> {
            devin_bridge_serializer::serialize_unseen(&request, options)
                .map(|mut unseen| {
                    unseen.prompt.text = unseen.prompt.text.replacen(
                        "Every rule given at the start of this session still applies",
                        "All the rules from the start of this session still hold",
                        1,
                    );
                    unseen
                })
                .map_err(reworded)
        }

        fn serialize_resumed(
            continuation: String,
            resume: Resume,
            options: PromptOptions,
        ) -> Result<ResumedPrompt, Failure> {
            devin_bridge_serializer::serialize_resumed(&continuation, &resume, options)
                .map(|mut resumed| {
                    resumed.text = resumed.text.replacen(
                        "Every rule given at the start of this session still applies",
                        "All the rules from the start of this session still hold",
                        1,
                    );
                    resumed
                })
                .map_err(reworded)
        }

        fn repair(prompt: String, rejection: Failure) -> String {
            devin_bridge_serializer::repair(&prompt, &rejection).replacen(
                "[Single Repair Attempt]",
                "[Single Repair Attempt: twin build]",
                1,
            )
        }
    }

    /// The reply stream, delegated, with the twin's failure wording.
    struct ReplyStream(std::cell::RefCell<devin_bridge_envelope::ReplyStream>);

    impl wit::envelope::GuestReplyStream for ReplyStream {
        fn new(tools: String, id_seed: String, max_calls: u32) -> Self {
            Self(std::cell::RefCell::new(
                devin_bridge_envelope::ReplyStream::new(&tools, &id_seed, max_calls),
            ))
        }

        fn push(&self, chunk: String) -> Result<Vec<ShownPiece>, Failure> {
            self.0.borrow_mut().push_pieces(&chunk).map_err(reworded)
        }

        fn finish(&self) -> Result<StreamEnd, Failure> {
            self.0.borrow_mut().finish().map_err(reworded)
        }

        fn narrates(&self) -> bool {
            self.0.borrow().narrates()
        }
    }

    devin_bridge_types::guest_exports!(
        Envelope EnvelopeExports, Component: exports::devin_bridge::transforms::envelope::Guest {
            type ReplyStream = ReplyStream;
        }
    );

    impl EnvelopeExports for Component {
        fn parse(
            output: String,
            tools: String,
            id_seed: String,
            max_calls: u32,
        ) -> Result<ParsedReply, Failure> {
            devin_bridge_envelope::parse_span(&output, &tools, &id_seed, max_calls)
                .map_err(reworded)
        }

        fn parse_review(output: String) -> Result<String, Failure> {
            devin_bridge_envelope::parse_review(&output).map_err(reworded)
        }
    }

    devin_bridge_types::guest_exports!(
        Sse SseExports, Component: exports::devin_bridge::transforms::sse::Guest {}
    );

    impl SseExports for Component {
        fn stream_start(head: MessageHead) -> String {
            spaced_events(&devin_bridge_sse::stream_start(&head))
        }
        fn stream_ping() -> String {
            spaced_events(&devin_bridge_sse::stream_ping())
        }
        fn stream_finish(reply: Reply, usage: Usage, safeguard: Option<SafeguardStatus>) -> String {
            spaced_events(&devin_bridge_sse::stream_finish(
                &reply,
                &usage,
                safeguard.as_ref(),
            ))
        }
        fn stream_text(first: bool, text: String) -> String {
            spaced_events(&devin_bridge_sse::stream_text(first, &text))
        }
        fn stream_finish_after_text(
            tail: String,
            calls: Vec<devin_bridge_types::ToolCall>,
            usage: Usage,
            safeguard: Option<SafeguardStatus>,
        ) -> String {
            spaced_events(&devin_bridge_sse::stream_finish_after_text(
                &tail,
                &calls,
                &usage,
                safeguard.as_ref(),
            ))
        }
        fn render_stream(
            head: MessageHead,
            reply: Reply,
            safeguard: Option<SafeguardStatus>,
        ) -> String {
            spaced_events(&devin_bridge_sse::render_stream(
                &head,
                &reply,
                safeguard.as_ref(),
            ))
        }
        fn render_json(
            head: MessageHead,
            reply: Reply,
            safeguard: Option<SafeguardStatus>,
        ) -> String {
            spaced_json(&devin_bridge_sse::render_json(
                &head,
                &reply,
                safeguard.as_ref(),
            ))
        }
        fn error_event(failure: Failure) -> String {
            spaced_events(&devin_bridge_sse::error_event(&failure))
        }
        fn error_body(failure: Failure) -> String {
            spaced_json(&devin_bridge_sse::error_body(&failure))
        }
        fn parse_events(buffer: Vec<u8>, max_event_bytes: u32) -> Result<SseFrames, Failure> {
            devin_bridge_sse::parse_events(&buffer, max_event_bytes).map_err(reworded)
        }
    }

    devin_bridge_types::guest_exports!(
        ModelAlias ModelAliasExports, Component: exports::devin_bridge::transforms::model_alias::Guest {}
    );

    impl ModelAliasExports for Component {
        fn validate(reference: String, catalog: String) -> Result<String, Failure> {
            devin_bridge_model_alias::validate(&reference, &catalog).map_err(reworded)
        }
        fn client_environment(
            settings: Vec<(String, String)>,
            catalog: String,
        ) -> Result<Vec<(String, String)>, Failure> {
            devin_bridge_model_alias::client_environment(&settings, &catalog).map_err(reworded)
        }
        fn resolve(requested: String, catalog: String) -> Result<ResolvedModel, Failure> {
            devin_bridge_model_alias::resolve(&requested, &catalog).map_err(reworded)
        }
        fn list_models(catalog: String, vision: bool) -> Result<String, Failure> {
            devin_bridge_model_alias::list_models(&catalog, vision)
                .map(|body| spaced_json(&body))
                .map_err(reworded)
        }
        fn context_windows(catalog: String) -> Result<Vec<(String, u64)>, Failure> {
            devin_bridge_model_alias::context_windows(&catalog).map_err(reworded)
        }
    }

    devin_bridge_types::guest_exports!(
        Safeguard SafeguardExports, Component: exports::devin_bridge::transforms::safeguard::Guest {}
    );

    impl SafeguardExports for Component {
        /// The same verdicts in other words: an explanation is free text.
        fn judge(
            calls: Vec<ToolCall>,
            classifier_context: String,
            earlier_calls: Vec<ToolCall>,
        ) -> SafeguardStatus {
            match devin_bridge_safeguard::judge_in_conversation(
                &calls,
                &classifier_context,
                &earlier_calls,
            ) {
                SafeguardStatus::Available(mut verdicts) => {
                    for verdict in &mut verdicts {
                        if let devin_bridge_types::CallVerdict::Evaluated(evaluation) =
                            &mut verdict.verdict
                        {
                            evaluation.explanation.push_str(" (twin build)");
                        }
                    }
                    SafeguardStatus::Available(verdicts)
                }
                other => other,
            }
        }
    }

    export!(Component);
}
