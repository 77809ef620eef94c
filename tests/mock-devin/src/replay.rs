//! `mock-devin --replay FILE ...` (or `--replay=FILE`): the agent of a recorded trace (the
//! bridge's `doctor --record` format, see `docs/traces.md`) played back to a live client.
//!
//! The trace is a list of messages, each `to_agent` or `from_agent`. The replay walks it with a
//! cursor:
//! - a live **request** must be the next recorded `to_agent` request, by method. Recorded
//!   `session/set_config_option` and `session/set_mode` requests the live client does not send
//!   are skipped with everything the agent recorded after them (clients differ in which
//!   options they set); nothing else is skipped. On a match, every recorded `from_agent`
//!   message up to the next recorded `to_agent` request is sent, in order: the answer carries
//!   the live request's id, session ids are the replay's own (each recorded session id gets a
//!   live one, used wherever the recorded one was), and the text placeholders of a redacted
//!   trace (`[redacted text: ...]`) are filled in: the reply of a turn (its first reply
//!   chunk's placeholder) becomes exactly [`FILL`], so a client has a reply to read, its other
//!   reply chunks empty, and any other placeholder [`FILL`] too;
//! - a recorded `from_agent` request (the agent asking the client) is sent with its recorded
//!   id; when the trace then records the client's answer, the replay waits for the live
//!   answer before going on;
//! - a live `session/delete` or `session/close` of a session the replay opened, when the trace
//!   does not expect one there, is answered `{}` as the CLI answers it (a client may open a
//!   session only to read its options and release it at once, or release one after a failed
//!   turn); the cursor does not move;
//! - recorded `to_agent` notifications are not waited for: the recorded agent already reacted
//!   to them. A live notification is accepted when the trace has one of that method, and a
//!   live `session/cancel` always (the CLI accepts a cancel at any time, of any session);
//! - a line the trace kept as `{"unparseable": ...}` is sent as a line that is not JSON.
//!
//! Anything else fails loudly: a live request of another method than the trace expects, a
//! request after the trace's end, a request naming a session the replay never opened, an
//! answer nobody asked for, an unknown notification. The replay then writes
//! `mock-devin replay: unexpected ...` naming the method and the trace's line on stderr,
//! answers a request with a JSON-RPC error saying the same, logs `replay_unexpected` to
//! `MOCK_DEVIN_LOG`, and exits with status [`UNEXPECTED_EXIT`]. The end of stdin ends the
//! replay with status 0, wherever the cursor is.
//!
//! `--version` beside `--replay` prints the CLI version the trace's header recorded
//! (`cli_version`) and exits 0, as the recorded CLI answered it; a trace that recorded none
//! fails with the usage status, since a client that checks versions would otherwise test a
//! version nobody ran.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::log::Log;
use crate::rpc::{self, Incoming, Output};

/// The flag that selects a replay.
pub(crate) const FLAG: &str = "--replay";
/// The exit status after an unexpected message.
pub(crate) const UNEXPECTED_EXIT: i32 = 65;
/// The code of the JSON-RPC error an unexpected request is answered with.
pub(crate) const UNEXPECTED_CODE: i64 = -32099;
/// What a redacted text becomes in a replay.
pub(crate) const FILL: &str = "(replayed text)";
/// How a redaction placeholder of a text starts.
const TEXT_PLACEHOLDER: &str = "[redacted text: ";
/// The `format` of a trace's header line.
const FORMAT: &str = "devin-bridge-trace";
/// The largest trace read (bytes).
const MAX_TRACE_BYTES: u64 = 64 << 20;
/// Requests that release a session, answered `{}` when the trace does not expect them.
const RELEASES: [&str; 2] = ["session/delete", "session/close"];
/// Recorded requests a live client may leave out.
const OPTIONAL: [&str; 2] = ["session/set_config_option", "session/set_mode"];

/// The trace file of `--replay FILE` or `--replay=FILE` anywhere in argv, when asked for.
pub(crate) fn wanted(args: &[OsString]) -> Option<Result<PathBuf, String>> {
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == FLAG {
            return Some(
                rest.next()
                    .map(PathBuf::from)
                    .ok_or_else(|| format!("{FLAG} needs a trace file")),
            );
        }
        if let Some(file) = arg.to_str().and_then(|arg| arg.strip_prefix("--replay=")) {
            return Some(Ok(PathBuf::from(file)));
        }
    }
    None
}

/// Which way a recorded message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    ToAgent,
    FromAgent,
}

/// One recorded message and its line in the file.
#[derive(Debug, Clone)]
struct Recorded {
    line: usize,
    dir: Dir,
    msg: Value,
}

impl Recorded {
    fn method(&self) -> Option<&str> {
        self.msg.get("method").and_then(Value::as_str)
    }

    fn is_request(&self) -> bool {
        self.method().is_some() && self.msg.get("id").is_some()
    }

    fn is_notification(&self) -> bool {
        self.method().is_some() && self.msg.get("id").is_none()
    }
}

/// Reads a trace: its messages with their line numbers.
fn parse(text: &str) -> Result<Vec<Recorded>, String> {
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line)
            .map_err(|error| format!("line {number}: not JSON: {error}"))?;
        if value.get("format").and_then(Value::as_str) == Some(FORMAT) {
            continue;
        }
        let dir = match value.get("dir").and_then(Value::as_str) {
            Some("to_agent") => Dir::ToAgent,
            Some("from_agent") => Dir::FromAgent,
            _ => {
                return Err(format!(
                    "line {number}: no \"dir\" of to_agent or from_agent"
                ))
            }
        };
        let Some(msg) = value.get("msg").cloned() else {
            return Err(format!("line {number}: no \"msg\""));
        };
        out.push(Recorded {
            line: number,
            dir,
            msg,
        });
    }
    Ok(out)
}

/// Why the replay stopped.
#[derive(Debug, PartialEq)]
pub(crate) struct Unexpected {
    /// What the live client sent (`request session/prompt`, `answer to 3`, ...).
    pub(crate) what: String,
    /// What the trace expected instead, with its line.
    pub(crate) expected: String,
    /// The id of the live request, when it was one (it gets an error answer).
    pub(crate) id: Option<Value>,
}

impl Unexpected {
    pub(crate) fn message(&self, file: &Path) -> String {
        format!(
            "unexpected {}: the trace {} {}",
            self.what,
            file.display(),
            self.expected
        )
    }
}

/// What the replay waits for.
#[derive(Debug, Clone, PartialEq)]
enum Waiting {
    /// The live request that matches the recorded one at this index.
    Request,
    /// The live answer to the agent request with this id.
    Answer(Value),
}

/// The state of one replay.
pub(crate) struct Replay {
    trace: Vec<Recorded>,
    cursor: usize,
    waiting: Waiting,
    /// The id of the recorded request being answered, and the live id to answer it with.
    answering: Option<(Value, Value)>,
    /// Recorded session ids and the live ones that replace them.
    sessions: HashMap<String, String>,
    /// Methods of recorded `to_agent` notifications.
    notifications: HashSet<String>,
    /// Whether a reply chunk of the current exchange was filled in already.
    filled: bool,
    out: Output,
}

impl Replay {
    fn new(trace: Vec<Recorded>, out: Output) -> Self {
        let notifications = trace
            .iter()
            .filter(|recorded| recorded.dir == Dir::ToAgent && recorded.is_notification())
            .filter_map(|recorded| recorded.method().map(str::to_owned))
            .collect();
        Self {
            trace,
            cursor: 0,
            waiting: Waiting::Request,
            answering: None,
            sessions: HashMap::new(),
            notifications,
            filled: false,
            out,
        }
    }

    /// The line the cursor is at, for messages.
    fn here(&self) -> String {
        match self.trace.get(self.cursor) {
            Some(recorded) => format!("line {}", recorded.line),
            None => match self.trace.last() {
                Some(last) => format!("its end (after line {})", last.line),
                None => "its end (it is empty)".to_owned(),
            },
        }
    }

    /// Handles one live message.
    pub(crate) fn handle(&mut self, incoming: Incoming) -> Result<(), Unexpected> {
        match incoming {
            Incoming::Request { id, method, params } => self.request(id, &method, &params),
            Incoming::Notification { method, .. } => {
                if method == "session/cancel" || self.notifications.contains(&method) {
                    Ok(())
                } else {
                    Err(Unexpected {
                        what: format!("notification `{method}`"),
                        expected: format!(
                            "records no `{method}` notification (at {})",
                            self.here()
                        ),
                        id: None,
                    })
                }
            }
            Incoming::Response { id, .. } => match &self.waiting {
                Waiting::Answer(asked) if *asked == id => {
                    self.cursor += 1;
                    self.waiting = Waiting::Request;
                    self.advance();
                    Ok(())
                }
                _ => Err(Unexpected {
                    what: format!("answer to request {id}"),
                    expected: format!("expected no answer at {}", self.here()),
                    id: None,
                }),
            },
            Incoming::Invalid { id, message, .. } => Err(Unexpected {
                what: format!("message that is not JSON-RPC ({message})"),
                expected: format!("expected a message at {}", self.here()),
                id: Some(id),
            }),
        }
    }

    fn request(&mut self, id: Value, method: &str, params: &Value) -> Result<(), Unexpected> {
        let unexpected = |expected: String| Unexpected {
            what: format!("request `{method}`"),
            expected,
            id: Some(id.clone()),
        };
        if let Waiting::Answer(asked) = &self.waiting {
            return Err(unexpected(format!(
                "expected the answer to the agent's request {asked} at {}",
                self.here()
            )));
        }
        // `session/load` names a session of an earlier process: the replay opens it.
        let named = params
            .get("sessionId")
            .and_then(Value::as_str)
            .filter(|_| method != "session/load");
        if let Some(session) = named {
            if !self.sessions.values().any(|live| live == session) {
                return Err(unexpected(format!(
                    "never opened the session {session:?} (request expected at {})",
                    self.here()
                )));
            }
        }
        // The next recorded request, past optional ones the live client left out.
        let mut at = self.cursor;
        let found = loop {
            let Some(recorded) = self.trace.get(at) else {
                break None;
            };
            if recorded.dir == Dir::ToAgent && recorded.is_request() {
                if recorded.method() == Some(method) {
                    break Some(at);
                }
                if !recorded.method().is_some_and(|m| OPTIONAL.contains(&m)) {
                    break None;
                }
            }
            at += 1;
        };
        let Some(at) = found else {
            // Releasing a session the replay opened is answered as the CLI answers it,
            // whenever it comes: a client may open a session only to read its options and
            // release it at once (the bridge's start-up probe), or release one after a failure.
            if RELEASES.contains(&method) && named.is_some() {
                self.out.respond(&id, json!({}));
                return Ok(());
            }
            let expected = match self.next_request() {
                Some(recorded) => format!(
                    "expected `{}` at line {}",
                    recorded.method().unwrap_or("?"),
                    recorded.line
                ),
                None => format!("has no more requests (at {})", self.here()),
            };
            return Err(unexpected(expected));
        };
        let recorded_id = self.trace[at].msg.get("id").cloned().unwrap_or(Value::Null);
        // A session the client names (session/load) is the live one for its recorded id.
        if let (Some(recorded), Some(live)) = (
            self.trace[at]
                .msg
                .pointer("/params/sessionId")
                .and_then(Value::as_str),
            params.get("sessionId").and_then(Value::as_str),
        ) {
            self.sessions
                .entry(recorded.to_owned())
                .or_insert_with(|| live.to_owned());
        }
        // A session the agent opens in its answer gets its live id now: updates that come
        // before the answer must name it already.
        let opened = self.trace[at + 1..]
            .iter()
            .take_while(|recorded| !(recorded.dir == Dir::ToAgent && recorded.is_request()))
            .find(|recorded| {
                recorded.dir == Dir::FromAgent
                    && recorded.method().is_none()
                    && recorded.msg.get("id") == Some(&recorded_id)
            })
            .and_then(|answer| answer.msg.pointer("/result/sessionId"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(session) = opened {
            let next = self.sessions.len() + 1;
            self.sessions
                .entry(session)
                .or_insert_with(|| format!("replay-{:08x}-{next}", std::process::id()));
        }
        self.answering = Some((recorded_id, id));
        self.filled = false;
        self.cursor = at + 1;
        self.advance();
        Ok(())
    }

    /// The next recorded request from the cursor on.
    fn next_request(&self) -> Option<&Recorded> {
        self.trace[self.cursor.min(self.trace.len())..]
            .iter()
            .find(|recorded| recorded.dir == Dir::ToAgent && recorded.is_request())
    }

    /// Sends what the agent recorded from the cursor on, up to the next thing to wait for.
    fn advance(&mut self) {
        while let Some(recorded) = self.trace.get(self.cursor).cloned() {
            match recorded.dir {
                Dir::ToAgent if recorded.is_request() => {
                    self.waiting = Waiting::Request;
                    return;
                }
                Dir::ToAgent if recorded.is_notification() => self.cursor += 1,
                Dir::ToAgent => {
                    // The client's answer to the agent's request: wait for the live one.
                    let asked = recorded.msg.get("id").cloned().unwrap_or(Value::Null);
                    self.waiting = Waiting::Answer(asked);
                    return;
                }
                Dir::FromAgent => {
                    self.send(&recorded.msg);
                    self.cursor += 1;
                }
            }
        }
        self.waiting = Waiting::Request;
    }

    fn send(&mut self, recorded: &Value) {
        if recorded.get("unparseable").is_some() {
            self.out
                .line(b"this is not json (a line of the trace that was not JSON)");
            return;
        }
        let mut msg = recorded.clone();
        let is_answer = msg.get("method").is_none();
        if is_answer {
            if let Some((recorded_id, live_id)) = &self.answering {
                if msg.get("id") == Some(recorded_id) {
                    msg["id"] = live_id.clone();
                }
            }
        }
        self.fill_reply(&mut msg);
        self.rewrite(&mut msg);
        self.out.send(&msg);
    }

    /// The reply chunks of a redacted turn: the first becomes [`FILL`], the others empty, so
    /// the turn's reply is exactly [`FILL`] however many chunks the agent sent. Chunks marked
    /// display-only (`_meta["cognition.ai/displayMessage"]`) are not part of the reply and
    /// are left to [`Replay::rewrite`].
    fn fill_reply(&mut self, msg: &mut Value) {
        let Some(update) = msg.pointer_mut("/params/update") else {
            return;
        };
        let is_reply_chunk = update.get("sessionUpdate").and_then(Value::as_str)
            == Some("agent_message_chunk")
            && update
                .pointer("/_meta/cognition.ai~1displayMessage")
                .and_then(Value::as_bool)
                != Some(true);
        let Some(text) = update.pointer_mut("/content/text") else {
            return;
        };
        if is_reply_chunk
            && text
                .as_str()
                .is_some_and(|t| t.starts_with(TEXT_PLACEHOLDER))
        {
            *text = Value::String(if self.filled {
                String::new()
            } else {
                FILL.to_owned()
            });
            self.filled = true;
        }
    }

    /// Session ids to the live ones, text placeholders to [`FILL`].
    fn rewrite(&self, value: &mut Value) {
        match value {
            Value::Object(object) => {
                for (key, value) in object.iter_mut() {
                    match value {
                        Value::String(text) if key == "sessionId" => {
                            if let Some(live) = self.sessions.get(text.as_str()) {
                                *text = live.clone();
                            }
                        }
                        _ => self.rewrite(value),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.rewrite(item)),
            Value::String(text) if text.starts_with(TEXT_PLACEHOLDER) => *text = FILL.to_owned(),
            _ => {}
        }
    }
}

/// The `cli_version` of a trace's header line, if it recorded one.
fn recorded_version(text: &str) -> Option<String> {
    let first = text.lines().find(|line| !line.trim().is_empty())?;
    let header: Value = serde_json::from_str(first).ok()?;
    if header.get("format").and_then(Value::as_str) != Some(FORMAT) {
        return None;
    }
    header
        .get("cli_version")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Reads the trace `file` (bounded) as text.
fn read_trace(file: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(file).map_err(|error| error.to_string())?;
    if meta.len() > MAX_TRACE_BYTES {
        return Err(format!("over {MAX_TRACE_BYTES} bytes"));
    }
    std::fs::read_to_string(file).map_err(|error| error.to_string())
}

/// `--version` of a replay: the version the trace recorded; never returns.
pub(crate) fn version(file: &Path) -> ! {
    match read_trace(file).map(|text| recorded_version(&text)) {
        Ok(Some(version)) => {
            println!("{version}");
            std::process::exit(0);
        }
        Ok(None) => {
            eprintln!(
                "mock-devin replay: the trace {} records no cli_version to answer --version with",
                file.display()
            );
            std::process::exit(crate::cli::USAGE_EXIT);
        }
        Err(error) => {
            eprintln!(
                "mock-devin replay: cannot read the trace {}: {error}",
                file.display()
            );
            std::process::exit(crate::cli::USAGE_EXIT);
        }
    }
}

/// Runs the replay of `file` on stdin and stdout; never returns.
pub(crate) fn run(file: &Path) -> ! {
    let log = Log::new(crate::log::path());
    let trace = read_trace(file).and_then(|text| parse(&text));
    let trace = match trace {
        Ok(trace) => trace,
        Err(error) => {
            eprintln!(
                "mock-devin replay: cannot read the trace {}: {error}",
                file.display()
            );
            std::process::exit(crate::cli::USAGE_EXIT);
        }
    };
    log.event("replay_start", None, json!({"messages": trace.len()}));
    let out = Output::stdout();
    let mut replay = Replay::new(trace, out.clone());
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    rpc::serve_lines(&mut input, &out, |incoming| {
        if let Err(unexpected) = replay.handle(incoming) {
            let message = unexpected.message(file);
            eprintln!("mock-devin replay: {message}");
            log.event("replay_unexpected", None, json!({"message": message}));
            if let Some(id) = &unexpected.id {
                out.error(id, UNEXPECTED_CODE, &format!("replay: {message}"), None);
            }
            std::process::exit(UNEXPECTED_EXIT);
        }
    });
    log.event("replay_eof", None, json!({"at": replay.here()}));
    std::process::exit(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Sink {
        fn messages(&self) -> Vec<Value> {
            let bytes = std::mem::take(&mut *self.0.lock().unwrap());
            String::from_utf8(bytes)
                .unwrap()
                .lines()
                .map(|line| serde_json::from_str(line).unwrap_or(Value::String(line.into())))
                .collect()
        }
    }

    const TRACE: &str = r#"{"format":"devin-bridge-trace","version":1,"recorded_by":"test","redacted":[]}
{"dir":"to_agent","msg":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}}
{"dir":"from_agent","msg":{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}}
{"dir":"to_agent","msg":{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"[redacted path]","mcpServers":[]}}}
{"dir":"from_agent","msg":{"jsonrpc":"2.0","id":1,"result":{"sessionId":"session-1"}}}
{"dir":"to_agent","msg":{"jsonrpc":"2.0","id":2,"method":"session/set_config_option","params":{"sessionId":"session-1","configId":"model","value":"a"}}}
{"dir":"from_agent","msg":{"jsonrpc":"2.0","id":2,"result":{"configOptions":[]}}}
{"dir":"to_agent","msg":{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"session-1","prompt":[]}}}
{"dir":"from_agent","msg":{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"session-1"}}}
{"dir":"to_agent","msg":{"jsonrpc":"2.0","id":"p1","result":{"outcome":{"outcome":"cancelled"}}}}
{"dir":"from_agent","msg":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"session-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"[redacted text: 1-9 chars]"}}}}}
{"dir":"from_agent","msg":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"session-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"[redacted text: 10-99 chars]"}}}}}
{"dir":"to_agent","msg":{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"session-1"}}}
{"dir":"from_agent","msg":{"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}}
"#;

    fn replay() -> (Replay, Sink) {
        let sink = Sink::default();
        let out = Output::new(Box::new(sink.clone()));
        (Replay::new(parse(TRACE).unwrap(), out), sink)
    }

    fn request(id: u64, method: &str, params: Value) -> Incoming {
        Incoming::Request {
            id: json!(id),
            method: method.into(),
            params,
        }
    }

    #[test]
    fn the_recorded_answers_come_back_with_live_ids_sessions_and_filled_text() {
        let (mut replay, sink) = replay();
        replay.handle(request(10, "initialize", json!({}))).unwrap();
        assert_eq!(
            sink.messages(),
            [json!({"jsonrpc":"2.0","id":10,"result":{"protocolVersion":1}})]
        );
        replay
            .handle(request(11, "session/new", json!({})))
            .unwrap();
        let answer = sink.messages().remove(0);
        assert_eq!(answer["id"], 11);
        let live = answer["result"]["sessionId"].as_str().unwrap().to_owned();
        assert_ne!(live, "session-1");
        // The live client sets no option: the recorded set_config_option is skipped.
        replay
            .handle(request(12, "session/prompt", json!({"sessionId": live})))
            .unwrap();
        let sent = sink.messages();
        assert_eq!(
            sent.len(),
            1,
            "waits for the answer to its request: {sent:?}"
        );
        assert_eq!(sent[0]["method"], "session/request_permission");
        assert_eq!(sent[0]["params"]["sessionId"], live.as_str());
        replay
            .handle(Incoming::Response {
                id: json!("p1"),
                outcome: Ok(json!({})),
            })
            .unwrap();
        let sent = sink.messages();
        assert_eq!(sent[0]["params"]["update"]["content"]["text"], FILL);
        assert_eq!(
            sent[1]["params"]["update"]["content"]["text"], "",
            "one reply per turn"
        );
        assert_eq!(
            sent[2],
            json!({"jsonrpc":"2.0","id":12,"result":{"stopReason":"cancelled"}})
        );
        // A cancel is accepted whenever it comes.
        replay
            .handle(Incoming::Notification {
                method: "session/cancel".into(),
                params: json!({}),
            })
            .unwrap();
    }

    #[test]
    fn an_unexpected_request_names_the_method_and_the_line() {
        let (mut replay, _sink) = replay();
        replay.handle(request(0, "initialize", json!({}))).unwrap();
        let unexpected = replay
            .handle(request(1, "session/load", json!({})))
            .unwrap_err();
        let message = unexpected.message(Path::new("t.jsonl"));
        assert!(message.contains("request `session/load`"), "{message}");
        assert!(
            message.contains("expected `session/new` at line 4"),
            "{message}"
        );
        assert_eq!(unexpected.id, Some(json!(1)));
        // A session the replay never opened, a stray answer, an unknown notification.
        replay.handle(request(1, "session/new", json!({}))).unwrap();
        let wrong = replay
            .handle(request(
                2,
                "session/prompt",
                json!({"sessionId": "session-1"}),
            ))
            .unwrap_err();
        assert!(
            wrong.message(Path::new("t")).contains("never opened"),
            "{wrong:?}"
        );
        assert!(replay
            .handle(Incoming::Response {
                id: json!(9),
                outcome: Ok(json!({}))
            })
            .is_err());
        assert!(replay
            .handle(Incoming::Notification {
                method: "x/ping".into(),
                params: json!({})
            })
            .is_err());
    }

    #[test]
    fn releasing_an_opened_session_is_answered_wherever_it_comes() {
        let (mut replay, sink) = replay();
        replay.handle(request(0, "initialize", json!({}))).unwrap();
        replay.handle(request(1, "session/new", json!({}))).unwrap();
        let live = sink.messages()[1]["result"]["sessionId"].clone();
        replay
            .handle(request(2, "session/delete", json!({"sessionId": live})))
            .unwrap();
        assert_eq!(
            sink.messages(),
            [json!({"jsonrpc":"2.0","id":2,"result":{}})]
        );
        // The cursor did not move: the next request is still the recorded prompt.
        replay
            .handle(request(3, "session/prompt", json!({"sessionId": live})))
            .unwrap();
        assert_eq!(sink.messages()[0]["method"], "session/request_permission");
        // A session it never opened is still unexpected.
        assert!(replay
            .handle(request(4, "session/close", json!({"sessionId": "other"})))
            .is_err());
    }

    #[test]
    fn a_request_after_the_end_of_the_trace_is_unexpected() {
        let sink = Sink::default();
        let trace = parse(
            "{\"dir\":\"to_agent\",\"msg\":{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\"}}\n",
        )
        .unwrap();
        let mut replay = Replay::new(trace, Output::new(Box::new(sink)));
        replay.handle(request(0, "initialize", json!({}))).unwrap();
        let end = replay
            .handle(request(1, "session/new", json!({})))
            .unwrap_err();
        assert!(
            end.message(Path::new("t"))
                .contains("has no more requests (at its end (after line 1))"),
            "{end:?}"
        );
    }

    #[test]
    fn the_version_is_the_one_the_header_recorded() {
        assert_eq!(
            recorded_version(TRACE).as_deref(),
            None,
            "the test trace's header records no version"
        );
        let with = TRACE.replacen(
            "\"redacted\":[]",
            "\"cli_version\":\"devin 3000.11.3\",\"redacted\":[]",
            1,
        );
        assert_eq!(recorded_version(&with).as_deref(), Some("devin 3000.11.3"));
        // A trace without a header has no version either.
        let headless: String = TRACE.lines().skip(1).collect::<Vec<_>>().join("\n");
        assert_eq!(recorded_version(&headless), None);
    }

    #[test]
    fn argv_names_the_trace_either_way() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            wanted(&args(&["--replay", "a.jsonl", "acp"])),
            Some(Ok(PathBuf::from("a.jsonl")))
        );
        assert_eq!(
            wanted(&args(&["--model", "m", "--replay=b.jsonl", "acp"])),
            Some(Ok(PathBuf::from("b.jsonl")))
        );
        assert!(matches!(wanted(&args(&["--replay"])), Some(Err(_))));
        assert_eq!(wanted(&args(&["acp"])), None);
    }
}
