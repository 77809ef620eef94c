//! The reading loop of both agents: start-up, protocol state (initialized, the client's
//! identity, sign-in, sessions, the running turns), the answers to every client message, and
//! the end at stdin EOF. Whatever the summarizer and the full agent do differently is read from
//! the [`Profile`]; a prompt's turn is decided by the profile's dialect ([`crate::bridge`] or
//! [`crate::full::markers`]) and played by [`crate::turn`] on its own thread.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::bridge;
use crate::cli::AGENT_VERSION;
use crate::full::markers;
use crate::full::permissions::Permissions;
use crate::full::store::{Record, Role, Store, StoreError};
use crate::log::Log;
use crate::profile::{Concurrency, Dialect, LogoutStyle, Persistence, Profile, Workspace};
use crate::rpc::{
    self, Incoming, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND,
};
use crate::session::{
    config_options, lock, offers_thought_level, replay, set_option, Session, SessionRef,
    DEFAULT_THOUGHT_LEVEL,
};
use crate::shared::{Shared, LATE_CLOSE};
use crate::turn::{Event, Turn};
use crate::wire::{self, Refusal, Stats, TurnIds, DEFAULT_MODE, MODES};

/// Exit status when `config.json` is missing or malformed (EX_CONFIG).
pub(crate) const CONFIG_EXIT: i32 = 78;
/// Serves the agent of `profile` on stdin/stdout; never returns.
pub(crate) fn run(profile: Profile) -> ! {
    let log = Log::new(profile.log.clone());
    let here = std::env::current_dir()
        .map(|dir| dir.display().to_string())
        .unwrap_or_default();
    log.event(
        "start",
        profile.default_scenario(),
        json!({"version": AGENT_VERSION, "agent": profile.agent.name(),
               "args": profile.agent.args(), "cwd": here, "model": profile.start_model,
               "modelOption": profile.model_option, "thoughtLevel": profile.thought_level,
               "images": profile.images, "logoutStyle": profile.logout_style.name(),
               "environmentKey": wire::environment_key()}),
    );
    // The real CLI refuses to start without its configuration.
    if profile.config_file {
        if let Err(err) = Permissions::load() {
            eprintln!("mock-devin: devin config: {err}");
            log.event("config_error", None, json!({}));
            std::process::exit(CONFIG_EXIT);
        }
    }
    if !profile.startup.is_zero() {
        std::thread::sleep(profile.startup);
    }
    let shared = Arc::new(Shared {
        out: rpc::Output::stdout(),
        log,
        profile,
        hanging: AtomicBool::new(false),
        late_close: AtomicBool::new(false),
    });
    let mut input = BufReader::with_capacity(64 * 1024, std::io::stdin());
    Server::new(Arc::clone(&shared)).serve(&mut input);

    if shared.hanging.load(Ordering::SeqCst) {
        shared.log.event("eof_ignored", None, json!({}));
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    if shared.late_close.load(Ordering::SeqCst) {
        shared.log.event(
            "eof_late_close",
            None,
            json!({"seconds": LATE_CLOSE.as_secs()}),
        );
        std::thread::sleep(LATE_CLOSE);
    }
    shared.log.event("eof", None, json!({}));
    std::process::exit(0);
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

/// How a request is answered.
enum Reply {
    /// Answer now.
    Now(Value),
    /// Send the first messages, answer, then send the last ones.
    Around(Vec<Value>, Value, Vec<Value>),
    /// A turn answers later.
    Later,
}

pub(crate) struct Server {
    shared: Arc<Shared>,
    /// The session database, when sessions persist and it has a location.
    store: Option<Store>,
    initialized: bool,
    /// `Err(name)` when `initialize` named a client other than `windsurf`.
    identity: Result<(), String>,
    /// `authenticate` was given an API key: whether it was valid.
    key_login: Option<bool>,
    sessions: BTreeMap<String, SessionRef>,
    sessions_created: u64,
    /// The turn each session runs or ran last.
    turns: HashMap<String, RunningTurn>,
}

fn invalid(message: impl Into<String>) -> Refusal {
    (
        INVALID_PARAMS,
        format!("Invalid params: {}", message.into()),
        None,
    )
}

fn internal(message: &str) -> Refusal {
    (INTERNAL_ERROR, format!("Internal error: {message}"), None)
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

/// `mock-` and 16 random hex digits: stored sessions outlive the process, so ids must not
/// repeat, and they are file names.
fn stored_session_id() -> String {
    format!("mock-{}", wire::random_hex(8))
}

/// `mcpServers` must be present and an empty list: these agents take no MCP servers.
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

impl Server {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let store = match shared.profile.persistence {
            Persistence::Process => None,
            Persistence::Disk => match Store::from_env() {
                Ok(store) => Some(store),
                Err(err) => {
                    eprintln!("mock-devin: {err}; sessions cannot be created");
                    None
                }
            },
        };
        Self {
            shared,
            store,
            initialized: false,
            identity: Ok(()),
            key_login: None,
            sessions: BTreeMap::new(),
            sessions_created: 0,
            turns: HashMap::new(),
        }
    }

    /// Reads and answers messages until stdin ends (or fails).
    pub(crate) fn serve<R: BufRead>(&mut self, input: &mut R) {
        let shared = Arc::clone(&self.shared);
        rpc::serve_lines(input, &shared.out, |incoming| self.handle(incoming));
    }

    fn profile(&self) -> &Profile {
        &self.shared.profile
    }

    fn log(&self, event: &str, fields: Value) {
        self.shared.log.event(event, None, fields);
    }

    fn handle(&mut self, incoming: Incoming) {
        let shared = Arc::clone(&self.shared);
        let out = &shared.out;
        match incoming {
            Incoming::Invalid { id, code, message } => {
                eprintln!("mock-devin: invalid input: {message}");
                self.log("invalid_input", json!({"code": code}));
                out.error(&id, code, &message, None);
            }
            Incoming::Request { id, method, params } => match self.request(&method, &params, &id) {
                Ok(Reply::Now(result)) => out.respond(&id, result),
                Ok(Reply::Around(before, result, after)) => {
                    before.iter().for_each(|message| out.send(message));
                    out.respond(&id, result);
                    after.iter().for_each(|message| out.send(message));
                }
                Ok(Reply::Later) => {}
                Err((code, message, data)) => {
                    eprintln!("mock-devin: {method} refused: {message}");
                    self.log(
                        "refused",
                        json!({"method": method, "code": code, "message": message}),
                    );
                    out.error(&id, code, &message, data);
                }
            },
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
            // The real CLI never answers these (a client that waits for them hangs).
            "session/set_model" | "session/stop" => {
                self.log("unanswered", json!({"method": method}));
                Ok(Reply::Later)
            }
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
                    let model = lock(state).record.model.clone();
                    self.shared.out.notify(
                        "_cognition.ai/agent_stopped",
                        wire::agent_stopped(
                            id,
                            "cancelled",
                            &Stats::default(),
                            &TurnIds::new().request,
                            self.profile().label(&model),
                            None,
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
        let profile = self.profile();
        Ok(json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": profile.images, "audio": false,
                                       "embeddedContext": false},
                "mcpCapabilities": {"http": true, "sse": true},
                "sessionCapabilities": wire::session_capabilities(),
            },
            "agentInfo": wire::agent_info(),
            "authMethods": wire::auth_methods(),
            "_meta": {"mcpConfigPath": wire::mcp_config_path()},
        }))
    }

    /// `authenticate {methodId: "devin-browser", _meta: {api_key}}` takes the key: a valid
    /// one signs the process in, an invalid one signs it out; without a key the real CLI would
    /// open a browser, which cannot happen here.
    fn authenticate(&mut self, params: &Value) -> Result<Value, Refusal> {
        let valid = wire::answer_authenticate(params, |event, fields| self.log(event, fields))?;
        self.key_login = Some(valid);
        Ok(Value::Null)
    }

    /// Signed in, by the first of: the key of `authenticate`, `WINDSURF_API_KEY` in the
    /// environment (preferred over stored credentials, so an invalid one signs the process
    /// out), credentials on disk (a symlink to them counts; never read) or an agent signed in
    /// by default.
    fn signed_in(&self) -> bool {
        match (self.key_login, wire::environment_key()) {
            (Some(valid), _) | (None, Some(valid)) => valid,
            (None, None) => self.profile().signed_in_by_default || wire::credentials_exist(),
        }
    }

    /// The older logged-out behaviour refuses to open a session.
    fn check_signed_in_for_session(&self) -> Result<(), Refusal> {
        if self.profile().logout_style == LogoutStyle::SessionNew && !self.signed_in() {
            self.log("signed_out", json!({"style": "session_new"}));
            return Err(wire::not_authenticated());
        }
        Ok(())
    }

    /// The session's `cwd` after the workspace checks, and its `mcpServers`.
    fn workspace(&self, params: &Map<String, Value>) -> Result<String, Refusal> {
        let cwd = string_param(params, "cwd")?;
        match self.profile().workspace {
            Workspace::SandboxHome => check_cwd(cwd).map_err(invalid)?,
            Workspace::Directory => {
                let path = Path::new(cwd);
                if !path.is_absolute() {
                    return Err(invalid(format!("cwd {cwd:?} is not an absolute path")));
                }
                if !path.is_dir() {
                    return Err(invalid(format!("cwd {cwd:?} is not an existing directory")));
                }
            }
        }
        check_mcp_servers(params)?;
        Ok(cwd.to_owned())
    }

    /// Rereads `config.json` for a new or loaded session when the agent has one; the real CLI
    /// refuses a broken one, so the process ends with status 78.
    fn permissions(&self) -> Permissions {
        if !self.profile().config_file {
            return Permissions::default();
        }
        Permissions::load().unwrap_or_else(|err| {
            eprintln!("mock-devin: devin config: {err}");
            self.log("config_error", json!({}));
            std::process::exit(CONFIG_EXIT);
        })
    }

    fn store(&self) -> Result<&Store, Refusal> {
        self.store
            .as_ref()
            .ok_or_else(|| internal("no session database (neither XDG_DATA_HOME nor HOME is set)"))
    }

    /// Stores `record` when sessions persist.
    fn save(&self, record: &Record) -> Result<(), Refusal> {
        if self.profile().persistence == Persistence::Process {
            return Ok(());
        }
        self.store()?.save(record).map_err(|err| {
            eprintln!("mock-devin: {err}");
            internal("cannot store the session")
        })
    }

    fn new_session(&mut self, params: &Value) -> Result<Reply, Refusal> {
        let params = params_object(params)?;
        let cwd = self.workspace(params)?;
        let permissions = self.permissions();
        self.check_signed_in_for_session()?;
        // A `--model` the account does not offer: every session of the process fails to open
        // (what the real CLI does here is not recorded).
        if !self.profile().offers(&self.profile().start_model) {
            return Err(wire::model_not_found(
                &self.profile().start_model,
                self.profile().models.iter().map(|(id, _)| id.as_str()),
            ));
        }
        let session_id = match self.profile().persistence {
            Persistence::Process => {
                self.sessions_created += 1;
                format!("mock-session-{}", self.sessions_created)
            }
            Persistence::Disk => stored_session_id(),
        };
        let record = Record {
            session_id,
            cwd,
            mode: DEFAULT_MODE.to_owned(),
            model: self.profile().start_model.clone(),
            thought_level: DEFAULT_THOUGHT_LEVEL.to_owned(),
            history: Vec::new(),
        };
        self.save(&record)?;
        let (allow, deny) = permissions.summary();
        self.log(
            "session_new",
            json!({"sessionId": record.session_id, "model": record.model, "cwd": record.cwd,
                   "allowRules": allow, "denyRules": deny}),
        );
        let options = config_options(&record, self.profile());
        // As the CLI does: the options as an update first, then the answer.
        let before = vec![wire::config_option_update(&record.session_id, &options)];
        let answer = json!({
            "sessionId": record.session_id,
            "modes": wire::modes(&record.mode),
            "configOptions": options,
            "_meta": {"cognition.ai/isLocked": false},
        });
        self.sessions
            .insert(record.session_id.clone(), Session::new(record, permissions));
        Ok(Reply::Around(before, answer, vec![wire::servers_changed()]))
    }

    fn load_session(&mut self, params: &Value) -> Result<Reply, Refusal> {
        let params = params_object(params)?;
        let session_id = string_param(params, "sessionId")?;
        if self.profile().persistence == Persistence::Disk {
            return self.load_stored(params, session_id);
        }
        // Sessions live in this process only: a load finds one of them, replays nothing.
        self.check_signed_in_for_session()?;
        let found = self.sessions.get(session_id);
        self.log(
            "session_load",
            json!({"sessionId": session_id, "found": found.is_some()}),
        );
        let session = found.ok_or_else(wire::session_not_found)?;
        let record = &lock(session).record;
        Ok(Reply::Now(json!({
            "configOptions": config_options(record, self.profile()),
            "modes": wire::modes(&record.mode),
        })))
    }

    /// Reopens a stored session in a workspace and replays its transcript.
    fn load_stored(
        &mut self,
        params: &Map<String, Value>,
        session_id: &str,
    ) -> Result<Reply, Refusal> {
        let cwd = self.workspace(params)?;
        let permissions = self.permissions();
        self.check_signed_in_for_session()?;
        self.refuse_if_running(session_id)?;
        let mut record = match self.store()?.load(session_id) {
            Ok(record) => record,
            Err(StoreError::NotFound(_) | StoreError::BadId(_)) => {
                return Err(wire::session_not_found())
            }
            Err(err) => {
                eprintln!("mock-devin: {err}");
                return Err(internal("cannot read the session"));
            }
        };
        record.cwd = cwd;
        let mut updates = replay(&record);
        let replay_late = record
            .history
            .iter()
            .find(|entry| entry.role == Role::User)
            .is_some_and(|entry| markers::Markers::parse(&entry.text).replay_after_answer);
        let after: Vec<Value> = if replay_late {
            updates.pop().into_iter().collect()
        } else {
            Vec::new()
        };
        self.log(
            "session_load",
            json!({"sessionId": record.session_id, "cwd": record.cwd,
                   "replayed": updates.len() + after.len(), "replayAfterAnswer": replay_late}),
        );
        let answer = json!({"modes": wire::modes(&record.mode),
                            "configOptions": config_options(&record, self.profile())});
        self.sessions
            .insert(record.session_id.clone(), Session::new(record, permissions));
        Ok(Reply::Around(updates, answer, after))
    }

    fn session(&self, params: &Map<String, Value>) -> Result<(String, SessionRef), Refusal> {
        let session_id = string_param(params, "sessionId")?;
        let session = self
            .sessions
            .get(session_id)
            .ok_or_else(wire::session_not_found)?;
        Ok((session_id.to_owned(), Arc::clone(session)))
    }

    /// A stored session with a running turn may not be loaded or deleted under it.
    fn refuse_if_running(&self, session_id: &str) -> Result<(), Refusal> {
        if self.turns.get(session_id).is_some_and(RunningTurn::running) {
            return Err((
                INVALID_REQUEST,
                "Invalid Request: the session has a running turn".to_owned(),
                None,
            ));
        }
        Ok(())
    }

    fn set_mode(&mut self, params: &Value) -> Result<Value, Refusal> {
        if self.profile().fixed_mode {
            return Err(invalid(
                "session/set_mode is refused: the summarizer agent's mode cannot be changed",
            ));
        }
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
        let record = {
            let mut session = lock(&session);
            let mut record = session.record.clone();
            set_option(&mut record, self.profile(), config_id, value)?;
            session.record = record.clone();
            record
        };
        self.save(&record)?;
        self.log(
            "set_config_option",
            json!({"sessionId": session_id, "configId": config_id, "value": value}),
        );
        let options = config_options(&record, self.profile());
        Ok(Reply::Around(
            vec![wire::config_option_update(&session_id, &options)],
            json!({"configOptions": options}),
            Vec::new(),
        ))
    }

    /// The sessions of this process, or the stored ones (of `cwd` when given), newest first.
    fn list_sessions(&self, params: &Value) -> Result<Value, Refusal> {
        let sessions: Vec<Value> = match self.profile().persistence {
            Persistence::Process => self
                .sessions
                .iter()
                .map(|(id, session)| json!({"sessionId": id, "cwd": lock(session).record.cwd}))
                .collect(),
            Persistence::Disk => {
                let cwd = params.get("cwd").and_then(Value::as_str);
                let records = self.store()?.list().map_err(|err| {
                    eprintln!("mock-devin: {err}");
                    internal("cannot list the sessions")
                })?;
                records
                    .iter()
                    .filter(|(record, _)| cwd.is_none_or(|cwd| record.cwd == cwd))
                    .map(|(record, updated)| {
                        json!({"sessionId": record.session_id, "cwd": record.cwd,
                               "updatedAt": updated})
                    })
                    .collect()
            }
        };
        self.log("session_list", json!({"count": sessions.len()}));
        Ok(json!({"sessions": sessions}))
    }

    /// Forgets a session (and removes its stored file). A session of this process that runs a
    /// turn has it cancelled; a stored one may not be deleted under its turn.
    fn delete_session(&mut self, params: &Value) -> Result<Value, Refusal> {
        let params = params_object(params)?;
        let session_id = string_param(params, "sessionId")?;
        match self.profile().persistence {
            Persistence::Process => {
                if self.sessions.remove(session_id).is_none() {
                    return Err(wire::session_not_found());
                }
                if let Some(turn) = self.turns.remove(session_id) {
                    let _ = turn.events.send(Event::Cancel);
                }
            }
            Persistence::Disk => {
                self.refuse_if_running(session_id)?;
                let known = self.sessions.remove(session_id).is_some();
                let removed = match self.store()?.delete(session_id) {
                    Ok(removed) => removed,
                    Err(StoreError::BadId(_)) => false,
                    Err(err) => {
                        eprintln!("mock-devin: {err}");
                        return Err(internal("cannot delete the session"));
                    }
                };
                if !known && !removed {
                    return Err(wire::session_not_found());
                }
            }
        }
        self.log("session_delete", json!({"sessionId": session_id}));
        Ok(json!({}))
    }

    fn prompt(&mut self, params: &Value, id: &Value) -> Result<(), Refusal> {
        if self.profile().logout_style == LogoutStyle::Prompt && !self.signed_in() {
            // The newer logged-out behaviour: sessions open, every prompt fails at once.
            eprintln!("mock-devin: signed out: prompt refused");
            self.log("signed_out", json!({"style": "prompt"}));
            return Err(wire::authentication_failed());
        }
        if let Err(name) = &self.identity {
            // The backend refuses every prompt of a client that is not `windsurf`.
            eprintln!("mock-devin: client {name:?} is not windsurf: prompt refused");
            self.log("identity_refused", json!({"clientName": name}));
            return Err(wire::out_of_date());
        }
        let params = params_object(params)?;
        let (session_id, session) = self.session(params)?;
        self.turns.retain(|_, turn| turn.running());
        let busy = match self.profile().concurrency {
            Concurrency::PerSession => self
                .turns
                .contains_key(&session_id)
                .then_some("a prompt turn is already running in this session"),
            Concurrency::PerProcess => {
                (!self.turns.is_empty()).then_some("a prompt turn is already running")
            }
        };
        if let Some(busy) = busy {
            return Err((INVALID_REQUEST, format!("Invalid Request: {busy}"), None));
        }
        let (text, images) =
            prompt_content(params.get("prompt"), self.profile().images).map_err(invalid)?;
        let (plan, unknown) = {
            let guard = lock(&session);
            match &self.profile().dialect {
                Dialect::Bridge { default, slow } => bridge::plan(
                    *default,
                    *slow,
                    bridge::Received {
                        session_id: &session_id,
                        earlier: guard.context.as_deref(),
                        text: &text,
                        images,
                        model: &guard.record.model,
                        thought_level: offers_thought_level(&guard.record, self.profile())
                            .then_some(guard.record.thought_level.as_str()),
                    },
                )?,
                Dialect::Markers { default } => {
                    markers::plan(default.as_deref(), text, &guard.record)
                }
            }
        };
        for name in &unknown {
            eprintln!("mock-devin: ignoring unknown marker [mock:{name}]");
            self.log("unknown_marker", json!({"marker": name}));
        }
        if plan.hangs() {
            // Before the turn starts, so that an EOF read right after the prompt is ignored too.
            self.shared.hanging.store(true, Ordering::SeqCst);
        }
        if plan.late_close {
            self.shared.late_close.store(true, Ordering::SeqCst);
        }
        let context = plan.input.clone();
        let (events, inbox) = mpsc::channel();
        let done = Arc::new(AtomicBool::new(false));
        let turn = Turn::new(
            Arc::clone(&self.shared),
            self.store.clone(),
            Arc::clone(&session),
            id.clone(),
            plan,
            inbox,
            Arc::clone(&done),
        );
        std::thread::Builder::new()
            .name("turn".into())
            .spawn(move || turn.run())
            .map_err(|err| internal(&format!("cannot start the turn: {err}")))?;
        lock(&session).context = Some(context);
        self.turns.insert(session_id, RunningTurn { events, done });
        Ok(())
    }
}

/// The prompt's text blocks joined by blank lines, and the media type of each image block
/// when `images` allows them (each with a string `data` and `mimeType`). Other block types are
/// refused.
pub(crate) fn prompt_content(
    prompt: Option<&Value>,
    images: bool,
) -> Result<(String, Vec<String>), String> {
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

/// A sandbox home: the cwd must be absolute and plain (no `.` or `..`), be `/home/bridge` or
/// lie under a `.sandbox` directory, and be the directory this process runs in.
pub(crate) fn check_cwd(cwd: &str) -> Result<(), String> {
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
        let text = |prompt: Option<&Value>| prompt_content(prompt, false).map(|(text, _)| text);
        let both = json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]);
        assert_eq!(text(Some(&both)).as_deref(), Ok("a\n\nb"));
        assert!(text(Some(&json!([]))).is_err());
        assert!(text(Some(&json!("x"))).is_err());
        assert!(text(None).is_err());
        let image = json!([{"type": "text", "text": "a"},
                           {"type": "image", "data": "", "mimeType": "image/png"}]);
        assert!(text(Some(&image)).unwrap_err().contains("only text"));
        assert_eq!(
            prompt_content(Some(&image), true),
            Ok(("a".to_owned(), vec!["image/png".to_owned()]))
        );
    }

    #[test]
    fn stored_session_ids_are_unique_file_names() {
        let [a, b] = [(); 2].map(|()| stored_session_id());
        assert_ne!(a, b);
        assert!(a.len() == 21 && crate::full::store::valid_id(&a), "{a}");
    }
}
