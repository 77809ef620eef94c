//! What a command prints ([`Output`]) and how a job's record becomes it ([`job_output`]): the
//! result or review and its footer, with the exit code the job's outcome gives.

use std::process::ExitCode;

use crate::failure::{FailureKind, EXIT_CANCELLED, EXIT_DONE, EXIT_FAILED, EXIT_RUNNING};
use crate::jobs::{JobRecord, JobStatus};
use crate::render;

/// What a companion command prints: `json` with `--json`, else `text`; both to stdout.
#[derive(Debug, Clone)]
pub struct Output {
    pub text: String,
    pub json: serde_json::Value,
    pub exit: ExitCode,
}

/// A finished or running job as printed by task, review and workers: the result (or the
/// review) and the footer; the exit code follows the failure kind (input 2, cancelled 3,
/// engine-wide setup 4, others 1).
pub fn job_output(record: &JobRecord) -> Output {
    let code = match (&record.status, &record.failure) {
        (JobStatus::Error | JobStatus::Died, Some(failure)) => failure.kind.exit_code(),
        _ => exit_code_of(record),
    };
    Output {
        text: render::result_text(record, std::time::SystemTime::now()),
        json: render::record_json(record),
        exit: ExitCode::from(code),
    }
}

/// The exit code of a command that reports this job's outcome.
pub(crate) fn exit_code_of(record: &JobRecord) -> u8 {
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
