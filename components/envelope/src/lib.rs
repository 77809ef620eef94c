//! The `envelope` transform: the summarizer agent's raw output becomes either final text or
//! one or more client-owned tool calls, each checked against the request's tools.
//!
//! It also validates a read-only reviewer's reply: [`parse_review`] takes the first JSON object
//! of the reply, checks it against the review shape and returns it in canonical form (the
//! rules are in `review.rs`).
//!
//! This is the native logic; the wasm component is a thin shell around [`parse_span`] (the
//! same answers as [`parse`], a text reply given as its span of the output rather than a copy),
//! [`narrates_unexecuted_action`] and [`parse_review`]. Nothing here touches the world (no clock, no randomness, no files, no
//! network), so native and wasm answers are identical.
//!
//! # `parse`, rule by rule
//!
//! `tools` comes from the host (the serializer's compact copy of the request's `tools` array) and
//! is checked first, whatever the output says, so a broken host input is reported as such
//! (`invalid_tools`) and never blamed on the agent. The whole text is checked up front (strict
//! JSON: an array of objects with distinct string names), but only the called tools'
//! declarations are turned into values and only their schemas are compiled (`tools.rs`), each
//! at most once per reply however often it is called.
//!
//! `max_calls` is the most envelopes one reply may hold; 0 counts as 1.
//!
//! Then, on the agent's output, in this order:
//!
//! 1. No `<tool>` or `</tool>` tag at all: [`Reply::Text`], with trailing whitespace and leading
//!    blank lines removed; the rest is verbatim (the indentation of the first line is kept, it may
//!    open a code block). An empty output is an empty text.
//! 2. A `</tool>` with no `<tool>` anywhere: `malformed_tool_json`. Otherwise the envelopes are
//!    counted left to right without parsing any body, and the count stops at the first opening
//!    tag over `max_calls`: `excessive_tool_requests`, naming that count ("at least
//!    `max_calls + 1`") and the limit. An excess is therefore found before, and wins over,
//!    anything after it, and thousands of envelopes cost no more than `max_calls + 1` of them.
//! 3. Non-whitespace text outside the envelopes (before, between or after them; a stray
//!    `</tool>` included): `action_narrative_mismatch`.
//! 4. An envelope cut off (the output ends before its closing tag) or an envelope opening inside
//!    another (a `<tool>` outside the JSON strings of an envelope's body: envelopes must not
//!    nest): `malformed_tool_json`, naming the envelope when it is not the first. The counting
//!    scan stops at such an envelope, so nothing after it is read (rules 2 and 3 only see what
//!    comes before it): within the limit, a cut-off envelope after complete ones is malformed,
//!    not excessive.
//!
//!    Then, envelope by envelope: a body that is not JSON, JSON with a duplicate key (parsers
//!    disagree on which one wins), or JSON that is not an object: `malformed_tool_json`.
//! 5. `name` missing or not a string: `missing_tool_name`. A field other than `name` and
//!    `arguments`: `unexpected_envelope_field` (a misnamed `input` would otherwise be dropped and
//!    the tool called with `{}`).
//! 6. `name` not among the tools: `unidentified_tool`.
//! 7. `arguments` (absent means `{}`) must be an object valid under the tool's full input schema:
//!    `invalid_tool_arguments`, listing every error. A tool whose schema is missing, invalid or
//!    refers outside itself: `invalid_tool_schema`.
//! 8. Every call valid: [`Reply::Tools`], the calls in reply order (never empty, never more than
//!    `max(1, max_calls)`). [`ToolCall::input`] is the canonical text of the arguments: compact
//!    JSON with object keys sorted by code point at every depth. The id of the first call is
//!    `devin_call_` + the first 16 hex digits of `sha256("{id_seed}:{name}:{input}")` (what a
//!    single call has always had); the call at 1-based position `p > 1` hashes
//!    `"{id_seed}:{p}:{name}:{input}"`, so identical calls get distinct ids. Ids are distinct
//!    within a reply even on a hash collision (`canonical.rs` says how).
//!
//! Rules 4 (the body) to 7 run envelope by envelope in reply order and the first failure wins.
//! When the reply holds more than one envelope, its message starts with `call {i} of {n}: `, or
//! `call {i} of {n} ({name}): ` once the name has been read, so the agent knows which call to
//! repair.
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

pub use devin_bridge_types::{Failure, ParsedReply, Reply, TextSpan, ToolCall};
pub use review::{
    first_json_object, parse_review, MAX_FIELD_CHARS, MAX_FINDINGS, MAX_SCAN_DEPTH,
    MAX_SCAN_VALUES, MAX_SUMMARY_CHARS, MAX_TEXT_BYTES,
};

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::ops::Range;

/// Turns the agent's `output` into final text or its validated tool calls.
///
/// `tools` is the request's tools array as JSON text; `id_seed` seeds the deterministic call
/// ids; `max_calls` is the most calls one reply may hold (0 counts as 1). See the crate
/// documentation for the rules, codes and statuses.
pub fn parse(output: &str, tools: &str, id_seed: &str, max_calls: u32) -> Result<Reply, Failure> {
    Ok(match parse_reply(output, tools, id_seed, max_calls)? {
        Parsed::Text(range) => Reply::Text(output[range].to_owned()),
        Parsed::Tools(calls) => Reply::Tools(calls),
    })
}

/// [`parse`] answered as the component answers it: a text reply is the span of `output` that
/// is the text, not a copy (a text reply can be megabytes, and the host that asked holds the
/// output already). [`ParsedReply::resolve`] of the answer is [`parse`]'s.
pub fn parse_span(
    output: &str,
    tools: &str,
    id_seed: &str,
    max_calls: u32,
) -> Result<ParsedReply, Failure> {
    Ok(match parse_reply(output, tools, id_seed, max_calls)? {
        Parsed::Text(range) => ParsedReply::Text(
            TextSpan::of_range(range).ok_or_else(|| failure::output_too_large(output.len()))?,
        ),
        Parsed::Tools(calls) => ParsedReply::Tools(calls),
    })
}

/// True when the text outside every `<tool>...</tool>` envelope narrates a client action (read,
/// run, check, ...) that the output does not request. The patterns are described in
/// `narration.rs`; envelope bodies are never examined, so valid envelopes alone are never
/// flagged.
pub fn narrates_unexecuted_action(output: &str) -> bool {
    let mut narration = narration::NarrationCheck::new();
    scan::outside_envelopes(output).any(|piece| narration.narrates(piece))
}

/// What [`parse`] found, before a text reply is copied out of (or cut from) the output.
enum Parsed {
    /// The byte range of the output that is the text reply.
    Text(Range<usize>),
    Tools(Vec<ToolCall>),
}

fn parse_reply(
    output: &str,
    tools: &str,
    id_seed: &str,
    max_calls: u32,
) -> Result<Parsed, Failure> {
    let catalog = tools::Catalog::parse(tools)?;
    let limit = usize::try_from(max_calls.max(1)).unwrap_or(usize::MAX);
    let Some(bodies) = scan::envelopes(output, limit)? else {
        return Ok(Parsed::Text(text_range(output)));
    };

    let count = bodies.len();
    // One checker per called tool, so a tool called several times is looked up, parsed and
    // (if its schema needs a validator) compiled once.
    let mut checkers: BTreeMap<&str, schema::Checker<'_>> = BTreeMap::new();
    let mut ids = canonical::CallIds::new(id_seed);
    let mut calls = Vec::with_capacity(count);
    for (index, body) in bodies.into_iter().enumerate() {
        let position = index + 1;
        let (name, arguments) = read_envelope(body)
            .map_err(|failure| failure::of_call(failure, position, count, None))?;
        check_call(&catalog, &mut checkers, &name, &arguments)
            .map_err(|failure| failure::of_call(failure, position, count, Some(&name)))?;
        // The body is the arguments plus a little: an upper bound, in practice, of their text.
        let input = canonical::to_string(&arguments, body.len());
        let id = ids.issue(position, &name, &input);
        calls.push(ToolCall { id, name, input });
    }
    Ok(Parsed::Tools(calls))
}

/// Rules 6 and 7 for one call.
fn check_call<'c>(
    catalog: &'c tools::Catalog<'_>,
    checkers: &mut BTreeMap<&'c str, schema::Checker<'c>>,
    name: &str,
    arguments: &Value,
) -> Result<(), Failure> {
    if let Some(checker) = checkers.get_mut(name) {
        return checker.check(arguments);
    }
    let tool = catalog
        .get(name)?
        .ok_or_else(|| failure::unidentified_tool(name))?;
    checkers
        .entry(tool.name)
        .or_insert_with(|| schema::Checker::new(tool))
        .check(arguments)
}

/// The text of a final reply: trailing whitespace and leading blank lines removed.
fn text_range(output: &str) -> Range<usize> {
    let end = output.trim_end().len();
    let trimmed = &output[..end];
    let first_visible = end - trimmed.trim_start().len();
    // Cut after the last line break before the first visible character, keeping its indentation.
    let start = trimmed[..first_visible]
        .rfind('\n')
        .map_or(0, |newline| newline + 1);
    start..end
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
