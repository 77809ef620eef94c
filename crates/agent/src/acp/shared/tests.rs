use super::*;
use crate::devin::ClientIdentity;
use crate::testkit::scripted_agent as agent;

/// Answers `initialize` (id 0) and two `session/new` (ids 1 and 2: sessions `s1`, `s2`).
const OPEN_TWO: &str = r#"read -r l; echo '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}'
read -r l; echo '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}'
read -r l; echo '{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s2"}}'"#;

fn chunk(session: &str, text: &str) -> String {
    format!(
        r#"echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{text}"}}}}}}}}'"#
    )
}

fn answer(id: u64) -> String {
    format!(r#"echo '{{"jsonrpc":"2.0","id":{id},"result":{{"stopReason":"end_turn"}}}}'"#)
}

fn limits() -> AgentLimits {
    AgentLimits {
        init_timeout: Duration::from_secs(10),
        turn_timeout: Duration::from_secs(20),
        output_cap: 1 << 20,
        stopped_wait: Duration::ZERO,
    }
}

/// The scripted agent with sessions `s1` and `s2` open.
async fn two_sessions(script: &str) -> Arc<SharedAgent> {
    let agent = SharedAgent::start(
        &agent(&format!("{OPEN_TWO}\n{script}")),
        limits(),
        &ClientIdentity::default(),
    )
    .await
    .expect("start");
    let dir = std::env::temp_dir();
    assert_eq!(
        &*agent.new_session(&dir).await.expect("s1").session_id.0,
        "s1"
    );
    assert_eq!(
        &*agent.new_session(&dir).await.expect("s2").session_id.0,
        "s2"
    );
    agent
}

#[tokio::test]
async fn interleaved_replies_land_on_their_own_sessions() {
    // Both prompts are read (ids 3 and 4), then the chunks arrive crossed, text for a session
    // with no running prompt is mixed in, and s2 is answered first.
    let script = [
        "read -r l; read -r l".to_owned(),
        chunk("s2", "for two "),
        chunk("s1", "for one "),
        chunk("s9", "for nobody"),
        chunk("s2", "again"),
        answer(4),
        chunk("s1", "again"),
        answer(3),
        "sleep 5".to_owned(),
    ]
    .join("\n");
    let agent = two_sessions(&script).await;
    let (one, two) = tokio::join!(
        agent.prompt("s1", "first".into()),
        agent.prompt("s2", "second".into())
    );
    assert_eq!(one.expect("s1 answered").text, "for one again");
    assert_eq!(two.expect("s2 answered").text, "for two again");
    assert!(agent.is_alive());
    agent.close().await;
}

#[tokio::test]
async fn a_tool_call_kills_the_process_and_is_blamed_on_its_session_only() {
    let script = [
        "read -r l; read -r l".to_owned(),
        chunk("s2", "partial"),
        r#"echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Run shell","kind":"execute","status":"pending"}}}'"#.to_owned(),
        "sleep 300".to_owned(),
    ]
    .join("\n");
    let agent = two_sessions(&script).await;
    let started = Instant::now();
    let (one, two) = tokio::join!(
        agent.prompt("s1", "first".into()),
        agent.prompt("s2", "second".into())
    );
    assert!(matches!(one, Err(AcpError::UnauthorizedTool)), "{one:?}");
    assert!(matches!(two, Err(AcpError::EarlyExit)), "{two:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "killed at once");
    assert_eq!(
        agent.death(),
        Some(&Death::ToolCall {
            session: "s1".into()
        })
    );
    let ended = agent.close().await.expect("not closed before");
    assert!(ended.killed || ended.status.is_some_and(|status| !status.success()));
    // A request after the death fails at once.
    assert!(matches!(
        agent.new_session(&std::env::temp_dir()).await,
        Err(AcpError::EarlyExit)
    ));
}

#[tokio::test]
async fn a_tool_call_outside_any_prompt_kills_the_process() {
    let script = [
        r#"echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s2","update":{"sessionUpdate":"tool_call_update","toolCallId":"c9","status":"in_progress"}}}'"#.to_owned(),
        "sleep 300".to_owned(),
    ]
    .join("\n");
    let agent = two_sessions(&script).await;
    for _ in 0..100 {
        if agent.death().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        agent.death(),
        Some(&Death::ToolCall {
            session: "s2".into()
        })
    );
    assert!(matches!(
        agent.prompt("s1", "late".into()).await,
        Err(AcpError::EarlyExit)
    ));
    agent.close().await;
}

#[tokio::test]
async fn an_answer_to_a_request_never_sent_kills_the_process() {
    let script = [
        "read -r l".to_owned(),
        r#"echo '{"jsonrpc":"2.0","id":987654,"result":{}}'"#.to_owned(),
        "sleep 300".to_owned(),
    ]
    .join("\n");
    let agent = two_sessions(&script).await;
    let outcome = agent.prompt("s1", "go".into()).await;
    assert!(
        matches!(outcome, Err(AcpError::MalformedFrame)),
        "{outcome:?}"
    );
    assert_eq!(agent.death(), Some(&Death::Protocol("stray_response")));
    agent.close().await;
}

#[tokio::test]
async fn output_over_the_cap_fails_the_turn_but_not_the_process() {
    let script = [
        "read -r l".to_owned(),
        chunk("s1", &"x".repeat(64)),
        answer(3),
        "read -r l".to_owned(),
        chunk("s2", "fine"),
        answer(4),
        "sleep 5".to_owned(),
    ]
    .join("\n");
    let agent = SharedAgent::start(
        &agent(&format!("{OPEN_TWO}\n{script}")),
        AgentLimits {
            output_cap: 16,
            ..limits()
        },
        &ClientIdentity::default(),
    )
    .await
    .expect("start");
    let dir = std::env::temp_dir();
    agent.new_session(&dir).await.expect("s1");
    agent.new_session(&dir).await.expect("s2");
    assert!(matches!(
        agent.prompt("s1", "big".into()).await,
        Err(AcpError::OutputTooLarge(16))
    ));
    assert_eq!(
        agent.prompt("s2", "small".into()).await.expect("s2").text,
        "fine"
    );
    agent.close().await;
}

#[tokio::test]
async fn a_second_prompt_on_a_busy_session_is_refused() {
    let script = ["read -r l".to_owned(), "sleep 1".to_owned(), answer(3)].join("\n");
    let agent = two_sessions(&script).await;
    let (first, second) = tokio::join!(agent.prompt("s1", "first".into()), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        agent.prompt("s1", "second".into()).await
    });
    assert!(first.is_ok(), "{first:?}");
    assert!(matches!(second, Err(AcpError::WrongSession)), "{second:?}");
    agent.close().await;
}

#[tokio::test]
async fn the_agents_account_and_its_chatter_are_read_per_session() {
    // s1: a display chunk, a compaction, the reply, the model in turn_stats' dimension list;
    // s2: a quota ended its turn with `agent_stopped`, then an ordinary `end_turn`.
    let script = [
        "read -r l; read -r l".to_owned(),
        r#"echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Compacting context..."},"_meta":{"cognition.ai/displayMessage":true}}}}'"#.to_owned(),
        r#"echo '{"jsonrpc":"2.0","method":"_cognition.ai/compaction","params":{"sessionId":"s1"}}'"#.to_owned(),
        r#"echo '{"jsonrpc":"2.0","method":"_cognition.ai/output","params":{"channel":"c","message":"m","level":"info","sessionId":""}}'"#.to_owned(),
        chunk("s1", "reply"),
        r#"echo '{"jsonrpc":"2.0","method":"_cognition.ai/turn_stats","params":{"sessionId":"s1","turnClientMessageId":"m","turnRequestId":"r","responseDimensions":[{"uid":"model","label":"Model","kind":{"type":"metric","value":"SWE-1.6 Slow"}}]}}'"#.to_owned(),
        r#"echo '{"jsonrpc":"2.0","method":"_cognition.ai/agent_stopped","params":{"sessionId":"s2","cause":"quota_exhausted","errorMessage":"Your daily usage quota has been exhausted.","stats":{}}}'"#.to_owned(),
        answer(4),
        r#"echo '{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","usage":{"totalTokens":150,"inputTokens":120,"outputTokens":30,"cachedReadTokens":100}}}'"#.to_owned(),
        "sleep 5".to_owned(),
    ]
    .join("\n");
    let agent = two_sessions(&script).await;
    let (one, two) = tokio::join!(
        agent.prompt("s1", "first".into()),
        agent.prompt("s2", "second".into())
    );
    let one = one.expect("s1 answered");
    assert_eq!(one.text, "reply");
    assert_eq!((one.display_messages, one.compactions), (1, 1));
    assert_eq!(one.observed_model.as_deref(), Some("SWE-1.6 Slow"));
    let usage = one.usage.expect("usage");
    assert_eq!(
        (
            usage.input_tokens,
            usage.cache_read_input_tokens,
            usage.source
        ),
        (20, 100, crate::acp::UsageSource::LastRequest)
    );
    match two {
        Err(AcpError::QuotaExceeded {
            message: Some(message),
        }) => assert!(message.contains("daily usage quota"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert!(agent.is_alive());
    agent.close().await;
}

#[tokio::test]
async fn a_prompt_refused_as_logged_out_is_sent_again_after_the_processes_one_sign_in() {
    let script = r#"read -r l; echo '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[{"id":"devin-browser","name":"Devin"}]}}'
read -r l; echo '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}'
read -r l; echo '{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"Authentication failed: Please authenticate to continue. Run `/login` to log in."}}'
read -r l; case "$l" in *'"authenticate"'*) echo '{"jsonrpc":"2.0","id":3,"result":null}';; esac
read -r l; case "$l" in *'"session/prompt"'*) echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"signed in"}}}}'; echo '{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}';; esac
sleep 5"#;
    let mut spec = agent(script);
    spec.env
        .push(("WINDSURF_API_KEY".into(), "wk-test-key".into()));
    let agent = SharedAgent::start(&spec, limits(), &ClientIdentity::default())
        .await
        .expect("start");
    agent
        .new_session(&std::env::temp_dir())
        .await
        .expect("session");
    let output = agent.prompt("s1", "hi".into()).await.expect("answered");
    assert_eq!(output.text, "signed in");
    agent.close().await;
}
