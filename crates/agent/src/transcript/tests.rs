use super::*;
use serde_json::json;

const KEY: &str = "wk-live-0123456789abcdefSECRET";
const ENV_TOKEN: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123";
const HOME: &str = "/home/alice-realname";
const CWD: &str = "/home/alice-realname/.sandbox/home";
const PROMPT: &str = "Please summarise the secret merger plan of Initech for me";
const REPLY_1: &str = "The merger plan says that ";
const REPLY_2: &str = "Initech buys Initrode on Friday.";
const THOUGHT: &str = "thinking about Initrode quietly";
const USER_MESSAGE_ID: &str = "9b2f6c1e-4a7d-4e1b-9c3a-5d8e7f6a1b2c";
const EMAIL: &str = "alice@initech.example";
const SESSION: &str = "5f0d1c2b-3a4e-4f5a-8b6c-7d8e9f0a1b2c";

/// A transcript as a real run could produce it, with every kind of secret in it.
fn realistic() -> Vec<(Direction, Value)> {
    use Direction::*;
    vec![
        (
            ToAgent,
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": 1, "clientCapabilities": {},
                "clientInfo": {"name": "windsurf", "version": "1.110.1"}}}),
        ),
        (
            FromAgent,
            json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1,
                "agentInfo": {"name": "affogato", "title": "Devin Agent", "version": "0.0.0-dev"},
                "authMethods": [{"id": "devin-browser", "name": "Log in"}],
                "agentCapabilities": {"loadSession": true},
                "_meta": {"cognition.ai/mcpConfigPath": format!("{HOME}/.config/devin/mcp.json")}}}),
        ),
        (
            ToAgent,
            json!({"jsonrpc": "2.0", "id": 1, "method": "authenticate", "params": {
                "methodId": "devin-browser", "_meta": {"api_key": KEY}}}),
        ),
        (FromAgent, json!({"jsonrpc": "2.0", "id": 1, "result": {}})),
        (
            ToAgent,
            json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {
                "cwd": CWD, "mcpServers": [{"name": "x", "command": "/usr/bin/srv",
                "args": [], "env": [{"name": "TOKEN", "value": ENV_TOKEN}]}]}}),
        ),
        (
            FromAgent,
            json!({"jsonrpc": "2.0", "id": 2, "result": {"sessionId": SESSION,
                "configOptions": [{"id": "mode", "name": "Mode", "type": "select",
                    "currentValue": "normal", "options": [{"value": "normal", "name": "Normal"}]}],
                "_meta": {"cognition.ai/isLocked": false}}}),
        ),
        (
            ToAgent,
            json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
                "sessionId": SESSION, "prompt": [{"type": "text", "text": PROMPT},
                    {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgoAAAANSUhEUg"}],
                "_meta": {"cognition.ai/clientMessageId": USER_MESSAGE_ID}}}),
        ),
        (
            FromAgent,
            json!({"jsonrpc": "2.0", "method": "_cognition.ai/output", "params": {
                "channel": "auth", "level": "info", "sessionId": "",
                "message": format!("signed in as {EMAIL}, config at {HOME}/.config/devin, token {KEY}")}}),
        ),
        (
            FromAgent,
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION,
                "update": {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": THOUGHT}}}}),
        ),
        (
            FromAgent,
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION,
                "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": REPLY_1}}}}),
        ),
        (
            FromAgent,
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION,
                "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": REPLY_2}}}}),
        ),
        (
            FromAgent,
            json!({"jsonrpc": "2.0", "method": "_cognition.ai/agent_stopped", "params": {
                "sessionId": SESSION, "cause": "complete",
                "stats": {"modelLabel": "SWE-1.6 Slow", "toolCalls": 0}}}),
        ),
        (
            FromAgent,
            json!({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn",
                "usage": {"totalTokens": 30, "inputTokens": 20, "outputTokens": 10, "cachedReadTokens": 4},
                "_meta": {"cognition.ai/userMessageId": USER_MESSAGE_ID}}}),
        ),
        (
            FromAgent,
            json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32603,
                "message": format!("Authentication failed: key {KEY} for {EMAIL} in {HOME}"),
                "data": {"cognition.ai/errorKind": "unauthenticated", "cognition.ai/retryable": false}}}),
        ),
    ]
}

fn recorded() -> (Recorder, String) {
    let redactor = Redactor::new()
        .secret(KEY)
        .secret(ENV_TOKEN)
        .path(HOME)
        .path(CWD);
    let recorder = Recorder::new(redactor);
    for (dir, msg) in realistic() {
        recorder.record(dir, msg.to_string().as_bytes());
    }
    let text = recorder.to_text(Header::new("test", Some("devin 3000.11.4".into())));
    (recorder, text)
}

#[test]
fn no_key_token_home_path_account_id_or_prompt_text_survives_redaction() {
    let (_, text) = recorded();
    for secret in [
        KEY,
        "0123456789abcdef",
        ENV_TOKEN,
        HOME,
        "alice",
        "/home/",
        "/usr/bin/srv",
        PROMPT,
        "merger",
        "Initech",
        "Initrode",
        THOUGHT,
        USER_MESSAGE_ID,
        EMAIL,
        SESSION,
        "iVBORw0KGgo",
    ] {
        assert!(!text.contains(secret), "{secret:?} survived:\n{text}");
    }
}

#[test]
fn redaction_keeps_shapes_methods_codes_kinds_and_stop_reasons() {
    let (recorder, text) = recorded();
    let entries = recorder.entries();
    assert_eq!(entries.len(), realistic().len());
    for ((dir, original), kept) in realistic().iter().zip(&entries) {
        assert_eq!(*dir, kept.dir);
        assert_eq!(original.get("method"), kept.msg.get("method"));
        assert_eq!(original.get("id"), kept.msg.get("id"));
    }
    for kept in [
        "\"stopReason\":\"end_turn\"",
        "\"cause\":\"complete\"",
        "\"code\":-32603",
        "\"cognition.ai/errorKind\":\"unauthenticated\"",
        "\"modelLabel\":\"SWE-1.6 Slow\"",
        "\"name\":\"affogato\"",
        "\"name\":\"windsurf\"",
        "\"sessionUpdate\":\"agent_message_chunk\"",
        "\"totalTokens\":30",
        "\"methodId\":\"devin-browser\"",
        "Authentication failed",
        "\"currentValue\":\"normal\"",
    ] {
        assert!(text.contains(kept), "{kept} lost:\n{text}");
    }
    // The session id became one stable placeholder, the message id another, used twice.
    assert!(text.contains("\"sessionId\":\"session-1\""), "{text}");
    let prompt = &entries[6].msg;
    let answer = &entries[12].msg;
    assert_eq!(
        prompt["params"]["_meta"]["cognition.ai/clientMessageId"],
        answer["result"]["_meta"]["cognition.ai/userMessageId"]
    );
    // Reply text keeps its length class only.
    assert_eq!(
        entries[9].msg["params"]["update"]["content"]["text"],
        "[redacted text: 10-99 chars]"
    );
    // The process-wide empty session id stays empty.
    assert_eq!(entries[7].msg["params"]["sessionId"], "");
}

#[test]
fn a_trace_reads_back_with_its_header_and_line_numbers() {
    let (recorder, text) = recorded();
    let read = read(&text).expect("reads");
    let header = read.header.expect("header");
    assert_eq!(header.format, FORMAT);
    assert_eq!(header.cli_version.as_deref(), Some("devin 3000.11.4"));
    assert!(header.redacted.iter().any(|what| what == "prompt-text"));
    assert_eq!(read.entries.len(), recorder.entries().len());
    assert_eq!(read.entries[0].0, 2, "the header is line 1");
    assert!(matches!(
        super::read("{\"dir\": \"sideways\", \"msg\": {}}"),
        Err(TranscriptError::NotAnEntry { line: 1 })
    ));
    assert!(matches!(
        super::read("\n{\"format\": \"devin-bridge-trace\", \"version\": 9, \"recorded_by\": \"x\", \"redacted\": []}"),
        Err(TranscriptError::Version { line: 2, version: 9 })
    ));
}

#[test]
fn an_unparseable_line_is_kept_as_a_placeholder_and_the_recorder_is_bounded() {
    let recorder = Recorder::new(Redactor::new());
    recorder.record(Direction::FromAgent, b"this is not json with /home/bob\n");
    let entries = recorder.entries();
    assert_eq!(
        entries[0].msg,
        json!({"unparseable": "[redacted text: 10-99 chars]"})
    );
    for _ in 0..MAX_ENTRIES + 5 {
        recorder.record(
            Direction::ToAgent,
            b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}",
        );
    }
    assert_eq!(recorder.entries().len(), MAX_ENTRIES);
    assert_eq!(recorder.dropped(), 6);
    assert!(recorder
        .to_text(Header::new("t", None))
        .starts_with("{\"format\":\"devin-bridge-trace\""));
}

#[test]
fn the_trace_file_is_private_even_when_it_existed_before() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("trace.jsonl");
    std::fs::write(&path, "old").expect("old");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let (recorder, _) = recorded();
    recorder
        .write(&path, Header::new("test", None))
        .expect("write");
    let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(read(&std::fs::read_to_string(&path).expect("read")).is_ok());
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&path, &link).expect("symlink");
    assert!(recorder.write(&link, Header::new("test", None)).is_err());
}

#[test]
fn a_redactor_for_a_launch_knows_its_secret_values_and_directories() {
    let spec = crate::process::Spec {
        program: "/bin/true".into(),
        args: Vec::new(),
        cwd: CWD.into(),
        env: vec![
            ("WINDSURF_API_KEY".into(), KEY.into()),
            ("HOME".into(), HOME.into()),
            ("PATH".into(), "/usr/bin".into()),
        ],
        stderr_tail_bytes: 0,
        kill_grace: std::time::Duration::ZERO,
        identity: None,
    };
    let mut redactor = Redactor::for_spec(&spec);
    let mut message = json!({"jsonrpc": "2.0", "method": "note", "params": {
        "note": format!("{KEY}:{HOME}relative")}});
    redactor.redact(&mut message);
    let text = message.to_string();
    assert!(!text.contains(KEY) && !text.contains(HOME), "{text}");
}
