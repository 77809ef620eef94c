//! The reading loop: protocol state (initialized, the client's identity, sign-in, sessions,
//! the running turns) and the answers to every client message.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::rpc::{
    self, Incoming, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND,
};
use crate::scenario::{find_marker, Scenario};
use crate::trace::{
    continuation_trace, Prompt, BRIDGE_HEADER, REPAIR_HEADER, SEPARATOR, TRACE_HEADER,
};
use crate::turn::{Event, Turn};
use crate::wire::{self, Refusal, Stats, TurnIds};
use crate::{Shared, AGENT_NAME, AGENT_VERSION};

/// The summarizer agent's models, `(ACP id, label)`, in the order `session/new` offers them
/// (the catalog of `policies/models.json`, with `.` and `_` spelled `-`).
pub const MODELS: [(&str, &str); 8] = [
    ("swe-1-7", "SWE-1.7"),
    ("swe-1-7-lightning", "SWE-1.7 Lightning"),
    ("swe-1-6", "SWE-1.6"),
    ("swe-1-6-fast", "SWE-1.6 Fast"),
    ("swe-2", "SWE-2"),
    ("kimi-k3", "Kimi K3"),
    ("glm-5-2", "GLM 5.2"),
    ("muse-wonder", "Muse Wonder"),
];
/// The model a session starts with unless `--model` says otherwise.
pub const DEFAULT_MODEL: &str = "swe-1-7";

/// The label of a summarizer model (its id when unknown).
pub fn model_label(id: &str) -> &str {
    MODELS
        .iter()
        .find(|(value, _)| *value == id)
        .map_or(id, |(_, label)| label)
}

struct RunningTurn {
    events: Sender<Event>,
    done: Arc<AtomicBool>,
}

impl RunningTurn {
    fn running(&self) -> bool {
        !self.done.load(Ordering::SeqCst)
    }
}

/// One session of this process.
struct Session {
    /// The trace it has received so far (framed as a full prompt).
    trace: Option<String>,
    cwd: String,
    /// The ACP id of its current model.
    model: String,
}

pub struct Server {
    shared: Arc<Shared>,
    initialized: bool,
    /// `Err(name)` when `initialize` named a client other than `windsurf`.
    identity: Result<(), String>,
    /// `authenticate` succeeded with an API key.
    key_login: bool,
    sessions: BTreeMap<String, Session>,
    sessions_created: u64,
    /// The running turn of each session (sessions run their turns in parallel).
    turns: HashMap<String, RunningTurn>,
}

fn invalid(message: impl Into<String>) -> Refusal {
    (
        INVALID_PARAMS,
        format!("Invalid params: {}", message.into()),
        None,
    )
}

fn params_object(params: &Value) -> Result<&serde_json::Map<String, Value>, Refusal> {
    params
        .as_object()
        .ok_or_else(|| invalid("params must be an object"))
}

fn session_param(params: &Value) -> Result<&str, Refusal> {
    params_object(params)?
        .get("sessionId")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("missing sessionId"))
}

impl Server {
    pub fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            initialized: false,
            identity: Ok(()),
            key_login: false,
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
                    Ok(None) => {} // answered already, or a turn answers later
                    Err((code, message, data)) => {
                        eprintln!("mock-devin: {method} refused: {message}");
                        self.log(
                            "refused",
                            json!({"method": method, "code": code, "message": message}),
                        );
                        self.shared.out.error(&id, code, &message, data);
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

    /// `Ok(Some(result))` answers now, `Ok(None)` means it is answered already or a turn
    /// will answer.
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
                None,
            ));
        }
        match method {
            "initialize" => self.initialize(params).map(Some),
            "authenticate" => self.authenticate(params).map(Some),
            "session/new" => self.new_session(params, id).map(|()| None),
            "session/load" => self.load_session(params).map(Some),
            "session/list" => Ok(Some(self.list_sessions())),
            "session/delete" => self.delete_session(params).map(Some),
            "session/set_config_option" => self.set_config_option(params, id).map(|()| None),
            "session/prompt" => self.prompt(params, id).map(|()| None),
            "session/set_mode" => Err(invalid(
                "session/set_mode is refused: the summarizer agent's mode cannot be changed",
            )),
            _ => Err((
                METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
                None,
            )),
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
            _ => match session.and_then(|id| self.sessions.get(id).map(|s| (id, s))) {
                // An idle session still reports that it stopped.
                Some((id, state)) => {
                    self.log("cancel_idle", json!({"sessionId": id}));
                    let ids = TurnIds::new();
                    self.shared.out.notify(
                        "_cognition.ai/agent_stopped",
                        wire::agent_stopped(
                            id,
                            "cancelled",
                            &Stats::default(),
                            &ids.request,
                            model_label(&state.model),
                        ),
                    );
                }
                None => self.log("cancel_ignored", json!({"sessionId": session})),
            },
        }
    }

    fn initialize(&mut self, params: &Value) -> Result<Value, Refusal> {
        let version = params_object(params)?.get("protocolVersion");
        if version.and_then(Value::as_u64) != Some(1) {
            return Err(invalid(format!(
                "unsupported protocolVersion {}; this agent speaks protocol 1",
                version.map_or_else(|| "(missing)".to_owned(), Value::to_string)
            )));
        }
        self.initialized = true;
        self.identity = wire::client_identity(params);
        let client = params.pointer("/clientInfo/name").and_then(Value::as_str);
        self.log(
            "initialize",
            json!({"clientName": client, "clientAccepted": self.identity.is_ok()}),
        );
        Ok(json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": self.shared.config.images, "audio": false, "embeddedContext": false},
                "sessionCapabilities": wire::session_capabilities(),
            },
            "agentInfo": {"name": AGENT_NAME, "version": AGENT_VERSION},
            "authMethods": wire::auth_methods(),
        }))
    }

    /// `authenticate {methodId: "devin-browser", _meta: {api_key}}` signs the process in; without
    /// a key the real CLI would open a browser, which cannot happen here.
    fn authenticate(&mut self, params: &Value) -> Result<Value, Refusal> {
        let answer = wire::answer_authenticate(params, |event, fields| self.log(event, fields))?;
        self.key_login = true;
        Ok(answer)
    }

    /// Signed in: credentials on disk, an API-key login, or (the default of this agent, which
    /// tests start without an account home) `MOCK_DEVIN_LOGGED_OUT` is not `1`.
    fn signed_in(&self) -> bool {
        !self.shared.config.logged_out || self.key_login || wire::credentials_exist()
    }

    /// The session's config options: the mode, and the model unless
    /// `MOCK_DEVIN_NO_MODEL_OPTION=1`.
    fn config_options(&self, model: &str) -> Value {
        let mut options = vec![wire::mode_option(wire::DEFAULT_MODE)];
        if !self.shared.config.no_model_option {
            options.push(wire::model_option(model, MODELS.iter().copied()));
        }
        Value::Array(options)
    }

    fn new_session(&mut self, params: &Value, id: &Value) -> Result<(), Refusal> {
        let params = params_object(params)?;
        let cwd = params
            .get("cwd")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("cwd must be an absolute path (a string)"))?;
        check_cwd(cwd).map_err(invalid)?;
        match params.get("mcpServers") {
            None => return Err(invalid("missing field `mcpServers`")),
            Some(Value::Array(servers)) if servers.is_empty() => {}
            Some(Value::Array(_)) => {
                return Err(invalid(
                    "mcpServers must be empty: the summarizer agent takes no MCP servers",
                ))
            }
            Some(_) => return Err(invalid("mcpServers must be an array")),
        }
        if !self.signed_in() {
            return Err(wire::not_authenticated());
        }
        self.sessions_created += 1;
        let session_id = format!("mock-session-{}", self.sessions_created);
        let model = self.shared.config.model.clone();
        let options = self.config_options(&model);
        self.sessions.insert(
            session_id.clone(),
            Session {
                trace: None,
                cwd: cwd.to_owned(),
                model: model.clone(),
            },
        );
        self.log(
            "session_new",
            json!({"sessionId": session_id, "model": model}),
        );
        // As the CLI does: the options as an update first, then the answer.
        self.shared
            .out
            .send(&wire::config_option_update(&session_id, &options));
        self.shared.out.respond(
            id,
            json!({"sessionId": session_id, "modes": wire::modes(wire::DEFAULT_MODE), "configOptions": options}),
        );
        self.shared.out.send(&wire::servers_changed());
        Ok(())
    }

    /// Sessions live in this process only: a load finds one of them, replays nothing.
    fn load_session(&mut self, params: &Value) -> Result<Value, Refusal> {
        let session_id = session_param(params)?;
        if !self.signed_in() {
            return Err(wire::not_authenticated());
        }
        let Some(session) = self.sessions.get(session_id) else {
            self.log(
                "session_load",
                json!({"sessionId": session_id, "found": false}),
            );
            return Err(wire::session_not_found());
        };
        self.log(
            "session_load",
            json!({"sessionId": session_id, "found": true}),
        );
        Ok(
            json!({"configOptions": self.config_options(&session.model), "modes": wire::modes(wire::DEFAULT_MODE)}),
        )
    }

    fn list_sessions(&self) -> Value {
        let sessions: Vec<Value> = self
            .sessions
            .iter()
            .map(|(id, session)| json!({"sessionId": id, "cwd": session.cwd}))
            .collect();
        self.log("session_list", json!({"count": sessions.len()}));
        json!({"sessions": sessions})
    }

    fn delete_session(&mut self, params: &Value) -> Result<Value, Refusal> {
        let session_id = session_param(params)?.to_owned();
        if self.sessions.remove(&session_id).is_none() {
            return Err(wire::session_not_found());
        }
        if let Some(turn) = self.turns.remove(&session_id) {
            let _ = turn.events.send(Event::Cancel);
        }
        self.log("session_delete", json!({"sessionId": session_id}));
        Ok(json!({}))
    }

    /// `session/set_config_option {sessionId, configId: "model", value}`: an update, then the
    /// answer with every option. The mode cannot be changed.
    fn set_config_option(&mut self, params: &Value, id: &Value) -> Result<(), Refusal> {
        let session_id = session_param(params)?.to_owned();
        let config_id = params.get("configId").and_then(Value::as_str);
        let value = params
            .get("value")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("missing value"))?;
        if !self.sessions.contains_key(&session_id) {
            return Err(wire::session_not_found());
        }
        match config_id {
            Some("model") if !self.shared.config.no_model_option => {}
            Some("mode") => return Err(invalid("the summarizer agent's mode cannot be changed")),
            other => return Err(invalid(format!("unknown config option {other:?}"))),
        }
        if !MODELS.iter().any(|(model, _)| *model == value) {
            return Err((
                INVALID_PARAMS,
                wire::model_not_found_message(value, MODELS.iter().map(|(id, _)| *id)),
                None,
            ));
        }
        if let Some(session) = self.sessions.get_mut(&session_id) {
            session.model = value.to_owned();
        }
        self.log(
            "set_config_option",
            json!({"sessionId": session_id, "configId": "model", "value": value}),
        );
        let options = self.config_options(value);
        self.shared
            .out
            .send(&wire::config_option_update(&session_id, &options));
        self.shared
            .out
            .respond(id, json!({"configOptions": options}));
        Ok(())
    }

    fn prompt(&mut self, params: &Value, id: &Value) -> Result<(), Refusal> {
        if let Err(name) = &self.identity {
            // The backend refuses every prompt of a client that is not `windsurf`.
            eprintln!("mock-devin: client {name:?} is not windsurf: prompt refused");
            self.log("identity_refused", json!({"clientName": name}));
            return Err(wire::out_of_date());
        }
        let params = params_object(params)?;
        let session_id = params
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("missing sessionId"))?;
        let Some(session) = self.sessions.get(session_id) else {
            return Err(wire::session_not_found());
        };
        let earlier = session.trace.clone();
        let model = session.model.clone();
        self.turns.retain(|_, turn| turn.running());
        if self.turns.contains_key(session_id) {
            return Err((
                INVALID_REQUEST,
                "Invalid Request: a prompt turn is already running in this session".to_owned(),
                None,
            ));
        }
        let (received, images) =
            prompt_content(params.get("prompt"), self.shared.config.images).map_err(invalid)?;
        let (text, kind) = session_trace(earlier.as_deref(), &received)?;
        let parsed = Prompt::parse(&text).map_err(|_| {
            (
                INVALID_PARAMS,
                format!(
                    "missing bridge framing: the prompt must contain the {BRIDGE_HEADER} and \
                     {TRACE_HEADER} headers"
                ),
                None,
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
            model,
            ids: TurnIds::new(),
            started: std::time::Instant::now(),
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
                    None,
                )
            })?;
        if let Some(session) = self.sessions.get_mut(session_id) {
            session.trace = Some(text);
        }
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
                None,
            ))
        }
    };
    let Some(earlier) = earlier else {
        return Err(invalid(
            "a continuation needs an earlier prompt in this session",
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
