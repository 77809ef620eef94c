//! What both agents (the summarizer and the full agent) say the way the Devin CLI says it: the
//! client identity gate, the sign-in rules and the one auth method, the error objects and their
//! snake_case kinds, the model config option, the vendor notifications and the prompt result.

use std::path::PathBuf;

use serde_json::{json, Map, Value};

use crate::rpc::{INTERNAL_ERROR, INVALID_PARAMS};

/// The only `clientInfo.name` the Devin backend serves.
pub(crate) const CLIENT_NAME: &str = "windsurf";
/// The answer to every prompt of a client that names itself anything else.
pub(crate) const OUT_OF_DATE: &str =
    "Your Windsurf version is out of date. Please update to the latest version.";
/// The one auth method.
pub(crate) const AUTH_METHOD: &str = "devin-browser";
/// `session/new` (and `session/load`) while signed out.
pub(crate) const NOT_AUTHENTICATED: &str =
    "ACP host has not authenticated. Run \"devin auth login\" or authenticate with an API key.";
/// What `authenticate` without a key answers: the real CLI would open a browser here.
pub(crate) const NO_BROWSER: &str = "cannot open a browser: no display";
pub(crate) const SESSION_NOT_FOUND: &str = "Session not found";
pub(crate) const RATE_LIMITED: &str = "Rate limit exceeded. Please try again in a moment.";
pub(crate) const CONNECTION: &str = "Connection error: upstream reset";
pub(crate) const OUT_OF_CREDITS: &str =
    "You have run out of credits. Add credits or wait for your quota to reset.";

pub(crate) const NOT_AUTHENTICATED_CODE: i64 = -32000;
pub(crate) const UNAVAILABLE_CODE: i64 = -32010;
pub(crate) const RESOURCE_EXHAUSTED_CODE: i64 = -32011;
pub(crate) const SESSION_NOT_FOUND_CODE: i64 = -32016;

/// A JSON-RPC error as the CLI sends it: code, message and optional data.
pub(crate) type Refusal = (i64, String, Option<Value>);

/// `{"cognition.ai/errorKind": kind, "cognition.ai/retryable": retryable}`.
pub(crate) fn error_data(kind: &str, retryable: bool) -> Value {
    json!({"cognition.ai/errorKind": kind, "cognition.ai/retryable": retryable})
}

/// The failures the scenario markers (and print mode) simulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// -32603 `Internal error`, kind `internal`.
    Internal,
    /// -32010, kind `unavailable`, a rate limit.
    RateLimited,
    /// -32010, kind `unavailable`, a connection error.
    Connection,
    /// -32011, kind `resource_exhausted`: no credits left.
    Quota,
    /// -32016, kind `session_not_found`.
    SessionNotFound,
    /// -32000 without data.
    NotAuthenticated,
}

impl Fault {
    /// Code, message, kind and whether the kind is retryable.
    pub(crate) fn parts(self) -> (i64, &'static str, Option<(&'static str, bool)>) {
        match self {
            Self::Internal => (INTERNAL_ERROR, "Internal error", Some(("internal", false))),
            Self::RateLimited => (UNAVAILABLE_CODE, RATE_LIMITED, Some(("unavailable", true))),
            Self::Connection => (UNAVAILABLE_CODE, CONNECTION, Some(("unavailable", true))),
            Self::Quota => (
                RESOURCE_EXHAUSTED_CODE,
                OUT_OF_CREDITS,
                Some(("resource_exhausted", false)),
            ),
            Self::SessionNotFound => (
                SESSION_NOT_FOUND_CODE,
                SESSION_NOT_FOUND,
                Some(("session_not_found", false)),
            ),
            Self::NotAuthenticated => (NOT_AUTHENTICATED_CODE, NOT_AUTHENTICATED, None),
        }
    }

    pub(crate) fn refusal(self) -> Refusal {
        let (code, message, kind) = self.parts();
        (
            code,
            message.to_owned(),
            kind.map(|(kind, retryable)| error_data(kind, retryable)),
        )
    }

    /// The kind in the error's data (`none` for the not-authenticated error, which has none).
    pub(crate) fn kind(self) -> &'static str {
        self.parts().2.map_or("none", |(kind, _)| kind)
    }
}

pub(crate) fn session_not_found() -> Refusal {
    Fault::SessionNotFound.refusal()
}

pub(crate) fn not_authenticated() -> Refusal {
    Fault::NotAuthenticated.refusal()
}

/// The refusal of a prompt from a client that is not `windsurf`.
pub(crate) fn out_of_date() -> Refusal {
    (
        INTERNAL_ERROR,
        OUT_OF_DATE.to_owned(),
        Some(error_data("internal", false)),
    )
}

/// `Model not found: X. Available models: a, b, c`.
pub(crate) fn model_not_found_message<'a>(
    value: &str,
    available: impl Iterator<Item = &'a str>,
) -> String {
    format!(
        "Model not found: {value}. Available models: {}",
        available.collect::<Vec<_>>().join(", ")
    )
}

/// What `initialize.params.clientInfo` says about the client: `Ok` when its prompts are
/// served (no clientInfo, or the name `windsurf`), else the name it gave.
pub(crate) fn client_identity(params: &Value) -> Result<(), String> {
    match params.get("clientInfo") {
        None | Some(Value::Null) => Ok(()),
        Some(info) => match info.get("name").and_then(Value::as_str) {
            Some(CLIENT_NAME) => Ok(()),
            Some(name) => Err(name.to_owned()),
            None => Err("(none)".to_owned()),
        },
    }
}

/// `initialize`'s `authMethods`.
pub(crate) fn auth_methods() -> Value {
    json!([{"id": AUTH_METHOD, "name": "Devin", "description": "Sign in with your browser"}])
}

/// `initialize`'s `agentCapabilities.sessionCapabilities`.
pub(crate) fn session_capabilities() -> Value {
    json!({"list": {}, "delete": {}, "additionalDirectories": {}})
}

/// What `authenticate` did.
pub(crate) enum Login {
    /// Signed in with an API key (never logged).
    Key,
    /// No key: the real CLI would open a browser.
    Browser,
}

/// Reads `authenticate {methodId, _meta: {api_key}}`.
pub(crate) fn authenticate(params: &Value) -> Result<Login, Refusal> {
    let method = params.get("methodId").and_then(Value::as_str);
    if method != Some(AUTH_METHOD) {
        return Err((
            INVALID_PARAMS,
            format!(
                "Invalid params: unknown auth method {}",
                method.map_or_else(|| "(missing)".to_owned(), |m| format!("{m:?}"))
            ),
            None,
        ));
    }
    let key = params
        .pointer("/_meta/api_key")
        .and_then(Value::as_str)
        .filter(|key| !key.is_empty());
    Ok(if key.is_some() {
        Login::Key
    } else {
        Login::Browser
    })
}

/// `$XDG_DATA_HOME/devin` (fallback `$HOME/.local/share/devin`).
pub(crate) fn data_dir() -> Option<PathBuf> {
    match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir).join("devin")),
        None => std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .map(|home| PathBuf::from(home).join(".local/share/devin")),
    }
}

/// Whether `devin auth login` left credentials (a symlink to a file counts). The file's
/// contents are never read.
pub(crate) fn credentials_exist() -> bool {
    data_dir().is_some_and(|dir| std::fs::metadata(dir.join("credentials.toml")).is_ok())
}

/// `n` random bytes as hex (the time and pid when there is no random source).
pub(crate) fn random_hex(n: usize) -> String {
    use std::io::Read;
    let mut bytes = vec![0u8; n];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let mixed = (nanos as u64) ^ (u64::from(std::process::id()) << 40);
        for (index, byte) in bytes.iter_mut().enumerate() {
            *byte = mixed.rotate_left((index as u32 % 8) * 8).to_be_bytes()[0] ^ index as u8;
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A random id in the 8-4-4-4-12 form.
pub(crate) fn uuid() -> String {
    let hex = random_hex(16);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The session modes, `(id, name)`, in the order Devin lists them.
pub(crate) const MODES: [(&str, &str); 5] = [
    ("accept-edits", "Accept edits"),
    ("smart", "Smart"),
    ("ask", "Ask"),
    ("plan", "Plan"),
    ("bypass", "Bypass"),
];
pub(crate) const DEFAULT_MODE: &str = "accept-edits";

/// A session's `modes` object with `current` selected.
pub(crate) fn modes(current: &str) -> Value {
    let available: Vec<Value> = MODES
        .iter()
        .map(|(id, name)| json!({"id": id, "name": name}))
        .collect();
    json!({"currentModeId": current, "availableModes": available})
}

/// A select config option.
pub(crate) fn select(
    id: &str,
    name: &str,
    category: &str,
    current: &str,
    options: Vec<Value>,
) -> Value {
    json!({"id": id, "name": name, "category": category, "type": "select",
           "currentValue": current, "options": options})
}

/// `(value, name)` pairs as select options.
pub(crate) fn pairs(values: &[(&str, &str)]) -> Vec<Value> {
    values
        .iter()
        .map(|(value, name)| json!({"value": value, "name": name}))
        .collect()
}

/// The `mode` select config option with `current` selected.
pub(crate) fn mode_option(current: &str) -> Value {
    select("mode", "Mode", "mode", current, pairs(&MODES))
}

/// The answer to `authenticate`, with its log event: a key signs the process in (the caller
/// records that), no key would open a browser, which never happens here.
pub(crate) fn answer_authenticate(
    params: &Value,
    log: impl Fn(&str, Value),
) -> Result<Value, Refusal> {
    match authenticate(params)? {
        Login::Key => {
            log("authenticate", json!({"apiKey": true}));
            Ok(Value::Null)
        }
        Login::Browser => {
            log("browser_login", json!({}));
            Err((crate::rpc::INTERNAL_ERROR, NO_BROWSER.to_owned(), None))
        }
    }
}

/// The `model` select config option.
pub(crate) fn model_option<'a>(
    current: &str,
    models: impl Iterator<Item = (&'a str, &'a str)>,
) -> Value {
    let options: Vec<Value> = models
        .map(|(value, name)| json!({"value": value, "name": name}))
        .collect();
    select("model", "Model", "model", current, options)
}

/// A `config_option_update` session update notification for `session_id`.
pub(crate) fn config_option_update(session_id: &str, options: &Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id,
           "update": {"sessionUpdate": "config_option_update", "configOptions": options}}})
}

/// `_cognition.ai/mcp/serversChanged`, sent after `session/new`.
pub(crate) fn servers_changed() -> Value {
    json!({"jsonrpc": "2.0", "method": "_cognition.ai/mcp/serversChanged", "params": {}})
}

/// The process-wide `_cognition.ai/output` notification a turn starts with.
pub(crate) fn output_notification(text: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "_cognition.ai/output",
           "params": {"sessionId": "", "text": text}})
}

/// The ids of one turn: the user message (in the result's `_meta`) and the request.
#[derive(Clone, Debug)]
pub(crate) struct TurnIds {
    pub user_message: String,
    pub request: String,
}

impl TurnIds {
    pub(crate) fn new() -> Self {
        Self {
            user_message: uuid(),
            request: random_hex(12),
        }
    }
}

/// `_cognition.ai/turn_stats` params: the model is a response dimension.
pub(crate) fn turn_stats(session_id: &str, ids: &TurnIds, label: &str) -> Value {
    json!({
        "sessionId": session_id,
        "turnClientMessageId": ids.user_message,
        "turnRequestId": ids.request,
        "responseDimensions": {"model": label},
    })
}

/// What a turn did, for `_cognition.ai/agent_stopped`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Stats {
    pub tool_calls: u64,
    pub files_changed: u64,
    pub commands_run: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub ttft_ms: u64,
    pub total_time_ms: u64,
}

/// `_cognition.ai/agent_stopped` params.
pub(crate) fn agent_stopped(
    session_id: &str,
    cause: &str,
    stats: &Stats,
    request: &str,
    label: &str,
) -> Value {
    json!({
        "cause": cause,
        "sessionId": session_id,
        "stats": {
            "toolCalls": stats.tool_calls,
            "filesChanged": stats.files_changed,
            "commandsRun": stats.commands_run,
            "inputTokens": stats.input_tokens,
            "outputTokens": stats.output_tokens,
            "ttftMs": stats.ttft_ms,
            "totalTimeMs": stats.total_time_ms,
            "requestId": request,
            "modelLabel": label,
            "responseDimensions": {"model": label},
        },
    })
}

/// The prompt result's `usage`: `totalTokens` is input plus output.
pub(crate) fn usage(input: u64, output: u64, cached_read: u64) -> Value {
    json!({"totalTokens": input + output, "inputTokens": input, "outputTokens": output,
           "cachedReadTokens": cached_read})
}

/// The prompt result: `{stopReason, usage, _meta}` (`usage` left out when `None`).
pub(crate) fn prompt_result(stop_reason: &str, usage: Option<Value>, ids: &TurnIds) -> Value {
    let mut result = Map::new();
    result.insert("stopReason".into(), json!(stop_reason));
    if let Some(usage) = usage {
        result.insert("usage".into(), usage);
    }
    result.insert(
        "_meta".into(),
        json!({"cognition.ai/userMessageId": ids.user_message}),
    );
    Value::Object(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_gate() {
        assert!(client_identity(&json!({})).is_ok());
        assert!(client_identity(&json!({"clientInfo": null})).is_ok());
        assert!(
            client_identity(&json!({"clientInfo": {"name": "windsurf", "version": "9"}})).is_ok()
        );
        assert_eq!(
            client_identity(&json!({"clientInfo": {"name": "acpx", "version": "0.1.0"}})),
            Err("acpx".to_owned())
        );
        assert!(client_identity(&json!({"clientInfo": {"name": "Windsurf"}})).is_err());
        assert!(client_identity(&json!({"clientInfo": {}})).is_err());
    }

    #[test]
    fn faults_are_snake_case() {
        for (fault, code, kind, retryable) in [
            (Fault::Internal, -32603, "internal", false),
            (Fault::RateLimited, -32010, "unavailable", true),
            (Fault::Connection, -32010, "unavailable", true),
            (Fault::Quota, -32011, "resource_exhausted", false),
            (Fault::SessionNotFound, -32016, "session_not_found", false),
        ] {
            let (c, _, data) = fault.refusal();
            assert_eq!(c, code);
            assert_eq!(data, Some(error_data(kind, retryable)));
        }
        assert_eq!(not_authenticated().2, None);
        assert_eq!(not_authenticated().0, -32000);
    }

    #[test]
    fn authenticate_needs_the_browser_method() {
        let key = json!({"methodId": "devin-browser", "_meta": {"api_key": "k"}});
        assert!(matches!(authenticate(&key), Ok(Login::Key)));
        let empty = json!({"methodId": "devin-browser", "_meta": {"api_key": ""}});
        assert!(matches!(authenticate(&empty), Ok(Login::Browser)));
        assert!(matches!(
            authenticate(&json!({"methodId": "devin-browser"})),
            Ok(Login::Browser)
        ));
        assert!(matches!(
            authenticate(&json!({"methodId": "windsurf-api-key"})),
            Err((-32602, _, None))
        ));
    }

    #[test]
    fn results_and_ids() {
        let ids = TurnIds::new();
        assert_eq!(ids.user_message.len(), 36);
        let result = prompt_result("end_turn", Some(usage(3, 4, 0)), &ids);
        assert_eq!(result["usage"]["totalTokens"], 7);
        assert_eq!(
            result["_meta"]["cognition.ai/userMessageId"],
            json!(ids.user_message)
        );
        assert!(turn_stats("s", &ids, "X").get("modelLabel").is_none());
        assert_eq!(
            model_not_found_message("adaptive", ["a", "b"].into_iter()),
            "Model not found: adaptive. Available models: a, b"
        );
    }
}
