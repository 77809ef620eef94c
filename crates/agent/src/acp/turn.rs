//! The summarizer's agent: one process, one turn. `initialize` runs at start (so a prewarmed
//! agent has paid for it), then `session/new` and `session/prompt` with [`NoTools`]: any tool
//! call ends the turn and kills the process group at once.

use std::path::Path;
use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1;

use super::connection::millis;
use super::{AcpError, AgentConnection, AgentLimits, NoTools};
use crate::process::Spec;

/// What a successful turn produced.
#[derive(Debug, Clone)]
pub struct TurnOutput {
    pub text: String,
    /// The token counts the agent reported for the turn, if any.
    pub usage: Option<super::ReportedUsage>,
    /// The model the agent says really ran (`_cognition.ai/agent_stopped` stats), if reported.
    pub observed_model: Option<String>,
    pub elapsed: Duration,
}

/// A spawned and initialized agent, ready for exactly one turn.
pub struct Agent {
    connection: AgentConnection,
    limits: AgentLimits,
    /// Whether the agent's API key reaches it (it may then be signed in lazily).
    api_key: bool,
    pub started: Instant,
}

impl Agent {
    /// Spawns the agent and completes `initialize` (protocol 1 required).
    pub async fn start(spec: &Spec, limits: AgentLimits) -> Result<Agent, AcpError> {
        Ok(Agent {
            connection: AgentConnection::start(spec, limits).await?,
            limits,
            api_key: super::auth::has_api_key(spec),
            started: Instant::now(),
        })
    }

    pub fn pid(&self) -> i32 {
        self.connection.pid()
    }

    /// Whether the process is still running (a prewarmed agent may have died while waiting).
    pub fn is_alive(&mut self) -> bool {
        self.connection.is_alive()
    }

    /// Runs one turn in a new session, all of it within the turn timeout. The process is ended
    /// in the background (close stdin, a moment to exit, SIGTERM, grace, SIGKILL, reap) so the
    /// answer is not delayed by it.
    pub async fn run_turn(self, cwd: &Path, prompt: &str) -> Result<TurnOutput, AcpError> {
        self.run_turn_blocks(cwd, vec![v1::ContentBlock::from(prompt.to_owned())])
            .await
    }

    /// [`Agent::run_turn`] with any content blocks (text and images).
    pub async fn run_turn_blocks(
        mut self,
        cwd: &Path,
        blocks: Vec<v1::ContentBlock>,
    ) -> Result<TurnOutput, AcpError> {
        let started = Instant::now();
        let limits = self.limits;
        let outcome = tokio::time::timeout(limits.turn_timeout, self.turn(cwd, blocks)).await;
        let outcome = match outcome {
            Ok(Ok((text, observed_model, usage))) => Ok(TurnOutput {
                text,
                usage,
                observed_model,
                elapsed: started.elapsed(),
            }),
            // The summarizer's agent may run no tool at all, in a prompt or outside one.
            Ok(Err(error)) if error.is_tool_refusal() => Err(AcpError::UnauthorizedTool),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(AcpError::Timeout(millis(limits.turn_timeout))),
        };
        if matches!(outcome, Err(AcpError::UnauthorizedTool)) {
            // No grace for an agent that tried to act on its own (the connection has killed
            // it already; this makes sure whatever path got here).
            self.connection.kill_now();
        }
        let failure = outcome.as_ref().err().map(|error| {
            // The agent's own words, escaped so they cannot forge log lines.
            let detail = match error {
                AcpError::Rpc { message, .. } => message.escape_debug().to_string(),
                _ => String::new(),
            };
            (error.code(), error.to_string(), detail)
        });
        let connection = self.connection;
        tokio::spawn(async move {
            let pid = connection.pid();
            let ended = connection.shutdown().await;
            match failure {
                Some((code, error, detail)) => {
                    tracing::warn!(code, %error, %detail, pid, exit = ?ended.status, killed = ended.killed, stderr_tail = %ended.stderr_tail, "agent turn failed");
                }
                None => {
                    tracing::debug!(pid, exit = ?ended.status, killed = ended.killed, "agent ended");
                }
            }
        });
        outcome
    }

    async fn turn(
        &mut self,
        cwd: &Path,
        blocks: Vec<v1::ContentBlock>,
    ) -> Result<(String, Option<String>, Option<super::ReportedUsage>), AcpError> {
        let session = self
            .connection
            .new_session_signing_in(cwd, self.api_key)
            .await?;
        let outcome = self
            .connection
            .prompt(&session.session_id.0, blocks, &NoTools)
            .await?;
        match outcome.stop_reason {
            v1::StopReason::EndTurn => Ok((
                outcome.text,
                outcome.stopped.and_then(|stopped| stopped.model_label),
                super::ReportedUsage::of_turn(outcome.usage.as_ref(), outcome.context_used),
            )),
            other => Err(AcpError::Stopped(stop_reason_name(other))),
        }
    }

    /// Ends an unused agent (pool drain).
    pub async fn close(self) {
        let _ = self.connection.shutdown().await;
    }
}

/// A prompt's content: its text, then its images (media type, base64 data) in order.
pub fn prompt_blocks<'a>(
    text: String,
    images: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<v1::ContentBlock> {
    std::iter::once(v1::ContentBlock::from(text))
        .chain(images.into_iter().map(|(media_type, data)| {
            v1::ContentBlock::Image(v1::ImageContent::new(data, media_type))
        }))
        .collect()
}

/// Whether the agent's `initialize` answer advertises image prompts.
pub fn takes_images(initialized: &v1::InitializeResponse) -> bool {
    initialized.agent_capabilities.prompt_capabilities.image
}

/// The wire name of a stop reason (`max_tokens`, `refusal`, ...).
pub(super) fn stop_reason_name(reason: v1::StopReason) -> String {
    match serde_json::to_value(reason) {
        Ok(serde_json::Value::String(name)) => name,
        _ => format!("{reason:?}"),
    }
}
