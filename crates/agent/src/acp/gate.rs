//! Which tools an agent may run: every `tool_call` (and every `tool_call_update` that names a
//! tool call not allowed yet) is shown to the mode's gate while a prompt runs; a refusal kills
//! the agent's process group at once.

use agent_client_protocol_schema::v1;
use serde_json::Value;

use super::AcpError;

pub use crate::devin::tools::{INFERENCE_TOOL_NAME_META, TOOL_NAME_META};

/// Longest id, name or title kept (in characters); longer ones are cut and marked with `…`, so
/// a cut name can never equal an allowed one.
const MAX_FIELD_CHARS: usize = 256;

/// A mode's decision on the tools its agent may run.
pub trait ToolGate: Send + Sync {
    /// true = the agent may run this tool; false = the host kills the process group at once and
    /// the prompt fails with [`ToolGate::refusal`].
    fn allows(&self, call: &ToolCallSeen) -> bool;

    /// The error a refused call ends the prompt with.
    fn refusal(&self, call: &ToolCallSeen) -> AcpError {
        AcpError::ToolRefused { tool: call.label() }
    }
}

/// The summarizer's gate: refuses every tool, with the summarizer's own error code
/// (`unauthorized_tool_execution`).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTools;

impl ToolGate for NoTools {
    fn allows(&self, _call: &ToolCallSeen) -> bool {
        false
    }

    fn refusal(&self, _call: &ToolCallSeen) -> AcpError {
        AcpError::UnauthorizedTool
    }
}

/// Any `Fn(&ToolCallSeen) -> bool` is a gate (refusals are `ToolRefused`).
impl<F> ToolGate for F
where
    F: Fn(&ToolCallSeen) -> bool + Send + Sync,
{
    fn allows(&self, call: &ToolCallSeen) -> bool {
        self(call)
    }
}

/// A tool call as the gate sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallSeen {
    pub id: String,
    /// The tool's own name when the agent gives one in `_meta`
    /// (`cognition.ai/inferenceToolName`, else `cognition.ai/toolName`: see
    /// [`crate::devin::tools`]).
    pub name: Option<String>,
    pub kind: Option<v1::ToolKind>,
    pub title: String,
}

impl ToolCallSeen {
    /// The name if given, else mapped from the kind (read->read, search->grep, edit->edit,
    /// execute->exec), else None (unidentifiable).
    pub fn tool_name(&self) -> Option<String> {
        if let Some(name) = &self.name {
            return Some(name.clone());
        }
        let mapped = match self.kind? {
            v1::ToolKind::Read => "read",
            v1::ToolKind::Search => "grep",
            v1::ToolKind::Edit => "edit",
            v1::ToolKind::Execute => "exec",
            _ => return None,
        };
        Some(mapped.to_owned())
    }

    /// For messages and logs: the tool's name, else its ACP kind (`delete`, `fetch`, ...), else
    /// `unidentified`.
    pub fn label(&self) -> String {
        self.tool_name()
            .or_else(|| {
                self.kind.and_then(|kind| match serde_json::to_value(kind) {
                    Ok(Value::String(kind)) => Some(kind),
                    _ => None,
                })
            })
            .unwrap_or_else(|| "unidentified".to_owned())
    }

    pub(crate) fn from_call(call: &v1::ToolCall, kind_given: bool) -> Self {
        Self {
            id: bounded(&call.tool_call_id.0),
            name: meta_name(call.meta.as_ref()),
            kind: kind_given.then_some(call.kind),
            title: bounded(&call.title),
        }
    }

    pub(crate) fn from_update(update: &v1::ToolCallUpdate) -> Self {
        Self {
            id: bounded(&update.tool_call_id.0),
            name: meta_name(update.meta.as_ref()),
            kind: update.fields.kind,
            title: update
                .fields
                .title
                .as_deref()
                .map(bounded)
                .unwrap_or_default(),
        }
    }

    /// A tool call the schema types could not read: whatever can be made of it (fail closed:
    /// the gate decides on what is left, and an unidentifiable call is refused by every list).
    pub(crate) fn from_raw(update: Option<&Value>) -> Self {
        let text = |key: &str| {
            update
                .and_then(|u| u.get(key))
                .and_then(Value::as_str)
                .map(bounded)
        };
        Self {
            id: text("toolCallId").unwrap_or_default(),
            name: update
                .and_then(|u| u.get("_meta"))
                .and_then(Value::as_object)
                .and_then(name_in),
            kind: update
                .and_then(|u| u.get("kind"))
                .and_then(|kind| serde_json::from_value(kind.clone()).ok()),
            title: text("title").unwrap_or_default(),
        }
    }

    /// Takes what `later` says about the same call; true when the tool's identity changed
    /// (then it must be shown to the gate again).
    pub(crate) fn merge(&mut self, later: ToolCallSeen) -> bool {
        let before = self.tool_name();
        if later.name.is_some() {
            self.name = later.name;
        }
        if later.kind.is_some() {
            self.kind = later.kind;
        }
        if !later.title.is_empty() {
            self.title = later.title;
        }
        self.tool_name() != before
    }
}

fn meta_name(meta: Option<&v1::Meta>) -> Option<String> {
    meta.and_then(name_in)
}

fn name_in(meta: &serde_json::Map<String, Value>) -> Option<String> {
    crate::devin::tools::name_in(meta).map(bounded)
}

/// At most `MAX_FIELD_CHARS` characters; a cut value ends in `…`.
fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_FIELD_CHARS) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seen(name: Option<&str>, kind: Option<v1::ToolKind>) -> ToolCallSeen {
        ToolCallSeen {
            id: "c".into(),
            name: name.map(str::to_owned),
            kind,
            title: String::new(),
        }
    }

    #[test]
    fn tool_names_come_from_meta_then_from_the_kind() {
        use v1::ToolKind::*;
        assert_eq!(
            seen(Some("find_file_by_name"), Some(Execute)).tool_name(),
            Some("find_file_by_name".into())
        );
        for (kind, name) in [
            (Read, "read"),
            (Search, "grep"),
            (Edit, "edit"),
            (Execute, "exec"),
        ] {
            assert_eq!(seen(None, Some(kind)).tool_name().as_deref(), Some(name));
        }
        for kind in [Delete, Move, Think, Fetch, SwitchMode, Other] {
            assert_eq!(seen(None, Some(kind)).tool_name(), None, "{kind:?}");
        }
        assert_eq!(seen(None, None).tool_name(), None);
    }

    #[test]
    fn labels_name_the_kind_when_there_is_no_tool_name() {
        assert_eq!(seen(None, Some(v1::ToolKind::Delete)).label(), "delete");
        assert_eq!(
            seen(None, Some(v1::ToolKind::SwitchMode)).label(),
            "switch_mode"
        );
        assert_eq!(seen(None, None).label(), "unidentified");
        assert_eq!(seen(Some("write"), None).label(), "write");
    }

    #[test]
    fn typed_tool_calls_are_read_with_their_meta_name() {
        let call: v1::ToolCall = serde_json::from_value(json!({
            "toolCallId": "call_1", "title": "Read file", "kind": "read",
            "_meta": {"cognition.ai/toolName": "notebook_read"}
        }))
        .unwrap();
        let seen = ToolCallSeen::from_call(&call, true);
        assert_eq!(seen.id, "call_1");
        assert_eq!(seen.name.as_deref(), Some("notebook_read"));
        assert_eq!(seen.kind, Some(v1::ToolKind::Read));
        assert_eq!(seen.title, "Read file");
        // No kind on the wire: none seen (not the schema's default `other`).
        let bare: v1::ToolCall =
            serde_json::from_value(json!({"toolCallId": "c", "title": "t"})).unwrap();
        assert_eq!(ToolCallSeen::from_call(&bare, false).kind, None);
    }

    #[test]
    fn native_tools_are_named_by_their_inference_name_first() {
        let call: v1::ToolCall = serde_json::from_value(json!({
            "toolCallId": "call_2", "title": "ls -la", "kind": "execute",
            "_meta": {"cognition.ai/inferenceToolName": "exec"}
        }))
        .unwrap();
        assert_eq!(
            ToolCallSeen::from_call(&call, true).tool_name().as_deref(),
            Some("exec")
        );
        // A native name the gate does not know is kept, never mapped to a read.
        let call: v1::ToolCall = serde_json::from_value(json!({
            "toolCallId": "call_3", "title": "Delegate", "kind": "read",
            "_meta": {"cognition.ai/inferenceToolName": "run_subagent"}
        }))
        .unwrap();
        assert_eq!(
            ToolCallSeen::from_call(&call, true).tool_name().as_deref(),
            Some("run_subagent")
        );
        let raw = json!({"sessionUpdate": "tool_call", "toolCallId": "c",
                         "_meta": {"cognition.ai/inferenceToolName": "write", "cognition.ai/toolName": "x"}});
        assert_eq!(
            ToolCallSeen::from_raw(Some(&raw)).name.as_deref(),
            Some("write")
        );
    }

    #[test]
    fn unreadable_tool_calls_keep_what_they_can() {
        let raw = json!({"sessionUpdate": "tool_call", "toolCallId": 7, "kind": "execute",
                         "_meta": {"cognition.ai/toolName": ""}});
        let seen = ToolCallSeen::from_raw(Some(&raw));
        assert_eq!(seen.id, "");
        assert_eq!(seen.name, None, "an empty name is no name");
        assert_eq!(seen.tool_name().as_deref(), Some("exec"));
        assert_eq!(ToolCallSeen::from_raw(None).tool_name(), None);
    }

    #[test]
    fn long_names_are_cut_so_they_match_nothing() {
        let long = "read".repeat(100);
        let raw = json!({"toolCallId": "c", "_meta": {"cognition.ai/toolName": long}});
        let name = ToolCallSeen::from_raw(Some(&raw)).name.unwrap();
        assert_eq!(name.chars().count(), MAX_FIELD_CHARS + 1);
        assert!(name.ends_with('…'));
    }

    #[test]
    fn merging_reports_a_change_of_identity_only() {
        let mut known = seen(Some("read"), Some(v1::ToolKind::Read));
        assert!(!known.merge(ToolCallSeen {
            title: "done".into(),
            ..seen(None, None)
        }));
        assert_eq!(known.title, "done");
        assert!(known.merge(seen(Some("exec"), None)));
        assert_eq!(known.tool_name().as_deref(), Some("exec"));
    }

    #[test]
    fn no_tools_refuses_everything_with_the_summarizer_code() {
        let call = seen(Some("read"), Some(v1::ToolKind::Read));
        assert!(!NoTools.allows(&call));
        assert_eq!(NoTools.refusal(&call).code(), "unauthorized_tool_execution");
        let reads_only = |call: &ToolCallSeen| call.tool_name().as_deref() == Some("read");
        assert!(reads_only.allows(&call));
        let exec = seen(None, Some(v1::ToolKind::Execute));
        assert!(!reads_only.allows(&exec));
        match reads_only.refusal(&exec) {
            AcpError::ToolRefused { tool } => assert_eq!(tool, "exec"),
            other => panic!("{other:?}"),
        }
    }
}
