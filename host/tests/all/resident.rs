//! The resident transport through the real HTTP endpoint, with the offline agent: what each
//! agent session received (the agent's own log), which process served it, and what `/healthz`
//! counts.

use crate::common;

use std::sync::Once;
use std::time::{Duration, Instant};

use common::bridge::{HttpResponse, TestBridge};
use serde_json::{json, Value};

/// The offline agent logs to `mock.jsonl` in its working directory: each bridge's own home.
fn log_in_agent_home() {
    static SET: Once = Once::new();
    SET.call_once(|| std::env::set_var("MOCK_DEVIN_LOG", common::bridge::AGENT_LOG));
}

async fn resident(extra: &str) -> TestBridge {
    log_in_agent_home();
    TestBridge::start(
        "",
        &format!("transport = \"resident\"\nprewarm = 0\npass_env = [\"MOCK_DEVIN_LOG\"]\n{extra}"),
    )
    .await
}

fn bash_tool() -> Value {
    json!({
        "name": "Bash",
        "description": "Run a shell command",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
            "required": ["command"]
        }
    })
}

/// A Claude Code-like conversation: system prompt, tools, and its messages so far.
struct Conversation {
    system: String,
    messages: Vec<Value>,
}

impl Conversation {
    fn new(first_user: &str) -> Self {
        Self {
            system: "You are a coding assistant.".into(),
            messages: vec![json!({"role": "user", "content": first_user})],
        }
    }

    fn request(&self) -> Value {
        json!({
            "model": "devin-cli-agentic/swe-1-7",
            "max_tokens": 1024,
            "system": [{"type": "text", "text": self.system, "cache_control": {"type": "ephemeral"}}],
            "tools": [bash_tool()],
            "messages": self.messages,
        })
    }

    /// Records the reply as the assistant's message, then the next user message: the result of
    /// the tool the reply asked for (with `next` as its content), or `next` as text.
    fn answer(&mut self, reply: &Value, next: &str) {
        let content = reply["content"].clone();
        self.messages
            .push(json!({"role": "assistant", "content": content}));
        let tool_use = content
            .as_array()
            .and_then(|blocks| blocks.iter().find(|b| b["type"] == "tool_use"));
        let user = match tool_use {
            Some(block) => json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": block["id"], "content": next}
            ]}),
            None => json!({"role": "user", "content": next}),
        };
        self.messages.push(user);
    }
}

/// The agent's `prompt` events so far, in order.
fn prompts(bridge: &TestBridge) -> Vec<Value> {
    bridge.agent_events("prompt")
}

/// What each prompt was: `full`, `continuation` or `repair`.
fn received(prompts: &[Value]) -> Vec<&str> {
    prompts
        .iter()
        .map(|p| p["received"].as_str().unwrap_or_default())
        .collect()
}

/// The conversation's next turn, which must succeed; its reply.
async fn next_turn(bridge: &TestBridge, key: &str, conversation: &Conversation) -> Value {
    ok(&bridge.conversation_turn(key, &conversation.request()).await)
}

/// The conversation's next turn, sent from a thread of its own (the caller goes on while it
/// runs).
fn turn_in_background(
    bridge: &TestBridge,
    key: &str,
    conversation: &Conversation,
) -> tokio::task::JoinHandle<HttpResponse> {
    let (addr, key, body) = (
        bridge.addr,
        key.to_owned(),
        conversation.request().to_string(),
    );
    tokio::task::spawn_blocking(move || {
        common::bridge::request(
            addr,
            "POST",
            "/v1/messages",
            &[("x-claude-code-session-id".into(), key)],
            &body,
        )
    })
}

async fn health(bridge: &TestBridge) -> Value {
    bridge.request("GET", "/healthz", &[], "").await.json()
}

fn ok(response: &HttpResponse) -> Value {
    assert_eq!(response.status, 200, "{}", response.body);
    response.json()
}

fn text_of(reply: &Value) -> String {
    reply["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn the_second_turn_sends_only_the_unseen_messages() {
    let bridge = resident("").await;
    let mut conversation = Conversation::new(&format!(
        "Please list the files. {}[mock:tool]",
        "context ".repeat(400)
    ));
    let first = next_turn(&bridge, "conv-1", &conversation).await;
    assert_eq!(first["stop_reason"], "tool_use");
    conversation.answer(&first, "a.txt b.txt [mock:text]");
    let second = next_turn(&bridge, "conv-1", &conversation).await;
    assert_eq!(text_of(&second), "Mock answer: the bridge works.");

    let seen = prompts(&bridge);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0]["received"], "full");
    assert_eq!(seen[1]["received"], "continuation");
    assert_eq!(seen[0]["sessionId"], seen[1]["sessionId"]);
    assert_eq!(seen[0]["pid"], seen[1]["pid"]);
    let (whole, unseen) = (
        seen[0]["receivedChars"].as_u64().expect("chars"),
        seen[1]["receivedChars"].as_u64().expect("chars"),
    );
    assert!(whole > 3000, "the first turn carries the history: {whole}");
    assert!(
        unseen < 1500,
        "the second carries only the new messages: {unseen}"
    );
    // The agent still decides on the whole conversation: its trace holds both user turns.
    assert_eq!(seen[1]["toolResults"], 1);
    // The usage reports the whole conversation, as on the per-turn transport.
    assert!(second["usage"]["input_tokens"].as_u64() > first["usage"]["input_tokens"].as_u64());

    let health = health(&bridge).await;
    assert_eq!(health["transport"], "resident");
    let stats = &health["resident"];
    assert_eq!(stats["misses"], 1, "{health}");
    assert_eq!(stats["hits"], 1, "{health}");
    assert_eq!(stats["processes"], 1, "{health}");
    assert_eq!(stats["processes_started"], 1, "{health}");
    assert_eq!(stats["sessions"], 1, "{health}");
    assert_eq!(stats["prompts"], 2, "{health}");
    // The second request repeats the first one's bytes: only its new messages were parsed.
    assert_eq!(stats["resumed"], 1, "{health}");
    // The session keeps the request it answered last, for the next one.
    assert_eq!(
        stats["kept_bytes"],
        conversation.request().to_string().len(),
        "{health}"
    );

    let metrics = bridge.request("GET", "/metrics", &[], "").await;
    assert_eq!(metrics.status, 200);
    assert!(metrics
        .header("content-type")
        .is_some_and(|kind| kind.starts_with("application/openmetrics-text")));
    let kept = format!(
        "devin_bridge_resident_kept_bytes {}",
        conversation.request().to_string().len()
    );
    for line in [
        "devin_bridge_resident_hits_total 1",
        "devin_bridge_resident_misses_total 1",
        "devin_bridge_resident_processes 1",
        "devin_bridge_resident_sessions 1",
        "devin_bridge_resident_processes_started_total 1",
        "devin_bridge_resident_resumed_total 1",
        kept.as_str(),
        "devin_bridge_requests_total{path=\"/v1/messages\",status=\"200\"} 2",
        "devin_bridge_requests_total{path=\"/healthz\",status=\"200\"} 1",
    ] {
        assert!(
            metrics.body.lines().any(|l| l == line),
            "no {line:?} in\n{}",
            metrics.body
        );
    }
    assert!(metrics.body.ends_with("# EOF\n"));
    // Shutdown ends every pooled process group.
    let home = bridge.home.clone();
    assert_eq!(bridge.agents(), 1);
    bridge.stop().await;
    assert!(
        common::bridge::wait_no_agents(&home, Duration::from_secs(5))
            .await
            .is_some(),
        "a resident agent outlived the bridge"
    );
}

#[tokio::test]
async fn an_edited_history_starts_a_new_session_and_leaves_the_old_one_intact() {
    let bridge = resident("").await;
    let mut original = Conversation::new("Start here. [mock:tool]");
    let reply = next_turn(&bridge, "conv-2", &original).await;
    original.answer(&reply, "listing [mock:tool]");
    let reply = next_turn(&bridge, "conv-2", &original).await;

    // The user edits the first message (same conversation header): a new session, whole prompt.
    let mut edited = Conversation::new("Start somewhere else. [mock:last-user]");
    let forked = next_turn(&bridge, "conv-2", &edited).await;
    assert_eq!(text_of(&forked), "Start somewhere else. [mock:last-user]");

    // The original history goes on in its own session.
    original.answer(&reply, "more [mock:last-user]");
    let continued = next_turn(&bridge, "conv-2", &original).await;
    assert!(
        text_of(&continued).contains("more [mock:last-user]"),
        "{continued}"
    );
    // And the edited one in its own.
    edited.answer(&forked, "edited goes on [mock:last-user]");
    next_turn(&bridge, "conv-2", &edited).await;

    let seen = prompts(&bridge);
    let kinds = received(&seen);
    assert_eq!(
        kinds,
        [
            "full",
            "continuation",
            "full",
            "continuation",
            "continuation"
        ]
    );
    assert_eq!(seen[1]["sessionId"], seen[0]["sessionId"]);
    assert_ne!(seen[2]["sessionId"], seen[0]["sessionId"]);
    assert_eq!(seen[3]["sessionId"], seen[0]["sessionId"]);
    assert_eq!(seen[4]["sessionId"], seen[2]["sessionId"]);
    let stats = health(&bridge).await["resident"].clone();
    assert_eq!(
        (
            stats["misses"].as_u64(),
            stats["forks"].as_u64(),
            stats["hits"].as_u64()
        ),
        (Some(1), Some(1), Some(3)),
        "{stats}"
    );
    bridge.stop().await;
}

#[tokio::test]
async fn a_dead_process_leads_to_exactly_one_replay() {
    let bridge = resident("").await;
    let mut conversation = Conversation::new("First. [mock:exit-after]");
    let reply = next_turn(&bridge, "conv-3", &conversation).await;
    assert_eq!(text_of(&reply), "Mock answer: the bridge works.");
    // The process exits right after that answer.
    let deadline = Instant::now() + Duration::from_secs(5);
    while bridge.agents() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    conversation.answer(&reply, "Second. [mock:text]");
    next_turn(&bridge, "conv-3", &conversation).await;
    conversation.answer(&reply, "Third. [mock:text]");
    next_turn(&bridge, "conv-3", &conversation).await;

    let seen = prompts(&bridge);
    let kinds = received(&seen);
    assert_eq!(
        kinds,
        ["full", "full", "continuation"],
        "one replay, then back to continuations"
    );
    assert_ne!(seen[1]["pid"], seen[0]["pid"]);
    assert_eq!(seen[2]["sessionId"], seen[1]["sessionId"]);
    assert_eq!(seen[1]["toolResults"], 0);
    let stats = health(&bridge).await["resident"].clone();
    assert_eq!(stats["rebuilds"], 1, "{stats}");
    assert_eq!(stats["replays"], 1, "{stats}");
    assert_eq!(stats["processes_started"], 2, "{stats}");
    bridge.stop().await;
}

#[tokio::test]
async fn a_tool_call_kills_the_process_and_only_its_own_turn_fails() {
    let bridge = resident("").await;
    let mut calm = Conversation::new("Calm one. [mock:text]");
    let calm_reply = next_turn(&bridge, "calm", &calm).await;
    let rogue = Conversation::new("Rogue one. [mock:tool-call]");
    // The calm conversation's next turn is running when the rogue one's agent calls a tool.
    calm.answer(&calm_reply, "Calm again. [mock:slow]");
    let calm_turn = turn_in_background(&bridge, "calm", &calm);
    // Wait until the agent has the calm conversation's slow turn (its second prompt).
    let deadline = Instant::now() + Duration::from_secs(20);
    while prompts(&bridge).len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        prompts(&bridge).len(),
        2,
        "the slow turn never reached the agent"
    );
    let refused = bridge.conversation_turn("rogue", &rogue.request()).await;
    assert_eq!(refused.status, 502, "{}", refused.body);
    let calm_after = calm_turn.await.expect("calm turn");
    assert_eq!(
        calm_after.status, 200,
        "the other conversation's turn failed: {}",
        calm_after.body
    );

    let seen = prompts(&bridge);
    let calm_prompts: Vec<Value> = seen
        .iter()
        .filter(|p| p["scenario"] != "tool-call")
        .cloned()
        .collect();
    let kinds = received(&calm_prompts);
    // The slow turn was cut short with its process, then replayed whole on a new one.
    assert_eq!(kinds, ["full", "continuation", "full"], "{seen:?}");
    assert_ne!(calm_prompts[2]["pid"], calm_prompts[1]["pid"]);
    let rogue_prompt = seen
        .iter()
        .find(|p| p["scenario"] == "tool-call")
        .expect("rogue prompt");
    assert_eq!(
        rogue_prompt["pid"], calm_prompts[1]["pid"],
        "both shared one process"
    );
    let stats = health(&bridge).await["resident"].clone();
    assert_eq!(stats["replays"], 1, "{stats}");
    bridge.stop().await;
}

/// A turn whose process dies after its text began streaming is replayed whole: the reply is
/// the replay's answer once, not the dead turn's words followed by the replay's.
#[tokio::test]
async fn a_replayed_turn_that_had_shown_words_answers_them_once() {
    let bridge = resident("").await;
    let mut calm = Conversation::new("Calm one. [mock:text]");
    let calm_reply = next_turn(&bridge, "calm", &calm).await;
    calm.answer(&calm_reply, "Write it out. [mock:slow-long]");
    let calm_turn = turn_in_background(&bridge, "calm", &calm);
    // The slow answer has written some sentences (streamed into the turn's reply stream).
    let deadline = Instant::now() + Duration::from_secs(20);
    while bridge.agent_events("chunk").len() < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        bridge.agent_events("chunk").len() >= 3,
        "the slow answer never began"
    );
    // Another conversation's tool call ends the process both share.
    let rogue = Conversation::new("Rogue one. [mock:tool-call]");
    let refused = bridge.conversation_turn("rogue", &rogue.request()).await;
    assert_eq!(refused.status, 502, "{}", refused.body);
    let calm_after = calm_turn.await.expect("calm turn");
    let reply = ok(&calm_after);
    let stats = health(&bridge).await["resident"].clone();
    assert_eq!(stats["replays"], 1, "the turn was replayed: {stats}");
    let text = text_of(&reply);
    assert_eq!(
        text.matches("Sentence 01 of 40").count(),
        1,
        "the dead turn's words are not repeated: {text}"
    );
    assert!(text.starts_with("Sentence 01 of 40"), "{text}");
    assert_eq!(text.matches("Sentence 40 of 40").count(), 1, "{text}");
    bridge.stop().await;
}

#[tokio::test]
async fn two_conversations_interleave_on_one_process_without_crossing() {
    let bridge = resident("").await;
    let run = |name: &'static str| {
        let addr = bridge.addr;
        tokio::task::spawn_blocking(move || {
            let mut conversation = Conversation::new(&format!("{name} turn 0 [mock:last-user]"));
            for turn in 1..=5 {
                let response = common::bridge::request(
                    addr,
                    "POST",
                    "/v1/messages",
                    &[("x-claude-code-session-id".into(), name.into())],
                    &conversation.request().to_string(),
                );
                assert_eq!(response.status, 200, "{name}: {}", response.body);
                let reply = response.json();
                let expected = format!("{name} turn {} [mock:last-user]", turn - 1);
                assert_eq!(
                    text_of(&reply),
                    expected,
                    "{name} got another conversation's reply"
                );
                conversation.answer(&reply, &format!("{name} turn {turn} [mock:last-user]"));
            }
        })
    };
    let (alpha, beta) = tokio::join!(run("alpha"), run("beta"));
    alpha.expect("alpha");
    beta.expect("beta");
    let seen = prompts(&bridge);
    assert_eq!(seen.len(), 10);
    let pids: std::collections::BTreeSet<String> =
        seen.iter().map(|p| p["pid"].to_string()).collect();
    assert_eq!(pids.len(), 1, "both conversations on one process: {pids:?}");
    let sessions: std::collections::BTreeSet<String> =
        seen.iter().map(|p| p["sessionId"].to_string()).collect();
    assert_eq!(sessions.len(), 2);
    assert_eq!(seen.iter().filter(|p| p["received"] == "full").count(), 2);
    bridge.stop().await;
}

#[tokio::test]
async fn the_reaper_forgets_idle_sessions_and_kills_idle_processes() {
    let bridge = resident("session_idle_ms = 300").await;
    let mut conversation = Conversation::new("Hello. [mock:text]");
    let reply = next_turn(&bridge, "idle", &conversation).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while bridge.agents() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(bridge.agents(), 0, "the idle process was not killed");
    let stats = health(&bridge).await["resident"].clone();
    assert_eq!(
        (
            stats["processes_started"].as_u64(),
            stats["processes"].as_u64(),
            stats["sessions"].as_u64()
        ),
        (Some(1), Some(0), Some(0)),
        "one process served the turn and is gone: {stats}"
    );
    // The conversation goes on with a new session and the whole prompt.
    conversation.answer(&reply, "Again. [mock:text]");
    next_turn(&bridge, "idle", &conversation).await;
    assert_eq!(received(&prompts(&bridge)), ["full", "full"]);
    bridge.stop().await;
}

#[tokio::test]
async fn side_requests_and_headerless_requests_use_ephemeral_sessions() {
    let bridge = resident("").await;
    let mut conversation = Conversation::new("Main task. [mock:text]");
    let reply = next_turn(&bridge, "main", &conversation).await;
    // A title request: same header, its own system prompt, no tools.
    let title = json!({
        "model": "devin-cli-agentic/swe-1-7", "max_tokens": 64,
        "system": "Write a title.",
        "messages": [{"role": "user", "content": "Main task. [mock:text]"}]
    });
    ok(&bridge.conversation_turn("main", &title).await);
    // A client without the header.
    ok(&bridge.messages(&conversation.request()).await);
    conversation.answer(&reply, "Next. [mock:text]");
    next_turn(&bridge, "main", &conversation).await;

    let seen = prompts(&bridge);
    let kinds = received(&seen);
    assert_eq!(kinds, ["full", "full", "full", "continuation"]);
    assert_eq!(
        seen[3]["sessionId"], seen[0]["sessionId"],
        "the conversation kept its session"
    );
    assert_ne!(seen[1]["sessionId"], seen[0]["sessionId"]);
    assert_ne!(seen[2]["sessionId"], seen[0]["sessionId"]);
    let stats = health(&bridge).await["resident"].clone();
    assert_eq!(stats["ephemeral"], 2, "{stats}");
    assert_eq!(
        stats["sessions"], 1,
        "ephemeral sessions are not kept: {stats}"
    );
    bridge.stop().await;
}

#[tokio::test]
async fn the_repair_continues_the_session_with_the_repair_section_only() {
    let bridge = resident("").await;
    let mut conversation = Conversation::new("Go. [mock:text]");
    let reply = next_turn(&bridge, "repair", &conversation).await;
    conversation.answer(&reply, "Now run it. [mock:narrate-then-tool]");
    let repaired = next_turn(&bridge, "repair", &conversation).await;
    assert_eq!(repaired["stop_reason"], "tool_use");
    conversation.answer(&repaired, "done [mock:text]");
    next_turn(&bridge, "repair", &conversation).await;
    let seen = prompts(&bridge);
    let kinds = received(&seen);
    assert_eq!(kinds, ["full", "continuation", "repair", "continuation"]);
    assert_eq!(seen[2]["repair"], true);
    assert_eq!(seen[3]["repair"], false);
    assert!(seen.iter().all(|p| p["sessionId"] == seen[0]["sessionId"]));
    bridge.stop().await;
}

#[tokio::test]
async fn agent_faults_are_typed_and_the_conversation_recovers() {
    let bridge = resident("turn_timeout_ms = 1500\nkill_grace_ms = 300").await;
    let cases = [
        ("[mock:rpc-error]", 502),
        ("[mock:rpc-error=unavailable]", 429),
        ("[mock:rpc-error=resource_exhausted]", 400),
        ("[mock:hang]", 504),
        ("[mock:huge]", 502),
        ("[mock:malformed-frame]", 502),
        ("[mock:stray-response]", 502),
        ("[mock:exit]", 502),
    ];
    for (marker, status) in cases {
        let mut conversation = Conversation::new("Warm up. [mock:text]");
        let key = format!("fault-{marker}");
        let reply = next_turn(&bridge, &key, &conversation).await;
        conversation.answer(&reply, marker);
        let failed = bridge
            .conversation_turn(&key, &conversation.request())
            .await;
        assert_eq!(failed.status, status, "{marker}: {}", failed.body);
        // The client retries with the same history: a fresh session serves it.
        conversation.messages.pop();
        conversation.messages.pop();
        conversation.answer(&reply, "Retry. [mock:text]");
        let retried = bridge
            .conversation_turn(&key, &conversation.request())
            .await;
        assert_eq!(
            retried.status, 200,
            "{marker}: the retry failed: {}",
            retried.body
        );
    }
    bridge.stop().await;
}

#[tokio::test]
async fn replicas_without_affinity_stay_correct() {
    // Two bridges behind a balancer that alternates between them: each replica that has not
    // seen the conversation (or has seen only part of it) continues from what its own session
    // holds, so every turn is answered from the whole history.
    let replicas = [resident("").await, resident("").await];
    let mut conversation = Conversation::new("turn 0 [mock:last-user]");
    for turn in 1..=6 {
        let replica = &replicas[turn % 2];
        let reply = next_turn(replica, "shared", &conversation).await;
        assert_eq!(
            text_of(&reply),
            format!("turn {} [mock:last-user]", turn - 1)
        );
        conversation.answer(&reply, &format!("turn {turn} [mock:last-user]"));
    }
    for replica in &replicas {
        let seen = prompts(replica);
        let kinds = received(&seen);
        assert_eq!(kinds, ["full", "continuation", "continuation"]);
        // Each continuation carries the other replica's turn too: 4 new messages, and the
        // agent's trace holds every user turn so far.
        assert!(seen.iter().all(|p| p["sessionId"] == seen[0]["sessionId"]));
    }
    let first = prompts(&replicas[1]);
    let second = prompts(&replicas[0]);
    // Replica 1 served turns 1, 3, 5 (1, 3 and 5 user messages); replica 0 turns 2, 4, 6.
    let users = |p: &Value| p["chars"].as_u64().unwrap_or(0);
    assert!(users(&first[2]) > users(&first[1]) && users(&first[1]) > users(&first[0]));
    assert!(users(&second[2]) > users(&second[1]));
    for replica in replicas {
        replica.stop().await;
    }
}

/// A raw `/v1/messages` body in the conversation `key`.
async fn raw_turn(bridge: &TestBridge, key: &str, body: &str) -> HttpResponse {
    bridge
        .request(
            "POST",
            "/v1/messages",
            &[("x-claude-code-session-id", key)],
            body,
        )
        .await
}

#[tokio::test]
async fn a_request_that_rewrites_the_earlier_bytes_is_serialized_whole_and_still_continues() {
    let bridge = resident("").await;
    let mut conversation = Conversation::new("Look around. [mock:tool]");
    let first = next_turn(&bridge, "conv-pretty", &conversation).await;
    conversation.answer(&first, "a.txt [mock:text]");
    // The same conversation, pretty-printed: no byte of it repeats where the first request's
    // did, so the whole request is serialized; its history still continues the session.
    let pretty = serde_json::to_string_pretty(&conversation.request()).expect("json");
    let second = ok(&raw_turn(&bridge, "conv-pretty", &pretty).await);
    assert_eq!(text_of(&second), "Mock answer: the bridge works.");
    assert_eq!(received(&prompts(&bridge)), ["full", "continuation"]);
    let after_two = health(&bridge).await;
    let stats = &after_two["resident"];
    assert_eq!(stats["hits"], 1, "{after_two}");
    assert_eq!(stats["resumed"], 0, "{after_two}");

    // Turn three repeats turn two's (pretty) bytes: resumed from there.
    conversation.answer(&second, "thanks [mock:text]");
    let third = serde_json::to_string_pretty(&conversation.request()).expect("json");
    ok(&raw_turn(&bridge, "conv-pretty", &third).await);
    assert_eq!(
        received(&prompts(&bridge)),
        ["full", "continuation", "continuation"]
    );
    let health = health(&bridge).await;
    assert_eq!(health["resident"]["hits"], 2, "{health}");
    assert_eq!(health["resident"]["resumed"], 1, "{health}");
}

#[tokio::test]
async fn a_continuation_that_opens_a_second_messages_array_is_read_as_the_whole_request_reads_it() {
    let bridge = resident("").await;
    let conversation = Conversation::new("First question. [mock:text]");
    let first_body = conversation.request().to_string();
    ok(&raw_turn(&bridge, "conv-inject", &first_body).await);
    // Right after the first message, close the array and open a second `messages` key: the
    // bytes before and after are the first request's, but what lies between is no list of
    // messages. JSON's last key wins, so the request holds only the injected message, a
    // different conversation: a new session that gets the whole prompt.
    let message = conversation.messages[0].to_string();
    let end = first_body.find(&message).expect("message") + message.len();
    let injected = format!(
        r#"{}],"messages":[{{"role":"user","content":"Injected question. [mock:text]"}}{}"#,
        &first_body[..end],
        &first_body[end..]
    );
    let reply = ok(&raw_turn(&bridge, "conv-inject", &injected).await);
    assert_eq!(text_of(&reply), "Mock answer: the bridge works.");
    let seen = prompts(&bridge);
    assert_eq!(received(&seen), ["full", "full"]);
    assert_ne!(seen[0]["sessionId"], seen[1]["sessionId"]);
    let health = health(&bridge).await;
    let stats = &health["resident"];
    assert_eq!(stats["resumed"], 0, "{health}");
    assert_eq!(stats["forks"], 1, "{health}");
    assert_eq!(stats["hits"], 0, "{health}");
}

#[tokio::test]
async fn a_zero_resume_budget_keeps_no_request_and_still_continues_the_session() {
    let bridge = resident("resume_memory_mib = 0").await;
    let mut conversation = Conversation::new("Look around. [mock:tool]");
    let first = next_turn(&bridge, "conv-budget", &conversation).await;
    conversation.answer(&first, "a.txt [mock:text]");
    let second = next_turn(&bridge, "conv-budget", &conversation).await;
    assert_eq!(text_of(&second), "Mock answer: the bridge works.");
    assert_eq!(received(&prompts(&bridge)), ["full", "continuation"]);
    let health = health(&bridge).await;
    let stats = &health["resident"];
    assert_eq!(stats["hits"], 1, "{health}");
    assert_eq!(stats["resumed"], 0, "{health}");
    assert_eq!(stats["kept_bytes"], 0, "{health}");
}

/// A subagent's turn in its parent's conversation (same session header, its own agent id).
async fn subagent_turn(
    bridge: &TestBridge,
    session: &str,
    agent: &str,
    conversation: &Conversation,
) -> Value {
    ok(&bridge
        .request(
            "POST",
            "/v1/messages?beta=true",
            &[
                ("x-claude-code-session-id", session),
                ("x-claude-code-agent-id", agent),
            ],
            &conversation.request().to_string(),
        )
        .await)
}

#[tokio::test]
async fn a_subagent_keeps_its_own_session_beside_its_parents() {
    let bridge = resident("").await;
    let mut parent = Conversation::new("Delegate the survey. [mock:tool]");
    let mut child = Conversation::new("Survey the files. [mock:tool]");
    // Interleaved as Claude Code runs them: the parent asks, the subagent works, the parent
    // continues, the subagent continues.
    let parent_first = next_turn(&bridge, "s-1", &parent).await;
    let child_first = subagent_turn(&bridge, "s-1", "a3b342e5054e01ced", &child).await;
    parent.answer(&parent_first, "launched [mock:text]");
    child.answer(&child_first, "a.txt [mock:text]");
    next_turn(&bridge, "s-1", &parent).await;
    subagent_turn(&bridge, "s-1", "a3b342e5054e01ced", &child).await;

    let seen = prompts(&bridge);
    assert_eq!(
        received(&seen),
        ["full", "full", "continuation", "continuation"]
    );
    assert_eq!(seen[0]["sessionId"], seen[2]["sessionId"]);
    assert_eq!(seen[1]["sessionId"], seen[3]["sessionId"]);
    assert_ne!(seen[0]["sessionId"], seen[1]["sessionId"]);
    let health = health(&bridge).await;
    let stats = &health["resident"];
    // Two conversations, each started once and continued once: the subagent is not a fork of
    // its parent's history, and neither rebuilt nor replayed the other's session.
    assert_eq!(stats["misses"], 2, "{health}");
    assert_eq!(stats["hits"], 2, "{health}");
    assert_eq!(stats["forks"], 0, "{health}");
    assert_eq!(stats["rebuilds"], 0, "{health}");
    assert_eq!(stats["replays"], 0, "{health}");
    let metrics = bridge.request("GET", "/metrics", &[], "").await.body;
    for line in [
        "devin_bridge_messages_total{kind=\"main_turn\"} 2",
        "devin_bridge_messages_total{kind=\"subagent_turn\"} 2",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line:?} in\n{metrics}"
        );
    }
}

/// Auto mode on the resident transport: each request repeats the earlier one's bytes, so the
/// serializer reads only the new messages (resumed), and the safeguard judge still sees every
/// earlier call of the conversation, those of the repeated messages included. The conversation
/// edited `package.json` in its first exchange; three requests later the agent (the
/// rewrite-test-script scenario, which counts tool results) asks for `npm test`, and the run is
/// flagged, naming that edit.
#[tokio::test]
async fn a_resumed_request_still_gives_the_judge_every_earlier_call() {
    let bridge = resident("").await;
    let marker = "[mock:rewrite-test-script]";
    let tool =
        |name: &str| json!({"name": name, "description": name, "input_schema": {"type": "object"}});
    let body = |messages: &[Value]| {
        json!({
            "model": "devin-cli-agentic/swe-1-7",
            "max_tokens": 1024,
            "tools": [tool("Bash"), tool("Read"), tool("Edit")],
            "messages": messages,
            "safeguards": [{"type": "dangerous_tool_use", "classifier_context": {
                "v": 1, "permission_mode": "auto", "live_cwd": "/w", "home_dir": "/home/u",
                "trusted_directories": {"primary": {"path": "/w"}}}}],
        })
        .to_string()
    };
    // The calls the client recorded, with their results (the first result is the working
    // directory the scenario looks for).
    let recorded = [
        (
            "Edit",
            json!({"file_path": "/w/package.json", "old_string": "a", "new_string": "b"}),
            "/w",
        ),
        (
            "Read",
            json!({"file_path": "/w/package.json"}),
            "{ \"scripts\": {} }",
        ),
        ("Bash", json!({"command": "ls"}), "package.json"),
    ];
    let mut messages = vec![
        json!({"role": "user", "content": format!("Make the tests fetch their fixtures. {marker}")}),
    ];
    for (i, (name, input, result)) in recorded.iter().enumerate() {
        ok(&raw_turn(&bridge, "conv-auto", &body(&messages)).await);
        let id = format!("toolu_rec_{i}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": name, "input": input}
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": format!("{result}\n{marker}")}
        ]}));
    }
    let reply = ok(&raw_turn(&bridge, "conv-auto", &body(&messages)).await);
    let call = reply["content"]
        .as_array()
        .and_then(|blocks| blocks.iter().find(|b| b["type"] == "tool_use"))
        .unwrap_or_else(|| panic!("no tool call: {reply}"));
    assert_eq!(call["input"]["command"], "npm test", "{reply}");
    let verdict =
        &reply["safeguard_results"][0]["status"]["tool_uses"][call["id"].as_str().unwrap_or("")];
    assert_eq!(verdict["outcome"], "flagged", "{reply}");
    let why = verdict["explanation"].as_str().unwrap_or("");
    assert!(
        why.contains("/w/package.json, written by an earlier Edit call"),
        "{why}"
    );
    let health = health(&bridge).await;
    assert_eq!(health["resident"]["hits"], 3, "{health}");
    assert_eq!(health["resident"]["resumed"], 3, "{health}");
    bridge.stop().await;
}

/// A parent's conversation, twenty subagents of it (each a tool call and then its final
/// answer; one after another, or all started before any ends), then the parent's next turn,
/// with room for four sessions in all. A control conversation with the same messages and no
/// subagent, run first, shows what the parent's next turn sends when nothing came between:
/// the parent's turn sends exactly as much, on its own session.
async fn a_parent_after_twenty_subagents(parallel: bool) {
    let bridge = resident("max_sessions = 4").await;
    let first_message = "Delegate the survey to twenty subagents. [mock:tool]";
    let new_message = "the subagents reported [mock:text]";
    let mut control = Conversation::new(first_message);
    let reply = next_turn(&bridge, "s-control", &control).await;
    control.answer(&reply, new_message);
    next_turn(&bridge, "s-control", &control).await;

    let mut parent = Conversation::new(first_message);
    let parent_first = next_turn(&bridge, "s-1", &parent).await;
    let agents: Vec<String> = (0..20).map(|i| format!("a{i:016x}")).collect();
    let mut children: Vec<Conversation> = agents
        .iter()
        .map(|agent| Conversation::new(&format!("Survey part {agent}. [mock:tool]")))
        .collect();
    if parallel {
        // Every subagent starts before any ends (Claude Code runs them side by side): room
        // must be made while they all still hold sessions.
        for (agent, child) in agents.iter().zip(children.iter_mut()) {
            let reply = subagent_turn(&bridge, "s-1", agent, child).await;
            child.answer(&reply, "a.txt [mock:text]");
        }
        for (agent, child) in agents.iter().zip(&children) {
            subagent_turn(&bridge, "s-1", agent, child).await;
        }
    } else {
        for (agent, child) in agents.iter().zip(children.iter_mut()) {
            let reply = subagent_turn(&bridge, "s-1", agent, child).await;
            child.answer(&reply, "a.txt [mock:text]");
            subagent_turn(&bridge, "s-1", agent, child).await;
        }
    }
    parent.answer(&parent_first, new_message);
    next_turn(&bridge, "s-1", &parent).await;

    let seen = prompts(&bridge);
    assert_eq!(seen.len(), 2 + 1 + 40 + 1, "{seen:?}");
    let (control_next, parent_first, parent_next) = (&seen[1], &seen[2], &seen[seen.len() - 1]);
    assert_eq!(control_next["received"], "continuation", "{control_next}");
    assert_eq!(parent_next["received"], "continuation", "{parent_next}");
    assert_eq!(
        parent_next["sessionId"], parent_first["sessionId"],
        "{parent_next} vs {parent_first}"
    );
    // Only the messages after what the session holds (the agent's reply and the new message),
    // exactly as in the conversation that had no subagent.
    assert_eq!(
        parent_next["receivedChars"], control_next["receivedChars"],
        "{parent_next} vs {control_next}"
    );
    let health = health(&bridge).await;
    let stats = &health["resident"];
    // Every subagent ended with its final answer: its session went with it.
    assert_eq!(stats["subagents_ended"], 20, "{health}");
    assert_eq!(
        stats["sessions"], 2,
        "the control's and the parent's: {health}"
    );
    assert_eq!(stats["forks"], 0, "{health}");
    assert_eq!(stats["rebuilds"], 0, "{health}");
}

#[tokio::test]
async fn a_parent_keeps_its_session_after_twenty_subagents_one_after_another() {
    a_parent_after_twenty_subagents(false).await;
}

#[tokio::test]
async fn a_parent_keeps_its_session_after_twenty_subagents_running_side_by_side() {
    a_parent_after_twenty_subagents(true).await;
}
