//! The component export: a thin shell over the library. The WIT records are the library's own
//! types (see `devin_bridge_types::guest_bindings!`), so nothing is converted here.

devin_bridge_types::guest_bindings!([sse] {
    world: "sse-component",
    path: "../../wit",
});

use devin_bridge_types::{
    Failure, MessageHead, Reply, SafeguardStatus, SseFrames, ToolCall, Usage,
};
use exports::devin_bridge::transforms::sse::Guest;

struct Component;

impl Guest for Component {
    fn stream_start(head: MessageHead) -> String {
        crate::stream_start(&head)
    }

    fn stream_ping() -> String {
        crate::stream_ping()
    }

    fn stream_finish(reply: Reply, usage: Usage, safeguard: Option<SafeguardStatus>) -> String {
        crate::stream_finish(&reply, &usage, safeguard.as_ref())
    }

    fn stream_text(first: bool, text: String) -> String {
        crate::stream_text(first, &text)
    }

    fn stream_finish_after_text(
        tail: String,
        calls: Vec<ToolCall>,
        usage: Usage,
        safeguard: Option<SafeguardStatus>,
    ) -> String {
        crate::stream_finish_after_text(&tail, &calls, &usage, safeguard.as_ref())
    }

    fn render_stream(
        head: MessageHead,
        reply: Reply,
        safeguard: Option<SafeguardStatus>,
    ) -> String {
        crate::render_stream(&head, &reply, safeguard.as_ref())
    }

    fn render_json(head: MessageHead, reply: Reply, safeguard: Option<SafeguardStatus>) -> String {
        crate::render_json(&head, &reply, safeguard.as_ref())
    }

    fn error_event(failure: Failure) -> String {
        crate::error_event(&failure)
    }

    fn error_body(failure: Failure) -> String {
        crate::error_body(&failure)
    }

    fn agent_error_message(raw: String) -> String {
        crate::agent_error_message(&raw)
    }

    fn parse_events(buffer: Vec<u8>, max_event_bytes: u32) -> Result<SseFrames, Failure> {
        crate::parse_events(&buffer, max_event_bytes)
    }
}

export!(Component);
