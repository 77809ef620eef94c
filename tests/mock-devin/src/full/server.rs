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

use super::catalog::{self, DEFAULT_MODEL, NO_THOUGHT_LEVEL_MODEL};
use super::markers::{Outcome, Plan};
use super::permissions::Permissions;
use super::store::{self, Entry, Record, Role, Store, StoreError};
use super::turn::Turn;
use super::{Agent, CONFIG_EXIT};
use crate::rpc::{
    self, Incoming, AUTH_REQUIRED, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST,
    METHOD_NOT_FOUND, NOT_FOUND,
};
use crate::turn::Event;
use crate::{AGENT_NAME, AGENT_VERSION};

/// The session modes, `(id, name)`, in the order Devin lists them.
pub const MODES: [(&str, &str); 5] = [
    ("accept-edits", "Accept edits"),
    ("smart", "Smart"),
    ("ask", "Ask"),
    ("plan", "Plan"),
    ("bypass", "Bypass"),
];
pub const DEFAULT_MODE: &str = "smart";
pub const THOUGHT_LEVELS: [(&str, &str); 3] =
    [("low", "Low"), ("medium", "Medium"), ("high", "High")];
pub const DEFAULT_THOUGHT_LEVEL: &str = "medium";
pub const SPEEDS: [(&str, &str); 2] = [("standard", "Standard"), ("fast", "Fast")];
pub const DEFAULT_SPEED: &str = "standard";

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

fn not_found(what: &str) -> Refusal {
    (
        NOT_FOUND,
        "Resource not found".to_owned(),
        Some(json!({"uri": what})),
    )
}

/// How a request is answered.
enum Reply {
    /// Answer now.
    Now(Value),
    /// Answer now, then send these messages.
    NowThen(Value, Vec<Value>),
    /// A turn answers later.
    Later,
}

pub struct Server {
    agent: Arc<Agent>,
    store: Option<Store>,
    initialized: bool,
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

/// Signed in: `WINDSURF_API_KEY` is set, or the credentials file exists (a symlink to one
/// counts). The file's contents are never read.
pub fn authenticated() -> bool {
    if std::env::var_os("WINDSURF_API_KEY").is_some_and(|key| !key.is_empty()) {
        return true;
    }
    store::data_dir().is_some_and(|dir| std::fs::metadata(dir.join("credentials.toml")).is_ok())
}

fn auth_required() -> Refusal {
    (
        AUTH_REQUIRED,
        "Authentication required".to_owned(),
        Some(json!({"cognition.ai/errorKind": "Unauthenticated", "retryable": false})),
    )
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
    use std::io::Read;
    let mut bytes = [0u8; 8];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_err() {
        // No random source: the time and pid still differ between sessions and processes.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let mixed = (nanos as u64) ^ (u64::from(std::process::id()) << 40);
        bytes = mixed.to_be_bytes();
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("mock-{hex}")
}

fn select(id: &str, name: &str, category: &str, current: &str, options: Vec<Value>) -> Value {
    json!({
        "id": id,
        "name": name,
        "category": category,
        "type": "select",
        "currentValue": current,
        "options": options,
    })
}

fn pairs(values: &[(&str, &str)]) -> Vec<Value> {
    values
        .iter()
        .map(|(value, name)| json!({"value": value, "name": name}))
        .collect()
}

/// The session's `modes` object.
pub fn modes(record: &Record) -> Value {
    let available: Vec<Value> = MODES
        .iter()
        .map(|(id, name)| json!({"id": id, "name": name}))
        .collect();
    json!({"currentModeId": record.mode, "availableModes": available})
}

/// The session's config options; `thought_level` is not offered for GLM-5.2.
pub fn config_options(record: &Record) -> Value {
    let models: Vec<Value> = catalog::offered()
        .map(|(id, variant)| json!({"value": id, "name": variant.label}))
        .collect();
    let mut options = vec![
        select("mode", "Mode", "mode", &record.mode, pairs(&MODES)),
        select("model", "Model", "model", &record.model, models),
    ];
    if record.model != NO_THOUGHT_LEVEL_MODEL {
        options.push(select(
            "thought_level",
            "Thought level",
            "thought_level",
            &record.thought_level,
            pairs(&THOUGHT_LEVELS),
        ));
    }
    options.push(select(
        "speed",
        "Speed",
        "speed",
        &record.speed,
        pairs(&SPEEDS),
    ));
    Value::Array(options)
}

/// Sets one config option of `record`; the error names what is wrong.
pub fn set_option(record: &mut Record, id: &str, value: &str) -> Result<(), String> {
    let known = |values: &[(&str, &str)]| values.iter().any(|(v, _)| *v == value);
    match id {
        "mode" if known(&MODES) => record.mode = value.to_owned(),
        "model" if catalog::find_offered(value).is_some() => record.model = value.to_owned(),
        "thought_level" if record.model == NO_THOUGHT_LEVEL_MODEL => {
            return Err(format!(
                "config option `thought_level` is not offered for model {NO_THOUGHT_LEVEL_MODEL}"
            ))
        }
        "thought_level" if known(&THOUGHT_LEVELS) => record.thought_level = value.to_owned(),
        "speed" if known(&SPEEDS) => record.speed = value.to_owned(),
        "mode" | "model" | "thought_level" | "speed" => {
            return Err(format!("{value:?} is not a value of config option `{id}`"))
        }
        _ => return Err(format!("unknown config option {id:?}")),
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
                Ok(Reply::NowThen(result, after)) => {
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
            "authenticate" => Ok(Reply::Now(json!({}))),
            "session/new" => self.new_session(params).map(Reply::Now),
            "session/load" => self.load_session(params),
            "session/set_mode" => self.set_mode(params).map(Reply::Now),
            "session/set_config_option" => self.set_config_option(params).map(Reply::Now),
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
            _ => self.log("cancel_ignored", json!({"sessionId": session})),
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
        self.log("initialize", json!({}));
        Ok(json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false},
                "mcpCapabilities": {"http": false, "sse": false},
            },
            "agentInfo": {"name": AGENT_NAME, "version": AGENT_VERSION},
            "authMethods": [],
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

    fn new_session(&mut self, params: &Value) -> Result<Value, Refusal> {
        let params = params_object(params)?;
        let cwd = check_cwd(params)?;
        check_mcp_servers(params)?;
        let permissions = reload_permissions(&self.agent);
        if !authenticated() {
            return Err(auth_required());
        }
        let record = Record {
            session_id: new_session_id(),
            cwd: cwd.display().to_string(),
            mode: DEFAULT_MODE.to_owned(),
            model: DEFAULT_MODEL.to_owned(),
            thought_level: DEFAULT_THOUGHT_LEVEL.to_owned(),
            speed: DEFAULT_SPEED.to_owned(),
            history: Vec::new(),
        };
        self.save(&record)?;
        let (allow, deny) = permissions.summary();
        self.log(
            "session_new",
            json!({"sessionId": record.session_id, "cwd": record.cwd,
                   "allowRules": allow, "denyRules": deny}),
        );
        let answer = json!({
            "sessionId": record.session_id,
            "modes": modes(&record),
            "configOptions": config_options(&record),
        });
        self.sessions.insert(
            record.session_id.clone(),
            Arc::new(Mutex::new(Session {
                record,
                permissions,
            })),
        );
        Ok(answer)
    }

    fn load_session(&mut self, params: &Value) -> Result<Reply, Refusal> {
        let params = params_object(params)?;
        let session_id = string_param(params, "sessionId")?;
        let cwd = check_cwd(params)?;
        check_mcp_servers(params)?;
        let permissions = reload_permissions(&self.agent);
        if !authenticated() {
            return Err(auth_required());
        }
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
        let mut record = match self.store()?.load(session_id) {
            Ok(record) => record,
            Err(StoreError::NotFound(_) | StoreError::BadId(_)) => {
                return Err(not_found(session_id))
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
        let answer = json!({"modes": modes(&record), "configOptions": config_options(&record)});
        self.sessions.insert(
            record.session_id.clone(),
            Arc::new(Mutex::new(Session {
                record,
                permissions,
            })),
        );
        Ok(Reply::NowThen(answer, after))
    }

    fn session(&self, params: &Map<String, Value>) -> Result<(String, SessionRef), Refusal> {
        let session_id = string_param(params, "sessionId")?;
        let session = self
            .sessions
            .get(session_id)
            .ok_or_else(|| not_found(session_id))?;
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

    fn set_config_option(&mut self, params: &Value) -> Result<Value, Refusal> {
        let params = params_object(params)?;
        let (session_id, session) = self.session(params)?;
        let config_id = string_param(params, "configId")?;
        let value = string_param(params, "value")?;
        let record = {
            let mut session = lock(&session);
            let mut record = session.record.clone();
            set_option(&mut record, config_id, value).map_err(invalid)?;
            session.record = record.clone();
            record
        };
        self.save(&record)?;
        self.log(
            "set_config_option",
            json!({"sessionId": session_id, "configId": config_id, "value": value}),
        );
        Ok(json!({"configOptions": config_options(&record)}))
    }

    fn prompt(&mut self, params: &Value, id: &Value) -> Result<(), Refusal> {
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
            model: DEFAULT_MODEL.into(),
            thought_level: DEFAULT_THOUGHT_LEVEL.into(),
            speed: DEFAULT_SPEED.into(),
            history: Vec::new(),
        }
    }

    fn categories(options: &Value) -> Vec<&str> {
        options
            .as_array()
            .expect("options")
            .iter()
            .filter_map(|o| o["category"].as_str())
            .collect()
    }

    #[test]
    fn config_options_follow_the_model() {
        let mut record = record();
        let options = config_options(&record);
        assert_eq!(
            categories(&options),
            ["mode", "model", "thought_level", "speed"]
        );
        assert_eq!(options[1]["currentValue"], "swe-2");
        assert_eq!(options[2]["currentValue"], "medium");
        let models: Vec<&str> = options[1]["options"]
            .as_array()
            .expect("models")
            .iter()
            .filter_map(|o| o["value"].as_str())
            .collect();
        assert_eq!(
            models,
            ["swe-2", "swe-2-fast", "kimi-k3", "glm-5-2", "muse-wonder"]
        );
        set_option(&mut record, "thought_level", "high").expect("high");
        set_option(&mut record, "model", "glm-5-2").expect("glm");
        assert_eq!(
            categories(&config_options(&record)),
            ["mode", "model", "speed"]
        );
        assert!(set_option(&mut record, "thought_level", "low")
            .unwrap_err()
            .contains("not offered"));
        set_option(&mut record, "model", "kimi-k3").expect("kimi");
        // The earlier choice comes back with the option.
        assert_eq!(config_options(&record)[2]["currentValue"], "high");
        assert_eq!(model_label(&record), "Kimi K3");
    }

    #[test]
    fn unknown_options_and_values_are_refused() {
        let mut record = record();
        assert!(set_option(&mut record, "model", "legacy-9").is_err());
        assert!(set_option(&mut record, "model", "glm-5.2").is_err());
        assert!(set_option(&mut record, "speed", "ludicrous").is_err());
        assert!(set_option(&mut record, "colour", "red")
            .unwrap_err()
            .contains("unknown config option"));
        set_option(&mut record, "mode", "bypass").expect("mode");
        assert_eq!(modes(&record)["currentModeId"], "bypass");
        set_option(&mut record, "speed", "fast").expect("speed");
        assert_eq!(record.speed, "fast");
    }

    #[test]
    fn session_ids_are_unique_file_names() {
        let a = new_session_id();
        let b = new_session_id();
        assert_ne!(a, b);
        assert!(a.starts_with("mock-") && a.len() == 21, "{a}");
        assert!(store::valid_id(&a));
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
