//! The component export: a thin shell that converts WIT bindings to the library's types.

wit_bindgen::generate!({
    world: "sse-component",
    path: "../../wit",
});

use devin_bridge::transforms::types::{Failure, Reply, Usage};
use exports::devin_bridge::transforms::sse::{Guest, MessageHead, SseEvent, SseFrames};

struct Component;

fn usage(usage: Usage) -> crate::Usage {
    crate::Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cache_read_input_tokens: usage.cache_read_input_tokens,
        cache_creation_input_tokens: usage.cache_creation_input_tokens,
    }
}

fn head(head: MessageHead) -> crate::MessageHead {
    crate::MessageHead {
        id: head.id,
        model: head.model,
        usage: usage(head.usage),
    }
}

fn reply(reply: Reply) -> crate::Reply {
    match reply {
        Reply::Text(text) => crate::Reply::Text(text),
        Reply::Tools(calls) => crate::Reply::Tools(
            calls
                .into_iter()
                .map(|call| crate::ToolCall {
                    id: call.id,
                    name: call.name,
                    input: call.input,
                })
                .collect(),
        ),
    }
}

fn failure(failure: Failure) -> crate::Failure {
    crate::Failure {
        code: failure.code,
        message: failure.message,
        status: failure.status,
        repairable: failure.repairable,
    }
}

impl Guest for Component {
    fn stream_start(message: MessageHead) -> String {
        crate::stream_start(&head(message))
    }

    fn stream_ping() -> String {
        crate::stream_ping()
    }

    fn stream_finish(answer: Reply, counts: Usage) -> String {
        crate::stream_finish(&reply(answer), &usage(counts))
    }

    fn render_stream(message: MessageHead, answer: Reply) -> String {
        crate::render_stream(&head(message), &reply(answer))
    }

    fn render_json(message: MessageHead, answer: Reply) -> String {
        crate::render_json(&head(message), &reply(answer))
    }

    fn error_event(problem: Failure) -> String {
        crate::error_event(&failure(problem))
    }

    fn error_body(problem: Failure) -> String {
        crate::error_body(&failure(problem))
    }

    fn agent_error_message(raw: String) -> String {
        crate::agent_error_message(&raw)
    }

    fn parse_events(buffer: Vec<u8>, max_event_bytes: u32) -> Result<SseFrames, Failure> {
        crate::parse_events(&buffer, max_event_bytes)
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
            .map_err(|problem| Failure {
                code: problem.code,
                message: problem.message,
                status: problem.status,
                repairable: problem.repairable,
            })
    }
}

export!(Component);
