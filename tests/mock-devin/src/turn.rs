//! One prompt turn, on its own thread so that the reading loop can still deliver
//! `session/cancel` and the client's answers to the agent's own requests.
//!
//! A turn plays a [`Plan`] that the agent's dialect decided before it started (the summarizer's
//! scenarios in [`crate::bridge`], the full agent's markers in [`crate::full::markers`]): its
//! steps in order, then its ending. Invariants: the prompt is answered exactly once (a result,
//! an error, or never for a hang or an exit); `done` is set before that answer goes out, so a
//! client may send its next prompt as soon as it reads it; a cancel is honoured before every
//! step that acts, between chunks and during every wait.

use std::cell::Cell;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::full::permissions::{self, Permissions};
use crate::full::store::Store;
use crate::plan::{halves, tokens, Chunks, Ending, Plan, Reply, Route, Step, Usage};
use crate::rpc::INTERNAL_ERROR;
use crate::scenario::ErrorKind;
use crate::session::{config_options, lock, record_turn, SessionRef};
use crate::shared::Shared;
use crate::wire::{self, Stats, Tokens, TurnIds};

/// The length of the message of an [`ErrorKind::BadShape`] error.
const BAD_SHAPE_MESSAGE: usize = 200 * 1024;
const THOUGHT: &str = "Looking at the task before answering.";
/// How long a hang's grandchild sleeps.
const HANG_GRANDCHILD_SECONDS: u64 = 300;
/// What each earlier tool call and its result add to a model request's input.
const ROUND_TOKENS: u64 = 30;
/// The output of a model request that made a tool call.
const CALL_TOKENS: u64 = 20;
/// The context window `usage_update` reports.
const CONTEXT_SIZE: u64 = 256_000;

/// What the reading loop passes to the running turn.
pub(crate) enum Event {
    /// The client's answer to a request the agent sent.
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
    /// `session/cancel` for this turn's session (or the session was deleted).
    Cancel,
}

/// The turn was cancelled by the client.
struct Cancelled;

/// A grandchild: killed and reaped when dropped.
struct Grandchild(Option<Child>);

impl Drop for Grandchild {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn hang_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Starts `mock-devin --grandchild-sleep SECONDS` in this process group.
fn spawn_grandchild(seconds: u64) -> std::io::Result<Child> {
    let program = std::env::current_exe().unwrap_or_else(|_| "mock-devin".into());
    Command::new(program)
        .args([crate::cli::GRANDCHILD_ARG, &seconds.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

pub(crate) struct Turn {
    shared: Arc<Shared>,
    /// Where the turn is stored (sessions that persist).
    store: Option<Store>,
    session: SessionRef,
    session_id: String,
    request_id: Value,
    plan: Plan,
    inbox: Receiver<Event>,
    done: Arc<AtomicBool>,
    // What the session was when the prompt arrived.
    mode: String,
    model: String,
    label: String,
    cwd: PathBuf,
    permissions: Permissions,
    ids: TurnIds,
    started: Instant,
    /// Tool calls, files written and commands run so far (for agent_stopped).
    tool_calls: Cell<u64>,
    files_changed: Cell<u64>,
    commands_run: Cell<u64>,
    /// The model requests that made tool calls so far, and their summed tokens: the turn's
    /// last model request comes after them.
    rounds: Cell<u64>,
    earlier: Cell<Tokens>,
}

impl Turn {
    pub(crate) fn new(
        shared: Arc<Shared>,
        store: Option<Store>,
        session: SessionRef,
        request_id: Value,
        plan: Plan,
        inbox: Receiver<Event>,
        done: Arc<AtomicBool>,
    ) -> Self {
        let guard = lock(&session);
        let record = &guard.record;
        let label = plan
            .label
            .clone()
            .unwrap_or_else(|| shared.profile.label(&record.model).to_owned());
        let (session_id, mode, model) = (
            record.session_id.clone(),
            record.mode.clone(),
            record.model.clone(),
        );
        let (cwd, permissions) = (PathBuf::from(&record.cwd), guard.permissions.clone());
        drop(guard);
        Self {
            shared,
            store,
            session,
            session_id,
            request_id,
            plan,
            inbox,
            done,
            mode,
            model,
            label,
            cwd,
            permissions,
            ids: TurnIds::new(),
            started: Instant::now(),
            tool_calls: Cell::new(0),
            files_changed: Cell::new(0),
            commands_run: Cell::new(0),
            rounds: Cell::new(0),
            earlier: Cell::new(Tokens::default()),
        }
    }

    pub(crate) fn run(self) {
        let mut reply = String::new();
        if self.play(&mut reply).is_err() {
            self.cancelled(&reply);
        }
        self.done.store(true, Ordering::SeqCst);
    }

    fn log(&self, event: &str, fields: Value) {
        self.shared.log.event(event, Some(self.plan.name), fields);
    }

    fn play(&self, reply: &mut String) -> Result<(), Cancelled> {
        let mut fields = self.plan.log.clone();
        fields["sessionId"] = json!(self.session_id);
        self.log("prompt", fields);
        let mut notes = Vec::new();
        for step in &self.plan.steps {
            if step.acts() {
                self.check_cancel()?;
            }
            if let Some(note) = self.step(step)? {
                notes.push(note);
            }
        }
        match &self.plan.ending {
            Ending::Hang { grandchild } => self.hang(*grandchild),
            Ending::Reply(answer) => self.reply(answer, &notes, reply),
            Ending::Fail { error, failure } => {
                self.check_cancel()?;
                self.fail(*error, *failure);
                Ok(())
            }
            Ending::Exit(text) => {
                self.check_cancel()?;
                self.chunk(halves(text)[0], Route::Update, reply);
                self.log("exit", json!({"status": 3}));
                eprintln!("mock-devin: [mock:exit] exiting with status 3 in the middle of a turn");
                std::process::exit(3);
            }
        }
    }

    /// Plays one step; some leave a note for the reply.
    fn step(&self, step: &Step) -> Result<Option<String>, Cancelled> {
        match step {
            Step::Prelude => {
                self.shared
                    .out
                    .send(&wire::output_notification("Thinking...\n"));
                self.update(
                    json!({"sessionUpdate": "available_commands_update", "availableCommands": []}),
                );
            }
            Step::Compaction => {
                self.update(wire::display_chunk(wire::COMPACTING));
                self.shared.out.send(&wire::compaction(&self.session_id));
                self.log("compaction", json!({}));
            }
            Step::Thought => self.update(json!({"sessionUpdate": "agent_thought_chunk",
                                                "content": {"type": "text", "text": THOUGHT}})),
            Step::Log(event, fields) => self.log(event, fields.clone()),
            Step::Wait(wait) => {
                let _grandchild = self.slow_grandchild(*wait);
                self.pause(*wait)?;
            }
            Step::Pause(wait) => self.pause(*wait)?,
            Step::Update(update) => self.update(update.clone()),
            Step::Line(line) => self.shared.out.line(line.as_bytes()),
            Step::Tool {
                call_id,
                name,
                kind,
            } => self.tool_call(call_id, name.as_deref(), kind),
            Step::Write { call_id, path } => return Ok(Some(self.write(call_id, path))),
            Step::Permission {
                call_id,
                title,
                obeyed,
                asks,
            } => return self.permission(call_id, title, *obeyed, *asks).map(Some),
            Step::Ask {
                method,
                params,
                prefix,
                tagged,
                log,
            } => {
                let mut params = params.clone();
                params["sessionId"] = json!(self.session_id);
                let answer = self.ask(method, params)?;
                let code = answer.as_ref().err().and_then(|e| e.get("code").cloned());
                let shown = match (&answer, code.as_ref()) {
                    (Err(_), Some(code)) => code.to_string(),
                    (Err(error), None) => error.to_string(),
                    (Ok(result), _) => result.to_string(),
                };
                let tag = match (tagged, answer.is_err()) {
                    (false, _) => "",
                    (true, true) => "error ",
                    (true, false) => "result ",
                };
                self.log(
                    log,
                    json!({"method": method, "error": answer.is_err(), "code": code}),
                );
                return Ok(Some(format!("{prefix}{tag}{shown}")));
            }
            Step::ExtraUpdates => self.extra_updates(),
        }
        Ok(None)
    }

    fn update(&self, update: Value) {
        self.shared.out.notify(
            "session/update",
            json!({"sessionId": self.session_id, "update": update}),
        );
    }

    fn chunk(&self, text: &str, route: Route, reply: &mut String) {
        reply.push_str(text);
        let content = json!({"type": "text", "text": text});
        match route {
            Route::Update => self.update(json!({"sessionUpdate": "agent_message_chunk", "content": content})),
            Route::Legacy => self.shared.out.notify(
                "$/update",
                json!({"sessionId": self.session_id, "type": "agent_message_chunk", "content": content}),
            ),
            Route::WrongSession => self.shared.out.notify(
                "session/update",
                json!({
                    "sessionId": "someone-else",
                    "update": {"sessionUpdate": "agent_message_chunk", "content": content},
                }),
            ),
        }
    }

    /// Streams the reply, then ends the turn.
    fn reply(&self, answer: &Reply, notes: &[String], reply: &mut String) -> Result<(), Cancelled> {
        match &answer.chunks {
            Chunks::Halves(text) => {
                let text = if answer.with_notes {
                    let last = (!text.is_empty()).then_some(text);
                    notes
                        .iter()
                        .chain(last)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("\n")
                } else {
                    text.clone()
                };
                if !text.is_empty() {
                    for half in halves(&text) {
                        self.check_cancel()?;
                        self.chunk(half, answer.route, reply);
                    }
                }
            }
            Chunks::Parts(parts, wait) => {
                for (index, part) in parts.iter().enumerate() {
                    if index > 0 && !wait.is_zero() {
                        self.pause(*wait)?;
                    }
                    self.check_cancel()?;
                    if answer.log_chunks {
                        // Before the chunk goes out: whatever a client shows before this line
                        // is in the log, it showed before the chunk was sent.
                        self.log(
                            "chunk",
                            json!({"index": index + 1, "of": parts.len(), "bytes": part.len(),
                                   "atMicros": crate::log::unix_micros()}),
                        );
                    }
                    self.chunk(part, answer.route, reply);
                }
            }
        }
        self.finish(answer, reply);
        if answer.exit_after {
            self.log("exit", json!({"status": 3, "after": "answer"}));
            eprintln!("mock-devin: [mock:exit-after] exiting with status 3 after the answer");
            // Give the answer a moment to be read before the pipes close.
            std::thread::sleep(Duration::from_millis(50));
            std::process::exit(3);
        }
        Ok(())
    }

    /// The tokens of the turn's next model request, given its output: the prompt and what the
    /// earlier tool calls added; cached reads are half of it with `[mock:cache-tokens]`.
    fn request_tokens(&self, output: u64) -> Tokens {
        let input = tokens(&self.plan.input) + ROUND_TOKENS * self.rounds.get();
        let cached_half = self.plan.usage == Usage::Counted { cached_half: true };
        Tokens {
            input,
            output,
            cached_read: if cached_half { input / 2 } else { 0 },
        }
    }

    /// One model request that made a tool call.
    fn tool_round(&self) {
        let request = self.request_tokens(CALL_TOKENS);
        self.earlier.set(self.earlier.get().add(request));
        self.rounds.set(self.rounds.get() + 1);
    }

    /// The log line, usage_update, turn_stats, agent_stopped, the stored turn, then the result
    /// (whose usage is the last model request's; the turn's sums are in turn_stats).
    fn finish(&self, answer: &Reply, reply: &str) {
        let last = match &self.plan.usage {
            Usage::Fixed(fixed) => *fixed,
            _ => self.request_tokens(tokens(reply)),
        };
        let totals = self.earlier.get().add(last);
        let mut fields = json!({
            "sessionId": self.session_id, "kind": answer.kind, "stopReason": answer.stop_reason,
            "cause": answer.cause, "chars": reply.chars().count(), "outputTokens": last.output,
            "model": self.model, "modelLabel": self.label, "modelRequests": self.rounds.get() + 1,
        });
        if answer.log_text && reply.len() <= 1024 {
            fields["text"] = Value::String(reply.to_owned());
        }
        // Logged before the result goes out: the host ends the agent as soon as it has the
        // result, and the line must not be lost with it.
        self.log("reply", fields);
        if let Usage::Context(used) = self.plan.usage {
            self.update(wire::usage_update(used, CONTEXT_SIZE, last, &self.label));
        }
        let mut dimensions = vec![wire::model_dimension(&self.label)];
        // A turn that reports no counts (`[mock:no-usage]`, `[mock:usage-update]`) has no sums
        // in its statistics either: only the model row.
        if matches!(self.plan.usage, Usage::Counted { .. } | Usage::Fixed(_)) {
            dimensions.extend(wire::cumulative_dimensions(totals));
        }
        self.shared.out.notify(
            "_cognition.ai/turn_stats",
            wire::turn_stats(&self.session_id, &self.ids, Some(dimensions)),
        );
        self.stopped(answer.cause, totals, answer.error_message);
        self.remember(reply);
        let usage = match &self.plan.usage {
            Usage::Counted { .. } | Usage::Fixed(_) => Some(wire::usage(last)),
            Usage::Omitted | Usage::Context(_) => None,
        };
        self.done.store(true, Ordering::SeqCst);
        self.shared.out.respond(
            &self.request_id,
            wire::prompt_result(answer.stop_reason, usage, &self.ids),
        );
    }

    /// turn_stats without dimensions, agent_stopped `cancelled`, then `stopReason: "cancelled"`.
    fn cancelled(&self, reply: &str) {
        let output = if self.plan.cancel_counts_output {
            tokens(reply)
        } else {
            0
        };
        let last = self.request_tokens(output);
        self.shared.out.notify(
            "_cognition.ai/turn_stats",
            wire::turn_stats(&self.session_id, &self.ids, None),
        );
        self.stopped("cancelled", self.earlier.get().add(last), None);
        self.remember(reply);
        self.log("cancelled", json!({"sessionId": self.session_id}));
        self.done.store(true, Ordering::SeqCst);
        self.shared.out.respond(
            &self.request_id,
            wire::prompt_result("cancelled", Some(wire::usage(last)), &self.ids),
        );
    }

    fn fail(&self, error: ErrorKind, failure: Option<&'static str>) {
        self.stopped(
            "error",
            self.earlier.get().add(self.request_tokens(0)),
            None,
        );
        self.remember("");
        let (code, message, data, mut fields) = match error {
            ErrorKind::Fault(fault) => {
                let (code, message, data) = fault.refusal();
                (code, message, data, json!({"errorKind": fault.kind()}))
            }
            ErrorKind::BadShape => (
                INTERNAL_ERROR,
                "x".repeat(BAD_SHAPE_MESSAGE),
                Some(json!({"cognition.ai/errorKind": 42, "cognition.ai/retryable": "yes"})),
                json!({"shape": "bad"}),
            ),
            ErrorKind::NotObject => (
                INTERNAL_ERROR,
                String::new(),
                None,
                json!({"shape": "not-object"}),
            ),
        };
        fields["code"] = json!(code);
        if let Some(failure) = failure {
            fields["failure"] = json!(failure);
        }
        self.log("rpc_error", fields);
        self.done.store(true, Ordering::SeqCst);
        if error == ErrorKind::NotObject {
            self.shared
                .out
                .send(&json!({"jsonrpc": "2.0", "id": self.request_id,
                "error": {"code": INTERNAL_ERROR, "data": "oops"}}));
        } else {
            self.shared
                .out
                .error(&self.request_id, code, &message, data);
        }
    }

    fn hang(&self, grandchild: bool) -> ! {
        if grandchild {
            match spawn_grandchild(HANG_GRANDCHILD_SECONDS) {
                Ok(child) => {
                    eprintln!(
                        "mock-devin: [mock:grandchild] started `mock-devin --grandchild-sleep \
                         {HANG_GRANDCHILD_SECONDS}` as pid {}; hanging",
                        child.id()
                    );
                    self.log("grandchild", json!({"grandchildPid": child.id()}));
                }
                Err(err) => {
                    eprintln!(
                        "mock-devin: [mock:grandchild] cannot start its grandchild: {err}; hanging"
                    );
                    self.log("grandchild", json!({"error": err.to_string()}));
                }
            }
        } else {
            eprintln!("mock-devin: [mock:hang] the turn never ends");
        }
        self.log("hang", json!({}));
        hang_forever();
    }

    /// `_cognition.ai/agent_stopped` with this turn's counts (unless the plan sends none).
    fn stopped(&self, cause: &str, totals: Tokens, error_message: Option<&str>) {
        if !self.plan.stopped {
            return;
        }
        let elapsed = self.started.elapsed().as_millis() as u64;
        let stats = Stats {
            tool_calls: self.tool_calls.get(),
            files_changed: self.files_changed.get(),
            commands_run: self.commands_run.get(),
            tokens: totals,
            ttft_ms: elapsed,
            total_time_ms: elapsed,
        };
        self.shared.out.notify(
            "_cognition.ai/agent_stopped",
            wire::agent_stopped(
                &self.session_id,
                cause,
                &stats,
                &self.ids.request,
                &self.label,
                error_message,
            ),
        );
    }

    /// Stores the turn when sessions persist (before the answer, so that a client that reads
    /// the answer finds the turn stored).
    fn remember(&self, reply: &str) {
        let Some(store) = &self.store else { return };
        let record = {
            let mut session = lock(&self.session);
            record_turn(&mut session.record, &self.plan.input, reply);
            session.record.clone()
        };
        if let Err(err) = store.save(&record) {
            eprintln!("mock-devin: cannot store the turn: {err}");
            self.log("store_error", json!({"sessionId": self.session_id}));
        }
    }

    fn stray(&self, id: &Value) {
        eprintln!("mock-devin: ignoring a response with unexpected id {id}");
        self.log("stray_client_response", json!({"id": id}));
    }

    /// Ok unless the client cancelled; answers that nobody waits for are dropped.
    fn check_cancel(&self) -> Result<(), Cancelled> {
        loop {
            match self.inbox.try_recv() {
                Ok(Event::Cancel) => return Err(Cancelled),
                Ok(Event::Response { id, .. }) => self.stray(&id),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return Ok(()),
            }
        }
    }

    /// Sleeps for `duration` unless the client cancels first.
    fn pause(&self, duration: Duration) -> Result<(), Cancelled> {
        let deadline = Instant::now() + duration;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            match self.inbox.recv_timeout(left) {
                Ok(Event::Cancel) => return Err(Cancelled),
                Ok(Event::Response { id, .. }) => self.stray(&id),
                Err(RecvTimeoutError::Timeout) => return Ok(()),
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(left);
                    return Ok(());
                }
            }
        }
    }

    /// Sends a request to the client and waits for its answer (or a cancel).
    fn ask(&self, method: &str, params: Value) -> Result<Result<Value, Value>, Cancelled> {
        let id = self.shared.out.request(method, params);
        self.log("agent_request", json!({"method": method, "id": id}));
        loop {
            match self.inbox.recv() {
                Ok(Event::Cancel) => return Err(Cancelled),
                Ok(Event::Response {
                    id: answered,
                    outcome,
                }) if answered == id => return Ok(outcome),
                Ok(Event::Response { id: other, .. }) => self.stray(&other),
                Err(_) => return Ok(Err(json!({"code": INTERNAL_ERROR, "message": "no answer"}))),
            }
        }
    }

    /// The grandchild of a [`Step::Wait`], sleeping a little longer than the wait.
    fn slow_grandchild(&self, wait: Duration) -> Grandchild {
        match spawn_grandchild(wait.as_secs() + 2) {
            Ok(child) => {
                self.log(
                    "slow_grandchild",
                    json!({"grandchildPid": child.id(), "waitMs": wait.as_millis() as u64}),
                );
                Grandchild(Some(child))
            }
            Err(err) => {
                eprintln!("mock-devin: [mock:slow] cannot start its grandchild: {err}");
                self.log("slow_grandchild", json!({"error": err.to_string()}));
                Grandchild(None)
            }
        }
    }

    fn tool_call(&self, call_id: &str, name: Option<&str>, kind: &str) {
        self.tool_round();
        self.tool_calls.set(self.tool_calls.get() + 1);
        if kind == "execute" {
            self.commands_run.set(self.commands_run.get() + 1);
        }
        let mut call = json!({
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "title": name.map_or_else(|| format!("A {kind} tool"), |n| format!("Run {n}")),
            "kind": kind,
            "status": "pending",
            "rawInput": {},
        });
        if let Some(name) = name {
            call["_meta"] = tool_meta(name);
        }
        self.update(call);
        self.update(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                           "status": "completed"}),
        );
        self.log(
            "tool_call",
            json!({"toolCallId": call_id, "toolName": name, "kind": kind}),
        );
    }

    /// A `write` tool call; the returned note goes into the reply.
    fn write(&self, call_id: &str, path: &str) -> String {
        self.tool_round();
        self.tool_calls.set(self.tool_calls.get() + 1);
        let target = permissions::absolute(&self.cwd, path);
        let shown = target.display().to_string();
        self.update(json!({
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "title": format!("Write {path}"),
            "kind": "edit",
            "status": "pending",
            "rawInput": {"file_path": shown, "content": permissions::WRITTEN},
            "locations": [{"path": shown}],
            "_meta": tool_meta("write"),
        }));
        let written = permissions::write(&self.permissions, &self.mode, &self.cwd, &target);
        if written.wrote {
            self.files_changed.set(self.files_changed.get() + 1);
        }
        let status = if written.wrote { "completed" } else { "failed" };
        self.update(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                           "status": status}),
        );
        self.log(
            "write",
            json!({"toolCallId": call_id, "path": shown, "modeAllows": written.mode_allows,
                   "rulesAllow": written.rules_allow, "status": status}),
        );
        written.note
    }

    /// Updates a client must tolerate, known and unknown.
    fn extra_updates(&self) {
        self.update(json!({"sessionUpdate": "plan", "entries": [
            {"content": "Read the code", "priority": "high", "status": "completed"},
            {"content": "Answer", "priority": "medium", "status": "in_progress"},
        ]}));
        self.update(wire::usage_update(
            1200,
            CONTEXT_SIZE,
            self.request_tokens(0),
            &self.label,
        ));
        self.update(json!({"sessionUpdate": "current_mode_update", "currentModeId": self.mode}));
        let options = config_options(&lock(&self.session).record, &self.shared.profile);
        self.update(json!({"sessionUpdate": "config_option_update", "configOptions": options}));
        self.update(json!({"sessionUpdate": "mystery_update", "detail": "from a newer agent"}));
        self.log("extra_updates", json!({"count": 5}));
    }

    /// Asks for permission to run a command, and again after each rejection, up to `asks`
    /// requests; each ask is a new tool call (one model request each).
    fn permission(
        &self,
        call_id: &str,
        title: &str,
        obeyed: bool,
        asks: u8,
    ) -> Result<String, Cancelled> {
        let mut outcome = String::new();
        let mut asked = 0;
        while asked < asks.max(1) {
            asked += 1;
            let id = if asked == 1 {
                call_id.to_owned()
            } else {
                format!("{call_id}_{asked}")
            };
            self.tool_round();
            self.tool_calls.set(self.tool_calls.get() + 1);
            self.update(json!({
                "sessionUpdate": "tool_call", "toolCallId": id, "title": title, "kind": "execute",
                "status": "pending", "rawInput": {"command": title},
                "_meta": tool_meta("exec"),
            }));
            let answer = self.ask(
                "session/request_permission",
                json!({
                    "sessionId": self.session_id,
                    "toolCall": {"toolCallId": id},
                    "options": PERMISSION_OPTIONS
                        .iter()
                        .map(|(id, name, kind)| json!({"optionId": id, "name": name, "kind": kind}))
                        .collect::<Vec<_>>(),
                }),
            )?;
            let selected = answer
                .as_ref()
                .ok()
                .filter(|result| result.pointer("/outcome/outcome") == Some(&json!("selected")))
                .and_then(|result| result.pointer("/outcome/optionId"))
                .and_then(Value::as_str);
            outcome = match &answer {
                Err(_) => "error".to_owned(),
                Ok(result) => match result.pointer("/outcome/outcome").and_then(Value::as_str) {
                    Some("selected") if obeyed => format!("selected {}", selected.unwrap_or("?")),
                    Some(other) => other.to_owned(),
                    None => "invalid".to_owned(),
                },
            };
            self.log(
                "permission_answer",
                json!({"outcome": outcome, "toolCallId": id, "ask": asked}),
            );
            if obeyed && outcome == "cancelled" {
                return Err(Cancelled);
            }
            let allowed = selected.is_some_and(|option| option.starts_with("allow"))
                || selected == Some("switch_bypass");
            if allowed {
                self.commands_run.set(self.commands_run.get() + 1);
            }
            let status = if allowed { "completed" } else { "failed" };
            self.update(
                json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
                               "status": status}),
            );
            if allowed || !obeyed {
                break;
            }
        }
        Ok(if asked > 1 {
            format!("permission outcome: {outcome} (asked {asked} times)")
        } else {
            format!("permission outcome: {outcome}")
        })
    }
}

/// The options of a permission request, `(optionId, name, kind)`, as the CLI offers them.
pub(crate) const PERMISSION_OPTIONS: [(&str, &str, &str); 4] = [
    ("allow_once", "Allow once", "allow_once"),
    ("allow_session", "Allow for this session", "allow_always"),
    ("switch_bypass", "Switch to bypass mode", "allow_always"),
    ("reject_once", "Reject", "reject_once"),
];

/// A tool call's `_meta`: an MCP tool (`mcp__server__tool`) is named in
/// `cognition.ai/toolName`, a native one in `cognition.ai/inferenceToolName`.
pub(crate) fn tool_meta(name: &str) -> Value {
    if name.starts_with("mcp__") {
        json!({"cognition.ai/toolName": name})
    } else {
        json!({"cognition.ai/inferenceToolName": name})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(halves("abcd"), ["ab", "cd"]);
        assert_eq!(halves("aé"), ["a", "é"]);
        assert_eq!(halves("x"), ["", "x"]);
        assert_eq!(halves("éa"), ["é", "a"]);
        assert_eq!(tokens(""), 1);
        assert_eq!(tokens("abcde"), 2);
    }

    #[test]
    fn plans_start_plain() {
        let plan = Plan::new(
            "text",
            "p".into(),
            json!({}),
            Ending::Hang { grandchild: false },
        );
        assert!(plan.hangs() && plan.stopped && !plan.late_close);
        assert_eq!(plan.usage, Usage::Counted { cached_half: false });
        let reply = Reply::text("hi", "text");
        assert_eq!(reply.chunks, Chunks::Halves("hi".into()));
        assert_eq!((reply.stop_reason, reply.cause), ("end_turn", "complete"));
    }
}
