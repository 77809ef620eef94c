//! Store tests with real files, threads and processes.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::clock::format_rfc3339;
use super::liveness::ProcessStamp;
use super::lock::{RecordLock, LOCK_WAIT};
use super::sweep::{sweep_now, sweep_orphan_runs};
use super::*;
use crate::failure::{FailureKind, JobFailure};
use devin_bridge_agent::process::group::proc_stat;

struct Fixture {
    _data: tempfile::TempDir,
    _workspace: tempfile::TempDir,
    data: PathBuf,
    workspace: PathBuf,
    store: JobStore,
}

fn fixture() -> Fixture {
    let data = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let data_path = data.path().join("companion");
    let workspace_path = fs::canonicalize(workspace.path()).unwrap();
    let store = JobStore::open(&data_path)
        .unwrap()
        .with_engine_kill_grace(Duration::from_millis(500));
    Fixture {
        _data: data,
        _workspace: workspace,
        data: data_path,
        workspace: workspace_path,
        store,
    }
}

impl Fixture {
    fn running(&self, title: &str) -> JobRecord {
        let mut record =
            JobRecord::new(Role::Task, RunMode::Consult, self.workspace.clone(), title).unwrap();
        record.worker = Some(ProcessStamp::current().unwrap());
        self.store.create(&record).unwrap();
        record
    }

    fn jobs_dir(&self) -> PathBuf {
        self.data
            .join("state")
            .join(JobStore::workspace_key(&self.workspace))
            .join("jobs")
    }

    fn raw(&self, id: &str) -> serde_json::Value {
        let text = fs::read_to_string(self.jobs_dir().join(format!("{id}.json"))).unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
}

/// A `sleep` child leading its own process group (as the engine and background workers do).
fn group_leader() -> Child {
    Command::new("sleep")
        .arg("60")
        .process_group(0)
        .spawn()
        .unwrap()
}

fn stamp_of(child: &Child) -> ProcessStamp {
    ProcessStamp::of_pid(child.id() as i32).unwrap().unwrap()
}

fn wait_gone(child: &mut Child, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn records_and_directories_are_private() {
    let f = fixture();
    let record = f.running("hello");
    assert_eq!(mode_of(&f.data), 0o700);
    assert_eq!(mode_of(&f.data.join("state")), 0o700);
    assert_eq!(mode_of(&f.data.join("runs")), 0o700);
    assert_eq!(mode_of(&f.jobs_dir()), 0o700);
    assert_eq!(mode_of(f.jobs_dir().parent().unwrap()), 0o700);
    assert_eq!(
        mode_of(&f.jobs_dir().join(format!("{}.json", record.id))),
        0o600
    );
    assert_eq!(
        mode_of(&f.jobs_dir().join(format!("{}.lock", record.id))),
        0o600
    );
    let named = fs::read_to_string(f.jobs_dir().parent().unwrap().join("workspace")).unwrap();
    assert_eq!(named.trim_end(), f.workspace.to_str().unwrap());
    assert_eq!(f.store.workspaces().unwrap(), vec![f.workspace.clone()]);
}

#[test]
fn a_loose_data_dir_or_record_is_refused() {
    let f = fixture();
    let record = f.running("hello");
    let path = f.jobs_dir().join(format!("{}.json", record.id));
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    let error = f.store.get(None, &record.id).unwrap_err();
    assert!(matches!(error, StoreError::Insecure { .. }), "{error}");
    assert_eq!(error.kind(), FailureKind::Setup);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    f.store.get(None, &record.id).unwrap();

    fs::set_permissions(&f.data, fs::Permissions::from_mode(0o750)).unwrap();
    let error = JobStore::open(&f.data).unwrap_err();
    assert!(matches!(error, StoreError::Insecure { .. }), "{error}");
}

#[test]
fn a_symlinked_record_is_refused() {
    let f = fixture();
    let record = f.running("hello");
    let path = f.jobs_dir().join(format!("{}.json", record.id));
    let elsewhere = f.data.join("elsewhere.json");
    fs::rename(&path, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    let error = f.store.get(None, &record.id).unwrap_err();
    assert!(matches!(error, StoreError::Insecure { .. }), "{error}");
}

#[test]
fn create_is_exclusive_and_ids_are_validated() {
    let f = fixture();
    let record = f.running("first");
    let mut again = record.clone();
    again.title = "second".to_owned();
    assert!(matches!(f.store.create(&again), Err(StoreError::Exists(_))));
    assert_eq!(f.store.get(None, &record.id).unwrap().title, "first");
    for bad in ["../../etc", "job-XYZ", "job-0123456789abcdeg"] {
        assert!(matches!(
            f.store.get(None, bad),
            Err(StoreError::InvalidId(_))
        ));
    }
    assert!(matches!(
        f.store.get(None, "job-0123456789abcdef"),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn a_temporary_file_left_by_a_crash_is_ignored() {
    let f = fixture();
    let record = f.running("kept");
    // What a writer killed between creating its temporary file and the rename leaves.
    let leftover = f
        .jobs_dir()
        .join(format!(".{}.json.tmp-999-0011223344556677", record.id));
    fs::write(&leftover, b"{\"schema\": 1, \"id\": \"half").unwrap();
    let other = f.jobs_dir().join(".job-0123456789abcdef.json.tmp-1-00");
    fs::write(&other, b"garbage").unwrap();
    assert_eq!(f.store.get(None, &record.id).unwrap().title, "kept");
    let (records, warnings) = f.store.list(Some(&f.workspace), 10).unwrap();
    assert_eq!(records.len(), 1);
    assert!(warnings.is_empty(), "{warnings:?}");
    // A later update still works and leaves no temporary file of its own.
    f.store
        .update_running(&f.workspace, &record.id, |r| {
            r.session_id = Some("s".into());
        })
        .unwrap();
    let temporaries = fs::read_dir(f.jobs_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .count();
    assert_eq!(temporaries, 2, "only the two planted leftovers remain");
}

#[test]
fn a_corrupt_record_is_moved_aside_and_named_by_listings() {
    let f = fixture();
    let good = f.running("good");
    let bad = f.running("bad");
    let path = f.jobs_dir().join(format!("{}.json", bad.id));
    fs::write(&path, b"{ not json").unwrap();
    let error = f.store.get(None, &bad.id).unwrap_err();
    let StoreError::Corrupt { moved_to, .. } = &error else {
        panic!("expected corrupt, got {error}");
    };
    assert!(!path.exists());
    assert!(moved_to.exists());
    assert!(moved_to
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with(&format!("{}.json.corrupt-", bad.id)));
    assert!(matches!(
        f.store.get(None, &bad.id),
        Err(StoreError::NotFound(_))
    ));
    for _ in 0..2 {
        let (records, warnings) = f.store.list(Some(&f.workspace), 10).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].id, good.id);
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(&moved_to.display().to_string())),
            "{warnings:?}"
        );
    }
}

#[test]
fn wrong_schema_and_mismatched_ids_count_as_corrupt() {
    let f = fixture();
    let first = f.running("one");
    let second = f.running("two");
    let mut raw = f.raw(&first.id);
    raw["schema"] = serde_json::json!(2);
    let path = f.jobs_dir().join(format!("{}.json", first.id));
    fs::write(&path, serde_json::to_vec(&raw).unwrap()).unwrap();
    let mut raw = f.raw(&second.id);
    raw["id"] = serde_json::json!(first.id);
    let path = f.jobs_dir().join(format!("{}.json", second.id));
    fs::write(&path, serde_json::to_vec(&raw).unwrap()).unwrap();
    let (records, warnings) = f.store.list(Some(&f.workspace), 10).unwrap();
    assert!(records.is_empty());
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings.iter().any(|w| w.contains("schema 2")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains("names job")),
        "{warnings:?}"
    );
}

#[test]
fn sixteen_threads_lose_no_update_on_one_record_or_on_their_own() {
    let f = Arc::new(fixture());
    let shared = f.running("shared");
    let own: Vec<JobRecord> = (0..16).map(|i| f.running(&format!("own {i}"))).collect();
    const ROUNDS: u64 = 15;
    let bump = |record: &mut JobRecord| {
        let count = record
            .usage
            .as_ref()
            .and_then(|u| u["count"].as_u64())
            .unwrap_or(0);
        record.usage = Some(serde_json::json!({ "count": count + 1 }));
    };
    let threads: Vec<_> = own
        .into_iter()
        .map(|mine| {
            let f = Arc::clone(&f);
            let shared = shared.id.clone();
            thread::spawn(move || {
                for _ in 0..ROUNDS {
                    f.store.update_running(&f.workspace, &shared, bump).unwrap();
                    f.store
                        .update_running(&f.workspace, &mine.id, bump)
                        .unwrap();
                }
                mine.id
            })
        })
        .collect();
    let ids: Vec<String> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let count = |id: &str| f.store.get(None, id).unwrap().usage.unwrap()["count"].as_u64();
    assert_eq!(count(&shared.id), Some(16 * ROUNDS));
    for id in ids {
        assert_eq!(count(&id), Some(ROUNDS));
    }
}

#[test]
fn a_reused_pid_with_another_start_time_is_died() {
    let f = fixture();
    let mut record =
        JobRecord::new(Role::Task, RunMode::Write, f.workspace.clone(), "job").unwrap();
    let mut stamp = ProcessStamp::current().unwrap();
    stamp.start_time += 1;
    record.worker = Some(stamp);
    f.store.create(&record).unwrap();
    let read = f.store.get(Some(&f.workspace), &record.id).unwrap();
    assert_eq!(read.status, JobStatus::Died);
    let failure = read.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Died);
    assert!(read.finished_at.is_some());
    // Persisted, and the running marker is gone.
    assert_eq!(f.raw(&record.id)["status"], "died");
    assert!(!f.jobs_dir().join("running").join(&record.id).exists());
}

#[test]
fn kill_9_of_a_real_worker_is_died_at_the_next_read_and_its_engine_group_is_ended() {
    let f = fixture();
    let mut worker = group_leader();
    let mut engine = group_leader();
    let mut record =
        JobRecord::new(Role::Task, RunMode::Consult, f.workspace.clone(), "job").unwrap();
    record.worker = Some(stamp_of(&worker));
    record.engine_process = Some(stamp_of(&engine));
    f.store.create(&record).unwrap();
    assert_eq!(
        f.store.get(None, &record.id).unwrap().status,
        JobStatus::Running
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // Not reaped (a zombie) once the signal has landed: no longer alive.
    let stamp = stamp_of(&engine);
    let worker_stamp = record.worker.clone().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while worker_stamp.is_alive() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    assert!(stamp.is_alive());
    let read = f.store.get(None, &record.id).unwrap();
    assert_eq!(read.status, JobStatus::Died);
    assert!(read.failure.unwrap().message.contains("worker process"));
    assert!(
        wait_gone(&mut engine, Duration::from_secs(5)),
        "engine survived"
    );
    worker.wait().unwrap();
}

#[test]
fn a_running_record_without_a_worker_dies_after_the_grace() {
    let f = fixture();
    let store = f.store.clone().with_pidless_grace(Duration::from_secs(60));
    let fresh = JobRecord::new(Role::Task, RunMode::Consult, f.workspace.clone(), "new").unwrap();
    store.create(&fresh).unwrap();
    assert_eq!(
        store.get(None, &fresh.id).unwrap().status,
        JobStatus::Running
    );
    let mut old = JobRecord::new(Role::Task, RunMode::Consult, f.workspace.clone(), "old").unwrap();
    old.created_at = format_rfc3339(SystemTime::now() - Duration::from_secs(120));
    store.create(&old).unwrap();
    let read = store.get(None, &old.id).unwrap();
    assert_eq!(read.status, JobStatus::Died);
    assert!(read.failure.unwrap().message.contains("no worker"));
}

#[test]
fn cancel_wins_over_a_later_finish_and_terminal_records_never_change() {
    let f = fixture();
    let record = f.running("job");
    let (cancelled, changed) = f
        .store
        .try_finish(&f.workspace, &record.id, JobStatus::Cancelled, |_| {})
        .unwrap();
    assert!(changed);
    assert_eq!(cancelled.status, JobStatus::Cancelled);
    assert_eq!(
        cancelled.failure.as_ref().unwrap().to_string(),
        "cancelled: cancelled by the user"
    );
    let (after, changed) = f
        .store
        .try_finish(&f.workspace, &record.id, JobStatus::Done, |r| {
            r.result = Some("late".into());
        })
        .unwrap();
    assert!(!changed);
    assert_eq!(after, cancelled);
    let updated = f
        .store
        .update_running(&f.workspace, &record.id, |r| r.title = "changed".into())
        .unwrap();
    assert_eq!(updated, cancelled);
    assert_eq!(f.store.get(None, &record.id).unwrap(), cancelled);
    assert!(matches!(
        f.store
            .try_finish(&f.workspace, &record.id, JobStatus::Running, |_| {}),
        Err(StoreError::Refused { .. })
    ));
}

#[test]
fn racing_finishers_leave_exactly_one_winner() {
    let f = Arc::new(fixture());
    let record = f.running("race");
    let statuses = [JobStatus::Cancelled, JobStatus::Done, JobStatus::Error];
    let threads: Vec<_> = (0..12)
        .map(|i| {
            let f = Arc::clone(&f);
            let id = record.id.clone();
            let status = statuses[i % 3];
            thread::spawn(move || {
                let (_, changed) = f
                    .store
                    .try_finish(&f.workspace, &id, status, |r| {
                        r.result = Some(format!("{i}"));
                    })
                    .unwrap();
                changed.then_some(status)
            })
        })
        .collect();
    let winners: Vec<JobStatus> = threads
        .into_iter()
        .filter_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(winners.len(), 1, "{winners:?}");
    assert_eq!(f.store.get(None, &record.id).unwrap().status, winners[0]);
}

#[test]
fn update_running_cannot_change_identity_or_status() {
    let f = fixture();
    let record = f.running("job");
    let updated = f
        .store
        .update_running(&f.workspace, &record.id, |r| {
            r.id = "job-ffffffffffffffff".into();
            r.status = JobStatus::Done;
            r.created_at = "2000-01-01T00:00:00.000Z".into();
            r.session_id = Some("sess".into());
        })
        .unwrap();
    assert_eq!(updated.id, record.id);
    assert_eq!(updated.status, JobStatus::Running);
    assert_eq!(updated.created_at, record.created_at);
    assert_eq!(updated.session_id.as_deref(), Some("sess"));
}

#[test]
fn acceptance_is_recorded_once_on_terminal_jobs_only() {
    let f = fixture();
    let record = f.running("job");
    let acceptance = |state| Acceptance {
        acceptance: state,
        reason: Some("checked".into()),
        failure_kind: None,
        source: Some(AcceptanceSource::Collector),
        recorded_at: "2026-01-01T00:00:00.000Z".into(),
    };
    assert!(matches!(
        f.store.record_acceptance(
            None,
            &record.id,
            acceptance(AcceptanceState::Accepted),
            false
        ),
        Err(StoreError::NotTerminal(_))
    ));
    f.store
        .finish(&f.workspace, &record.id, JobStatus::Done, |r| {
            r.delivery = Delivery::Failed;
        })
        .unwrap();
    let refused = f
        .store
        .record_acceptance(
            None,
            &record.id,
            acceptance(AcceptanceState::Accepted),
            false,
        )
        .unwrap_err();
    assert!(
        refused.to_string().contains("--accept-failed-transport"),
        "{refused}"
    );
    assert_eq!(refused.kind(), FailureKind::Input);
    let accepted = f
        .store
        .record_acceptance(
            None,
            &record.id,
            acceptance(AcceptanceState::Accepted),
            true,
        )
        .unwrap();
    assert_eq!(accepted.semantic(), AcceptanceState::Accepted);
    let again = f
        .store
        .record_acceptance(
            None,
            &record.id,
            acceptance(AcceptanceState::Rejected),
            true,
        )
        .unwrap_err();
    assert!(again.to_string().contains("already recorded"), "{again}");
    assert_eq!(
        f.store.get(None, &record.id).unwrap().semantic(),
        AcceptanceState::Accepted
    );
}

#[test]
fn finish_removes_the_config_dir_only_inside_runs() {
    let f = fixture();
    let record = f.running("job");
    let config = f.store.run_dir(&record.id).unwrap().join("config");
    fs::create_dir_all(config.join("devin")).unwrap();
    fs::write(config.join("devin/config.json"), b"{}").unwrap();
    f.store
        .update_running(&f.workspace, &record.id, |r| {
            r.config_dir = Some(config.clone());
        })
        .unwrap();
    f.store
        .finish(&f.workspace, &record.id, JobStatus::Done, |_| {})
        .unwrap();
    assert!(!config.exists());
    assert!(!f.store.run_dir(&record.id).unwrap().exists());

    let outside = tempfile::tempdir().unwrap();
    let other = f.running("other");
    f.store
        .update_running(&f.workspace, &other.id, |r| {
            r.config_dir = Some(outside.path().to_path_buf());
        })
        .unwrap();
    f.store
        .finish(&f.workspace, &other.id, JobStatus::Error, |_| {})
        .unwrap();
    assert!(
        outside.path().exists(),
        "a directory outside runs/ was removed"
    );
    assert!(matches!(
        f.store.remove_config_dir(f.store.runs_dir()),
        Err(StoreError::Insecure { .. })
    ));
}

#[test]
fn listing_two_thousand_records_orders_by_creation_and_honours_the_limit() {
    let f = fixture();
    let base = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    // Two old running jobs: outside the newest 20, one with a live worker, one whose worker
    // is gone.
    let mut alive =
        JobRecord::new(Role::Task, RunMode::Write, f.workspace.clone(), "alive").unwrap();
    alive.created_at = format_rfc3339(base - Duration::from_secs(10));
    alive.worker = Some(ProcessStamp::current().unwrap());
    f.store.create(&alive).unwrap();
    let mut dead = JobRecord::new(Role::Task, RunMode::Write, f.workspace.clone(), "dead").unwrap();
    dead.created_at = format_rfc3339(base - Duration::from_secs(20));
    let mut gone = ProcessStamp::current().unwrap();
    gone.start_time += 5;
    dead.worker = Some(gone);
    f.store.create(&dead).unwrap();
    let mut ids = Vec::new();
    for i in 0..2000u64 {
        let mut record = JobRecord::new(
            Role::Task,
            RunMode::Consult,
            f.workspace.clone(),
            &format!("t{i}"),
        )
        .unwrap();
        record.created_at = format_rfc3339(base + Duration::from_secs(i * 7));
        record.status = JobStatus::Done;
        f.store.create(&record).unwrap();
        ids.push(record.id);
    }
    let started = Instant::now();
    let (records, warnings) = f.store.list(Some(&f.workspace), 20).unwrap();
    let took = started.elapsed();
    assert!(warnings.is_empty(), "{warnings:?}");
    let shown: Vec<&str> = records.iter().map(|r| r.id.as_str()).collect();
    let mut expected: Vec<&str> = ids.iter().rev().take(20).map(String::as_str).collect();
    // The old running job with a live worker follows the newest 20; the dead one is
    // finished as died by the listing and not shown.
    expected.push(&alive.id);
    assert_eq!(shown, expected);
    assert_eq!(f.raw(&dead.id)["status"], "died");
    eprintln!("listing 20 of 2002 records took {took:?}");

    let (all, _) = f.store.list(None, 5).unwrap();
    assert_eq!(all.len(), 6);
    assert_eq!(all[0].id, ids[1999]);
    assert_eq!(all[5].id, alive.id);
}

#[test]
fn running_finds_every_running_job_across_workspaces() {
    let f = fixture();
    let one = f.running("one");
    let other_workspace = tempfile::tempdir().unwrap();
    let mut two = JobRecord::new(
        Role::Review,
        RunMode::Review,
        fs::canonicalize(other_workspace.path()).unwrap(),
        "two",
    )
    .unwrap();
    two.worker = Some(ProcessStamp::current().unwrap());
    f.store.create(&two).unwrap();
    let done = f.running("done");
    f.store
        .finish(&f.workspace, &done.id, JobStatus::Done, |_| {})
        .unwrap();
    let (running, _) = f.store.running().unwrap();
    let mut ids: Vec<String> = running.into_iter().map(|r| r.id).collect();
    ids.sort();
    let mut expected = vec![one.id, two.id.clone()];
    expected.sort();
    assert_eq!(ids, expected);
    assert_eq!(f.store.get(None, &two.id).unwrap().role, Role::Review);
    assert_eq!(f.store.workspaces().unwrap().len(), 2);
}

#[test]
fn sweep_removes_old_run_dirs_of_ended_or_unknown_jobs_once_an_hour() {
    let f = fixture();
    let old = SystemTime::now() - Duration::from_secs(2 * 3600);
    let age = |path: &Path| {
        fs::File::open(path).unwrap().set_modified(old).unwrap();
    };
    let running = f.running("running");
    let ended = f.running("ended");
    f.store
        .finish(&f.workspace, &ended.id, JobStatus::Done, |_| {})
        .unwrap();
    let unknown = "job-00000000000000aa";
    let young_unknown = "job-00000000000000bb";
    for id in [
        running.id.as_str(),
        ended.id.as_str(),
        unknown,
        young_unknown,
    ] {
        fs::create_dir_all(f.store.run_dir(id).unwrap().join("config")).unwrap();
    }
    for id in [running.id.as_str(), ended.id.as_str(), unknown] {
        age(&f.store.run_dir(id).unwrap());
    }
    let outcome = sweep_orphan_runs(&f.store, Duration::from_secs(3600)).unwrap();
    assert!(outcome.ran);
    assert!(f.store.run_dir(&running.id).unwrap().exists());
    assert!(!f.store.run_dir(&ended.id).unwrap().exists());
    assert!(!f.store.run_dir(unknown).unwrap().exists());
    assert!(f.store.run_dir(young_unknown).unwrap().exists());
    assert_eq!(outcome.removed.len(), 2);
    // Within the hour a second call does nothing.
    age(&f.store.run_dir(young_unknown).unwrap());
    let again = sweep_orphan_runs(&f.store, Duration::from_secs(3600)).unwrap();
    assert!(!again.ran);
    assert!(f.store.run_dir(young_unknown).unwrap().exists());
    assert_eq!(
        sweep_now(&f.store, Duration::from_secs(3600))
            .unwrap()
            .removed
            .len(),
        1
    );
}

#[test]
fn engine_stamps_of_processes_in_a_group_report_that_group() {
    let mut leader = group_leader();
    let stamp = stamp_of(&leader);
    assert_eq!(stamp.live_pgid(), Some(stamp.pid));
    assert_eq!(proc_stat(stamp.pid).unwrap().pgid, stamp.pid);
    assert!(super::liveness::terminate(
        &[&stamp],
        Duration::from_secs(2)
    ));
    assert!(wait_gone(&mut leader, Duration::from_secs(5)));
    assert!(!super::liveness::terminate(
        &[&stamp],
        Duration::from_secs(2)
    ));
}

#[test]
fn finish_with_error_keeps_the_given_failure() {
    let f = fixture();
    let record = f.running("job");
    let finished = f
        .store
        .finish(&f.workspace, &record.id, JobStatus::Error, |r| {
            r.failure = Some(
                JobFailure::new(FailureKind::Quota, "out of credits").with_model(Some("swe-1-5")),
            );
        })
        .unwrap();
    let failure = finished.failure.unwrap();
    assert_eq!(failure.kind, FailureKind::Quota);
    assert_eq!(failure.billing_pool.as_deref(), Some("first-party"));
}

#[test]
fn a_missing_index_is_rebuilt_and_dangling_entries_are_skipped() {
    let f = fixture();
    let base = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut ids = Vec::new();
    for i in 0..5u64 {
        let mut record = JobRecord::new(
            Role::Task,
            RunMode::Consult,
            f.workspace.clone(),
            &format!("t{i}"),
        )
        .unwrap();
        record.created_at = format_rfc3339(base + Duration::from_secs(i));
        record.status = JobStatus::Done;
        f.store.create(&record).unwrap();
        ids.push(record.id);
    }
    let index = f.jobs_dir().join("index");
    // An entry whose record was never written (a crash between the two writes).
    let mut text = fs::read_to_string(&index).unwrap();
    text.push_str("9999999999999 job-00000000000000ff\ntorn line wi");
    fs::write(&index, text).unwrap();
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    let (records, warnings) = f.store.list(Some(&f.workspace), 3).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let shown: Vec<String> = records.into_iter().map(|r| r.id).collect();
    assert_eq!(shown, newest_first[..3]);
    fs::remove_file(&index).unwrap();
    let (records, _) = f.store.list(Some(&f.workspace), 10).unwrap();
    let shown: Vec<String> = records.into_iter().map(|r| r.id).collect();
    assert_eq!(shown, newest_first);
    assert_eq!(mode_of(&index), 0o600);
    assert_eq!(fs::read_to_string(&index).unwrap().lines().count(), 5);
}

#[test]
fn newest_matching_finds_the_latest_resumable_session_of_a_mode() {
    let f = fixture();
    let finish = |mode: RunMode, session: &str| {
        let mut record = JobRecord::new(Role::Task, mode, f.workspace.clone(), session).unwrap();
        record.worker = Some(ProcessStamp::current().unwrap());
        f.store.create(&record).unwrap();
        f.store
            .finish(&f.workspace, &record.id, JobStatus::Done, |r| {
                r.session_id = Some(session.to_owned());
            })
            .unwrap()
    };
    finish(RunMode::Write, "older-write");
    let wanted = finish(RunMode::Write, "newer-write");
    finish(RunMode::Consult, "newest-consult");
    f.running("running write");
    let found = f
        .store
        .newest_matching(&f.workspace, |r| {
            r.mode == RunMode::Write && r.resumable_session().is_some()
        })
        .unwrap()
        .unwrap();
    assert_eq!(found.id, wanted.id);
    let none = f
        .store
        .newest_matching(&f.workspace, |r| r.mode == RunMode::Review)
        .unwrap();
    assert!(none.is_none());
}

#[test]
fn a_lock_held_by_another_process_is_waited_for_and_freed_by_kill_9() {
    let f = fixture();
    let record = f.running("job");
    let lock = f.jobs_dir().join(format!("{}.lock", record.id));
    // util-linux flock(1) takes the same kind of lock (flock(2)) and holds it until it dies.
    let mut holder = Command::new("flock")
        .arg("--exclusive")
        .arg(&lock)
        .args(["sleep", "60"])
        .process_group(0)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while RecordLock::acquire(&lock, Duration::from_millis(1)).is_ok() {
        assert!(Instant::now() < deadline, "flock never took the lock");
        thread::sleep(Duration::from_millis(10));
    }
    let store = f.store.clone();
    let (workspace, id) = (f.workspace.clone(), record.id.clone());
    let started = Instant::now();
    let writer = thread::spawn(move || {
        store.update_running(&workspace, &id, |r| r.session_id = Some("after".into()))
    });
    thread::sleep(Duration::from_millis(300));
    assert!(
        !writer.is_finished(),
        "the writer did not wait for the lock"
    );
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(holder.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let updated = writer.join().unwrap().unwrap();
    assert!(started.elapsed() < LOCK_WAIT, "{:?}", started.elapsed());
    assert_eq!(updated.session_id.as_deref(), Some("after"));
    holder.wait().unwrap();
}
