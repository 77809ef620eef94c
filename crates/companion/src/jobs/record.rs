//! One job's record: what was asked, who runs it, how it ended.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::clock::now_rfc3339;
use super::liveness::ProcessStamp;
use crate::failure::{bound_text, clean_message, clean_tail, FailureKind, JobFailure};

/// The record format version this code reads and writes.
pub(crate) const SCHEMA: u32 = 1;
/// The longest stored result text (bytes).
pub(crate) const RESULT_LIMIT: usize = 1024 * 1024;
/// The longest title (characters).
pub(crate) const TITLE_LIMIT: usize = 80;
/// The longest stored warning (bytes) and the most warnings kept.
pub(crate) const WARNING_LIMIT: usize = 1024;
pub(crate) const WARNINGS_MAX: usize = 64;
/// Other free-text fields (model names, ids, reasons) are bounded to this many bytes.
pub(crate) const FIELD_LIMIT: usize = 512;
/// The longest stored tail of the agent's stderr (bytes).
pub(crate) const STDERR_TAIL_LIMIT: usize = 4096;

/// The state of a job. Every state but `running` is terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Running,
    Done,
    Error,
    Cancelled,
    Died,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Done => "done",
            JobStatus::Error => "error",
            JobStatus::Cancelled => "cancelled",
            JobStatus::Died => "died",
        }
    }

    pub fn is_terminal(self) -> bool {
        self != JobStatus::Running
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of job it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Task,
    Review,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Task => "task",
            Role::Review => "review",
        }
    }
}

/// Which tools the agent may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunMode {
    Consult,
    Write,
    Review,
}

impl RunMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RunMode::Consult => "consult",
            RunMode::Write => "write",
            RunMode::Review => "review",
        }
    }

    /// The footer's `sandbox:` value.
    pub fn sandbox(self) -> &'static str {
        match self {
            RunMode::Write => "workspace-write",
            RunMode::Consult | RunMode::Review => "read-only",
        }
    }
}

/// Whether the agent's answer reached the companion completely.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    #[default]
    Pending,
    Complete,
    LateClose,
    Failed,
}

impl Delivery {
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Pending => "pending",
            Delivery::Complete => "complete",
            Delivery::LateClose => "late_close",
            Delivery::Failed => "failed",
        }
    }
}

/// The caller's judgement of a finished job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AcceptanceState {
    Accepted,
    Rejected,
    Unverified,
}

impl AcceptanceState {
    pub fn as_str(self) -> &'static str {
        match self {
            AcceptanceState::Accepted => "accepted",
            AcceptanceState::Rejected => "rejected",
            AcceptanceState::Unverified => "unverified",
        }
    }
}

impl FromStr for AcceptanceState {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "accepted" => Ok(AcceptanceState::Accepted),
            "rejected" => Ok(AcceptanceState::Rejected),
            "unverified" => Ok(AcceptanceState::Unverified),
            other => Err(format!(
                "--acceptance must be accepted, rejected or unverified, not {:?}",
                bound_text(other, 64)
            )),
        }
    }
}

/// Who recorded the acceptance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AcceptanceSource {
    Collector,
    MainLoop,
    Stats,
}

impl FromStr for AcceptanceSource {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "collector" => Ok(AcceptanceSource::Collector),
            "main-loop" => Ok(AcceptanceSource::MainLoop),
            "stats" => Ok(AcceptanceSource::Stats),
            other => Err(format!(
                "--source must be collector, main-loop or stats, not {:?}",
                bound_text(other, 64)
            )),
        }
    }
}

/// The recorded acceptance of a terminal job (set at most once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Acceptance {
    pub acceptance: AcceptanceState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_kind: Option<FailureKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<AcceptanceSource>,
    pub recorded_at: String,
}

/// One job. Stored as `<data>/state/<workspace-key>/jobs/<id>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobRecord {
    pub schema: u32,
    pub id: String,
    pub engine: String,
    pub status: JobStatus,
    pub role: Role,
    pub mode: RunMode,
    pub workspace: PathBuf,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub finished_at: Option<String>,
    #[serde(default)]
    pub background: bool,
    #[serde(default)]
    pub claude_session_id: Option<String>,
    #[serde(default)]
    pub worker: Option<ProcessStamp>,
    #[serde(default)]
    pub engine_process: Option<ProcessStamp>,
    #[serde(default)]
    pub devin_version: Option<String>,
    #[serde(default)]
    pub devin_build_path: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub request_id: Option<String>,
    #[serde(default)]
    pub resumed_from: Option<String>,
    #[serde(default)]
    pub requested_model: Option<String>,
    #[serde(default)]
    pub resolved_model: Option<String>,
    #[serde(default)]
    pub observed_model: Option<String>,
    #[serde(default)]
    pub requested_effort: Option<String>,
    #[serde(default)]
    pub effort_applied: Option<String>,
    #[serde(default)]
    pub billing_pool: Option<String>,
    #[serde(default)]
    pub usage: Option<serde_json::Value>,
    #[serde(default)]
    pub stop_reason: Option<String>,
    #[serde(default)]
    pub stop_cause: Option<String>,
    #[serde(default)]
    pub config_dir: Option<PathBuf>,
    #[serde(default)]
    pub warnings: Vec<String>,
    pub title: String,
    #[serde(default)]
    pub result: Option<String>,
    /// The end of what a print run's `devin -p` wrote on stderr (cleaned, at most
    /// [`STDERR_TAIL_LIMIT`] bytes): where a failing CLI says why. Shown with a failed job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
    #[serde(default)]
    pub review: Option<serde_json::Value>,
    #[serde(default)]
    pub delivery: Delivery,
    #[serde(default)]
    pub acceptance: Option<Acceptance>,
    #[serde(default)]
    pub failure: Option<JobFailure>,
}

impl JobRecord {
    /// A new running record with a fresh id, created now, with no worker yet.
    /// `workspace` should be canonical; `prompt` only gives the title (it is not stored).
    pub fn new(
        role: Role,
        mode: RunMode,
        workspace: PathBuf,
        prompt: &str,
    ) -> std::io::Result<Self> {
        let now = now_rfc3339();
        Ok(JobRecord {
            schema: SCHEMA,
            id: new_job_id()?,
            engine: "devin".to_owned(),
            status: JobStatus::Running,
            role,
            mode,
            workspace,
            created_at: now.clone(),
            updated_at: now,
            finished_at: None,
            background: false,
            claude_session_id: claude_session_id_from_env(),
            worker: None,
            engine_process: None,
            devin_version: None,
            devin_build_path: None,
            session_id: None,
            request_id: None,
            resumed_from: None,
            requested_model: None,
            resolved_model: None,
            observed_model: None,
            requested_effort: None,
            effort_applied: None,
            billing_pool: None,
            usage: None,
            stop_reason: None,
            stop_cause: None,
            config_dir: None,
            warnings: Vec::new(),
            title: title_of(prompt),
            result: None,
            stderr_tail: None,
            review: None,
            delivery: Delivery::Pending,
            acceptance: None,
            failure: None,
        })
    }

    /// Whether the job has ended.
    pub fn is_terminal(&self) -> bool {
        self.status.is_terminal()
    }

    /// The session a later task may resume: only a terminal job's session.
    pub fn resumable_session(&self) -> Option<&str> {
        if self.is_terminal() {
            self.session_id.as_deref()
        } else {
            None
        }
    }

    /// The acceptance shown in the footer (`unverified` until one is recorded).
    pub fn semantic(&self) -> AcceptanceState {
        self.acceptance
            .as_ref()
            .map_or(AcceptanceState::Unverified, |acceptance| {
                acceptance.acceptance
            })
    }

    /// The model to name: observed, else resolved, else requested.
    pub fn model(&self) -> Option<&str> {
        self.observed_model
            .as_deref()
            .or(self.resolved_model.as_deref())
            .or(self.requested_model.as_deref())
    }

    /// Adds a warning (cleaned and bounded; at most [`WARNINGS_MAX`] are kept).
    pub fn warn(&mut self, warning: impl AsRef<str>) {
        if self.warnings.len() < WARNINGS_MAX {
            self.warnings
                .push(bound_text(&clean_message(warning.as_ref()), WARNING_LIMIT));
        }
    }

    /// Bounds every free-text field, so that no record grows without limit whatever the
    /// agent sent.
    pub fn enforce_bounds(&mut self) {
        if let Some(result) = &mut self.result {
            if result.len() > RESULT_LIMIT {
                *result = bound_text(result, RESULT_LIMIT);
            }
        }
        if let Some(tail) = &mut self.stderr_tail {
            if tail.len() > STDERR_TAIL_LIMIT {
                *tail = clean_tail(tail, STDERR_TAIL_LIMIT);
            }
        }
        self.title = title_of(&self.title);
        self.warnings.truncate(WARNINGS_MAX);
        for warning in &mut self.warnings {
            if warning.len() > WARNING_LIMIT {
                *warning = bound_text(warning, WARNING_LIMIT);
            }
        }
        for field in [
            &mut self.claude_session_id,
            &mut self.devin_version,
            &mut self.devin_build_path,
            &mut self.session_id,
            &mut self.request_id,
            &mut self.resumed_from,
            &mut self.requested_model,
            &mut self.resolved_model,
            &mut self.observed_model,
            &mut self.requested_effort,
            &mut self.effort_applied,
            &mut self.billing_pool,
            &mut self.stop_reason,
            &mut self.stop_cause,
        ]
        .into_iter()
        .flatten()
        {
            if field.len() > FIELD_LIMIT {
                *field = bound_text(field, FIELD_LIMIT);
            }
        }
        if let Some(failure) = &mut self.failure {
            failure.message = clean_message(&failure.message);
        }
        if let Some(reason) = self.acceptance.as_mut().and_then(|a| a.reason.as_mut()) {
            *reason = clean_message(reason);
        }
    }
}

/// A new job id: `job-` and 16 lowercase hex digits from the OS random source.
pub(crate) fn new_job_id() -> std::io::Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|error| std::io::Error::other(error.to_string()))?;
    Ok(format!("job-{}", hex::encode(bytes)))
}

/// Whether `id` has the exact job id shape `job-[0-9a-f]{16}` (checked before any path is
/// built from it).
pub(crate) fn is_valid_job_id(id: &str) -> bool {
    id.len() == 20
        && id.starts_with("job-")
        && id[4..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The title of a prompt: its first non-empty line, control characters removed, at most
/// [`TITLE_LIMIT`] characters.
pub(crate) fn title_of(prompt: &str) -> String {
    let line = prompt
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    let cleaned: String = line.chars().filter(|c| !c.is_control()).collect();
    let cleaned = cleaned.trim();
    if cleaned.chars().count() <= TITLE_LIMIT {
        cleaned.to_owned()
    } else {
        let mut title: String = cleaned.chars().take(TITLE_LIMIT - 1).collect();
        title.push('…');
        title
    }
}

/// The Claude Code session that started this process, from `CLAUDE_SESSION_ID` or
/// `CLAUDE_CODE_SESSION_ID` (bounded, printable only).
pub(crate) fn claude_session_id_from_env() -> Option<String> {
    ["CLAUDE_SESSION_ID", "CLAUDE_CODE_SESSION_ID"]
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .map(|value| value.trim().to_owned())
        .find(|value| {
            !value.is_empty() && value.len() <= 256 && value.chars().all(|c| c.is_ascii_graphic())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_have_the_documented_shape_and_differ() {
        let a = new_job_id().unwrap();
        let b = new_job_id().unwrap();
        assert!(is_valid_job_id(&a), "{a}");
        assert_ne!(a, b);
        for bad in [
            "job-0123456789ABCDEF",
            "job-0123456789abcde",
            "job-0123456789abcdef0",
            "job-../../etc/passwd1",
            "jab-0123456789abcdef",
            "",
        ] {
            assert!(!is_valid_job_id(bad), "{bad}");
        }
        assert!(is_valid_job_id("job-0123456789abcdef"));
    }

    #[test]
    fn titles_are_the_first_line_without_control_characters_and_bounded() {
        assert_eq!(title_of("\n\n  Fix the\tbug  \nmore"), "Fix thebug");
        let long = "x".repeat(200);
        let title = title_of(&long);
        assert_eq!(title.chars().count(), TITLE_LIMIT);
        assert!(title.ends_with('…'));
        assert_eq!(title_of(""), "");
    }

    #[test]
    fn record_json_is_camel_case_with_snake_case_enums() {
        let mut record =
            JobRecord::new(Role::Task, RunMode::Write, PathBuf::from("/w"), "hello").unwrap();
        record.delivery = Delivery::LateClose;
        record.acceptance = Some(Acceptance {
            acceptance: AcceptanceState::Rejected,
            reason: None,
            failure_kind: Some(FailureKind::RateLimited),
            source: Some(AcceptanceSource::MainLoop),
            recorded_at: "2026-01-01T00:00:00.000Z".to_owned(),
        });
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(json["status"], "running");
        assert_eq!(json["delivery"], "late_close");
        assert_eq!(json["mode"], "write");
        assert_eq!(json["engine"], "devin");
        assert_eq!(json["schema"], 1);
        assert!(json.get("createdAt").is_some());
        assert!(json.get("claudeSessionId").is_some());
        assert_eq!(json["acceptance"]["failureKind"], "rate_limited");
        assert_eq!(json["acceptance"]["source"], "main-loop");
        let back: JobRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, record);
    }

    #[test]
    fn bounds_cap_result_and_warnings() {
        let mut record =
            JobRecord::new(Role::Task, RunMode::Consult, PathBuf::from("/w"), "t").unwrap();
        record.result = Some("r".repeat(RESULT_LIMIT + 10));
        record.warnings = vec!["w".repeat(5000); 100];
        record.stderr_tail = Some(format!("{}the end", "e".repeat(STDERR_TAIL_LIMIT)));
        record.enforce_bounds();
        let tail = record.stderr_tail.as_deref().unwrap();
        assert!(tail.len() <= STDERR_TAIL_LIMIT && tail.ends_with("the end"));
        assert!(record.result.as_ref().unwrap().len() <= RESULT_LIMIT);
        assert_eq!(record.warnings.len(), WARNINGS_MAX);
        assert!(record.warnings.iter().all(|w| w.len() <= WARNING_LIMIT));
    }
}
