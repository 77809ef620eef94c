//! Companion benchmark: `cargo xtask bench companion`
//! (or `cargo bench -p devin-bridge --bench companion`).
//!
//! In one run, side by side, with release builds of `devin-bridge` and the offline agent:
//! - **bare turn**: what any client of the agent pays: spawn `mock-devin acp`, `initialize`,
//!   `session/new`, `session/set_mode`, `session/prompt`, read to the result, close stdin and
//!   reap; with the same private HOME, XDG directories and generated configuration a job gets;
//! - **helper task**: `devin-bridge companion task --cwd W -- "..."` as a user runs it in the
//!   foreground (a new process: policy, preflight `--version`, job record, isolation, the same
//!   ACP turn, footer), measured from spawn to exit.
//!
//! The two alternate, so noise hits both; the helper's overhead is the difference of the
//! percentiles. A reference line shows the cost of starting the helper at all
//! (`devin-bridge companion --help`).
//!
//! Then 10,000 job records are written into one workspace (through the job store, as jobs
//! would write them), and `status --cwd W`, `history --cwd W`, `status JOB` and
//! `history --all` run as processes.
//!
//! Goals (reported, never asserted; the bench exits 0 on MISS): helper overhead < 20 ms at
//! p50; status and history < 50 ms at 10,000 records.
//!
//! Environment: `COMPANION_BENCH_TURNS` (default 40), `COMPANION_BENCH_RECORDS` (default
//! 10000), `COMPANION_BENCH_CALLS` (default 30), `DEVIN_BRIDGE_BIN` (default
//! `target/release/devin-bridge`), `DEVIN_BRIDGE_MOCK_DEVIN` (default
//! `target/release/mock-devin`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failure aborts the run

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use devin_bridge_companion::format_rfc3339;
use devin_bridge_companion::{JobRecord, JobStatus, JobStore, Role, RunMode};
use devin_bridge_test_support::artifacts::target_binary;
use devin_bridge_test_support::bench::{env_usize, ms, percentile};
use serde_json::{json, Value};

struct Sample {
    name: &'static str,
    times: Vec<Duration>,
}

impl Sample {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            times: Vec::new(),
        }
    }
    fn sorted(&self) -> Vec<Duration> {
        let mut times = self.times.clone();
        times.sort();
        times
    }
    fn p(&self, p: f64) -> Duration {
        percentile(&self.sorted(), p)
    }
    fn row(&self) {
        println!(
            "{:<34} {:>5} {:>10.2} {:>10.2}",
            self.name,
            self.times.len(),
            ms(self.p(50.0)),
            ms(self.p(99.0))
        );
    }
}

/// The environment both sides get: a private home with the agent's generated configuration.
struct Fixture {
    root: tempfile::TempDir,
    workspace: PathBuf,
    data: PathBuf,
    helper: PathBuf,
    agent: PathBuf,
}

impl Fixture {
    fn new() -> Result<Self, String> {
        let helper = target_binary("DEVIN_BRIDGE_BIN", "devin-bridge");
        let agent = target_binary("DEVIN_BRIDGE_MOCK_DEVIN", "mock-devin");
        for binary in [&helper, &agent] {
            if !binary.exists() {
                return Err(format!(
                    "{} is missing: run `cargo xtask bench companion`, which builds it",
                    binary.display()
                ));
            }
        }
        let root = tempfile::tempdir().map_err(|e| e.to_string())?;
        let workspace = root.path().join("workspace");
        std::fs::create_dir_all(&workspace).map_err(|e| e.to_string())?;
        let git = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&workspace)
            .status()
            .map_err(|e| format!("git: {e}"))?;
        if !git.success() {
            return Err("git init failed".into());
        }
        let data = root.path().join("data");
        Ok(Self {
            root,
            workspace,
            data,
            helper,
            agent,
        })
    }

    fn helper(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.helper);
        command
            .arg("companion")
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root.path())
            .env("DEVIN_BIN", &self.agent)
            .env("DEVIN_COMPANION_DATA", &self.data)
            .env("WINDSURF_API_KEY", "bench-key")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Runs the helper and returns how long it took; a failed run is an error.
    fn time_helper(&self, args: &[&str]) -> Result<Duration, String> {
        let started = Instant::now();
        let output = self.helper(args).output().map_err(|e| e.to_string())?;
        let elapsed = started.elapsed();
        if !output.status.success() {
            return Err(format!(
                "`devin-bridge companion {}` failed ({}): {}{}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(elapsed)
    }

    /// One bare ACP turn against the agent, with the same isolation as a consult job.
    fn bare_turn(&self) -> Result<Duration, String> {
        let home = self.root.path().join("bare-home");
        let config = self.root.path().join("bare-config");
        prepare_bare_agent(&home, &config).map_err(|e| e.to_string())?;
        let started = Instant::now();
        let mut child = Command::new(&self.agent)
            .arg("acp")
            .current_dir(&self.workspace)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", &config)
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("WINDSURF_API_KEY", "bench-key")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        let mut call = |id: u64, method: &str, params: Value| -> Result<Value, String> {
            let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            writeln!(stdin, "{frame}").map_err(|e| e.to_string())?;
            stdin.flush().map_err(|e| e.to_string())?;
            for line in lines.by_ref() {
                let message: Value = serde_json::from_str(&line.map_err(|e| e.to_string())?)
                    .map_err(|e| e.to_string())?;
                if message.get("id") == Some(&json!(id)) {
                    return match message.get("result") {
                        Some(result) => Ok(result.clone()),
                        None => Err(format!("{method} failed: {message}")),
                    };
                }
            }
            Err(format!("the agent exited during {method}"))
        };
        call(
            0,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false}}),
        )?;
        let session = call(
            1,
            "session/new",
            json!({"cwd": self.workspace, "mcpServers": []}),
        )?;
        let session_id = session["sessionId"].as_str().unwrap_or_default().to_owned();
        call(
            2,
            "session/set_mode",
            json!({"sessionId": session_id, "modeId": "ask"}),
        )?;
        let result = call(
            3,
            "session/prompt",
            json!({"sessionId": session_id, "prompt": [{"type": "text", "text": "bench turn"}]}),
        )?;
        if result["stopReason"] != "end_turn" {
            return Err(format!("unexpected prompt result {result}"));
        }
        drop(stdin);
        child.wait().map_err(|e| e.to_string())?;
        Ok(started.elapsed())
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("companion bench: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let turns = env_usize("COMPANION_BENCH_TURNS", 40);
    let records = env_usize("COMPANION_BENCH_RECORDS", 10_000);
    let calls = env_usize("COMPANION_BENCH_CALLS", 30);
    let fixture = Fixture::new()?;
    let workspace = fixture.workspace.to_string_lossy().into_owned();

    println!("companion benchmark ({turns} turns, {records} records, {calls} calls per command)");
    println!("{:<34} {:>5} {:>10} {:>10}", "", "runs", "p50 ms", "p99 ms");

    // Warm both paths once (page cache, first-run directory creation).
    fixture.bare_turn()?;
    fixture.time_helper(&["task", "--cwd", &workspace, "--", "bench turn"])?;

    let mut bare = Sample::new("bare mock `devin acp` turn");
    let mut helper = Sample::new("helper `task` (foreground)");
    let mut start = Sample::new("helper start (`--help`, reference)");
    for _ in 0..turns {
        bare.times.push(fixture.bare_turn()?);
        helper.times.push(fixture.time_helper(&[
            "task",
            "--cwd",
            &workspace,
            "--",
            "bench turn",
        ])?);
        start.times.push(fixture.time_helper(&["--help"])?);
    }
    bare.row();
    helper.row();
    start.row();
    let overhead_p50 = helper.p(50.0).saturating_sub(bare.p(50.0));
    let overhead_p99 = helper.p(99.0).saturating_sub(bare.p(99.0));
    println!(
        "helper overhead above the bare turn: p50 {:.2} ms, p99 {:.2} ms  (goal p50 < 20 ms: {})",
        ms(overhead_p50),
        ms(overhead_p99),
        if overhead_p50 < Duration::from_millis(20) {
            "MET"
        } else {
            "MISS"
        }
    );

    let started = Instant::now();
    let some_job =
        write_records(&fixture.data, &fixture.workspace, records).map_err(|e| e.to_string())?;
    println!(
        "wrote {records} job records in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let mut worst = Duration::ZERO;
    let commands: [(&'static str, Vec<&str>); 4] = [
        ("status --cwd W", vec!["status", "--cwd", &workspace]),
        ("history --cwd W", vec!["history", "--cwd", &workspace]),
        ("status JOB (search by id)", vec!["status", &some_job]),
        ("history --all", vec!["history", "--all"]),
    ];
    for (name, args) in &commands {
        let mut sample = Sample::new(name);
        fixture.time_helper(args)?;
        for _ in 0..calls {
            sample.times.push(fixture.time_helper(args)?);
        }
        sample.row();
        worst = worst.max(sample.p(50.0));
    }
    println!(
        "status/history at {records} records: worst p50 {:.2} ms  (goal < 50 ms: {})",
        ms(worst),
        if worst < Duration::from_millis(50) {
            "MET"
        } else {
            "MISS"
        }
    );
    Ok(())
}

/// The least a bare agent needs: a home and a configuration that denies edits and commands.
fn prepare_bare_agent(home: &Path, config: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(home.join(".local/share"))?;
    std::fs::create_dir_all(config.join("devin"))?;
    std::fs::write(
        config.join("devin/config.json"),
        json!({"permissions": {"allow": ["Read(**)"], "deny": ["Edit(**)", "Write(**)", "Exec(*)"]}})
            .to_string(),
    )?;
    std::fs::write(
        config.join("devin/mcp_config.json"),
        json!({"mcpServers": {}}).to_string(),
    )
}

/// `count` finished task records in `workspace`, written through the job store as jobs write
/// them (atomic, fsynced); returns the id of the oldest, which a search by id must find.
fn write_records(
    data: &Path,
    workspace: &Path,
    count: usize,
) -> Result<String, Box<dyn std::error::Error>> {
    let store = JobStore::open(data)?;
    let workspace = workspace.canonicalize()?;
    let base = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let mut oldest = None;
    for index in 0..count {
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
        oldest.get_or_insert(record.id);
    }
    oldest.ok_or_else(|| "no records".into())
}
