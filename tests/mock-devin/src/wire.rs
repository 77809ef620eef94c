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
/// `session/new` (and `session/load`) while signed out, in the older logged-out style.
pub(crate) const NOT_AUTHENTICATED: &str =
    "ACP host has not authenticated. Run \"devin auth login\" or authenticate with an API key.";
/// `session/prompt` while signed out, in the newer logged-out style.
pub(crate) const AUTHENTICATION_FAILED: &str =
    "Authentication failed: Please authenticate to continue. Run `/login` to log in.";
/// The error kind of [`AUTHENTICATION_FAILED`]. Not recorded: an assumption, in the CLI's
/// snake_case style.
pub(crate) const AUTHENTICATION_FAILED_KIND: &str = "unauthenticated";
/// What `authenticate` without a key answers: the real CLI would open a browser here.
pub(crate) const NO_BROWSER: &str = "cannot open a browser: no display";
pub(crate) const SESSION_NOT_FOUND: &str = "Session not found";
pub(crate) const RATE_LIMITED: &str = "Reached overall message rate limit";
/// The `cognition.ai/retryAfterSeconds` of [`RATE_LIMITED`].
pub(crate) const RATE_LIMIT_RETRY_AFTER: u64 = 5;
pub(crate) const CONNECTION: &str = "Connection error, send a message to continue retrying";
pub(crate) const QUOTA_EXHAUSTED: &str = "Quota exhausted.";
/// The message of an unknown model's error; the text naming the model is in `data.uri`.
pub(crate) const RESOURCE_NOT_FOUND: &str = "Resource not found";

/// `agentInfo` of `initialize`: the agent's own name, not the CLI's version.
pub(crate) const AGENT_INFO_NAME: &str = "affogato";
pub(crate) const AGENT_INFO_TITLE: &str = "Devin Agent";
pub(crate) const AGENT_INFO_VERSION: &str = "0.0.0-dev";

pub(crate) const NOT_AUTHENTICATED_CODE: i64 = -32000;
/// The code of the unknown-model error: not recorded, a guess (the ACP "resource not found").
pub(crate) const RESOURCE_NOT_FOUND_CODE: i64 = -32002;
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
    /// -32010, kind `unavailable`, a rate limit with `cognition.ai/retryAfterSeconds`.
    RateLimited,
    /// -32010, kind `unavailable`, a connection error.
    Connection,
    /// -32011, kind `resource_exhausted`, retryable: the quota is used up.
    Quota,
    /// -32016, kind `session_not_found`.
    SessionNotFound,
    /// -32000 without data.
    NotAuthenticated,
}

impl Fault {
    /// Code and message.
    pub(crate) fn parts(self) -> (i64, &'static str) {
        match self {
            Self::Internal => (INTERNAL_ERROR, "Internal error"),
            Self::RateLimited => (UNAVAILABLE_CODE, RATE_LIMITED),
            Self::Connection => (UNAVAILABLE_CODE, CONNECTION),
            Self::Quota => (RESOURCE_EXHAUSTED_CODE, QUOTA_EXHAUSTED),
            Self::SessionNotFound => (SESSION_NOT_FOUND_CODE, SESSION_NOT_FOUND),
            Self::NotAuthenticated => (NOT_AUTHENTICATED_CODE, NOT_AUTHENTICATED),
        }
    }

    /// The error's `data` (none for the not-authenticated error).
    pub(crate) fn data(self) -> Option<Value> {
        let (kind, retryable) = match self {
            Self::Internal => ("internal", false),
            Self::RateLimited | Self::Connection => ("unavailable", true),
            Self::Quota => ("resource_exhausted", true),
            Self::SessionNotFound => ("session_not_found", false),
            Self::NotAuthenticated => return None,
        };
        let mut data = error_data(kind, retryable);
        if self == Self::RateLimited {
            data["cognition.ai/retryAfterSeconds"] = json!(RATE_LIMIT_RETRY_AFTER);
        }
        Some(data)
    }

    pub(crate) fn refusal(self) -> Refusal {
        let (code, message) = self.parts();
        (code, message.to_owned(), self.data())
    }

    /// The kind in the error's data (`none` for the not-authenticated error, which has none).
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Self::Internal => "internal",
            Self::RateLimited | Self::Connection => "unavailable",
            Self::Quota => "resource_exhausted",
            Self::SessionNotFound => "session_not_found",
            Self::NotAuthenticated => "none",
        }
    }
}

pub(crate) fn session_not_found() -> Refusal {
    Fault::SessionNotFound.refusal()
}

/// The older logged-out answer to `session/new` and `session/load`.
pub(crate) fn not_authenticated() -> Refusal {
    Fault::NotAuthenticated.refusal()
}

/// The newer logged-out answer to `session/prompt`.
pub(crate) fn authentication_failed() -> Refusal {
    (
        INTERNAL_ERROR,
        AUTHENTICATION_FAILED.to_owned(),
        Some(error_data(AUTHENTICATION_FAILED_KIND, false)),
    )
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

/// The unknown-model error: "Resource not found", the text naming the model in `data.uri`.
pub(crate) fn model_not_found<'a>(
    value: &str,
    available: impl Iterator<Item = &'a str>,
) -> Refusal {
    (
        RESOURCE_NOT_FOUND_CODE,
        RESOURCE_NOT_FOUND.to_owned(),
        Some(json!({"uri": model_not_found_message(value, available)})),
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

/// `initialize`'s `agentInfo`.
pub(crate) fn agent_info() -> Value {
    json!({"name": AGENT_INFO_NAME, "title": AGENT_INFO_TITLE, "version": AGENT_INFO_VERSION})
}

/// `initialize`'s `_meta.mcpConfigPath`: `$XDG_CONFIG_HOME/devin/mcp.json` (fallback
/// `$HOME/.config/devin/mcp.json`). The file name is an assumption; it is never read.
pub(crate) fn mcp_config_path() -> String {
    let dir = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .map_or_else(|| PathBuf::from("/"), PathBuf::from)
            .join(".config"),
    };
    dir.join("devin").join("mcp.json").display().to_string()
}

/// Whether the mock judges an API key valid: not empty and not starting with `invalid`
/// (the real CLI asks its server; tests name a stale key `invalid-...`).
pub(crate) fn key_valid(key: &str) -> bool {
    !key.is_empty() && !key.starts_with("invalid")
}

/// `WINDSURF_API_KEY` of the environment, when set and not empty: whether it is valid. The CLI
/// prefers it over stored credentials, so an invalid one leaves the process signed out.
pub(crate) fn environment_key() -> Option<bool> {
    std::env::var("WINDSURF_API_KEY")
        .ok()
        .filter(|key| !key.is_empty())
        .map(|key| key_valid(&key))
}

/// What `authenticate` did.
pub(crate) enum Login {
    /// An API key was given (never logged); whether it is valid.
    Key { valid: bool },
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
    Ok(match key {
        Some(key) => Login::Key {
            valid: key_valid(key),
        },
        None => Login::Browser,
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

/// The answer to `authenticate`, with its log event: a key is taken (`Ok(valid)`: the caller
/// records whether it signs the process in; the real CLI is assumed not to check it before the
/// next call that needs it), no key would open a browser, which never happens here.
pub(crate) fn answer_authenticate(
    params: &Value,
    log: impl Fn(&str, Value),
) -> Result<bool, Refusal> {
    match authenticate(params)? {
        Login::Key { valid } => {
            log("authenticate", json!({"apiKey": true, "keyValid": valid}));
            Ok(valid)
        }
        Login::Browser => {
            log("browser_login", json!({}));
            Err((crate::rpc::INTERNAL_ERROR, NO_BROWSER.to_owned(), None))
        }
    }
}

/// Whether a model option says it takes images: the mock says so for every model but
/// `glm-5-2` (which models do is not recorded; the flag's presence is).
pub(crate) fn supports_images(model: &str) -> bool {
    model != "glm-5-2"
}

/// The `model` select config option; each option's `_meta` has `cognition.ai/supportsImages`.
pub(crate) fn model_option<'a>(
    current: &str,
    models: impl Iterator<Item = (&'a str, &'a str)>,
) -> Value {
    let options: Vec<Value> = models
        .map(|(value, name)| {
            json!({"value": value, "name": name,
                   "_meta": {"cognition.ai/supportsImages": supports_images(value)}})
        })
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

/// The process-wide `_cognition.ai/output` notification a turn starts with:
/// `{channel, message, level, sessionId: ""}` (the channel and level values are assumptions).
pub(crate) fn output_notification(message: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "_cognition.ai/output",
           "params": {"channel": "agent", "message": message, "level": "info", "sessionId": ""}})
}

/// `_cognition.ai/compaction`, sent while the agent compacts its context. Its params beyond
/// `sessionId` are not recorded: the mock sends only that.
pub(crate) fn compaction(session_id: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "_cognition.ai/compaction",
           "params": {"sessionId": session_id}})
}

/// The display-only text a compacting agent sends as an `agent_message_chunk`.
pub(crate) const COMPACTING: &str = "Compacting context...";

/// An `agent_message_chunk` update marked display-only (`cognition.ai/displayMessage`).
pub(crate) fn display_chunk(text: &str) -> Value {
    json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text},
           "_meta": {"cognition.ai/displayMessage": true}})
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

/// Token counts: of one model request, or summed over a turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tokens {
    /// Input tokens, cached reads included.
    pub input: u64,
    pub output: u64,
    pub cached_read: u64,
}

impl Tokens {
    pub(crate) fn add(self, other: Self) -> Self {
        Self {
            input: self.input + other.input,
            output: self.output + other.output,
            cached_read: self.cached_read + other.cached_read,
        }
    }
}

/// The group title of the response dimensions.
pub(crate) const DIMENSION_GROUP: &str = "Response Statistics";

/// The model's response dimension: its display label in `kind.value`.
pub(crate) fn model_dimension(label: &str) -> Value {
    json!({"uid": "model", "groupTitle": DIMENSION_GROUP, "label": "Model",
           "kind": {"type": "metric", "value": label}})
}

/// The model's response dimension in the Rust spelling `usage_update._meta` uses:
/// `kind: {Metric: {value}}`.
pub(crate) fn model_dimension_rust(label: &str) -> Value {
    json!({"uid": "model", "groupTitle": DIMENSION_GROUP, "label": "Model",
           "kind": {"Metric": {"value": label}}})
}

/// The turn's sums as `cumulativeMetric` rows. Their uids and labels are not recorded: these
/// (`inputTokens`, `outputTokens`, `cachedReadTokens`) are assumptions.
pub(crate) fn cumulative_dimensions(totals: Tokens) -> [Value; 3] {
    let row = |uid: &str, label: &str, value: u64| {
        json!({"uid": uid, "groupTitle": DIMENSION_GROUP, "label": label,
               "kind": {"type": "cumulativeMetric", "value": value}})
    };
    [
        row("inputTokens", "Input tokens", totals.input),
        row("outputTokens", "Output tokens", totals.output),
        row("cachedReadTokens", "Cached read tokens", totals.cached_read),
    ]
}

/// `_cognition.ai/turn_stats` params, sent at the end of a turn: with `dimensions` (the model
/// row and the turn's sums), or without any (a cancelled turn).
pub(crate) fn turn_stats(session_id: &str, ids: &TurnIds, dimensions: Option<Vec<Value>>) -> Value {
    let mut stats = json!({
        "sessionId": session_id,
        "turnClientMessageId": ids.user_message,
        "turnRequestId": ids.request,
    });
    if let Some(dimensions) = dimensions {
        stats["responseDimensions"] = Value::Array(dimensions);
    }
    stats
}

/// A `usage_update` session update for the last model request, with the counts and the model
/// dimension in `_meta` (the key of the dimensions there is an assumption).
pub(crate) fn usage_update(used: u64, size: u64, last: Tokens, label: &str) -> Value {
    json!({"sessionUpdate": "usage_update", "used": used, "size": size, "_meta": {
        "cognition.ai/inputTokens": last.input,
        "cognition.ai/outputTokens": last.output,
        "cognition.ai/cachedReadTokens": last.cached_read,
        "cognition.ai/responseDimensions": [model_dimension_rust(label)],
    }})
}

/// What a turn did, for `_cognition.ai/agent_stopped`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Stats {
    pub tool_calls: u64,
    pub files_changed: u64,
    pub commands_run: u64,
    /// The turn's sums over its model requests.
    pub tokens: Tokens,
    pub ttft_ms: u64,
    pub total_time_ms: u64,
}

/// `_cognition.ai/agent_stopped` params; `errorMessage` only when given.
pub(crate) fn agent_stopped(
    session_id: &str,
    cause: &str,
    stats: &Stats,
    request: &str,
    label: &str,
    error_message: Option<&str>,
) -> Value {
    let mut stopped = json!({
        "cause": cause,
        "sessionId": session_id,
        "stats": {
            "toolCalls": stats.tool_calls,
            "filesChanged": stats.files_changed,
            "commandsRun": stats.commands_run,
            "inputTokens": stats.tokens.input,
            "outputTokens": stats.tokens.output,
            "ttftMs": stats.ttft_ms,
            "totalTimeMs": stats.total_time_ms,
            "requestId": request,
            "modelLabel": label,
            "responseDimensions": [model_dimension(label)],
        },
    });
    if let Some(message) = error_message {
        stopped["errorMessage"] = json!(message);
    }
    stopped
}

/// The prompt result's `usage` of one model request: `totalTokens` is input plus output
/// (cached reads are part of the input and not added).
pub(crate) fn usage(last: Tokens) -> Value {
    json!({"totalTokens": last.input + last.output, "inputTokens": last.input,
           "outputTokens": last.output, "cachedReadTokens": last.cached_read})
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

/// How an `agent_stopped` cause that is not an error ends a turn: the CLI sends it, then an
/// ordinary result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StopCause {
    QuotaExhausted,
    AuthRequired,
    ContentFilter,
    MaxTurnRequests,
    OutputTruncated,
}

impl StopCause {
    pub(crate) const ALL: [Self; 5] = [
        Self::QuotaExhausted,
        Self::AuthRequired,
        Self::ContentFilter,
        Self::MaxTurnRequests,
        Self::OutputTruncated,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::QuotaExhausted => "quota_exhausted",
            Self::AuthRequired => "auth_required",
            Self::ContentFilter => "content_filter",
            Self::MaxTurnRequests => "max_turn_requests",
            Self::OutputTruncated => "output_truncated",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|cause| cause.name() == name)
    }

    /// `agent_stopped.errorMessage`. Only the quota's opening sentence is recorded; the rest
    /// of each text is the mock's, and `max_turn_requests` and `output_truncated` send none
    /// (so that a client meets the field both present and absent).
    pub(crate) fn error_message(self) -> Option<&'static str> {
        match self {
            Self::QuotaExhausted => Some(
                "Your daily usage quota has been exhausted. Upgrade your plan or wait for it to \
                 reset.",
            ),
            Self::AuthRequired => Some("Authentication required. Run `/login` to log in."),
            Self::ContentFilter => Some("The response was blocked by the content filter."),
            Self::MaxTurnRequests | Self::OutputTruncated => None,
        }
    }

    /// The text streamed before the stop: none for the quota and sign-in (the turn never
    /// reached a model), a partial answer otherwise.
    pub(crate) fn reply(self) -> &'static str {
        match self {
            Self::QuotaExhausted | Self::AuthRequired => "",
            Self::ContentFilter => "Devin mock: the start of an answer that",
            Self::MaxTurnRequests => "Devin mock: I ran many tools and stopped before finishing.",
            Self::OutputTruncated => "Devin mock: a long answer, cut off in the mid",
        }
    }
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
    fn faults_are_snake_case_and_carry_their_retry_hints() {
        for (fault, code, message, kind, retryable) in [
            (Fault::Internal, -32603, "Internal error", "internal", false),
            (
                Fault::RateLimited,
                -32010,
                RATE_LIMITED,
                "unavailable",
                true,
            ),
            (Fault::Connection, -32010, CONNECTION, "unavailable", true),
            (
                Fault::Quota,
                -32011,
                "Quota exhausted.",
                "resource_exhausted",
                true,
            ),
            (
                Fault::SessionNotFound,
                -32016,
                "Session not found",
                "session_not_found",
                false,
            ),
        ] {
            let (c, m, data) = fault.refusal();
            assert_eq!((c, m.as_str()), (code, message));
            let data = data.expect("data");
            assert_eq!(data["cognition.ai/errorKind"], kind);
            assert_eq!(data["cognition.ai/retryable"], retryable);
            assert_eq!(fault.kind(), kind);
            let retry_after = data.get("cognition.ai/retryAfterSeconds");
            assert_eq!(
                retry_after.is_some(),
                fault == Fault::RateLimited,
                "{fault:?}"
            );
        }
        assert_eq!(RATE_LIMITED, "Reached overall message rate limit");
        assert_eq!(not_authenticated().2, None);
        assert_eq!(not_authenticated().0, -32000);
        let (code, message, data) = authentication_failed();
        assert_eq!(code, -32603);
        assert!(message.starts_with("Authentication failed: Please authenticate to continue."));
        assert_eq!(data, Some(error_data("unauthenticated", false)));
    }

    #[test]
    fn an_unknown_model_is_a_resource_not_found_with_the_text_in_the_uri() {
        let (code, message, data) = model_not_found("x-9", ["a", "b"].into_iter());
        assert_eq!((code, message.as_str()), (-32002, "Resource not found"));
        assert_eq!(
            data,
            Some(json!({"uri": "Model not found: x-9. Available models: a, b"}))
        );
    }

    #[test]
    fn authenticate_needs_the_browser_method_and_judges_the_key() {
        let key = json!({"methodId": "devin-browser", "_meta": {"api_key": "k"}});
        assert!(matches!(authenticate(&key), Ok(Login::Key { valid: true })));
        let stale = json!({"methodId": "devin-browser", "_meta": {"api_key": "invalid-k"}});
        assert!(matches!(
            authenticate(&stale),
            Ok(Login::Key { valid: false })
        ));
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
        assert!(key_valid("k") && !key_valid("") && !key_valid("invalid"));
    }

    #[test]
    fn dimensions_are_lists_with_the_display_label() {
        let ids = TurnIds::new();
        let stats = turn_stats("s", &ids, Some(vec![model_dimension("SWE-1.6 Slow")]));
        assert_eq!(
            stats["responseDimensions"],
            json!([{"uid": "model", "groupTitle": "Response Statistics", "label": "Model",
                    "kind": {"type": "metric", "value": "SWE-1.6 Slow"}}])
        );
        assert!(turn_stats("s", &ids, None)
            .get("responseDimensions")
            .is_none());
        let update = usage_update(10, 100, Tokens::default(), "SWE-2 High");
        assert_eq!(
            update["_meta"]["cognition.ai/responseDimensions"][0]["kind"],
            json!({"Metric": {"value": "SWE-2 High"}})
        );
        let rows = cumulative_dimensions(Tokens {
            input: 5,
            output: 3,
            cached_read: 2,
        });
        assert_eq!(
            rows[0]["kind"],
            json!({"type": "cumulativeMetric", "value": 5})
        );
        let stopped = agent_stopped("s", "complete", &Stats::default(), "r", "SWE-2", None);
        assert_eq!(stopped["stats"]["responseDimensions"][0]["uid"], "model");
        assert!(stopped.get("errorMessage").is_none());
    }

    #[test]
    fn results_and_ids() {
        let ids = TurnIds::new();
        assert_eq!(ids.user_message.len(), 36);
        let last = Tokens {
            input: 3,
            output: 4,
            cached_read: 2,
        };
        let result = prompt_result("end_turn", Some(usage(last)), &ids);
        assert_eq!(result["usage"]["totalTokens"], 7);
        assert_eq!(
            result["_meta"]["cognition.ai/userMessageId"],
            json!(ids.user_message)
        );
        assert_eq!(
            model_not_found_message("adaptive", ["a", "b"].into_iter()),
            "Model not found: adaptive. Available models: a, b"
        );
    }

    #[test]
    fn stop_causes_round_trip() {
        for cause in StopCause::ALL {
            assert_eq!(StopCause::from_name(cause.name()), Some(cause));
        }
        assert!(StopCause::QuotaExhausted
            .error_message()
            .is_some_and(|m| m.starts_with("Your daily usage quota has been exhausted. ")));
        assert_eq!(StopCause::from_name("complete"), None);
    }
}
