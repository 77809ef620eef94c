//! The outpost test rig: the fake fleet API (with its static server and gateway) on loopback,
//! the fake `devin-remote` published on it, and real `devin-bridge outpost start` processes
//! ([`WorkerBuilder`], which the outpost benchmark starts too, with its own settings).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use devin_bridge_fake_fleet::{ClaimEventKind, FakeFleet, FleetConfig, SessionSpec, SessionStatus};
use tokio::process::{Child, Command};

use crate::artifacts::components_dir;
use crate::artifacts::devin_bridge;

/// The commit the fake remote is published under (and the latest one).
pub const REMOTE_SHA: &str = "abc1234";
pub const SUFFIX: &str = "linux_x64";
pub const OUTPOST: &str = "linux-fleet";

/// A fleet with one linux outpost and the fake remote published.
pub struct Rig {
    pub fleet: FakeFleet,
    pub outpost_id: String,
    pub dir: tempfile::TempDir,
}

impl Rig {
    pub async fn start(config: FleetConfig) -> Rig {
        let fleet = FakeFleet::start(config).await.expect("fake fleet starts");
        let outpost_id = fleet.create_outpost(OUTPOST, Some("linux"));
        let remote = crate::artifacts::fake_devin_remote();
        fleet
            .publish_fake_remote(&remote, REMOTE_SHA, SUFFIX)
            .expect("publish the fake remote");
        let dir = tempfile::tempdir().expect("tempdir");
        Rig {
            fleet,
            outpost_id,
            dir,
        }
    }

    pub fn enqueue(&self, spec: SessionSpec) -> String {
        self.fleet.enqueue(&self.outpost_id, spec)
    }

    pub fn enqueue_normal(&self) -> String {
        self.enqueue(SessionSpec::default())
    }

    /// A worker with its own data directory `name` (same name: same acceptor id).
    pub fn worker(&self, name: &str) -> WorkerBuilder {
        WorkerBuilder::new(&self.fleet, self.dir.path(), name)
    }

    /// Ends each of `sessions` (as `status`) as soon as its remote connects.
    pub fn end_when_connected(
        &self,
        sessions: Vec<String>,
        status: SessionStatus,
    ) -> tokio::task::JoinHandle<()> {
        let fleet = self.fleet.clone();
        tokio::spawn(async move {
            let mut waiting = sessions;
            while !waiting.is_empty() {
                waiting.retain(|id| {
                    if fleet.connected_at(id).is_some() {
                        fleet.end_session(id, status);
                        false
                    } else {
                        true
                    }
                });
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    }

    /// Waits until `predicate` holds (panics with `what` after `timeout`).
    pub async fn wait(
        &self,
        timeout: Duration,
        what: &str,
        predicate: impl Fn(&FakeFleet) -> bool,
    ) {
        if !self.fleet.wait_until(timeout, predicate).await {
            panic!("timed out waiting for: {what}\n{}", self.worker_logs());
        }
    }

    /// Waits until the session's remote has connected to the gateway.
    pub async fn wait_connected(&self, session: &str) {
        self.wait(Duration::from_secs(20), "the remote connects", |f| {
            f.connected_at(session).is_some()
        })
        .await;
    }

    /// Terminates the session and waits until the worker released it (the entry is gone).
    pub async fn finish(&self, session: &str) {
        self.fleet.end_session(session, SessionStatus::Terminated);
        self.wait(Duration::from_secs(20), "released", |f| {
            f.entry(session).is_none()
        })
        .await;
    }

    /// Every worker log of this rig (for failure messages).
    pub fn worker_logs(&self) -> String {
        let mut logs = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.path()) {
            for entry in entries.flatten() {
                let log = entry.path().join("worker.log");
                if let Ok(text) = std::fs::read_to_string(&log) {
                    logs.push_str(&format!("--- {}\n{text}\n", log.display()));
                }
            }
        }
        logs
    }

    pub fn kinds(&self, session: &str) -> Vec<ClaimEventKind> {
        self.fleet
            .history(session)
            .into_iter()
            .map(|event| event.kind)
            .collect()
    }

    /// The environment the session's remote reported.
    pub fn remote_env(&self, session: &str) -> serde_json::Map<String, serde_json::Value> {
        self.fleet
            .reports(session)
            .into_iter()
            .find_map(|report| report.get("env").and_then(|e| e.as_object()).cloned())
            .expect("the remote reported its environment")
    }

    pub fn report(&self, session: &str) -> serde_json::Value {
        self.fleet
            .reports(session)
            .into_iter()
            .find(|report| report.get("env").is_some())
            .expect("the remote reported")
    }
}

/// Connected remotes of `session` so far (one per start).
pub fn connections(fleet: &FakeFleet, session: &str) -> usize {
    fleet
        .reports(session)
        .iter()
        .filter(|report| report.get("env").is_some())
        .count()
}

/// A `devin-bridge outpost start` to spawn. Its `[outpost]` settings start as the tests'
/// (short confirmations and timeouts, a 1 s poll, debug logs); a benchmark changes them.
pub struct WorkerBuilder {
    fleet: FakeFleet,
    /// The directory of every worker of this fleet (each in `<dir>/<name>`, the download cache
    /// shared in `<dir>/cache`).
    dir: PathBuf,
    name: String,
    binary: Option<PathBuf>,
    /// `[outpost]` settings besides the directories and `network_enforcement`, in order.
    settings: Vec<(String, String)>,
    policy_extra: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    outpost: String,
    poll_interval_secs: Option<u64>,
    log_filter: String,
    installed: Option<PathBuf>,
}

impl WorkerBuilder {
    pub fn new(fleet: &FakeFleet, dir: &Path, name: &str) -> WorkerBuilder {
        let settings = [
            ("max_sessions", "4"),
            ("watch_idle_timeout_secs", "30"),
            ("exit_confirm_reads", "15"),
            ("exit_confirm_interval_ms", "200"),
            ("remote_kill_grace_ms", "1000"),
            ("shutdown_grace_ms", "5000"),
            ("request_timeout_ms", "5000"),
        ];
        WorkerBuilder {
            fleet: fleet.clone(),
            dir: dir.to_owned(),
            name: name.to_owned(),
            binary: None,
            settings: settings
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect(),
            policy_extra: String::new(),
            args: Vec::new(),
            env: vec![("DEVIN_OUTPOSTS_TOKEN".into(), "machine-token".into())],
            outpost: OUTPOST.to_owned(),
            poll_interval_secs: Some(1),
            log_filter: "devin_bridge=debug,info".to_owned(),
            installed: None,
        }
    }

    /// Run `binary` (an installed `devin-bridge`) with the checkout hidden, on a policy that
    /// names no component (so the built-in ones serve).
    pub fn installed(mut self, binary: PathBuf) -> Self {
        self.installed = Some(binary);
        self
    }

    /// Run this `devin-bridge` (default: the one of this build, [`devin_bridge`]).
    pub fn binary(mut self, binary: &Path) -> Self {
        self.binary = Some(binary.to_owned());
        self
    }

    /// `--poll-interval-secs` (default 1; `None`: the policy's).
    pub fn poll_interval(mut self, secs: Option<u64>) -> Self {
        self.poll_interval_secs = secs;
        self
    }

    /// `--poll-interval-secs` (default 1).
    pub fn poll_interval_secs(self, secs: u64) -> Self {
        self.poll_interval(Some(secs))
    }

    /// Sets an `[outpost]` setting (a TOML value), replacing the default; `None` leaves it to
    /// the policy's default.
    pub fn setting(mut self, key: &str, value: Option<&str>) -> Self {
        self.settings.retain(|(name, _)| name != key);
        if let Some(value) = value {
            self.settings.push((key.to_owned(), value.to_owned()));
        }
        self
    }

    pub fn watch_idle_timeout_secs(self, secs: u64) -> Self {
        self.setting("watch_idle_timeout_secs", Some(&secs.to_string()))
    }

    /// `DEVIN_BRIDGE_LOG` (default `devin_bridge=debug,info`).
    pub fn log_filter(mut self, filter: &str) -> Self {
        filter.clone_into(&mut self.log_filter);
        self
    }

    /// Serve another outpost (by name or id).
    pub fn outpost(mut self, outpost: &str) -> Self {
        self.outpost = outpost.to_owned();
        self
    }
    pub fn policy(mut self, extra: &str) -> Self {
        self.policy_extra.push_str(extra);
        self.policy_extra.push('\n');
        self
    }
    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_owned());
        self
    }
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }
    pub fn max_sessions(self, n: usize) -> Self {
        self.setting("max_sessions", Some(&n.to_string()))
    }

    pub fn paths(&self) -> WorkerPaths {
        let root = self.dir.join(&self.name);
        WorkerPaths {
            data: root.join("data"),
            work: root.join("work"),
            cache: self.dir.join("cache"),
            home: root.join("home"),
            log: root.join("worker.log"),
            policy: root.join("outpost.toml"),
            root,
        }
    }

    /// Starts `devin-bridge outpost start` (stderr to its log file); network policies are
    /// applied through proxy variables.
    pub fn spawn(self) -> Worker {
        self.spawn_with_enforcement("proxy")
    }

    /// Like `spawn`, with `network_enforcement` set to `enforcement`.
    pub fn spawn_with_enforcement(self, enforcement: &str) -> Worker {
        let paths = self.paths();
        for dir in [&paths.root, &paths.home, &paths.work] {
            std::fs::create_dir_all(dir).expect("mkdir");
        }
        let components = match &self.installed {
            Some(_) => String::new(),
            None => format!(
                "[components.sse]\npath = {:?}\n",
                components_dir().join("sse.wasm").display().to_string()
            ),
        };
        let mut policy = format!(
            "mode = \"outpost\"\n{components}[outpost]\nwork_dir = {:?}\ndata_dir = {:?}\ncache_dir = {:?}\n",
            paths.work.display().to_string(),
            paths.data.display().to_string(),
            paths.cache.display().to_string(),
        );
        for (key, value) in &self.settings {
            policy.push_str(&format!("{key} = {value}\n"));
        }
        policy.push_str(&format!(
            "network_enforcement = {enforcement:?}\n{}",
            self.policy_extra
        ));
        std::fs::write(&paths.policy, policy).expect("policy");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&paths.log)
            .expect("log");
        let mut command = match &self.installed {
            Some(binary) => {
                let (unshare, args) = crate::installed::hidden(binary);
                let mut command = Command::new(unshare);
                command.args(args);
                command
            }
            None => Command::new(self.binary.clone().unwrap_or_else(devin_bridge)),
        };
        command
            .args(["outpost", "start", "--policy"])
            .arg(&paths.policy)
            .args(["--outpost", &self.outpost])
            .args(
                self.poll_interval_secs
                    .iter()
                    .flat_map(|secs| ["--poll-interval-secs".to_owned(), secs.to_string()]),
            )
            .args(["--api-url", &self.fleet.api_url()])
            .args(["--static-base-url", &self.fleet.static_base_url()])
            .args(&self.args)
            .current_dir(&paths.work)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &paths.home)
            .env("XDG_CACHE_HOME", crate::engine::bridge_cache_home())
            .env("DEVIN_BRIDGE_LOG", &self.log_filter)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        let child = command.spawn().expect("worker starts");
        Worker { child, paths }
    }
}

pub struct WorkerPaths {
    pub root: PathBuf,
    pub data: PathBuf,
    pub work: PathBuf,
    pub cache: PathBuf,
    pub home: PathBuf,
    pub log: PathBuf,
    pub policy: PathBuf,
}

pub struct Worker {
    pub child: Child,
    pub paths: WorkerPaths,
}

impl Worker {
    pub fn pid(&self) -> i32 {
        self.child.id().expect("running") as i32
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.paths.log).unwrap_or_default()
    }

    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), signal).expect("signal");
    }

    /// Waits for the worker to exit; its exit code.
    pub async fn exit_code(&mut self, timeout: Duration) -> Option<i32> {
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(Ok(status)) => status.code(),
            _ => panic!(
                "the worker did not exit within {timeout:?}; log:\n{}",
                self.log()
            ),
        }
    }

    /// Waits until the log contains `needle`.
    pub async fn wait_log(&self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.log().contains(needle) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("log never said {needle:?}:\n{}", self.log());
    }
}

/// True when a process with this pid exists (and is not a zombie).
pub fn alive(pid: i64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .map(|(_, rest)| !rest.starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Waits until `pid` is gone.
pub async fn wait_gone(pid: i64, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// The octal permission bits of a path.
pub fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("exists")
        .permissions()
        .mode()
        & 0o777
}
