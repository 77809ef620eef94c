use serde_json::json;

use super::*;
use crate::acp::NoTools;
use crate::devin::stats::{AGENT_STOPPED, TURN_STATS};
use crate::devin::ClientIdentity;
use crate::testkit::scripted_agent as agent;

// ---- notifications, without a process ----

fn prompt_phase<'a>(turn: &'a mut Turn, gate: &'a dyn ToolGate) -> Phase<'a> {
    Phase::Prompt {
        session: "s",
        turn,
        gate,
    }
}

fn chunk(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "update": {"sessionUpdate": "agent_message_chunk",
           "content": {"type": "text", "text": text}}})
}

#[test]
fn updates_are_collected_checked_and_tool_calls_refused() {
    let mut turn = Turn::new(100);
    let mut allowed = HashMap::new();
    let mut phase = prompt_phase(&mut turn, &NoTools);
    phase
        .notification("session/update", &chunk("s", "Hel"), &mut allowed)
        .expect("chunk");
    phase
        .notification(
            "$/update",
            &json!({"sessionId":"s","type":"agent_message_chunk","content":{"type":"text","text":"lo"}}),
            &mut allowed,
        )
        .expect("legacy");
    for tolerated in [
        json!({"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}),
        json!({"sessionId":"s","update":{"sessionUpdate":"a_variant_from_the_future","x":1}}),
        json!({"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"","mimeType":"image/png"}}}),
    ] {
        phase
            .notification("session/update", &tolerated, &mut allowed)
            .expect("tolerated");
    }
    phase
        .notification("_cognition.ai/unknown", &json!({}), &mut allowed)
        .expect("vendor");
    assert!(matches!(
        phase.notification("session/update", &chunk("other", "x"), &mut allowed),
        Err(AcpError::WrongSession)
    ));
    assert!(matches!(
        phase.notification("session/update", &json!({"update": {}}), &mut allowed),
        Err(AcpError::WrongSession)
    ));
    for kind in ["tool_call", "tool_call_update"] {
        let update =
            json!({"sessionId":"s","update":{"sessionUpdate":kind,"toolCallId":"c","title":"t"}});
        assert!(matches!(
            phase.notification("session/update", &update, &mut allowed),
            Err(AcpError::UnauthorizedTool)
        ));
    }
    // Unreadable as a tool call (no id, no title): still a tool call.
    assert!(matches!(
        phase.notification(
            "session/update",
            &json!({"sessionId":"s","update":{"sessionUpdate":"tool_call"}}),
            &mut allowed
        ),
        Err(AcpError::UnauthorizedTool)
    ));
    assert!(matches!(
        phase.notification("session/update", &chunk("s", &"y".repeat(96)), &mut allowed),
        Err(AcpError::OutputTooLarge(100))
    ));
    assert_eq!(turn.text, "Hello");
}

#[test]
fn allowed_tools_are_listed_once_and_their_updates_pass() {
    let reads = |call: &ToolCallSeen| call.tool_name().as_deref() == Some("read");
    let mut turn = Turn::new(100);
    let mut allowed = HashMap::new();
    let mut phase = prompt_phase(&mut turn, &reads);
    let call = json!({"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"c1",
        "title":"Read a.rs","kind":"read","_meta":{"cognition.ai/toolName":"read"}}});
    phase
        .notification("session/update", &call, &mut allowed)
        .expect("allowed");
    // A later update without kind or name is the same tool.
    let done = json!({"sessionId":"s","update":{"sessionUpdate":"tool_call_update",
        "toolCallId":"c1","status":"completed"}});
    phase
        .notification("session/update", &done, &mut allowed)
        .expect("update of an allowed call");
    // An update that turns the call into another tool is checked again.
    let switched = json!({"sessionId":"s","update":{"sessionUpdate":"tool_call_update",
        "toolCallId":"c1","_meta":{"cognition.ai/toolName":"exec"}}});
    match phase.notification("session/update", &switched, &mut allowed) {
        Err(AcpError::ToolRefused { tool }) => assert_eq!(tool, "exec"),
        other => panic!("{other:?}"),
    }
    // An update for a call never seen is a call of its own.
    let unseen = json!({"sessionId":"s","update":{"sessionUpdate":"tool_call_update",
        "toolCallId":"c9","kind":"delete"}});
    match phase.notification("session/update", &unseen, &mut allowed) {
        Err(AcpError::ToolRefused { tool }) => assert_eq!(tool, "delete"),
        other => panic!("{other:?}"),
    }
    assert_eq!(turn.tool_calls.len(), 1);
    assert_eq!(turn.tool_calls[0].id, "c1");
    assert_eq!(turn.tool_calls[0].title, "Read a.rs");
}

#[test]
fn tool_calls_outside_a_prompt_are_refused_and_replays_drained() {
    let mut allowed = HashMap::new();
    let call = json!({"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"c",
        "title":"t","kind":"read"}});
    assert!(matches!(
        Phase::Session("s").notification("session/update", &call, &mut allowed),
        Err(AcpError::ToolRefused { .. })
    ));
    assert!(matches!(
        Phase::Setup { seen: None }.notification("session/update", &call, &mut allowed),
        Err(AcpError::ToolRefused { .. })
    ));
    assert!(matches!(
        Phase::Idle.notification("session/update", &chunk("s", "x"), &mut allowed),
        Err(AcpError::WrongSession)
    ));
    let mut replay = Phase::Replay("s");
    replay
        .notification("session/update", &call, &mut allowed)
        .expect("history is not run");
    replay
        .notification("session/update", &chunk("s", "old"), &mut allowed)
        .expect("history text");
    assert!(matches!(
        replay.notification("session/update", &chunk("t", "x"), &mut allowed),
        Err(AcpError::WrongSession)
    ));
    let mut setup = Phase::Setup { seen: None };
    setup
        .notification("session/update", &chunk("new", "x"), &mut allowed)
        .expect("first");
    assert!(matches!(
        setup.notification("session/update", &chunk("other", "x"), &mut allowed),
        Err(AcpError::WrongSession)
    ));
    assert!(allowed.is_empty());
}

#[test]
fn vendor_statistics_are_collected_for_this_session_only() {
    let mut turn = Turn::new(100);
    let mut allowed = HashMap::new();
    let mut phase = prompt_phase(&mut turn, &NoTools);
    phase
        .notification(
            AGENT_STOPPED,
            &json!({"sessionId":"other","cause":"error","stats":{"modelLabel":"X"}}),
            &mut allowed,
        )
        .expect("other session");
    phase
        .notification(
            TURN_STATS,
            &json!({"sessionId":"s","turnClientMessageId":"m","turnRequestId":"r","responseDimensions":[
                {"uid":"model","groupTitle":"Response Statistics","label":"Model","kind":{"type":"metric","value":"SWE-1.7"}}]}),
            &mut allowed,
        )
        .expect("turn stats");
    let stats = json!({"inputTokens": 10, "outputTokens": 2, "modelLabel": "SWE-1.7 (mock)"});
    phase
        .notification(
            AGENT_STOPPED,
            &json!({"sessionId":"s","cause":"complete","stats":stats}),
            &mut allowed,
        )
        .expect("agent stopped");
    assert_eq!(turn.account.turn_stats_model.as_deref(), Some("SWE-1.7"));
    assert_eq!(
        turn.account.stopped,
        Some(AgentStopped {
            cause: "complete".into(),
            model_label: Some("SWE-1.7 (mock)".into()),
            error_message: None,
            stats,
        })
    );
}

#[test]
fn rpc_errors_are_classified_in_devins_dialect() {
    let kind = |code: i64, kind: &str, message: &str| {
        rpc_error(
            json!({"code":code,"message":message,"data":{"cognition.ai/errorKind":kind,"cognition.ai/retryable":true}}),
        )
    };
    assert!(matches!(
        kind(-32010, "unavailable", "Rate limit exceeded"),
        AcpError::RateLimited {
            retryable: true,
            ..
        }
    ));
    assert!(matches!(
        kind(-32010, "unavailable", "Connection error"),
        AcpError::Network {
            retryable: true,
            ..
        }
    ));
    assert!(matches!(
        kind(-32011, "resource_exhausted", "no credits"),
        AcpError::QuotaExceeded { .. }
    ));
    assert_eq!(
        kind(-32011, "resource_exhausted", "x").error_kind(),
        Some("resource_exhausted")
    );
    match kind(-32603, "something_new", "x") {
        error @ AcpError::Rpc { .. } => assert_eq!(error.error_kind(), Some("something_new")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        rpc_error(json!({"code":-32000,"message":"auth"})),
        AcpError::Unauthenticated
    ));
    // The raw message is handed over as is (cleaning is the mode's job), only bounded.
    match rpc_error(json!({"code":-32603,"message":"failed reading /home/user/.secret now"})) {
        AcpError::Rpc { message, .. } => {
            assert_eq!(message, "failed reading /home/user/.secret now");
        }
        other => panic!("{other:?}"),
    }
    match rpc_error(json!({"code":-32603})) {
        AcpError::Rpc { message, .. } => assert_eq!(message, ""),
        other => panic!("{other:?}"),
    }
}

#[test]
fn agent_messages_are_bounded_at_a_character_boundary() {
    let long = format!("a{}", "é".repeat(MAX_AGENT_MESSAGE_BYTES));
    match rpc_error(json!({"code":-32603,"message":long})) {
        AcpError::Rpc { message, .. } => {
            assert!(message.len() <= MAX_AGENT_MESSAGE_BYTES);
            assert!(message.len() >= MAX_AGENT_MESSAGE_BYTES - 1);
            assert!(long.starts_with(&message));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn stop_reasons_are_typed_and_unknown_ones_are_stops() {
    assert_eq!(
        stop_reason(&json!({"stopReason":"max_tokens"})).unwrap(),
        v1::StopReason::MaxTokens
    );
    match stop_reason(&json!({"stopReason":"out_of_patience"})) {
        Err(AcpError::Stopped(reason)) => assert_eq!(reason, "out_of_patience"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        stop_reason(&json!({})),
        Err(AcpError::MalformedFrame)
    ));
}

// ---- scripted agents ----

/// Frames the scripted agents answer with; requests are numbered from 0 in the order sent.
const INIT: &str = r#"read -r l; echo '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true},"authMethods":[]}}'"#;
const NEW: &str = r#"read -r l; echo '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1","modes":{"currentModeId":"smart","availableModes":[{"id":"smart","name":"Smart"}]}}}'"#;

fn limits() -> AgentLimits {
    AgentLimits {
        init_timeout: Duration::from_secs(10),
        turn_timeout: Duration::from_secs(20),
        output_cap: 1 << 20,
        stopped_wait: Duration::from_secs(2),
    }
}

fn text(prompt: &str) -> Vec<v1::ContentBlock> {
    vec![v1::ContentBlock::from(prompt.to_owned())]
}

/// `Some(true)` running or sleeping, `Some(false)` zombie or dead, from `/proc/<pid>/stat`.
fn live(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next())
        })
        .is_some_and(|state| state != 'Z' && state != 'X')
}

/// The scripted agent started with `limits`, with its session open.
async fn started_with_session(script: &str, limits: AgentLimits) -> AgentConnection {
    let mut connection = AgentConnection::start(&agent(script), limits, &ClientIdentity::default())
        .await
        .expect("start");
    connection
        .new_session(&std::env::temp_dir())
        .await
        .expect("session");
    connection
}

#[tokio::test]
async fn a_prompt_reports_usage_exactly_statistics_and_permissions() {
    let script = format!(
        r#"{INIT}
{NEW}
read -r l
echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"before "}}}}}}}}'
echo '{{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{{"sessionId":"s1","toolCall":{{"toolCallId":"c"}},"options":[]}}}}'
read -r answer; echo "answer1 $answer" >&2
echo '{{"jsonrpc":"2.0","id":"p2","method":"session/request_permission","params":{{"sessionId":"s1","toolCall":{{"toolCallId":"c"}},"options":[]}}}}'
read -r answer; echo "answer2 $answer" >&2
echo '{{"jsonrpc":"2.0","id":"f1","method":"fs/read_text_file","params":{{"sessionId":"s1","path":"/etc/passwd"}}}}'
read -r answer; echo "answer3 $answer" >&2
echo '{{"jsonrpc":"2.0","method":"_cognition.ai/turn_stats","params":{{"sessionId":"s1","turnClientMessageId":"m1","turnRequestId":"r1","responseDimensions":[{{"uid":"model","label":"Model","kind":{{"type":"metric","value":"SWE-1.7"}}}}]}}}}'
echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"after"}}}}}}}}'
echo '{{"jsonrpc":"2.0","id":2,"result":{{"stopReason":"end_turn","usage":{{"inputTokens":7,"outputTokens":3,"totalTokens":10}}}}}}'
echo '{{"jsonrpc":"2.0","method":"_cognition.ai/agent_stopped","params":{{"sessionId":"s1","cause":"complete","stats":{{"modelLabel":"SWE-1.7 (x)"}}}}}}'
read -r l
"#
    );
    let mut connection =
        AgentConnection::start(&agent(&script), limits(), &ClientIdentity::default())
            .await
            .expect("start");
    assert_eq!(
        connection.initialize_response().protocol_version,
        ProtocolVersion::V1
    );
    assert!(
        connection
            .initialize_response()
            .agent_capabilities
            .load_session
    );
    let session = connection
        .new_session(&std::env::temp_dir())
        .await
        .expect("session");
    assert_eq!(&*session.session_id.0, "s1");
    assert_eq!(
        session
            .modes
            .map(|modes| modes.current_mode_id.0.to_string()),
        Some("smart".to_owned())
    );
    let outcome = connection
        .prompt("s1", text("hi"), &NoTools)
        .await
        .expect("prompt");
    assert_eq!(outcome.stop_reason, v1::StopReason::EndTurn);
    assert_eq!(outcome.text, "before after");
    // Exactly as reported: no cached token counts appear that the agent did not send.
    assert_eq!(
        outcome.usage,
        Some(json!({"inputTokens":7,"outputTokens":3,"totalTokens":10}))
    );
    assert_eq!(outcome.permission_requests, 2);
    assert_eq!(outcome.account.turn_stats_model.as_deref(), Some("SWE-1.7"));
    // agent_stopped came after the answer and was waited for.
    let stopped = outcome.account.stopped.expect("agent_stopped");
    assert_eq!(stopped.cause, "complete");
    assert_eq!(stopped.model_label.as_deref(), Some("SWE-1.7 (x)"));
    assert!(outcome.tool_calls.is_empty());
    let ended = connection.close(Duration::from_secs(2)).await;
    assert!(!ended.killed, "the agent exits by itself once stdin closes");
    let answers: Vec<Value> = ended
        .stderr_tail
        .lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(_, json)| serde_json::from_str(json).expect("answer frame"))
        .collect();
    assert_eq!(answers.len(), 3, "{}", ended.stderr_tail);
    for (answer, id) in answers[..2].iter().zip(["p1", "p2"]) {
        assert_eq!(answer["id"], id);
        assert_eq!(
            answer["result"],
            json!({"outcome": {"outcome": "cancelled"}})
        );
    }
    assert_eq!(answers[2]["id"], "f1");
    assert_eq!(answers[2]["error"]["code"], -32601);
}

#[tokio::test]
async fn a_refused_tool_kills_the_process_group_at_once() {
    let script = format!(
        r#"{INIT}
{NEW}
read -r l
sleep 300 &
echo "grandchild $!" >&2
echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Remove files","kind":"delete","status":"pending"}}}}}}'
sleep 300
echo '{{"jsonrpc":"2.0","id":2,"result":{{"stopReason":"end_turn"}}}}'
"#
    );
    let mut connection = started_with_session(&script, limits()).await;
    let leader = connection.pid();
    let reads = |call: &ToolCallSeen| call.tool_name().as_deref() == Some("read");
    let started = Instant::now();
    match connection.prompt("s1", text("go"), &reads).await {
        Err(AcpError::ToolRefused { tool }) => assert_eq!(tool, "delete"),
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    // Killed, not asked: the leader dies without stdin being closed.
    let mut dead = false;
    for _ in 0..100 {
        if !connection.is_alive() {
            dead = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(dead, "leader {leader} survived the refusal");
    let ended = connection.close(Duration::from_millis(100)).await;
    let grandchild: i32 = ended
        .stderr_tail
        .lines()
        .find_map(|line| line.strip_prefix("grandchild "))
        .and_then(|pid| pid.trim().parse().ok())
        .expect("grandchild pid");
    for _ in 0..100 {
        if !live(grandchild) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("grandchild {grandchild} survived the refusal");
}

#[tokio::test]
async fn load_session_drains_the_replay_before_and_after_its_answer() {
    let update = |body: &str| {
        format!(
            r#"echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"old","update":{body}}}}}'"#
        )
    };
    let replayed_text = update(
        r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"history "}}"#,
    );
    let replayed_user = update(
        r#"{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"question"}}"#,
    );
    let replayed_tool =
        update(r#"{"sessionUpdate":"tool_call","toolCallId":"old1","title":"Edit","kind":"edit"}"#);
    let script = format!(
        r#"{INIT}
read -r l
{replayed_user}
{replayed_tool}
{replayed_text}
echo '{{"jsonrpc":"2.0","id":1,"result":{{"modes":{{"currentModeId":"ask","availableModes":[{{"id":"ask","name":"Ask"}}]}}}}}}'
sleep 0.1
{replayed_text}
{replayed_tool}
read -r l
{answer}
echo '{{"jsonrpc":"2.0","method":"_cognition.ai/agent_stopped","params":{{"sessionId":"old","cause":"complete","stats":{{}}}}}}'
echo '{{"jsonrpc":"2.0","id":2,"result":{{"stopReason":"end_turn"}}}}'
read -r l
"#,
        answer = update(
            r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"new"}}"#
        ),
    );
    let mut connection =
        AgentConnection::start(&agent(&script), limits(), &ClientIdentity::default())
            .await
            .expect("start");
    let loaded = connection
        .load_session("old", &std::env::temp_dir())
        .await
        .expect("load");
    assert_eq!(
        loaded
            .modes
            .map(|modes| modes.current_mode_id.0.to_string()),
        Some("ask".to_owned())
    );
    let outcome = connection
        .prompt("old", text("continue"), &NoTools)
        .await
        .expect("the replayed tool call is history, not a call");
    assert_eq!(outcome.text, "new", "replayed text is not this prompt's");
    connection.close(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn an_abandoned_request_is_answered_late_without_an_error() {
    let script = format!(
        r#"{INIT}
{NEW}
read -r l
sleep 1
echo '{{"jsonrpc":"2.0","id":2,"result":{{"stopReason":"cancelled"}}}}'
read -r l
echo "$l" >&2
read -r l
echo '{{"jsonrpc":"2.0","method":"_cognition.ai/agent_stopped","params":{{"sessionId":"s1","cause":"complete","stats":{{}}}}}}'
echo '{{"jsonrpc":"2.0","id":3,"result":{{"stopReason":"end_turn"}}}}'
read -r l
"#
    );
    let mut quick = limits();
    quick.turn_timeout = Duration::from_millis(300);
    let mut connection = started_with_session(&script, quick).await;
    assert!(matches!(
        connection.prompt("s1", text("slow"), &NoTools).await,
        Err(AcpError::Timeout(300))
    ));
    connection.cancel("s1").await.expect("cancel");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let outcome = connection
        .prompt("s1", text("again"), &NoTools)
        .await
        .expect("the late answer to the first prompt is dropped, not stray");
    assert_eq!(outcome.stop_reason, v1::StopReason::EndTurn);
    let ended = connection.close(Duration::from_secs(1)).await;
    let cancel: Value = serde_json::from_str(ended.stderr_tail.trim()).expect("cancel frame");
    assert_eq!(cancel["method"], "session/cancel");
    assert_eq!(cancel["params"]["sessionId"], "s1");
    assert!(cancel.get("id").is_none(), "a notification");
}

#[tokio::test]
async fn session_settings_are_typed() {
    let script = format!(
        r#"{INIT}
{NEW}
read -r l
echo "$l" >&2
echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"current_mode_update","currentModeId":"ask"}}}}}}'
echo '{{"jsonrpc":"2.0","id":2,"result":{{}}}}'
read -r l
echo "$l" >&2
echo '{{"jsonrpc":"2.0","id":3,"result":{{"configOptions":[{{"id":"model","name":"Model","category":"model","type":"select","currentValue":"swe-1-7-lightning","options":[{{"value":"swe-1-7","name":"SWE-1.7"}},{{"value":"swe-1-7-lightning","name":"Lightning"}}]}},{{"id":"speed","name":"Speed","category":"speed","type":"select","currentValue":"fast","options":[]}}]}}}}'
read -r l
"#
    );
    let mut connection = started_with_session(&script, limits()).await;
    connection.set_mode("s1", "ask").await.expect("set_mode");
    let options = connection
        .set_config_option("s1", "model", "swe-1-7-lightning")
        .await
        .expect("set_config_option");
    assert_eq!(options.len(), 2);
    assert_eq!(
        options[0].category,
        Some(v1::SessionConfigOptionCategory::Model)
    );
    match &options[0].kind {
        v1::SessionConfigKind::Select(select) => {
            assert_eq!(&*select.current_value.0, "swe-1-7-lightning");
        }
        other => panic!("{other:?}"),
    }
    // Without the unstable feature a speed category is still recognisable.
    assert_eq!(
        options[1].category,
        Some(v1::SessionConfigOptionCategory::Other("speed".into()))
    );
    let ended = connection.close(Duration::from_secs(1)).await;
    let sent: Vec<Value> = ended
        .stderr_tail
        .lines()
        .map(|line| serde_json::from_str(line).expect("request frame"))
        .collect();
    assert_eq!(sent[0]["method"], "session/set_mode");
    assert_eq!(sent[0]["params"], json!({"sessionId":"s1","modeId":"ask"}));
    assert_eq!(sent[1]["method"], "session/set_config_option");
    assert_eq!(
        sent[1]["params"],
        json!({"sessionId":"s1","configId":"model","value":"swe-1-7-lightning"})
    );
}

#[tokio::test]
async fn an_old_protocol_version_is_refused() {
    let script =
        r#"read -r l; echo '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2}}'; read -r l"#;
    assert!(matches!(
        AgentConnection::start(&agent(script), limits(), &ClientIdentity::default()).await,
        Err(AcpError::ProtocolVersion(version)) if version == "2"
    ));
}

#[tokio::test]
async fn a_zero_stopped_wait_answers_without_waiting_for_agent_stopped() {
    // The agent answers, sends nothing more and keeps its stdout open.
    let script = format!(
        r#"{INIT}
{NEW}
read -r l
echo '{{"jsonrpc":"2.0","id":2,"result":{{"stopReason":"end_turn"}}}}'
sleep 30
"#
    );
    let mut no_wait = limits();
    no_wait.stopped_wait = Duration::ZERO;
    let mut connection = started_with_session(&script, no_wait).await;
    let started = std::time::Instant::now();
    let outcome = connection
        .prompt("s1", text("hi"), &NoTools)
        .await
        .expect("prompt");
    let elapsed = started.elapsed();
    assert!(outcome.account.stopped.is_none());
    // The 2 s wait of `limits()` did not happen (a generous bound: this only has to tell
    // "no wait" from "waited 2 s" on a loaded machine).
    assert!(elapsed < Duration::from_millis(1500), "{elapsed:?}");
    connection.kill_now();
}

// ---- Devin's dialect over a real pipe ----

/// Answers `initialize` as the Devin CLI does (one `devin-browser` method, `delete` but no
/// `close`), refuses the first `session/new` as not logged in, then records every request it
/// gets into `dir` (`init`, `auth`, `release`).
fn devin_login_script(dir: &Path) -> String {
    let dir = dir.display();
    format!(
        r#"read -r l; printf '%s\n' "$l" > {dir}/init; echo '{{"jsonrpc":"2.0","id":0,"result":{{"protocolVersion":1,"agentCapabilities":{{"loadSession":true,"sessionCapabilities":{{"list":{{}},"delete":{{}}}}}},"authMethods":[{{"id":"devin-browser","name":"Devin"}}]}}}}'
read -r l; echo '{{"jsonrpc":"2.0","id":1,"error":{{"code":-32000,"message":"ACP host has not authenticated"}}}}'
read -r l; printf '%s\n' "$l" > {dir}/auth; echo '{{"jsonrpc":"2.0","id":2,"result":null}}'
read -r l; echo '{{"jsonrpc":"2.0","id":3,"result":{{"sessionId":"s1"}}}}'
read -r l; printf '%s\n' "$l" > {dir}/release; echo '{{"jsonrpc":"2.0","id":4,"result":{{}}}}'
read -r l"#
    )
}

fn recorded(dir: &Path, name: &str) -> Value {
    let text = std::fs::read_to_string(dir.join(name)).expect(name);
    serde_json::from_str(&text).expect("a JSON request")
}

#[tokio::test]
async fn initialize_introduces_the_configured_client() {
    let dir = tempfile::tempdir().expect("dir");
    let client = ClientIdentity::new("windsurf", "1.200.3").expect("identity");
    let connection =
        AgentConnection::start(&agent(&devin_login_script(dir.path())), limits(), &client)
            .await
            .expect("start");
    let init = recorded(dir.path(), "init");
    assert_eq!(
        init["params"]["clientInfo"],
        json!({"name": "windsurf", "version": "1.200.3"})
    );
    assert_eq!(init["params"]["protocolVersion"], json!(1));
    let _ = connection.close(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn a_logged_out_agent_is_signed_in_headless_with_the_key_then_its_session_deleted() {
    let dir = tempfile::tempdir().expect("dir");
    let mut spec = agent(&devin_login_script(dir.path()));
    spec.env
        .push(("WINDSURF_API_KEY".into(), "wk-test-key".into()));
    let mut connection = AgentConnection::start(&spec, limits(), &ClientIdentity::default())
        .await
        .expect("start");
    let session = connection
        .new_session(&std::env::temp_dir())
        .await
        .expect("signed in, then a session");
    assert_eq!(&*session.session_id.0, "s1");
    assert!(connection.signed_in());
    let auth = recorded(dir.path(), "auth");
    assert_eq!(auth["method"], json!("authenticate"));
    assert_eq!(
        auth["params"],
        json!({"methodId": "devin-browser", "_meta": {"api_key": "wk-test-key"}})
    );
    connection.release_session("s1").await;
    let release = recorded(dir.path(), "release");
    assert_eq!(
        release["method"],
        json!("session/delete"),
        "no close advertised"
    );
    assert_eq!(release["params"], json!({"sessionId": "s1"}));
    let _ = connection.close(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn without_a_key_a_logged_out_agent_is_not_logged_in_and_no_browser_flow_starts() {
    let dir = tempfile::tempdir().expect("dir");
    let mut connection = AgentConnection::start(
        &agent(&devin_login_script(dir.path())),
        limits(),
        &ClientIdentity::default(),
    )
    .await
    .expect("start");
    let error = connection
        .new_session(&std::env::temp_dir())
        .await
        .expect_err("not logged in");
    assert!(matches!(error, AcpError::Unauthenticated), "{error:?}");
    assert!(error.to_string().contains("devin auth login"), "{error}");
    assert!(!connection.signed_in());
    let _ = connection.close(Duration::from_millis(100)).await;
    // The script writes whatever it reads next; after the close that is nothing.
    let auth = std::fs::read_to_string(dir.path().join("auth")).unwrap_or_default();
    assert!(auth.trim().is_empty(), "authenticate was sent: {auth}");
}

#[tokio::test]
async fn the_out_of_date_answer_to_a_prompt_is_a_client_identity_refusal() {
    let script = format!(
        r#"{INIT}
{NEW}
read -r l; echo '{{"jsonrpc":"2.0","id":2,"error":{{"code":-32603,"message":"Your Windsurf version is out of date. Please update to the latest version.","data":{{"cognition.ai/errorKind":"internal","cognition.ai/retryable":false}}}}}}'
read -r l"#
    );
    let mut connection = started_with_session(&script, limits()).await;
    let error = connection
        .prompt("s1", text("hi"), &NoTools)
        .await
        .expect_err("refused");
    assert!(
        matches!(error, AcpError::ClientIdentityRefused),
        "{error:?}"
    );
    assert_eq!(error.code(), "client_identity_refused");
    assert!(error.to_string().contains("client_name"), "{error}");
    let _ = connection.close(Duration::from_millis(100)).await;
}

// ---- the second edition of the dialect, over a real pipe ----

/// `agent_stopped` with `cause` (and `errorMessage` when given) for `s1`, as the CLI sends it
/// before the prompt's answer.
fn stopped_line(cause: &str, error_message: Option<&str>) -> String {
    let message = error_message.map_or_else(String::new, |m| format!(r#","errorMessage":"{m}""#));
    format!(
        r#"echo '{{"jsonrpc":"2.0","method":"_cognition.ai/agent_stopped","params":{{"sessionId":"s1","cause":"{cause}","stats":{{"modelLabel":"SWE-1.6 Slow"}}{message}}}}}'"#
    )
}

#[tokio::test]
async fn a_quota_cause_ends_the_turn_as_the_quota_refusal_despite_end_turn() {
    let script = format!(
        r#"{INIT}
{NEW}
read -r l
echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"partial"}}}}}}}}'
{}
echo '{{"jsonrpc":"2.0","id":2,"result":{{"stopReason":"end_turn"}}}}'
read -r l"#,
        stopped_line(
            "quota_exhausted",
            Some("Your daily usage quota has been exhausted. Try again tomorrow.")
        )
    );
    let mut connection = started_with_session(&script, limits()).await;
    let error = connection
        .prompt("s1", text("hi"), &NoTools)
        .await
        .expect_err("a quota is no success");
    match &error {
        AcpError::QuotaExceeded {
            message: Some(message),
        } => assert!(message.contains("daily usage quota"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(error.status(), 400);
    let _ = connection.close(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn the_other_failing_causes_end_the_turn_with_their_own_failures() {
    for (cause, code) in [
        ("content_filter", "agent_content_filtered"),
        ("output_truncated", "agent_output_truncated"),
        ("max_turn_requests", "agent_turn_limit"),
        ("auth_required", "agent_unauthenticated"),
    ] {
        let script = format!(
            r#"{INIT}
{NEW}
read -r l
{}
echo '{{"jsonrpc":"2.0","id":2,"result":{{"stopReason":"end_turn"}}}}'
read -r l"#,
            stopped_line(cause, None)
        );
        let mut connection = started_with_session(&script, limits()).await;
        let error = connection
            .prompt("s1", text("hi"), &NoTools)
            .await
            .expect_err(cause);
        assert_eq!(error.code(), code, "{cause}");
        let _ = connection.close(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn display_chunks_compaction_and_the_clis_output_never_reach_the_reply() {
    let script = format!(
        r#"{INIT}
{NEW}
read -r l
echo '{{"jsonrpc":"2.0","method":"_cognition.ai/output","params":{{"channel":"server","message":"connected","level":"info","sessionId":""}}}}'
echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"Compacting context..."}},"_meta":{{"cognition.ai/displayMessage":true}}}}}}}}'
echo '{{"jsonrpc":"2.0","method":"_cognition.ai/compaction","params":{{"sessionId":"s1"}}}}'
echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"The answer."}}}}}}}}'
{}
echo '{{"jsonrpc":"2.0","id":2,"result":{{"stopReason":"end_turn"}}}}'
read -r l"#,
        stopped_line("complete", None)
    );
    let mut connection = started_with_session(&script, limits()).await;
    let outcome = connection
        .prompt("s1", text("hi"), &NoTools)
        .await
        .expect("prompt");
    assert_eq!(outcome.text, "The answer.");
    assert_eq!(
        (
            outcome.account.display_messages,
            outcome.account.compactions
        ),
        (1, 1)
    );
    assert_eq!(outcome.observed_model().as_deref(), Some("SWE-1.6 Slow"));
    let _ = connection.close(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn the_turns_sums_are_its_usage_when_turn_stats_reports_them() {
    let script = format!(
        r#"{INIT}
{NEW}
read -r l
echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"usage_update","used":5000,"size":200000,"_meta":{{"cognition.ai/inputTokens":3000,"cognition.ai/responseDimensions":[{{"uid":"model","kind":{{"Metric":{{"value":"SWE-2 High"}}}}}}]}}}}}}}}'
echo '{{"jsonrpc":"2.0","method":"_cognition.ai/turn_stats","params":{{"sessionId":"s1","turnClientMessageId":"m","turnRequestId":"r","responseDimensions":[{{"uid":"inputTokens","kind":{{"type":"cumulativeMetric","value":9000}}}},{{"uid":"outputTokens","kind":{{"type":"cumulativeMetric","value":300}}}},{{"uid":"cachedReadTokens","kind":{{"type":"cumulativeMetric","value":7000}}}}]}}}}'
echo '{{"jsonrpc":"2.0","id":2,"result":{{"stopReason":"end_turn","usage":{{"totalTokens":3050,"inputTokens":3000,"outputTokens":50,"cachedReadTokens":2500}}}}}}'
read -r l"#
    );
    let mut no_wait = limits();
    no_wait.stopped_wait = Duration::ZERO;
    let mut connection = started_with_session(&script, no_wait).await;
    let outcome = connection
        .prompt("s1", text("hi"), &NoTools)
        .await
        .expect("prompt");
    let usage = outcome.reported_usage().expect("usage");
    assert_eq!(usage.source, crate::acp::UsageSource::TurnStats);
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_input_tokens
        ),
        (2000, Some(300), 7000)
    );
    // No agent_stopped, no turn_stats model: the usage_update's model dimension names it.
    assert_eq!(outcome.observed_model().as_deref(), Some("SWE-2 High"));
    let _ = connection.close(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn a_permission_request_naming_only_its_call_is_about_the_call_seen_before() {
    let script = format!(
        r#"{INIT}
{NEW}
read -r l
echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"cat a.rs","kind":"read","_meta":{{"cognition.ai/inferenceToolName":"read"}}}}}}}}'
echo '{{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{{"sessionId":"s1","toolCall":{{"toolCallId":"call_1"}},"options":[{{"optionId":"allow_once","name":"Allow","kind":"allow_once"}},{{"optionId":"reject_once","name":"Reject","kind":"reject_once"}}]}}}}'
read -r answer
echo '{{"jsonrpc":"2.0","id":"p2","method":"session/request_permission","params":{{"sessionId":"s1","toolCall":{{"toolCallId":"call_9"}},"options":[]}}}}'
read -r answer
echo '{{"jsonrpc":"2.0","id":2,"result":{{"stopReason":"end_turn"}}}}'
read -r l"#
    );
    let reads = |call: &ToolCallSeen| call.tool_name().as_deref() == Some("read");
    let mut no_wait = limits();
    no_wait.stopped_wait = Duration::ZERO;
    let mut connection = started_with_session(&script, no_wait).await;
    let outcome = connection
        .prompt("s1", text("hi"), &reads)
        .await
        .expect("prompt");
    assert_eq!(outcome.permission_requests, 2);
    assert_eq!(outcome.permission_tools, ["read", "unidentified"]);
    let _ = connection.close(Duration::from_millis(100)).await;
}

/// Accepts `session/new`, refuses the first prompt as the newer CLIs do ("Authentication
/// failed ... Run `/login`"), records `authenticate` into `dir`, then answers the prompt sent
/// again (or refuses it again when `refuse_twice`).
fn logged_out_at_prompt_script(dir: &Path, refuse_twice: bool) -> String {
    let dir = dir.display();
    let refusal = r#"{"code":-32603,"message":"Authentication failed: Please authenticate to continue. Run `/login` to log in."}"#;
    let second = if refuse_twice {
        format!(r#"echo '{{"jsonrpc":"2.0","id":4,"error":{refusal}}}'"#)
    } else {
        r#"echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"signed in"}}}}'
echo '{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}'"#
            .to_owned()
    };
    format!(
        r#"read -r l; echo '{{"jsonrpc":"2.0","id":0,"result":{{"protocolVersion":1,"agentCapabilities":{{}},"authMethods":[{{"id":"devin-browser","name":"Devin"}}]}}}}'
read -r l; echo '{{"jsonrpc":"2.0","id":1,"result":{{"sessionId":"s1"}}}}'
read -r l; echo '{{"jsonrpc":"2.0","id":2,"error":{refusal}}}'
read -r l; printf '%s\n' "$l" > {dir}/auth; echo '{{"jsonrpc":"2.0","id":3,"result":null}}'
read -r l; printf '%s\n' "$l" > {dir}/again; {second}
read -r l; printf '%s\n' "$l" > {dir}/after"#
    )
}

#[tokio::test]
async fn a_prompt_refused_as_logged_out_is_sent_again_after_one_sign_in() {
    let dir = tempfile::tempdir().expect("dir");
    let mut spec = agent(&logged_out_at_prompt_script(dir.path(), false));
    spec.env
        .push(("WINDSURF_API_KEY".into(), "wk-test-key".into()));
    let mut connection = AgentConnection::start(&spec, limits(), &ClientIdentity::default())
        .await
        .expect("start");
    connection
        .new_session(&std::env::temp_dir())
        .await
        .expect("newer CLIs accept the session");
    let mut no_wait = limits();
    no_wait.stopped_wait = Duration::ZERO;
    connection.limits = no_wait;
    let outcome = connection
        .prompt("s1", text("hi"), &NoTools)
        .await
        .expect("answered after the sign-in");
    assert_eq!(outcome.text, "signed in");
    assert!(connection.signed_in());
    assert_eq!(
        recorded(dir.path(), "auth")["method"],
        json!("authenticate")
    );
    let again = recorded(dir.path(), "again");
    assert_eq!(again["method"], json!("session/prompt"));
    assert_eq!(again["params"]["prompt"][0]["text"], json!("hi"));
    let _ = connection.close(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn a_second_refusal_after_the_sign_in_is_not_signed_in_and_no_second_sign_in() {
    let dir = tempfile::tempdir().expect("dir");
    let mut spec = agent(&logged_out_at_prompt_script(dir.path(), true));
    spec.env
        .push(("WINDSURF_API_KEY".into(), "wk-test-key".into()));
    let mut connection = AgentConnection::start(&spec, limits(), &ClientIdentity::default())
        .await
        .expect("start");
    connection
        .new_session(&std::env::temp_dir())
        .await
        .expect("session");
    let error = connection
        .prompt("s1", text("hi"), &NoTools)
        .await
        .expect_err("refused twice");
    assert!(matches!(error, AcpError::Unauthenticated), "{error:?}");
    let error = connection
        .prompt("s1", text("again"), &NoTools)
        .await
        .expect_err("no more sign-ins");
    assert!(
        matches!(error, AcpError::Unauthenticated | AcpError::EarlyExit),
        "{error:?}"
    );
    let _ = connection.close(Duration::from_millis(100)).await;
    // The third prompt went to the script's last read, not to a second `authenticate`.
    let after = recorded(dir.path(), "after");
    assert_eq!(after["method"], json!("session/prompt"));
}

#[tokio::test]
async fn without_a_key_a_prompt_refused_as_logged_out_is_not_signed_in() {
    let dir = tempfile::tempdir().expect("dir");
    let mut connection = AgentConnection::start(
        &agent(&logged_out_at_prompt_script(dir.path(), false)),
        limits(),
        &ClientIdentity::default(),
    )
    .await
    .expect("start");
    connection
        .new_session(&std::env::temp_dir())
        .await
        .expect("session");
    let error = connection
        .prompt("s1", text("hi"), &NoTools)
        .await
        .expect_err("not signed in");
    assert!(matches!(error, AcpError::Unauthenticated), "{error:?}");
    let _ = connection.close(Duration::from_millis(100)).await;
    let auth = std::fs::read_to_string(dir.path().join("auth")).unwrap_or_default();
    assert!(auth.trim().is_empty(), "authenticate was sent: {auth}");
}

#[tokio::test]
async fn an_observed_prompt_hands_each_chunk_over_as_it_arrives_and_still_returns_the_whole_text() {
    let script = format!(
        r#"{INIT}
{NEW}
read -r l
echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"first "}}}}}}}}'
echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"Compacting context..."}},"_meta":{{"cognition.ai/displayMessage":true}}}}}}}}'
echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"second"}}}}}}}}'
echo '{{"jsonrpc":"2.0","id":2,"result":{{"stopReason":"end_turn"}}}}'
read -r l
"#
    );
    let mut connection = started_with_session(&script, limits()).await;
    let (sink, mut chunks) = tokio::sync::mpsc::unbounded_channel();
    let outcome = connection
        .prompt_observed("s1", text("hi"), &NoTools, Some(sink))
        .await
        .expect("prompt");
    assert_eq!(outcome.text, "first second");
    let mut seen = Vec::new();
    while let Ok(chunk) = chunks.try_recv() {
        seen.push(chunk);
    }
    // The display-only message is kept out, as it is kept out of the text.
    assert_eq!(seen, ["first ", "second"]);
}
