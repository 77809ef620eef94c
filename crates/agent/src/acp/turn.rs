//! The summarizer's agent: one process, one turn. `initialize` runs at start (so a prewarmed
//! agent has paid for it), then `session/new`, the requested model and effort (see
//! [`apply_model_and_effort`]), and `session/prompt` with [`NoTools`]: any tool call ends the
//! turn and kills the process group at once. After a successful turn the session is released
//! ([`crate::devin::sessions`]) while the process ends, in the background.
//!
//! Model and effort are applied the same way on both summarizer transports: an effort the
//! model has a variant for (`swe-2` at `high` is `swe-2-high`) replaces the model set on the
//! session; otherwise the model is set (only when it is not the current one), then the
//! session's `thought_level` option (only when it is not at that level already). An effort the
//! session offers no way to run at, or that is not one of
//! [`EFFORT_LEVELS`](crate::devin::options::EFFORT_LEVELS), is ignored (a debug line names it
//! and what the model offers): the turn runs at the model's own level and never fails for it.

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1;

use super::connection::millis;
use super::{AcpError, AgentConnection, AgentLimits, NoTools, SharedAgent};
use crate::devin::options::{
    choose_effort, choose_model, is_effort_level, normalize_id, offered_efforts, EffortChoice,
    ModelChoice, Select,
};
use crate::devin::ClientIdentity;
use crate::process::Spec;

/// What a successful turn produced.
#[derive(Debug, Clone)]
pub struct TurnOutput {
    pub text: String,
    /// The token counts the agent reported for the turn, if any (their source says whether
    /// they cover the whole turn).
    pub usage: Option<super::ReportedUsage>,
    /// The model the agent says really ran (`_cognition.ai/agent_stopped` stats, or the
    /// `model` response dimension), if reported: a display label.
    pub observed_model: Option<String>,
    /// Display-only message chunks the agent sent (its status lines), kept out of `text`.
    pub display_messages: u32,
    /// Times the agent compacted the session's context during the turn.
    pub compactions: u32,
    /// How the requested model was applied, with its display name when the agent gave one.
    pub model: ModelApplied,
    /// How the requested effort was applied.
    pub effort: EffortApplied,
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

/// How a turn's requested effort reached the agent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EffortApplied {
    /// No effort was requested.
    #[default]
    NotRequested,
    /// The session's `thought_level` option is at `value` (set, or at it already).
    ThoughtLevel { value: String },
    /// The model's effort variant `value` (`swe-2-high`) was set in place of the model.
    Variant { value: String },
    /// The session offers no way to run at the effort, or it is not an effort level: the turn
    /// ran at the model's own level.
    Ignored,
}

impl EffortApplied {
    /// A short name for metrics and logs: `none`, `thought_level`, `variant` or `ignored`.
    pub fn label(&self) -> &'static str {
        match self {
            EffortApplied::NotRequested => "none",
            EffortApplied::ThoughtLevel { .. } => "thought_level",
            EffortApplied::Variant { .. } => "variant",
            EffortApplied::Ignored => "ignored",
        }
    }
}

/// What a session's model and effort came to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Applied {
    pub model: ModelApplied,
    pub effort: EffortApplied,
}

/// A session whose config options can be set (`session/set_config_option`); the answer is the
/// session's options after the change.
pub trait SessionOptions {
    fn set_option(
        &mut self,
        config_id: &str,
        value: &str,
    ) -> impl Future<Output = Result<Vec<v1::SessionConfigOption>, AcpError>> + Send;
}

/// A session on an agent process that serves one turn.
struct OnConnection<'a> {
    connection: &'a mut AgentConnection,
    session: &'a str,
}

impl SessionOptions for OnConnection<'_> {
    fn set_option(
        &mut self,
        config_id: &str,
        value: &str,
    ) -> impl Future<Output = Result<Vec<v1::SessionConfigOption>, AcpError>> + Send {
        self.connection
            .set_config_option(self.session, config_id, value)
    }
}

/// A session on a resident agent process (one of several it serves).
pub struct OnSharedAgent<'a> {
    pub agent: &'a SharedAgent,
    pub session: &'a str,
}

impl SessionOptions for OnSharedAgent<'_> {
    fn set_option(
        &mut self,
        config_id: &str,
        value: &str,
    ) -> impl Future<Output = Result<Vec<v1::SessionConfigOption>, AcpError>> + Send {
        self.agent.set_config_option(self.session, config_id, value)
    }
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

    /// The model `--model` selected on its command line, if any.
    pub fn launched_model(&self) -> Option<&str> {
        self.launched_model.as_deref()
    }

    /// Whether the process is still running (a prewarmed agent may have died while waiting).
    pub fn is_alive(&mut self) -> bool {
        self.connection.is_alive()
    }

    /// Runs one turn in a new session, all of it within the turn timeout. The process is ended
    /// in the background (close stdin, a moment to exit, SIGTERM, grace, SIGKILL, reap) so the
    /// answer is not delayed by it.
    pub async fn run_turn(self, cwd: &Path, prompt: &str) -> Result<TurnOutput, AcpError> {
        self.run_turn_blocks(
            cwd,
            vec![v1::ContentBlock::from(prompt.to_owned())],
            None,
            None,
        )
        .await
    }

    /// [`Agent::run_turn`] with any content blocks (text and images), answered by `model`
    /// (an ACP model id) when one is given, at `effort` (`low`, `high`, ...) when the session
    /// offers it (see [`apply_model_and_effort`]). A session without a model option fails with
    /// [`AcpError::NoModelOption`] unless the agent was started with `--model` for it; a model
    /// the session does not offer fails with [`AcpError::ModelNotOffered`] before the prompt.
    pub async fn run_turn_blocks(
        self,
        cwd: &Path,
        blocks: Vec<v1::ContentBlock>,
        model: Option<&str>,
        effort: Option<&str>,
    ) -> Result<TurnOutput, AcpError> {
        self.run_turn_observed(cwd, blocks, model, effort, None)
            .await
    }

    /// [`Agent::run_turn_blocks`], with each chunk of the reply's text also sent to `chunks`
    /// as it arrives (see [`super::ChunkSink`]).
    pub async fn run_turn_observed(
        mut self,
        cwd: &Path,
        blocks: Vec<v1::ContentBlock>,
        model: Option<&str>,
        effort: Option<&str>,
        chunks: Option<super::ChunkSink>,
    ) -> Result<TurnOutput, AcpError> {
        let started = Instant::now();
        let limits = self.limits;
        let outcome = tokio::time::timeout(
            limits.turn_timeout,
            self.turn(cwd, blocks, model, effort, chunks),
        )
        .await;
        let mut session = None;
        let outcome = match outcome {
            Ok(Ok(turn)) => {
                session = Some(turn.session);
                Ok(TurnOutput {
                    text: turn.text,
                    usage: turn.usage,
                    observed_model: turn.observed_model,
                    display_messages: turn.display_messages,
                    compactions: turn.compactions,
                    model: turn.applied.model,
                    effort: turn.applied.effort,
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
        // A session without a model option is an answer, not a failure: the caller starts an
        // agent with `--model` instead.
        let failure = outcome
            .as_ref()
            .err()
            .filter(|error| !matches!(error, AcpError::NoModelOption))
            .map(|error| {
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
        effort: Option<&str>,
        chunks: Option<super::ChunkSink>,
    ) -> Result<Finished, AcpError> {
        let created = self.connection.new_session(cwd).await?;
        let session = created.session_id.0.to_string();
        let mut options = created.config_options.unwrap_or_default();
        let applied = apply_model_and_effort(
            &mut options,
            model,
            effort,
            self.launched_model.as_deref(),
            &mut OnConnection {
                connection: &mut self.connection,
                session: &session,
            },
        )
        .await?;
        let outcome = self
            .connection
            .prompt_observed(&session, blocks, &NoTools, chunks)
            .await?;
        match outcome.stop_reason {
            v1::StopReason::EndTurn => Ok(Finished {
                session,
                observed_model: outcome.observed_model(),
                usage: outcome.reported_usage(),
                display_messages: outcome.account.display_messages,
                compactions: outcome.account.compactions,
                text: outcome.text,
                applied,
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
    display_messages: u32,
    compactions: u32,
    applied: Applied,
}

/// Runs `session` on `wanted` (an ACP model id) at `effort`, given its `options` (kept up to
/// date with every change made here); shared by both summarizer transports. An effort the
/// model has a variant for makes the variant the model to set. The model is set only when it is
/// not the current one (or, for a session without a model option, must be the one the process
/// was `launched` with). Then the effort, unless a variant carried it: the `thought_level`
/// option is set when it is not at that level already; an effort the session offers no way
/// to run at is ignored with a debug line, and so is an option the agent refuses to set.
/// Without `wanted`, the effort applies to the session's current model.
pub async fn apply_model_and_effort<S: SessionOptions>(
    options: &mut Vec<v1::SessionConfigOption>,
    wanted: Option<&str>,
    effort: Option<&str>,
    launched: Option<&str>,
    session: &mut S,
) -> Result<Applied, AcpError> {
    let current_model = |options: &[v1::SessionConfigOption]| {
        Select::model(options)
            .and_then(|select| select.current)
            .or_else(|| launched.map(str::to_owned))
    };
    let base = wanted
        .map(str::to_owned)
        .or_else(|| current_model(options))
        .unwrap_or_default();
    let level = effort.filter(|effort| is_effort_level(effort));
    let mut applied = Applied::default();
    let mut target = wanted.map(str::to_owned);
    if let Some(level) = level {
        if let EffortChoice::Variant { value, .. } = choose_effort(options, &base, level) {
            target = Some(value.clone());
            applied.effort = EffortApplied::Variant { value };
        }
    }
    if let Some(target) = &target {
        applied.model = apply_model(options, target, launched, session).await?;
    }
    let Some(effort) = effort else {
        return Ok(applied);
    };
    if applied.effort != EffortApplied::NotRequested {
        return Ok(applied);
    }
    // The model the session runs now: its thought levels may differ from the first model's.
    let model = match &applied.model {
        ModelApplied::Option { value, .. } | ModelApplied::CommandLine { value } => value.clone(),
        ModelApplied::NotRequested => base,
    };
    let ignored = |offered: Vec<String>| {
        tracing::debug!(
            effort,
            model,
            ?offered,
            "the requested effort is not one the session offers; the turn runs at the model's own level"
        );
        EffortApplied::Ignored
    };
    let Some(level) = level else {
        applied.effort = ignored(offered_efforts(options, &model));
        return Ok(applied);
    };
    applied.effort = match choose_effort(options, &model, level) {
        EffortChoice::ThoughtLevel { config_id, value } => {
            let current = Select::thought_level(options).and_then(|select| select.current);
            if current.is_some_and(|current| normalize_id(&current) == normalize_id(&value)) {
                EffortApplied::ThoughtLevel { value }
            } else {
                match session.set_option(&config_id, &value).await {
                    Ok(updated) => {
                        *options = updated;
                        EffortApplied::ThoughtLevel { value }
                    }
                    Err(AcpError::Rpc { code, .. }) => {
                        tracing::debug!(
                            effort,
                            model,
                            code,
                            "the agent refused the thought level; the turn runs at the model's own level"
                        );
                        EffortApplied::Ignored
                    }
                    Err(error) => return Err(error),
                }
            }
        }
        // The model set above has no thought levels but a variant for the effort.
        EffortChoice::Variant { value, .. } => {
            applied.model = apply_model(options, &value, launched, session).await?;
            EffortApplied::Variant { value }
        }
        EffortChoice::Unavailable { offered } => ignored(offered),
    };
    Ok(applied)
}

/// Makes `wanted` the session's model: nothing when it is current, `session/set_config_option`
/// when the session offers it (`options` then become the agent's answer), the command line's
/// `--model` when the session has no model option and the process was started with that model.
async fn apply_model<S: SessionOptions>(
    options: &mut Vec<v1::SessionConfigOption>,
    wanted: &str,
    launched: Option<&str>,
    session: &mut S,
) -> Result<ModelApplied, AcpError> {
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
            *options = session.set_option(&config_id, &value).await?;
            Ok(ModelApplied::Option {
                name: Some(name),
                value,
            })
        }
        ModelChoice::NoOption => match launched {
            Some(launched) if normalize_id(launched) == normalize_id(wanted) => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A session as the Devin CLI shapes it: a model select of `models`, and a `thought_level`
    /// select (`low`, `medium`, `high`) when `levels` is on. Records every option set.
    struct FakeSession {
        models: Vec<&'static str>,
        model: String,
        levels: bool,
        thought_level: String,
        /// `thought_level` is refused (-32602) when set.
        refuse_levels: bool,
        sets: Vec<(String, String)>,
    }

    impl FakeSession {
        fn new(models: &[&'static str], levels: bool) -> Self {
            Self {
                models: models.to_vec(),
                model: models[0].to_owned(),
                levels,
                thought_level: "medium".into(),
                refuse_levels: false,
                sets: Vec::new(),
            }
        }

        fn options(&self) -> Vec<v1::SessionConfigOption> {
            let mut options = vec![json!({
                "id": "model", "name": "Model", "category": "model", "type": "select",
                "currentValue": self.model,
                "options": self.models.iter().map(|m| json!({"value": m, "name": m.to_uppercase()})).collect::<Vec<Value>>(),
            })];
            if self.levels {
                options.push(json!({
                    "id": "thought_level", "name": "Thought level", "category": "thought_level",
                    "type": "select", "currentValue": self.thought_level,
                    "options": [{"value": "low", "name": "Low"}, {"value": "medium", "name": "Medium"},
                                {"value": "high", "name": "High"}],
                }));
            }
            serde_json::from_value(Value::Array(options)).expect("options")
        }
    }

    impl SessionOptions for FakeSession {
        fn set_option(
            &mut self,
            config_id: &str,
            value: &str,
        ) -> impl Future<Output = Result<Vec<v1::SessionConfigOption>, AcpError>> + Send {
            self.sets.push((config_id.to_owned(), value.to_owned()));
            let result = match config_id {
                "model" => {
                    self.model = value.to_owned();
                    Ok(self.options())
                }
                "thought_level" if !self.refuse_levels => {
                    self.thought_level = value.to_owned();
                    Ok(self.options())
                }
                _ => Err(AcpError::Rpc {
                    code: -32602,
                    message: "Invalid params".into(),
                    kind: None,
                    retryable: false,
                    retry_after: None,
                }),
            };
            std::future::ready(result)
        }
    }

    async fn apply(
        session: &mut FakeSession,
        wanted: Option<&str>,
        effort: Option<&str>,
    ) -> Result<Applied, AcpError> {
        let mut options = session.options();
        apply_model_and_effort(&mut options, wanted, effort, None, session).await
    }

    fn set(config_id: &str, value: &str) -> (String, String) {
        (config_id.to_owned(), value.to_owned())
    }

    #[tokio::test]
    async fn a_thought_level_is_set_after_the_model_and_only_when_it_differs() {
        let mut session = FakeSession::new(&["swe-1-7", "swe-2"], true);
        let applied = apply(&mut session, Some("swe-2"), Some("high"))
            .await
            .expect("applied");
        assert_eq!(
            applied.effort,
            EffortApplied::ThoughtLevel {
                value: "high".into()
            }
        );
        assert_eq!(
            applied.model,
            ModelApplied::Option {
                value: "swe-2".into(),
                name: Some("SWE-2".into())
            }
        );
        assert_eq!(
            session.sets,
            [set("model", "swe-2"), set("thought_level", "high")]
        );
        // At that level already (medium is the session's start): nothing is set.
        let mut session = FakeSession::new(&["swe-1-7"], true);
        let applied = apply(&mut session, Some("swe-1-7"), Some("Medium"))
            .await
            .expect("applied");
        assert_eq!(
            applied.effort,
            EffortApplied::ThoughtLevel {
                value: "medium".into()
            }
        );
        assert!(session.sets.is_empty(), "{:?}", session.sets);
    }

    #[tokio::test]
    async fn a_variant_replaces_the_model_set_on_the_session() {
        let mut session = FakeSession::new(&["swe-1-7", "swe-2", "swe-2-high"], false);
        let applied = apply(&mut session, Some("swe-2"), Some("high"))
            .await
            .expect("applied");
        assert_eq!(
            applied.effort,
            EffortApplied::Variant {
                value: "swe-2-high".into()
            }
        );
        assert_eq!(
            applied.model,
            ModelApplied::Option {
                value: "swe-2-high".into(),
                name: Some("SWE-2-HIGH".into())
            }
        );
        assert_eq!(
            session.sets,
            [set("model", "swe-2-high")],
            "one set, the variant"
        );
    }

    #[tokio::test]
    async fn an_effort_the_session_cannot_run_at_is_ignored_and_the_turn_goes_on() {
        // No variant for `low`, no thought levels: the model alone.
        let mut session = FakeSession::new(&["swe-1-7", "swe-2", "swe-2-high"], false);
        let applied = apply(&mut session, Some("swe-2"), Some("low"))
            .await
            .expect("applied");
        assert_eq!(applied.effort, EffortApplied::Ignored);
        assert_eq!(session.sets, [set("model", "swe-2")]);
        // Not an effort level, even where a variant or a level of that name exists.
        for unknown in ["turbo", "fast", ""] {
            let mut session = FakeSession::new(&["swe-2", "swe-2-fast", "swe-2-turbo"], true);
            let applied = apply(&mut session, Some("swe-2"), Some(unknown))
                .await
                .expect("applied");
            assert_eq!(applied.effort, EffortApplied::Ignored, "{unknown}");
            assert!(session.sets.is_empty(), "{unknown}: {:?}", session.sets);
        }
        // A level the thought_level option lacks.
        let mut session = FakeSession::new(&["swe-2"], true);
        let applied = apply(&mut session, Some("swe-2"), Some("xhigh"))
            .await
            .expect("applied");
        assert_eq!(applied.effort, EffortApplied::Ignored);
        assert!(session.sets.is_empty());
        // A thought level the agent refuses to set.
        let mut session = FakeSession::new(&["swe-2"], true);
        session.refuse_levels = true;
        let applied = apply(&mut session, Some("swe-2"), Some("high"))
            .await
            .expect("a refused level fails nothing");
        assert_eq!(applied.effort, EffortApplied::Ignored);
        assert_eq!(session.sets, [set("thought_level", "high")]);
    }

    #[tokio::test]
    async fn without_an_effort_only_the_model_is_applied() {
        let mut session = FakeSession::new(&["swe-1-7", "swe-2", "swe-2-high"], true);
        let applied = apply(&mut session, Some("swe-2"), None)
            .await
            .expect("applied");
        assert_eq!(applied.effort, EffortApplied::NotRequested);
        assert_eq!(session.sets, [set("model", "swe-2")]);
        let applied = apply(&mut session, None, None).await.expect("applied");
        assert_eq!(applied, Applied::default());
        // No model requested: the effort applies to the current one.
        let mut session = FakeSession::new(&["swe-2", "swe-2-high"], false);
        let applied = apply(&mut session, None, Some("high"))
            .await
            .expect("applied");
        assert_eq!(
            applied.effort,
            EffortApplied::Variant {
                value: "swe-2-high".into()
            }
        );
        assert_eq!(session.sets, [set("model", "swe-2-high")]);
    }

    #[tokio::test]
    async fn model_failures_still_fail() {
        let mut session = FakeSession::new(&["swe-2"], true);
        let error = apply(&mut session, Some("kimi-k3"), Some("high"))
            .await
            .expect_err("not offered");
        assert!(
            matches!(error, AcpError::ModelNotOffered { .. }),
            "{error:?}"
        );
        assert!(session.sets.is_empty());
    }

    #[test]
    fn effort_labels_are_the_metric_values() {
        assert_eq!(EffortApplied::NotRequested.label(), "none");
        assert_eq!(
            EffortApplied::ThoughtLevel { value: "x".into() }.label(),
            "thought_level"
        );
        assert_eq!(
            EffortApplied::Variant { value: "x".into() }.label(),
            "variant"
        );
        assert_eq!(EffortApplied::Ignored.label(), "ignored");
    }
}
