//! Job store benchmark: `cargo bench -p devin-bridge --bench jobs`.
//!
//! Creates `JOBS_BENCH_RECORDS` (default 10,000) job records in one workspace through the
//! store (atomic, fsynced writes), plus a few running ones, then times the companion
//! commands that read them: `status` (workspace listing), `history --limit 20`, `status JOB`
//! and `result JOB` (found without `--cwd`, so across every workspace).
//! Goal: `status` and `history` under 50 ms with 10,000 records on disk.
//!
//! `JOBS_BENCH_DATA=DIR` keeps (and on later runs reuses) the data directory; `JOBS_BENCH_ROUNDS`
//! (default 30) sets how many times each command is timed.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use devin_bridge::companion::commands::{self, HistoryArgs, ResultArgs, StatusArgs};
use devin_bridge::companion::jobs::clock::format_rfc3339;
use devin_bridge::companion::jobs::{JobRecord, JobStatus, JobStore, ProcessStamp, Role, RunMode};
use devin_bridge::companion::settings::Settings;

const GOAL: Duration = Duration::from_millis(50);

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn report(name: &str, mut samples: Vec<Duration>, goal: Option<Duration>) {
    samples.sort();
    let p50 = samples[samples.len() / 2];
    let max = samples[samples.len() - 1];
    let verdict = match goal {
        Some(goal) if max < goal => format!("  (goal < {goal:?}: met)"),
        Some(goal) => format!("  (goal < {goal:?}: NOT met)"),
        None => String::new(),
    };
    println!("{name:<28} p50 {p50:>10.2?}  max {max:>10.2?}{verdict}");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let records = env_usize("JOBS_BENCH_RECORDS", 10_000);
    let rounds = env_usize("JOBS_BENCH_ROUNDS", 30).max(1);
    let temporary = tempfile::tempdir()?;
    let data_dir = std::env::var_os("JOBS_BENCH_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| temporary.path().join("data"));
    let workspace = data_dir.with_extension("workspace");
    std::fs::create_dir_all(&workspace)?;
    let workspace = std::fs::canonicalize(&workspace)?;
    let settings = Settings {
        data_dir: data_dir.clone(),
        timeout: Duration::from_secs(540),
        exit_grace: Duration::from_secs(15),
        wait_timeout: Duration::from_secs(1),
        wait_poll: Duration::from_millis(100),
        pidless_running_grace: Duration::from_secs(10),
        history_limit: 20,
    };
    let store = JobStore::from_settings(&settings)?;
    let (existing, _) = store.list(Some(&workspace), usize::MAX)?;
    let base = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let started = Instant::now();
    let mut last_id = existing.first().map(|record| record.id.clone());
    for index in existing.len()..records {
        let mut record = JobRecord::new(
            Role::Task,
            RunMode::Consult,
            workspace.clone(),
            &format!("benchmark job {index}"),
        )?;
        record.created_at = format_rfc3339(base + Duration::from_secs(index as u64 * 5));
        record.status = JobStatus::Done;
        record.result = Some("a result of moderate length ".repeat(40));
        store.create(&record)?;
        last_id = Some(record.id);
    }
    if records > existing.len() {
        println!(
            "created {} records in {:?}",
            records - existing.len(),
            started.elapsed()
        );
    }
    for index in 0..3 {
        let mut running =
            JobRecord::new(Role::Task, RunMode::Write, workspace.clone(), "running job")?;
        running.created_at = format_rfc3339(SystemTime::now() - Duration::from_secs(index));
        running.worker = Some(ProcessStamp::current()?);
        store.create(&running)?;
    }
    let id = last_id.ok_or("no records")?;

    let time = |run: &dyn Fn()| -> Vec<Duration> {
        (0..rounds)
            .map(|_| {
                let started = Instant::now();
                run();
                started.elapsed()
            })
            .collect()
    };
    let status_list = time(&|| {
        let out = commands::status(
            &settings,
            StatusArgs {
                job: None,
                all: false,
                cwd: Some(workspace.clone()),
                json: false,
            },
        )
        .expect("status");
        assert!(out.text.lines().count() >= 20);
    });
    let history = time(&|| {
        let out = commands::history(
            &settings,
            HistoryArgs {
                all: false,
                limit: Some(20),
                cwd: Some(workspace.clone()),
                json: true,
            },
        )
        .expect("history");
        assert!(out.json["jobs"]
            .as_array()
            .is_some_and(|jobs| jobs.len() >= 20));
    });
    let status_one = time(&|| {
        commands::status(
            &settings,
            StatusArgs {
                job: Some(id.clone()),
                all: false,
                cwd: None,
                json: false,
            },
        )
        .expect("status JOB");
    });
    let result = time(&|| {
        commands::result(
            &settings,
            ResultArgs {
                job: id.clone(),
                wait: false,
                cwd: None,
                json: false,
            },
        )
        .expect("result JOB");
    });
    println!("{records} records on disk, {rounds} rounds each:");
    report("status (workspace list)", status_list, Some(GOAL));
    report("history --limit 20", history, Some(GOAL));
    report("status JOB", status_one, None);
    report("result JOB", result, None);
    Ok(())
}
