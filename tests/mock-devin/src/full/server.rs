//! The full agent's reading loop: sessions (new, load, mode and config options, the session
//! database) and the answers to every client message. Turns run on their own thread
//! ([`super::turn`]).

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use super::catalog::{self, NO_THOUGHT_LEVEL_MODEL};
use super::markers::{Outcome, Plan};
use super::permissions::Permissions;
use super::store::{Entry, Record, Role, Store, StoreError};
use super::turn::Turn;
use super::{Agent, CONFIG_EXIT};
use crate::rpc::{
    self, Incoming, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND,
};
use crate::turn::Event;
use crate::wire::{self, Stats, TurnIds};
use crate::{AGENT_NAME, AGENT_VERSION};

use wire::{pairs, select, DEFAULT_MODE, MODES};
pub const THOUGHT_LEVELS: [(&str, &str); 3] =
    [("low", "Low"), ("medium", "Medium"), ("high", "High")];
pub const DEFAULT_THOUGHT_LEVEL: &str = "medium";

/// The config options sessions offer besides the mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// The model select (off with `MOCK_DEVIN_NO_MODEL_OPTION=1`).
    pub model: bool,
    /// The `thought_level` select (on with `MOCK_DEVIN_THOUGHT_LEVEL=1`).
    pub thought_level: bool,
}

impl Default for Features {
    fn default() -> Self {
        Self {
            model: true,
            thought_level: false,
        }
    }
}

/// A session of this process: its stored record and the rules read when it started.
pub struct Session {
    pub record: Record,
    pub permissions: Permissions,
}

pub type SessionRef = Arc<Mutex<Session>>;

/// Locks a session; a panicked turn leaves the record usable.
pub fn lock(session: &SessionRef) -> std::sync::MutexGuard<'_, Session> {
    session
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct RunningTurn {
    session_id: String,
    events: Sender<Event>,
    done: Arc<AtomicBool>,
}

impl RunningTurn {
    fn running(&self) -> bool {
        !self.done.load(Ordering::SeqCst)
    }
}

/// A refusal: JSON-RPC error code, message and optional data.
type Refusal = (i64, String, Option<Value>);

fn invalid(message: impl Into<String>) -> Refusal {
    (
        INVALID_PARAMS,
        format!("Invalid params: {}", message.into()),
        None,
    )
}

/// How a request is answered.
enum Reply {
    /// Answer now.
    Now(Value),
    /// Send the first messages, answer, then send the last ones.
    Around(Vec<Value>, Value, Vec<Value>),
    /// A turn answers later.
    Later,
}

pub struct Server {
    agent: Arc<Agent>,
    store: Option<Store>,
    initialized: bool,
    /// `Err(name)` when `initialize` named a client other than `windsurf`.
    identity: Result<(), String>,
    /// `authenticate` succeeded with an API key.
    key_login: bool,
    sessions: HashMap<String, SessionRef>,
    turn: Option<RunningTurn>,
}

fn params_object(params: &Value) -> Result<&Map<String, Value>, Refusal> {
    params
        .as_object()
        .ok_or_else(|| invalid("params must be an object"))
}

fn string_param<'a>(params: &'a Map<String, Value>, name: &str) -> Result<&'a str, Refusal> {
    params
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("missing or non-string field `{name}`")))
}

/// `cwd` must be an absolute path to an existing directory.
fn check_cwd(params: &Map<String, Value>) -> Result<PathBuf, Refusal> {
    let cwd = string_param(params, "cwd")?;
    let path = Path::new(cwd);
    if !path.is_absolute() {
        return Err(invalid(format!("cwd {cwd:?} is not an absolute path")));
    }
    if !path.is_dir() {
        return Err(invalid(format!("cwd {cwd:?} is not an existing directory")));
    }
    Ok(path.to_owned())
}

/// `mcpServers` must be present and an empty list: companion sessions take no MCP servers.
fn check_mcp_servers(params: &Map<String, Value>) -> Result<(), Refusal> {
    match params.get("mcpServers") {
        None => Err(invalid("missing field `mcpServers`")),
        Some(Value::Array(servers)) if servers.is_empty() => Ok(()),
        Some(Value::Array(_)) => Err(invalid(
            "mcpServers must be empty: this offline agent takes no MCP servers",
        )),
        Some(_) => Err(invalid("mcpServers must be an array")),
    }
}

/// Rereads `config.json` for a new or loaded session; the real CLI refuses a broken one, so
/// the process ends with status 78.
fn reload_permissions(agent: &Agent) -> Permissions {
    match Permissions::load() {
        Ok(permissions) => permissions,
        Err(err) => {
            eprintln!("mock-devin: devin config: {err}");
            agent.log.event("config_error", None, json!({}));
            std::process::exit(CONFIG_EXIT);
        }
    }
}

/// `mock-` and 16 random hex digits.
fn new_session_id() -> String {
    format!("mock-{}", wire::random_hex(8))
}

/// The session's `modes` object.
pub fn modes(record: &Record) -> Value {
    wire::modes(&record.mode)
}

/// The session's config options: the mode, the model (unless turned off) and, when turned on,
/// `thought_level` (not offered for GLM-5.2).
pub fn config_options(record: &Record, features: Features) -> Value {
    let models: Vec<(String, &str)> = catalog::offered()
        .map(|(id, variant)| (id, variant.label))
        .collect();
    let mut options = vec![wire::mode_option(&record.mode)];
    if features.model {
        options.push(wire::model_option(
            &record.model,
            models.iter().map(|(id, label)| (id.as_str(), *label)),
        ));
    }
    if features.thought_level && record.model != NO_THOUGHT_LEVEL_MODEL {
        options.push(select(
            "thought_level",
            "Thought level",
            "thought_level",
            &record.thought_level,
            pairs(&THOUGHT_LEVELS),
        ));
    }
    Value::Array(options)
}

/// Sets one config option of `record`; the error is the message of a -32602 answer.
pub fn set_option(
    record: &mut Record,
    features: Features,
    id: &str,
    value: &str,
) -> Result<(), String> {
    let known = |values: &[(&str, &str)]| values.iter().any(|(v, _)| *v == value);
    match id {
        "mode" if known(&MODES) => record.mode = value.to_owned(),
        "model" if features.model => {
            if catalog::find_offered(value).is_none() {
                let offered: Vec<String> = catalog::offered().map(|(id, _)| id).collect();
                return Err(wire::model_not_found_message(
                    value,
                    offered.iter().map(String::as_str),
                ));
            }
            record.model = value.to_owned();
        }
        "thought_level" if features.thought_level && record.model == NO_THOUGHT_LEVEL_MODEL => {
            return Err(format!(
                "Invalid params: config option `thought_level` is not offered for model \
                 {NO_THOUGHT_LEVEL_MODEL}"
            ))
        }
        "thought_level" if features.thought_level && known(&THOUGHT_LEVELS) => {
            record.thought_level = value.to_owned();
        }
        "mode" | "thought_level" if id == "mode" || features.thought_level => {
            return Err(format!(
                "Invalid params: {value:?} is not a value of config option `{id}`"
            ))
        }
        _ => return Err(format!("Invalid params: unknown config option {id:?}")),
    }
    Ok(())
}

/// The label of the session's model, from the catalog.
pub fn model_label(record: &Record) -> String {
    catalog::find_offered(&record.model)
        .map_or_else(|| record.model.clone(), |variant| variant.label.to_owned())
}

fn update(session_id: &str, update: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "session/update",
           "params": {"sessionId": session_id, "update": update}})
}

/// The history as `user_message_chunk` / `agent_message_chunk` notifications.
fn replay(record: &Record) -> Vec<Value> {
    record
        .history
        .iter()
        .map(|entry| {
            let kind = match entry.role {
                Role::User => "user_message_chunk",
                Role::Agent => "agent_message_chunk",
            };
            update(
                &record.session_id,
                json!({"sessionUpdate": kind, "content": {"type": "text", "text": entry.text}}),
            )
        })
        .collect()
}

impl Server {
    pub fn new(agent: Arc<Agent>) -> Self {
        let store = match Store::from_env() {
            Ok(store) => Some(store),
            Err(err) => {
                eprintln!("mock-devin: {err}; sessions cannot be created");
                None
            }
        };
        Self {
            agent,
            store,
            initialized: false,
            identity: Ok(()),
            key_login: false,
            sessions: HashMap::new(),
            turn: None,
        }
    }

    /// Reads and answers messages until stdin ends (or fails).
    pub fn serve<R: BufRead>(&mut self, input: &mut R) {
        let agent = self.agent.clone();
        rpc::serve_lines(input, &agent.out, |incoming| self.handle(incoming));
    }

    fn log(&self, event: &str, fields: Value) {
        self.agent.log.event(event, None, fields);
    }

    fn handle(&mut self, incoming: Incoming) {
        match incoming {
            Incoming::Invalid { id, code, message } => {
                eprintln!("mock-devin: invalid input: {message}");
                self.log("invalid_input", json!({"code": code}));
                self.agent.out.error(&id, code, &message, None);
            }
            Incoming::Request { id, method, params } => match self.request(&method, &params, &id) {
                Ok(Reply::Now(result)) => self.agent.out.respond(&id, result),
                Ok(Reply::Around(before, result, after)) => {
                    for message in &before {
                        self.agent.out.send(message);
                    }
                    self.agent.out.respond(&id, result);
                    for message in &after {
                        self.agent.out.send(message);
                    }
                }
                Ok(Reply::Later) => {}
                Err((code, message, data)) => {
                    eprintln!("mock-devin: {method} refused: {message}");
                    self.log(
                        "refused",
                        json!({"method": method, "code": code, "message": message}),
                    );
                    self.agent.out.error(&id, code, &message, data);
                }
            },
            Incoming::Notification { method, params } => self.notification(&method, &params),
            Incoming::Response { id, outcome } => match &self.turn {
                Some(turn) if turn.running() => {
                    if turn.events.send(Event::Response { id, outcome }).is_err() {
                        eprintln!("mock-devin: a response arrived after the turn ended");
                    }
                }
                _ => {
                    eprintln!("mock-devin: ignoring a response to unknown request id {id}");
                    self.log("stray_client_response", json!({"id": id}));
                }
            },
        }
    }

    fn request(&mut self, method: &str, params: &Value, id: &Value) -> Result<Reply, Refusal> {
        if method != "initialize" && !self.initialized {
            return Err((
                INVALID_REQUEST,
                format!("Invalid Request: {method} before initialize"),
                None,
            ));
        }
        match method {
            "initialize" => self.initialize(params).map(Reply::Now),
            "authenticate" => self.authenticate(params).map(Reply::Now),
            "session/new" => self.new_session(params),
            "session/load" => self.load_session(params),
            "session/list" => self.list_sessions(params).map(Reply::Now),
            "session/delete" => self.delete_session(params).map(Reply::Now),
            "session/set_mode" => self.set_mode(params).map(Reply::Now),
            "session/set_config_option" => self.set_config_option(params),
            "session/prompt" => self.prompt(params, id).map(|()| Reply::Later),
            _ => Err((
                METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
                None,
            )),
        }
    }

    fn notification(&mut self, method: &str, params: &Value) {
        if method != "session/cancel" {
            return;
        }
        let session = params.get("sessionId").and_then(Value::as_str);
        match &self.turn {
            Some(turn) if turn.running() && Some(turn.session_id.as_str()) == session => {
                self.log("cancel", json!({"sessionId": session}));
                let _ = turn.events.send(Event::Cancel);
            }
            _ => match session.and_then(|id| self.sessions.get(id).map(|s| (id, s))) {
                // An idle session still reports that it stopped.
                Some((id, session)) => {
                    self.log("cancel_idle", json!({"sessionId": id}));
                    let label = model_label(&lock(session).record);
                    self.agent.out.notify(
                        "_cognition.ai/agent_stopped",
                        wire::agent_stopped(
                            id,
                            "cancelled",
                            &Stats::default(),
                            &TurnIds::new().request,
                            &label,
                        ),
                    );
                }
                None => self.log("cancel_ignored", json!({"sessionId": session})),
            },
        }
    }

    /// `authenticate {methodId: "devin-browser", _meta: {api_key}}`: a key signs the process
    /// in; without one the real CLI would open a browser, which never happens here.
    /// A session with a running turn may not be loaded or deleted under it.
    fn refuse_if_running(&self, session_id: &str) -> Result<(), Refusal> {
        if self
            .turn
            .as_ref()
            .is_some_and(|turn| turn.running() && turn.session_id == session_id)
        {
            return Err((
                INVALID_REQUEST,
                "Invalid Request: the session has a running turn".to_owned(),
                None,
            ));
        }
        Ok(())
    }

    fn authenticate(&mut self, params: &Value) -> Result<Value, Refusal> {
        let answer = wire::answer_authenticate(params, |event, fields| self.log(event, fields))?;
        self.key_login = true;
        Ok(answer)
    }

    /// Signed in: the credentials file exists (a symlink to one counts; never read), or
    /// `authenticate` succeeded with a key.
    fn signed_in(&self) -> bool {
        self.key_login || wire::credentials_exist()
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
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false},
                "mcpCapabilities": {"http": false, "sse": false},
                "sessionCapabilities": wire::session_capabilities(),
            },
            "agentInfo": {"name": AGENT_NAME, "version": AGENT_VERSION},
            "authMethods": wire::auth_methods(),
        }))
    }

    fn store(&self) -> Result<&Store, Refusal> {
        self.store.as_ref().ok_or_else(|| {
            (
                INTERNAL_ERROR,
                "Internal error: no session database (neither XDG_DATA_HOME nor HOME is set)"
                    .to_owned(),
                None,
            )
        })
    }

    fn save(&self, record: &Record) -> Result<(), Refusal> {
        self.store()?.save(record).map_err(|err| {
            eprintln!("mock-devin: {err}");
            (
                INTERNAL_ERROR,
                "Internal error: cannot store the session".to_owned(),
                None,
            )
        })
    }

    fn new_session(&mut self, params: &Value) -> Result<Reply, Refusal> {
        let params = params_object(params)?;
        let cwd = check_cwd(params)?;
        check_mcp_servers(params)?;
        let permissions = reload_permissions(&self.agent);
        if !self.signed_in() {
            return Err(wire::not_authenticated());
        }
        let record = Record {
            session_id: new_session_id(),
            cwd: cwd.display().to_string(),
            mode: DEFAULT_MODE.to_owned(),
            model: self.agent.start_model.clone(),
            thought_level: DEFAULT_THOUGHT_LEVEL.to_owned(),
            history: Vec::new(),
        };
        self.save(&record)?;
        let (allow, deny) = permissions.summary();
        self.log(
            "session_new",
            json!({"sessionId": record.session_id, "cwd": record.cwd,
                   "allowRules": allow, "denyRules": deny}),
        );
        let options = config_options(&record, self.agent.features);
        let before = vec![wire::config_option_update(&record.session_id, &options)];
        let answer = json!({
            "sessionId": record.session_id,
            "modes": modes(&record),
            "configOptions": options,
        });
        self.sessions.insert(
            record.session_id.clone(),
            Arc::new(Mutex::new(Session {
                record,
                permissions,
            })),
        );
        Ok(Reply::Around(before, answer, vec![wire::servers_changed()]))
    }

    fn load_session(&mut self, params: &Value) -> Result<Reply, Refusal> {
        let params = params_object(params)?;
        let session_id = string_param(params, "sessionId")?;
        let cwd = check_cwd(params)?;
        check_mcp_servers(params)?;
        let permissions = reload_permissions(&self.agent);
        if !self.signed_in() {
            return Err(wire::not_authenticated());
        }
        self.refuse_if_running(session_id)?;
        let mut record = match self.store()?.load(session_id) {
            Ok(record) => record,
            Err(StoreError::NotFound(_) | StoreError::BadId(_)) => {
                return Err(wire::session_not_found())
            }
            Err(err) => {
                eprintln!("mock-devin: {err}");
                return Err((
                    INTERNAL_ERROR,
                    "Internal error: cannot read the session".to_owned(),
                    None,
                ));
            }
        };
        record.cwd = cwd.display().to_string();
        let mut updates = replay(&record);
        let replay_late = record
            .history
            .iter()
            .find(|entry| entry.role == Role::User)
            .is_some_and(|entry| Plan::parse(&entry.text).replay_after_answer);
        let after = if replay_late {
            updates.pop().into_iter().collect()
        } else {
            Vec::new()
        };
        for message in &updates {
            self.agent.out.send(message);
        }
        self.log(
            "session_load",
            json!({"sessionId": record.session_id, "cwd": record.cwd,
                   "replayed": updates.len() + after.len(), "replayAfterAnswer": replay_late}),
        );
        let answer = json!({"modes": modes(&record),
                            "configOptions": config_options(&record, self.agent.features)});
        self.sessions.insert(
            record.session_id.clone(),
            Arc::new(Mutex::new(Session {
                record,
                permissions,
            })),
        );
        Ok(Reply::Around(Vec::new(), answer, after))
    }

    fn session(&self, params: &Map<String, Value>) -> Result<(String, SessionRef), Refusal> {
        let session_id = string_param(params, "sessionId")?;
        let session = self
            .sessions
            .get(session_id)
            .ok_or_else(wire::session_not_found)?;
        Ok((session_id.to_owned(), Arc::clone(session)))
    }

    fn set_mode(&mut self, params: &Value) -> Result<Value, Refusal> {
        let params = params_object(params)?;
        let (session_id, session) = self.session(params)?;
        let mode = string_param(params, "modeId")?;
        if !MODES.iter().any(|(id, _)| *id == mode) {
            return Err(invalid(format!("unknown mode {mode:?}")));
        }
        let record = {
            let mut session = lock(&session);
            session.record.mode = mode.to_owned();
            session.record.clone()
        };
        self.save(&record)?;
        self.log("set_mode", json!({"sessionId": session_id, "modeId": mode}));
        Ok(json!({}))
    }

    /// An update with the new options, then the answer with all of them.
    fn set_config_option(&mut self, params: &Value) -> Result<Reply, Refusal> {
        let params = params_object(params)?;
        let (session_id, session) = self.session(params)?;
        let config_id = string_param(params, "configId")?;
        let value = string_param(params, "value")?;
        let features = self.agent.features;
        let record = {
            let mut session = lock(&session);
            let mut record = session.record.clone();
            set_option(&mut record, features, config_id, value)
                .map_err(|message| (INVALID_PARAMS, message, None))?;
            session.record = record.clone();
            record
        };
        self.save(&record)?;
        self.log(
            "set_config_option",
            json!({"sessionId": session_id, "configId": config_id, "value": value}),
        );
        let options = config_options(&record, features);
        Ok(Reply::Around(
            vec![wire::config_option_update(&session_id, &options)],
            json!({"configOptions": options}),
            Vec::new(),
        ))
    }

    /// The stored sessions (of `cwd` when given), newest first.
    fn list_sessions(&self, params: &Value) -> Result<Value, Refusal> {
        let cwd = params.get("cwd").and_then(Value::as_str);
        let records = self.store()?.list().map_err(|err| {
            eprintln!("mock-devin: {err}");
            (
                INTERNAL_ERROR,
                "Internal error: cannot list the sessions".to_owned(),
                None,
            )
        })?;
        let sessions: Vec<Value> = records
            .iter()
            .filter(|(record, _)| cwd.is_none_or(|cwd| record.cwd == cwd))
            .map(|(record, updated)| {
                json!({"sessionId": record.session_id, "cwd": record.cwd, "updatedAt": updated})
            })
            .collect();
        self.log("session_list", json!({"count": sessions.len()}));
        Ok(json!({"sessions": sessions}))
    }

    /// Forgets a session and removes its stored file.
    fn delete_session(&mut self, params: &Value) -> Result<Value, Refusal> {
        let params = params_object(params)?;
        let session_id = string_param(params, "sessionId")?;
        self.refuse_if_running(session_id)?;
        let known = self.sessions.remove(session_id).is_some();
        let removed = match self.store()?.delete(session_id) {
            Ok(removed) => removed,
            Err(StoreError::BadId(_)) => false,
            Err(err) => {
                eprintln!("mock-devin: {err}");
                return Err((
                    INTERNAL_ERROR,
                    "Internal error: cannot delete the session".to_owned(),
                    None,
                ));
            }
        };
        if !known && !removed {
            return Err(wire::session_not_found());
        }
        self.log("session_delete", json!({"sessionId": session_id}));
        Ok(json!({}))
    }

    fn prompt(&mut self, params: &Value, id: &Value) -> Result<(), Refusal> {
        if let Err(name) = &self.identity {
            // The backend refuses every prompt of a client that is not `windsurf`.
            eprintln!("mock-devin: client {name:?} is not windsurf: prompt refused");
            self.log("identity_refused", json!({"clientName": name}));
            return Err(wire::out_of_date());
        }
        let params = params_object(params)?;
        let (session_id, session) = self.session(params)?;
        if self.turn.as_ref().is_some_and(RunningTurn::running) {
            return Err((
                INVALID_REQUEST,
                "Invalid Request: a prompt turn is already running".to_owned(),
                None,
            ));
        }
        let text = crate::server::prompt_text(params.get("prompt")).map_err(invalid)?;
        let mut plan = Plan::parse(&text);
        if crate::full::markers::marker_bodies(&text).is_empty() {
            if let Some(default) = &self.agent.default_markers {
                plan = Plan::parse(default);
            }
        }
        for name in &plan.unknown {
            eprintln!("mock-devin: ignoring unknown marker [mock:{name}]");
            self.log("unknown_marker", json!({"marker": name}));
        }
        if plan.outcome == Outcome::Hang {
            // Before the turn starts, so that an EOF read right after the prompt is ignored.
            self.agent.hanging.store(true, Ordering::SeqCst);
        }
        if plan.late_close {
            self.agent.late_close.store(true, Ordering::SeqCst);
        }
        let store = self.store()?.clone();
        let (events, inbox) = mpsc::channel();
        let done = Arc::new(AtomicBool::new(false));
        let turn = Turn::new(
            Arc::clone(&self.agent),
            store,
            session,
            id.clone(),
            text,
            plan,
            inbox,
            Arc::clone(&done),
        );
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
        self.turn = Some(RunningTurn {
            session_id,
            events,
            done,
        });
        Ok(())
    }
}

/// Appends one turn to the record.
pub fn record_turn(record: &mut Record, prompt: &str, reply: &str) {
    record.history.push(Entry {
        role: Role::User,
        text: prompt.to_owned(),
    });
    record.history.push(Entry {
        role: Role::Agent,
        text: reply.to_owned(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            session_id: "mock-1".into(),
            cwd: "/w".into(),
            mode: DEFAULT_MODE.into(),
            model: catalog::DEFAULT_MODEL.into(),
            thought_level: DEFAULT_THOUGHT_LEVEL.into(),
            history: Vec::new(),
        }
    }

    const THOUGHT: Features = Features {
        model: true,
        thought_level: true,
    };

    fn categories(options: &Value) -> Vec<&str> {
        options
            .as_array()
            .expect("options")
            .iter()
            .filter_map(|o| o["category"].as_str())
            .collect()
    }

    #[test]
    fn config_options_are_the_mode_and_the_model_by_default() {
        let mut record = record();
        let options = config_options(&record, Features::default());
        assert_eq!(categories(&options), ["mode", "model"]);
        assert_eq!(options[0]["currentValue"], "accept-edits");
        assert_eq!(options[1]["currentValue"], "swe-2");
        assert_eq!(options[1]["id"], "model");
        let models: Vec<&str> = options[1]["options"]
            .as_array()
            .expect("models")
            .iter()
            .filter_map(|o| o["value"].as_str())
            .collect();
        assert_eq!(
            models,
            [
                "swe-2",
                "swe-2-fast",
                "swe-2-high",
                "kimi-k3",
                "glm-5-2",
                "muse-wonder"
            ]
        );
        // Without the thought-level switch there is no such option to set.
        assert!(
            set_option(&mut record, Features::default(), "thought_level", "high")
                .unwrap_err()
                .contains("unknown config option")
        );
        assert!(set_option(&mut record, Features::default(), "speed", "fast").is_err());
        // Without the model option only --model picks the model.
        let none = Features {
            model: false,
            thought_level: false,
        };
        assert_eq!(categories(&config_options(&record, none)), ["mode"]);
        assert!(set_option(&mut record, none, "model", "kimi-k3").is_err());
    }

    #[test]
    fn thought_level_follows_the_model_when_switched_on() {
        let mut record = record();
        let options = config_options(&record, THOUGHT);
        assert_eq!(categories(&options), ["mode", "model", "thought_level"]);
        assert_eq!(options[2]["currentValue"], "medium");
        set_option(&mut record, THOUGHT, "thought_level", "high").expect("high");
        set_option(&mut record, THOUGHT, "model", "glm-5-2").expect("glm");
        assert_eq!(
            categories(&config_options(&record, THOUGHT)),
            ["mode", "model"]
        );
        assert!(set_option(&mut record, THOUGHT, "thought_level", "low")
            .unwrap_err()
            .contains("not offered"));
        set_option(&mut record, THOUGHT, "model", "kimi-k3").expect("kimi");
        // The earlier choice comes back with the option.
        assert_eq!(config_options(&record, THOUGHT)[2]["currentValue"], "high");
        assert_eq!(model_label(&record), "Kimi K3");
    }

    #[test]
    fn unknown_options_and_values_are_refused() {
        let mut record = record();
        let features = Features::default();
        for model in ["legacy-9", "adaptive", "glm-5.2"] {
            let message = set_option(&mut record, features, "model", model).unwrap_err();
            assert!(
                message.starts_with(&format!(
                    "Model not found: {model}. Available models: swe-2, "
                )),
                "{message}"
            );
        }
        assert!(set_option(&mut record, features, "colour", "red")
            .unwrap_err()
            .contains("unknown config option"));
        assert!(set_option(&mut record, features, "mode", "yolo").is_err());
        set_option(&mut record, features, "mode", "bypass").expect("mode");
        assert_eq!(modes(&record)["currentModeId"], "bypass");
        set_option(&mut record, features, "model", "swe-2-high").expect("effort variant");
        assert_eq!(model_label(&record), "SWE-2 High");
    }

    #[test]
    fn session_ids_are_unique_file_names() {
        let a = new_session_id();
        let b = new_session_id();
        assert_ne!(a, b);
        assert!(a.starts_with("mock-") && a.len() == 21, "{a}");
        assert!(crate::full::store::valid_id(&a));
    }

    #[test]
    fn replay_follows_the_history() {
        let mut record = record();
        record_turn(&mut record, "do it", "done");
        let messages = replay(&record);
        assert_eq!(messages.len(), 2);
        assert_eq!(
            messages[0]["params"]["update"]["sessionUpdate"],
            "user_message_chunk"
        );
        assert_eq!(messages[1]["params"]["update"]["content"]["text"], "done");
        assert_eq!(record.turns(), 1);
    }
}
