//! The companion end to end: an environment of its own for each run (a data directory, a
//! home with a credentials file, a git repository as the workspace), the offline agent as the
//! Devin CLI (`DEVIN_BIN`), and readers of the job records it leaves.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use super::bridge::mock_devin;

pub(crate) struct Env {
    pub(crate) root: tempfile::TempDir,
    pub(crate) data: PathBuf,
    pub(crate) home: PathBuf,
    pub(crate) workspace: PathBuf,
    pub(crate) devin: PathBuf,
    pub(crate) extra: Vec<(String, String)>,
}

pub(crate) fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("git");
    assert!(status.success(), "git {args:?}");
}

impl Env {
    pub(crate) fn new() -> Env {
        let root = tempfile::tempdir().expect("tempdir");
        let data = root.path().join("data");
        let home = root.path().join("home");
        let workspace = root.path().join("repo");
        std::fs::create_dir_all(home.join(".local/share/devin")).expect("home");
        std::fs::write(
            home.join(".local/share/devin/credentials.toml"),
            "token = \"x\"\n",
        )
        .expect("credentials");
        std::fs::create_dir_all(workspace.join("src")).expect("workspace");
        git(&workspace, &["init", "-q", "-b", "main"]);
        std::fs::write(workspace.join("src/lib.rs"), "pub fn a() {}\n").expect("write");
        git(&workspace, &["add", "."]);
        git(&workspace, &["commit", "-q", "-m", "one"]);
        let workspace = std::fs::canonicalize(&workspace).expect("canonical");
        Env {
            data,
            home,
            workspace,
            devin: mock_devin(),
            extra: Vec::new(),
            root,
        }
    }

    pub(crate) fn set(&mut self, name: &str, value: &str) -> &mut Self {
        self.extra.push((name.to_owned(), value.to_owned()));
        self
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_devin-bridge"));
        command
            .arg("companion")
            .args(args)
            .current_dir(&self.workspace)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("DEVIN_BIN", &self.devin)
            .env("DEVIN_COMPANION_DATA", &self.data)
            .env("XDG_CACHE_HOME", super::bridge_cache_home())
            .env(
                "DEVIN_BRIDGE_COMPONENTS",
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/components"),
            )
            .env("DEVIN_COMPANION_EXIT_GRACE_MS", "2000")
            .env("DEVIN_COMPANION_TIMEOUT_MS", "60000")
            .stdin(Stdio::null());
        for (name, value) in &self.extra {
            command.env(name, value);
        }
        command
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run companion")
    }

    pub(crate) fn run_stdin(&self, args: &[&str], stdin: &[u8]) -> Output {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin)
            .expect("write");
        child.wait_with_output().expect("wait")
    }

    /// Every job record on disk.
    pub(crate) fn records(&self) -> Vec<Value> {
        let mut out = Vec::new();
        let Ok(states) = std::fs::read_dir(self.data.join("state")) else {
            return out;
        };
        for state in states.flatten() {
            let Ok(jobs) = std::fs::read_dir(state.path().join("jobs")) else {
                continue;
            };
            for job in jobs.flatten() {
                let path = job.path();
                if path.extension().is_some_and(|e| e == "json") {
                    let text = std::fs::read_to_string(&path).expect("record");
                    out.push(serde_json::from_str(&text).expect("record json"));
                }
            }
        }
        out
    }

    pub(crate) fn record(&self, id: &str) -> Value {
        self.records()
            .into_iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no record {id}"))
    }
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The `job: <id>` line of a footer (or the first line of a background launch).
pub(crate) fn job_id(output: &Output) -> String {
    let text = stdout(output);
    text.lines()
        .find_map(|line| line.strip_prefix("job: "))
        .or_else(|| text.lines().next().filter(|l| l.starts_with("job-")))
        .unwrap_or_else(|| panic!("no job id in {text:?} / {}", stderr(output)))
        .trim()
        .to_owned()
}

pub(crate) fn failure_kind(record: &Value) -> String {
    record["failure"]["kind"].as_str().unwrap_or("").to_owned()
}

/// Runs a consult task and returns (output, record).
pub(crate) fn task(env: &Env, args: &[&str]) -> (Output, Value) {
    let output = env.run(args);
    let id = job_id(&output);
    let record = env.record(&id);
    (output, record)
}

/// A `devin` that runs mock-devin with `vars` in its environment. The companion gives its
/// agent only an allowlist of its own environment, so a `MOCK_DEVIN_*` setting has to be made
/// here, between the companion and the mock.
pub(crate) fn mock_with(env: &Env, name: &str, vars: &[(&str, &str)]) -> PathBuf {
    let assignments: String = vars
        .iter()
        .map(|(name, value)| format!("{name}='{value}' "))
        .collect();
    script(
        env,
        name,
        &format!("{assignments}exec '{}' \"$@\"", mock_devin().display()),
    )
}

/// A `devin` that runs mock-devin with `MOCK_DEVIN_LOG` set (and `vars`); the log's path.
pub(crate) fn logging_mock(env: &mut Env, vars: &[(&str, &str)]) -> PathBuf {
    let log = env.root.path().join("mock-devin.jsonl");
    let log_text = log.display().to_string();
    let mut all = vec![("MOCK_DEVIN_LOG", log_text.as_str())];
    all.extend_from_slice(vars);
    env.devin = mock_with(env, "logging-devin", &all);
    log
}

/// The mock's log lines whose `event` is `event`.
pub(crate) fn mock_events(log: &Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["event"] == event)
        .collect()
}

pub(crate) fn failure_message(record: &Value) -> String {
    record["failure"]["message"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// An executable shell script `name` in the environment's root running `body`.
pub(crate) fn script(env: &Env, name: &str, body: &str) -> PathBuf {
    let path = env.root.path().join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}
