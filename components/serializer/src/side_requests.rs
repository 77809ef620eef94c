//! Side requests the host may answer without the model: a request is recognized only when it
//! has every structural feature of a kind of side request, and its answer follows from the
//! request alone. Local answers never guess: a request that has only some of the features (a
//! tool, a second message, a schema with another property, no session tag) is no answer, and
//! the request goes to the agent like any other.
//!
//! Known today: Claude Code's session title (`session_title`). After a user message of a
//! session without a title, interactive Claude Code sends a request that asks for the session's
//! name. It is recognized by what it is, not by its wording (the features, which every
//! captured release shares, are listed in `docs/claude-code.md`):
//! 1. no tools (`tools` absent or `[]`);
//! 2. a system prompt of text blocks only (one or more; their words are not compared);
//! 3. `output_config.format` asking for JSON that is an object with exactly one property, a
//!    string `title` (required, no additional properties), and nothing else;
//! 4. exactly one message, from the user, one text (a string or a single text block) that
//!    starts `<session>\n` and holds `\n</session>`: the session's text is between.
//!
//! Claude Code accepts a text reply that is the JSON `{"title": "..."}`.
//!
//! Invariants: the work is linear in the request's size and bounded by it (one pass over the
//! system blocks, one search for the session's end, and a scan that stops at the first
//! non-empty line and after [`MAX_TITLE_WORDS`] words); the title is at most
//! [`MAX_TITLE_CHARS`] characters and holds no control character; the answer is valid JSON.

use std::borrow::Cow;

use crate::json::Json;

/// The purpose of a session-title answer.
pub(crate) const SESSION_TITLE: &str = "session_title";

/// Where the user's text begins and ends in the title request's only message.
const SESSION_OPEN: &str = "<session>\n";
const SESSION_CLOSE: &str = "\n</session>";

/// Words and characters (Unicode scalar values) a title holds at most.
pub(crate) const MAX_TITLE_WORDS: usize = 6;
pub(crate) const MAX_TITLE_CHARS: usize = 60;
/// The title of a session whose text is empty.
pub(crate) const EMPTY_SESSION_TITLE: &str = "New session";

/// The local answer to `request` (a JSON object the serializer has accepted), when it is a side
/// request of a known shape; none for every other request.
pub(crate) fn local_answer(request: &Json) -> Option<devin_bridge_types::LocalAnswer> {
    let session = session_title_request(request)?;
    Some(devin_bridge_types::LocalAnswer {
        purpose: SESSION_TITLE.to_owned(),
        text: title_json(&title(session)),
    })
}

/// The session text of a request that has every feature of a session-title request.
fn session_title_request<'r>(request: &'r Json) -> Option<&'r str> {
    // No tools: absent, or an empty list.
    match request.field("tools") {
        None => {}
        Some(Json::Array(tools)) if tools.is_empty() => {}
        Some(_) => return None,
    }
    if !text_blocks_only(request.field("system")?) || !title_format(request) {
        return None;
    }
    let Some(Json::Array(messages)) = request.field("messages") else {
        return None;
    };
    let [message] = messages.as_slice() else {
        return None;
    };
    if message.str_field("role") != Some("user") {
        return None;
    }
    let text = match message.field("content")? {
        Json::String(text) => text.as_ref(),
        Json::Array(blocks) => {
            let [block] = blocks.as_slice() else {
                return None;
            };
            block_text(block)?
        }
        _ => return None,
    };
    let rest = text.strip_prefix(SESSION_OPEN)?;
    // The last closing tag: the user's own text may hold one.
    let end = rest.rfind(SESSION_CLOSE)?;
    rest.get(..end)
}

/// The system prompt is a list of one or more text blocks (what they say is not compared:
/// Claude Code words its instructions differently from release to release).
fn text_blocks_only(system: &Json) -> bool {
    let Json::Array(blocks) = system else {
        return false;
    };
    !blocks.is_empty() && blocks.iter().all(|block| block_text(block).is_some())
}

/// The text of a text block.
fn block_text<'r>(block: &'r Json) -> Option<&'r str> {
    if block.str_field("type") != Some("text") {
        return None;
    }
    block.str_field("text")
}

/// `output_config.format` is `{type: "json_schema", schema: {type: "object", properties:
/// {title: {type: "string"}}, required: ["title"], additionalProperties: false}}`, exactly (its
/// members in any order).
fn title_format(request: &Json) -> bool {
    let Some(format) = request
        .field("output_config")
        .and_then(|config| config.field("format"))
    else {
        return false;
    };
    let string =
        |value: &Json, expected: &str| matches!(value, Json::String(text) if text == expected);
    exactly(format, &["type", "schema"])
        && format
            .field("type")
            .is_some_and(|kind| string(kind, "json_schema"))
        && format.field("schema").is_some_and(|schema| {
            exactly(
                schema,
                &["type", "properties", "required", "additionalProperties"],
            ) && schema
                .field("type")
                .is_some_and(|kind| string(kind, "object"))
                && schema.field("properties").is_some_and(|properties| {
                    exactly(properties, &["title"])
                        && properties.field("title").is_some_and(|title| {
                            exactly(title, &["type"])
                                && title
                                    .field("type")
                                    .is_some_and(|kind| string(kind, "string"))
                        })
                })
                && matches!(schema.field("required"), Some(Json::Array(required))
                    if matches!(required.as_slice(), [name] if string(name, "title")))
                && matches!(
                    schema.field("additionalProperties"),
                    Some(Json::Bool(false))
                )
        })
}

/// `value` is an object with exactly these member names, each once.
fn exactly(value: &Json, names: &[&str]) -> bool {
    let Json::Object(members) = value else {
        return false;
    };
    members.len() == names.len()
        && names
            .iter()
            .all(|name| members.iter().filter(|(key, _)| key == name).count() == 1)
}

/// The title of a session: its first non-empty line, control characters dropped and
/// whitespace collapsed, at most [`MAX_TITLE_WORDS`] words and [`MAX_TITLE_CHARS`] characters
/// (cut at a character boundary), its first character upper-cased; [`EMPTY_SESSION_TITLE`]
/// when the session has no text.
pub(crate) fn title(session: &str) -> String {
    let words = |line: &str| -> Vec<String> {
        line.split(|c: char| c.is_whitespace() || c.is_control())
            .filter(|word| !word.is_empty())
            .take(MAX_TITLE_WORDS)
            .map(str::to_owned)
            .collect()
    };
    let Some(words) = session
        .split('\n')
        .map(words)
        .find(|words| !words.is_empty())
    else {
        return EMPTY_SESSION_TITLE.to_owned();
    };
    let line = words.join(" ");
    let mut chars = line.chars();
    let capitalized: Cow<str> = match chars.next() {
        Some(first) if first.is_lowercase() => {
            Cow::Owned(first.to_uppercase().chain(chars).collect())
        }
        _ => Cow::Borrowed(&line),
    };
    let cut: String = capitalized.chars().take(MAX_TITLE_CHARS).collect();
    cut.trim_end().to_owned()
}

/// `{"title":"..."}`, the title escaped as serde_json escapes strings.
fn title_json(title: &str) -> String {
    let mut text = String::from("{\"title\":");
    // A string always serializes.
    text.push_str(&serde_json::to_string(title).unwrap_or_else(|_| "\"\"".to_owned()));
    text.push('}');
    text
}

#[cfg(test)]
mod tests;
