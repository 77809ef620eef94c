//! Running `devin-remote` for one session.
//!
//! The remote is started through a keeper (`devin-bridge outpost keeper`, this binary): the
//! keeper puts the remote in its own process group and holds the read end of a pipe whose
//! write end only the worker has. When the worker ends in any way, `kill -9` included, the
//! kernel closes that pipe, and the keeper terminates the remote's whole group (SIGTERM, a
//! grace, SIGKILL). So no remote outlives the worker that claimed its session, without any
//! `unsafe` `pre_exec` hook in the worker. A graceful stop is the same path: the worker closes
//! the pipe.
//!
//! The environment is exactly what the caller built ([`remote_env`]); nothing is inherited.

use std::ffi::OsString;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin};

use devin_bridge_agent::process::{command_for, Spec};

use super::fleet::{Secret, SessionId};

/// How long the keeper has to report the remote's pid.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a remote could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot open the session log {path}: {source}")]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the remote's keeper: {0}")]
    Spawn(String),
    #[error("the remote did not start: {0}")]
    NotStarted(String),
}

/// The variables a remote gets, and nothing else.
pub struct RemoteEnv<'a> {
    pub gateway_url: &'a str,
    pub connect_token: &'a Secret,
    pub session: &'a SessionId,
    pub state_dir: &'a Path,
    pub chrome_path: Option<&'a Path>,
    pub desktop: bool,
    /// The basic system variables, from the worker's environment.
    pub system: &'a [(String, String)],
    /// Proxy variables pointing at the session's egress guard, when it has a network policy.
    pub proxy: Option<&'a str>,
}

/// The complete environment of a remote: the three `DEVIN_OUTPOST_*` variables, the state
/// directory, the optional Chrome/desktop ones, the basic system ones, and the proxy of the
/// session's egress guard when its network is restricted.
pub fn remote_env(input: &RemoteEnv<'_>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vec![
        ("DEVIN_OUTPOST_GATEWAY_URL".into(), input.gateway_url.into()),
        (
            "DEVIN_OUTPOST_CONNECT_TOKEN".into(),
            input.connect_token.expose().into(),
        ),
        ("DEVIN_OUTPOST_SESSION_ID".into(), input.session.to_string()),
        (
            "DEVIN_REMOTE_STATE_DIR".into(),
            input.state_dir.display().to_string(),
        ),
    ];
    if let Some(chrome) = input.chrome_path {
        env.push(("DEVIN_CHROME_PATH".into(), chrome.display().to_string()));
    }
    if input.desktop {
        env.push(("DEVIN_OUTPOST_DESKTOP".into(), "true".into()));
    }
    for (name, value) in input.system {
        if super::settings::SYSTEM_ENV.contains(&name.as_str()) {
            env.push((name.clone(), value.clone()));
        }
    }
    if !env.iter().any(|(name, _)| name == "PATH") {
        env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    if let Some(proxy) = input.proxy {
        for name in [
            "HTTPS_PROXY",
            "https_proxy",
            "HTTP_PROXY",
            "http_proxy",
            "ALL_PROXY",
            "all_proxy",
        ] {
            env.push((name.into(), proxy.into()));
        }
    }
    env
}

/// What to run.
pub struct Launch {
    pub binary: PathBuf,
    /// Arguments placed before the binary (a namespace wrapper), empty for none.
    pub wrapper: Vec<String>,
    pub work_dir: PathBuf,
    pub env: Vec<(String, String)>,
    pub log: PathBuf,
    pub kill_grace: Duration,
}

/// How a remote ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteExit {
    /// It exited by itself with this code (0: the session ended).
    Exited(i32),
    /// It was stopped (by us, or it died of a signal).
    Stopped,
}

/// A running remote (through its keeper).
pub struct RunningRemote {
    keeper: Child,
    lifeline: Option<ChildStdin>,
    remote_group: Pid,
    pub started_at: Instant,
    kill_grace: Duration,
    finished: bool,
}

/// Starts the remote and waits until its keeper reports it running.
pub async fn launch(spec: &Launch) -> Result<RunningRemote, LaunchError> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&spec.log)
        .map_err(|source| LaunchError::Log {
            path: spec.log.clone(),
            source,
        })?;
    let keeper = std::env::current_exe()
        .map_err(|error| LaunchError::Spawn(format!("cannot find this executable: {error}")))?;
    let mut args = vec![
        "outpost".to_owned(),
        "keeper".to_owned(),
        "--grace-ms".to_owned(),
        spec.kill_grace.as_millis().to_string(),
        "--".to_owned(),
    ];
    args.extend(spec.wrapper.iter().cloned());
    args.push(spec.binary.display().to_string());
    args.push("serve".to_owned());
    let process = Spec {
        program: keeper,
        args: Vec::new(),
        cwd: spec.work_dir.clone(),
        env: spec
            .env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect(),
        stderr_tail_bytes: 0,
        kill_grace: spec.kill_grace,
        identity: None,
    };
    let mut command = command_for(&process);
    // The keeper must get the chance to end the remote's group: it is never SIGKILLed on drop
    // (dropping `RunningRemote` kills the remote's group itself).
    command
        .kill_on_drop(false)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log));
    let mut keeper = command
        .spawn()
        .map_err(|error| LaunchError::Spawn(error.to_string()))?;
    let lifeline = keeper.stdin.take();
    let stdout = keeper
        .stdout
        .take()
        .ok_or_else(|| LaunchError::Spawn("no stdout pipe".into()))?;
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(START_TIMEOUT, lines.next_line()).await;
    let pid = match first {
        Ok(Ok(Some(line))) => line
            .strip_prefix("started ")
            .and_then(|pid| pid.trim().parse::<i32>().ok())
            .filter(|pid| *pid > 1),
        _ => None,
    };
    match pid {
        Some(pid) => Ok(RunningRemote {
            keeper,
            lifeline,
            remote_group: Pid::from_raw(pid),
            started_at: Instant::now(),
            kill_grace: spec.kill_grace,
            finished: false,
        }),
        None => {
            drop(lifeline);
            let status = tokio::time::timeout(Duration::from_secs(5), keeper.wait()).await;
            Err(LaunchError::NotStarted(match status {
                Ok(Ok(status)) => format!("its keeper exited with {status}"),
                _ => "its keeper did not report it".into(),
            }))
        }
    }
}

impl RunningRemote {
    /// The remote's process group.
    pub fn group(&self) -> Pid {
        self.remote_group
    }

    /// Waits until the remote ends by itself.
    pub async fn wait(&mut self) -> RemoteExit {
        let status = self.keeper.wait().await;
        self.finished = true;
        exit_of(status.ok())
    }

    /// Ends the remote: closes the lifeline (the keeper sends SIGTERM to the group, waits the
    /// grace, then SIGKILL), and kills the group itself if the keeper does not finish in time.
    pub async fn stop(&mut self) -> RemoteExit {
        if self.finished {
            return RemoteExit::Stopped;
        }
        drop(self.lifeline.take());
        let budget = self.kill_grace + Duration::from_secs(2);
        let exit = match tokio::time::timeout(budget, self.keeper.wait()).await {
            Ok(status) => exit_of(status.ok()),
            Err(_) => {
                let _ = killpg(self.remote_group, Signal::SIGKILL);
                let _ = self.keeper.start_kill();
                let _ = self.keeper.wait().await;
                RemoteExit::Stopped
            }
        };
        self.finished = true;
        match exit {
            RemoteExit::Exited(0) => RemoteExit::Exited(0),
            _ => RemoteExit::Stopped,
        }
    }
}

impl Drop for RunningRemote {
    fn drop(&mut self) {
        if !self.finished {
            // Abandoned (a panic, a cancelled task): nothing of the session may keep running.
            let _ = killpg(self.remote_group, Signal::SIGKILL);
        }
    }
}

/// The keeper's exit status is the remote's: its code, or 128 + the signal that ended it.
fn exit_of(status: Option<ExitStatus>) -> RemoteExit {
    match status.and_then(|status| status.code()) {
        Some(code) if code < 128 => RemoteExit::Exited(code),
        _ => RemoteExit::Stopped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_exactly_the_allowed_set() {
        let token = Secret::new("connect-token".into());
        let session: SessionId = "devin-1".parse().expect("id");
        let system = vec![
            ("PATH".to_owned(), "/bin".to_owned()),
            ("HOME".to_owned(), "/home/w".to_owned()),
            ("DEVIN_OUTPOSTS_TOKEN".to_owned(), "secret".to_owned()),
            ("AWS_SECRET_ACCESS_KEY".to_owned(), "secret".to_owned()),
        ];
        let env = remote_env(&RemoteEnv {
            gateway_url: "wss://gw",
            connect_token: &token,
            session: &session,
            state_dir: Path::new("/data/sessions/devin-1"),
            chrome_path: None,
            desktop: true,
            system: &system,
            proxy: None,
        });
        let names: Vec<&str> = env.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            [
                "DEVIN_OUTPOST_GATEWAY_URL",
                "DEVIN_OUTPOST_CONNECT_TOKEN",
                "DEVIN_OUTPOST_SESSION_ID",
                "DEVIN_REMOTE_STATE_DIR",
                "DEVIN_OUTPOST_DESKTOP",
                "PATH",
                "HOME"
            ]
        );
        assert!(!env.iter().any(|(_, value)| value == "secret"));
    }
}
