//! The name of a tool the Devin CLI runs, from a tool call's `_meta`.
//!
//! Native tools are named in `_meta["cognition.ai/inferenceToolName"]` (`exec`, `read`, `edit`,
//! `write`, `run_subagent`, ...); `_meta["cognition.ai/toolName"]` appears mainly on MCP tools
//! (`mcp__server__tool`). The inference name is read first, then the tool name; a call with
//! neither is named by its ACP kind, which the gate maps ([`crate::acp::ToolCallSeen`]). A name
//! is kept as it is: an unknown one is never taken for a read.

use serde_json::{Map, Value};

/// The `_meta` key that names a native tool.
pub const INFERENCE_TOOL_NAME_META: &str = "cognition.ai/inferenceToolName";
/// The `_meta` key that names a tool (mostly MCP tools).
pub const TOOL_NAME_META: &str = "cognition.ai/toolName";

/// The tool's name in a tool call's `_meta`: the inference name, else the tool name; an empty
/// one is no name.
pub fn name_in(meta: &Map<String, Value>) -> Option<&str> {
    [INFERENCE_TOOL_NAME_META, TOOL_NAME_META]
        .iter()
        .filter_map(|key| meta.get(*key).and_then(Value::as_str))
        .find(|name| !name.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn the_inference_name_comes_first_then_the_tool_name() {
        assert_eq!(
            name_in(&meta(json!({"cognition.ai/inferenceToolName": "exec",
                                  "cognition.ai/toolName": "run_command"}))),
            Some("exec")
        );
        assert_eq!(
            name_in(&meta(
                json!({"cognition.ai/toolName": "mcp__github__list_issues"})
            )),
            Some("mcp__github__list_issues")
        );
        assert_eq!(
            name_in(&meta(json!({"cognition.ai/inferenceToolName": "",
                                  "cognition.ai/toolName": "read"}))),
            Some("read")
        );
        assert_eq!(
            name_in(&meta(json!({"cognition.ai/inferenceToolName": 3}))),
            None
        );
        assert_eq!(name_in(&meta(json!({}))), None);
    }
}
