//! The `envelope` transform: the summarizer agent's raw output becomes either final text or a
//! reply that calls tools (client-owned tool calls, each checked against the request's tools,
//! with the prose the agent wrote around them).
//!
//! It also validates a read-only reviewer's reply: [`parse_review`] takes the first JSON object
//! of the reply, checks it against the review shape and returns it in canonical form (the
//! rules are in `review.rs`).
//!
//! [`ReplyStream`] is `parse` for an output that is still arriving: it releases the text a
//! client can be shown as soon as it is certain and ends with `parse`'s answer (the rules of
//! what it holds back are in `stream.rs`).
//!
//! This is the native logic; the wasm component is a thin shell around [`parse_span`] (the
//! same answers as [`parse`], a text reply given as its span of the output rather than a copy),
//! [`ReplyStream`] (the `reply-stream` resource), [`narrates_unexecuted_action`] and
//! [`parse_review`]. Nothing here touches the world (no
//! clock, no randomness, no files, no network), so native and wasm answers are identical.
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
//! 1. No `<tool>` or `</tool>` tag outside Markdown code fences (see "Code fences" below):
//!    [`Reply::Text`], with trailing whitespace and leading blank lines removed; the rest is
//!    verbatim (the indentation of the first line is kept, it may open a code block). An empty
//!    output is an empty text.
//! 2. The envelopes are counted left to right without parsing any body, and the count stops at
//!    the first opening tag over `max_calls`: `excessive_tool_requests`, naming that count ("at
//!    least `max_calls + 1`") and the limit. An excess is therefore found before, and wins over,
//!    anything after it, and thousands of envelopes cost no more than `max_calls + 1` of them.
//! 3. A `</tool>` outside envelopes and code fences (a closing tag without its opening one):
//!    `malformed_tool_json`. Text outside the envelopes is otherwise welcome: prose before,
//!    between and after them becomes the reply's text blocks (rule 8).
//! 4. An envelope opening inside another (a `<tool>` outside the JSON strings of an envelope's
//!    body: envelopes must not nest): `malformed_tool_json`, naming the envelope. The counting
//!    scan stops there, so nothing after it is read. An envelope the output ends in (no closing
//!    tag outside its JSON strings) is the last one, and counts as closed when its body is one
//!    complete JSON object (`unclosed_envelope`, see "Recoveries"); otherwise it is
//!    `malformed_tool_json`.
//!
//!    Then, envelope by envelope: the body is read as JSON, with the recoveries below when it
//!    is not strict JSON. A body with two candidate objects: `ambiguous_tool_envelope`. A body
//!    that is still not JSON, JSON with a duplicate key (parsers disagree on which one wins), or
//!    JSON that is not an object: `malformed_tool_json`.
//! 5. `name` missing or not a string: `missing_tool_name`. A field other than `name` and
//!    `arguments`: `unexpected_envelope_field` (a misnamed `input` would otherwise be dropped and
//!    the tool called with `{}`).
//! 6. `name` not among the tools: `unidentified_tool`.
//! 7. `arguments` (absent means `{}`) must be an object valid under the tool's full input schema:
//!    `invalid_tool_arguments`, listing every error. A tool whose schema is missing, invalid or
//!    refers outside itself: `invalid_tool_schema`.
//! 8. Every call valid: [`Reply::Tools`], the reply's blocks in output order: each stretch of
//!    text outside the envelopes that holds something visible is a [`ReplyBlock::Text`]
//!    (trimmed as a text reply is: trailing whitespace and leading blank lines removed), each
//!    envelope a [`ReplyBlock::Call`]. There is at least one call and never more than
//!    `max(1, max_calls)`; text blocks are never empty and never adjacent. [`ToolCall::input`]
//!    is the canonical text of the arguments: compact JSON with object keys sorted by code
//!    point at every depth. The id of the first call is `devin_call_` + the first 16 hex digits
//!    of `sha256("{id_seed}:{name}:{input}")` (what a single call has always had); the call at
//!    1-based position `p > 1` (counting calls only) hashes `"{id_seed}:{p}:{name}:{input}"`,
//!    so identical calls get distinct ids. Ids are distinct within a reply even on a hash
//!    collision (`canonical.rs` says how). The prose never changes a call or its id.
//!
//! Rules 4 (the body) to 7 run envelope by envelope in reply order and the first failure wins.
//! When the reply holds more than one envelope, its message starts with `call {i} of {n}: `, or
//! `call {i} of {n} ({name}): ` once the name has been read, so the agent knows which call to
//! repair.
//!
//! Why ordered blocks: models (Claude included) announce a call in a sentence before it ("Let
//! me list the files."), and Anthropic's own answers carry such text blocks beside their
//! `tool_use` blocks, so the client shows the sentence and runs the call, as it would with
//! Anthropic. Refusing the prose spent the single repair on a reply that was fine and, when
//! the model narrated again, ended the client's task. The blocks keep the output's order
//! because the client shows them in that order.
//!
//! # Recoveries
//!
//! A defect of an envelope that has one plausible reading is repaired and reported, one
//! [`Recovery`] per repair in reply order, so the host can count them: the last envelope
//! left unclosed at the end of the output (`unclosed_envelope`), its JSON wrapped in a code
//! fence (`fenced_json`), prose around exactly one balanced JSON object inside the envelope
//! (`stray_prose`), a comma before a closing `}` or `]` (`trailing_comma`). `recover.rs` has
//! the exact rules; each is one forward pass over the body, so the work is linear. What has
//! more than one reading, or none, is still refused with one repair: an unknown tool,
//! arguments against the schema, two objects in one envelope, nested envelopes, an unclosed
//! envelope whose body is not one complete object.
//!
//! # Code fences
//!
//! An envelope inside a Markdown code fence (a block between ```` ``` ```` or `~~~` lines)
//! outside envelopes is quoted text, never a call: its tags are not interpreted, and the fence
//! stays in the text (a text reply, or a text block beside the reply's calls). A model may
//! fence its real call, or quote the envelope syntax as an example, and nothing in the output
//! tells the two apart; of the two mistakes, running an example the model only showed (a
//! command the user never asked for, on the user's machine) is the one that cannot be undone,
//! while a fenced real call reaches the client as text it can read. When such a reply also
//! announces the action ("Let me run the tests" + the fenced call), it has no call, so the
//! narration check refuses it and the single repair asks for the call again. A fence *inside*
//! an envelope is the fenced-JSON recovery above.
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
//! envelope. Outside envelopes, text is not interpreted but for code fences: every tag outside
//! a fence counts.
//!
//! # Narration
//!
//! [`narrates_unexecuted_action`] judges only an output that requests no tool (no `<tool>` tag
//! outside code fences): a sentence announcing a later step beside the call the reply makes
//! now is how models answer, not a missed action.

// The table of the transforms' functions names each library by its crate name, this one too
// (the component crate's exports are made from it).
extern crate self as devin_bridge_envelope;

mod canonical;
mod failure;
mod json;
mod narration;
mod recover;
mod review;
mod scan;
mod schema;
mod simple_schema;
mod stream;
mod tools;

pub use devin_bridge_types::{
    Failure, Parsed, ParsedReply, Recovery, Reply, ReplyBlock, StreamEnd, TextSpan, ToolCall,
    ToolReply,
};
pub use review::{
    first_json_object, parse_review, MAX_FIELD_CHARS, MAX_FINDINGS, MAX_SCAN_DEPTH,
    MAX_SCAN_VALUES, MAX_SUMMARY_CHARS, MAX_TEXT_BYTES,
};
pub use stream::{ReplyStream, TEXT_BLOCK_SEPARATOR};

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::ops::Range;

/// Turns the agent's `output` into final text or a reply that calls tools, with the
/// recoveries it took.
///
/// `tools` is the request's tools array as JSON text; `id_seed` seeds the deterministic call
/// ids; `max_calls` is the most calls one reply may hold (0 counts as 1). See the crate
/// documentation for the rules, codes and statuses.
pub fn parse(output: &str, tools: &str, id_seed: &str, max_calls: u32) -> Result<Parsed, Failure> {
    Ok(match parse_reply(output, tools, id_seed, max_calls)? {
        Found::Text(range) => Parsed::text(output[range].to_owned()),
        Found::Tools(tools) => tools.into(),
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
    answered(output, parse_reply(output, tools, id_seed, max_calls)?)
}

/// What was found, as the component answers it: a text reply as its span of `output`.
fn answered(output: &str, found: Found) -> Result<ParsedReply, Failure> {
    Ok(match found {
        Found::Text(range) => ParsedReply::Text(
            TextSpan::of_range(range).ok_or_else(|| failure::output_too_large(output.len()))?,
        ),
        Found::Tools(tools) => ParsedReply::Tools(tools),
    })
}

/// True when the output requests no tool (no `<tool>` tag outside code fences) and its text
/// narrates a client action (read, run, check, ...). The patterns are described in
/// `narration.rs`. An output that makes a call is never flagged, whatever its prose announces.
pub fn narrates_unexecuted_action(output: &str) -> bool {
    !scan::requests_a_tool(output) && narration::NarrationCheck::new().narrates(output)
}

/// What [`parse`] found, before a text reply is copied out of (or cut from) the output.
enum Found {
    /// The byte range of the output that is the text reply.
    Text(Range<usize>),
    Tools(ToolReply),
}

fn parse_reply(output: &str, tools: &str, id_seed: &str, max_calls: u32) -> Result<Found, Failure> {
    let catalog = tools::Catalog::parse(tools)?;
    let limit = usize::try_from(max_calls.max(1)).unwrap_or(usize::MAX);
    let pieces = scan::envelopes(output, limit)?;
    reply_of(output, pieces, &catalog, id_seed)
}

/// [`parse_span`] of an output whose structure is already known: `pieces` is what
/// [`scan::envelopes`] answers for `output` when it succeeds (the reply stream scans as the
/// output arrives, so its end does not scan it again).
fn parse_scanned(
    output: &str,
    pieces: Option<Vec<scan::Piece<'_>>>,
    tools: &str,
    id_seed: &str,
) -> Result<ParsedReply, Failure> {
    let catalog = tools::Catalog::parse(tools)?;
    answered(output, reply_of(output, pieces, &catalog, id_seed)?)
}

/// Rules 1 and 4 to 8 on the structure of the output (rules 2 to 4 of the scan passed).
fn reply_of(
    output: &str,
    pieces: Option<Vec<scan::Piece<'_>>>,
    catalog: &tools::Catalog<'_>,
    id_seed: &str,
) -> Result<Found, Failure> {
    let Some(pieces) = pieces else {
        return Ok(Found::Text(text_range(output)));
    };

    let count = pieces
        .iter()
        .filter(|piece| matches!(piece, scan::Piece::Envelope(_)))
        .count();
    // One checker per called tool, so a tool called several times is looked up, parsed and
    // (if its schema needs a validator) compiled once.
    let mut checkers: BTreeMap<&str, schema::Checker<'_>> = BTreeMap::new();
    let mut ids = canonical::CallIds::new(id_seed);
    let mut blocks = Vec::with_capacity(pieces.len());
    let mut recoveries = Vec::new();
    let mut position = 0;
    for piece in pieces {
        let body = match piece {
            scan::Piece::Text(text) => {
                let range = text_range(text);
                if !range.is_empty() {
                    blocks.push(ReplyBlock::Text(text[range].to_owned()));
                }
                continue;
            }
            scan::Piece::Envelope(body) => body,
        };
        position += 1;
        let (name, arguments) = read_envelope(body, &mut recoveries)
            .map_err(|failure| failure::of_call(failure, position, count, None))?;
        check_call(catalog, &mut checkers, &name, &arguments)
            .map_err(|failure| failure::of_call(failure, position, count, Some(&name)))?;
        // The body is the arguments plus a little: an upper bound, in practice, of their text.
        let input = canonical::to_string(&arguments, body.text.len());
        let id = ids.issue(position, &name, &input);
        blocks.push(ReplyBlock::Call(ToolCall { id, name, input }));
    }
    Ok(Found::Tools(ToolReply { blocks, recoveries }))
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

/// Rules 4 and 5: the envelope body as `(name, arguments)`, arguments defaulting to `{}`; the
/// recoveries it needed are added to `recoveries`.
fn read_envelope(
    body: scan::Body<'_>,
    recoveries: &mut Vec<Recovery>,
) -> Result<(String, Value), Failure> {
    let read = recover::read(body.text, body.unclosed);
    let (value, repaired) = if body.unclosed {
        // Closed at the end of the output only when the body is one complete object.
        match read {
            Ok((value @ Value::Object(_), repaired)) => (value, repaired),
            _ => return Err(failure::unclosed()),
        }
    } else {
        read?
    };
    let mut object = match value {
        Value::Object(object) => object,
        other => return Err(failure::envelope_not_object(&other)),
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
    if body.unclosed {
        recoveries.push(Recovery::UnclosedEnvelope);
    }
    recoveries.extend(repaired);
    Ok((name, arguments))
}

#[cfg(test)]
mod tests;
