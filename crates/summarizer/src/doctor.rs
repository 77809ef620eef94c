//! `devin-bridge doctor`: proves a summarizer policy's agent works with a real account, in one
//! command, and writes evidence a user can attach to a bug report.
//!
//! The agent runs exactly as `serve` runs it: the same command and arguments, private home,
//! allowlisted environment, user, client identity and headless login. Each check is one line
//! with what was seen and, when it failed, what to change:
//!
//! 0. `identity` (a warning): the agent shares the host's identity, with the fix.
//! 1. `cli`: `<agent> --version` answers: the CLI's version (`initialize`'s `agentInfo` names
//!    the agent program, `affogato 0.0.0-dev` for every Devin CLI).
//! 2. `initialize`: protocol 1, the auth methods (the Devin CLI's `devin-browser`), session
//!    capabilities (how sessions are released), image prompts.
//! 3. `session`: `session/new` (signing in once with the API key when the agent has no stored
//!    login) and the ids of the session's options.
//! 4. `models`: the session's model option against the policy's catalog (or, without one,
//!    the `--model` of the agent's command line).
//! 5. `prompt` (with `--prompt`): one short prompt on a catalog model, which proves that the
//!    service accepts the client identity and shows which model answered. The prompt is a
//!    one-message request put through the policy's serializer, as a turn would be.
//! 6. `dialect`: which facts of the Devin dialect the exchange showed (`devin::observed`):
//!    `agentInfo`, which logged-out variant, where the model label was found, stop reasons,
//!    `agent_stopped` causes, error codes and kinds, display-only chunks, compaction notices.
//! 7. `record` (with `--record FILE`): the exchange written as a trace, redacted as it was
//!    recorded (`devin_bridge_agent::transcript`), mode 0600, whatever the checks found.
//!
//! The evidence holds no secret: no environment values, no API key, no prompt beyond the
//! fixed probe text. Agent error text is bounded and has its control characters escaped.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use agent_client_protocol_schema::v1::SessionConfigOption;
use devin_bridge_agent::acp::{AcpError, AgentConnection, AgentLimits, NoTools};
use devin_bridge_agent::devin::observed::Observed;
use devin_bridge_agent::devin::options::{choose_model, ModelChoice, Select};
use devin_bridge_agent::devin::sessions::Release;
use devin_bridge_agent::devin::stats::names_model;
use devin_bridge_agent::devin::ClientIdentity;
use devin_bridge_agent::identity::AgentIdentity;
use devin_bridge_agent::process::Spec;
use devin_bridge_agent::transcript::{Header, Recorder, Redactor};
use devin_bridge_engine::{TransformCalls as _, Transforms};
use devin_bridge_policy::ModePolicy;

use crate::policy::SummarizerPolicy;

/// The prompt `--prompt` sends: short, and harmless on any account.
pub const PROBE_PROMPT: &str =
    "This is a connectivity check from devin-bridge doctor. Reply with the single word: ok";
/// The `/v1/models` id prefix of the bridge's models.
const MODEL_PREFIX: &str = "devin-cli-agentic/";
/// Longest detail quoted from the agent (characters).
const MAX_DETAIL_CHARS: usize = 300;

/// One check's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    /// What was seen.
    pub detail: String,
    /// What to change, when the check failed (or warns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// Everything `doctor` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub ok: bool,
    pub bridge_version: &'static str,
    pub policy: String,
    pub agent_command: String,
    pub agent_args: Vec<String>,
    pub client: String,
    /// The CLI's own `--version` answer (its `initialize` names another program and version).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cli_version: Option<String>,
    pub checks: Vec<Check>,
    /// Which facts of the Devin dialect the exchange showed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dialect: Option<Observed>,
    /// The trace written with `--record`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    pub elapsed_ms: u64,
}

impl Report {
    /// One line per check (`ok`, `warn` for a passing check with a fix, `FAIL`), then the fix
    /// of each failed or warning one.
    pub fn human(&self) -> String {
        let mut out = format!(
            "devin-bridge {} doctor: policy {}\nagent {} {} (client {})\n",
            self.bridge_version,
            self.policy,
            self.agent_command,
            self.agent_args.join(" "),
            self.client
        );
        for check in &self.checks {
            let mark = match (check.ok, &check.fix) {
                (true, None) => "ok  ",
                (true, Some(_)) => "warn",
                (false, _) => "FAIL",
            };
            out.push_str(&format!("{mark} {:<10} {}\n", check.name, check.detail));
            if let Some(fix) = &check.fix {
                out.push_str(&format!("     {:<10} fix: {fix}\n", ""));
            }
        }
        out.push_str(if self.ok {
            "everything checked works\n"
        } else {
            "problems found: see the fix lines above\n"
        });
        out
    }
}

/// What a run of `doctor` does.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Send one short prompt (uses the account).
    pub prompt: bool,
    /// Write the exchange with the agent to this file as a trace (redacted, mode 0600).
    pub record: Option<PathBuf>,
    /// The agent shares the host's identity, and why (from establishing identities).
    pub identity_notice: Option<String>,
}

/// Runs every check on `policy`'s agent. The exchange is recorded (redacted as it happens)
/// for the dialect facts, and written to `options.record` when asked, whatever the checks
/// found.
pub async fn run(
    policy: &SummarizerPolicy,
    policy_name: String,
    identity: &AgentIdentity,
    options: Options,
) -> Report {
    let started = Instant::now();
    let client = policy.agent.client_identity();
    let mut report = Report {
        ok: false,
        bridge_version: env!("CARGO_PKG_VERSION"),
        policy: policy_name,
        agent_command: policy.agent.command.clone(),
        agent_args: policy.agent.args.clone(),
        client: client
            .as_ref()
            .map_or_else(|error| format!("invalid: {error}"), ToString::to_string),
        cli_version: None,
        checks: Vec::new(),
        dialect: None,
        trace: None,
        elapsed_ms: 0,
    };
    let mut checks = Vec::new();
    if let Some(notice) = &options.identity_notice {
        checks.push(warn(
            "identity",
            notice.clone(),
            "create a dedicated user for the agent and set [agent] user to it (the host then needs CAP_SETUID and CAP_SETGID, or start it as root with [server] user set)",
        ));
    }
    let recorder = std::sync::OnceLock::new();
    agent_checks(
        policy,
        identity,
        &options,
        &mut report,
        &mut checks,
        &recorder,
    )
    .await;
    if let Some(recorder) = recorder.get() {
        let observed = Observed::of(&recorder.entries());
        checks.push(pass("dialect", dialect_detail(&observed)));
        report.dialect = Some(observed);
        if let Some(path) = &options.record {
            let header = Header::new(
                format!("devin-bridge {} doctor", env!("CARGO_PKG_VERSION")),
                report.cli_version.clone(),
            );
            match recorder.write(path, header) {
                Ok(()) => {
                    report.trace = Some(path.display().to_string());
                    checks.push(pass(
                        "record",
                        format!(
                            "the exchange, redacted, is in {} (mode 0600)",
                            path.display()
                        ),
                    ));
                }
                Err(error) => checks.push(fail(
                    "record",
                    error.to_string(),
                    "give --record a file in a directory you can write to",
                )),
            }
        }
    } else if let Some(path) = &options.record {
        checks.push(fail(
            "record",
            format!(
                "nothing was recorded in {}: the agent was never started",
                path.display()
            ),
            "fix the checks above first",
        ));
    }
    report.ok = checks.iter().all(|check| check.ok);
    report.checks = checks;
    report.elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    report
}

/// The dialect facts in one line.
fn dialect_detail(observed: &Observed) -> String {
    let summary = observed.summary();
    if summary.is_empty() {
        "nothing of the Devin dialect was seen".to_owned()
    } else {
        summary.join("; ")
    }
}

/// The checks that run the agent, in order, until one fails. `recorder` is set once the agent
/// is about to start.
async fn agent_checks(
    policy: &SummarizerPolicy,
    identity: &AgentIdentity,
    options: &Options,
    report: &mut Report,
    checks: &mut Vec<Check>,
    recorder: &std::sync::OnceLock<Recorder>,
) {
    let ran = async {
        let (client, spec) = agent_setup(policy, identity)?;
        report.agent_command = spec.program.display().to_string();
        checks.push(cli_check(&spec, report).await?);
        let recorder = recorder.get_or_init(|| Recorder::new(Redactor::for_spec(&spec)));
        let connection = start_agent(policy, &spec, &client, recorder).await?;
        checks.push(initialize_check(connection.initialize_response()));
        let (mut connection, session, options_now) =
            open_session(connection, &spec, policy).await?;
        checks.push(session_check(connection.signed_in(), &options_now));
        let transforms = load_transforms(policy).await;
        let catalog = match &transforms {
            Ok(transforms) => catalog_ids(policy, transforms.clone()).await,
            Err(error) => Err(error.clone()),
        };
        let launched = devin_bridge_agent::devin::options::launched_model(&spec.args);
        let (models_check, chosen) = models_check(&options_now, &catalog, launched.as_deref());
        checks.push(models_check);
        if options.prompt {
            let check = match &transforms {
                Ok(transforms) => {
                    let model = chosen.as_deref();
                    let transforms = transforms.clone();
                    prompt_check(&mut connection, transforms, &session, &options_now, model).await
                }
                Err(error) => fail(
                    "prompt",
                    format!("the policy's components could not be loaded: {error}"),
                    "fix the [components] section, or build a binary that carries them (cargo xtask build)",
                ),
            };
            checks.push(check);
        }
        connection.release_session(&session).await;
        let _ = connection.close(Duration::from_millis(500)).await;
        Ok::<(), Check>(())
    };
    if let Err(failed) = ran.await {
        checks.push(failed);
    }
}

/// The policy's client identity and the agent's command as `serve` runs it; a failing
/// `policy` check when either is wrong.
fn agent_setup(
    policy: &SummarizerPolicy,
    identity: &AgentIdentity,
) -> Result<(ClientIdentity, Spec), Check> {
    let client = policy.agent.client_identity().map_err(|error| {
        fail(
            "policy",
            format!("agent.{error}"),
            "set [agent] client_name and client_version (or remove them for the default windsurf 1.110.1)",
        )
    })?;
    let spec = crate::sandbox::agent_spec(policy, identity).map_err(|error| {
        fail(
            "policy",
            error.to_string(),
            "fix the [agent] section (command, home, user) as the message says",
        )
    })?;
    Ok((client, spec))
}

/// `cli`: the CLI's own version (its `initialize` answer names the agent program, not the
/// CLI), kept in the report.
async fn cli_check(spec: &Spec, report: &mut Report) -> Result<Check, Check> {
    match crate::sandbox::agent_version(spec).await {
        Ok(version) => {
            report.cli_version = Some(version.clone());
            Ok(pass("cli", format!("{version} (from --version)")))
        }
        Err(error) => Err(fail(
            "cli",
            format!("`{} --version` failed: {error:#}", spec.program.display()),
            "install the Devin CLI, or point [agent] command (or DEVIN_BIN) at it",
        )),
    }
}

/// Starts the agent with the policy's limits, its exchange recorded; a failing `initialize`
/// check when it does not answer as an ACP agent.
async fn start_agent(
    policy: &SummarizerPolicy,
    spec: &Spec,
    client: &ClientIdentity,
    recorder: &Recorder,
) -> Result<AgentConnection, Check> {
    let limits = AgentLimits {
        init_timeout: Duration::from_millis(policy.agent.init_timeout_ms),
        turn_timeout: Duration::from_millis(policy.agent.turn_timeout_ms),
        output_cap: policy.agent.output_cap_bytes,
        stopped_wait: Duration::ZERO,
    };
    AgentConnection::start_recorded(spec, limits, client, Some(recorder.clone()))
        .await
        .map_err(|error| {
            fail(
                "initialize",
                describe(&error),
                "run the agent's command by hand with the policy's arguments; it must speak ACP version 1 on stdio",
            )
        })
}

/// `session/new` in the agent's working directory: the session's id and its options; a
/// failing `session` check (the agent closed) when it is refused.
async fn open_session(
    mut connection: AgentConnection,
    spec: &Spec,
    policy: &SummarizerPolicy,
) -> Result<(AgentConnection, String, Vec<SessionConfigOption>), Check> {
    match connection.new_session(&spec.cwd).await {
        Ok(created) => Ok((
            connection,
            created.session_id.0.to_string(),
            created.config_options.unwrap_or_default(),
        )),
        Err(error) => {
            let failed = fail("session", describe(&error), &session_fix(&error, policy));
            let _ = connection.close(Duration::from_millis(200)).await;
            Err(failed)
        }
    }
}

/// `session`: how the session was had (signed in, or the home was logged in) and the ids of
/// its options.
fn session_check(signed_in: bool, options: &[SessionConfigOption]) -> Check {
    let option_ids: Vec<String> = options
        .iter()
        .map(|option| option.id.0.chars().take(64).collect())
        .collect();
    pass(
        "session",
        format!(
            "session/new answered{}; session options [{}]",
            if signed_in {
                " after signing in with the API key (devin-browser)"
            } else {
                " (the agent's home is logged in)"
            },
            option_ids.join(", ")
        ),
    )
}

fn pass(name: &'static str, detail: impl Into<String>) -> Check {
    Check {
        name,
        ok: true,
        detail: detail.into(),
        fix: None,
    }
}

/// A check that passes with something worth changing.
fn warn(name: &'static str, detail: impl Into<String>, fix: &str) -> Check {
    Check {
        name,
        ok: true,
        detail: detail.into(),
        fix: Some(fix.to_owned()),
    }
}

fn fail(name: &'static str, detail: impl Into<String>, fix: &str) -> Check {
    Check {
        name,
        ok: false,
        detail: detail.into(),
        fix: Some(fix.to_owned()),
    }
}

/// An agent failure in words, with the agent's own text (bounded, escaped) when it gave any.
fn describe(error: &AcpError) -> String {
    let mut text = format!("{} ({})", error, error.code());
    if let AcpError::Rpc { message, kind, .. } = error {
        let quoted: String = message.escape_debug().take(MAX_DETAIL_CHARS).collect();
        text.push_str(&format!(": agent said \"{quoted}\""));
        if let Some(kind) = kind {
            text.push_str(&format!(" (kind {kind})"));
        }
    }
    text
}

fn initialize_check(initialized: &agent_client_protocol_schema::v1::InitializeResponse) -> Check {
    let value = serde_json::to_value(initialized).unwrap_or_default();
    let methods: Vec<String> = value
        .get("authMethods")
        .and_then(serde_json::Value::as_array)
        .map(|methods| {
            methods
                .iter()
                .filter_map(|method| method.get("id").and_then(serde_json::Value::as_str))
                .map(|id| id.chars().take(64).collect())
                .collect()
        })
        .unwrap_or_default();
    let agent = value
        .pointer("/agentInfo/name")
        .and_then(serde_json::Value::as_str)
        .map(|name| {
            let version = value
                .pointer("/agentInfo/version")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("?");
            format!("agentInfo {name} {version} (the agent program, not the CLI version), ")
        })
        .unwrap_or_default();
    let release = match Release::of(initialized) {
        Release::Close => "session/close",
        Release::Delete => "session/delete",
        Release::Keep => "none (sessions are kept)",
    };
    let detail = format!(
        "{agent}protocol 1; auth methods [{}]; releases sessions with {release}; image prompts {}",
        methods.join(", "),
        if initialized.agent_capabilities.prompt_capabilities.image {
            "yes"
        } else {
            "no"
        }
    );
    pass("initialize", detail)
}

fn session_fix(error: &AcpError, policy: &SummarizerPolicy) -> String {
    match error {
        AcpError::Unauthenticated => format!(
            "log the agent's home in once (as the agent's user: HOME={} devin auth login), or pass the account's key: WINDSURF_API_KEY in the bridge's environment and \"WINDSURF_API_KEY\" in [agent] pass_env",
            policy.resolve(&policy.agent.home).display()
        ),
        AcpError::Timeout(_) => "raise [agent] init_timeout_ms, or check the agent's network (proxy)".into(),
        _ => "run the agent by hand in its home and read its stderr".into(),
    }
}

/// The policy's transform components, as `serve` loads them.
async fn load_transforms(policy: &SummarizerPolicy) -> Result<std::sync::Arc<Transforms>, String> {
    let engine = policy.engine_config();
    tokio::task::spawn_blocking(move || {
        Transforms::load(&engine).map_err(|error| error.to_string())
    })
    .await
    .map_err(|error| error.to_string())?
    .map(std::sync::Arc::new)
}

/// The ACP ids of the catalog the policy validates requests against, in its order.
async fn catalog_ids(
    policy: &SummarizerPolicy,
    transforms: std::sync::Arc<Transforms>,
) -> Result<Vec<String>, String> {
    let catalog = match &policy.models.catalog {
        Some(file) => {
            let path = policy.resolve(file);
            std::fs::read_to_string(&path)
                .map_err(|error| format!("cannot read the catalog {}: {error}", path.display()))?
        }
        None => devin_bridge_policy::BUILTIN_CATALOG.to_owned(),
    };
    let listing = tokio::task::spawn_blocking(move || {
        transforms
            .list_models(catalog, false)
            .map_err(|error| error.to_string())?
            .map_err(|failure| failure.message)
    })
    .await
    .map_err(|error| error.to_string())??;
    let listing: serde_json::Value =
        serde_json::from_str(&listing).map_err(|error| error.to_string())?;
    Ok(listing
        .get("data")
        .and_then(serde_json::Value::as_array)
        .map(|cards| {
            cards
                .iter()
                .filter_map(|card| card.get("id").and_then(serde_json::Value::as_str))
                .filter_map(|id| id.strip_prefix(MODEL_PREFIX))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default())
}

/// The session's model option against the catalog; the catalog model a prompt would use (or,
/// for a session without a model option, the `launched` one of the agent's `--model`).
fn models_check(
    options: &[agent_client_protocol_schema::v1::SessionConfigOption],
    catalog: &Result<Vec<String>, String>,
    launched: Option<&str>,
) -> (Check, Option<String>) {
    let catalog = match catalog {
        Ok(catalog) => catalog,
        Err(error) => {
            return (
                fail(
                    "models",
                    format!("the policy's catalog cannot be listed: {error}"),
                    "fix [models] catalog (the format of `devin models list --format json`)",
                ),
                None,
            )
        }
    };
    let Some(select) = Select::model(options) else {
        let detail = match launched {
            Some(model) => format!(
                "the session has no model option: the model is --model {model} of the agent's command line"
            ),
            None => "the session has no model option and the agent's command line has no --model: the CLI's default model answers".to_owned(),
        };
        return (pass("models", detail), launched.map(str::to_owned));
    };
    let (offered, missing): (Vec<&String>, Vec<&String>) =
        catalog.iter().partition(|id| select.find(id).is_some());
    let missing: Vec<&str> = missing.into_iter().map(String::as_str).collect();
    let current = select.current.clone().unwrap_or_else(|| "none".into());
    if offered.is_empty() {
        return (
            fail(
                "models",
                format!(
                    "none of the catalog's {} models is offered; the agent offers: {}",
                    catalog.len(),
                    select.offered().join(", ")
                ),
                "use [models] source = \"live\" (the account's own models), or a catalog that names them",
            ),
            None,
        );
    }
    let mut detail = format!(
        "{} of {} catalog models offered (current {current})",
        offered.len(),
        catalog.len()
    );
    if !missing.is_empty() {
        detail.push_str(&format!(
            "; not offered, requests for them get a 400: {}",
            missing.join(", ")
        ));
    }
    (
        pass("models", detail),
        offered.first().map(|id| (*id).clone()),
    )
}

async fn prompt_check(
    connection: &mut AgentConnection,
    transforms: std::sync::Arc<Transforms>,
    session: &str,
    options: &[agent_client_protocol_schema::v1::SessionConfigOption],
    model: Option<&str>,
) -> Check {
    let mut name = None;
    if let Some(model) = model {
        match choose_model(options, model) {
            ModelChoice::Set {
                config_id,
                value,
                name: set_name,
            } => {
                if let Err(error) = connection
                    .set_config_option(session, &config_id, &value)
                    .await
                {
                    return fail(
                        "prompt",
                        format!("setting the model {model} failed: {}", describe(&error)),
                        "check that the account may use this model",
                    );
                }
                name = Some(set_name);
            }
            ModelChoice::Current {
                name: current_name, ..
            } => name = Some(current_name),
            _ => {}
        }
    }
    // The probe as Claude Code would send it, serialized as a turn is.
    let request = serde_json::json!({
        "model": format!("{MODEL_PREFIX}{}", model.unwrap_or("default")),
        "max_tokens": 16,
        "messages": [{"role": "user", "content": PROBE_PROMPT}],
    })
    .to_string();
    let serialized = tokio::task::spawn_blocking(move || transforms.serialize(request)).await;
    let text = match serialized {
        Ok(Ok(Ok(prompt))) => prompt.text,
        Ok(Ok(Err(failure))) => {
            return fail(
                "prompt",
                format!("the serializer refused the probe: {}", failure.message),
                "check the policy's serializer component",
            )
        }
        Ok(Err(error)) => {
            return fail(
                "prompt",
                format!("the serializer failed: {error}"),
                "check the policy's serializer component",
            )
        }
        Err(error) => {
            return fail(
                "prompt",
                format!("the serializer task failed: {error}"),
                "run doctor again",
            )
        }
    };
    let blocks = vec![agent_client_protocol_schema::v1::ContentBlock::from(text)];
    match connection.prompt(session, blocks, &NoTools).await {
        Ok(outcome) => {
            let observed = outcome.observed_model();
            let answered = match (&observed, model) {
                (Some(observed), Some(model)) if names_model(observed, model, name.as_deref()) => {
                    format!("answered by {observed} (the model set: {model})")
                }
                (Some(observed), Some(model)) => {
                    return fail(
                        "prompt",
                        format!("answered by {observed}, but the model set was {model}"),
                        "the agent does not honour the model option; report this with the --json output",
                    )
                }
                (Some(observed), None) => format!("answered by {observed}"),
                (None, _) => "answered (the agent did not say which model)".into(),
            };
            let excerpt: String = outcome.text.trim().escape_debug().take(80).collect();
            pass(
                "prompt",
                format!("the service accepted the client identity; {answered}; reply \"{excerpt}\""),
            )
        }
        Err(AcpError::ClientIdentityRefused) => fail(
            "prompt",
            describe(&AcpError::ClientIdentityRefused),
            "set [agent] client_name = \"windsurf\" and a client_version the CLI accepts (default 1.110.1)",
        ),
        Err(error @ (AcpError::QuotaExceeded { .. } | AcpError::RateLimited { .. })) => fail(
            "prompt",
            describe(&error),
            "the account is out of credits or rate limited: add credits or wait, then run doctor again",
        ),
        Err(error) => fail(
            "prompt",
            describe(&error),
            "run the agent by hand in its home and read its stderr",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn options(
        value: serde_json::Value,
    ) -> Vec<agent_client_protocol_schema::v1::SessionConfigOption> {
        serde_json::from_value(value).expect("options")
    }

    #[test]
    fn the_model_check_names_what_the_catalog_has_that_the_agent_does_not_offer() {
        let offered = options(
            json!([{"id": "model", "name": "Model", "category": "model", "type": "select",
            "currentValue": "a", "options": [{"value": "a", "name": "A"}, {"value": "b-1", "name": "B"}]}]),
        );
        let (check, chosen) = models_check(&offered, &Ok(vec!["b.1".into(), "c".into()]), None);
        assert!(check.ok);
        assert!(check.detail.contains("1 of 2"), "{}", check.detail);
        assert!(check
            .detail
            .contains("not offered, requests for them get a 400: c"));
        assert_eq!(chosen.as_deref(), Some("b.1"));
        let (check, chosen) = models_check(&offered, &Ok(vec!["c".into()]), None);
        assert!(!check.ok);
        assert!(check.fix.is_some());
        assert_eq!(chosen, None);
        let (check, chosen) = models_check(&[], &Ok(vec!["c".into()]), Some("swe-1-6"));
        assert!(check.ok, "no option: --model decides");
        assert!(check.detail.contains("--model swe-1-6"), "{}", check.detail);
        assert_eq!(chosen.as_deref(), Some("swe-1-6"));
        let (check, chosen) = models_check(&[], &Ok(vec!["c".into()]), None);
        assert!(
            check.detail.contains("the CLI's default model"),
            "{}",
            check.detail
        );
        assert_eq!(chosen, None);
    }

    #[test]
    fn the_report_reads_one_line_per_check_with_its_fix() {
        let report = Report {
            ok: false,
            bridge_version: "0",
            policy: "p.toml".into(),
            agent_command: "devin".into(),
            agent_args: vec!["acp".into()],
            client: "windsurf/1.110.1".into(),
            cli_version: Some("devin 1".into()),
            checks: vec![
                pass("cli", "devin 1"),
                warn("identity", "shared", "set [agent] user"),
                fail("session", "not logged in", "log in"),
            ],
            dialect: None,
            trace: None,
            elapsed_ms: 1,
        };
        let text = report.human();
        assert!(text.contains("ok   cli        devin 1"), "{text}");
        assert!(text.contains("FAIL session    not logged in"), "{text}");
        assert!(text.contains("fix: log in"), "{text}");
        assert!(text.contains("warn identity   shared"), "{text}");
        assert!(text.contains("fix: set [agent] user"), "{text}");
        assert!(text.ends_with("problems found: see the fix lines above\n"));
    }

    #[test]
    fn agent_text_in_evidence_is_bounded_and_escaped() {
        let error = AcpError::Rpc {
            code: -32603,
            message: format!("line\nforged {}", "x".repeat(1000)),
            kind: Some("internal".into()),
            retryable: false,
            retry_after: None,
        };
        let text = describe(&error);
        assert!(!text.contains('\n'));
        assert!(text.contains("\\n"));
        assert!(text.len() < 600);
    }
}
