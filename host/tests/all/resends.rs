//! Resends join the running turn: Claude Code sends a request again when its timeout or its
//! stream-idle watchdog fires, or after a dropped connection. A request identical to one in
//! flight (same conversation header, same body bytes) waits for that turn; one that arrives
//! just after it finished gets the same answer; any other request is a turn of its own. Both
//! transports; the offline agent's log counts the agent turns.

use crate::common;

use std::io::Write as _;
use std::sync::Once;
use std::time::{Duration, Instant};

use common::bridge::{request, wait_no_agents, HttpResponse, TestBridge};
use serde_json::{json, Value};

fn log_in_agent_home() {
    static SET: Once = Once::new();
    SET.call_once(|| std::env::set_var("MOCK_DEVIN_LOG", common::bridge::AGENT_LOG));
}

async fn bridge(server: &str, agent: &str) -> TestBridge {
    log_in_agent_home();
    TestBridge::start(
        server,
        &format!("prewarm = 0\nturn_timeout_ms = 60000\npass_env = [\"MOCK_DEVIN_LOG\"]\n{agent}"),
    )
    .await
}

fn body(text: &str, stream: bool) -> String {
    json!({
        "model": "devin-cli-agentic/swe-1-7",
        "max_tokens": 256,
        "stream": stream,
        "messages": [{"role": "user", "content": text}]
    })
    .to_string()
}

const SESSION: &str = "x-claude-code-session-id";

/// Sends `body` on a raw connection and returns it unread, so the test can hang up mid-turn.
fn send_and_keep(addr: std::net::SocketAddr, session: &str, body: &str) -> std::net::TcpStream {
    let mut socket = std::net::TcpStream::connect(addr).expect("connect");
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{SESSION}: {session}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).expect("write");
    socket.write_all(body.as_bytes()).expect("write");
    socket
}

async fn post(bridge: &TestBridge, session: &str, body: &str) -> HttpResponse {
    let (addr, session, body) = (bridge.addr, session.to_owned(), body.to_owned());
    tokio::task::spawn_blocking(move || {
        request(
            addr,
            "POST",
            "/v1/messages",
            &[(SESSION.to_owned(), session)],
            &body,
        )
    })
    .await
    .expect("client")
}

async fn wait_for_prompts(bridge: &TestBridge, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while bridge.agent_events("prompt").len() < count && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        bridge.agent_events("prompt").len(),
        count,
        "the agent did not get the prompt"
    );
}

async fn metric(bridge: &TestBridge, line: &str) -> u64 {
    let metrics = bridge.request("GET", "/metrics", &[], "").await.body;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(line).map(str::trim))
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

/// The answer's text, from a JSON message or a stream's text deltas.
fn answer_text(response: &HttpResponse) -> String {
    assert_eq!(response.status, 200, "{}", response.body);
    if response.body.starts_with('{') {
        let value: Value = response.json();
        return value["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
    }
    response
        .events()
        .into_iter()
        .filter(|(name, _)| name == "content_block_delta")
        .filter_map(|(_, data)| data["delta"]["text"].as_str().map(str::to_owned))
        .collect()
}

async fn client_hangs_up_and_resends(transport: &str, stream: bool) {
    let bridge = bridge("resend_grace_ms = 20000", transport).await;
    let request = body("Please help. [mock:slow]", stream);
    // The first attempt reaches the agent, then its client hangs up (Claude Code's timeout).
    let socket = send_and_keep(bridge.addr, "conv-r", &request);
    wait_for_prompts(&bridge, 1).await;
    drop(socket);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The resend waits for the running turn and gets its answer.
    let resent = answer_text(&post(&bridge, "conv-r", &request).await);
    assert!(!resent.is_empty(), "an empty answer");
    assert_eq!(
        bridge.agent_events("prompt").len(),
        1,
        "{transport} stream={stream}: the resend started another agent turn"
    );
    // Another resend just after the turn finished gets the same answer, no turn either.
    let again = answer_text(&post(&bridge, "conv-r", &request).await);
    assert_eq!(again, resent);
    assert_eq!(bridge.agent_events("prompt").len(), 1);
    assert_eq!(
        metric(&bridge, "devin_bridge_resends_total{joined=\"running\"}").await,
        1
    );
    assert_eq!(
        metric(&bridge, "devin_bridge_resends_total{joined=\"finished\"}").await,
        1
    );
    let health = bridge.request("GET", "/healthz", &[], "").await.json();
    assert_eq!(health["resends"]["running_turns"], 0, "{health}");
    assert_eq!(health["resends"]["kept_answers"], 1, "{health}");
    // One byte more is a new request: a turn of its own.
    let changed = body("Please help. [mock:slow] ", stream);
    answer_text(&post(&bridge, "conv-r", &changed).await);
    assert_eq!(bridge.agent_events("prompt").len(), 2);
    // So is the same body in another conversation.
    answer_text(&post(&bridge, "conv-other", &request).await);
    assert_eq!(bridge.agent_events("prompt").len(), 3);
    bridge.stop().await;
}

#[tokio::test]
async fn a_streamed_request_resent_after_a_hang_up_joins_its_running_turn() {
    client_hangs_up_and_resends("", true).await;
}

#[tokio::test]
async fn a_json_request_resent_after_a_hang_up_joins_its_running_turn() {
    client_hangs_up_and_resends("", false).await;
}

#[tokio::test]
async fn a_resend_joins_the_running_turn_on_the_resident_transport() {
    client_hangs_up_and_resends("transport = \"resident\"", true).await;
}

#[tokio::test]
async fn two_identical_requests_at_once_cost_one_agent_turn() {
    let bridge = bridge("", "").await;
    let request = body("Please help. [mock:slow]", true);
    let (first, second) = tokio::join!(
        post(&bridge, "conv-twice", &request),
        post(&bridge, "conv-twice", &request)
    );
    assert_eq!(answer_text(&first), answer_text(&second));
    assert_eq!(bridge.agent_events("prompt").len(), 1);
    bridge.stop().await;
}

#[tokio::test]
async fn a_turn_nobody_resends_is_killed_when_the_grace_ends() {
    let bridge = bridge("resend_grace_ms = 500", "").await;
    let socket = send_and_keep(
        bridge.addr,
        "conv-gone",
        &body("Please help. [mock:grandchild]", true),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while bridge.agents() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(bridge.agents() >= 2, "the agent and its grandchild run");
    let hung_up = Instant::now();
    drop(socket);
    // Within the grace the turn keeps running for a resend...
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(bridge.agents() >= 1, "killed before the grace ended");
    // ...and then it is dropped, agent and grandchild with it.
    wait_no_agents(&bridge.home, Duration::from_secs(5))
        .await
        .expect("agent processes survived the grace");
    assert!(hung_up.elapsed() >= Duration::from_millis(500));
    bridge.stop().await;
}

#[tokio::test]
async fn a_failed_turn_is_not_kept_and_its_resend_runs_again() {
    let bridge = bridge("", "").await;
    let request = body("Please help. [mock:rpc-error]", false);
    let first = post(&bridge, "conv-fail", &request).await;
    assert_ne!(first.status, 200, "{}", first.body);
    let second = post(&bridge, "conv-fail", &request).await;
    assert_ne!(second.status, 200, "{}", second.body);
    assert_eq!(bridge.agent_events("prompt").len(), 2);
    bridge.stop().await;
}

#[tokio::test]
async fn stopping_the_server_ends_a_turn_held_for_a_resend() {
    let bridge = bridge("resend_grace_ms = 600000\nshutdown_grace_ms = 300", "").await;
    let socket = send_and_keep(
        bridge.addr,
        "conv-stop",
        &body("Please help. [mock:grandchild]", true),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while bridge.agents() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(bridge.agents() >= 2, "the agent and its grandchild run");
    // The client is gone: only the ten-minute grace keeps the turn.
    drop(socket);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(bridge.agents() >= 1, "the turn should wait for a resend");
    let home = bridge.home.clone();
    bridge.stop().await;
    wait_no_agents(&home, Duration::from_secs(5))
        .await
        .expect("the server stopped but the turn held for a resend kept its agent");
}
