//! One full-agent prompt turn, on its own thread: the steps and outcome of the prompt's
//! [`Plan`], the vendor notifications, the session database update, then the result.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::markers::{ClientMethod, Failure, Outcome, Plan, Review, Step};
use super::permissions::{absolute, Permissions};
use super::server::{lock, model_label, record_turn, SessionRef};
use super::store::Store;
use super::Agent;
use crate::rpc::INTERNAL_ERROR;
use crate::turn::{environment, halves, tokens, Event};
use crate::wire::{self, Fault, Stats, TurnIds};

/// What a written file contains.
pub const WRITTEN: &str = "mock write\n";
const THOUGHT: &str = "Looking at the task before answering.";
const FAIL_ERROR_TEXT: &str = "Devin mock: the agent stopped after an internal error.";
const REFUSAL_TEXT: &str = "Devin mock: I can't help with that request.";
const MAX_TOKENS_TEXT: &str = "Devin mock: a partial answer, cut off at the output token limit";
const EXIT_TEXT: &str = "Devin mock: the agent is about to exit.";
/// The finding of `[mock:review-json]`.
pub fn review_json() -> Value {
    json!({
        "verdict": "request_changes",
        "summary": "The loop in a.rs reads one element past the end of the slice.",
        "findings": [{
            "severity": "high",
            "file": "a.rs",
            "line": 3,
            "title": "Off-by-one loop bound",
            "body": "`0..=len` indexes `items[len]`, which panics; use `0..len`.",
        }],
    })
}

/// The turn was cancelled (by `session/cancel` or a cancelled permission request).
struct Cancelled;

/// The `[mock:slow]` grandchild: killed and reaped when the wait ends.
struct Grandchild(Option<Child>);

impl Drop for Grandchild {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub struct Turn {
    agent: Arc<Agent>,
    store: Store,
    session: SessionRef,
    session_id: String,
    request_id: Value,
    prompt: String,
    plan: Plan,
    inbox: Receiver<Event>,
    done: Arc<AtomicBool>,
    // What the session was when the prompt arrived.
    mode: String,
    label: String,
    cwd: PathBuf,
    turns_seen: usize,
    permissions: Permissions,
    ids: TurnIds,
    started: Instant,
    /// Tool calls, files written and commands run so far (for agent_stopped).
    tool_calls: Cell<u64>,
    files_changed: Cell<u64>,
    commands_run: Cell<u64>,
}

impl Turn {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        agent: Arc<Agent>,
        store: Store,
        session: SessionRef,
        request_id: Value,
        prompt: String,
        plan: Plan,
        inbox: Receiver<Event>,
        done: Arc<AtomicBool>,
    ) -> Self {
        let (session_id, mode, label, cwd, turns_seen, permissions) = {
            let guard = lock(&session);
            let record = &guard.record;
            (
                record.session_id.clone(),
                record.mode.clone(),
                plan.model_label
                    .clone()
                    .unwrap_or_else(|| model_label(record)),
                PathBuf::from(&record.cwd),
                record.turns(),
                guard.permissions.clone(),
            )
        };
        Self {
            agent,
            store,
            session,
            session_id,
            request_id,
            prompt,
            plan,
            inbox,
            done,
            mode,
            label,
            cwd,
            turns_seen,
            permissions,
            ids: TurnIds::new(),
            started: Instant::now(),
            tool_calls: Cell::new(0),
            files_changed: Cell::new(0),
            commands_run: Cell::new(0),
        }
    }

    pub fn run(self) {
        let mut reply = String::new();
        if self.play(&mut reply).is_err() {
            self.cancelled(&reply);
        }
        self.done.store(true, Ordering::SeqCst);
    }

    fn log(&self, event: &str, fields: Value) {
        self.agent
            .log
            .event(event, Some(self.plan.outcome.name()), fields);
    }

    fn update(&self, update: Value) {
        self.agent.out.notify(
            "session/update",
            json!({"sessionId": self.session_id, "update": update}),
        );
    }

    fn chunk(&self, text: &str, reply: &mut String) {
        reply.push_str(text);
        self.update(json!({"sessionUpdate": "agent_message_chunk",
                           "content": {"type": "text", "text": text}}));
    }

    fn play(&self, reply: &mut String) -> Result<(), Cancelled> {
        self.log(
            "prompt",
            json!({
                "sessionId": self.session_id,
                "mode": self.mode,
                "turnsSeen": self.turns_seen,
                "steps": self.plan.steps.len(),
                "chars": self.prompt.chars().count(),
            }),
        );
        self.agent
            .out
            .send(&wire::output_notification("Thinking...\n"));
        self.update(json!({"sessionUpdate": "available_commands_update", "availableCommands": []}));
        self.agent.out.notify(
            "_cognition.ai/turn_stats",
            wire::turn_stats(&self.session_id, &self.ids, &self.label),
        );
        if self.plan.outcome == Outcome::Hang {
            self.log("hang", json!({}));
            eprintln!("mock-devin: [mock:hang] the turn never ends");
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        self.update(json!({"sessionUpdate": "agent_thought_chunk",
                           "content": {"type": "text", "text": THOUGHT}}));
        if let Some(wait) = self.plan.slow {
            let _grandchild = self.grandchild(wait);
            self.pause(wait)?;
        }

        let mut notes = Vec::new();
        for (index, step) in self.plan.steps.iter().enumerate() {
            self.check_cancel()?;
            let call_id = format!("call_{}", index + 1);
            match step {
                Step::Tool { name, kind } => self.tool_call(&call_id, Some(name), kind),
                Step::ToolKind { kind } => self.tool_call(&call_id, None, kind),
                Step::Write { path } => notes.push(self.write(&call_id, path)),
                Step::Permission => notes.push(self.permission(&call_id)?),
                Step::Malformed => {
                    self.agent.out.line(b"this is not json");
                    self.log("malformed_frame", json!({}));
                }
                Step::ClientRequest { method } => notes.push(self.client_request(*method)?),
                Step::ExtraUpdates => self.extra_updates(),
            }
        }
        self.check_cancel()?;

        let seen = format!("turns seen: {}", self.turns_seen);
        let with_notes = |last: String| {
            let mut lines = notes.clone();
            lines.push(last);
            lines.join("\n")
        };
        match self.plan.outcome {
            Outcome::Text => {
                let text = with_notes(format!("Devin mock: done. {seen}"));
                self.answer(&text, reply, "end_turn", "complete")
            }
            Outcome::Fail(Failure::Error) => {
                self.answer(FAIL_ERROR_TEXT, reply, "end_turn", "error")
            }
            Outcome::Fail(failure) => {
                self.fail(failure);
                Ok(())
            }
            Outcome::Refusal => self.answer(REFUSAL_TEXT, reply, "refusal", "complete"),
            Outcome::MaxTokens => self.answer(MAX_TOKENS_TEXT, reply, "max_tokens", "complete"),
            Outcome::Exit => {
                self.chunk(halves(EXIT_TEXT)[0], reply);
                self.log("exit", json!({"status": 3}));
                eprintln!("mock-devin: [mock:exit] exiting with status 3 in the middle of a turn");
                std::process::exit(3);
            }
            Outcome::Echo => {
                let text = self.prompt.clone();
                self.answer(&text, reply, "end_turn", "complete")
            }
            Outcome::Env => self.answer(&environment(), reply, "end_turn", "complete"),
            Outcome::Review(review) => {
                let prose = format!("Devin mock review ({seen}).");
                let text = match review {
                    Review::Json => format!(
                        "{prose} I read the change and found one problem.\n\n{}",
                        review_json()
                    ),
                    Review::Bad => format!(
                        "{prose} I could not decide.\n\n{}",
                        json!({"verdict": "maybe", "summary": "Unsure.", "findings": []})
                    ),
                    Review::None => {
                        format!("{prose} The change looks reasonable to me; no structured verdict.")
                    }
                };
                self.answer(&with_notes(text), reply, "end_turn", "complete")
            }
            // Handled before the steps.
            Outcome::Hang => Ok(()),
        }
    }

    /// Streams `text` in two chunks, then ends the turn.
    fn answer(
        &self,
        text: &str,
        reply: &mut String,
        stop_reason: &str,
        cause: &str,
    ) -> Result<(), Cancelled> {
        for half in halves(text) {
            self.check_cancel()?;
            self.chunk(half, reply);
        }
        self.finish(reply, stop_reason, cause);
        Ok(())
    }

    fn usage(&self, reply: &str) -> (u64, u64, Value) {
        let input = tokens(&self.prompt);
        let output = tokens(reply);
        let cached = if self.plan.cache_tokens { input / 2 } else { 0 };
        (input, output, wire::usage(input, output, cached))
    }

    fn stopped(&self, cause: &str, input: u64, output: u64) {
        if self.plan.no_stopped {
            return;
        }
        let elapsed = self.started.elapsed().as_millis() as u64;
        let stats = Stats {
            tool_calls: self.tool_calls.get(),
            files_changed: self.files_changed.get(),
            commands_run: self.commands_run.get(),
            input_tokens: input,
            output_tokens: output,
            ttft_ms: elapsed,
            total_time_ms: elapsed,
        };
        self.agent.out.notify(
            "_cognition.ai/agent_stopped",
            wire::agent_stopped(
                &self.session_id,
                cause,
                &stats,
                &self.ids.request,
                &self.label,
            ),
        );
    }

    /// Stores the turn in the session database (before the answer, so that a client that
    /// reads the answer finds the turn stored).
    fn remember(&self, reply: &str) {
        let record = {
            let mut session = lock(&self.session);
            record_turn(&mut session.record, &self.prompt, reply);
            session.record.clone()
        };
        if let Err(err) = self.store.save(&record) {
            eprintln!("mock-devin: cannot store the turn: {err}");
            self.log("store_error", json!({"sessionId": self.session_id}));
        }
    }

    /// agent_stopped, the stored turn, then the result.
    fn finish(&self, reply: &str, stop_reason: &str, cause: &str) {
        let (input, output, usage) = self.usage(reply);
        self.stopped(cause, input, output);
        self.remember(reply);
        self.log(
            "reply",
            json!({"sessionId": self.session_id, "stopReason": stop_reason, "cause": cause,
                   "chars": reply.chars().count(), "outputTokens": output,
                   "modelLabel": self.label}),
        );
        self.done.store(true, Ordering::SeqCst);
        self.agent.out.respond(
            &self.request_id,
            wire::prompt_result(stop_reason, Some(usage), &self.ids),
        );
    }

    fn cancelled(&self, reply: &str) {
        let (input, output, usage) = self.usage(reply);
        self.stopped("cancelled", input, output);
        self.remember(reply);
        self.log("cancelled", json!({"sessionId": self.session_id}));
        self.done.store(true, Ordering::SeqCst);
        self.agent.out.respond(
            &self.request_id,
            wire::prompt_result("cancelled", Some(usage), &self.ids),
        );
    }

    fn fail(&self, failure: Failure) {
        let fault = match failure {
            Failure::Auth => Fault::NotAuthenticated,
            Failure::Quota => Fault::Quota,
            Failure::RateLimited => Fault::RateLimited,
            Failure::Network => Fault::Connection,
            Failure::Server | Failure::Error => Fault::Internal,
        };
        let (code, message, data) = fault.refusal();
        let kind = fault.kind();
        self.stopped("error", tokens(&self.prompt), 0);
        self.remember("");
        self.log(
            "rpc_error",
            json!({"code": code, "errorKind": kind, "failure": failure.name()}),
        );
        self.done.store(true, Ordering::SeqCst);
        self.agent.out.error(&self.request_id, code, &message, data);
    }

    fn stray(&self, id: &Value) {
        eprintln!("mock-devin: ignoring a response with unexpected id {id}");
        self.log("stray_client_response", json!({"id": id}));
    }

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

    /// Starts `mock-devin --grandchild-sleep S` in this process group for the wait.
    fn grandchild(&self, wait: Duration) -> Grandchild {
        let seconds = wait.as_secs() + 2;
        let program = std::env::current_exe().unwrap_or_else(|_| "mock-devin".into());
        match Command::new(program)
            .args([crate::GRANDCHILD_ARG, &seconds.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
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
            call["_meta"] = json!({"cognition.ai/toolName": name});
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

    /// `[mock:write PATH]`: writes [`WRITTEN`] when the mode and the rules allow it; the
    /// returned note goes into the reply.
    fn write(&self, call_id: &str, path: &str) -> String {
        self.tool_calls.set(self.tool_calls.get() + 1);
        let target = absolute(&self.cwd, path);
        let shown = target.display().to_string();
        let mut call = json!({
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "title": format!("Write {path}"),
            "kind": "edit",
            "status": "pending",
            "rawInput": {"file_path": shown, "content": WRITTEN},
            "locations": [{"path": shown}],
        });
        call["_meta"] = json!({"cognition.ai/toolName": "write"});
        self.update(call);
        let mode_allows = matches!(self.mode.as_str(), "bypass" | "accept-edits");
        let resolved = resolve(&target);
        let canonical_cwd = std::fs::canonicalize(&self.cwd).unwrap_or_else(|_| self.cwd.clone());
        let rules_allow = self.permissions.may_write(&target, &self.cwd)
            && self.permissions.may_write(&resolved, &canonical_cwd);
        let (status, note) = if !(mode_allows && rules_allow) {
            ("failed", format!("write denied: {shown}"))
        } else {
            let written = target
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&target, WRITTEN));
            match written {
                Ok(()) => {
                    self.files_changed.set(self.files_changed.get() + 1);
                    ("completed", format!("wrote: {shown}"))
                }
                Err(err) => ("failed", format!("write failed: {shown}: {err}")),
            }
        };
        self.update(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                           "status": status}),
        );
        self.log(
            "write",
            json!({"toolCallId": call_id, "path": shown, "modeAllows": mode_allows,
                   "rulesAllow": rules_allow, "status": status}),
        );
        note
    }

    /// Sends a request to the client and waits for its answer (or a cancel).
    fn ask(&self, method: &str, params: Value) -> Result<Result<Value, Value>, Cancelled> {
        let id = self.agent.out.request(method, params);
        self.log("agent_request", json!({"method": method, "id": id}));
        loop {
            match self.inbox.recv() {
                Ok(Event::Cancel) => return Err(Cancelled),
                Ok(Event::Response {
                    id: answered,
                    outcome,
                }) if answered == id => return Ok(outcome),
                Ok(Event::Response { id: other, .. }) => self.stray(&other),
                Err(_) => return Ok(Err(json!({"code": INTERNAL_ERROR}))),
            }
        }
    }

    /// `[mock:client-request METHOD]`: the note says what the client answered.
    fn client_request(&self, method: ClientMethod) -> Result<String, Cancelled> {
        let file = self.cwd.join("README.md").display().to_string();
        let params = match method {
            ClientMethod::ReadTextFile => json!({"sessionId": self.session_id, "path": file}),
            ClientMethod::WriteTextFile => {
                json!({"sessionId": self.session_id, "path": file, "content": WRITTEN})
            }
            ClientMethod::TerminalCreate => json!({"sessionId": self.session_id,
                "command": "ls", "args": ["-la"], "cwd": self.cwd.display().to_string()}),
        };
        let answer = self.ask(method.name(), params)?;
        let shown = match &answer {
            Err(error) => format!(
                "error {}",
                error
                    .get("code")
                    .map_or_else(|| error.to_string(), Value::to_string)
            ),
            Ok(result) => format!("result {result}"),
        };
        self.log(
            "client_answer",
            json!({"method": method.name(), "error": answer.is_err(),
                   "code": answer.as_ref().err().and_then(|e| e.get("code").cloned())}),
        );
        Ok(format!("client answered {}: {shown}", method.name()))
    }

    /// Updates a client must tolerate, known and unknown.
    fn extra_updates(&self) {
        self.update(json!({"sessionUpdate": "plan", "entries": [
            {"content": "Read the code", "priority": "high", "status": "completed"},
            {"content": "Answer", "priority": "medium", "status": "in_progress"},
        ]}));
        self.update(json!({"sessionUpdate": "usage_update", "used": 1200, "size": 256_000}));
        self.update(json!({"sessionUpdate": "current_mode_update", "currentModeId": self.mode}));
        let record = lock(&self.session).record.clone();
        self.update(json!({"sessionUpdate": "config_option_update",
                           "configOptions": super::server::config_options(&record, self.agent.features)}));
        self.update(json!({"sessionUpdate": "mystery_update", "detail": "from a newer agent"}));
        self.log("extra_updates", json!({"count": 5}));
    }

    /// `session/request_permission`; a `cancelled` outcome cancels the turn.
    fn permission(&self, call_id: &str) -> Result<String, Cancelled> {
        let answer = self.ask(
            "session/request_permission",
            json!({
                "sessionId": self.session_id,
                "toolCall": {"toolCallId": call_id, "title": "Run cargo test", "kind": "execute"},
                "options": [
                    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
                    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
                ],
            }),
        )?;
        let outcome = match &answer {
            Err(_) => "error".to_owned(),
            Ok(result) => match result.pointer("/outcome/outcome").and_then(Value::as_str) {
                Some("selected") => format!(
                    "selected {}",
                    result
                        .pointer("/outcome/optionId")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                ),
                Some(other) => other.to_owned(),
                None => "invalid".to_owned(),
            },
        };
        self.log("permission_answer", json!({"outcome": outcome}));
        if outcome == "cancelled" {
            return Err(Cancelled);
        }
        Ok(format!("permission outcome: {outcome}"))
    }
}

/// `path` with its longest existing ancestor resolved through symlinks.
fn resolve(path: &Path) -> PathBuf {
    let mut existing = path.to_owned();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = std::fs::canonicalize(&existing) {
            let mut out = canonical;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (
            existing.file_name().map(ToOwned::to_owned),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_owned();
            }
            _ => return path.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_follows_symlinked_ancestors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().canonicalize().expect("canonical").join("real");
        std::fs::create_dir(&real).expect("dir");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        assert_eq!(resolve(&link.join("new/file")), real.join("new/file"));
        assert_eq!(resolve(Path::new("/")), Path::new("/"));
    }

    #[test]
    fn review_json_is_a_request_changes_verdict() {
        let review = review_json();
        assert_eq!(review["verdict"], "request_changes");
        assert_eq!(review["findings"][0]["line"], 3);
        assert_eq!(review["findings"][0]["file"], "a.rs");
    }
}
