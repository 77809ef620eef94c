//! One agent process, one turn: `initialize` (at start, so a prewarmed agent has paid for it),
//! then `session/new` and `session/prompt`, collecting `agent_message_chunk` text.
//!
//! Fail closed: a `tool_call` or `tool_call_update` ends the turn and kills the process group at
//! once; permission requests are answered `cancelled`; any other agent request gets -32601;
//! a wrong session id, a stray response id, a malformed frame, a JSON-RPC error, an early exit
//! and output over the cap are each their own error.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdout;

use super::frame::{self, FrameReader, Incoming};
use super::AcpError;
use crate::process::{Sandboxed, Spec};

/// Bounds of one agent.
#[derive(Debug, Clone, Copy)]
pub struct AgentLimits {
    pub init_timeout: Duration,
    pub turn_timeout: Duration,
    /// Cap on the collected reply text.
    pub output_cap: usize,
}

impl AgentLimits {
    /// A single frame may carry at most the whole allowed output plus envelope overhead.
    fn max_line(&self) -> usize {
        self.output_cap.saturating_add(64 << 10)
    }
}

/// What a successful turn produced.
#[derive(Debug, Clone)]
pub struct TurnOutput {
    pub text: String,
    /// The model the agent says really ran (`_cognition.ai/agent_stopped` stats), if reported.
    pub observed_model: Option<String>,
    pub elapsed: Duration,
}

const INITIALIZE_ID: u64 = 0;
const SESSION_NEW_ID: u64 = 1;
const PROMPT_ID: u64 = 2;

/// A spawned and initialized agent, ready for exactly one turn.
pub struct Agent {
    child: Sandboxed,
    frames: FrameReader<ChildStdout>,
    limits: AgentLimits,
    pub started: Instant,
}

impl Agent {
    /// Spawns the agent and completes `initialize` (protocol 1 required).
    pub async fn start(spec: &Spec, limits: AgentLimits) -> Result<Agent, AcpError> {
        let mut child = Sandboxed::spawn(spec).map_err(AcpError::Spawn)?;
        let stdout = child.take_stdout().ok_or(AcpError::EarlyExit)?;
        let mut agent = Agent {
            child,
            frames: FrameReader::new(stdout, limits.max_line()),
            limits,
            started: Instant::now(),
        };
        let params = json!({
            "protocolVersion": 1,
            "clientCapabilities": { "fs": { "readTextFile": false, "writeTextFile": false }, "terminal": false },
            "clientInfo": { "name": "devin-bridge", "version": env!("CARGO_PKG_VERSION") }
        });
        let initialized = tokio::time::timeout(
            limits.init_timeout,
            agent.call(INITIALIZE_ID, "initialize", params, None),
        )
        .await;
        let result = match initialized {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => return Err(agent.fail(error).await),
            Err(_) => {
                return Err(agent
                    .fail(AcpError::Timeout(millis(limits.init_timeout)))
                    .await)
            }
        };
        match result.get("protocolVersion").and_then(Value::as_u64) {
            Some(1) => Ok(agent),
            other => {
                let version = other
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "none".into());
                Err(agent.fail(AcpError::ProtocolVersion(version)).await)
            }
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.pid()
    }

    /// Whether the process is still running (a prewarmed agent may have died while waiting).
    pub fn is_alive(&mut self) -> bool {
        self.child.try_exited().is_none()
    }

    /// Runs one turn in a new session. The process is ended in the background (close stdin,
    /// a moment to exit, SIGTERM, grace, SIGKILL, reap) so the answer is not delayed by it.
    pub async fn run_turn(mut self, cwd: &Path, prompt: &str) -> Result<TurnOutput, AcpError> {
        let started = Instant::now();
        let limits = self.limits;
        let outcome = tokio::time::timeout(limits.turn_timeout, self.turn(cwd, prompt)).await;
        let outcome = match outcome {
            Ok(Ok((text, observed_model))) => Ok(TurnOutput {
                text,
                observed_model,
                elapsed: started.elapsed(),
            }),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(AcpError::Timeout(millis(limits.turn_timeout))),
        };
        if matches!(outcome, Err(AcpError::UnauthorizedTool)) {
            // No grace for an agent that tried to act on its own.
            self.child.kill_now();
        }
        let failure = outcome.as_ref().err().map(|error| {
            // The agent's own words, escaped so they cannot forge log lines.
            let detail = match error {
                AcpError::Rpc { message, .. } => message.escape_debug().to_string(),
                _ => String::new(),
            };
            (error.code(), error.to_string(), detail)
        });
        let child = self.child;
        tokio::spawn(async move {
            let pid = child.pid();
            let ended = child.shutdown().await;
            match failure {
                Some((code, error, detail)) => {
                    tracing::warn!(code, %error, %detail, pid, exit = ?ended.status, killed = ended.killed, stderr_tail = %ended.stderr_tail, "agent turn failed")
                }
                None => {
                    tracing::debug!(pid, exit = ?ended.status, killed = ended.killed, "agent ended")
                }
            }
        });
        outcome
    }

    async fn turn(
        &mut self,
        cwd: &Path,
        prompt: &str,
    ) -> Result<(String, Option<String>), AcpError> {
        let session = self
            .call(
                SESSION_NEW_ID,
                "session/new",
                json!({ "cwd": cwd, "mcpServers": [] }),
                None,
            )
            .await?;
        let session_id = session
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or(AcpError::MalformedFrame)?
            .to_owned();
        let mut collected = Collected::default();
        let params =
            json!({ "sessionId": session_id, "prompt": [{ "type": "text", "text": prompt }] });
        let result = self
            .call(
                PROMPT_ID,
                "session/prompt",
                params,
                Some((&session_id, &mut collected)),
            )
            .await?;
        match result.get("stopReason").and_then(Value::as_str) {
            Some("end_turn") => Ok((collected.text, collected.observed_model)),
            Some(other) => Err(AcpError::Stopped(other.to_owned())),
            None => Err(AcpError::MalformedFrame),
        }
    }

    /// Sends a request and processes frames until its response arrives. While a prompt runs
    /// (`collect` is set) session updates are checked and collected.
    async fn call(
        &mut self,
        id: u64,
        method: &str,
        params: Value,
        mut collect: Option<(&str, &mut Collected)>,
    ) -> Result<Value, AcpError> {
        self.send(&frame::request(id, method, params)).await?;
        loop {
            let Some(message) = self.frames.next().await? else {
                return Err(AcpError::EarlyExit);
            };
            match message {
                Incoming::Response { id: got, outcome } => {
                    if got.as_u64() != Some(id) {
                        return Err(AcpError::StrayResponse(got.to_string()));
                    }
                    return outcome.map_err(rpc_error);
                }
                Incoming::Request {
                    id: request_id,
                    method,
                    ..
                } => {
                    let answer = if method == "session/request_permission" {
                        // Never grant anything: the client owns every action.
                        Ok(json!({ "outcome": { "outcome": "cancelled" } }))
                    } else {
                        Err(json!({ "code": -32601, "message": "Method not found" }))
                    };
                    tracing::debug!(%method, "agent request refused");
                    self.send(&frame::response(&request_id, answer)).await?;
                }
                Incoming::Notification { method, params } => match collect.as_mut() {
                    Some((session_id, collected)) => handle_notification(
                        &method,
                        &params,
                        session_id,
                        collected,
                        self.limits.output_cap,
                    )?,
                    None if is_update(&method) => return Err(AcpError::WrongSession),
                    None => {}
                },
            }
        }
    }

    async fn send(&mut self, bytes: &[u8]) -> Result<(), AcpError> {
        let stdin = self.child.stdin().ok_or(AcpError::EarlyExit)?;
        match stdin.write_all(bytes).await.and(stdin.flush().await) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                Err(AcpError::EarlyExit)
            }
            Err(error) => Err(AcpError::Io(error)),
        }
    }

    /// Ends an unused agent (pool drain).
    pub async fn close(self) {
        let _ = self.child.shutdown().await;
    }

    async fn fail(self, error: AcpError) -> AcpError {
        let ended = self.child.shutdown().await;
        tracing::warn!(code = error.code(), %error, exit = ?ended.status, stderr_tail = %ended.stderr_tail, "agent start failed");
        error
    }
}

#[derive(Default)]
struct Collected {
    text: String,
    observed_model: Option<String>,
}

fn is_update(method: &str) -> bool {
    method == "session/update" || method == "$/update"
}

/// One notification during a prompt.
fn handle_notification(
    method: &str,
    params: &Value,
    session_id: &str,
    collected: &mut Collected,
    output_cap: usize,
) -> Result<(), AcpError> {
    if is_update(method) {
        if params.get("sessionId").and_then(Value::as_str) != Some(session_id) {
            return Err(AcpError::WrongSession);
        }
        // Current form: params.update.sessionUpdate; legacy `$/update`: flat params.type.
        let update = params.get("update").unwrap_or(params);
        let kind = update
            .get("sessionUpdate")
            .or_else(|| update.get("type"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        match kind {
            "tool_call" | "tool_call_update" => return Err(AcpError::UnauthorizedTool),
            "agent_message_chunk" => {
                if let Some(text) = update
                    .get("content")
                    .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
                    .and_then(|c| c.get("text"))
                    .and_then(Value::as_str)
                {
                    if collected.text.len().saturating_add(text.len()) > output_cap {
                        return Err(AcpError::OutputTooLarge(output_cap));
                    }
                    collected.text.push_str(text);
                }
            }
            _ => {} // thoughts, plans, commands, modes, usage: tolerated and ignored
        }
        return Ok(());
    }
    if method == "_cognition.ai/agent_stopped" {
        if let Some(model) = params.pointer("/stats/modelLabel").and_then(Value::as_str) {
            collected.observed_model = Some(model.chars().take(200).collect());
        }
    }
    // Other vendor and unknown notifications are ignored, as ACP requires.
    Ok(())
}

/// A JSON-RPC error from the agent, classified by Devin's `cognition.ai/errorKind` when present.
fn rpc_error(error: Value) -> AcpError {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
    let kind = error
        .pointer("/data/cognition.ai~1errorKind")
        .and_then(Value::as_str)
        .map(str::to_owned);
    match kind.as_deref() {
        Some("RateLimited") | Some("QuotaExceeded") => AcpError::RateLimited,
        Some("Unauthenticated") => AcpError::Unauthenticated,
        _ if code == -32000 => AcpError::Unauthenticated,
        _ => AcpError::Rpc {
            code,
            message: bounded(
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            ),
            kind,
        },
    }
}

/// At most this many bytes of an agent's error message are kept. The text is untrusted: the
/// mode that shows it to anyone cleans it first (summarizer: the sse component).
pub const MAX_AGENT_MESSAGE_BYTES: usize = 4096;

/// The first `MAX_AGENT_MESSAGE_BYTES` of `message`, cut at a character boundary.
fn bounded(message: &str) -> String {
    let mut end = message.len().min(MAX_AGENT_MESSAGE_BYTES);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_owned()
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_are_collected_checked_and_tool_calls_refused() {
        let mut collected = Collected::default();
        let chunk = |text: &str| json!({"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":text}}});
        handle_notification("session/update", &chunk("Hel"), "s", &mut collected, 100)
            .expect("chunk");
        handle_notification("$/update", &json!({"sessionId":"s","type":"agent_message_chunk","content":{"type":"text","text":"lo"}}), "s", &mut collected, 100).expect("legacy");
        handle_notification(
            "session/update",
            &json!({"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}),
            "s",
            &mut collected,
            100,
        )
        .expect("plan");
        handle_notification(
            "_cognition.ai/turn_stats",
            &json!({}),
            "s",
            &mut collected,
            100,
        )
        .expect("vendor");
        assert_eq!(collected.text, "Hello");
        assert!(matches!(
            handle_notification("session/update", &chunk("x"), "other", &mut collected, 100),
            Err(AcpError::WrongSession)
        ));
        for kind in ["tool_call", "tool_call_update"] {
            let update = json!({"sessionId":"s","update":{"sessionUpdate":kind,"toolCallId":"c"}});
            assert!(matches!(
                handle_notification("session/update", &update, "s", &mut collected, 100),
                Err(AcpError::UnauthorizedTool)
            ));
        }
        assert!(matches!(
            handle_notification(
                "session/update",
                &chunk(&"y".repeat(96)),
                "s",
                &mut collected,
                100
            ),
            Err(AcpError::OutputTooLarge(100))
        ));
    }

    #[test]
    fn rpc_errors_are_classified() {
        assert!(matches!(
            rpc_error(
                json!({"code":-32603,"message":"x","data":{"cognition.ai/errorKind":"RateLimited"}})
            ),
            AcpError::RateLimited
        ));
        assert!(matches!(
            rpc_error(json!({"code":-32000,"message":"auth"})),
            AcpError::Unauthenticated
        ));
        // The raw message is handed over as is (cleaning is the mode's job), only bounded.
        match rpc_error(json!({"code":-32603,"message":"failed reading /home/user/.secret now"})) {
            AcpError::Rpc { message, .. } => {
                assert_eq!(message, "failed reading /home/user/.secret now")
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
}
