//! `messages`: one `[User]` or `[Assistant]` section per message, its content blocks separated
//! by blank lines.
//!
//! Tool-use ids are remembered in message order (the seed's `knownToolUses`) so that a result
//! can only answer a call the trace has already shown. Every `tool_use` block is also kept as
//! a call for the safeguard judge ([`past_call`]): its id, name and the input members the judge
//! reads of a past call.

use std::collections::BTreeSet;

use devin_bridge_types::{Failure, ImageLimits, ToolCall};

use crate::failure::{
    fail, quote, DUPLICATE_TOOL_USE_ID, INVALID_CONTENT_BLOCK, INVALID_MESSAGE, INVALID_MESSAGES,
    MISSING_TOOL_USE_ID, ORPHAN_TOOL_RESULT, UNDECLARED_TOOL, UNSUPPORTED_CONTENT_BLOCK,
    UNSUPPORTED_ROLE, UNSUPPORTED_VISUAL_BLOCK,
};
use crate::images::{self, Found, PLACEHOLDER};
use crate::json::{write_compact, write_pretty, write_string, Json};
use crate::trace::Trace;

/// The input members the safeguard judge reads of a past call: what it wrote.
const PAST_CALL_MEMBERS: [&str; 3] = ["command", "file_path", "notebook_path"];

/// A `tool_use` block as the safeguard judge reads a past call: its id, its name, and its input
/// reduced to the [`PAST_CALL_MEMBERS`] that are strings (compact JSON, in the input's order),
/// so that a file's contents never weigh on the judge.
fn past_call(id: &str, name: &str, input: &Json) -> ToolCall {
    let mut reduced = String::from("{");
    if let Json::Object(entries) = input {
        for (key, value) in entries {
            if let Json::String(_) = value {
                if PAST_CALL_MEMBERS.contains(&key.as_ref()) {
                    if reduced.len() > 1 {
                        reduced.push(',');
                    }
                    write_string(&mut reduced, key);
                    reduced.push(':');
                    write_compact(&mut reduced, value);
                }
            }
        }
    }
    reduced.push('}');
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        input: reduced,
    }
}

/// A tool result keeps at most this many characters (Unicode scalar values).
pub(crate) const TOOL_RESULT_CHAR_LIMIT: usize = 65_536;

/// The request's `messages` (none when absent).
pub(crate) fn of<'r, 'a>(request: &'r Json<'a>) -> Result<&'r [Json<'a>], Failure> {
    match request.field("messages") {
        None => Ok(&[][..]),
        Some(Json::Array(messages)) => Ok(messages.as_slice()),
        Some(other) => Err(fail(
            INVALID_MESSAGES,
            format!("messages must be an array, not {}", other.kind()),
        )),
    }
}

/// What is known of the conversation's messages before the first one written.
pub(crate) struct Before<'a> {
    /// How many there are (the index of the first message written).
    pub(crate) count: usize,
    /// The tool-use ids they introduced.
    pub(crate) tool_uses: BTreeSet<&'a str>,
}

/// What writing the messages found.
pub(crate) struct Written<'a> {
    /// The image blocks that may be attached (none unless the image limits accept some).
    pub(crate) found: Vec<Found<'a>>,
    /// The tool-use ids each written message introduced, in message order.
    pub(crate) tool_uses: Vec<Vec<&'a str>>,
    /// Every `tool_use` block, in order, reduced by [`past_call`].
    pub(crate) calls: Vec<ToolCall>,
}

/// Writes `messages`, which follow the messages `before` describes, under the tools
/// `declared`.
pub(crate) fn write<'a>(
    messages: &'a [Json<'a>],
    before: Before<'a>,
    declared: &BTreeSet<&str>,
    trace: &mut Trace,
    images: ImageLimits,
) -> Result<Written<'a>, Failure> {
    let mut writer = Writer {
        declared,
        known_tool_uses: before.tool_uses,
        introduced: Vec::new(),
        images,
        found: Vec::new(),
        calls: Vec::new(),
    };
    let mut tool_uses = Vec::with_capacity(messages.len());
    for (offset, message) in messages.iter().enumerate() {
        writer.message(before.count + offset, message, trace)?;
        trace.end_message();
        tool_uses.push(std::mem::take(&mut writer.introduced));
    }
    Ok(Written {
        found: writer.found,
        tool_uses,
        calls: writer.calls,
    })
}

struct Writer<'a, 'c> {
    declared: &'c BTreeSet<&'c str>,
    known_tool_uses: BTreeSet<&'a str>,
    /// The tool-use ids of the message being written.
    introduced: Vec<&'a str>,
    /// The `tool_use` blocks so far, for the safeguard judge.
    calls: Vec<ToolCall>,
    images: ImageLimits,
    found: Vec<Found<'a>>,
}

/// Where a block sits, rendered only when an error needs it.
#[derive(Clone, Copy)]
struct At {
    message: usize,
    block: usize,
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "messages[{}].content[{}]", self.message, self.block)
    }
}

impl<'a> Writer<'a, '_> {
    fn message(
        &mut self,
        index: usize,
        message: &'a Json,
        trace: &mut Trace,
    ) -> Result<(), Failure> {
        if !matches!(message, Json::Object(_)) {
            return Err(fail(
                INVALID_MESSAGE,
                format!(
                    "messages[{index}] must be an object, not {}",
                    message.kind()
                ),
            ));
        }
        let header = match message.field("role") {
            Some(Json::String(role)) if role == "user" => "[User]",
            Some(Json::String(role)) if role == "assistant" => "[Assistant]",
            // Claude Code 2.1.x sends mid-conversation `system` turns (its environment block);
            // they are system text, like the top-level `system`, and may carry only text.
            Some(Json::String(role)) if role == "system" => {
                if let Some(Json::Array(blocks)) = message.field("content") {
                    let is_text = |block: &Json| matches!(block.field("type"), Some(Json::String(kind)) if kind == "text");
                    if let Some(position) = blocks.iter().position(|block| !is_text(block)) {
                        return Err(fail(
                            INVALID_CONTENT_BLOCK,
                            format!("messages[{index}].content[{position}]: a system message may carry only text blocks"),
                        ));
                    }
                }
                "[System]"
            }
            // The wording matters: when the answer says a role "is not supported", Claude Code
            // retries with such turns folded into the user turn (seen with Claude Code 2.1.332).
            Some(Json::String(role)) => {
                return Err(fail(
                    UNSUPPORTED_ROLE,
                    format!(
                        "messages[{index}] has role {}, which is not supported (only user, assistant and system are)",
                        quote(role)
                    ),
                ))
            }
            _ => {
                return Err(fail(
                    INVALID_MESSAGE,
                    format!("messages[{index}] needs a string role"),
                ))
            }
        };
        match message.field("content") {
            Some(Json::String(text)) => trace.section(header).push_str(text),
            Some(Json::Array(blocks)) => {
                let out = trace.section(header);
                for (block_index, block) in blocks.iter().enumerate() {
                    if block_index > 0 {
                        out.push_str("\n\n");
                    }
                    let at = At {
                        message: index,
                        block: block_index,
                    };
                    self.block(at, block, out)?;
                }
            }
            Some(other) => {
                return Err(fail(
                    INVALID_MESSAGE,
                    format!(
                        "messages[{index}].content must be a string or an array, not {}",
                        other.kind()
                    ),
                ))
            }
            None => {
                return Err(fail(
                    INVALID_MESSAGE,
                    format!("messages[{index}] needs content"),
                ))
            }
        }
        Ok(())
    }

    fn block(&mut self, at: At, block: &'a Json, out: &mut String) -> Result<(), Failure> {
        if !matches!(block, Json::Object(_)) {
            return Err(fail(
                INVALID_CONTENT_BLOCK,
                format!("{at} must be an object, not {}", block.kind()),
            ));
        }
        let Some(kind) = block.str_field("type") else {
            return Err(fail(
                INVALID_CONTENT_BLOCK,
                format!("{at} needs a string type"),
            ));
        };
        match kind {
            "text" => out.push_str(required_str(block, "text", at)?),
            "thinking" => {
                out.push_str("[Thinking]\n");
                out.push_str(required_str(block, "thinking", at)?);
            }
            // Its payload is encrypted for another model; only the fact that it happened is
            // meaningful here.
            "redacted_thinking" => out.push_str("[Redacted Thinking]"),
            "tool_use" => self.tool_use(at, block, out)?,
            "tool_result" => self.tool_result(at, block, out)?,
            "image" if self.images.max_images > 0 => {
                self.image(&at.to_string(), at.message, block, out)?;
            }
            "image" | "document" => return Err(visual(&at.to_string(), kind)),
            other => {
                return Err(fail(
                    UNSUPPORTED_CONTENT_BLOCK,
                    format!("{at} has the unsupported block type {}", quote(other)),
                ))
            }
        }
        Ok(())
    }

    fn tool_use(&mut self, at: At, block: &'a Json, out: &mut String) -> Result<(), Failure> {
        let id = match block.str_field("id") {
            Some(id) if !id.is_empty() => id,
            _ => {
                return Err(fail(
                    MISSING_TOOL_USE_ID,
                    format!("{at} is a tool_use without a string id"),
                ))
            }
        };
        let name = required_str(block, "name", at)?;
        let Some(input @ Json::Object(_)) = block.field("input") else {
            return Err(fail(
                INVALID_CONTENT_BLOCK,
                format!("{at} is a tool_use whose input is not an object"),
            ));
        };
        if !self.declared.contains(name) {
            return Err(fail(
                UNDECLARED_TOOL,
                format!(
                    "{at} uses the tool {}, which this request's tools do not declare",
                    quote(name)
                ),
            ));
        }
        if !self.known_tool_uses.insert(id) {
            return Err(fail(
                DUPLICATE_TOOL_USE_ID,
                format!("{at} repeats the tool_use id {}", quote(id)),
            ));
        }
        self.introduced.push(id);
        self.calls.push(past_call(id, name, input));
        out.push_str("[Assistant Tool Use]\nid: ");
        out.push_str(id);
        out.push_str("\nname: ");
        out.push_str(name);
        out.push_str("\narguments:\n");
        write_pretty(out, input, 0);
        Ok(())
    }

    fn tool_result(&mut self, at: At, block: &'a Json, out: &mut String) -> Result<(), Failure> {
        let id = required_str(block, "tool_use_id", at)?;
        if !self.known_tool_uses.contains(id) {
            return Err(fail(
                ORPHAN_TOOL_RESULT,
                format!(
                    "{at} answers the tool_use id {}, which no earlier tool_use introduced",
                    quote(id)
                ),
            ));
        }
        let is_error = match block.field("is_error") {
            None => false,
            Some(Json::Bool(flag)) => *flag,
            Some(other) => {
                return Err(fail(
                    INVALID_CONTENT_BLOCK,
                    format!("{at}.is_error must be a boolean, not {}", other.kind()),
                ))
            }
        };
        out.push_str("[Tool Result]\ntool_use_id: ");
        out.push_str(id);
        out.push_str(if is_error {
            "\nis_error: true\ncontent:"
        } else {
            "\nis_error: false\ncontent:"
        });
        let start = out.len();
        out.push('\n');
        match block.field("content") {
            None => {}
            Some(Json::String(text)) => out.push_str(text),
            Some(Json::Array(items)) => {
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push('\n');
                    }
                    self.result_item(at, index, item, out)?;
                }
            }
            Some(other) => write_compact(out, other),
        }
        if out.len() == start + 1 {
            // Say so rather than leave a dangling label: an empty result is still a result.
            out.truncate(start);
            out.push_str(" (empty)");
        } else {
            truncate_tail(out, start + 1, TOOL_RESULT_CHAR_LIMIT);
        }
        Ok(())
    }

    /// An image block: the placeholder in the trace, and the image itself when it can be
    /// attached.
    fn image(
        &mut self,
        at: &str,
        message: usize,
        block: &'a Json,
        out: &mut String,
    ) -> Result<(), Failure> {
        if let Some(found) = images::read(at, message, block)? {
            self.found.push(found);
        }
        out.push_str(PLACEHOLDER);
        Ok(())
    }

    /// One element of a tool result's content array: text as is, an image as its placeholder
    /// (when images are accepted), anything else non-visual as compact JSON.
    fn result_item(
        &mut self,
        at: At,
        index: usize,
        item: &'a Json,
        out: &mut String,
    ) -> Result<(), Failure> {
        match item.str_field("type") {
            Some("text") if matches!(item, Json::Object(_)) => match item.str_field("text") {
                Some(text) => out.push_str(text),
                None => {
                    return Err(fail(
                        INVALID_CONTENT_BLOCK,
                        format!("{at}.content[{index}] is a text block without a string text"),
                    ))
                }
            },
            Some("image") if self.images.max_images > 0 && matches!(item, Json::Object(_)) => {
                self.image(&format!("{at}.content[{index}]"), at.message, item, out)?;
            }
            Some(kind @ ("image" | "document")) => {
                return Err(visual(&format!("{at}.content[{index}]"), kind))
            }
            _ => write_compact(out, item),
        }
        Ok(())
    }
}

fn visual(at: &str, kind: &str) -> Failure {
    fail(
        UNSUPPORTED_VISUAL_BLOCK,
        format!(
            "{at} is {} block; images and documents are not supported",
            if kind == "image" {
                "an image"
            } else {
                "a document"
            }
        ),
    )
}

fn required_str<'j>(block: &'j Json, key: &str, at: At) -> Result<&'j str, Failure> {
    block
        .str_field(key)
        .ok_or_else(|| fail(INVALID_CONTENT_BLOCK, format!("{at} needs a string {key}")))
}

/// Cuts `out[start..]` to `limit` characters and says how many were removed. A tail of at most
/// `limit` bytes is left alone without looking at it, and a longer one is counted with the
/// standard library's word-at-a-time counter before any character is walked: almost every tool
/// result fits, and walking each one character by character was most of a long conversation's
/// serializing time.
fn truncate_tail(out: &mut String, start: usize, limit: usize) {
    let Some(tail) = out.get(start..) else {
        return;
    };
    if tail.len() <= limit {
        return;
    }
    let total = tail.chars().count();
    if total <= limit {
        return;
    }
    let Some((cut, _)) = tail.char_indices().nth(limit) else {
        return;
    };
    let removed = total - limit;
    out.truncate(start + cut);
    out.push_str("\n[TRUNCATED BY DEVIN BRIDGE: ");
    out.push_str(&removed.to_string());
    out.push_str(" characters removed]");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Toolset;

    fn render(text: &str) -> Result<String, Failure> {
        let request = Json::parse(text).expect("valid test JSON");
        let toolset = Toolset::read(&request)?;
        let mut trace = Trace::after(String::new());
        let before = Before {
            count: 0,
            tool_uses: BTreeSet::new(),
        };
        write(
            of(&request)?,
            before,
            toolset.names(),
            &mut trace,
            ImageLimits::NONE,
        )?;
        Ok(trace.finish().0)
    }

    fn code(text: &str) -> String {
        match render(text) {
            Ok(_) => "ok".to_owned(),
            Err(failure) => failure.code,
        }
    }

    const TOOLS: &str = r#""tools":[{"name":"Read"},{"name":"Bash"}]"#;

    fn with_tools(messages: &str) -> String {
        format!("{{{TOOLS},\"messages\":{messages}}}")
    }

    fn call(id: &str) -> String {
        format!(
            r#"{{"role":"assistant","content":[{{"type":"tool_use","id":"{id}","name":"Read","input":{{"path":"a"}}}}]}}"#
        )
    }

    #[test]
    fn string_and_block_content() {
        let text = render(
            r#"{"messages":[{"role":"user","content":"hi"},
            {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},
            {"type":"redacted_thinking","data":"xx"},{"type":"text","text":"hello","cache_control":{"type":"ephemeral"}}]}]}"#,
        );
        assert_eq!(
            text.as_deref(),
            Ok("[User]\nhi\n\n---\n\n[Assistant]\n[Thinking]\nhmm\n\n[Redacted Thinking]\n\nhello")
        );
    }

    #[test]
    fn tool_use_and_result() {
        let text = render(&with_tools(&format!(
            r#"[{},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","content":"body"}},
            {{"type":"text","text":"go on"}}]}}]"#,
            call("t1")
        )))
        .expect("valid");
        assert_eq!(
            text,
            "[Assistant]\n[Assistant Tool Use]\nid: t1\nname: Read\narguments:\n{\n  \"path\": \"a\"\n}\
             \n\n---\n\n[User]\n[Tool Result]\ntool_use_id: t1\nis_error: false\ncontent:\nbody\n\ngo on"
        );
    }

    #[test]
    fn tool_result_content_shapes() {
        let result = |content: &str| {
            render(&with_tools(&format!(
                r#"[{},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","is_error":true{content}}}]}}]"#,
                call("t1")
            )))
            .map(|text| text.rsplit("is_error: true\n").next().unwrap_or_default().to_owned())
        };
        assert_eq!(result("").as_deref(), Ok("content: (empty)"));
        assert_eq!(
            result(r#","content":"""#).as_deref(),
            Ok("content: (empty)")
        );
        assert_eq!(
            result(r#","content":[]"#).as_deref(),
            Ok("content: (empty)")
        );
        assert_eq!(
            result(r#","content":[{"type":"text","text":"a"},{"type":"search_result","title":"t"},"s",{"type":"text","text":"b"}]"#)
                .as_deref(),
            Ok("content:\na\n{\"type\":\"search_result\",\"title\":\"t\"}\n\"s\"\nb")
        );
        assert_eq!(
            result(r#","content":{"k":[1]}"#).as_deref(),
            Ok("content:\n{\"k\":[1]}")
        );
        assert_eq!(
            result(r#","content":null"#).as_deref(),
            Ok("content: (empty)")
        );
    }

    #[test]
    fn message_errors() {
        assert_eq!(code(r#"{"messages":{}}"#), INVALID_MESSAGES);
        assert_eq!(code(r#"{"messages":["hi"]}"#), INVALID_MESSAGE);
        assert_eq!(code(r#"{"messages":[{"content":"hi"}]}"#), INVALID_MESSAGE);
        assert_eq!(
            code(r#"{"messages":[{"role":1,"content":"hi"}]}"#),
            INVALID_MESSAGE
        );
        assert_eq!(code(r#"{"messages":[{"role":"user"}]}"#), INVALID_MESSAGE);
        assert_eq!(
            code(r#"{"messages":[{"role":"user","content":5}]}"#),
            INVALID_MESSAGE
        );
        assert_eq!(
            code(
                r#"{"messages":[{"role":"system","content":[{"type":"tool_use","id":"t","name":"Read","input":{}}]}]}"#
            ),
            INVALID_CONTENT_BLOCK
        );
        assert_eq!(
            code(r#"{"messages":[{"role":"tool","content":"x"}]}"#),
            UNSUPPORTED_ROLE
        );
    }

    #[test]
    fn block_errors() {
        let user = |block: &str| {
            code(&with_tools(&format!(
                r#"[{{"role":"user","content":[{block}]}}]"#
            )))
        };
        assert_eq!(user(r#""text""#), INVALID_CONTENT_BLOCK);
        assert_eq!(user(r#"{"text":"x"}"#), INVALID_CONTENT_BLOCK);
        assert_eq!(user(r#"{"type":"text"}"#), INVALID_CONTENT_BLOCK);
        assert_eq!(user(r#"{"type":"text","text":1}"#), INVALID_CONTENT_BLOCK);
        assert_eq!(
            user(r#"{"type":"thinking","text":"x"}"#),
            INVALID_CONTENT_BLOCK
        );
        assert_eq!(
            user(r#"{"type":"image","source":{"type":"base64","data":""}}"#),
            UNSUPPORTED_VISUAL_BLOCK
        );
        assert_eq!(
            user(r#"{"type":"document","source":{}}"#),
            UNSUPPORTED_VISUAL_BLOCK
        );
        assert_eq!(
            user(r#"{"type":"server_tool_use","id":"s"}"#),
            UNSUPPORTED_CONTENT_BLOCK
        );
        assert_eq!(
            user(r#"{"type":"tool_result","tool_use_id":"nobody"}"#),
            ORPHAN_TOOL_RESULT
        );
        assert_eq!(user(r#"{"type":"tool_result"}"#), INVALID_CONTENT_BLOCK);
    }

    #[test]
    fn tool_use_errors() {
        let assistant = |block: &str| {
            code(&with_tools(&format!(
                r#"[{{"role":"assistant","content":[{block}]}}]"#
            )))
        };
        assert_eq!(
            assistant(r#"{"type":"tool_use","name":"Read","input":{}}"#),
            MISSING_TOOL_USE_ID
        );
        assert_eq!(
            assistant(r#"{"type":"tool_use","id":"","name":"Read","input":{}}"#),
            MISSING_TOOL_USE_ID
        );
        assert_eq!(
            assistant(r#"{"type":"tool_use","id":7,"name":"Read","input":{}}"#),
            MISSING_TOOL_USE_ID
        );
        assert_eq!(
            assistant(r#"{"type":"tool_use","id":"t","input":{}}"#),
            INVALID_CONTENT_BLOCK
        );
        assert_eq!(
            assistant(r#"{"type":"tool_use","id":"t","name":"Read"}"#),
            INVALID_CONTENT_BLOCK
        );
        assert_eq!(
            assistant(r#"{"type":"tool_use","id":"t","name":"Read","input":[]}"#),
            INVALID_CONTENT_BLOCK
        );
        assert_eq!(
            assistant(r#"{"type":"tool_use","id":"t","name":"Write","input":{}}"#),
            UNDECLARED_TOOL
        );
        assert_eq!(
            code(&with_tools(&format!("[{},{}]", call("t1"), call("t1")))),
            DUPLICATE_TOOL_USE_ID
        );
        assert_eq!(
            code(
                r#"{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{}}]}]}"#
            ),
            UNDECLARED_TOOL,
            "no tools at all"
        );
    }

    #[test]
    fn result_must_follow_its_use() {
        let result = r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}"#;
        assert_eq!(
            code(&with_tools(&format!("[{result},{}]", call("t1")))),
            ORPHAN_TOOL_RESULT
        );
        assert_eq!(
            code(&with_tools(&format!("[{},{result}]", call("t1")))),
            "ok"
        );
    }

    #[test]
    fn visual_blocks_inside_tool_results() {
        for kind in ["image", "document"] {
            let messages = format!(
                r#"[{},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","content":[{{"type":"{kind}","source":{{}}}}]}}]}}]"#,
                call("t1")
            );
            assert_eq!(
                code(&with_tools(&messages)),
                UNSUPPORTED_VISUAL_BLOCK,
                "{kind}"
            );
        }
        let bad_text = format!(
            r#"[{},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","content":[{{"type":"text"}}]}}]}}]"#,
            call("t1")
        );
        assert_eq!(code(&with_tools(&bad_text)), INVALID_CONTENT_BLOCK);
        let bad_flag = format!(
            r#"[{},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","is_error":"yes"}}]}}]"#,
            call("t1")
        );
        assert_eq!(code(&with_tools(&bad_flag)), INVALID_CONTENT_BLOCK);
    }

    #[test]
    fn truncation_counts_chars_and_marks_the_cut() {
        let mut out = String::from("head:\n");
        let body = format!("{}{}", "é".repeat(5), "x".repeat(3));
        out.push_str(&body);
        truncate_tail(&mut out, 6, 5);
        assert_eq!(
            out,
            "head:\nééééé\n[TRUNCATED BY DEVIN BRIDGE: 3 characters removed]"
        );

        let mut exact = String::from("abc");
        truncate_tail(&mut exact, 0, 3);
        assert_eq!(exact, "abc", "at the limit nothing is cut");

        let mut wide = String::from("éééé");
        truncate_tail(&mut wide, 0, 5);
        assert_eq!(
            wide, "éééé",
            "more bytes than the limit but fewer characters"
        );
    }

    #[test]
    fn long_tool_results_are_truncated_to_the_limit() {
        let long = "ü".repeat(TOOL_RESULT_CHAR_LIMIT + 10);
        let request = with_tools(&format!(
            r#"[{},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","content":"{long}"}}]}}]"#,
            call("t1")
        ));
        let text = render(&request).expect("valid");
        let content = text.rsplit("content:\n").next().unwrap_or_default();
        let expected = format!(
            "{}\n[TRUNCATED BY DEVIN BRIDGE: 10 characters removed]",
            "ü".repeat(TOOL_RESULT_CHAR_LIMIT)
        );
        assert_eq!(content, expected);

        let exact = "ü".repeat(TOOL_RESULT_CHAR_LIMIT);
        let request = with_tools(&format!(
            r#"[{},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","content":[{{"type":"text","text":"{exact}"}}]}}]}}]"#,
            call("t1")
        ));
        let text = render(&request).expect("valid");
        assert!(text.ends_with(&exact) && !text.contains("TRUNCATED"));
    }
}
