//! Sandboxed subprocesses: explicit environment, own process group, bounded stderr, and one
//! way to end: close stdin, SIGTERM the group, grace, SIGKILL the group, reap.
//!
//! This module is the one owner of ending a process group: [`group`] holds the escalation
//! (for a parent with a child handle, and for anyone else by a pid-reuse-proof stamp), and
//! [`keeper`] the one keeper protocol ("end my child's group if I die") that companion and
//! outpost workers use, started from the running binary so a binary replaced in place does not
//! stop it. No mode crate signals a group its own way.
//!
//! A `Sandboxed` child that is dropped without `shutdown` (a request future cancelled because
//! its client went away) has its whole process group killed in `Drop`, so no grandchild can
//! outlive the request; tokio reaps the killed child in the background.

pub mod gate;
pub mod group;
pub mod keeper;

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long a child may take to exit by itself once its stdin is closed, before SIGTERM.
const EXIT_WAIT: Duration = Duration::from_millis(250);

/// The image this process runs, to exec when a process starts this very binary again (a
/// keeper, a background worker): `/proc/self/exe`, the kernel's own reference to the running
/// executable, held for the life of the process like an open descriptor of it. Its path may
/// since name another file (an upgrade renamed a new version over it) or nothing (deleted);
/// exec of `/proc/self/exe` still runs the image this process runs, where
/// `std::env::current_exe()` (the link's text, then `... (deleted)`) names a file that is gone.
/// Nothing is handed to the child and no `unsafe` hook runs: the kernel resolves the link in
/// the child, whose executable is its parent's until the exec.
pub fn running_binary() -> &'static std::path::Path {
    std::path::Path::new("/proc/self/exe")
}

/// Everything needed to start a child.
#[derive(Debug, Clone)]
pub struct Spec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// The complete environment: nothing else is inherited.
    pub env: Vec<(OsString, OsString)>,
    /// How much of stderr to keep (the tail).
    pub stderr_tail_bytes: usize,
    /// Between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// The (uid, gid) the child runs as, with no supplementary groups; `None`: the host's own.
    pub identity: Option<(u32, u32)>,
}

/// Failures to start a child.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{program} started without a pid")]
    NoPid { program: String },
}

/// How a child ended.
#[derive(Debug, Clone)]
pub struct Ended {
    /// None when it had to be killed and the status could not be collected.
    pub status: Option<ExitStatus>,
    /// Whether SIGKILL was needed.
    pub killed: bool,
    /// The last bytes it wrote to stderr (lossy UTF-8).
    pub stderr_tail: String,
}

/// The program of `spec` with its cwd, its exact environment, its identity and its own process
/// group, killed when dropped; the caller adds arguments and stdio. Every process started for
/// an agent (the version probe included) is built here, so none escapes the identity switch.
pub fn command_for(spec: &Spec) -> Command {
    let mut command = Command::new(&spec.program);
    command
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .process_group(0)
        .kill_on_drop(true);
    if let Some((uid, gid)) = spec.identity {
        // The standard library drops supplementary groups (setgroups(0)) before setgid and
        // setuid when it switches uid, so the child keeps none of the host's groups.
        command.uid(uid).gid(gid);
    }
    command
}

/// A running child in its own process group.
pub struct Sandboxed {
    child: Option<Child>,
    pgid: Pid,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Arc<Mutex<Tail>>,
    stderr_reader: Option<tokio::task::JoinHandle<()>>,
    kill_grace: Duration,
    program: String,
}

impl Sandboxed {
    /// Starts the child with exactly `spec.env`, stdin/stdout piped, stderr captured.
    pub fn spawn(spec: &Spec) -> Result<Self, SpawnError> {
        let program = spec.program.display().to_string();
        let mut command = command_for(spec);
        command
            .args(&spec.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|source| SpawnError::Spawn {
            program: program.clone(),
            source,
        })?;
        let pid = child.id().ok_or_else(|| SpawnError::NoPid {
            program: program.clone(),
        })?;
        let pgid = Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
        let stderr = Arc::new(Mutex::new(Tail::new(spec.stderr_tail_bytes)));
        let stderr_reader = child.stderr.take().map(|mut pipe| {
            let tail = stderr.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 8192];
                while let Ok(n) = pipe.read(&mut buffer).await {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut tail) = tail.lock() {
                        tail.push(&buffer[..n]);
                    }
                }
            })
        });
        Ok(Self {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child: Some(child),
            pgid,
            stderr,
            stderr_reader,
            kill_grace: spec.kill_grace,
            program,
        })
    }

    pub fn pid(&self) -> i32 {
        self.pgid.as_raw()
    }

    pub fn stdin(&mut self) -> Option<&mut ChildStdin> {
        self.stdin.as_mut()
    }

    /// Takes the stdin pipe (a writer shared by several tasks owns it).
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// Takes the stdout pipe (the protocol reader owns it).
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// The collected stderr once the pipe is drained (bounded wait: a descendant that escaped
    /// the group kill could hold the pipe open).
    async fn final_stderr(&mut self) -> String {
        if let Some(reader) = self.stderr_reader.take() {
            let _ = tokio::time::timeout(Duration::from_millis(200), reader).await;
        }
        self.stderr_tail()
    }

    pub fn stderr_tail(&self) -> String {
        self.stderr
            .lock()
            .map(|tail| tail.text())
            .unwrap_or_default()
    }

    /// Non-blocking: has the child exited already?
    pub fn try_exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|child| child.try_wait().ok().flatten())
    }

    /// Waits for the child to exit on its own.
    pub async fn wait(&mut self) -> Option<ExitStatus> {
        match self.child.as_mut() {
            Some(child) => child.wait().await.ok(),
            None => None,
        }
    }

    /// SIGKILL the whole group right now (an agent that broke the rules gets no grace).
    pub fn kill_now(&mut self) {
        group::kill_group(self.pgid);
    }

    /// Close stdin, a moment to exit, SIGTERM the group, wait the grace, SIGKILL the group, reap.
    pub async fn shutdown(self) -> Ended {
        let exit_wait = EXIT_WAIT.min(self.kill_grace);
        self.shutdown_after(exit_wait).await
    }

    /// As [`Sandboxed::shutdown`], giving the child `exit_wait` to exit by itself once its stdin
    /// is closed (an agent that finishes writing its session before it exits needs longer).
    pub async fn shutdown_after(mut self, exit_wait: Duration) -> Ended {
        self.stdin = None;
        self.stdout = None;
        let Some(mut child) = self.child.take() else {
            return Ended {
                status: None,
                killed: false,
                stderr_tail: self.final_stderr().await,
            };
        };
        if let Ok(Some(status)) = child.try_wait() {
            // The leader is gone, but grandchildren may still hold the group.
            group::kill_group(self.pgid);
            return Ended {
                status: Some(status),
                killed: false,
                stderr_tail: self.final_stderr().await,
            };
        }
        // Closing stdin asks a well-behaved agent to exit on its own; give it a moment first.
        if let Ok(Ok(status)) = tokio::time::timeout(exit_wait, child.wait()).await {
            group::kill_group(self.pgid);
            return Ended {
                status: Some(status),
                killed: false,
                stderr_tail: self.final_stderr().await,
            };
        }
        let end = group::end_child_group(&mut child, self.pgid, self.kill_grace).await;
        Ended {
            status: end.status,
            killed: end.killed,
            stderr_tail: self.final_stderr().await,
        }
    }
}

impl Drop for Sandboxed {
    fn drop(&mut self) {
        if self.child.is_some() {
            // Cancelled mid-use: no time for grace. The child itself is reaped by tokio
            // (`kill_on_drop`); the group kill takes its descendants with it.
            group::kill_group(self.pgid);
            tracing::debug!(program = %self.program, pid = self.pgid.as_raw(), "dropped while running; process group killed");
        }
    }
}

/// Live (not zombie) processes whose working directory is `dir`, from `/proc` (0 elsewhere).
/// Every agent runs in the sandbox home, so this counts the agents of a bridge: `/healthz`
/// reports it, and tests and benchmarks use it to prove no agent outlives its turn.
pub fn live_processes_in(dir: &std::path::Path) -> usize {
    count_live_processes(|proc_dir| {
        std::fs::read_link(proc_dir.join("cwd")).is_ok_and(|cwd| cwd == dir)
    })
}

/// Live processes whose real uid is `uid`, from `/proc/<pid>/status` (readable across uids,
/// unlike `cwd`): how a host counts the agents that run under their own uid.
pub fn live_processes_of_uid(uid: u32) -> usize {
    let wanted = uid.to_string();
    count_live_processes(|proc_dir| {
        std::fs::read_to_string(proc_dir.join("status")).is_ok_and(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().next())
                == Some(wanted.as_str())
        })
    })
}

/// Live processes whose `/proc/<pid>` directory satisfies `selected` (0 without `/proc`).
fn count_live_processes(selected: impl Fn(&std::path::Path) -> bool) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .map(|entry| entry.path())
        .filter(|proc_dir| selected(proc_dir) && is_live(proc_dir))
        .count()
}

/// Whether `/proc/<pid>` describes a running or sleeping process (a zombie waiting to be
/// reaped is not live).
fn is_live(proc_dir: &std::path::Path) -> bool {
    std::fs::read_to_string(proc_dir.join("stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next())
        })
        .is_some_and(|state| state != 'Z' && state != 'X')
}

/// The last `capacity` bytes written.
struct Tail {
    capacity: usize,
    bytes: VecDeque<u8>,
}

impl Tail {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            bytes: VecDeque::with_capacity(capacity.min(64 << 10)),
        }
    }

    fn push(&mut self, data: &[u8]) {
        if self.capacity == 0 {
            return;
        }
        let data = &data[data.len().saturating_sub(self.capacity)..];
        let overflow = (self.bytes.len() + data.len()).saturating_sub(self.capacity);
        self.bytes.drain(..overflow.min(self.bytes.len()));
        self.bytes.extend(data);
    }

    fn text(&self) -> String {
        let (front, back) = self.bytes.as_slices();
        String::from_utf8_lossy(&[front, back].concat()).into_owned()
    }
}

/// Environment variables that must never reach an agent, even when a policy asks.
pub fn is_forbidden_env(name: &str) -> bool {
    const PREFIXES: [&str; 10] = [
        "ANTHROPIC_",
        "CLAUDE_",
        "AWS_",
        "GOOGLE_",
        "GCLOUD_",
        "CLOUDSDK_",
        "VERTEX",
        "BEDROCK",
        "AZURE_",
        "OPENAI_",
    ];
    const NAMES: [&str; 6] = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
    ];
    let upper = name.to_ascii_uppercase();
    PREFIXES.iter().any(|prefix| upper.starts_with(prefix))
        || NAMES.contains(&upper.as_str())
        || upper.starts_with("DEVIN_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_bytes() {
        let mut tail = Tail::new(5);
        tail.push(b"abc");
        tail.push(b"defg");
        assert_eq!(tail.text(), "cdefg");
        tail.push(b"0123456789");
        assert_eq!(tail.text(), "56789");
        let mut none = Tail::new(0);
        none.push(b"x");
        assert_eq!(none.text(), "");
    }

    fn spec(script: &str) -> Spec {
        Spec {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".into(), script.into()],
            cwd: std::env::temp_dir(),
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("ONLY".into(), "this".into()),
            ],
            stderr_tail_bytes: 64,
            kill_grace: Duration::from_millis(300),
            identity: None,
        }
    }

    fn alive(pid: i32) -> bool {
        is_live(&std::path::Path::new("/proc").join(pid.to_string()))
    }

    #[tokio::test]
    async fn the_environment_is_exactly_the_given_one() {
        let mut child = Sandboxed::spawn(&spec("env; echo err >&2")).expect("spawn");
        let mut out = String::new();
        child
            .take_stdout()
            .expect("stdout")
            .read_to_string(&mut out)
            .await
            .expect("read");
        let ended = child.shutdown().await;
        let mut names: Vec<&str> = out.lines().filter_map(|l| l.split('=').next()).collect();
        names.sort();
        // sh itself may add PWD, SHLVL and `_`; nothing of ours leaks beyond the two given.
        names.retain(|name| !["PWD", "SHLVL", "_"].contains(name));
        assert_eq!(names, ["ONLY", "PATH"]);
        assert_eq!(ended.stderr_tail.trim(), "err");
    }

    #[tokio::test]
    async fn shutdown_kills_a_group_that_ignores_sigterm() {
        // The leader ignores TERM and has a grandchild that ignores it too.
        let mut child =
            Sandboxed::spawn(&spec("trap '' TERM; sleep 300 & echo $!; wait")).expect("spawn");
        let mut stdout = child.take_stdout().expect("stdout");
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while stdout.read(&mut byte).await.expect("read") == 1 && byte[0] != b'\n' {
            line.push(byte[0]);
        }
        let grandchild: i32 = String::from_utf8_lossy(&line).trim().parse().expect("pid");
        assert!(alive(grandchild));
        let ended = child.shutdown().await;
        assert!(
            ended.killed,
            "SIGTERM was ignored, so SIGKILL must have been needed"
        );
        // The grandchild is reparented to init and reaped there; give it a moment.
        for _ in 0..50 {
            if !alive(grandchild) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("grandchild {grandchild} survived");
    }

    #[tokio::test]
    async fn dropping_a_running_child_kills_its_group() {
        let mut child = Sandboxed::spawn(&spec("sleep 300 & echo $!; wait")).expect("spawn");
        let mut stdout = child.take_stdout().expect("stdout");
        let mut text = String::new();
        let mut byte = [0u8; 1];
        while stdout.read(&mut byte).await.expect("read") == 1 && byte[0] != b'\n' {
            text.push(byte[0] as char);
        }
        let grandchild: i32 = text.trim().parse().expect("pid");
        drop(child);
        for _ in 0..50 {
            if !alive(grandchild) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("grandchild {grandchild} survived the drop");
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error() {
        let mut missing = spec("true");
        missing.program = PathBuf::from("/nonexistent/devin");
        assert!(matches!(
            Sandboxed::spawn(&missing),
            Err(SpawnError::Spawn { .. })
        ));
    }
}
