// Included with `include!` inside each test component's wasm module, where the generated WIT
// `Prompt` and `Failure` types are in scope: the real serializer, converted to and from them.

fn real_serialize(request: &str) -> Result<Prompt, Failure> {
    devin_bridge_serializer::serialize(request)
        .map(|p| Prompt {
            text: p.text,
            tools: p.tools,
            input_tokens: p.input_tokens,
            id_seed: p.id_seed,
            model: p.model,
            stream: p.stream,
            single_tool_call: p.single_tool_call,
        })
        .map_err(|f| Failure { code: f.code, message: f.message, status: f.status, repairable: f.repairable })
}

#[allow(dead_code)]
fn real_repair(prompt: &str, rejection: Failure) -> String {
    let rejection = devin_bridge_types::Failure {
        code: rejection.code,
        message: rejection.message,
        status: rejection.status,
        repairable: rejection.repairable,
    };
    devin_bridge_serializer::repair(prompt, &rejection)
}

#[allow(dead_code)]
fn real_serialize_unseen(
    request: &str,
    options: exports::devin_bridge::transforms::serializer::PromptOptions,
) -> Result<exports::devin_bridge::transforms::serializer::UnseenPrompt, Failure> {
    use exports::devin_bridge::transforms::serializer::{Image, UnseenPrompt};
    let options = devin_bridge_serializer::PromptOptions {
        held: options.held,
        images: devin_bridge_serializer::ImageLimits {
            max_images: options.images.max_images,
            max_image_bytes: options.images.max_image_bytes,
        },
    };
    devin_bridge_serializer::serialize_unseen(request, options)
        .map(|unseen| UnseenPrompt {
            prompt: Prompt {
                text: unseen.prompt.text,
                tools: unseen.prompt.tools,
                input_tokens: unseen.prompt.input_tokens,
                id_seed: unseen.prompt.id_seed,
                model: unseen.prompt.model,
                stream: unseen.prompt.stream,
                single_tool_call: unseen.prompt.single_tool_call,
            },
            history: unseen.history,
            images: unseen
                .images
                .into_iter()
                .map(|image| Image { media_type: image.media_type, data: image.data })
                .collect(),
            marks: unseen.marks.into_iter().map(real_mark).collect(),
            tool_names: unseen.tool_names,
        })
        .map_err(|f| Failure { code: f.code, message: f.message, status: f.status, repairable: f.repairable })
}

#[allow(dead_code)]
fn real_mark(
    mark: devin_bridge_serializer::MessageMark,
) -> exports::devin_bridge::transforms::serializer::MessageMark {
    exports::devin_bridge::transforms::serializer::MessageMark {
        request_end: mark.request_end,
        trace_chars: mark.trace_chars,
        tool_uses: mark.tool_uses,
    }
}

#[allow(dead_code)]
fn real_serialize_resumed(
    continuation: &str,
    resume: exports::devin_bridge::transforms::serializer::Resume,
    options: exports::devin_bridge::transforms::serializer::PromptOptions,
) -> Result<exports::devin_bridge::transforms::serializer::ResumedPrompt, Failure> {
    use exports::devin_bridge::transforms::serializer::{Image, ResumedPrompt};
    let resume = devin_bridge_serializer::Resume {
        messages: resume.messages,
        history: resume.history,
        trace_chars: resume.trace_chars,
        tool_uses: resume.tool_uses,
        tool_names: resume.tool_names,
    };
    let options = devin_bridge_serializer::PromptOptions {
        held: options.held,
        images: devin_bridge_serializer::ImageLimits {
            max_images: options.images.max_images,
            max_image_bytes: options.images.max_image_bytes,
        },
    };
    devin_bridge_serializer::serialize_resumed(continuation, &resume, options)
        .map(|resumed| ResumedPrompt {
            text: resumed.text,
            input_tokens: resumed.input_tokens,
            id_seed: resumed.id_seed,
            history: resumed.history,
            marks: resumed.marks.into_iter().map(real_mark).collect(),
            images: resumed
                .images
                .into_iter()
                .map(|image| Image { media_type: image.media_type, data: image.data })
                .collect(),
        })
        .map_err(|f| Failure { code: f.code, message: f.message, status: f.status, repairable: f.repairable })
}
