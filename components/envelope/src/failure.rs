//! Failure codes and constructors.
//!
//! Agent-output failures are repairable 502s, host/client-input failures non-repairable 400s
//! (the crate documentation says why). Messages quote agent-controlled text only through
//! [`excerpt`], so a hostile output cannot make a failure message arbitrarily large.

use devin_bridge_types::Failure;
use serde_json::Value;

/// Stable machine codes, as the seeds name them where they do.
pub(crate) mod codes {
    pub(crate) const EXCESSIVE_TOOL_REQUESTS: &str = "excessive_tool_requests";
    pub(crate) const MALFORMED_TOOL_JSON: &str = "malformed_tool_json";
    pub(crate) const AMBIGUOUS_TOOL_ENVELOPE: &str = "ambiguous_tool_envelope";
    pub(crate) const MISSING_TOOL_NAME: &str = "missing_tool_name";
    pub(crate) const UNEXPECTED_ENVELOPE_FIELD: &str = "unexpected_envelope_field";
    pub(crate) const UNIDENTIFIED_TOOL: &str = "unidentified_tool";
    pub(crate) const INVALID_TOOL_ARGUMENTS: &str = "invalid_tool_arguments";
    pub(crate) const INVALID_TOOL_SCHEMA: &str = "invalid_tool_schema";
    pub(crate) const INVALID_TOOLS: &str = "invalid_tools";
    pub(crate) const REVIEW_MISSING: &str = "review_missing";
    pub(crate) const REVIEW_INVALID: &str = "review_invalid";
    pub(crate) const OUTPUT_TOO_LARGE: &str = "output_too_large";
    pub(crate) const STREAM_FINISHED: &str = "stream_finished";
}

/// The status of every failure the agent's output causes: a bad gateway answer, not a bad request.
const AGENT_STATUS: u16 = 502;

/// The longest excerpt of agent- or client-controlled text quoted in a message, in characters.
pub(crate) const EXCERPT_CHARS: usize = 80;

fn agent(code: &str, message: impl Into<String>) -> Failure {
    Failure::repairable(code, message, AGENT_STATUS)
}

/// A text reply that 32-bit offsets cannot name (an output past 4 GiB): only a native caller
/// can hold such an output, a component's memory is smaller. Not the agent's to repair.
pub(crate) fn output_too_large(bytes: usize) -> Failure {
    Failure {
        code: codes::OUTPUT_TOO_LARGE.to_owned(),
        message: format!("the output is {bytes} bytes, more than a text reply may hold"),
        status: AGENT_STATUS,
        repairable: false,
    }
}

/// A chunk pushed to a reply stream after its end: the host's mistake, not the agent's.
pub(crate) fn stream_finished() -> Failure {
    Failure {
        code: codes::STREAM_FINISHED.to_owned(),
        message: "a chunk was pushed to a reply stream that had finished".to_owned(),
        status: 500,
        repairable: false,
    }
}

/// At most `max` characters of `text`, with `…` when something was cut.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A name as messages quote it: escaped (quotes and control characters stay visible), bounded.
fn quoted(name: &str) -> String {
    format!(
        "\"{}\"",
        excerpt(&name.escape_debug().to_string(), EXCERPT_CHARS)
    )
}

/// The JSON type of a value, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The scan stops at the first opening tag over `limit`, so the count it names is a lower bound.
pub(crate) fn excessive(limit: usize) -> Failure {
    let found = limit.saturating_add(1);
    let allowed = if limit == 1 {
        "one tool call per reply is allowed".to_owned()
    } else {
        format!("at most {limit} tool calls per reply are allowed")
    };
    agent(
        codes::EXCESSIVE_TOOL_REQUESTS,
        format!("the output contains at least {found} <tool> envelopes; {allowed}"),
    )
}

/// A body with two candidate calls: which one the agent meant is not ours to guess.
pub(crate) fn ambiguous() -> Failure {
    agent(
        codes::AMBIGUOUS_TOOL_ENVELOPE,
        "the <tool> envelope holds more than one JSON object; put each call in its own \
         envelope, as {\"name\": ..., \"arguments\": {...}}",
    )
}

pub(crate) fn closing_without_opening() -> Failure {
    agent(
        codes::MALFORMED_TOOL_JSON,
        "the output contains </tool> without an opening <tool> tag",
    )
}

/// An envelope the output ends in whose body is not one complete JSON object (it was cut off).
/// Among several envelopes, [`of_call`] says which one.
pub(crate) fn unclosed() -> Failure {
    agent(
        codes::MALFORMED_TOOL_JSON,
        "the <tool> envelope has no closing </tool> tag outside its JSON strings, and its body \
         is not one complete JSON object",
    )
}

pub(crate) fn nested(envelope: usize) -> Failure {
    agent(
        codes::MALFORMED_TOOL_JSON,
        format!(
            "a <tool> tag opens inside <tool> envelope {envelope}, outside its JSON strings; \
             envelopes must not nest: close each one with </tool> before the next <tool>"
        ),
    )
}

/// `failure` of one call among several: its message is prefixed with the call's 1-based
/// `position`, the number of calls and, once known, the tool's name (escaped and bounded like
/// every quoted name). A reply of one call keeps the message as it is.
pub(crate) fn of_call(
    failure: Failure,
    position: usize,
    calls: usize,
    name: Option<&str>,
) -> Failure {
    if calls <= 1 {
        return failure;
    }
    let tool = name
        .map(|name| {
            format!(
                " ({})",
                excerpt(&name.escape_debug().to_string(), EXCERPT_CHARS)
            )
        })
        .unwrap_or_default();
    Failure {
        message: format!("call {position} of {calls}{tool}: {}", failure.message),
        ..failure
    }
}

pub(crate) fn malformed_json(error: &serde_json::Error) -> Failure {
    agent(
        codes::MALFORMED_TOOL_JSON,
        format!("the <tool> envelope body is not valid JSON: {error}"),
    )
}

pub(crate) fn envelope_not_object(value: &Value) -> Failure {
    agent(
        codes::MALFORMED_TOOL_JSON,
        format!(
            "the <tool> envelope body is {}, not a JSON object",
            kind(value)
        ),
    )
}

pub(crate) fn missing_name() -> Failure {
    agent(
        codes::MISSING_TOOL_NAME,
        "the <tool> envelope has no \"name\" field",
    )
}

pub(crate) fn name_not_string(value: &Value) -> Failure {
    agent(
        codes::MISSING_TOOL_NAME,
        format!(
            "the <tool> envelope's \"name\" is {}, not a string",
            kind(value)
        ),
    )
}

pub(crate) fn unexpected_field(field: &str) -> Failure {
    agent(
        codes::UNEXPECTED_ENVELOPE_FIELD,
        format!(
            "the <tool> envelope has an unexpected field {}; only \"name\" and \"arguments\" are \
             allowed",
            quoted(field)
        ),
    )
}

pub(crate) fn unidentified_tool(name: &str) -> Failure {
    agent(
        codes::UNIDENTIFIED_TOOL,
        format!("the tool {} is not among the request's tools", quoted(name)),
    )
}

pub(crate) fn arguments_not_object(name: &str, value: &Value) -> Failure {
    agent(
        codes::INVALID_TOOL_ARGUMENTS,
        format!(
            "the arguments of tool {} are {}, not a JSON object",
            quoted(name),
            kind(value)
        ),
    )
}

pub(crate) fn invalid_arguments(name: &str, listing: &str) -> Failure {
    agent(
        codes::INVALID_TOOL_ARGUMENTS,
        format!(
            "the arguments of tool {} do not match its input schema{listing}",
            quoted(name)
        ),
    )
}

pub(crate) fn invalid_schema(name: &str, reason: &str) -> Failure {
    Failure::invalid(
        codes::INVALID_TOOL_SCHEMA,
        format!("the input schema of tool {} {reason}", quoted(name)),
    )
}

pub(crate) fn invalid_tools(reason: &str) -> Failure {
    Failure::invalid(
        codes::INVALID_TOOLS,
        format!("the tools list is invalid: {reason}"),
    )
}

/// A review reply that cannot be used: a bad gateway answer, and not one a repair prompt is
/// spent on (the reviewer runs read-only and the caller decides whether to ask again).
fn review(code: &str, message: String) -> Failure {
    Failure {
        code: code.to_owned(),
        message,
        status: AGENT_STATUS,
        repairable: false,
    }
}

pub(crate) fn review_missing() -> Failure {
    review(
        codes::REVIEW_MISSING,
        "the review reply contains no JSON object".to_owned(),
    )
}

/// `problem` names a field path and what it must be; it never quotes the agent's text.
pub(crate) fn review_invalid(problem: &str) -> Failure {
    review(
        codes::REVIEW_INVALID,
        format!("the review reply is invalid: {problem}"),
    )
}
