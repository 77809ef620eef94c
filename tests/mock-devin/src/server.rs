//! The reading loop: protocol state (initialized, sessions, the running turn) and the answers
//! to every client message.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::rpc::{
    self, Incoming, AUTH_REQUIRED, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST,
    METHOD_NOT_FOUND, NOT_FOUND,
};
use crate::scenario::{find_marker, Scenario};
use crate::trace::{
    continuation_trace, Prompt, BRIDGE_HEADER, REPAIR_HEADER, SEPARATOR, TRACE_HEADER,
};
use crate::turn::{Event, Turn};
use crate::{Shared, AGENT_NAME, AGENT_VERSION};

struct RunningTurn {
    events: Sender<Event>,
    done: Arc<AtomicBool>,
}

impl RunningTurn {
    fn running(&self) -> bool {
        !self.done.load(Ordering::SeqCst)
    }
}

pub struct Server {
    shared: Arc<Shared>,
    initialized: bool,
    authenticated: bool,
    /// Every session, with the trace it has received so far (framed as a full prompt).
    sessions: BTreeMap<String, Option<String>>,
    sessions_created: u64,
    /// The running turn of each session (sessions run their turns in parallel).
    turns: HashMap<String, RunningTurn>,
}

/// A refusal: JSON-RPC error code and message.
type Refusal = (i64, String);

fn params_object(params: &Value) -> Result<&serde_json::Map<String, Value>, Refusal> {
    params.as_object().ok_or_else(|| {
        (
            INVALID_PARAMS,
            "Invalid params: params must be an object".into(),
        )
    })
}

impl Server {
    pub fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            initialized: false,
            authenticated: false,
            sessions: BTreeMap::new(),
            sessions_created: 0,
            turns: HashMap::new(),
        }
    }

    /// Reads and answers messages until stdin ends (or fails).
    pub fn serve<R: BufRead>(&mut self, input: &mut R) {
        let shared = self.shared.clone();
        rpc::serve_lines(input, &shared.out, |incoming| self.handle(incoming));
    }

    fn log(&self, event: &str, fields: Value) {
        self.shared.log.event(event, None, fields);
    }

    fn handle(&mut self, incoming: Incoming) {
        match incoming {
            Incoming::Invalid { id, code, message } => {
                eprintln!("mock-devin: invalid input: {message}");
                self.log("invalid_input", json!({"code": code}));
                self.shared.out.error(&id, code, &message, None);
            }
            Incoming::Request { id, method, params } => {
                match self.request(&method, &params, &id) {
                    Ok(Some(result)) => self.shared.out.respond(&id, result),
                    Ok(None) => {} // a turn answers later
                    Err((code, message)) => {
                        eprintln!("mock-devin: {method} refused: {message}");
                        self.log(
                            "refused",
                            json!({"method": method, "code": code, "message": message}),
                        );
                        self.shared.out.error(&id, code, &message, None);
                    }
                }
            }
            Incoming::Notification { method, params } => self.notification(&method, &params),
            Incoming::Response { id, outcome } => {
                // Each running turn ignores answers to requests it did not send.
                let running: Vec<&RunningTurn> =
                    self.turns.values().filter(|turn| turn.running()).collect();
                if running.is_empty() {
                    eprintln!("mock-devin: ignoring a response to unknown request id {id}");
                    self.log("stray_client_response", json!({"id": id}));
                }
                for turn in running {
                    let event = Event::Response {
                        id: id.clone(),
                        outcome: outcome.clone(),
                    };
                    if turn.events.send(event).is_err() {
                        eprintln!("mock-devin: a response arrived after the turn ended");
                    }
                }
            }
        }
    }

    /// `Ok(Some(result))` answers now, `Ok(None)` means a turn will answer.
    fn request(
        &mut self,
        method: &str,
        params: &Value,
        id: &Value,
    ) -> Result<Option<Value>, Refusal> {
        if method != "initialize" && !self.initialized {
            return Err((
                INVALID_REQUEST,
                format!("Invalid Request: {method} before initialize"),
            ));
        }
        match method {
            "initialize" => self.initialize(params).map(Some),
            "authenticate" => self.authenticate(params).map(Some),
            "session/new" => self.new_session(params).map(Some),
            "session/prompt" => self.prompt(params, id).map(|()| None),
            "session/set_mode" | "session/set_config_option" => Err((
                INVALID_PARAMS,
                format!(
                    "Invalid params: {method} is refused: the summarizer agent's configuration \
                     cannot be changed"
                ),
            )),
            "session/close" => {
                let session = params_object(params)?
                    .get("sessionId")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if self.sessions.remove(session).is_some() {
                    Ok(Some(json!({})))
                } else {
                    Err((NOT_FOUND, format!("Session not found: {session:?}")))
                }
            }
            "session/load" | "session/resume" => Err((
                METHOD_NOT_FOUND,
                format!("Method not found: {method} (this agent cannot load sessions)"),
            )),
            _ => Err((METHOD_NOT_FOUND, format!("Method not found: {method}"))),
        }
    }

    fn notification(&mut self, method: &str, params: &Value) {
        if method != "session/cancel" {
            // Unknown notifications (extensions included) are ignored.
            return;
        }
        let session = params.get("sessionId").and_then(Value::as_str);
        match session.and_then(|session| self.turns.get(session)) {
            Some(turn) if turn.running() => {
                self.log("cancel", json!({"sessionId": session}));
                // A turn that ended in the meantime has nothing left to cancel.
                let _ = turn.events.send(Event::Cancel);
            }
            _ => self.log("cancel_ignored", json!({"sessionId": session})),
        }
    }

    fn initialize(&mut self, params: &Value) -> Result<Value, Refusal> {
        let version = params_object(params)?.get("protocolVersion");
        if version.and_then(Value::as_u64) != Some(1) {
            return Err((
                INVALID_PARAMS,
                format!(
                    "Invalid params: unsupported protocolVersion {}; this agent speaks protocol 1",
                    version.map_or_else(|| "(missing)".to_owned(), Value::to_string)
                ),
            ));
        }
        self.initialized = true;
        self.log("initialize", json!({}));
        Ok(json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": false,
                "promptCapabilities": {"image": self.shared.config.images, "audio": false, "embeddedContext": false},
                "sessionCapabilities": {"close": {}},
            },
            "agentInfo": {"name": AGENT_NAME, "version": AGENT_VERSION},
            "authMethods": if self.shared.config.require_auth {
                json!([{"id": "devin-browser", "name": "Log in with browser"},
                       {"id": "windsurf-api-key", "name": "Windsurf API key"}])
            } else {
                json!([])
            },
        }))
    }

    /// `authenticate`: the API-key method works when `WINDSURF_API_KEY` is set; the browser
    /// method cannot run here and is logged as `browser_flow`.
    fn authenticate(&mut self, params: &Value) -> Result<Value, Refusal> {
        let method = params_object(params)?
            .get("methodId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        self.log("authenticate", json!({"methodId": method}));
        match method.as_str() {
            "windsurf-api-key" => {
                let has_key = std::env::var("WINDSURF_API_KEY").is_ok_and(|key| !key.is_empty());
                if !has_key {
                    return Err((AUTH_REQUIRED, "Authentication required: no API key".into()));
                }
                self.authenticated = true;
                Ok(json!({}))
            }
            "devin-browser" => {
                self.log("browser_flow", json!({}));
                Err((INTERNAL_ERROR, "Internal error: no browser here".into()))
            }
            _ => Err((
                INVALID_PARAMS,
                format!("Invalid params: unknown auth method {method:?}"),
            )),
        }
    }

    fn new_session(&mut self, params: &Value) -> Result<Value, Refusal> {
        if self.shared.config.require_auth && !self.authenticated {
            return Err((AUTH_REQUIRED, "Authentication required".into()));
        }
        let params = params_object(params)?;
        let cwd = params.get("cwd").and_then(Value::as_str).ok_or_else(|| {
            (
                INVALID_PARAMS,
                "Invalid params: cwd must be an absolute path (a string)".to_owned(),
            )
        })?;
        check_cwd(cwd).map_err(|message| (INVALID_PARAMS, format!("Invalid params: {message}")))?;
        match params.get("mcpServers") {
            None => {
                return Err((
                    INVALID_PARAMS,
                    "Invalid params: missing field `mcpServers`".to_owned(),
                ))
            }
            Some(Value::Array(servers)) if servers.is_empty() => {}
            Some(Value::Array(_)) => {
                return Err((
                    INVALID_PARAMS,
                    "Invalid params: mcpServers must be empty: the summarizer agent takes no \
                     MCP servers"
                        .to_owned(),
                ))
            }
            Some(_) => {
                return Err((
                    INVALID_PARAMS,
                    "Invalid params: mcpServers must be an array".to_owned(),
                ))
            }
        }
        self.sessions_created += 1;
        let session_id = format!("mock-session-{}", self.sessions_created);
        self.sessions.insert(session_id.clone(), None);
        self.log("session_new", json!({"sessionId": session_id}));
        Ok(json!({
            "sessionId": session_id,
            "modes": {
                "currentModeId": "smart",
                "availableModes": [
                    {"id": "accept-edits", "name": "Accept edits"},
                    {"id": "smart", "name": "Smart"},
                    {"id": "ask", "name": "Ask"},
                    {"id": "plan", "name": "Plan"},
                    {"id": "bypass", "name": "Bypass"},
                ],
            },
            "configOptions": [
                {"id": "mode", "name": "Mode", "category": "mode", "type": "select",
                 "currentValue": "smart",
                 "options": [{"value": "smart", "name": "Smart"}, {"value": "ask", "name": "Ask"}]},
                {"id": "model", "name": "Model", "category": "model", "type": "select",
                 "currentValue": "swe-1-7",
                 "options": [{"value": "swe-1-7", "name": "SWE-1.7"},
                             {"value": "swe-1-7-lightning", "name": "SWE-1.7 Lightning"}]},
            ],
        }))
    }

    fn prompt(&mut self, params: &Value, id: &Value) -> Result<(), Refusal> {
        let params = params_object(params)?;
        let session_id = params
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                (
                    INVALID_PARAMS,
                    "Invalid params: missing sessionId".to_owned(),
                )
            })?;
        let Some(earlier) = self.sessions.get(session_id) else {
            return Err((NOT_FOUND, format!("Session not found: {session_id:?}")));
        };
        self.turns.retain(|_, turn| turn.running());
        if self.turns.contains_key(session_id) {
            return Err((
                INVALID_REQUEST,
                "Invalid Request: a prompt turn is already running in this session".to_owned(),
            ));
        }
        let (received, images) = prompt_content(params.get("prompt"), self.shared.config.images)
            .map_err(|message| (INVALID_PARAMS, format!("Invalid params: {message}")))?;
        let (text, kind) = session_trace(earlier.as_deref(), &received)?;
        let parsed = Prompt::parse(&text).map_err(|_| {
            (
                INVALID_PARAMS,
                format!(
                    "missing bridge framing: the prompt must contain the {BRIDGE_HEADER} and \
                     {TRACE_HEADER} headers"
                ),
            )
        })?;
        let (marker, unknown) = find_marker(parsed.last_user().unwrap_or_default());
        for name in &unknown {
            eprintln!("mock-devin: ignoring unknown marker [mock:{name}]");
            self.log("unknown_marker", json!({"marker": name}));
        }
        let (scenario, source) = match (marker, self.shared.config.scenario) {
            (Some(scenario), _) => (scenario, "marker"),
            (None, Some(scenario)) => (scenario, "MOCK_DEVIN_SCENARIO"),
            (None, None) => (Scenario::Script, "default"),
        };
        eprintln!(
            "mock-devin: prompt in {session_id}: scenario {} ({source})",
            scenario.name()
        );
        if scenario.hangs() {
            // Before the turn starts, so that an EOF read right after the prompt is ignored too.
            self.shared.hanging.store(true, Ordering::SeqCst);
        }

        let (events, inbox) = mpsc::channel();
        let done = Arc::new(AtomicBool::new(false));
        let turn = Turn {
            shared: Arc::clone(&self.shared),
            session_id: session_id.to_owned(),
            request_id: id.clone(),
            prompt: text.clone(),
            received: kind,
            received_chars: received.chars().count(),
            images,
            scenario,
            inbox,
            done: Arc::clone(&done),
        };
        std::thread::Builder::new()
            .name("turn".into())
            .spawn(move || turn.run())
            .map_err(|err| {
                (
                    INTERNAL_ERROR,
                    format!("Internal error: cannot start the turn: {err}"),
                )
            })?;
        self.sessions.insert(session_id.to_owned(), Some(text));
        self.turns
            .insert(session_id.to_owned(), RunningTurn { events, done });
        Ok(())
    }
}

/// The session's whole trace after `received`, and what kind of prompt it was: a framed prompt
/// starts (or restarts) the trace; a continuation or a lone repair section extends the trace
/// the session already has.
fn session_trace(earlier: Option<&str>, received: &str) -> Result<(String, &'static str), Refusal> {
    if Prompt::parse(received).is_ok() {
        return Ok((received.to_owned(), "full"));
    }
    let (addition, kind) = match continuation_trace(received) {
        Some(trace) => (trace, "continuation"),
        None if received.starts_with(REPAIR_HEADER) => (received, "repair"),
        None => {
            return Err((
                INVALID_PARAMS,
                format!(
                    "missing bridge framing: the prompt must contain the {BRIDGE_HEADER} and \
                     {TRACE_HEADER} headers, or continue this session's trace"
                ),
            ))
        }
    };
    let Some(earlier) = earlier else {
        return Err((
            INVALID_PARAMS,
            "Invalid params: a continuation needs an earlier prompt in this session".to_owned(),
        ));
    };
    let mut text = String::with_capacity(earlier.len() + SEPARATOR.len() + addition.len());
    text.push_str(earlier);
    if !addition.is_empty() {
        text.push_str(SEPARATOR);
        text.push_str(addition);
    }
    Ok((text, kind))
}

/// The media type of each image block of a prompt.
pub type Images = Vec<String>;

/// The prompt's text blocks joined by blank lines, and its images when `images` allows them
/// (each with a string `data` and `mimeType`). Other block types are refused.
pub(crate) fn prompt_content(
    prompt: Option<&Value>,
    images: bool,
) -> Result<(String, Images), String> {
    let blocks = prompt
        .and_then(Value::as_array)
        .ok_or("prompt must be an array of content blocks")?;
    let mut seen = Vec::new();
    let mut texts = Vec::with_capacity(blocks.len());
    for (index, block) in blocks.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => match block.get("text").and_then(Value::as_str) {
                Some(text) => texts.push(text),
                None => return Err(format!("prompt[{index}] is a text block without text")),
            },
            Some("image") if images => match (
                block.get("data").and_then(Value::as_str),
                block.get("mimeType").and_then(Value::as_str),
            ) {
                (Some(_), Some(mime)) => seen.push(mime.to_owned()),
                _ => {
                    return Err(format!(
                        "prompt[{index}] is an image without data and mimeType"
                    ))
                }
            },
            Some(other) => {
                return Err(format!(
                    "prompt[{index}] is a {other:?} block; this agent accepts only text"
                ))
            }
            None => return Err(format!("prompt[{index}] has no type")),
        }
    }
    if texts.is_empty() {
        return Err("prompt has no text block".to_owned());
    }
    Ok((texts.join("\n\n"), seen))
}

/// The prompt's text blocks, joined by blank lines. Other block types are refused: the
/// agent declares no image, audio or embedded-context support.
pub(crate) fn prompt_text(prompt: Option<&Value>) -> Result<String, String> {
    prompt_content(prompt, false).map(|(text, _)| text)
}

/// The session's cwd must be absolute and plain (no `.` or `..`), be `/home/bridge` or lie
/// under a `.sandbox` directory, and be the directory this process runs in.
pub fn check_cwd(cwd: &str) -> Result<(), String> {
    let path = Path::new(cwd);
    if !path.is_absolute() {
        return Err(format!("cwd {cwd:?} is not an absolute path"));
    }
    if path
        .components()
        .any(|c| matches!(c, Component::CurDir | Component::ParentDir))
    {
        return Err(format!("cwd {cwd:?} contains . or .. components"));
    }
    let components: Vec<Component<'_>> = path.components().collect();
    let under_sandbox = components
        .iter()
        .take(components.len().saturating_sub(1))
        .any(|c| c.as_os_str() == ".sandbox");
    if path != Path::new("/home/bridge") && !under_sandbox {
        return Err(format!(
            "cwd {cwd:?} is not a sandbox home: it must be /home/bridge or lie under a \
             /.sandbox/ directory"
        ));
    }
    let here = std::env::current_dir()
        .map_err(|err| format!("the agent's own working directory is unknown: {err}"))?;
    let same = here == path
        || matches!(
            (std::fs::canonicalize(path), std::fs::canonicalize(&here)),
            (Ok(a), Ok(b)) if a == b
        );
    if !same {
        return Err(format!(
            "cwd {cwd:?} is not the agent's working directory {:?}",
            here.display().to_string()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_rules() {
        assert!(check_cwd("relative/.sandbox/x")
            .unwrap_err()
            .contains("not an absolute path"));
        assert!(check_cwd("/tmp/.sandbox/../etc")
            .unwrap_err()
            .contains(".. components"));
        assert!(check_cwd("/tmp/.sandbox")
            .unwrap_err()
            .contains("not a sandbox home"));
        assert!(check_cwd("/tmp/home")
            .unwrap_err()
            .contains("not a sandbox home"));
        // Well-formed, but not where the test runs.
        assert!(check_cwd("/nowhere/.sandbox/home")
            .unwrap_err()
            .contains("not the agent's working directory"));
    }

    #[test]
    fn prompt_blocks() {
        let text = prompt_text(Some(
            &json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
        ));
        assert_eq!(text.as_deref(), Ok("a\n\nb"));
        assert!(prompt_text(Some(&json!([]))).is_err());
        assert!(prompt_text(Some(&json!("x"))).is_err());
        assert!(prompt_text(None).is_err());
        assert!(prompt_text(Some(&json!([{"type": "image", "data": ""}])))
            .unwrap_err()
            .contains("only text"));
    }
}
