//! The CLI's own chatter: what it says to a person watching, never part of a model's reply.
//!
//! - An `agent_message_chunk` whose `_meta["cognition.ai/displayMessage"]` is `true` is a
//!   status line for a display ("Compacting context..." while the CLI compacts the session's
//!   context); the flag is read on the update and on its content block. Such a chunk never
//!   reaches a reply: the connection counts it and logs it at debug level.
//! - `_cognition.ai/compaction` says the CLI compacted the session's context; counted.
//! - `_cognition.ai/output {channel, message, level, sessionId: ""}` is process-wide log output
//!   of the CLI (its session id is empty): logged at debug level, bounded and escaped, never
//!   matched against a session.
//!
//! Other vendor notifications (`_cognition.ai/mcp/serversChanged`, `thinking_complete`,
//! `connection_retry`, `showModal`, `billingInformation`, `processMemory`, ...) are ignored.

use serde_json::Value;

/// `_cognition.ai/compaction`.
pub const COMPACTION: &str = "_cognition.ai/compaction";
/// `_cognition.ai/output`.
pub const OUTPUT: &str = "_cognition.ai/output";
/// The `_meta` flag of a display-only message chunk.
pub const DISPLAY_MESSAGE_META: &str = "cognition.ai/displayMessage";
/// Longest text of a notice logged (characters).
const MAX_LOGGED_CHARS: usize = 300;

/// Whether a session update (the `update` object) is a display-only message chunk.
pub fn is_display_chunk(update: &Value) -> bool {
    if update.get("sessionUpdate").and_then(Value::as_str) != Some("agent_message_chunk") {
        return false;
    }
    let flagged = |holder: Option<&Value>| {
        holder
            .and_then(|holder| holder.get("_meta"))
            .and_then(|meta| meta.get(DISPLAY_MESSAGE_META))
            .and_then(Value::as_bool)
            == Some(true)
    };
    flagged(Some(update)) || flagged(update.get("content"))
}

/// A display-only chunk's text, for a debug line (bounded, escaped).
pub fn display_text(update: &Value) -> String {
    loggable(
        update
            .pointer("/content/text")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    )
}

/// The CLI's own log line (`_cognition.ai/output`), read leniently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub channel: String,
    pub level: String,
    /// Bounded and escaped: it can go to a log line as it is.
    pub message: String,
}

/// An `_cognition.ai/output` notification's params.
pub fn output(params: &Value) -> Option<Output> {
    let text = |key: &str| params.get(key).and_then(Value::as_str).map(loggable);
    Some(Output {
        message: text("message")?,
        channel: text("channel").unwrap_or_default(),
        level: text("level").unwrap_or_default(),
    })
}

/// Logs the CLI's own output line at debug level.
pub fn log_output(params: &Value) {
    if let Some(Output {
        channel,
        level,
        message,
    }) = output(params)
    {
        tracing::debug!(%channel, %level, %message, "agent output");
    }
}

/// At most `MAX_LOGGED_CHARS` characters, escaped so they cannot forge log lines.
fn loggable(text: &str) -> String {
    text.chars()
        .take(MAX_LOGGED_CHARS)
        .collect::<String>()
        .escape_debug()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_flagged_message_chunk_is_display_only() {
        let compacting = json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "Compacting context..."},
            "_meta": {"cognition.ai/displayMessage": true}});
        assert!(is_display_chunk(&compacting));
        assert_eq!(display_text(&compacting), "Compacting context...");
        let on_content = json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "x", "_meta": {"cognition.ai/displayMessage": true}}});
        assert!(is_display_chunk(&on_content));
        for reply in [
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"},
                   "_meta": {"cognition.ai/displayMessage": false}}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"},
                   "_meta": {"cognition.ai/displayMessage": "true"}}),
            json!({"sessionUpdate": "agent_thought_chunk", "_meta": {"cognition.ai/displayMessage": true}}),
        ] {
            assert!(!is_display_chunk(&reply), "{reply}");
        }
    }

    #[test]
    fn the_clis_output_is_read_with_its_empty_session() {
        let params = json!({"channel": "server", "message": "connected\nfake line", "level": "info", "sessionId": ""});
        assert_eq!(
            output(&params),
            Some(Output {
                channel: "server".into(),
                level: "info".into(),
                message: "connected\\nfake line".into(),
            })
        );
        assert_eq!(output(&json!({"channel": "x"})), None);
        let long = json!({"message": "m".repeat(10_000)});
        assert_eq!(
            output(&long).map(|o| o.message.len()),
            Some(MAX_LOGGED_CHARS)
        );
    }
}
