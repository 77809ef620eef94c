//! One prompt turn, run on its own thread so that the reading loop can still deliver
//! `session/cancel` and the client's answers to the agent's own requests.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::plugin_script;
use crate::rpc::INTERNAL_ERROR;
use crate::scenario::{ErrorKind, Scenario};
use crate::script::{self, Action};
use crate::server::model_label;
use crate::trace::Prompt;
use crate::wire::{self, Stats, TurnIds};
use crate::Shared;

pub const TEXT: &str = "Mock answer: the bridge works.";
pub const NARRATION: &str = "I'll run the tests next to check the fix.";
pub const MALFORMED: &str = r#"<tool>{"name": "Bash", "arguments": {</tool>"#;
/// The length of the message of `[mock:rpc-error=bad-shape]`.
const BAD_SHAPE_MESSAGE: usize = 200 * 1024;
const TOOL_RAN: &str = "Mock answer: the tool ran.";
/// What the bridge's framing says when the request disables parallel tool use.
const PARALLEL_DISABLED: &str = "Parallel tool use is disabled";
/// `used` of the `usage_update` `[mock:usage-update]` sends.
pub const CONTEXT_USED: u64 = 5555;
const EXIT_TEXT: &str = "Mock answer: the agent is about to exit.";
const HUGE_TOTAL: usize = 4 * 1024 * 1024;
const HUGE_CHUNK: usize = 64 * 1024;
const SLOW_CHUNKS: usize = 6;
const TOOL_CALL_WAIT: Duration = Duration::from_secs(30);
const STRAY_ID: u64 = 987_654;

/// What the reading loop passes to the running turn.
pub enum Event {
    /// The client's answer to a request the agent sent.
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
    /// `session/cancel` for this turn's session.
    Cancel,
}

/// The turn was cancelled by the client.
struct Cancelled;

/// How chunks are delivered.
#[derive(Clone, Copy)]
enum Route {
    Update,
    /// The legacy `$/update` method with flat params.
    Legacy,
    /// `session/update` with somebody else's session id.
    WrongSession,
}

pub struct Turn {
    pub shared: Arc<Shared>,
    pub session_id: String,
    pub request_id: Value,
    /// The session's whole trace so far, framed as a full prompt (what the turn decides on).
    pub prompt: String,
    /// `full`, `continuation` or `repair`: what the client sent for this turn.
    pub received: &'static str,
    /// Characters the client sent for this turn.
    pub received_chars: usize,
    /// The media types of the image blocks sent with this turn.
    pub images: crate::server::Images,
    pub scenario: Scenario,
    /// The ACP id of the session's model when the prompt arrived (the model that answers).
    pub model: String,
    pub ids: TurnIds,
    pub started: Instant,
    pub inbox: Receiver<Event>,
    pub done: Arc<AtomicBool>,
}

/// `max(1, ceil(chars / 4))`, the bridge's own estimate.
pub(crate) fn tokens(text: &str) -> u64 {
    let chars = text.chars().count() as u64;
    chars.div_ceil(4).max(1)
}

/// Splits `text` in two at the character boundary nearest its middle.
pub(crate) fn halves(text: &str) -> [&str; 2] {
    let mut at = text.len() / 2;
    while !text.is_char_boundary(at) {
        at += 1;
    }
    let (a, b) = text.split_at(at);
    [a, b]
}

/// A `<tool>` envelope with `name` first, as the framing shows it.
pub fn envelope(name: &str, arguments: &Value) -> String {
    format!(
        "<tool>{{\"name\":{},\"arguments\":{arguments}}}</tool>",
        Value::String(name.to_owned())
    )
}

/// The tool the scenario markers use: Bash when it is declared (or nothing is), otherwise the
/// first declared tool with no arguments.
fn marker_tool(tools: &[&str], command: &str, description: &str) -> (String, Value) {
    match tools.first() {
        Some(first) if !tools.contains(&"Bash") => ((*first).to_owned(), json!({})),
        _ => (
            "Bash".to_owned(),
            json!({"command": command, "description": description}),
        ),
    }
}

/// The usage `[mock:usage]` reports, whatever the prompt. The cache-write count is the one
/// field the CLI's usage is not known to carry: the marker exists to prove that a client
/// passes every reported count on.
pub fn reported_usage() -> Value {
    let mut usage = wire::usage(4321, 42, 4000);
    usage["cachedWriteTokens"] = json!(300);
    usage
}

/// The first word ending in `.png` in the trace's `[User]` sections (what `[mock:read-image]`
/// asks the client to read).
fn image_path(prompt: &Prompt<'_>) -> Option<String> {
    prompt
        .sections
        .iter()
        .filter(|section| section.kind == crate::trace::Kind::User)
        .flat_map(|section| section.body.split_whitespace())
        .find(|word| word.ends_with(".png") && word.starts_with('/'))
        .map(str::to_owned)
}

fn hang_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

impl Turn {
    pub fn run(self) {
        if self.play().is_err() {
            self.cancelled();
        }
        self.done.store(true, Ordering::SeqCst);
    }

    fn log(&self, event: &str, fields: Value) {
        self.shared
            .log
            .event(event, Some(self.scenario.name()), fields);
    }

    fn play(&self) -> Result<(), Cancelled> {
        let Ok(prompt) = Prompt::parse(&self.prompt) else {
            // The reading loop checked the framing before starting the turn.
            self.fail(INTERNAL_ERROR, "Internal error: prompt framing", None);
            return Ok(());
        };
        let repair = prompt.is_repair();
        let tools = prompt.tool_names();
        let results = prompt.tool_results();
        self.log(
            "prompt",
            json!({
                "sessionId": self.session_id,
                "received": self.received,
                "receivedChars": self.received_chars,
                "images": self.images.len(),
                "imageTypes": self.images,
                "repair": repair,
                "toolResults": results.len(),
                "tools": tools.len(),
                "chars": self.prompt.chars().count(),
            }),
        );

        match self.scenario {
            Scenario::Hang => {
                self.log("hang", json!({}));
                eprintln!("mock-devin: [mock:hang] the turn never ends");
                hang_forever();
            }
            Scenario::Grandchild => self.grandchild(),
            _ => {}
        }

        self.prelude();
        let (tool, arguments) = marker_tool(&tools, "echo mock", "Print a marker");
        let tool_envelope = || {
            self.log_envelope(&tool, &arguments);
            envelope(&tool, &arguments)
        };
        match self.scenario {
            Scenario::Text | Scenario::Usage | Scenario::NoUsage | Scenario::UsageUpdate => {
                self.answer(TEXT, Route::Update, "text")
            }
            Scenario::Tool => self.answer(&tool_envelope(), Route::Update, "tool"),
            Scenario::NarrateThenTool if repair => {
                self.answer(&tool_envelope(), Route::Update, "tool")
            }
            Scenario::NarrateThenTool | Scenario::NarrateAlways => {
                self.answer(NARRATION, Route::Update, "narration")
            }
            Scenario::MalformedThenTool if repair => {
                self.answer(&tool_envelope(), Route::Update, "tool")
            }
            Scenario::MalformedThenTool => self.answer(MALFORMED, Route::Update, "malformed"),
            Scenario::TwoTools => {
                let (second, second_arguments) =
                    marker_tool(&tools, "echo second", "Print a second marker");
                self.log_envelope(&second, &second_arguments);
                let text = format!(
                    "{}\n{}",
                    tool_envelope(),
                    envelope(&second, &second_arguments)
                );
                self.answer(&text, Route::Update, "tools")
            }
            Scenario::RpcError(kind) => {
                self.rpc_error(kind);
                Ok(())
            }
            Scenario::Exit => self.exit(),
            Scenario::Images => {
                let text = format!("images: {} ({})", self.images.len(), self.images.join(", "));
                self.answer(&text, Route::Update, "text")
            }
            Scenario::ReadImage => match (results.is_empty(), image_path(&prompt)) {
                (true, Some(path)) => {
                    let arguments = json!({"file_path": path});
                    self.log_envelope("Read", &arguments);
                    self.answer(&envelope("Read", &arguments), Route::Update, "tool")
                }
                _ => {
                    let text = format!(
                        "I see {} image(s): {}",
                        self.images.len(),
                        self.images.join(", ")
                    );
                    self.answer(&text, Route::Update, "text")
                }
            },
            Scenario::LastUser => {
                let last = prompt.last_user().unwrap_or_default().trim().to_owned();
                self.answer(&last, Route::Update, "text")
            }
            Scenario::ExitAfter => {
                self.answer(TEXT, Route::Update, "text")?;
                self.log("exit", json!({"status": 3, "after": "answer"}));
                eprintln!("mock-devin: [mock:exit-after] exiting with status 3 after the answer");
                // Give the answer a moment to be read before the pipes close.
                std::thread::sleep(Duration::from_millis(50));
                std::process::exit(3);
            }
            Scenario::ToolCall => self.tool_call("tool_call"),
            Scenario::ToolCallUpdate => self.tool_call("tool_call_update"),
            Scenario::LegacyUpdate => self.answer(TEXT, Route::Legacy, "text"),
            Scenario::Permission => self.permission(),
            Scenario::AgentRequest => self.agent_request(),
            Scenario::MalformedFrame => {
                self.shared.out.line(b"this is not json");
                self.log("malformed_frame", json!({}));
                self.answer(TEXT, Route::Update, "text")
            }
            Scenario::Huge => self.huge(),
            Scenario::Slow => self.slow(),
            Scenario::WrongSession => self.answer(TEXT, Route::WrongSession, "text"),
            Scenario::StrayResponse => {
                self.shared
                    .out
                    .send(&json!({"jsonrpc": "2.0", "id": STRAY_ID, "result": {}}));
                self.log("stray_response", json!({"id": STRAY_ID}));
                self.answer(TEXT, Route::Update, "text")
            }
            Scenario::Env => self.answer(&environment(), Route::Update, "env"),
            Scenario::Whoami => {
                let text = format!("model: {}", self.model);
                self.answer(&text, Route::Update, "text")
            }
            Scenario::Probe => {
                let report = crate::probe::report(prompt.last_user().unwrap_or_default());
                self.answer(&report, Route::Update, "probe")
            }
            Scenario::Script => match prompt.plugin_command() {
                // A slash command of the Claude Code plugin: its transport handshake.
                Some((subcommand, raw)) => self.play_action(
                    plugin_script::next(&subcommand, &raw, &results),
                    results.len(),
                ),
                None => {
                    let parallel = !self.prompt.contains(PARALLEL_DISABLED);
                    self.play_action(script::next(&results, &tools, parallel), results.len())
                }
            },
            // Handled above: they never get here.
            Scenario::Hang | Scenario::Grandchild => hang_forever(),
        }
    }

    /// Plays one step of a scripted session.
    fn play_action(&self, action: Action, step: usize) -> Result<(), Cancelled> {
        match action {
            Action::Tool { name, arguments } => {
                self.log("script_step", json!({"step": step, "tool": name}));
                self.log_envelope(name, &arguments);
                self.answer(&envelope(name, &arguments), Route::Update, "tool")
            }
            Action::Tools(calls) => {
                let names: Vec<&str> = calls.iter().map(|(name, _)| *name).collect();
                self.log("script_step", json!({"step": step, "tools": names}));
                let envelopes: Vec<String> = calls
                    .iter()
                    .map(|(name, arguments)| {
                        self.log_envelope(name, arguments);
                        envelope(name, arguments)
                    })
                    .collect();
                self.answer(&envelopes.join("\n"), Route::Update, "tools")
            }
            Action::Text(text) => {
                self.log("script_step", json!({"step": step, "tool": null}));
                self.answer(&text, Route::Update, "text")
            }
        }
    }

    /// Answers the prompt. The turn counts as over before the answer is written, so that a
    /// client may send its next prompt as soon as it reads the answer.
    fn complete(&self, result: Value) {
        self.done.store(true, Ordering::SeqCst);
        self.shared.out.respond(&self.request_id, result);
    }

    /// Answers the prompt with a JSON-RPC error (see [`Turn::complete`]).
    fn fail(&self, code: i64, message: &str, data: Option<Value>) {
        self.done.store(true, Ordering::SeqCst);
        self.shared.out.error(&self.request_id, code, message, data);
    }

    fn log_envelope(&self, name: &str, arguments: &Value) {
        self.log(
            "tool_envelope",
            json!({"name": name, "arguments": arguments}),
        );
    }

    fn update(&self, update: Value) {
        self.shared.out.notify(
            "session/update",
            json!({"sessionId": self.session_id, "update": update}),
        );
    }

    /// The label of the model that answers.
    fn label(&self) -> &str {
        model_label(&self.model)
    }

    /// `_cognition.ai/agent_stopped` with this turn's counts.
    fn stopped(&self, cause: &str, input: u64, output: u64) {
        let elapsed = self.started.elapsed().as_millis() as u64;
        let stats = Stats {
            input_tokens: input,
            output_tokens: output,
            ttft_ms: elapsed,
            total_time_ms: elapsed,
            ..Stats::default()
        };
        self.shared.out.notify(
            "_cognition.ai/agent_stopped",
            wire::agent_stopped(
                &self.session_id,
                cause,
                &stats,
                &self.ids.request,
                self.label(),
            ),
        );
    }

    /// Things a real turn sends before any text, which a client must tolerate.
    fn prelude(&self) {
        self.shared
            .out
            .send(&wire::output_notification("Thinking...\n"));
        self.update(json!({"sessionUpdate": "available_commands_update", "availableCommands": []}));
        self.shared.out.notify(
            "_cognition.ai/turn_stats",
            wire::turn_stats(&self.session_id, &self.ids, self.label()),
        );
    }

    fn chunk(&self, text: &str, route: Route) {
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

    /// Streams `reply` in two chunks, then ends the turn.
    fn answer(&self, reply: &str, route: Route, kind: &str) -> Result<(), Cancelled> {
        for half in halves(reply) {
            self.check_cancel()?;
            self.chunk(half, route);
        }
        self.finish(reply, kind);
        Ok(())
    }

    /// `_cognition.ai/agent_stopped`, then the prompt's result with usage.
    fn finish(&self, reply: &str, kind: &str) {
        let input = tokens(&self.prompt);
        let output = tokens(reply);
        let mut fields =
            json!({"kind": kind, "chars": reply.chars().count(), "outputTokens": output});
        // The environment listing stays out of the log; so does anything long.
        if kind != "env" && reply.len() <= 1024 {
            fields["text"] = Value::String(reply.to_owned());
        }
        // Logged before the result goes out: the host ends the agent as soon as it has the
        // result, and the line must not be lost with it.
        fields["model"] = json!(self.model);
        self.log("reply", fields);
        if self.scenario == Scenario::UsageUpdate {
            self.update(
                json!({"sessionUpdate": "usage_update", "used": CONTEXT_USED, "size": 256000}),
            );
        }
        self.stopped("complete", input, output);
        let usage = match self.scenario {
            Scenario::Usage => Some(reported_usage()),
            Scenario::NoUsage | Scenario::UsageUpdate => None,
            _ => Some(wire::usage(input, output, 0)),
        };
        self.complete(wire::prompt_result("end_turn", usage, &self.ids));
    }

    fn cancelled(&self) {
        let input = tokens(&self.prompt);
        self.stopped("cancelled", input, 0);
        self.complete(wire::prompt_result(
            "cancelled",
            Some(wire::usage(input, 0, 0)),
            &self.ids,
        ));
        self.log("cancelled", json!({"sessionId": self.session_id}));
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

    fn rpc_error(&self, kind: ErrorKind) {
        self.stopped("error", tokens(&self.prompt), 0);
        match kind {
            ErrorKind::Fault(fault) => {
                let (code, message, data) = fault.refusal();
                self.fail(code, &message, data);
                self.log(
                    "rpc_error",
                    json!({"code": code, "errorKind": fault.kind()}),
                );
            }
            ErrorKind::BadShape => {
                let message = "x".repeat(BAD_SHAPE_MESSAGE);
                let data = json!({"cognition.ai/errorKind": 42, "cognition.ai/retryable": "yes"});
                self.fail(INTERNAL_ERROR, &message, Some(data));
                self.log("rpc_error", json!({"code": INTERNAL_ERROR, "shape": "bad"}));
            }
            ErrorKind::NotObject => {
                self.done.store(true, Ordering::SeqCst);
                self.shared
                    .out
                    .send(&json!({"jsonrpc": "2.0", "id": self.request_id,
                    "error": {"code": INTERNAL_ERROR, "data": "oops"}}));
                self.log(
                    "rpc_error",
                    json!({"code": INTERNAL_ERROR, "shape": "not-object"}),
                );
            }
        }
    }

    fn exit(&self) -> ! {
        self.chunk(halves(EXIT_TEXT)[0], Route::Update);
        self.log("exit", json!({"status": 3}));
        eprintln!("mock-devin: [mock:exit] exiting with status 3 in the middle of a turn");
        std::process::exit(3);
    }

    fn grandchild(&self) -> ! {
        let program = std::env::current_exe().unwrap_or_else(|_| "mock-devin".into());
        let spawned = Command::new(program)
            .args([crate::GRANDCHILD_ARG, "300"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match spawned {
            Ok(child) => {
                eprintln!(
                    "mock-devin: [mock:grandchild] started `mock-devin --grandchild-sleep 300` as pid {}; hanging",
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
        self.log("hang", json!({}));
        hang_forever();
    }

    fn tool_call(&self, variant: &str) -> Result<(), Cancelled> {
        let mut update = json!({
            "sessionUpdate": variant,
            "toolCallId": "call_1",
            "title": "Run shell",
            "kind": "execute",
            "status": "pending",
        });
        if variant == "tool_call" {
            update["rawInput"] = json!({"command": "echo from the agent"});
        }
        self.update(update);
        self.log("tool_call", json!({"sessionUpdate": variant}));
        // As if the agent ran the tool itself; the client is expected to stop us first.
        self.pause(TOOL_CALL_WAIT)?;
        self.answer(TOOL_RAN, Route::Update, "text")
    }

    fn permission(&self) -> Result<(), Cancelled> {
        let answer = self.ask(
            "session/request_permission",
            json!({
                "sessionId": self.session_id,
                "toolCall": {"toolCallId": "c1", "title": "Run npm test", "kind": "execute"},
                "options": [
                    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
                    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
                ],
            }),
        )?;
        let outcome = match &answer {
            Err(_) => "error".to_owned(),
            Ok(result) => result
                .pointer("/outcome/outcome")
                .and_then(Value::as_str)
                .unwrap_or("invalid")
                .to_owned(),
        };
        self.log("permission_answer", json!({"outcome": outcome}));
        self.answer(
            &format!("permission outcome: {outcome}"),
            Route::Update,
            "text",
        )
    }

    fn agent_request(&self) -> Result<(), Cancelled> {
        let answer = self.ask(
            "fs/read_text_file",
            json!({"sessionId": self.session_id, "path": "/etc/passwd"}),
        )?;
        let shown = match &answer {
            Err(error) => error
                .get("code")
                .map_or_else(|| error.to_string(), Value::to_string),
            Ok(result) => result.to_string(),
        };
        self.log(
            "agent_request_answer",
            json!({"error": answer.is_err(), "code": answer.as_ref().err().and_then(|e| e.get("code").cloned())}),
        );
        self.answer(&format!("fs answer: {shown}"), Route::Update, "text")
    }

    fn huge(&self) -> Result<(), Cancelled> {
        const LINE: &str = "huge output from the offline agent, streamed on purpose.\n";
        let mut chunk = LINE.repeat(HUGE_CHUNK / LINE.len() + 1);
        chunk.truncate(HUGE_CHUNK);
        for _ in 0..HUGE_TOTAL / HUGE_CHUNK {
            self.check_cancel()?;
            self.chunk(&chunk, Route::Update);
        }
        // The usage and the log describe the whole reply without holding it twice.
        let input = tokens(&self.prompt);
        let output = (HUGE_TOTAL as u64).div_ceil(4);
        self.stopped("complete", input, output);
        self.complete(wire::prompt_result(
            "end_turn",
            Some(wire::usage(input, output, 0)),
            &self.ids,
        ));
        self.log(
            "reply",
            json!({"kind": "huge", "chars": HUGE_TOTAL, "outputTokens": output}),
        );
        Ok(())
    }

    fn slow(&self) -> Result<(), Cancelled> {
        let parts: Vec<String> = (1..=SLOW_CHUNKS)
            .map(|n| format!("Mock slow answer, part {n} of {SLOW_CHUNKS}. "))
            .collect();
        for (index, part) in parts.iter().enumerate() {
            if index > 0 {
                self.pause(self.shared.config.slow)?;
            }
            self.check_cancel()?;
            self.chunk(part, Route::Update);
        }
        self.finish(&parts.concat(), "text");
        Ok(())
    }
}

/// `NAME=VALUE` lines for the whole environment, sorted by name.
pub(crate) fn environment() -> String {
    let mut vars: Vec<(String, String)> = std::env::vars_os()
        .map(|(name, value)| {
            (
                name.to_string_lossy().into_owned(),
                value.to_string_lossy().into_owned(),
            )
        })
        .collect();
    vars.sort();
    if vars.is_empty() {
        return "(empty environment)".to_owned();
    }
    vars.iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join("\n")
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
        assert_eq!(
            envelope(
                "Bash",
                &json!({"command": "echo mock", "description": "Print a marker"})
            ),
            r#"<tool>{"name":"Bash","arguments":{"command":"echo mock","description":"Print a marker"}}</tool>"#
        );
        assert_eq!(
            marker_tool(&["Read", "Write"], "c", "d"),
            ("Read".to_owned(), json!({}))
        );
        assert_eq!(marker_tool(&[], "c", "d").0, "Bash");
        assert_eq!(marker_tool(&["Read", "Bash"], "c", "d").0, "Bash");
    }
}
