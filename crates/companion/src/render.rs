//! What companion commands print: the footer block that ends every outcome, human text for
//! status, result and history, and the `--json` objects.

use std::fmt::Write as _;
use std::time::SystemTime;

use serde_json::{json, Value};

use super::jobs::clock::{age_of, short_age};
use super::jobs::{JobRecord, JobStatus};

/// Text made safe for one output line (control characters become spaces).
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The footer block, in its fixed order:
///
/// ```text
/// devin-session: <id>      (only for a terminal job with a session)
/// job: <id>
/// sandbox: read-only | workspace-write
/// delivery: pending | complete | late_close | failed
/// semantic: unverified | accepted | rejected
/// warning: <each warning>
/// state: running | done | error | cancelled | died
/// failure: <kind>: <message>   (only for error, cancelled and died)
/// ```
pub(crate) fn footer(record: &JobRecord) -> String {
    let mut out = String::new();
    if let Some(session) = record.resumable_session() {
        let _ = writeln!(out, "devin-session: {}", one_line(session));
    }
    let _ = writeln!(out, "job: {}", record.id);
    let _ = writeln!(out, "sandbox: {}", record.mode.sandbox());
    let _ = writeln!(out, "delivery: {}", record.delivery.as_str());
    let _ = writeln!(out, "semantic: {}", record.semantic().as_str());
    for warning in &record.warnings {
        let _ = writeln!(out, "warning: {}", one_line(warning));
    }
    let _ = writeln!(out, "state: {}", record.status);
    if let Some(line) = failure_line(record) {
        let _ = writeln!(out, "failure: {line}");
    }
    out
}

/// `<kind>: <message>` for error, cancelled and died jobs.
fn failure_line(record: &JobRecord) -> Option<String> {
    if !matches!(
        record.status,
        JobStatus::Error | JobStatus::Cancelled | JobStatus::Died
    ) {
        return None;
    }
    Some(match &record.failure {
        Some(failure) => format!("{}: {}", failure.kind, one_line(&failure.message)),
        None => format!("{}: no failure was recorded", record.status),
    })
}

/// For a job that ended in error, cancelled or died: the stored tail of the agent's stderr,
/// one `stderr: <line>` per line (a failing CLI says why there, often not on stdout). Printed
/// by `result` and `status JOB` just before the footer, whose fixed order it leaves alone.
fn stderr_lines(record: &JobRecord) -> String {
    let mut out = String::new();
    if failure_line(record).is_none() {
        return out;
    }
    for line in record.stderr_tail.iter().flat_map(|tail| tail.lines()) {
        let _ = writeln!(out, "stderr: {}", one_line(line).trim_end());
    }
    out
}

/// The footer's facts as JSON.
pub(crate) fn footer_json(record: &JobRecord) -> Value {
    json!({
        "devinSession": record.resumable_session(),
        "job": record.id,
        "sandbox": record.mode.sandbox(),
        "delivery": record.delivery,
        "semantic": record.semantic(),
        "warnings": record.warnings,
        "state": record.status,
        "failure": failure_line(record).and(record.failure.as_ref()),
    })
}

fn age(record: &JobRecord, now: SystemTime) -> String {
    age_of(&record.created_at, now).map_or_else(|| "?".to_owned(), short_age)
}

/// One job in detail, then its footer.
pub(crate) fn status_detail(record: &JobRecord, now: SystemTime) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "title: {}", one_line(&record.title));
    let _ = writeln!(
        out,
        "kind: {} ({}){}",
        record.role.as_str(),
        record.mode.as_str(),
        if record.background {
            ", background"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "workspace: {}",
        one_line(&record.workspace.to_string_lossy())
    );
    let _ = writeln!(
        out,
        "created: {} ({} ago)",
        record.created_at,
        age(record, now)
    );
    if let Some(finished) = &record.finished_at {
        let _ = writeln!(out, "finished: {finished}");
    }
    if let Some(model) = record.model() {
        let _ = writeln!(out, "model: {}", one_line(model));
    }
    if let Some(effort) = record
        .effort_applied
        .as_ref()
        .or(record.requested_effort.as_ref())
    {
        let _ = writeln!(out, "effort: {}", one_line(effort));
    }
    if let Some(resumed) = &record.resumed_from {
        let _ = writeln!(out, "resumed from: {}", one_line(resumed));
    }
    if let Some(worker) = &record.worker {
        if !record.is_terminal() {
            let _ = writeln!(out, "worker pid: {}", worker.pid);
        }
    }
    out.push_str(&stderr_lines(record));
    out.push_str(&footer(record));
    out
}

/// One line of a status listing: id, state, mode, age, title.
pub(crate) fn status_line(record: &JobRecord, now: SystemTime) -> String {
    format!(
        "{}  {:<9}  {:<7}  {:>4}  {}",
        record.id,
        record.status.as_str(),
        record.mode.as_str(),
        age(record, now),
        one_line(&record.title)
    )
}

/// A status listing; `with_workspace` appends each job's workspace (for `--all`).
pub(crate) fn status_list(
    records: &[JobRecord],
    warnings: &[String],
    now: SystemTime,
    with_workspace: bool,
) -> String {
    let mut out = String::new();
    for warning in warnings {
        let _ = writeln!(out, "warning: {}", one_line(warning));
    }
    if records.is_empty() {
        out.push_str("no jobs\n");
    }
    for record in records {
        out.push_str(&status_line(record, now));
        if with_workspace {
            let _ = write!(out, "  ({})", one_line(&record.workspace.to_string_lossy()));
        }
        out.push('\n');
    }
    out
}

/// A job's outcome: the result text (or the review, or a note that it still runs), then the
/// footer.
pub(crate) fn result_text(record: &JobRecord, now: SystemTime) -> String {
    let mut out = String::new();
    if let Some(review) = &record.review {
        out.push_str(&serde_json::to_string_pretty(review).unwrap_or_default());
        out.push('\n');
    } else if let Some(result) = &record.result {
        out.push_str(result);
        if !result.ends_with('\n') {
            out.push('\n');
        }
    } else if !record.is_terminal() {
        let _ = writeln!(
            out,
            "job {} is still running (started {} ago)",
            record.id,
            age(record, now)
        );
    }
    out.push_str(&stderr_lines(record));
    out.push_str(&footer(record));
    out
}

/// One history line: id, created, mode, role, state, session (when resumable), model, title.
/// Never the prompt, the result or warnings.
pub(crate) fn history_line(record: &JobRecord) -> String {
    format!(
        "{}  {}  {:<7}  {:<6}  {:<9}  {}  {}  {}",
        record.id,
        record.created_at,
        record.mode.as_str(),
        record.role.as_str(),
        record.status.as_str(),
        one_line(record.resumable_session().unwrap_or("-")),
        one_line(record.model().unwrap_or("-")),
        one_line(&record.title)
    )
}

/// A history listing (safe projection only).
pub(crate) fn history_text(records: &[JobRecord], warnings: &[String]) -> String {
    let mut out = String::new();
    for warning in warnings {
        let _ = writeln!(out, "warning: {}", one_line(warning));
    }
    if records.is_empty() {
        out.push_str("no jobs\n");
    }
    for record in records {
        out.push_str(&history_line(record));
        out.push('\n');
    }
    out
}

/// The history projection of one job as JSON: the same facts as [`history_line`].
pub(crate) fn history_json(record: &JobRecord) -> Value {
    json!({
        "id": record.id,
        "createdAt": record.created_at,
        "mode": record.mode,
        "role": record.role,
        "state": record.status,
        "devinSession": record.resumable_session(),
        "model": record.model(),
        "title": record.title,
    })
}

/// A job as JSON: every record field except the private config directory, plus the
/// footer's facts (`job`, `state`, `sandbox`, `semantic`, `devinSession`, ...) at the top
/// level under the same names as the footer lines.
pub(crate) fn record_json(record: &JobRecord) -> Value {
    let mut value = serde_json::to_value(record).unwrap_or_else(|_| json!({}));
    if let Value::Object(map) = &mut value {
        map.remove("configDir");
        if let Value::Object(footer) = footer_json(record) {
            for (key, fact) in footer {
                map.insert(key, fact);
            }
        }
    }
    value
}

/// A listing as JSON: `{"jobs": [...], "warnings": [...]}`.
pub(crate) fn list_json(jobs: Vec<Value>, warnings: &[String]) -> Value {
    json!({ "jobs": jobs, "warnings": warnings })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::failure::{FailureKind, JobFailure};
    use crate::jobs::{Acceptance, AcceptanceState, Delivery, JobRecord, JobStatus, Role, RunMode};

    fn record() -> JobRecord {
        let mut record = JobRecord::new(
            Role::Task,
            RunMode::Consult,
            PathBuf::from("/work/project"),
            "Explain the parser\nsecret prompt body line",
        )
        .unwrap();
        record.session_id = Some("sess-123".to_owned());
        record
    }

    #[test]
    fn footer_of_a_running_job_has_no_session_and_no_failure() {
        let record = record();
        let footer = footer(&record);
        let expected = format!(
            "job: {}\nsandbox: read-only\ndelivery: pending\nsemantic: unverified\nstate: running\n",
            record.id
        );
        assert_eq!(footer, expected);
    }

    #[test]
    fn footer_of_a_cancelled_write_job_lists_everything_in_order() {
        let mut record = record();
        record.mode = RunMode::Write;
        record.status = JobStatus::Cancelled;
        record.delivery = Delivery::LateClose;
        record.warnings = vec!["late_close".to_owned(), "two\nlines".to_owned()];
        record.failure = Some(JobFailure::new(
            FailureKind::Cancelled,
            "cancelled by the user",
        ));
        record.acceptance = Some(Acceptance {
            acceptance: AcceptanceState::Rejected,
            reason: None,
            failure_kind: None,
            source: None,
            recorded_at: "2026-01-01T00:00:00.000Z".to_owned(),
        });
        let expected = format!(
            "devin-session: sess-123\njob: {}\nsandbox: workspace-write\ndelivery: late_close\n\
             semantic: rejected\nwarning: late_close\nwarning: two lines\nstate: cancelled\n\
             failure: cancelled: cancelled by the user\n",
            record.id
        );
        assert_eq!(footer(&record), expected);
    }

    #[test]
    fn done_jobs_print_no_failure_line_even_if_one_is_set() {
        let mut record = record();
        record.status = JobStatus::Done;
        record.failure = Some(JobFailure::new(FailureKind::Error, "stale"));
        assert!(!footer(&record).contains("failure:"));
        assert!(footer_json(&record)["failure"].is_null());
    }

    #[test]
    fn result_prints_the_text_then_the_footer() {
        let mut record = record();
        record.status = JobStatus::Done;
        record.result = Some("The answer.".to_owned());
        let text = result_text(&record, SystemTime::now());
        assert!(
            text.starts_with("The answer.\ndevin-session: sess-123\n"),
            "{text}"
        );
        assert!(text.ends_with("state: done\n"));
    }

    #[test]
    fn a_failed_job_shows_its_stderr_tail_before_the_footer_and_a_done_one_does_not() {
        let mut record = record();
        record.status = JobStatus::Error;
        record.result = Some(String::new());
        record.stderr_tail = Some("Error: quota exceeded\n\tretry later\u{7}".to_owned());
        record.failure = Some(JobFailure::new(FailureKind::Error, "exit 7"));
        let lines = "stderr: Error: quota exceeded\nstderr:  retry later\n";
        let now = SystemTime::now();
        for text in [result_text(&record, now), status_detail(&record, now)] {
            assert!(
                text.contains(&format!("{lines}devin-session: sess-123\n")),
                "{text}"
            );
        }
        record.status = JobStatus::Done;
        for text in [result_text(&record, now), status_detail(&record, now)] {
            assert!(!text.contains("stderr:"), "{text}");
        }
        assert!(!history_json(&record).to_string().contains("quota"));
    }

    #[test]
    fn result_of_a_review_prints_the_review_object_not_the_raw_reply() {
        let mut record = record();
        record.role = Role::Review;
        record.mode = RunMode::Review;
        record.status = JobStatus::Done;
        record.result = Some("raw reply with prose around the JSON".to_owned());
        record.review = Some(json!({"verdict": "approve", "findings": []}));
        let text = result_text(&record, SystemTime::now());
        assert!(
            text.starts_with("{\n  \"verdict\": \"approve\",\n  \"findings\": []\n}\n"),
            "{text}"
        );
        assert!(!text.contains("raw reply"), "{text}");
        assert!(
            text.ends_with(
                "sandbox: read-only\ndelivery: pending\nsemantic: unverified\nstate: done\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn status_list_has_one_line_per_job_and_names_workspaces_for_all() {
        let running = record();
        let mut done = record();
        done.status = JobStatus::Done;
        let now = SystemTime::now();
        let text = status_list(
            &[running.clone(), done.clone()],
            &["moved x".to_owned()],
            now,
            true,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0], "warning: moved x");
        assert!(
            lines[1].starts_with(&format!("{}  running    consult", running.id)),
            "{text}"
        );
        assert!(
            lines[1].ends_with("Explain the parser  (/work/project)"),
            "{text}"
        );
        assert!(lines[2].contains("done"), "{text}");
        assert_eq!(status_list(&[], &[], now, false), "no jobs\n");
    }

    #[test]
    fn history_projection_excludes_prompt_result_and_warnings() {
        let mut record = record();
        record.status = JobStatus::Done;
        record.result = Some("RESULT-TEXT".to_owned());
        record.warnings = vec!["project config at /home/me/.devin/config.json".to_owned()];
        record.observed_model = Some("swe-1-5".to_owned());
        let line = history_line(&record);
        let json = history_json(&record).to_string();
        for text in [&line, &json] {
            assert!(!text.contains("RESULT-TEXT"), "{text}");
            assert!(!text.contains("secret prompt body"), "{text}");
            assert!(!text.contains(".devin/config.json"), "{text}");
            assert!(text.contains("sess-123"), "{text}");
            assert!(text.contains("swe-1-5"), "{text}");
            assert!(text.contains("Explain the parser"), "{text}");
        }
    }

    #[test]
    fn record_json_carries_footer_facts_and_hides_the_config_dir() {
        let mut record = record();
        record.config_dir = Some(PathBuf::from("/data/runs/x/config"));
        let json = record_json(&record);
        assert_eq!(json["job"], json!(record.id));
        assert_eq!(json["state"], "running");
        assert_eq!(json["sandbox"], "read-only");
        assert_eq!(json["semantic"], "unverified");
        assert!(json["devinSession"].is_null());
        assert!(json.get("configDir").is_none());
    }
}
