//! All five transforms, each breaking one promise of the WIT contract while everything else
//! is delegated to the real libraries. Swapped into a slot, each must be refused by the
//! host's self-test with a message that names the fixture and what differs:
//!
//! - serializer: a client error (4xx) is reported as a server error (5xx);
//! - envelope: tool-call ids in upper case (outside the id charset), and review replies that
//!   fail validation passed through unchecked (the agent's first JSON object, as it wrote it);
//! - sse: a finished stream without its `message_stop` event, and event-stream framing that
//!   drops the unfinished event at the end of the buffer (a caller would lose its bytes);
//! - model-alias: failure codes that are not the stable ones;
//! - safeguard: every call passes (`not_flagged`), the one thing a judge must never do for a
//!   call the reference flags.

#[cfg(target_arch = "wasm32")]
mod wasm {
    devin_bridge_types::guest_bindings!([serializer, envelope, sse, model_alias, safeguard] {
        world: "devin-bridge:wrong-answers/wrong-answers",
        path: ["../../../wit", "wit"],
        generate_all,
    });

    use devin_bridge_types::{
        Failure, MessageHead, ParsedReply, Prompt, PromptOptions, Reply, ReplyBlock, ResolvedModel,
        Resume, ResumedPrompt, SafeguardStatus, ShownPiece, SseFrames, StreamEnd, ToolCall,
        ToolReply, UnseenPrompt, Usage,
    };
    use exports::devin_bridge::transforms as wit;

    include!("../../getrandom_backend.rs");

    struct Component;

    fn without_message_stop(stream: String) -> String {
        stream
            .split_inclusive("\n\n")
            .filter(|event| !event.starts_with("event: message_stop\n"))
            .collect()
    }

    fn renamed_code(failure: Failure) -> Failure {
        Failure {
            code: format!("{}_v2", failure.code),
            ..failure
        }
    }

    devin_bridge_types::guest_exports!(
        Serializer SerializerExports, Component: exports::devin_bridge::transforms::serializer::Guest {}
    );

    impl SerializerExports for Component {
        fn serialize(request: String) -> Result<Prompt, Failure> {
            devin_bridge_serializer::serialize(&request).map_err(|failure| Failure {
                status: if (400..500).contains(&failure.status) {
                    failure.status + 100
                } else {
                    failure.status
                },
                ..failure
            })
        }

        fn serialize_unseen(
            request: String,
            options: PromptOptions,
        ) -> Result<UnseenPrompt, Failure> {
            devin_bridge_serializer::serialize_unseen(&request, options).map_err(|failure| {
                Failure {
                    status: if (400..500).contains(&failure.status) {
                        failure.status + 100
                    } else {
                        failure.status
                    },
                    ..failure
                }
            })
        }

        fn serialize_resumed(
            continuation: String,
            resume: Resume,
            options: PromptOptions,
        ) -> Result<ResumedPrompt, Failure> {
            devin_bridge_serializer::serialize_resumed(&continuation, &resume, options).map_err(
                |failure| Failure {
                    status: if (400..500).contains(&failure.status) {
                        failure.status + 100
                    } else {
                        failure.status
                    },
                    ..failure
                },
            )
        }
    }

    /// Tool-call ids in upper case.
    fn upper_case_ids(reply: ParsedReply) -> ParsedReply {
        match reply {
            ParsedReply::Tools(tools) => ParsedReply::Tools(ToolReply {
                blocks: tools
                    .blocks
                    .into_iter()
                    .map(|block| match block {
                        ReplyBlock::Call(call) => ReplyBlock::Call(ToolCall {
                            id: call.id.to_uppercase(),
                            ..call
                        }),
                        text => text,
                    })
                    .collect(),
                ..tools
            }),
            text => text,
        }
    }

    /// The reply stream, delegated, ending with the same upper-case ids as `parse`.
    struct ReplyStream(std::cell::RefCell<devin_bridge_envelope::ReplyStream>);

    impl wit::envelope::GuestReplyStream for ReplyStream {
        fn new(tools: String, id_seed: String, max_calls: u32) -> Self {
            Self(std::cell::RefCell::new(
                devin_bridge_envelope::ReplyStream::new(&tools, &id_seed, max_calls),
            ))
        }

        fn push(&self, chunk: String) -> Result<Vec<ShownPiece>, Failure> {
            self.0.borrow_mut().push_pieces(&chunk)
        }

        fn finish(&self) -> Result<StreamEnd, Failure> {
            self.0.borrow_mut().finish().map(|end| StreamEnd {
                reply: upper_case_ids(end.reply),
                ..end
            })
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
                .map(upper_case_ids)
        }

        fn parse_review(output: String) -> Result<String, Failure> {
            match devin_bridge_envelope::parse_review(&output) {
                Ok(review) => Ok(review),
                Err(failure) => match devin_bridge_envelope::first_json_object(&output) {
                    Some(object) if failure.code == "review_invalid" => Ok(object.to_owned()),
                    _ => Err(failure),
                },
            }
        }
    }

    devin_bridge_types::guest_exports!(
        Sse SseExports, Component: exports::devin_bridge::transforms::sse::Guest {}
    );

    impl SseExports for Component {
        fn stream_ping() -> String {
            devin_bridge_sse::stream_ping()
        }
        fn stream_finish(reply: Reply, usage: Usage, safeguard: Option<SafeguardStatus>) -> String {
            without_message_stop(devin_bridge_sse::stream_finish(
                &reply,
                &usage,
                safeguard.as_ref(),
            ))
        }
        fn stream_text(first: bool, text: String) -> String {
            without_message_stop(devin_bridge_sse::stream_text(first, &text))
        }
        fn stream_finish_after_text(
            tail: String,
            calls: Vec<devin_bridge_types::ToolCall>,
            usage: Usage,
            safeguard: Option<SafeguardStatus>,
        ) -> String {
            without_message_stop(devin_bridge_sse::stream_finish_after_text(
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
            without_message_stop(devin_bridge_sse::render_stream(
                &head,
                &reply,
                safeguard.as_ref(),
            ))
        }
        fn error_event(failure: Failure) -> String {
            devin_bridge_sse::error_event(&failure)
        }
        fn agent_error_message(raw: String) -> String {
            devin_bridge_sse::agent_error_message(&raw)
        }
        fn parse_events(buffer: Vec<u8>, max_event_bytes: u32) -> Result<SseFrames, Failure> {
            devin_bridge_sse::parse_events(&buffer, max_event_bytes).map(|frames| SseFrames {
                tail: Vec::new(),
                ..frames
            })
        }
    }

    devin_bridge_types::guest_exports!(
        ModelAlias ModelAliasExports, Component: exports::devin_bridge::transforms::model_alias::Guest {}
    );

    impl ModelAliasExports for Component {
        fn validate(reference: String, catalog: String) -> Result<String, Failure> {
            devin_bridge_model_alias::validate(&reference, &catalog).map_err(renamed_code)
        }
        fn client_environment(
            settings: Vec<(String, String)>,
            catalog: String,
        ) -> Result<Vec<(String, String)>, Failure> {
            devin_bridge_model_alias::client_environment(&settings, &catalog).map_err(renamed_code)
        }
        fn resolve(requested: String, catalog: String) -> Result<ResolvedModel, Failure> {
            devin_bridge_model_alias::resolve(&requested, &catalog).map_err(renamed_code)
        }
        fn list_models(catalog: String, vision: bool) -> Result<String, Failure> {
            devin_bridge_model_alias::list_models(&catalog, vision).map_err(renamed_code)
        }
        fn context_windows(catalog: String) -> Result<Vec<(String, u64)>, Failure> {
            devin_bridge_model_alias::context_windows(&catalog).map_err(renamed_code)
        }
    }

    devin_bridge_types::guest_exports!(
        Safeguard SafeguardExports, Component: exports::devin_bridge::transforms::safeguard::Guest {}
    );

    impl SafeguardExports for Component {
        /// Passes every call: the leniency the swap contract refuses.
        fn judge(
            calls: Vec<ToolCall>,
            _classifier_context: String,
            _earlier_calls: Vec<ToolCall>,
        ) -> SafeguardStatus {
            use devin_bridge_types::{CallVerdict, Evaluation, SafeguardOutcome, ToolVerdict};
            SafeguardStatus::Available(
                calls
                    .into_iter()
                    .map(|call| ToolVerdict {
                        id: call.id,
                        verdict: CallVerdict::Evaluated(Evaluation {
                            outcome: SafeguardOutcome::NotFlagged,
                            explanation: "looks fine".to_owned(),
                            cited_rule: None,
                        }),
                    })
                    .collect(),
            )
        }
    }

    export!(Component);
}
