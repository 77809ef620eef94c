//! The task and review flow: validate the input, check the CLI, resolve the model, create the
//! record, then run in the foreground (this helper is the worker) or detach a worker
//! (`--background`).
//!
//! A job's inputs that must not be stored in its record (the prompt or the review brief) are
//! handed to a detached worker in `<data>/runs/<job>/input.json` (0600), which the worker
//! reads and deletes before it runs.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::{Deserialize, Serialize};

use super::cli::{ReviewArgs, RunnerKind, TaskArgs};
use super::context::Context;
use super::error::CompanionError;
use super::failure::{FailureKind, JobFailure};
use super::jobs::{Delivery, JobRecord, JobStatus, JobStore, ProcessStamp, Role, RunMode};
use super::models;
use super::output::{job_output, Output};
use super::preflight::{self, Devin, PreflightError};
use super::print::{self, PrintRequest};
use super::private_home::{self, Sandbox};
use super::review;
use super::run::{self, Progress, RunRequest};
use devin_bridge_engine::ResolvedModel;

/// Everything a worker needs that the record does not hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobInput {
    pub brief: String,
    pub model: Option<ResolvedModel>,
    pub effort: Option<String>,
    pub resume: Option<String>,
    /// Written as `transport`: the job input file's format stays what it was.
    #[serde(rename = "transport")]
    pub runner: Runner,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Runner {
    Acp,
    Print,
}

fn input_error(message: impl AsRef<str>) -> CompanionError {
    CompanionError::input(message)
}

/// The workspace: `--cwd` (must exist; canonical), else the process cwd, which for task and
/// review must be its repository's root.
pub(crate) fn workspace(cwd: Option<&Path>) -> Result<PathBuf, CompanionError> {
    match cwd {
        Some(dir) => {
            let canonical = std::fs::canonicalize(dir)
                .map_err(|_| input_error(format!("--cwd {} does not exist", dir.display())))?;
            if !canonical.is_dir() {
                return Err(input_error(format!(
                    "--cwd {} is not a directory",
                    dir.display()
                )));
            }
            Ok(canonical)
        }
        None => {
            let current = std::env::current_dir()
                .and_then(std::fs::canonicalize)
                .map_err(|error| {
                    input_error(format!("cannot read the current directory: {error}"))
                })?;
            if let Some(top) = review::toplevel(&current) {
                let top = std::fs::canonicalize(&top).unwrap_or(top);
                if top != current {
                    return Err(input_error(format!(
                        "the current directory is below its repository root {}; run from the root or pass --cwd",
                        top.display()
                    )));
                }
            }
            Ok(current)
        }
    }
}

/// The prompt from the arguments, else stdin (at most `limit` bytes of UTF-8).
pub(crate) fn prompt(args: &[String], limit: usize) -> Result<String, CompanionError> {
    let text = if args.is_empty() {
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(limit as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| input_error(format!("cannot read the prompt from stdin: {error}")))?;
        if bytes.len() > limit {
            return Err(input_error(format!(
                "the prompt is larger than {limit} bytes"
            )));
        }
        String::from_utf8(bytes).map_err(|_| input_error("the prompt on stdin is not UTF-8"))?
    } else {
        args.join(" ")
    };
    if text.len() > limit {
        return Err(input_error(format!(
            "the prompt is larger than {limit} bytes"
        )));
    }
    if text.trim().is_empty() {
        return Err(input_error("the prompt is empty"));
    }
    Ok(text)
}

/// A preflight failure as a job failure.
fn preflight_failure(error: PreflightError) -> JobFailure {
    match error {
        PreflightError::Missing(message) => JobFailure::new(FailureKind::MissingCli, message),
        PreflightError::Setup(message) => JobFailure::new(FailureKind::Setup, message),
    }
}

/// Resolves and checks the Devin CLI (with the private home's environment).
pub(crate) async fn preflight(ctx: &Context, workspace: &Path) -> Result<Devin, JobFailure> {
    let path =
        preflight::resolve_binary(&ctx.policy.companion.command).map_err(preflight_failure)?;
    let (shared, _) = private_home::prepare_home(&ctx.settings.data_dir)
        .map_err(|error| JobFailure::new(FailureKind::Setup, error.to_string()))?;
    let env = private_home::child_env(&shared, None, Sandbox::ReadOnly);
    preflight::check(&path, env, workspace, ctx.probe_timeout())
        .await
        .map_err(preflight_failure)
}

/// `--model`: the catalog entry (input if unknown).
async fn resolve_model(
    ctx: &Context,
    devin: &Devin,
    workspace: &Path,
    requested: &str,
) -> Result<ResolvedModel, CompanionError> {
    if models::is_routing_name(requested) {
        return Err(input_error(format!(
            "--model {requested} selects a routing pairing; the companion runs one model"
        )));
    }
    let (shared, _) = private_home::prepare_home(&ctx.settings.data_dir).map_err(|e| {
        CompanionError::JobFailure(JobFailure::new(FailureKind::Setup, e.to_string()))
    })?;
    let catalog = models::catalog(
        &ctx.settings.data_dir,
        &devin.path,
        private_home::child_env(&shared, None, Sandbox::ReadOnly),
        workspace,
        ctx.probe_timeout(),
        ctx.models_ttl(),
        false,
    )
    .await
    .map_err(models_error)?;
    models::resolve(&ctx.policy, requested, &catalog).map_err(models_error)
}

fn models_error(error: models::ModelsError) -> CompanionError {
    match error {
        models::ModelsError::Input(message) => CompanionError::input(message),
        models::ModelsError::Setup(message) => {
            CompanionError::JobFailure(JobFailure::new(FailureKind::Setup, message))
        }
        other => CompanionError::JobFailure(JobFailure::new(FailureKind::Error, other.to_string())),
    }
}

/// `--effort` values that can never be valid.
fn check_effort(effort: Option<&str>) -> Result<(), CompanionError> {
    match effort {
        Some(effort) if models::is_routing_name(effort) => Err(input_error(format!(
            "--effort {effort} is not an effort level"
        ))),
        Some("") => Err(input_error("--effort needs a value")),
        _ => Ok(()),
    }
}

/// `--resume SID` / `--resume-last`: a terminal job's session of this workspace and mode.
fn resume_session(
    store: &JobStore,
    workspace: &Path,
    mode: RunMode,
    args: &TaskArgs,
) -> Result<Option<(String, String)>, CompanionError> {
    if args.resume.is_none() && !args.resume_last {
        return Ok(None);
    }
    let (records, _) = store.list(Some(workspace), usize::MAX)?;
    let candidates = records
        .into_iter()
        .filter(|record| record.mode == mode && record.workspace == workspace);
    let found = match &args.resume {
        Some(sid) => candidates
            .filter(|record| record.resumable_session() == Some(sid.as_str()))
            .max_by(|a, b| a.created_at.cmp(&b.created_at)),
        None => candidates
            .filter(|record| record.resumable_session().is_some())
            .max_by(|a, b| a.created_at.cmp(&b.created_at)),
    };
    match found {
        Some(record) => Ok(record
            .session_id
            .clone()
            .map(|session| (session, record.id.clone()))),
        None => Err(input_error(match &args.resume {
            Some(sid) => format!(
                "session {sid} is not a finished {} session of this workspace",
                mode.as_str()
            ),
            None => format!(
                "there is no finished {} session in this workspace to resume",
                mode.as_str()
            ),
        })),
    }
}

/// What `task` and `review` have in common once validated.
struct Plan {
    role: Role,
    mode: RunMode,
    workspace: PathBuf,
    title: String,
    background: bool,
    requested_model: Option<String>,
    requested_effort: Option<String>,
    resumed_from: Option<String>,
    input: JobInput,
}

/// `task`.
pub(crate) async fn task(ctx: &Context, args: TaskArgs) -> Result<Output, CompanionError> {
    let workspace = workspace(args.cwd.as_deref())?;
    let brief = prompt(&args.prompt, ctx.policy.companion.max_prompt_bytes)?;
    check_effort(args.effort.as_deref())?;
    let mode = if args.write {
        RunMode::Write
    } else {
        RunMode::Consult
    };
    let store = JobStore::from_settings(&ctx.settings)?;
    let resume = resume_session(&store, &workspace, mode, &args)?;
    let runner = match args.runner {
        RunnerKind::Acp => Runner::Acp,
        RunnerKind::Print => Runner::Print,
    };
    let plan = Plan {
        role: Role::Task,
        mode,
        workspace,
        title: brief.clone(),
        background: args.background,
        requested_model: args.model.clone(),
        requested_effort: args.effort.clone(),
        resumed_from: resume.as_ref().map(|(_, job)| job.clone()),
        input: JobInput {
            brief,
            model: None,
            effort: args.effort.clone(),
            resume: resume.map(|(session, _)| session),
            runner,
        },
    };
    launch(ctx, &store, plan).await
}

/// `review`.
pub(crate) async fn review(ctx: &Context, args: ReviewArgs) -> Result<Output, CompanionError> {
    let workspace = workspace(args.cwd.as_deref())?;
    check_effort(args.effort.as_deref())?;
    let store = JobStore::from_settings(&ctx.settings)?;
    let changes = match review::collect(&workspace, args.scope, args.base.as_deref()) {
        Ok(changes) => Some(changes),
        Err(review::ReviewError::Input(message)) => return Err(input_error(message)),
        Err(review::ReviewError::TooLarge) => None,
        Err(review::ReviewError::Git(message)) => {
            return Err(CompanionError::JobFailure(JobFailure::new(
                FailureKind::Error,
                message,
            )))
        }
    };
    let focus = args
        .focus
        .clone()
        .unwrap_or_else(|| "general review".to_owned());
    let (brief, title) = match &changes {
        Some(changes) => (
            review::interpolate(&review::template(), &changes.diff, &focus, &changes.scope),
            format!("review {}: {focus}", changes.scope),
        ),
        None => (String::new(), format!("review: {focus}")),
    };
    let plan = Plan {
        role: Role::Review,
        mode: RunMode::Review,
        workspace,
        title,
        background: args.background,
        requested_model: args.model.clone(),
        requested_effort: args.effort.clone(),
        resumed_from: None,
        input: JobInput {
            brief,
            model: None,
            effort: args.effort.clone(),
            resume: None,
            runner: Runner::Acp,
        },
    };
    if changes.is_none() {
        // The diff is too large to send: the job exists and ends as `resource` at once.
        let record = create_record(&store, &plan, None)?;
        let record = store.finish(&record.workspace, &record.id, JobStatus::Error, |r| {
            r.delivery = Delivery::Failed;
            r.failure = Some(JobFailure::new(
                FailureKind::Resource,
                format!(
                    "the diff is larger than {} bytes; narrow the review (--scope, --base)",
                    review::MAX_DIFF_BYTES
                ),
            ));
        })?;
        return Ok(job_output(&record));
    }
    launch(ctx, &store, plan).await
}

fn create_record(
    store: &JobStore,
    plan: &Plan,
    devin: Option<&Devin>,
) -> Result<JobRecord, CompanionError> {
    let mut record = JobRecord::new(plan.role, plan.mode, plan.workspace.clone(), &plan.title)
        .map_err(|error| {
            CompanionError::JobFailure(JobFailure::new(
                FailureKind::Error,
                format!("cannot create a job id: {error}"),
            ))
        })?;
    record.background = plan.background;
    record.requested_model = plan.requested_model.clone();
    record.requested_effort = plan.requested_effort.clone();
    record.resumed_from = plan.resumed_from.clone();
    if let Some(devin) = devin {
        record.devin_version = Some(devin.version.clone());
        record.devin_build_path = Some(devin.path.display().to_string());
        if devin.standing == preflight::Standing::Newer {
            record.warnings.push(format!(
                "devin_version: {} is {}",
                devin.version,
                devin.standing.describe()
            ));
        }
    }
    if let Some(model) = &plan.input.model {
        record.resolved_model = Some(model.model_uid.clone());
        record.billing_pool = Some(super::failure::billing_pool_for(&model.model_uid).to_owned());
    }
    store.create(&record)?;
    Ok(record)
}

async fn launch(ctx: &Context, store: &JobStore, mut plan: Plan) -> Result<Output, CompanionError> {
    let devin = match preflight(ctx, &plan.workspace).await {
        Ok(devin) => devin,
        Err(failure) => {
            // The job exists so the failure has a footer and a record.
            let record = create_record(store, &plan, None)?;
            let record = store.finish(&record.workspace, &record.id, JobStatus::Error, |r| {
                r.delivery = Delivery::Failed;
                r.failure = Some(failure);
            })?;
            return Ok(job_output(&record));
        }
    };
    if let Some(requested) = &plan.requested_model {
        plan.input.model = Some(resolve_model(ctx, &devin, &plan.workspace, requested).await?);
    }
    let record = create_record(store, &plan, Some(&devin))?;
    if plan.background {
        return detach(ctx, store, &record, &plan.input);
    }
    let stamp = ProcessStamp::current().ok();
    store.update_running(&record.workspace, &record.id, |r| r.worker = stamp)?;
    let finished = execute(ctx, store, &record, plan.input, devin).await?;
    Ok(job_output(&finished))
}

/// Writes the worker's input and starts `task-worker`/`review-worker` in its own session.
fn detach(
    ctx: &Context,
    store: &JobStore,
    record: &JobRecord,
    input: &JobInput,
) -> Result<Output, CompanionError> {
    let fail = |message: String| {
        let failure = JobFailure::new(FailureKind::Process, message);
        let _ = store.finish(&record.workspace, &record.id, JobStatus::Error, |r| {
            r.delivery = Delivery::Failed;
            r.failure = Some(failure.clone());
        });
        CompanionError::JobFailure(failure)
    };
    let run_dir = store.run_dir(&record.id)?;
    private_home::private_dir(&run_dir).map_err(|e| fail(e.to_string()))?;
    let input_path = run_dir.join("input.json");
    write_private(&input_path, &serde_json::to_vec(input).unwrap_or_default())
        .map_err(|e| fail(format!("cannot write the job input: {e}")))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(run_dir.join("worker.log"))
        .map_err(|e| fail(format!("cannot open the worker log: {e}")))?;
    let log_err = log
        .try_clone()
        .map_err(|e| fail(format!("cannot open the worker log: {e}")))?;
    let worker = match record.role {
        Role::Task => "task-worker",
        Role::Review => "review-worker",
    };
    // The worker is this very binary even if its file was replaced since it started (an
    // upgrade in place): its path may name another version, or nothing.
    let mut command = std::process::Command::new(devin_bridge_agent::process::running_binary());
    command.arg0("devin-bridge").arg("companion");
    if let Some(policy) = &ctx.policy_path {
        command.arg("--policy").arg(policy);
    }
    command
        .args([worker, "--job", &record.id])
        .current_dir(&record.workspace)
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log_err);
    command
        .spawn()
        .map_err(|e| fail(format!("cannot start the worker: {e}")))?;
    let text = format!(
        "{id}\nstarted in the background; check it with:\n  /devin:status {id}\n  /devin:result {id}\n",
        id = record.id
    );
    let json_value = serde_json::json!({
        "id": record.id,
        "status": "running",
        "background": true,
        "hints": [format!("/devin:status {}", record.id), format!("/devin:result {}", record.id)],
    });
    Ok(Output {
        text,
        json: json_value,
        exit: ExitCode::SUCCESS,
    })
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// `task-worker` / `review-worker`: a detached worker runs one job.
pub(crate) async fn worker(ctx: &Context, job: &str, role: Role) -> Result<Output, CompanionError> {
    // A worker of its own session: a terminal or Claude Code closing the launcher's session
    // does not take it along.
    let _ = nix::unistd::setsid();
    if !super::jobs::is_valid_job_id(job) {
        return Err(input_error(format!("{job} is not a job id")));
    }
    let store = JobStore::from_settings(&ctx.settings)?;
    let record = store.get(None, job)?;
    if record.role != role || record.is_terminal() {
        return Err(input_error(format!(
            "job {job} is not waiting for a {} worker",
            role.as_str()
        )));
    }
    let stamp = ProcessStamp::current().ok();
    let record = store.update_running(&record.workspace, &record.id, |r| r.worker = stamp)?;
    let run_dir = store.run_dir(&record.id)?;
    let input_path = run_dir.join("input.json");
    let input = std::fs::read(&input_path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<JobInput>(&bytes).ok());
    let _ = std::fs::remove_file(&input_path);
    let Some(input) = input else {
        let record = store.finish(&record.workspace, &record.id, JobStatus::Error, |r| {
            r.delivery = Delivery::Failed;
            r.failure = Some(JobFailure::new(
                FailureKind::Process,
                "the worker's job input is missing",
            ));
        })?;
        return Ok(job_output(&record));
    };
    let devin = match preflight(ctx, &record.workspace).await {
        Ok(devin) => devin,
        Err(failure) => {
            let record = store.finish(&record.workspace, &record.id, JobStatus::Error, |r| {
                r.delivery = Delivery::Failed;
                r.failure = Some(failure);
            })?;
            return Ok(job_output(&record));
        }
    };
    let finished = execute(ctx, &store, &record, input, devin).await?;
    Ok(job_output(&finished))
}

/// Runs a created, stamped job to its end and finishes its record.
async fn execute(
    ctx: &Context,
    store: &JobStore,
    record: &JobRecord,
    input: JobInput,
    devin: Devin,
) -> Result<JobRecord, CompanionError> {
    let sandbox = match record.mode {
        RunMode::Write => Sandbox::WorkspaceWrite,
        RunMode::Consult | RunMode::Review => Sandbox::ReadOnly,
    };
    let prepared = match private_home::prepare_job(
        &ctx.settings.data_dir,
        &record.id,
        sandbox,
        &record.workspace,
    ) {
        Ok(prepared) => prepared,
        Err(error) => {
            return Ok(
                store.finish(&record.workspace, &record.id, JobStatus::Error, |r| {
                    r.delivery = Delivery::Failed;
                    r.failure = Some(JobFailure::new(FailureKind::Setup, error.to_string()));
                })?,
            )
        }
    };
    store.update_running(&record.workspace, &record.id, |r| {
        r.config_dir = Some(prepared.config_home.clone());
        r.devin_version = Some(devin.version.clone());
        r.devin_build_path = Some(devin.path.display().to_string());
        for warning in &prepared.warnings {
            r.warnings.push(warning.clone());
        }
    })?;
    match input.runner {
        Runner::Print => execute_print(ctx, store, record, input, devin, prepared.env).await,
        Runner::Acp => execute_acp(ctx, store, record, input, devin, prepared.env).await,
    }
}

async fn execute_print(
    ctx: &Context,
    store: &JobStore,
    record: &JobRecord,
    input: JobInput,
    devin: Devin,
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
) -> Result<JobRecord, CompanionError> {
    let outcome = print::run(PrintRequest {
        mode: record.mode,
        workspace: record.workspace.clone(),
        prompt: input.brief,
        devin,
        env,
        // The CLI takes the model as its sessions spell it (`glm-5-2`, not `glm-5.2`).
        model: input.model.as_ref().map(|m| m.acp_id.clone()),
        resume: input.resume,
        timeout: ctx.settings.timeout,
        cap: ctx.policy.companion.output_cap_bytes,
        kill_grace: ctx.settings.exit_grace,
        keeper: true,
        sandbox: ctx.policy.companion.print_sandbox,
    })
    .await;
    let status = status_of(outcome.failure.as_ref());
    Ok(store.finish(&record.workspace, &record.id, status, |r| {
        r.result = Some(outcome.stdout.clone());
        let tail =
            crate::failure::clean_tail(&outcome.stderr, crate::jobs::record::STDERR_TAIL_LIMIT);
        r.stderr_tail = (!tail.is_empty()).then_some(tail);
        if outcome.stdout_truncated {
            r.warnings
                .push("output_truncated: only the tail of the output was kept".into());
        }
        r.stop_reason = outcome.exit_code.map(|code| format!("exit {code}"));
        r.delivery = if outcome.failure.is_some() {
            Delivery::Failed
        } else {
            Delivery::Complete
        };
        r.failure = outcome.failure.clone();
    })?)
}

fn status_of(failure: Option<&JobFailure>) -> JobStatus {
    match failure.map(|f| f.kind) {
        None => JobStatus::Done,
        Some(FailureKind::Cancelled) => JobStatus::Cancelled,
        Some(_) => JobStatus::Error,
    }
}

async fn execute_acp(
    ctx: &Context,
    store: &JobStore,
    record: &JobRecord,
    input: JobInput,
    devin: Devin,
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
) -> Result<JobRecord, CompanionError> {
    let workspace = record.workspace.clone();
    let id = record.id.clone();
    let progress = |event: Progress| {
        let outcome = store.update_running(&workspace, &id, |r| match &event {
            Progress::Started { pid } => {
                r.engine_process = ProcessStamp::of_pid(*pid).ok().flatten();
            }
            Progress::Session { id } => r.session_id = Some(id.clone()),
            Progress::ModelSet { resolved } => r.resolved_model = Some(resolved.clone()),
            Progress::EffortSet { value } => r.effort_applied = Some(value.clone()),
        });
        if let Err(error) = outcome {
            tracing::warn!(%error, "cannot record the job's progress");
        }
    };
    let mode = record.mode;
    // Checked when the policy was loaded; a failure here is still a setup failure, not a panic.
    let client = match ctx.policy.companion.client_identity() {
        Ok(client) => client,
        Err(error) => {
            return Ok(store.finish(&workspace, &id, JobStatus::Error, |r| {
                r.delivery = Delivery::Failed;
                r.failure = Some(JobFailure::new(
                    FailureKind::Setup,
                    format!("the companion policy's client identity is invalid: {error}"),
                ));
            })?)
        }
    };
    let result = run::run(
        RunRequest {
            mode,
            workspace: workspace.clone(),
            brief: input.brief,
            devin,
            env,
            model: input.model.clone(),
            effort: input.effort.clone(),
            resume: input.resume.clone(),
            timeout: ctx.settings.timeout,
            exit_grace: ctx.settings.exit_grace,
            output_cap: ctx.policy.companion.output_cap_bytes,
            client,
        },
        &progress,
    )
    .await;
    let mut failure = result.failure.clone();
    let mut validated = None;
    if mode == RunMode::Review && failure.is_none() {
        match review::validate(&ctx.policy, result.text.as_deref().unwrap_or_default()) {
            Ok(Ok(value)) => validated = Some(value),
            Ok(Err(message)) => {
                failure = Some(JobFailure::new(
                    FailureKind::Error,
                    format!("the reviewer's answer is not a valid review ({message})"),
                ));
            }
            Err(error) => {
                failure = Some(JobFailure::new(
                    FailureKind::Error,
                    format!("the review cannot be validated: {error}"),
                ));
            }
        }
    }
    let status = status_of(failure.as_ref());
    Ok(store.finish(&workspace, &id, status, |r| {
        r.result = result.text.clone();
        r.review = validated.clone();
        if let Some(session) = &result.session_id {
            r.session_id = Some(session.clone());
        }
        if result.request_id.is_some() {
            r.request_id = result.request_id.clone();
        }
        r.observed_model = result.observed_model.clone();
        r.usage = result.usage.clone();
        r.stop_reason = result.stop_reason.clone();
        r.stop_cause = result.stop_cause.clone();
        if result.effort_applied.is_some() {
            r.effort_applied = result.effort_applied.clone();
        }
        for warning in &result.warnings {
            r.warnings.push(warning.clone());
        }
        if r.resolved_model.is_none() {
            r.resolved_model = result.session_model.clone();
        }
        if let Some(model) = r.resolved_model.clone().or(r.observed_model.clone()) {
            if r.billing_pool.is_none() {
                r.billing_pool = Some(super::failure::billing_pool_for(&model).to_owned());
            }
        }
        r.delivery = match (&failure, result.delivery) {
            (_, Some(Delivery::LateClose)) => Delivery::LateClose,
            (Some(_), _) => Delivery::Failed,
            (None, delivery) => delivery.unwrap_or(Delivery::Complete),
        };
        let model = r.resolved_model.clone().or(r.observed_model.clone());
        r.failure = failure.clone().map(|f| f.with_model(model.as_deref()));
    })?)
}
