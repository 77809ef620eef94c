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

use super::error::CompanionError;
use super::failure::{bound_text, clean_message, FailureKind, JobFailure, EXIT_DONE};
use super::jobs::clock::now_rfc3339;
use super::jobs::liveness;
use super::jobs::sweep::{sweep_orphan_runs, ORPHAN_AGE};
use super::jobs::{
    is_valid_job_id, Acceptance, AcceptanceSource, AcceptanceState, JobRecord, JobStatus, JobStore,
};
use super::output::{exit_code_of, Output};
use super::render;
use super::settings::Settings;

/// Between SIGTERM and SIGKILL when a job is cancelled.
pub(crate) const CANCEL_GRACE: Duration = Duration::from_secs(2);
/// The most hook input `session-end` reads.
pub(crate) const HOOK_INPUT_LIMIT: u64 = 64 * 1024;
/// Transport files unused for this long are removed at session end.
pub(crate) const TRANSPORT_MAX_AGE: Duration = Duration::from_secs(600);
/// The failure message of a job cancelled by `cancel`.
pub(crate) const CANCELLED_BY_USER: &str = "cancelled by the user";

/// `status [JOB] [--all] [--cwd DIR] [--json]`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StatusArgs {
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
pub(crate) struct ResultArgs {
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
pub(crate) struct CancelArgs {
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
pub(crate) struct HistoryArgs {
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
pub(crate) struct RecordAcceptanceArgs {
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
pub(crate) struct SessionEndArgs {}

fn exit(code: u8) -> ExitCode {
    ExitCode::from(code)
}

/// `--cwd`: must be an existing directory; returned canonical.
pub(crate) fn resolve_cwd(cwd: Option<&Path>) -> Result<Option<PathBuf>, CompanionError> {
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
pub(crate) fn status(settings: &Settings, args: StatusArgs) -> Result<Output, CompanionError> {
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
pub(crate) fn result(settings: &Settings, args: ResultArgs) -> Result<Output, CompanionError> {
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
pub(crate) fn cancel_job(
    store: &JobStore,
    record: &JobRecord,
    message: &str,
) -> Result<(JobRecord, bool), CompanionError> {
    if record.is_terminal() {
        return Ok((record.clone(), false));
    }
    let (finished, ours) =
        store.try_finish(&record.workspace, &record.id, JobStatus::Cancelled, |job| {
            job.failure = Some(JobFailure::new(FailureKind::Cancelled, message));
        })?;
    let stamps: Vec<&liveness::ProcessStamp> = finished
        .worker
        .iter()
        .chain(finished.engine_process.iter())
        .collect();
    if ours {
        liveness::terminate(&stamps, CANCEL_GRACE);
        if let Some(engine) = &finished.engine_process {
            liveness::end_orphaned_group(engine, CANCEL_GRACE);
        }
    }
    Ok((finished, ours))
}

/// `cancel`: exit 0 when the job is cancelled, and also (changing nothing) when it had
/// already ended.
pub(crate) fn cancel(settings: &Settings, args: CancelArgs) -> Result<Output, CompanionError> {
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
pub(crate) fn history(settings: &Settings, args: HistoryArgs) -> Result<Output, CompanionError> {
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
pub(crate) fn record_acceptance(
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
pub(crate) struct SessionEndSummary {
    pub session_id: Option<String>,
    pub cancelled: usize,
    pub died: usize,
    pub transport_removed: usize,
    pub runs_removed: usize,
    pub problems: Vec<String>,
}

impl SessionEndSummary {
    /// The one line printed on stderr.
    pub(crate) fn line(&self) -> String {
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
pub(crate) fn session_end(
    settings: &Settings,
    _args: SessionEndArgs,
) -> Result<Output, CompanionError> {
    let summary = session_end_from(settings, std::io::stdin().lock());
    eprintln!("{}", summary.line());
    Ok(Output {
        text: String::new(),
        json: session_end_json(&summary),
        exit: exit(EXIT_DONE),
    })
}

/// The JSON form of a session-end summary.
pub(crate) fn session_end_json(summary: &SessionEndSummary) -> serde_json::Value {
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
pub(crate) fn session_end_from(settings: &Settings, input: impl Read) -> SessionEndSummary {
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
        job.failure = Some(JobFailure::new(
            FailureKind::Died,
            "the Claude Code session ended before a worker ran the job",
        ));
    });
    match outcome {
        Ok((finished, true)) => {
            summary.died += 1;
            let engine: Vec<&liveness::ProcessStamp> = finished.engine_process.iter().collect();
            liveness::terminate(&engine, CANCEL_GRACE);
            if let Some(engine) = &finished.engine_process {
                liveness::end_orphaned_group(engine, CANCEL_GRACE);
            }
        }
        Ok(_) => {}
        Err(error) => summary.problems.push(error.to_string()),
    }
}

/// Removes regular files of this user directly in `dir` that were last modified more than
/// `max_age` ago (transport files are consumed, so those left are unused). Returns how many.
pub(crate) fn remove_stale_transport(dir: &Path, max_age: Duration) -> usize {
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

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};

    use super::*;
    use crate::jobs::{Delivery, ProcessStamp, Role, RunMode};

    struct Fixture {
        _dirs: (tempfile::TempDir, tempfile::TempDir),
        settings: Settings,
        workspace: PathBuf,
        store: JobStore,
    }

    fn fixture() -> Fixture {
        let data = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        let settings = Settings {
            data_dir: data.path().join("data"),
            timeout: Duration::from_secs(540),
            exit_grace: Duration::from_secs(15),
            wait_timeout: Duration::from_millis(300),
            wait_poll: Duration::from_millis(20),
            pidless_running_grace: Duration::from_secs(10),
            history_limit: 20,
        };
        let store = JobStore::from_settings(&settings).unwrap();
        Fixture {
            workspace: fs::canonicalize(workspace.path()).unwrap(),
            _dirs: (data, workspace),
            settings,
            store,
        }
    }

    impl Fixture {
        fn job(&self, worker: Option<ProcessStamp>, prompt: &str) -> JobRecord {
            let mut record =
                JobRecord::new(Role::Task, RunMode::Consult, self.workspace.clone(), prompt)
                    .unwrap();
            record.worker = worker;
            self.store.create(&record).unwrap();
            record
        }

        fn finished(&self, status: JobStatus, failure: Option<JobFailure>) -> JobRecord {
            let record = self.job(Some(ProcessStamp::current().unwrap()), "finished job");
            self.store
                .finish(&self.workspace, &record.id, status, |r| {
                    r.result = Some("the answer".into());
                    r.session_id = Some("sess-1".into());
                    r.delivery = Delivery::Complete;
                    r.failure = failure;
                })
                .unwrap()
        }

        fn cwd(&self) -> Option<PathBuf> {
            Some(self.workspace.clone())
        }
    }

    fn group_leader() -> Child {
        Command::new("sleep")
            .arg("60")
            .process_group(0)
            .spawn()
            .unwrap()
    }

    fn reaped_within(child: &mut Child, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                return true;
            }
            thread::sleep(Duration::from_millis(10));
        }
        false
    }

    fn result_args(id: &str, wait: bool) -> ResultArgs {
        ResultArgs {
            job: id.to_owned(),
            wait,
            cwd: None,
            json: false,
        }
    }

    #[test]
    fn a_missing_cwd_is_an_input_error() {
        let f = fixture();
        let error = status(
            &f.settings,
            StatusArgs {
                job: None,
                all: false,
                cwd: Some(f.workspace.join("absent")),
                json: false,
            },
        )
        .unwrap_err();
        assert_eq!(error.exit_code(), 2);
        let error = result(&f.settings, result_args("not-a-job", false)).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        let error = result(&f.settings, result_args("job-0123456789abcdef", false)).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(error.to_string().contains("no job"), "{error}");
    }

    #[test]
    fn status_shows_one_job_in_detail_and_lists_the_workspace() {
        let f = fixture();
        let done = f.finished(JobStatus::Done, None);
        let running = f.job(Some(ProcessStamp::current().unwrap()), "still going");
        let out = status(
            &f.settings,
            StatusArgs {
                job: Some(done.id.clone()),
                all: false,
                cwd: None,
                json: false,
            },
        )
        .unwrap();
        assert_eq!(out.exit, ExitCode::from(0));
        assert!(
            out.text.starts_with("title: finished job\n"),
            "{}",
            out.text
        );
        assert!(
            out.text.ends_with("semantic: unverified\nstate: done\n"),
            "{}",
            out.text
        );
        assert!(out.text.contains("devin-session: sess-1\n"));
        let out = status(
            &f.settings,
            StatusArgs {
                job: None,
                all: false,
                cwd: f.cwd(),
                json: true,
            },
        )
        .unwrap();
        let lines: Vec<&str> = out.text.lines().collect();
        assert_eq!(lines.len(), 2, "{}", out.text);
        assert!(lines
            .iter()
            .any(|l| l.starts_with(&running.id) && l.contains("running")));
        assert!(lines
            .iter()
            .any(|l| l.starts_with(&done.id) && l.contains("done")));
        assert_eq!(out.json["jobs"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn result_exit_codes_follow_the_outcome() {
        let f = fixture();
        let cases = [
            (f.finished(JobStatus::Done, None), 0),
            (
                f.finished(
                    JobStatus::Error,
                    Some(JobFailure::new(FailureKind::Auth, "log in")),
                ),
                4,
            ),
            (
                f.finished(
                    JobStatus::Error,
                    Some(JobFailure::new(FailureKind::Network, "down")),
                ),
                1,
            ),
            (f.finished(JobStatus::Died, None), 1),
            (f.finished(JobStatus::Cancelled, None), 3),
        ];
        for (record, code) in cases {
            let out = result(&f.settings, result_args(&record.id, false)).unwrap();
            assert_eq!(out.exit, ExitCode::from(code), "{}", out.text);
            assert!(out.text.starts_with("the answer\n"), "{}", out.text);
            assert_eq!(out.json["state"], json!(record.status));
        }
    }

    #[test]
    fn result_wait_gives_up_after_the_budget_with_state_running_and_exit_5() {
        let f = fixture();
        let record = f.job(Some(ProcessStamp::current().unwrap()), "slow");
        let started = Instant::now();
        let out = result(&f.settings, result_args(&record.id, true)).unwrap();
        assert!(started.elapsed() >= f.settings.wait_timeout);
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(out.exit, ExitCode::from(5));
        assert!(out.text.ends_with("state: running\n"), "{}", out.text);
    }

    #[test]
    fn result_wait_returns_once_the_job_ends() {
        let mut f = fixture();
        f.settings.wait_timeout = Duration::from_secs(10);
        let record = f.job(Some(ProcessStamp::current().unwrap()), "soon");
        let store = f.store.clone();
        let (workspace, id) = (f.workspace.clone(), record.id.clone());
        let finisher = thread::spawn(move || {
            thread::sleep(Duration::from_millis(150));
            store
                .finish(&workspace, &id, JobStatus::Done, |r| {
                    r.result = Some("finally".into());
                })
                .unwrap();
        });
        let started = Instant::now();
        let out = result(&f.settings, result_args(&record.id, true)).unwrap();
        finisher.join().unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(out.exit, ExitCode::from(0));
        assert!(out.text.starts_with("finally\n"), "{}", out.text);
    }

    #[test]
    fn cancel_finishes_first_then_ends_worker_and_engine_groups() {
        let f = fixture();
        let mut worker = group_leader();
        let mut engine = group_leader();
        let worker_stamp = ProcessStamp::of_pid(worker.id() as i32).unwrap().unwrap();
        let record = f.job(Some(worker_stamp), "to cancel");
        f.store
            .update_running(&f.workspace, &record.id, |r| {
                r.engine_process = ProcessStamp::of_pid(engine.id() as i32).unwrap();
            })
            .unwrap();
        let out = cancel(
            &f.settings,
            CancelArgs {
                job: record.id.clone(),
                cwd: f.cwd(),
                json: false,
            },
        )
        .unwrap();
        assert_eq!(out.exit, ExitCode::from(0));
        assert!(
            out.text
                .ends_with("state: cancelled\nfailure: cancelled: cancelled by the user\n"),
            "{}",
            out.text
        );
        assert!(reaped_within(&mut worker, Duration::from_secs(5)));
        assert!(reaped_within(&mut engine, Duration::from_secs(5)));
        // The worker's own finish, arriving late, changes nothing.
        let after = f
            .store
            .finish(&f.workspace, &record.id, JobStatus::Done, |r| {
                r.result = Some("late".into());
            })
            .unwrap();
        assert_eq!(after.status, JobStatus::Cancelled);
        assert_eq!(after.result, None);
        let again = cancel(
            &f.settings,
            CancelArgs {
                job: record.id.clone(),
                cwd: None,
                json: true,
            },
        )
        .unwrap();
        assert_eq!(again.exit, ExitCode::from(0));
        assert!(again.text.contains("already ended"), "{}", again.text);
        assert_eq!(again.json["cancelled"], json!(false));
    }

    #[test]
    fn cancel_signals_a_worker_that_shares_its_callers_group_alone() {
        let f = fixture();
        // Same process group as this test: signalling the group would end the test runner.
        let mut worker = Command::new("sleep").arg("60").spawn().unwrap();
        let stamp = ProcessStamp::of_pid(worker.id() as i32).unwrap().unwrap();
        let record = f.job(Some(stamp), "foreground");
        let out = cancel(
            &f.settings,
            CancelArgs {
                job: record.id,
                cwd: None,
                json: false,
            },
        )
        .unwrap();
        assert!(out.text.contains("state: cancelled"));
        assert!(reaped_within(&mut worker, Duration::from_secs(5)));
    }

    #[test]
    fn history_shows_the_safe_projection_only() {
        let f = fixture();
        let record = f.job(
            Some(ProcessStamp::current().unwrap()),
            "Explain the parser\nprompt body with details",
        );
        f.store
            .finish(&f.workspace, &record.id, JobStatus::Done, |r| {
                r.result = Some("the answer".into());
                r.session_id = Some("sess-1".into());
                r.warn("project config found at /home/me/.devin/config.json");
            })
            .unwrap();
        let out = history(
            &f.settings,
            HistoryArgs {
                all: false,
                limit: None,
                cwd: f.cwd(),
                json: true,
            },
        )
        .unwrap();
        assert!(out.text.contains(&record.id));
        assert!(out.text.contains("sess-1"));
        assert!(out.text.contains("Explain the parser"));
        for secret in ["the answer", "prompt body", ".devin/config.json"] {
            assert!(!out.text.contains(secret), "{}", out.text);
            assert!(!out.json.to_string().contains(secret), "{}", out.json);
        }
        let job = &out.json["jobs"][0];
        let mut keys: Vec<&String> = job.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "createdAt",
                "devinSession",
                "id",
                "mode",
                "model",
                "role",
                "state",
                "title"
            ]
        );
        let error = history(
            &f.settings,
            HistoryArgs {
                all: true,
                limit: Some(0),
                cwd: None,
                json: false,
            },
        )
        .unwrap_err();
        assert_eq!(error.exit_code(), 2);
    }

    fn acceptance_args(id: &str, acceptance: &str) -> RecordAcceptanceArgs {
        RecordAcceptanceArgs {
            job_id: id.to_owned(),
            acceptance: acceptance.to_owned(),
            reason: None,
            failure_kind: None,
            source: None,
            accept_failed_transport: false,
            json: false,
        }
    }

    #[test]
    fn record_acceptance_validates_its_input_and_the_job_state() {
        let f = fixture();
        let done = f.finished(JobStatus::Done, None);
        let running = f.job(Some(ProcessStamp::current().unwrap()), "running");
        let input_errors = [
            acceptance_args(&done.id, "maybe"),
            RecordAcceptanceArgs {
                source: Some("robot".into()),
                ..acceptance_args(&done.id, "rejected")
            },
            RecordAcceptanceArgs {
                failure_kind: Some("flaky".into()),
                ..acceptance_args(&done.id, "rejected")
            },
            RecordAcceptanceArgs {
                failure_kind: Some("error".into()),
                ..acceptance_args(&done.id, "accepted")
            },
            acceptance_args(&running.id, "accepted"),
            acceptance_args("job-0123456789abcdef", "accepted"),
            acceptance_args("nope", "accepted"),
        ];
        for args in input_errors {
            let error = record_acceptance(&f.settings, args.clone()).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{args:?}: {error}");
        }
        let out = record_acceptance(
            &f.settings,
            RecordAcceptanceArgs {
                reason: Some("tests fail\nbadly".into()),
                failure_kind: Some("error".into()),
                source: Some("main-loop".into()),
                ..acceptance_args(&done.id, "rejected")
            },
        )
        .unwrap();
        assert!(out.text.contains("semantic: rejected\n"), "{}", out.text);
        assert_eq!(out.json["acceptance"]["reason"], "tests fail badly");
        assert_eq!(out.json["acceptance"]["source"], "main-loop");
        let error =
            record_acceptance(&f.settings, acceptance_args(&done.id, "accepted")).unwrap_err();
        assert_eq!(error.exit_code(), 2);
    }

    #[test]
    fn session_end_cancels_live_jobs_of_the_session_and_marks_the_rest_died() {
        let f = fixture();
        let mut worker = group_leader();
        let stamp = ProcessStamp::of_pid(worker.id() as i32).unwrap().unwrap();
        let ours = |worker: Option<ProcessStamp>, session: &str| {
            let mut record =
                JobRecord::new(Role::Task, RunMode::Write, f.workspace.clone(), "job").unwrap();
            record.worker = worker;
            record.claude_session_id = Some(session.to_owned());
            f.store.create(&record).unwrap();
            record
        };
        let live = ours(Some(stamp), "session-a");
        let pidless = ours(None, "session-a");
        let other = ours(Some(ProcessStamp::current().unwrap()), "session-b");
        let transport = f.settings.data_dir.join("transport");
        fs::create_dir_all(&transport).unwrap();
        let stale = transport.join("0123456789abcdef0123456789abcdef");
        let fresh = transport.join("fedcba9876543210fedcba9876543210");
        fs::write(&stale, b"--write").unwrap();
        fs::write(&fresh, b"--write").unwrap();
        fs::File::open(&stale)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(1200))
            .unwrap();
        let summary = session_end_from(
            &f.settings,
            br#"{"session_id":"session-a","reason":"exit"}"#.as_slice(),
        );
        assert_eq!(summary.cancelled, 1, "{summary:?}");
        assert_eq!(summary.died, 1, "{summary:?}");
        assert_eq!(summary.transport_removed, 1);
        assert!(summary.problems.is_empty(), "{summary:?}");
        assert!(!stale.exists() && fresh.exists());
        assert!(reaped_within(&mut worker, Duration::from_secs(5)));
        let state = |id: &str| f.store.get(None, id).unwrap().status;
        assert_eq!(state(&live.id), JobStatus::Cancelled);
        assert_eq!(state(&pidless.id), JobStatus::Died);
        assert_eq!(state(&other.id), JobStatus::Running);
        assert!(summary.line().contains("cancelled 1, marked 1 died"));
    }

    #[test]
    fn session_end_never_fails_on_bad_input() {
        let f = fixture();
        let record = f.job(Some(ProcessStamp::current().unwrap()), "untouched");
        for input in [
            &b"not json"[..],
            b"{}",
            b"{\"session_id\": 7}",
            &[b'x'; 70_000][..],
        ] {
            let summary = session_end_from(&f.settings, input);
            assert_eq!(summary.session_id, None);
            assert_eq!(summary.cancelled + summary.died, 0);
        }
        assert_eq!(
            f.store.get(None, &record.id).unwrap().status,
            JobStatus::Running
        );
        let mut broken = f.settings.clone();
        broken.data_dir = f.workspace.join("file");
        fs::write(&broken.data_dir, b"").unwrap();
        let summary = session_end_from(&broken, br#"{"session_id":"s"}"#.as_slice());
        assert!(!summary.problems.is_empty());
    }
}
