//! The `envelope` transform: the summarizer agent's raw output becomes either final text or
//! exactly one client-owned tool call, checked against the request's tools.
//!
//! It also validates a read-only reviewer's reply: [`parse_review`] takes the first JSON object
//! of the reply, checks it against the review shape and returns it in canonical form (the
//! rules are in `review.rs`).
//!
//! This is the native logic; the wasm component is a thin shell around [`parse`],
//! [`narrates_unexecuted_action`] and [`parse_review`]. Nothing here touches the world (no clock, no randomness, no
//! files, no network), so native and wasm answers are identical.
//!
//! # `parse`, rule by rule
//!
//! `tools` comes from the host (the serializer's compact copy of the request's `tools` array) and
//! is checked first, whatever the output says, so a broken host input is reported as such
//! (`invalid_tools`) and never blamed on the agent. The whole text is checked up front (strict
//! JSON: an array of objects with distinct string names), but only the called tool's declaration
//! is turned into a value and only its schema is compiled (`tools.rs`).
//!
//! Then, on the agent's output, in this order:
//!
//! 1. No `<tool>` or `</tool>` tag at all: [`Reply::Text`], with trailing whitespace and leading
//!    blank lines removed; the rest is verbatim (the indentation of the first line is kept, it may
//!    open a code block). An empty output is an empty text.
//! 2. More than one envelope, an unclosed one included: `excessive_tool_requests`. A `</tool>`
//!    with no `<tool>` anywhere: `malformed_tool_json`.
//! 3. Non-whitespace text outside the envelope, a stray `</tool>` included:
//!    `action_narrative_mismatch`.
//! 4. No closing tag, a body that is not JSON, JSON with a duplicate key (parsers disagree on
//!    which one wins), or JSON that is not an object: `malformed_tool_json`.
//! 5. `name` missing or not a string: `missing_tool_name`. A field other than `name` and
//!    `arguments`: `unexpected_envelope_field` (a misnamed `input` would otherwise be dropped and
//!    the tool called with `{}`).
//! 6. `name` not among the tools: `unidentified_tool`.
//! 7. `arguments` (absent means `{}`) must be an object valid under the tool's full input schema:
//!    `invalid_tool_arguments`, listing every error. A tool whose schema is missing, invalid or
//!    refers outside itself: `invalid_tool_schema`.
//! 8. The call id is `devin_call_` + the first 16 hex digits of
//!    `sha256("{id_seed}:{name}:{canonical arguments}")`, and [`ToolCall::input`] is the same
//!    canonical text: compact JSON with object keys sorted by code point at every depth.
//!
//! # Statuses
//!
//! A failure of the agent's output (rules 2 to 7, except a broken schema) is `repairable` with
//! status 502: the upstream agent misbehaved, not the client. The host may spend its single
//! repair attempt on it and, after that attempt, decides the final status itself. A failure of
//! the host's or the client's own input (the tools array, a tool's schema) is a non-repairable
//! 400: no new agent run can fix it.
//!
//! # Envelope scanning
//!
//! Tags are the exact lowercase literals `<tool>` and `</tool>`. Inside an envelope the scanner
//! follows JSON strings, so a `</tool>` (or `<tool>`) inside a string value neither closes nor
//! opens anything: `<tool>{"name":"Bash","arguments":{"command":"echo '</tool>'"}}</tool>` is one
//! envelope. Outside envelopes, text is not interpreted: every tag counts.

mod canonical;
mod failure;
mod json;
mod narration;
mod review;
mod scan;
mod schema;
mod simple_schema;
mod tools;
/// The component export (a thin shell); off when another component embeds this library.
#[cfg(all(target_arch = "wasm32", feature = "export"))]
mod wasm;

pub use devin_bridge_types::{Failure, Reply, ToolCall};
pub use review::{
    first_json_object, parse_review, MAX_FIELD_CHARS, MAX_FINDINGS, MAX_SCAN_DEPTH,
    MAX_SCAN_VALUES, MAX_SUMMARY_CHARS, MAX_TEXT_BYTES,
};

use serde_json::{Map, Value};

/// Turns the agent's `output` into final text or one validated tool call.
///
/// `tools` is the request's tools array as JSON text; `id_seed` seeds the deterministic call id.
/// See the crate documentation for the rules, codes and statuses.
pub fn parse(output: &str, tools: &str, id_seed: &str) -> Result<Reply, Failure> {
    let catalog = tools::Catalog::parse(tools)?;
    let Some(body) = scan::scan(output).single_envelope()? else {
        return Ok(Reply::Text(text_reply(output).to_owned()));
    };

    let (name, arguments) = read_envelope(body)?;
    let tool = catalog
        .get(&name)?
        .ok_or_else(|| failure::unidentified_tool(&name))?;
    schema::check_arguments(tool, &arguments)?;

    let input = canonical::to_string(&arguments);
    let id = canonical::call_id(id_seed, &name, &input);
    Ok(Reply::Tool(ToolCall { id, name, input }))
}

/// True when the text outside every `<tool>...</tool>` envelope narrates a client action (read,
/// run, check, ...) that the output does not request. The patterns are described in
/// `narration.rs`; envelope bodies are never examined, so a valid envelope alone is never flagged.
pub fn narrates_unexecuted_action(output: &str) -> bool {
    scan::scan(output)
        .outside_envelopes()
        .any(narration::narrates)
}

/// The text of a final reply: trailing whitespace and leading blank lines removed.
fn text_reply(output: &str) -> &str {
    let trimmed = output.trim_end();
    let first_visible = trimmed.len() - trimmed.trim_start().len();
    // Cut after the last line break before the first visible character, keeping its indentation.
    match trimmed[..first_visible].rfind('\n') {
        Some(newline) => &trimmed[newline + 1..],
        None => trimmed,
    }
}

/// Rules 4 and 5: the envelope body as `(name, arguments)`, arguments defaulting to `{}`.
fn read_envelope(body: &str) -> Result<(String, Value), Failure> {
    let mut object = match json::parse_strict(body) {
        Ok(Value::Object(object)) => object,
        Ok(other) => return Err(failure::envelope_not_object(&other)),
        Err(error) => return Err(failure::malformed_json(&error)),
    };
    let name = match object.remove("name") {
        Some(Value::String(name)) => name,
        Some(other) => return Err(failure::name_not_string(&other)),
        None => return Err(failure::missing_name()),
    };
    let arguments = object
        .remove("arguments")
        .unwrap_or_else(|| Value::Object(Map::new()));
    // The smallest key, so the message does not depend on the map's iteration order.
    if let Some(field) = object.keys().min() {
        return Err(failure::unexpected_field(field));
    }
    Ok((name, arguments))
}

#[cfg(test)]
mod tests;
