//! `tools` and `tool_choice`: validation, the `[Available Tools]` and `[Tool Choice]`
//! sections, and the compact tool list (toolset) the envelope parser receives.

use std::collections::BTreeSet;

use devin_bridge_types::Failure;

use crate::failure::{
    fail, quote, DUPLICATE_TOOL_NAME, INVALID_TOOL, INVALID_TOOLS, INVALID_TOOL_CHOICE,
    UNKNOWN_TOOL_CHOICE,
};
use crate::framing::TOOL_CATALOG_INSTRUCTIONS;
use crate::json::{write_compact, write_pretty, Json};
use crate::trace::Trace;

/// The request's tools, validated, in request order.
pub(crate) struct Toolset<'a> {
    /// The `tools` array exactly as given, for the envelope parser (it validates arguments
    /// against the schemas, so it gets every field, not our reading of them).
    value: Option<&'a Json<'a>>,
    tools: Vec<Tool<'a>>,
    names: BTreeSet<&'a str>,
}

struct Tool<'a> {
    name: &'a str,
    description: Option<&'a str>,
    input_schema: Option<&'a Json<'a>>,
}

impl<'a> Toolset<'a> {
    pub(crate) fn read(request: &'a Json) -> Result<Self, Failure> {
        let value = request.field("tools");
        let items = match value {
            None => &[][..],
            Some(Json::Array(items)) => items.as_slice(),
            Some(other) => {
                return Err(fail(
                    INVALID_TOOLS,
                    format!("tools must be an array, not {}", other.kind()),
                ))
            }
        };
        let mut tools = Vec::with_capacity(items.len());
        let mut names = BTreeSet::new();
        for (index, item) in items.iter().enumerate() {
            let tool = Tool::read(index, item)?;
            if !names.insert(tool.name) {
                return Err(fail(
                    DUPLICATE_TOOL_NAME,
                    format!("tools[{index}] repeats the tool name {}", quote(tool.name)),
                ));
            }
            tools.push(tool);
        }
        Ok(Self {
            value,
            tools,
            names,
        })
    }

    /// The declared tool names, in request order.
    pub(crate) fn names_in_order(&self) -> Vec<String> {
        self.tools.iter().map(|tool| tool.name.to_owned()).collect()
    }

    /// The declared tool names.
    pub(crate) fn names(&self) -> &BTreeSet<&'a str> {
        &self.names
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The `tools` array as compact JSON, `[]` when the request has none.
    pub(crate) fn to_json(&self) -> String {
        match self.value {
            Some(value) => {
                let mut out = String::new();
                write_compact(&mut out, value);
                out
            }
            None => "[]".to_owned(),
        }
    }

    /// Writes `[Available Tools]`: the envelope contract, then each tool. Nothing when the
    /// request declares no tools.
    pub(crate) fn write(&self, trace: &mut Trace) {
        if self.tools.is_empty() {
            return;
        }
        let out = trace.section("[Available Tools]");
        out.push_str(TOOL_CATALOG_INSTRUCTIONS);
        for tool in &self.tools {
            out.push_str("\n\n[Tool: ");
            out.push_str(tool.name);
            out.push(']');
            if let Some(description) = tool.description {
                out.push_str("\nDescription:\n");
                out.push_str(description);
            }
            if let Some(schema) = tool.input_schema {
                out.push_str("\nInput schema:\n");
                write_pretty(out, schema, 0);
            }
        }
    }
}

impl<'a> Tool<'a> {
    fn read(index: usize, item: &'a Json) -> Result<Self, Failure> {
        let at = || format!("tools[{index}]");
        if !matches!(item, Json::Object(_)) {
            return Err(fail(
                INVALID_TOOL,
                format!("{} must be an object, not {}", at(), item.kind()),
            ));
        }
        let name = match item.str_field("name") {
            Some(name) if !name.is_empty() => name,
            _ => {
                return Err(fail(
                    INVALID_TOOL,
                    format!("{} needs a non-empty string name", at()),
                ))
            }
        };
        let description = match item.field("description") {
            None => None,
            Some(Json::String(text)) => Some(text.as_ref()),
            Some(other) => {
                return Err(fail(
                    INVALID_TOOL,
                    format!(
                        "{} ({}) has a description that is {}, not a string",
                        at(),
                        quote(name),
                        other.kind()
                    ),
                ))
            }
        };
        let input_schema = match item.field("input_schema") {
            None => None,
            Some(schema @ Json::Object(_)) => Some(schema),
            Some(other) => {
                return Err(fail(
                    INVALID_TOOL,
                    format!(
                        "{} ({}) has an input_schema that is {}, not an object",
                        at(),
                        quote(name),
                        other.kind()
                    ),
                ))
            }
        };
        Ok(Self {
            name,
            description,
            input_schema,
        })
    }
}

/// `tool_choice`, rendered as text only: the envelope parser still accepts a text answer, so
/// the choice is guidance for the agent, not a constraint enforced here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice<'a> {
    Auto,
    Any,
    None,
    Tool(&'a str),
}

/// A request's `tool_choice`: which kind, and whether it disables parallel tool use (at most
/// one tool call per reply; the host enforces it with the envelope parser's call limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ToolChoice<'a> {
    pub(crate) kind: Choice<'a>,
    pub(crate) single_call: bool,
}

impl<'a> ToolChoice<'a> {
    pub(crate) fn read(request: &'a Json, toolset: &Toolset<'_>) -> Result<Option<Self>, Failure> {
        let Some(value) = request.field("tool_choice") else {
            return Ok(None);
        };
        if !matches!(value, Json::Object(_)) {
            return Err(fail(
                INVALID_TOOL_CHOICE,
                format!("tool_choice must be an object, not {}", value.kind()),
            ));
        }
        let choice = match value.str_field("type") {
            Some("auto") => Choice::Auto,
            Some("none") => Choice::None,
            Some("any") if toolset.is_empty() => {
                return Err(fail(
                    INVALID_TOOL_CHOICE,
                    "tool_choice any requires at least one tool",
                ))
            }
            Some("any") => Choice::Any,
            Some("tool") => match value.str_field("name") {
                Some(name) if toolset.names().contains(name) => Choice::Tool(name),
                Some(name) => {
                    return Err(fail(
                        UNKNOWN_TOOL_CHOICE,
                        format!(
                            "tool_choice names {}, which tools does not declare",
                            quote(name)
                        ),
                    ))
                }
                None => {
                    return Err(fail(
                        INVALID_TOOL_CHOICE,
                        "tool_choice of type tool needs a string name",
                    ))
                }
            },
            Some(other) => {
                return Err(fail(
                    INVALID_TOOL_CHOICE,
                    format!(
                        "tool_choice type {} is not one of auto, any, none, tool",
                        quote(other)
                    ),
                ))
            }
            None => return Err(fail(INVALID_TOOL_CHOICE, "tool_choice needs a string type")),
        };
        let single_call = match value.field("disable_parallel_tool_use") {
            None | Some(Json::Null) | Some(Json::Bool(false)) => false,
            Some(Json::Bool(true)) => true,
            Some(other) => {
                return Err(fail(
                    INVALID_TOOL_CHOICE,
                    format!(
                        "tool_choice disable_parallel_tool_use must be a boolean, not {}",
                        other.kind()
                    ),
                ))
            }
        };
        Ok(Some(ToolChoice {
            kind: choice,
            single_call,
        }))
    }

    pub(crate) fn write(self, trace: &mut Trace) {
        let out = trace.section("[Tool Choice]");
        match (self.kind, self.single_call) {
            (Choice::Auto, false) => out.push_str(
                "auto: answer with text, or request tools when the next step needs client actions.",
            ),
            (Choice::Auto, true) => out.push_str(
                "auto: answer with text, or request one tool when the next step needs a client action.",
            ),
            (Choice::Any, false) => out.push_str(
                "any: a tool call is required. Return one or more tool envelopes for the available tools.",
            ),
            (Choice::Any, true) => out.push_str(
                "any: a tool call is required. Return exactly one tool envelope for one of the available tools.",
            ),
            (Choice::None, _) => {
                out.push_str("none: do not call a tool. Answer with text only.");
            }
            (Choice::Tool(name), _) => {
                out.push_str("tool: call exactly this tool: ");
                out.push_str(name);
                out.push_str(". Return exactly one tool envelope that calls it.");
            }
        }
        if self.single_call && self.kind != Choice::None {
            out.push_str(
                "\nParallel tool use is disabled: request at most one tool per output, never two envelopes.",
            );
        }
    }
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

    fn rendered(text: &str) -> Result<String, Failure> {
        let request = request(text);
        let toolset = Toolset::read(&request)?;
        let choice = ToolChoice::read(&request, &toolset)?;
        let mut trace = Trace::after(String::new());
        toolset.write(&mut trace);
        if let Some(choice) = choice {
            choice.write(&mut trace);
        }
        Ok(trace.finish().0)
    }

    #[test]
    fn toolset_lists_each_tool_with_its_schema() {
        let text = rendered(
            r#"{"tools":[{"name":"Read","description":"Reads a file.","input_schema":
            {"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},
            {"name":"Ping"}]}"#,
        )
        .expect("valid");
        let expected_tail = "\n\n[Tool: Read]\nDescription:\nReads a file.\nInput schema:\n{\n  \
            \"type\": \"object\",\n  \"properties\": {\n    \"path\": {\n      \"type\": \
            \"string\"\n    }\n  },\n  \"required\": [\n    \"path\"\n  ]\n}\n\n[Tool: Ping]";
        assert!(text.starts_with("[Available Tools]\nThe client declares"));
        assert!(text.ends_with(expected_tail), "{text}");
    }

    #[test]
    fn toolset_json_is_compact_and_as_given() {
        let request =
            request(r#"{"tools":[ {"name":"B","x":[1, 2],"input_schema":{"z":1,"a":2}} ]}"#);
        let toolset = Toolset::read(&request).expect("valid");
        assert_eq!(
            toolset.to_json(),
            r#"[{"name":"B","x":[1,2],"input_schema":{"z":1,"a":2}}]"#
        );
        let none = Json::parse("{}").expect("valid");
        assert_eq!(Toolset::read(&none).expect("valid").to_json(), "[]");
        let empty = Json::parse(r#"{"tools":[]}"#).expect("valid");
        let toolset = Toolset::read(&empty).expect("valid");
        assert_eq!(toolset.to_json(), "[]");
        assert!(toolset.is_empty());
        assert_eq!(rendered(r#"{"tools":[]}"#).as_deref(), Ok(""));
    }

    #[test]
    fn tool_errors() {
        assert_eq!(code(rendered(r#"{"tools":{}}"#)), INVALID_TOOLS);
        assert_eq!(code(rendered(r#"{"tools":"Read"}"#)), INVALID_TOOLS);
        for bad in [
            r#"{"tools":["Read"]}"#,
            r#"{"tools":[{}]}"#,
            r#"{"tools":[{"name":""}]}"#,
            r#"{"tools":[{"name":3}]}"#,
            r#"{"tools":[{"name":"A","description":["x"]}]}"#,
            r#"{"tools":[{"name":"A","input_schema":"object"}]}"#,
        ] {
            assert_eq!(code(rendered(bad)), INVALID_TOOL, "{bad}");
        }
        assert_eq!(
            code(rendered(
                r#"{"tools":[{"name":"A"},{"name":"B"},{"name":"A"}]}"#
            )),
            DUPLICATE_TOOL_NAME
        );
    }

    #[test]
    fn tool_choice_variants() {
        let tools = r#""tools":[{"name":"Read"}]"#;
        let choice = |c: &str| rendered(&format!("{{{tools},\"tool_choice\":{c}}}"));
        let tail = |c: &str| {
            choice(c).map(|text| {
                text.rsplit("[Tool Choice]\n")
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            })
        };
        assert!(tail(r#"{"type":"auto"}"#)
            .expect("ok")
            .starts_with("auto: "));
        assert!(tail(r#"{"type":"any","disable_parallel_tool_use":true}"#)
            .expect("ok")
            .starts_with("any: a tool call is required."));
        assert!(tail(r#"{"type":"none"}"#)
            .expect("ok")
            .starts_with("none: do not call a tool."));
        assert_eq!(
            tail(r#"{"type":"tool","name":"Read"}"#).as_deref(),
            Ok("tool: call exactly this tool: Read. Return exactly one tool envelope that calls it.")
        );
        assert_eq!(
            code(choice(r#"{"type":"tool","name":"Write"}"#)),
            UNKNOWN_TOOL_CHOICE
        );
        for bad in [
            r#""auto""#,
            r#"{}"#,
            r#"{"type":"sometimes"}"#,
            r#"{"type":"tool"}"#,
            r#"{"type":"tool","name":1}"#,
        ] {
            assert_eq!(code(choice(bad)), INVALID_TOOL_CHOICE, "{bad}");
        }
        assert_eq!(
            code(rendered(r#"{"tool_choice":{"type":"any"}}"#)),
            INVALID_TOOL_CHOICE
        );
        assert_eq!(
            code(rendered(r#"{"tool_choice":{"type":"tool","name":"Read"}}"#)),
            UNKNOWN_TOOL_CHOICE
        );
        assert_eq!(rendered(r#"{"tool_choice":null}"#).as_deref(), Ok(""));
        assert!(rendered(r#"{"tool_choice":{"type":"none"}}"#)
            .expect("ok")
            .starts_with("[Tool Choice]\nnone"));
    }
}
