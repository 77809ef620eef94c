//! Side requests answered without an agent turn. The serializer component recognizes a side
//! request of a known shape (Claude Code's session title) and puts its answer on the prompt;
//! this module decides whether the bridge sends that answer in place of a turn.
//!
//! Invariants:
//! - Only a request without tools is answered here, and only with the local answer its
//!   prompt carries for a purpose this module knows ([`KNOWN_PURPOSES`]); every other request
//!   goes to the agent. The host reads nothing of the request itself: recognizing it is the
//!   component's work.
//! - With `[server] local_side_requests = false`, every request goes to the agent.
//! - Every request without tools is counted once in
//!   `devin_bridge_side_requests_total{purpose, answered}` (`purpose` is a known purpose or
//!   `unknown`, so the label set stays bounded whatever a component says; `answered` is
//!   `local` or `agent`) and logged once at info with its purpose, never its content.

use devin_bridge_engine::Prompt;
use devin_bridge_types::Reply;

use crate::metrics::Metrics;

/// The purposes the bridge answers locally (the serializer's names for them).
const KNOWN_PURPOSES: [&str; 1] = ["session_title"];
/// The purpose label of a side request without a (known) local answer.
const UNKNOWN: &str = "unknown";

/// The reply to `prompt` when the bridge answers it without an agent turn; none when the agent
/// answers it; `enabled` is `[server] local_side_requests`. Counts and logs every side request
/// (see the module's invariants).
pub(crate) fn local_reply(enabled: bool, metrics: &Metrics, prompt: &Prompt) -> Option<Reply> {
    let (purpose, reply) = decide(enabled, prompt)?;
    let answered = if reply.is_some() { "local" } else { "agent" };
    metrics.count_side_request(purpose, answered);
    tracing::info!(purpose, answered, "side request");
    reply
}

/// None for a request with tools; else the side request's purpose label and the local reply
/// (none when the agent answers).
fn decide(enabled: bool, prompt: &Prompt) -> Option<(&'static str, Option<Reply>)> {
    if prompt.tools.trim() != "[]" {
        return None;
    }
    let known = prompt.local_answer.as_ref().and_then(|answer| {
        KNOWN_PURPOSES
            .into_iter()
            .find(|purpose| *purpose == answer.purpose)
            .map(|purpose| (purpose, answer))
    });
    Some(match known {
        Some((purpose, answer)) if enabled => (purpose, Some(Reply::Text(answer.text.clone()))),
        Some((purpose, _)) => (purpose, None),
        None => (UNKNOWN, None),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use devin_bridge_engine::LocalAnswer;

    fn prompt(tools: &str, answer: Option<(&str, &str)>) -> Prompt {
        Prompt {
            text: "[Devin Summarizer Bridge]\n\n[Execution Trace]\n[User]\nhi".into(),
            tools: tools.into(),
            input_tokens: 12,
            id_seed: "0".repeat(24),
            model: "devin-cli-agentic/swe-1-7".into(),
            stream: false,
            single_tool_call: false,
            classifier_context: None,
            earlier_calls: Vec::new(),
            effort: None,
            local_answer: answer.map(|(purpose, text)| LocalAnswer {
                purpose: purpose.into(),
                text: text.into(),
            }),
        }
    }

    const TITLE: &str = r#"{"title":"Math tests"}"#;

    #[test]
    fn a_session_title_is_answered_locally_when_the_policy_allows() {
        let title = prompt("[]", Some(("session_title", TITLE)));
        assert_eq!(
            decide(true, &title),
            Some(("session_title", Some(Reply::Text(TITLE.into()))))
        );
        assert_eq!(decide(false, &title), Some(("session_title", None)));
    }

    #[test]
    fn other_side_requests_go_to_the_agent_as_unknown() {
        for enabled in [true, false] {
            assert_eq!(decide(enabled, &prompt("[]", None)), Some((UNKNOWN, None)));
            assert_eq!(
                decide(enabled, &prompt(" [] ", None)),
                Some((UNKNOWN, None))
            );
            // A purpose the bridge does not know (a swapped component's) is not answered.
            assert_eq!(
                decide(enabled, &prompt("[]", Some(("summary", "text")))),
                Some((UNKNOWN, None))
            );
        }
    }

    #[test]
    fn a_request_with_tools_is_never_a_side_request() {
        let tools = r#"[{"name":"Bash","input_schema":{"type":"object"}}]"#;
        for answer in [None, Some(("session_title", TITLE))] {
            assert_eq!(decide(true, &prompt(tools, answer)), None);
        }
    }
}
