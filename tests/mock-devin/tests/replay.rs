//! `mock-devin --replay FILE`: the binary plays a trace over stdio and fails loudly (stderr,
//! a JSON-RPC error, exit status 65) on a request the trace did not expect.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_mock-devin");

const TRACE: &str = r#"{"format":"devin-bridge-trace","version":1,"recorded_by":"test","redacted":[]}
{"dir":"to_agent","msg":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}}
{"dir":"from_agent","msg":{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentInfo":{"name":"affogato","version":"0.0.0-dev"}}}}
{"dir":"to_agent","msg":{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"[redacted path]","mcpServers":[]}}}
{"dir":"from_agent","msg":{"jsonrpc":"2.0","id":1,"result":{"sessionId":"session-1"}}}
"#;

/// Runs the replay of [`TRACE`] with `input` lines on stdin: its stdout messages, stderr and
/// exit status.
fn run(input: &[Value]) -> (Vec<Value>, String, Option<i32>) {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    std::fs::write(&trace, TRACE).unwrap();
    let mut child = Command::new(BIN)
        .arg("--replay")
        .arg(&trace)
        .args(["acp", "--agent-type", "summarizer"])
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for message in input {
        // The replay may have exited already (that is what one test checks).
        let _ = writeln!(stdin, "{message}");
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let messages = BufReader::new(&output.stdout[..])
        .lines()
        .map(|line| serde_json::from_str(&line.unwrap()).unwrap())
        .collect();
    (
        messages,
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status.code(),
    )
}

#[test]
fn the_trace_answers_the_expected_requests_with_the_live_ids() {
    let (messages, stderr, status) = run(&[
        json!({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"protocolVersion": 1}}),
        json!({"jsonrpc": "2.0", "id": 8, "method": "session/new", "params": {"cwd": "/x", "mcpServers": []}}),
    ]);
    assert_eq!(status, Some(0), "{stderr}");
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["id"], 7);
    assert_eq!(messages[0]["result"]["agentInfo"]["name"], "affogato");
    assert_eq!(messages[1]["id"], 8);
    let session = messages[1]["result"]["sessionId"].as_str().unwrap();
    assert!(session.starts_with("replay-"), "{session}");
}

#[test]
fn an_unexpected_request_fails_loudly_naming_the_request_and_the_line() {
    let (messages, stderr, status) = run(&[
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {}}),
    ]);
    assert_eq!(status, Some(65), "{stderr}");
    assert!(
        stderr.contains("unexpected request `session/list`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("expected `session/new` at line 4"),
        "{stderr}"
    );
    // The request got an error saying the same; nothing after it was read.
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[1]["id"], 1);
    assert_eq!(messages[1]["error"]["code"], -32099);
    let said = messages[1]["error"]["message"].as_str().unwrap();
    assert!(
        said.contains("session/list") && said.contains("line 4"),
        "{said}"
    );
}
