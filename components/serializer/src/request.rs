//! The request's scalar fields and the `[System]` section.

use devin_bridge_types::Failure;

use crate::failure::{fail, quote, INVALID_STREAM, INVALID_SYSTEM, MISSING_MODEL};
use crate::json::{write_compact, Json};
use crate::trace::Trace;

/// `model`, verbatim. The alias transform validates it; here it only has to be there.
pub(crate) fn model<'a>(request: &'a Json) -> Result<&'a str, Failure> {
    match request.field("model") {
        Some(Json::String(model)) if !model.is_empty() => Ok(model),
        Some(Json::String(_)) => Err(fail(MISSING_MODEL, "model must not be empty")),
        None => Err(fail(MISSING_MODEL, "model is required")),
        Some(other) => Err(fail(
            MISSING_MODEL,
            format!("model must be a string, not {}", other.kind()),
        )),
    }
}

/// `stream`, false when absent.
pub(crate) fn stream(request: &Json) -> Result<bool, Failure> {
    match request.field("stream") {
        None => Ok(false),
        Some(Json::Bool(stream)) => Ok(*stream),
        Some(other) => Err(fail(
            INVALID_STREAM,
            format!("stream must be a boolean, not {}", other.kind()),
        )),
    }
}

/// The `classifier_context` of the request's `dangerous_tool_use` safeguard, as compact JSON
/// text (`null` when the entry has none): what Claude Code's auto mode asks the bridge to
/// judge tool calls against. None when the request asks for no such safeguard, including when
/// `safeguards` is not an array or no entry of it is an object of that type: a safeguard the
/// bridge cannot read is one it does not answer, which makes the client check by itself.
/// The context never goes into the prompt (it is the user's private configuration).
pub(crate) fn classifier_context(request: &Json) -> Option<String> {
    let Some(Json::Array(safeguards)) = request.field("safeguards") else {
        return None;
    };
    let entry = safeguards
        .iter()
        .find(|entry| entry.str_field("type") == Some("dangerous_tool_use"))?;
    let mut text = String::new();
    match entry.field("classifier_context") {
        Some(context) => write_compact(&mut text, context),
        None => text.push_str("null"),
    }
    Some(text)
}

/// Longest effort value taken from a request (characters); Claude Code's are at most 6.
pub(crate) const MAX_EFFORT_CHARS: usize = 16;
/// Thinking budgets below this ask for `low` effort.
const LOW_BUDGET_BELOW: u64 = 4096;
/// Thinking budgets below this (and not below the `low` bound) ask for `medium` effort; larger
/// ones for `high`.
const MEDIUM_BUDGET_BELOW: u64 = 16384;

/// The effort the request asks for, lowercased: `output_config.effort` when it is a string of
/// 1 to [`MAX_EFFORT_CHARS`] ASCII letters, digits, `-` or `_` (Claude Code's `/effort`: `low`,
/// `medium`, `high`, `xhigh`, `max`); else the effort an older client's enabled thinking budget
/// stands for (`thinking: {type: "enabled", budget_tokens: N}` with an integer `N`). Anything
/// else, adaptive or disabled thinking included, asks for none. Never an error, and never part
/// of the prompt: what the agent makes of the effort is the host's business.
pub(crate) fn effort(request: &Json) -> Option<String> {
    let stated = request
        .field("output_config")
        .and_then(|config| config.str_field("effort"))
        .filter(|effort| {
            (1..=MAX_EFFORT_CHARS).contains(&effort.len())
                && effort
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
        });
    if let Some(effort) = stated {
        return Some(effort.to_ascii_lowercase());
    }
    let thinking = request.field("thinking")?;
    if thinking.str_field("type") != Some("enabled") {
        return None;
    }
    let Some(Json::Number(budget)) = thinking.field("budget_tokens") else {
        return None;
    };
    let level = match budget.as_u64()? {
        budget if budget < LOW_BUDGET_BELOW => "low",
        budget if budget < MEDIUM_BUDGET_BELOW => "medium",
        _ => "high",
    };
    Some(level.to_owned())
}

/// The system prompt: a string, or an array of text blocks (their other fields, such as
/// `cache_control`, mean nothing to the agent).
pub(crate) struct System<'a> {
    /// Non-empty texts, joined by a line break when written. Empty blocks are dropped so they
    /// leave no stray blank lines.
    parts: Vec<&'a str>,
}

impl<'a> System<'a> {
    pub(crate) fn read(request: &'a Json) -> Result<Self, Failure> {
        let parts = match request.field("system") {
            None => Vec::new(),
            Some(Json::String(text)) => vec![text.as_ref()],
            Some(Json::Array(blocks)) => blocks
                .iter()
                .enumerate()
                .map(|(i, block)| system_block_text(i, block))
                .collect::<Result<Vec<_>, _>>()?,
            Some(other) => {
                return Err(fail(
                    INVALID_SYSTEM,
                    format!(
                        "system must be a string or an array of text blocks, not {}",
                        other.kind()
                    ),
                ))
            }
        };
        Ok(Self {
            parts: parts.into_iter().filter(|text| !text.is_empty()).collect(),
        })
    }

    /// Writes `[System]` unless there is no system text at all.
    pub(crate) fn write(&self, trace: &mut Trace) {
        let mut parts = self.parts.iter();
        let Some(first) = parts.next() else {
            return;
        };
        let out = trace.section("[System]");
        out.push_str(first);
        for part in parts {
            out.push('\n');
            out.push_str(part);
        }
    }
}

fn system_block_text<'a>(index: usize, block: &'a Json) -> Result<&'a str, Failure> {
    let at = || format!("system[{index}]");
    if !matches!(block, Json::Object(_)) {
        return Err(fail(
            INVALID_SYSTEM,
            format!("{} must be a text block, not {}", at(), block.kind()),
        ));
    }
    match block.str_field("type") {
        Some("text") => {}
        Some(other) => {
            return Err(fail(
                INVALID_SYSTEM,
                format!(
                    "{} has type {}; system blocks must be text",
                    at(),
                    quote(other)
                ),
            ))
        }
        None => {
            return Err(fail(
                INVALID_SYSTEM,
                format!("{} needs a string type", at()),
            ))
        }
    }
    block
        .str_field("text")
        .ok_or_else(|| fail(INVALID_SYSTEM, format!("{} needs a string text", at())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> Json<'_> {
        Json::parse(text).expect("valid test JSON")
    }

    fn code<T>(result: Result<T, Failure>) -> String {
        match result {
            Ok(_) => "ok".to_owned(),
            Err(failure) => failure.code,
        }
    }

    fn system_text(text: &str) -> Result<String, Failure> {
        let request = request(text);
        let system = System::read(&request)?;
        let mut trace = Trace::after(String::new());
        system.write(&mut trace);
        Ok(trace.finish().0)
    }

    #[test]
    fn model_is_a_non_empty_string() {
        assert_eq!(model(&request(r#"{"model":"m"}"#)), Ok("m"));
        for bad in [
            r#"{}"#,
            r#"{"model":null}"#,
            r#"{"model":""}"#,
            r#"{"model":7}"#,
        ] {
            assert_eq!(code(model(&request(bad))), MISSING_MODEL, "{bad}");
        }
    }

    #[test]
    fn stream_defaults_to_false() {
        assert_eq!(stream(&request(r#"{}"#)), Ok(false));
        assert_eq!(stream(&request(r#"{"stream":null}"#)), Ok(false));
        assert_eq!(stream(&request(r#"{"stream":true}"#)), Ok(true));
        assert_eq!(
            code(stream(&request(r#"{"stream":"true"}"#))),
            INVALID_STREAM
        );
    }

    fn effort_of(text: &str) -> Option<String> {
        effort(&request(text))
    }

    #[test]
    fn effort_comes_from_output_config_lowercased() {
        for (text, expected) in [
            (r#"{"output_config":{"effort":"high"}}"#, "high"),
            (r#"{"output_config":{"effort":"XHigh"}}"#, "xhigh"),
            (r#"{"output_config":{"effort":"max"}}"#, "max"),
            // An unknown level is passed on: the host decides what it means.
            (r#"{"output_config":{"effort":"turbo"}}"#, "turbo"),
            // output_config wins over a thinking budget.
            (
                r#"{"output_config":{"effort":"low"},"thinking":{"type":"enabled","budget_tokens":31999}}"#,
                "low",
            ),
            (
                r#"{"output_config":{"effort":"medium"},"thinking":{"type":"adaptive","display":"omitted"}}"#,
                "medium",
            ),
        ] {
            assert_eq!(effort_of(text).as_deref(), Some(expected), "{text}");
        }
    }

    #[test]
    fn effort_comes_from_an_enabled_thinking_budget() {
        let budget = |n: &str| {
            effort_of(&format!(
                r#"{{"thinking":{{"type":"enabled","budget_tokens":{n}}}}}"#
            ))
        };
        assert_eq!(budget("0").as_deref(), Some("low"));
        assert_eq!(budget("1024").as_deref(), Some("low"));
        assert_eq!(budget("4095").as_deref(), Some("low"));
        assert_eq!(budget("4096").as_deref(), Some("medium"));
        assert_eq!(budget("16383").as_deref(), Some("medium"));
        assert_eq!(budget("16384").as_deref(), Some("high"));
        assert_eq!(budget("31999").as_deref(), Some("high"));
        // Not an integer budget: none.
        for bad in ["31999.5", "-1", "\"31999\"", "null"] {
            assert_eq!(budget(bad), None, "{bad}");
        }
    }

    #[test]
    fn no_effort_without_a_usable_effort_or_budget() {
        for text in [
            r#"{}"#,
            r#"{"thinking":{"type":"adaptive","display":"omitted"}}"#,
            r#"{"thinking":{"type":"adaptive","display":"updates"}}"#,
            r#"{"thinking":{"type":"disabled"}}"#,
            r#"{"thinking":{"type":"disabled","budget_tokens":2048}}"#,
            r#"{"thinking":{"budget_tokens":2048}}"#,
            r#"{"thinking":"enabled"}"#,
            r#"{"output_config":{}}"#,
            r#"{"output_config":null}"#,
            r#"{"output_config":"high"}"#,
            r#"{"output_config":{"effort":null}}"#,
            r#"{"output_config":{"effort":7}}"#,
            r#"{"output_config":{"effort":["high"]}}"#,
            r#"{"output_config":{"effort":""}}"#,
            r#"{"output_config":{"effort":"very very high"}}"#,
            r#"{"output_config":{"effort":"h\u0000igh"}}"#,
            r#"{"output_config":{"effort":"höch"}}"#,
            r#"{"output_config":{"effort":"aaaaaaaaaaaaaaaaa"}}"#,
        ] {
            assert_eq!(effort_of(text), None, "{text}");
        }
        // A bogus effort falls back to the thinking budget.
        assert_eq!(
            effort_of(r#"{"output_config":{"effort":7},"thinking":{"type":"enabled","budget_tokens":8000}}"#)
                .as_deref(),
            Some("medium")
        );
        assert_eq!(
            effort_of(&format!(
                r#"{{"output_config":{{"effort":"{}"}}}}"#,
                "a".repeat(MAX_EFFORT_CHARS)
            ))
            .map(|e| e.len()),
            Some(MAX_EFFORT_CHARS)
        );
    }

    #[test]
    fn system_string_and_blocks() {
        assert_eq!(
            system_text(r#"{"system":"Be brief."}"#).as_deref(),
            Ok("[System]\nBe brief.")
        );
        assert_eq!(
            system_text(
                r#"{"system":[{"type":"text","text":"a"},{"type":"text","text":""},
                {"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]}"#
            )
            .as_deref(),
            Ok("[System]\na\nb")
        );
        for empty in [
            r#"{}"#,
            r#"{"system":""}"#,
            r#"{"system":[]}"#,
            r#"{"system":null}"#,
        ] {
            assert_eq!(system_text(empty).as_deref(), Ok(""), "{empty}");
        }
    }

    #[test]
    fn system_errors() {
        for bad in [
            r#"{"system":3}"#,
            r#"{"system":{"type":"text","text":"a"}}"#,
            r#"{"system":["a"]}"#,
            r#"{"system":[{"type":"image","source":{}}]}"#,
            r#"{"system":[{"text":"a"}]}"#,
            r#"{"system":[{"type":"text"}]}"#,
            r#"{"system":[{"type":"text","text":1}]}"#,
        ] {
            assert_eq!(code(system_text(bad)), INVALID_SYSTEM, "{bad}");
        }
    }
}
