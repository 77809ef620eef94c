//! The job commands: `status`, `result`, `cancel`, `history`, `record-acceptance` and
//! `session-end`.
//!
//! Without `--cwd`, `status JOB`, `result` and `cancel` find the job in any workspace.
//! `--cwd` must name an existing directory (else `input`). Cancelling a job that already
//! ended changes nothing: it prints that the job ended, with its footer, and exits 0.

use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;

use super::failure::{
    bound_text, clean_message, CompanionError, Failure, FailureKind, EXIT_CANCELLED, EXIT_DONE,
    EXIT_FAILED, EXIT_RUNNING,
};
use super::jobs::clock::now_rfc3339;
use super::jobs::liveness;
use super::jobs::sweep::{sweep_orphan_runs, ORPHAN_AGE};
use super::jobs::{
    is_valid_job_id, Acceptance, AcceptanceSource, AcceptanceState, JobRecord, JobStatus, JobStore,
};
use super::render;
use super::settings::Settings;
use super::Output;

/// Between SIGTERM and SIGKILL when a job is cancelled.
pub const CANCEL_GRACE: Duration = Duration::from_secs(2);
/// The most hook input `session-end` reads.
pub const HOOK_INPUT_LIMIT: u64 = 64 * 1024;
/// Transport files unused for this long are removed at session end.
pub const TRANSPORT_MAX_AGE: Duration = Duration::from_secs(600);
/// The failure message of a job cancelled by `cancel`.
pub const CANCELLED_BY_USER: &str = "cancelled by the user";

/// `status [JOB] [--all] [--cwd DIR] [--json]`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// A job id; without one, the workspace's recent jobs and every running one.
    pub job: Option<String>,
    /// List the jobs of every workspace.
    #[arg(long, conflicts_with = "cwd")]
    pub all: bool,
    /// The workspace (an existing directory; default: the current directory).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `result JOB [--wait] [--cwd DIR] [--json]`.
#[derive(Debug, Clone, clap::Args)]
pub struct ResultArgs {
    /// The job id.
    pub job: String,
    /// Wait (bounded by DEVIN_COMPANION_WAIT_TIMEOUT_MS) for a running job to end.
    #[arg(long)]
    pub wait: bool,
    /// The workspace to look in (default: every workspace).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `cancel JOB [--cwd DIR] [--json]`.
#[derive(Debug, Clone, clap::Args)]
pub struct CancelArgs {
    /// The job id.
    pub job: String,
    /// The workspace to look in (default: every workspace).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `history [--all] [--limit N] [--cwd DIR] [--json]`.
#[derive(Debug, Clone, clap::Args)]
pub struct HistoryArgs {
    /// Every workspace.
    #[arg(long, conflicts_with = "cwd")]
    pub all: bool,
    /// How many jobs to show (default 20).
    #[arg(long)]
    pub limit: Option<usize>,
    /// The workspace (an existing directory; default: the current directory).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `record-acceptance --job-id ID --acceptance accepted|rejected|unverified [...]`.
#[derive(Debug, Clone, clap::Args)]
pub struct RecordAcceptanceArgs {
    /// The job id (a terminal job).
    #[arg(long = "job-id")]
    pub job_id: String,
    /// accepted, rejected or unverified.
    #[arg(long)]
    pub acceptance: String,
    /// Why (free text, bounded).
    #[arg(long)]
    pub reason: Option<String>,
    /// The failure kind behind a rejection (one of the 17 kinds).
    #[arg(long = "failure-kind")]
    pub failure_kind: Option<String>,
    /// Who judged: collector, main-loop or stats.
    #[arg(long)]
    pub source: Option<String>,
    /// Allow `accepted` for a job whose delivery failed.
    #[arg(long = "accept-failed-transport")]
    pub accept_failed_transport: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `session-end`: the Claude Code SessionEnd hook (hook JSON on stdin).
#[derive(Debug, Clone, clap::Args)]
pub struct SessionEndArgs {}

fn exit(code: u8) -> ExitCode {
    ExitCode::from(code)
}

/// The exit code of a command that reports this job's outcome.
pub fn exit_code_of(record: &JobRecord) -> u8 {
    match record.status {
        JobStatus::Running => EXIT_RUNNING,
        JobStatus::Done => EXIT_DONE,
        JobStatus::Cancelled => EXIT_CANCELLED,
        JobStatus::Error | JobStatus::Died => match record.failure.as_ref().map(|f| f.kind) {
            Some(kind @ (FailureKind::MissingCli | FailureKind::Setup | FailureKind::Auth)) => {
                kind.exit_code()
            }
            _ => EXIT_FAILED,
        },
    }
}

/// `--cwd`: must be an existing directory; returned canonical.
pub fn resolve_cwd(cwd: Option<&Path>) -> Result<Option<PathBuf>, CompanionError> {
    let Some(cwd) = cwd else { return Ok(None) };
    match fs::canonicalize(cwd) {
        Ok(path) if path.is_dir() => Ok(Some(path)),
        Ok(_) => Err(CompanionError::input(format!(
            "--cwd {} is not a directory",
            cwd.display()
        ))),
        Err(error) => Err(CompanionError::input(format!(
            "--cwd {}: {error}",
            cwd.display()
        ))),
    }
}

fn workspace_or_current(cwd: Option<PathBuf>) -> Result<PathBuf, CompanionError> {
    match cwd {
        Some(path) => Ok(path),
        None => std::env::current_dir()
            .and_then(fs::canonicalize)
            .map_err(|error| CompanionError::input(format!("the current directory: {error}"))),
    }
}

fn job_id(id: &str) -> Result<&str, CompanionError> {
    if is_valid_job_id(id) {
        Ok(id)
    } else {
        Err(CompanionError::input(format!(
            "{:?} is not a job id (job-<16 lowercase hex digits>)",
            bound_text(id, 64)
        )))
    }
}

fn find(store: &JobStore, cwd: Option<&Path>, id: &str) -> Result<JobRecord, CompanionError> {
    store.get(cwd, job_id(id)?).map_err(|error| match error {
        super::jobs::StoreError::NotFound(_) => CompanionError::input(match cwd {
            Some(cwd) => format!("no job {id} in {}", cwd.display()),
            None => format!("no job {id}"),
        }),
        other => other.into(),
    })
}

/// `status`: one job in detail (exit 0 whatever its state), or a listing.
pub fn status(settings: &Settings, args: StatusArgs) -> Result<Output, CompanionError> {
    let cwd = resolve_cwd(args.cwd.as_deref())?;
    let store = JobStore::from_settings(settings)?;
    let now = SystemTime::now();
    if let Some(id) = &args.job {
        let record = find(&store, cwd.as_deref(), id)?;
        return Ok(Output {
            text: render::status_detail(&record, now),
            json: render::record_json(&record),
            exit: exit(EXIT_DONE),
        });
    }
    let scope = if args.all {
        None
    } else {
        Some(workspace_or_current(cwd)?)
    };
    let (records, warnings) = store.list(scope.as_deref(), settings.history_limit)?;
    let jobs = records.iter().map(render::record_json).collect();
    Ok(Output {
        text: render::status_list(&records, &warnings, now, args.all),
        json: render::list_json(jobs, &warnings),
        exit: exit(EXIT_DONE),
    })
}

/// `result`: the outcome and footer. With `--wait`, polls every `wait_poll` until the job
/// ends or `wait_timeout` passes; a job still running exits 5.
pub fn result(settings: &Settings, args: ResultArgs) -> Result<Output, CompanionError> {
    let cwd = resolve_cwd(args.cwd.as_deref())?;
    let store = JobStore::from_settings(settings)?;
    let mut record = find(&store, cwd.as_deref(), &args.job)?;
    if args.wait && !record.is_terminal() {
        let deadline = Instant::now() + settings.wait_timeout;
        let poll = settings.wait_poll.max(Duration::from_millis(10));
        while !record.is_terminal() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            thread::sleep(poll.min(left));
            record = store.get(Some(&record.workspace), &record.id)?;
        }
    }
    Ok(Output {
        text: render::result_text(&record, SystemTime::now()),
        json: render::record_json(&record),
        exit: exit(exit_code_of(&record)),
    })
}

/// Cancels a running job: finishes it as cancelled first (under its lock, so a worker's
/// later finish is a no-op), then ends the worker and the engine process groups (SIGTERM,
/// [`CANCEL_GRACE`], SIGKILL). Returns the record and whether this call cancelled it.
pub fn cancel_job(
    store: &JobStore,
    record: &JobRecord,
    message: &str,
) -> Result<(JobRecord, bool), CompanionError> {
    if record.is_terminal() {
        return Ok((record.clone(), false));
    }
    let (finished, ours) =
        store.try_finish(&record.workspace, &record.id, JobStatus::Cancelled, |job| {
            job.failure = Some(Failure::new(FailureKind::Cancelled, message));
        })?;
    let stamps: Vec<&liveness::ProcessStamp> = finished
        .worker
        .iter()
        .chain(finished.engine_process.iter())
        .collect();
    if ours {
        liveness::terminate(&stamps, CANCEL_GRACE);
    }
    Ok((finished, ours))
}

/// `cancel`: exit 0 when the job is cancelled, and also (changing nothing) when it had
/// already ended.
pub fn cancel(settings: &Settings, args: CancelArgs) -> Result<Output, CompanionError> {
    let cwd = resolve_cwd(args.cwd.as_deref())?;
    let store = JobStore::from_settings(settings)?;
    let record = find(&store, cwd.as_deref(), &args.job)?;
    let (record, cancelled) = cancel_job(&store, &record, CANCELLED_BY_USER)?;
    let note = if cancelled {
        format!("cancelled {}\n", record.id)
    } else {
        format!(
            "job {} had already ended ({}); nothing to cancel\n",
            record.id, record.status
        )
    };
    let mut json = render::record_json(&record);
    json["cancelled"] = json!(cancelled);
    Ok(Output {
        text: format!("{note}{}", render::footer(&record)),
        json,
        exit: exit(EXIT_DONE),
    })
}

/// `history`: the safe projection of the newest jobs (default `history_limit`).
pub fn history(settings: &Settings, args: HistoryArgs) -> Result<Output, CompanionError> {
    let cwd = resolve_cwd(args.cwd.as_deref())?;
    let limit = args.limit.unwrap_or(settings.history_limit);
    if limit == 0 {
        return Err(CompanionError::input("--limit must be at least 1"));
    }
    let store = JobStore::from_settings(settings)?;
    let scope = if args.all {
        None
    } else {
        Some(workspace_or_current(cwd)?)
    };
    let (records, warnings) = store.list(scope.as_deref(), limit)?;
    let jobs = records.iter().map(render::history_json).collect();
    Ok(Output {
        text: render::history_text(&records, &warnings),
        json: render::list_json(jobs, &warnings),
        exit: exit(EXIT_DONE),
    })
}

/// `record-acceptance`: sets a terminal job's acceptance once. `accepted` cannot carry a
/// failure kind; a job whose delivery failed needs `--accept-failed-transport` to be
/// accepted. Bad values, a running job or a second recording are `input` errors.
pub fn record_acceptance(
    settings: &Settings,
    args: RecordAcceptanceArgs,
) -> Result<Output, CompanionError> {
    let id = job_id(&args.job_id)?.to_owned();
    let acceptance: AcceptanceState = args.acceptance.parse().map_err(CompanionError::input)?;
    let source = args
        .source
        .as_deref()
        .map(str::parse::<AcceptanceSource>)
        .transpose()
        .map_err(CompanionError::input)?;
    let failure_kind = args
        .failure_kind
        .as_deref()
        .map(str::parse::<FailureKind>)
        .transpose()
        .map_err(|error| CompanionError::input(format!("--failure-kind: {error}")))?;
    if acceptance == AcceptanceState::Accepted && failure_kind.is_some() {
        return Err(CompanionError::input(
            "--failure-kind does not go with --acceptance accepted",
        ));
    }
    let reason = args
        .reason
        .as_deref()
        .map(clean_message)
        .filter(|reason| !reason.is_empty());
    let store = JobStore::from_settings(settings)?;
    let record = store
        .record_acceptance(
            None,
            &id,
            Acceptance {
                acceptance,
                reason,
                failure_kind,
                source,
                recorded_at: now_rfc3339(),
            },
            args.accept_failed_transport,
        )
        .map_err(|error| match error {
            super::jobs::StoreError::NotFound(_) => CompanionError::input(format!("no job {id}")),
            other => other.into(),
        })?;
    Ok(Output {
        text: format!(
            "recorded {} for {}\n{}",
            acceptance.as_str(),
            record.id,
            render::footer(&record)
        ),
        json: render::record_json(&record),
        exit: exit(EXIT_DONE),
    })
}

/// What `session-end` did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SessionEndSummary {
    pub session_id: Option<String>,
    pub cancelled: usize,
    pub died: usize,
    pub transport_removed: usize,
    pub runs_removed: usize,
    pub problems: Vec<String>,
}

impl SessionEndSummary {
    /// The one line printed on stderr.
    pub fn line(&self) -> String {
        let mut line = format!(
            "devin-bridge companion session-end: cancelled {}, marked {} died, removed {} transport files and {} run directories",
            self.cancelled, self.died, self.transport_removed, self.runs_removed
        );
        if self.session_id.is_none() {
            line.push_str(" (no session id in the hook input)");
        }
        for problem in &self.problems {
            line.push_str("; ");
            line.push_str(problem);
        }
        bound_text(&clean_message(&line), 2048)
    }
}

/// `session-end`: reads the hook JSON from stdin and never fails (exit 0, one summary line
/// on stderr, nothing on stdout).
pub fn session_end(settings: &Settings, _args: SessionEndArgs) -> Result<Output, CompanionError> {
    let summary = session_end_from(settings, std::io::stdin().lock());
    eprintln!("{}", summary.line());
    Ok(Output {
        text: String::new(),
        json: session_end_json(&summary),
        exit: exit(EXIT_DONE),
    })
}

/// The JSON form of a session-end summary.
pub fn session_end_json(summary: &SessionEndSummary) -> serde_json::Value {
    json!({
        "sessionId": summary.session_id,
        "cancelled": summary.cancelled,
        "died": summary.died,
        "transportRemoved": summary.transport_removed,
        "runsRemoved": summary.runs_removed,
        "problems": summary.problems,
    })
}

/// The work of `session-end` with the hook input from `input`: running jobs of the ended
/// Claude Code session are cancelled if their worker is alive and finished as died
/// otherwise; transport files unused for 10 minutes and leftover run directories are removed.
pub fn session_end_from(settings: &Settings, input: impl Read) -> SessionEndSummary {
    let mut summary = SessionEndSummary::default();
    let mut bytes = Vec::new();
    match input.take(HOOK_INPUT_LIMIT + 1).read_to_end(&mut bytes) {
        Ok(_) if bytes.len() as u64 > HOOK_INPUT_LIMIT => {
            summary
                .problems
                .push(format!("hook input over {HOOK_INPUT_LIMIT} bytes ignored"));
        }
        Ok(_) => {
            summary.session_id = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|value| value.get("session_id")?.as_str().map(str::to_owned))
                .filter(|id| !id.is_empty());
        }
        Err(error) => summary
            .problems
            .push(format!("cannot read the hook input: {error}")),
    }
    let store = match JobStore::from_settings(settings) {
        Ok(store) => store,
        Err(error) => {
            summary.problems.push(error.to_string());
            return summary;
        }
    };
    if let Some(session) = summary.session_id.clone() {
        match store.running() {
            Ok((records, warnings)) => {
                summary.problems.extend(warnings);
                for record in records
                    .iter()
                    .filter(|r| r.claude_session_id.as_deref() == Some(session.as_str()))
                {
                    end_for_session(&store, record, &mut summary);
                }
            }
            Err(error) => summary.problems.push(error.to_string()),
        }
    }
    summary.transport_removed =
        remove_stale_transport(&settings.data_dir.join("transport"), TRANSPORT_MAX_AGE);
    match sweep_orphan_runs(&store, ORPHAN_AGE) {
        Ok(outcome) => summary.runs_removed = outcome.removed.len(),
        Err(error) => summary.problems.push(error.to_string()),
    }
    summary
}

fn end_for_session(store: &JobStore, record: &JobRecord, summary: &mut SessionEndSummary) {
    let worker_alive = record.worker.as_ref().is_some_and(|w| w.is_alive());
    if worker_alive {
        match cancel_job(store, record, "cancelled: the Claude Code session ended") {
            Ok((_, true)) => summary.cancelled += 1,
            Ok((_, false)) => {}
            Err(error) => summary.problems.push(error.to_string()),
        }
        return;
    }
    let outcome = store.try_finish(&record.workspace, &record.id, JobStatus::Died, |job| {
        job.failure = Some(Failure::new(
            FailureKind::Died,
            "the Claude Code session ended before a worker ran the job",
        ));
    });
    match outcome {
        Ok((finished, true)) => {
            summary.died += 1;
            let engine: Vec<&liveness::ProcessStamp> = finished.engine_process.iter().collect();
            liveness::terminate(&engine, CANCEL_GRACE);
        }
        Ok(_) => {}
        Err(error) => summary.problems.push(error.to_string()),
    }
}

/// Removes regular files of this user directly in `dir` that were last modified more than
/// `max_age` ago (transport files are consumed, so those left are unused). Returns how many.
pub fn remove_stale_transport(dir: &Path, max_age: Duration) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let uid = nix::unistd::getuid().as_raw();
    let now = SystemTime::now();
    let mut removed = 0;
    for entry in entries.flatten() {
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let stale = meta
            .modified()
            .ok()
            .and_then(|modified| now.duration_since(modified).ok())
            .is_some_and(|age| age > max_age);
        if meta.is_file() && meta.uid() == uid && stale && fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}
