//! Which facts of the Devin CLI's dialect a recorded exchange showed: what `doctor` reports so
//! that a bug report says which variant a real account gets (the agent's self-introduction,
//! the session's options, which logged-out failure, where the model label was found, how turns
//! ended, error kinds, display-only chunks and compaction notices, vendor notifications).
//!
//! It reads a trace's entries ([`crate::transcript::Entry`]), redacted or not: every fact it
//! reports survives redaction (method names, codes, kinds, causes, stop reasons, option ids,
//! model labels, flags, error messages' first words).

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;
use serde_json::Value;

use super::stats::{AGENT_STOPPED, TURN_STATS};
use crate::transcript::{Direction, Entry};

/// `_meta` flag of an agent message chunk that is shown to a person, not part of the reply.
const DISPLAY_ONLY: &str = "cognition.ai/displayMessage";
/// The notification of a context compaction.
const COMPACTION: &str = "_cognition.ai/compaction";
/// The error data field that may carry the retry delay.
const RETRY_AFTER: &str = "cognition.ai/retryAfterSeconds";
/// The error data field of the error kind.
const ERROR_KIND: &str = "cognition.ai/errorKind";
/// Longest text kept of one fact (characters).
const MAX_FACT_CHARS: usize = 120;

/// How a logged-out CLI showed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoggedOut {
    /// `session/new` answered `-32000` ("ACP host has not authenticated"; older CLIs).
    AtSessionNew,
    /// `session/new` succeeded and `session/prompt` answered "Authentication failed"
    /// (`-32603`; newer CLIs).
    AtPrompt,
}

impl LoggedOut {
    pub fn describe(self) -> &'static str {
        match self {
            LoggedOut::AtSessionNew => "session/new refused with -32000 (the older CLIs' way)",
            LoggedOut::AtPrompt => {
                "session/new accepted, the prompt refused with \"Authentication failed\" (the newer CLIs' way)"
            }
        }
    }
}

/// What one exchange showed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Observed {
    /// `agentInfo` `name version` of the `initialize` answer (not the CLI's version).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_info: Option<String>,
    /// The ids of the advertised auth methods.
    pub auth_methods: Vec<String>,
    /// The ids of the first session's config options (`mode`, `model`, ...).
    pub session_options: Vec<String>,
    /// How a logged-out CLI failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logged_out: Option<LoggedOut>,
    /// Whether an `authenticate` was sent.
    pub authenticated: bool,
    /// The model label the agent reported last, and where it was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_label_from: Option<&'static str>,
    /// `stopReason`s of prompt answers, in order.
    pub stop_reasons: Vec<String>,
    /// `agent_stopped` causes, in order.
    pub stopped_causes: Vec<String>,
    /// JSON-RPC errors the agent answered: `<method> <code> <kind or ->`.
    pub errors: Vec<String>,
    /// Whether an error carried a retry delay.
    pub retry_after: bool,
    /// Whether the client identity was refused.
    pub identity_refused: bool,
    /// Where an unknown-model error put its "Model not found" text (`message` or `data`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_model_in: Option<&'static str>,
    /// Agent message chunks marked display-only.
    pub display_only_chunks: u32,
    /// Compaction notifications.
    pub compactions: u32,
    /// Vendor notification methods seen (`_cognition.ai/...`), sorted.
    pub vendor_notifications: BTreeSet<String>,
}

impl Observed {
    /// Reads the facts of `entries`.
    pub fn of(entries: &[Entry]) -> Self {
        let mut facts = Observed::default();
        // Request ids of the client, and their methods, to know what an answer answers.
        let mut asked: HashMap<String, String> = HashMap::new();
        for entry in entries {
            let msg = &entry.msg;
            let method = msg.get("method").and_then(Value::as_str);
            let id = msg.get("id").map(Value::to_string);
            match (entry.dir, method, id) {
                (Direction::ToAgent, Some(method), Some(id)) => {
                    facts.authenticated |= method == "authenticate";
                    asked.insert(id, method.to_owned());
                }
                (Direction::FromAgent, None, Some(id)) => {
                    let method = asked.get(&id).map_or("?", String::as_str);
                    facts.answer(method, msg);
                }
                (Direction::FromAgent, Some(method), None) => {
                    facts.notification(method, msg.get("params").unwrap_or(&Value::Null));
                }
                _ => {}
            }
        }
        facts
    }

    fn answer(&mut self, method: &str, msg: &Value) {
        if let Some(error) = msg.get("error") {
            self.error(method, error);
            return;
        }
        let Some(result) = msg.get("result") else {
            return;
        };
        match method {
            "initialize" => {
                if let Some(name) = result.pointer("/agentInfo/name").and_then(Value::as_str) {
                    let version = result
                        .pointer("/agentInfo/version")
                        .and_then(Value::as_str)
                        .unwrap_or("?");
                    self.agent_info = Some(bounded(&format!("{name} {version}")));
                }
                self.auth_methods = ids(result.get("authMethods"));
            }
            "session/new" if self.session_options.is_empty() => {
                self.session_options = ids(result.get("configOptions"));
            }
            "session/prompt" => {
                if let Some(reason) = result.get("stopReason").and_then(Value::as_str) {
                    self.stop_reasons.push(bounded(reason));
                }
            }
            _ => {}
        }
    }

    fn error(&mut self, method: &str, error: &Value) {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = error.get("message").and_then(Value::as_str).unwrap_or("");
        let kind = error
            .pointer(&format!("/data/{}", ERROR_KIND.replace('/', "~1")))
            .and_then(Value::as_str)
            .unwrap_or("-");
        self.errors
            .push(bounded(&format!("{method} {code} {kind}")));
        self.retry_after |= error
            .get("data")
            .and_then(|data| data.get(RETRY_AFTER))
            .is_some();
        match super::errors::classify(error) {
            crate::error::AcpError::ClientIdentityRefused => self.identity_refused = true,
            crate::error::AcpError::Unauthenticated if method == "session/new" => {
                self.logged_out = Some(LoggedOut::AtSessionNew);
            }
            _ => {}
        }
        if method == "session/prompt" && message.starts_with("Authentication failed") {
            self.logged_out = Some(LoggedOut::AtPrompt);
        }
        let data = error.get("data").map(Value::to_string).unwrap_or_default();
        if message.contains("Model not found") {
            self.unknown_model_in = Some("message");
        } else if data.contains("Model not found") {
            self.unknown_model_in = Some("data");
        }
    }

    fn notification(&mut self, method: &str, params: &Value) {
        if method.starts_with('_') {
            self.vendor_notifications.insert(bounded(method));
        }
        match method {
            AGENT_STOPPED => {
                if let Some(cause) = params.get("cause").and_then(Value::as_str) {
                    self.stopped_causes.push(bounded(cause));
                }
                if let Some(label) = params.pointer("/stats/modelLabel").and_then(Value::as_str) {
                    self.model_label = Some(bounded(label));
                    self.model_label_from = Some("agent_stopped.stats.modelLabel");
                }
            }
            TURN_STATS if self.model_label.is_none() => {
                if let Some((label, from)) = dimension_label(params.get("responseDimensions")) {
                    self.model_label = Some(label);
                    self.model_label_from = Some(from);
                }
            }
            COMPACTION => self.compactions = self.compactions.saturating_add(1),
            "session/update" => {
                let update = params.get("update").unwrap_or(&Value::Null);
                let display_only = update
                    .get("_meta")
                    .and_then(|meta| meta.get(DISPLAY_ONLY))
                    .and_then(Value::as_bool)
                    == Some(true);
                if display_only {
                    self.display_only_chunks = self.display_only_chunks.saturating_add(1);
                }
            }
            _ => {}
        }
    }

    /// The facts as short phrases, for one line of a report.
    pub fn summary(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(info) = &self.agent_info {
            out.push(format!("agentInfo {info}"));
        }
        if let Some(logged_out) = self.logged_out {
            out.push(format!("logged out: {}", logged_out.describe()));
        }
        if self.authenticated {
            out.push("signed in with authenticate".to_owned());
        }
        match (&self.model_label, self.model_label_from) {
            (Some(label), Some(from)) => out.push(format!("model label {label:?} from {from}")),
            _ if !self.stop_reasons.is_empty() => out.push("no model label".to_owned()),
            _ => {}
        }
        if !self.stop_reasons.is_empty() {
            out.push(format!("stop reasons [{}]", self.stop_reasons.join(", ")));
        }
        if !self.stopped_causes.is_empty() {
            out.push(format!(
                "agent_stopped causes [{}]",
                self.stopped_causes.join(", ")
            ));
        }
        if !self.errors.is_empty() {
            out.push(format!("errors [{}]", self.errors.join("; ")));
        }
        if self.retry_after {
            out.push("an error carried retryAfterSeconds".to_owned());
        }
        if self.identity_refused {
            out.push("the client identity was refused".to_owned());
        }
        if let Some(place) = self.unknown_model_in {
            out.push(format!("unknown model named in the error's {place}"));
        }
        if self.display_only_chunks > 0 {
            out.push(format!("{} display-only chunks", self.display_only_chunks));
        }
        if self.compactions > 0 {
            out.push(format!("{} compaction notices", self.compactions));
        }
        if !self.vendor_notifications.is_empty() {
            let names: Vec<&str> = self
                .vendor_notifications
                .iter()
                .map(String::as_str)
                .collect();
            out.push(format!("notifications [{}]", names.join(", ")));
        }
        out
    }
}

/// The `model` dimension of a `turn_stats`, and the spelling it was found in.
fn dimension_label(dimensions: Option<&Value>) -> Option<(String, &'static str)> {
    let list = dimensions?.as_array()?;
    let entry = list
        .iter()
        .find(|entry| entry.get("uid").and_then(Value::as_str) == Some("model"))?;
    let kind = entry.get("kind")?;
    if let Some(value) = kind.get("value").and_then(Value::as_str) {
        return Some((
            bounded(value),
            "turn_stats.responseDimensions[uid=model].kind.value",
        ));
    }
    kind.pointer("/Metric/value")
        .and_then(Value::as_str)
        .map(|value| {
            (
                bounded(value),
                "turn_stats.responseDimensions[uid=model].kind.Metric.value",
            )
        })
}

/// The `id` (or `value`'s id) of each entry of a list, bounded.
fn ids(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.get("id").and_then(Value::as_str))
                .map(bounded)
                .take(32)
                .collect()
        })
        .unwrap_or_default()
}

fn bounded(text: &str) -> String {
    text.chars()
        .take(MAX_FACT_CHARS)
        .collect::<String>()
        .escape_debug()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(dir: Direction, msg: Value) -> Entry {
        Entry { dir, msg }
    }

    #[test]
    fn a_logged_out_cli_at_the_prompt_and_a_list_shaped_model_dimension_are_seen() {
        use Direction::*;
        let entries = [
            entry(
                ToAgent,
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize"}),
            ),
            entry(
                FromAgent,
                json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1,
                "agentInfo": {"name": "affogato", "version": "0.0.0-dev"},
                "authMethods": [{"id": "devin-browser"}]}}),
            ),
            entry(
                ToAgent,
                json!({"jsonrpc": "2.0", "id": 1, "method": "session/new"}),
            ),
            entry(
                FromAgent,
                json!({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s",
                "configOptions": [{"id": "mode", "type": "select"}]}}),
            ),
            entry(
                ToAgent,
                json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt"}),
            ),
            entry(
                FromAgent,
                json!({"jsonrpc": "2.0", "method": "_cognition.ai/turn_stats",
                "params": {"responseDimensions": [{"uid": "model", "label": "Model",
                "kind": {"type": "metric", "value": "SWE-1.6 Slow"}}]}}),
            ),
            entry(
                FromAgent,
                json!({"jsonrpc": "2.0", "method": "session/update", "params": {
                "sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "Compacting context..."},
                "_meta": {"cognition.ai/displayMessage": true}}}}),
            ),
            entry(
                FromAgent,
                json!({"jsonrpc": "2.0", "method": "_cognition.ai/compaction", "params": {}}),
            ),
            entry(
                FromAgent,
                json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32603,
                "message": "Authentication failed: Please authenticate to continue. Run `/login` to log in."}}),
            ),
        ];
        let facts = Observed::of(&entries);
        assert_eq!(facts.agent_info.as_deref(), Some("affogato 0.0.0-dev"));
        assert_eq!(facts.auth_methods, ["devin-browser"]);
        assert_eq!(facts.session_options, ["mode"]);
        assert_eq!(facts.logged_out, Some(LoggedOut::AtPrompt));
        assert_eq!(facts.model_label.as_deref(), Some("SWE-1.6 Slow"));
        assert_eq!(
            facts.model_label_from,
            Some("turn_stats.responseDimensions[uid=model].kind.value")
        );
        assert_eq!(facts.display_only_chunks, 1);
        assert_eq!(facts.compactions, 1);
        assert_eq!(facts.errors, ["session/prompt -32603 -"]);
        let summary = facts.summary().join("; ");
        assert!(summary.contains("Authentication failed"), "{summary}");
    }

    #[test]
    fn the_older_logged_out_variant_quota_causes_and_retry_delays_are_seen() {
        use Direction::*;
        let entries = [
            entry(
                ToAgent,
                json!({"jsonrpc": "2.0", "id": 0, "method": "session/new"}),
            ),
            entry(
                FromAgent,
                json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -32000,
                "message": "ACP host has not authenticated. Please call authenticate first."}}),
            ),
            entry(
                ToAgent,
                json!({"jsonrpc": "2.0", "id": 1, "method": "session/prompt"}),
            ),
            entry(
                FromAgent,
                json!({"jsonrpc": "2.0", "method": "_cognition.ai/agent_stopped",
                "params": {"cause": "quota_exhausted", "stats": {"modelLabel": "SWE-2 High"}}}),
            ),
            entry(
                FromAgent,
                json!({"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}),
            ),
            entry(
                ToAgent,
                json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt"}),
            ),
            entry(
                FromAgent,
                json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32010,
                "message": "Reached overall message rate limit", "data": {
                "cognition.ai/errorKind": "unavailable", "cognition.ai/retryable": true,
                "cognition.ai/retryAfterSeconds": 30}}}),
            ),
        ];
        let facts = Observed::of(&entries);
        assert_eq!(facts.logged_out, Some(LoggedOut::AtSessionNew));
        assert_eq!(facts.stopped_causes, ["quota_exhausted"]);
        assert_eq!(facts.stop_reasons, ["end_turn"]);
        assert_eq!(facts.model_label.as_deref(), Some("SWE-2 High"));
        assert!(facts.retry_after);
        assert_eq!(facts.errors[1], "session/prompt -32010 unavailable");
    }
}
