//! The component export: a thin shell that converts WIT bindings to the library's types.

wit_bindgen::generate!({
    world: "serializer-component",
    path: "../../wit",
});

use devin_bridge::transforms::types::Failure;
use exports::devin_bridge::transforms::serializer::{
    Guest, Image, MessageMark, Prompt, PromptOptions, Resume, ResumedPrompt, UnseenPrompt,
};

struct Component;

fn failure_to_wit(failure: crate::Failure) -> Failure {
    Failure {
        code: failure.code,
        message: failure.message,
        status: failure.status,
        repairable: failure.repairable,
    }
}

fn failure_from_wit(failure: Failure) -> crate::Failure {
    crate::Failure {
        code: failure.code,
        message: failure.message,
        status: failure.status,
        repairable: failure.repairable,
    }
}

fn prompt_to_wit(prompt: crate::Prompt) -> Prompt {
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

fn options_from_wit(options: PromptOptions) -> crate::PromptOptions {
    crate::PromptOptions {
        held: options.held,
        images: crate::ImageLimits {
            max_images: options.images.max_images,
            max_image_bytes: options.images.max_image_bytes,
        },
    }
}

fn images_to_wit(images: Vec<crate::Image>) -> Vec<Image> {
    images
        .into_iter()
        .map(|image| Image {
            media_type: image.media_type,
            data: image.data,
        })
        .collect()
}

fn marks_to_wit(marks: Vec<crate::MessageMark>) -> Vec<MessageMark> {
    marks
        .into_iter()
        .map(|mark| MessageMark {
            request_end: mark.request_end,
            trace_chars: mark.trace_chars,
            tool_uses: mark.tool_uses,
        })
        .collect()
}

/// How much heap a call needs, as a multiple of the request's size (measured as linear-memory
/// growth, in 64 KiB pages: the 79 KB and 1 MB benchmark requests grew it by about 4.0 and 3.5
/// times their size).
const HEAP_PER_REQUEST_BYTE: usize = 4;

/// Makes the allocator's free space as large as this call will need, in one step. Linear memory
/// grows only when the free space runs out, and each growth is a host call that changes page
/// protections; a large request would otherwise grow it a couple of dozen times, a few pages at
/// a time. The reservation is freed at once and its pages are not touched, so when the free
/// space is already there (a pre-initialised instance, a small request) it costs nothing.
fn reserve_heap_for(request: &str) {
    let reservation: Vec<u8> =
        Vec::with_capacity(request.len().saturating_mul(HEAP_PER_REQUEST_BYTE));
    // Keeps the compiler from removing the allocation as unused.
    core::hint::black_box(&reservation);
}

impl Guest for Component {
    fn serialize(request: String) -> Result<Prompt, Failure> {
        reserve_heap_for(&request);
        crate::serialize(&request)
            .map(prompt_to_wit)
            .map_err(failure_to_wit)
    }

    fn serialize_unseen(request: String, options: PromptOptions) -> Result<UnseenPrompt, Failure> {
        reserve_heap_for(&request);
        crate::serialize_unseen(&request, options_from_wit(options))
            .map(|unseen| UnseenPrompt {
                prompt: prompt_to_wit(unseen.prompt),
                history: unseen.history,
                images: images_to_wit(unseen.images),
                marks: marks_to_wit(unseen.marks),
                tool_names: unseen.tool_names,
            })
            .map_err(failure_to_wit)
    }

    fn serialize_resumed(
        continuation: String,
        resume: Resume,
        options: PromptOptions,
    ) -> Result<ResumedPrompt, Failure> {
        reserve_heap_for(&continuation);
        let resume = crate::Resume {
            messages: resume.messages,
            history: resume.history,
            trace_chars: resume.trace_chars,
            tool_uses: resume.tool_uses,
            tool_names: resume.tool_names,
        };
        crate::serialize_resumed(&continuation, &resume, options_from_wit(options))
            .map(|resumed| ResumedPrompt {
                text: resumed.text,
                input_tokens: resumed.input_tokens,
                id_seed: resumed.id_seed,
                history: resumed.history,
                marks: marks_to_wit(resumed.marks),
                images: images_to_wit(resumed.images),
            })
            .map_err(failure_to_wit)
    }

    fn repair(prompt: String, rejection: Failure) -> String {
        crate::repair(&prompt, &failure_from_wit(rejection))
    }
}

export!(Component);
