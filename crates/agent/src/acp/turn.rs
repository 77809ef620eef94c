//! The summarizer's agent: one process, one turn. `initialize` runs at start (so a prewarmed
//! agent has paid for it), then `session/new`, the requested model (the session's model
//! option, set only when it is not the current one), and `session/prompt` with [`NoTools`]:
//! any tool call ends the turn and kills the process group at once. After a successful turn
//! the session is released ([`crate::devin::sessions`]) while the process ends, in the
//! background.

use std::path::Path;
use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1;

use super::connection::millis;
use super::{AcpError, AgentConnection, AgentLimits, NoTools};
use crate::devin::options::{choose_model, ModelChoice};
use crate::devin::ClientIdentity;
use crate::process::Spec;

/// What a successful turn produced.
#[derive(Debug, Clone)]
pub struct TurnOutput {
    pub text: String,
    /// The token counts the agent reported for the turn, if any.
    pub usage: Option<super::ReportedUsage>,
    /// The model the agent says really ran (`_cognition.ai/agent_stopped` stats, or the
    /// `model` response dimension), if reported.
    pub observed_model: Option<String>,
    /// How the requested model was applied, with its display name when the agent gave one.
    pub model: ModelApplied,
    pub elapsed: Duration,
}

/// How a turn's requested model reached the agent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ModelApplied {
    /// No model was requested.
    #[default]
    NotRequested,
    /// Through the session's model option (set, or current already); `name` is the option's
    /// display name for it.
    Option { value: String, name: Option<String> },
    /// Through `--model` on the agent's command line (its session has no model option).
    CommandLine { value: String },
}

/// A spawned and initialized agent, ready for exactly one turn.
pub struct Agent {
    connection: AgentConnection,
    limits: AgentLimits,
    /// The model `--model` selected on the command line, if any.
    launched_model: Option<String>,
    pub started: Instant,
}

impl Agent {
    /// Spawns the agent and completes `initialize` (protocol 1 required, `client` as
    /// `clientInfo`).
    pub async fn start(
        spec: &Spec,
        limits: AgentLimits,
        client: &ClientIdentity,
    ) -> Result<Agent, AcpError> {
        Ok(Agent {
            connection: AgentConnection::start(spec, limits, client).await?,
            limits,
            launched_model: crate::devin::options::launched_model(&spec.args),
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
        self.run_turn_blocks(cwd, vec![v1::ContentBlock::from(prompt.to_owned())], None)
            .await
    }

    /// [`Agent::run_turn`] with any content blocks (text and images), answered by `model`
    /// (an ACP model id) when one is given. A session without a model option fails with
    /// [`AcpError::NoModelOption`] unless the agent was started with `--model` for it; a model
    /// the session does not offer fails with [`AcpError::ModelNotOffered`] before the prompt.
    pub async fn run_turn_blocks(
        mut self,
        cwd: &Path,
        blocks: Vec<v1::ContentBlock>,
        model: Option<&str>,
    ) -> Result<TurnOutput, AcpError> {
        let started = Instant::now();
        let limits = self.limits;
        let outcome =
            tokio::time::timeout(limits.turn_timeout, self.turn(cwd, blocks, model)).await;
        let mut session = None;
        let outcome = match outcome {
            Ok(Ok(turn)) => {
                session = Some(turn.session);
                Ok(TurnOutput {
                    text: turn.text,
                    usage: turn.usage,
                    observed_model: turn.observed_model,
                    model: turn.model,
                    elapsed: started.elapsed(),
                })
            }
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
        let mut connection = self.connection;
        tokio::spawn(async move {
            let pid = connection.pid();
            if let Some(session) = session {
                connection.release_session(&session).await;
            }
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
        model: Option<&str>,
    ) -> Result<Finished, AcpError> {
        let created = self.connection.new_session(cwd).await?;
        let session = created.session_id.0.to_string();
        let options = created.config_options.unwrap_or_default();
        let model = match model {
            None => ModelApplied::NotRequested,
            Some(wanted) => {
                apply_model(
                    &options,
                    wanted,
                    self.launched_model.as_deref(),
                    |config_id, value| {
                        let connection = &mut self.connection;
                        let session = session.clone();
                        async move {
                            connection
                                .set_config_option(&session, &config_id, &value)
                                .await
                                .map(drop)
                        }
                    },
                )
                .await?
            }
        };
        let outcome = self.connection.prompt(&session, blocks, &NoTools).await?;
        match outcome.stop_reason {
            v1::StopReason::EndTurn => Ok(Finished {
                session,
                text: outcome.text,
                observed_model: outcome
                    .stopped
                    .and_then(|stopped| stopped.model_label)
                    .or(outcome.turn_stats_model),
                usage: super::ReportedUsage::of_turn(outcome.usage.as_ref(), outcome.context_used),
                model,
            }),
            other => Err(AcpError::Stopped(stop_reason_name(other))),
        }
    }

    /// Ends an unused agent (pool drain).
    pub async fn close(self) {
        let _ = self.connection.shutdown().await;
    }
}

/// What a finished turn gathered.
struct Finished {
    session: String,
    text: String,
    observed_model: Option<String>,
    usage: Option<super::ReportedUsage>,
    model: ModelApplied,
}

/// Makes `wanted` the session's model: nothing when it is current, `set` (configId, value)
/// when the session offers it, the command line's `--model` when the session has no model
/// option and the process was started with that model. Shared by both summarizer transports.
pub async fn apply_model<F, Fut>(
    options: &[v1::SessionConfigOption],
    wanted: &str,
    launched: Option<&str>,
    set: F,
) -> Result<ModelApplied, AcpError>
where
    F: FnOnce(String, String) -> Fut,
    Fut: std::future::Future<Output = Result<(), AcpError>>,
{
    match choose_model(options, wanted) {
        ModelChoice::Current { value, name } => Ok(ModelApplied::Option {
            name: Some(name),
            value,
        }),
        ModelChoice::Set {
            config_id,
            value,
            name,
        } => {
            set(config_id, value.clone()).await?;
            Ok(ModelApplied::Option {
                name: Some(name),
                value,
            })
        }
        ModelChoice::NoOption => match launched {
            Some(launched)
                if crate::devin::options::normalize_id(launched)
                    == crate::devin::options::normalize_id(wanted) =>
            {
                Ok(ModelApplied::CommandLine {
                    value: launched.to_owned(),
                })
            }
            _ => Err(AcpError::NoModelOption),
        },
        ModelChoice::NotOffered { offered } => Err(AcpError::ModelNotOffered {
            model: wanted.chars().take(200).collect(),
            offered,
        }),
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
