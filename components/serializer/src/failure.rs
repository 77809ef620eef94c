//! The serializer's failure codes and the constructors that use them.
//!
//! Every serializer failure is the client's fault (HTTP 400) and no repair can fix it: the agent
//! has not run yet. The codes are stable API: the host maps them to Anthropic error bodies and
//! fixtures pin them.

use devin_bridge_types::Failure;

/// The body is not JSON (syntax, a number out of range, or nesting deeper than 128 levels).
pub(crate) const INVALID_JSON: &str = "invalid_json";
/// A continuation's resume state does not fit it (a caller's mistake: the caller serializes the
/// whole request instead, which says what, if anything, is wrong with it).
pub(crate) const INVALID_RESUME: &str = "invalid_resume";
/// The body is JSON but not an object.
pub(crate) const INVALID_REQUEST: &str = "invalid_request";
/// `model` is missing, empty or not a string.
pub(crate) const MISSING_MODEL: &str = "missing_model";
/// `stream` is present but not a boolean.
pub(crate) const INVALID_STREAM: &str = "invalid_stream";
/// `system` is neither a string nor an array of text blocks.
pub(crate) const INVALID_SYSTEM: &str = "invalid_system";
/// `tools` is present but not an array.
pub(crate) const INVALID_TOOLS: &str = "invalid_tools";
/// A tool is not an object, has no non-empty string `name`, or a mistyped `description` /
/// `input_schema`.
pub(crate) const INVALID_TOOL: &str = "invalid_tool";
/// Two tools share a name.
pub(crate) const DUPLICATE_TOOL_NAME: &str = "duplicate_tool_name";
/// `tool_choice` is malformed, has an unknown type, or requires a tool when there are none.
pub(crate) const INVALID_TOOL_CHOICE: &str = "invalid_tool_choice";
/// `tool_choice` names a tool that `tools` does not declare.
pub(crate) const UNKNOWN_TOOL_CHOICE: &str = "unknown_tool_choice";
/// `messages` is present but not an array.
pub(crate) const INVALID_MESSAGES: &str = "invalid_messages";
/// A message is not an object, lacks a string `role`, or its `content` is neither a string nor
/// an array.
pub(crate) const INVALID_MESSAGE: &str = "invalid_message";
/// A message role other than `user` or `assistant`.
pub(crate) const UNSUPPORTED_ROLE: &str = "unsupported_role";
/// A content block is not an object, has no string `type`, or a required field is mistyped.
pub(crate) const INVALID_CONTENT_BLOCK: &str = "invalid_content_block";
/// A content block type the trace cannot represent.
pub(crate) const UNSUPPORTED_CONTENT_BLOCK: &str = "unsupported_content_block";
/// An `image` or `document` block, in a message or inside a tool result: the agent has no vision.
pub(crate) const UNSUPPORTED_VISUAL_BLOCK: &str = "unsupported_visual_block";
/// A `tool_use` block without a non-empty string `id`.
pub(crate) const MISSING_TOOL_USE_ID: &str = "missing_tool_use_id";
/// Two `tool_use` blocks share an id.
pub(crate) const DUPLICATE_TOOL_USE_ID: &str = "duplicate_tool_use_id";
/// A `tool_use` block names a tool this request does not declare.
pub(crate) const UNDECLARED_TOOL: &str = "undeclared_tool";
/// A `tool_result` answers an id that no earlier `tool_use` introduced.
pub(crate) const ORPHAN_TOOL_RESULT: &str = "orphan_tool_result";
/// Nothing to serialize: no system text, no tools, no tool choice and no messages.
pub(crate) const EMPTY_MESSAGES: &str = "empty_messages";

pub(crate) fn fail(code: &str, message: impl Into<String>) -> Failure {
    Failure::invalid(code, message)
}

/// Client text quoted in an error message, cut to a readable length: an error body should
/// name the offending value, not echo a megabyte of it.
pub(crate) fn quote(text: &str) -> String {
    const MAX_CHARS: usize = 64;
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("\"{}…\"", text.get(..cut).unwrap_or_default()),
        None => format!("\"{text}\""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_unrepairable_client_errors() {
        let failure = fail(EMPTY_MESSAGES, "nothing");
        assert_eq!(failure.status, 400);
        assert!(!failure.repairable);
    }

    #[test]
    fn quote_cuts_long_values_on_char_boundaries() {
        assert_eq!(quote("Read"), "\"Read\"");
        let long = "é".repeat(100);
        let quoted = quote(&long);
        assert_eq!(quoted.chars().count(), 64 + 3);
        assert!(quoted.ends_with("…\""));
    }
}
