//! The ACP client the mock's own tests drive `mock-devin` with, over its stdio as the host and
//! the companion do: the agent in a process group of its own (killed whole when the client is
//! dropped), its stdout read on a thread line by line, requests sent with increasing ids, and
//! the session set-up every test starts with, checked as the real CLI does it.
//!
//! Every test binary that includes this module uses all of it but the helper marked
//! `allow(dead_code)` below, which only some binaries call.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_mock-devin");
/// How long the client waits for any one line of the agent's.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// What the agent wrote: a JSON message, or a line that is not JSON.
#[derive(Debug)]
pub(crate) enum Out {
    Json(Value),
    Raw(String),
}

/// A running `mock-devin` and the client's side of its pipes.
pub(crate) struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Out>,
    next_id: u64,
}

impl Agent {
    /// Starts `command` (the mock with its arguments, directory and environment) with piped
    /// stdin and stdout, stderr dropped, in its own process group; request ids count from
    /// `first_id + 1`.
    pub(crate) fn start(mut command: Command, first_id: u64) -> Self {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Its own process group, so that dropping the agent can kill what it started.
            .process_group(0);
        let mut child = command.spawn().expect("spawn mock-devin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let out = match serde_json::from_str::<Value>(&line) {
                    Ok(value) => Out::Json(value),
                    Err(_) => Out::Raw(line),
                };
                if tx.send(out).is_err() {
                    return;
                }
            }
        });
        Self {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: first_id,
        }
    }

    /// The agent's pid, which is also its process group.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn send(&mut self, message: &Value) {
        self.send_line(&message.to_string());
    }

    pub(crate) fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    pub(crate) fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    pub(crate) fn next(&self) -> Out {
        match self.lines.recv_timeout(WAIT) {
            Ok(out) => out,
            Err(RecvTimeoutError::Timeout) => panic!("no output from the agent within {WAIT:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the agent closed its stdout"),
        }
    }

    /// The next line, if one comes within `timeout` (the error says whether the agent closed
    /// its stdout instead).
    #[allow(dead_code)]
    pub(crate) fn next_within(&self, timeout: Duration) -> Result<Out, RecvTimeoutError> {
        self.lines.recv_timeout(timeout)
    }

    pub(crate) fn next_json(&self) -> Value {
        match self.next() {
            Out::Json(value) => value,
            Out::Raw(line) => panic!("not JSON: {line}"),
        }
    }

    /// Every message up to the response with `id`, and that response. A JSON message must be
    /// JSON-RPC 2.0; a line that is not JSON comes as a JSON string, for the tests that look
    /// for one (and [`Agent::call`] refuses it as it refuses any request before its answer).
    pub(crate) fn until_response(&self, id: u64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            match self.next() {
                Out::Json(message) => {
                    assert_eq!(message["jsonrpc"], "2.0", "{message}");
                    if message.get("method").is_none() && message["id"] == json!(id) {
                        return (before, message);
                    }
                    before.push(message);
                }
                Out::Raw(line) => before.push(Value::String(line)),
            }
        }
    }

    /// The answer to one request; only notifications may come before it.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        let (before, response) = self.until_response(id);
        assert!(
            before
                .iter()
                .all(|m| m.get("method").is_some() && m.get("id").is_none()),
            "unexpected messages: {before:?}"
        );
        response
    }

    /// `initialize` (without clientInfo, which passes); its answer, protocol version 1.
    pub(crate) fn initialize(&mut self) -> Value {
        let init = self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        init
    }

    /// `session/new`: the `config_option_update` comes before the answer and
    /// `_cognition.ai/mcp/serversChanged` right after it, as the real CLI sends them. Returns
    /// the answer (an error answer comes alone).
    pub(crate) fn new_session(&mut self, cwd: &Path) -> Value {
        let id = self.request(
            "session/new",
            json!({"cwd": cwd.to_str().expect("utf8 path"), "mcpServers": []}),
        );
        let (before, new) = self.until_response(id);
        if new.get("error").is_some() {
            assert!(before.is_empty(), "{before:?}");
            return new;
        }
        assert_eq!(before.len(), 1, "{before:?}");
        assert_eq!(
            new["result"]["_meta"],
            json!({"cognition.ai/isLocked": false}),
            "{new}"
        );
        let update = &before[0]["params"];
        assert_eq!(before[0]["method"], "session/update");
        assert_eq!(update["sessionId"], new["result"]["sessionId"]);
        assert_eq!(update["update"]["sessionUpdate"], "config_option_update");
        assert_eq!(
            update["update"]["configOptions"],
            new["result"]["configOptions"]
        );
        let changed = self.next_json();
        assert_eq!(
            changed["method"], "_cognition.ai/mcp/serversChanged",
            "{changed}"
        );
        assert_eq!(changed["params"], json!({}));
        new
    }

    /// `initialize` and `session/new`; the session's id.
    pub(crate) fn start_session(&mut self, cwd: &Path) -> String {
        self.initialize();
        let new = self.new_session(cwd);
        new["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {new}"))
            .to_owned()
    }

    pub(crate) fn prompt(&mut self, session: &str, text: &str) -> u64 {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    pub(crate) fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// The agent's exit status, when it exits `within` this long.
    pub(crate) fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// SIGKILL to the process group `pgid` (a group already gone is no error).
pub(crate) fn kill_group(pgid: u32) {
    let pgid = i32::try_from(pgid).expect("a pid fits an i32");
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

impl Drop for Agent {
    fn drop(&mut self) {
        kill_group(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
