//! The fixed instructions around the trace, and the repair prompt.
//!
//! The wording is ours. Two constraints shape it: the agent must see the framing headers
//! (`[Devin Summarizer Bridge]`, `[Execution Trace]`, `[Single Repair Attempt]`), and the
//! instructions must not contain the trace's own section headers (such as the tool-result
//! header), so anything that counts sections in a prompt (the mock agent does) counts only the
//! trace.

use devin_bridge_types::Failure;

/// Everything before the trace: the framing, then the `[Execution Trace]` header.
pub(crate) const PREAMBLE: &str = "\
[Devin Summarizer Bridge]
What follows is the execution trace of a session between a user and an assistant that works \
through a client application. Produce the assistant's next output, and nothing else.
- The client owns every tool and runs it. You cannot run tools: never run one, and never claim \
or imply that one ran unless the trace already shows its result.
- When the next step needs client-owned actions, return one tool envelope per action and no prose \
before, between or after them:
<tool>{\"name\":\"TOOL_NAME\",\"arguments\":{...}}</tool>
- Actions that do not depend on each other (reading several files, running independent \
searches) may be requested together, one envelope after another. An action that needs another \
action's result waits for that result in a later turn.
- When the task is complete, or no action is needed, return a concise final answer as plain text.
- Do not wrap the output in Markdown code fences, and do not add a summary, a preamble or a \
closing remark around it.

[Execution Trace]
";

/// Before the messages a resident session has not seen yet.
pub(crate) const CONTINUATION_PREAMBLE: &str = "\
[Devin Summarizer Bridge: continued]
The execution trace of this session continues below with the messages the client added since \
your last output; the assistant sections repeat your earlier outputs as the client recorded \
them. Every rule given at the start of this session still applies: produce the assistant's next \
output, and nothing else, either tool envelopes or a concise final answer.

[Execution Trace: continued]
";

/// The continuation prompt for `unseen`: the trace after the messages the session holds, which
/// starts with the separator before its first section (dropped here).
pub(crate) fn continuation(unseen: &str) -> String {
    let unseen = unseen
        .strip_prefix(crate::trace::SECTION_SEPARATOR)
        .unwrap_or(unseen);
    let mut out = String::with_capacity(CONTINUATION_PREAMBLE.len() + unseen.len());
    out.push_str(CONTINUATION_PREAMBLE);
    out.push_str(unseen);
    out
}

/// The instructions at the top of the `[Available Tools]` section.
pub(crate) const TOOL_CATALOG_INSTRUCTIONS: &str = "\
The client declares the tools below, runs them, and sends each result back in a later turn.
To use tools, return one envelope per call and nothing else, with no text before, between or \
after them:
<tool>{\"name\":\"TOOL_NAME\",\"arguments\":{...}}</tool>
- \"name\" must be one of the tool names listed below, spelled exactly.
- \"arguments\" must be a JSON object that satisfies that tool's input schema.
- Independent calls may be requested together in one output, each in its own envelope, unless \
the tool choice below says otherwise; a call that needs another call's result must wait for it.
- Never run a tool yourself, never say that a tool ran, and never invent a tool's result.
- Never describe a future action in prose: request it now with an envelope, or give the final \
answer.";

/// The prompt for the single repair attempt: the original prompt, then why its answer was
/// rejected and what a valid answer looks like.
pub(crate) fn repair(prompt: &str, rejection: &Failure) -> String {
    const HEADER: &str = "\n\n---\n\n[Single Repair Attempt]\n\
Your previous output was rejected and was not delivered to the client.\n\
Reason (";
    const TAIL: &str = "\n\
Produce the assistant's next output again, following every rule above. Return exactly one of:\n\
- tool envelopes, one per call, <tool>{\"name\":\"TOOL_NAME\",\"arguments\":{...}}</tool>, with no \
text before, between or after them; or\n\
- a concise final answer as plain text, with no tool envelope, when no client action is needed.\n\
Do not describe an action you intend to take: request it with the envelope instead. \
This is the only repair attempt.";

    let mut out = String::with_capacity(
        prompt.len()
            + HEADER.len()
            + rejection.code.len()
            + rejection.message.len()
            + TAIL.len()
            + 3,
    );
    out.push_str(prompt);
    out.push_str(HEADER);
    out.push_str(&rejection.code);
    out.push_str("): ");
    out.push_str(&rejection.message);
    out.push_str(TAIL);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_has_headers_but_no_trace_section_headers() {
        assert!(PREAMBLE.starts_with("[Devin Summarizer Bridge]\n"));
        assert!(PREAMBLE.ends_with("\n\n[Execution Trace]\n"));
        for marker in [
            "[System]",
            "[User]",
            "[Assistant]",
            "[Tool Result]",
            "[Assistant Tool Use]",
            "[Available Tools]",
            "[Tool Choice]",
            "[Thinking]",
            "---",
        ] {
            assert!(!PREAMBLE.contains(marker), "{marker}");
            assert!(!CONTINUATION_PREAMBLE.contains(marker), "{marker}");
            assert!(!TOOL_CATALOG_INSTRUCTIONS.contains(marker), "{marker}");
        }
    }

    #[test]
    fn repair_appends_one_section_with_the_reason() {
        let rejection = Failure::repairable("malformed_tool_json", "the envelope is not JSON", 400);
        let prompt = "[Devin Summarizer Bridge]\n...\n[Execution Trace]\n[User]\nhi";
        let repaired = repair(prompt, &rejection);
        assert!(repaired.starts_with(prompt));
        assert!(repaired.contains(
            "\n\n---\n\n[Single Repair Attempt]\n\
             Your previous output was rejected and was not delivered to the client.\n\
             Reason (malformed_tool_json): the envelope is not JSON\n"
        ));
        assert_eq!(repaired.matches("[Single Repair Attempt]").count(), 1);
        assert_eq!(repaired, repair(prompt, &rejection), "deterministic");
        assert_eq!(repaired.capacity(), repaired.len(), "pre-sized exactly");
    }
}
