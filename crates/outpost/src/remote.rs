//! Running `devin-remote` for one session.
//!
//! The worker starts the remote itself, in its own process group, after starting a keeper
//! (`devin_bridge_agent::process::keeper`, from this binary's running image, so an upgrade of
//! the binary in place does not stop sessions from starting), and tells the keeper the
//! remote's pid. The keeper holds the read end of a pipe whose write end only the worker has:
//! when the worker ends in any way, `kill -9` included, the kernel closes that pipe and the
//! keeper terminates the remote's whole group (SIGTERM, a grace, SIGKILL). The remote is started
//! through the keeper's gate: it runs only once the keeper watches its group, and a keeper that
//! does not take the watch fails the launch before the remote runs, so no remote runs unwatched
//! and none outlives the worker that claimed its session, without any `unsafe` `pre_exec`
//! hook in the worker. A graceful stop ends the group from the worker
//! (`devin_bridge_agent::process::group`), then releases the keeper.
//!
//! The environment is exactly what the caller built ([`remote_env`]); nothing is inherited.
//! The remote's stdout and stderr, and the keeper's stderr, go to the session's log.

use std::ffi::OsString;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::unistd::Pid;
use tokio::process::Child;

use devin_bridge_agent::process::group::{end_child_group, kill_group};
use devin_bridge_agent::process::keeper::{Lifeline, StartError};
use devin_bridge_agent::process::Spec;

use super::fleet::{Secret, SessionId};

/// Why a remote could not be started. Each is a failure of this machine (its files, its
/// processes), not of the session.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LaunchError {
    #[error("cannot open the session log {path}: {source}")]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the remote's keeper: {0}")]
    Spawn(std::io::Error),
    #[error("the remote did not start: cannot run {program}: {source}")]
    NotStarted {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// The variables a remote gets, and nothing else.
pub(crate) struct RemoteEnv<'a> {
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
pub(crate) fn remote_env(input: &RemoteEnv<'_>) -> Vec<(String, String)> {
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
pub(crate) struct Launch {
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
pub(crate) enum RemoteExit {
    /// It exited by itself with this code (0: the session ended).
    Exited(i32),
    /// It was stopped (by us, or it died of a signal).
    Stopped,
}

/// A running remote, watched by its keeper.
pub(crate) struct RunningRemote {
    remote: Child,
    keeper: Option<Lifeline>,
    remote_group: Pid,
    kill_grace: Duration,
    /// The remote's status once it was reaped (its group ended with it).
    reaped: Option<Option<ExitStatus>>,
}

/// Starts the keeper, then the remote, and tells the keeper the remote's pid.
pub(crate) async fn launch(spec: &Launch) -> Result<RunningRemote, LaunchError> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&spec.log)
        .map_err(|source| LaunchError::Log {
            path: spec.log.clone(),
            source,
        })?;
    let log_for = |what: &std::fs::File| {
        what.try_clone().map_err(|source| LaunchError::Log {
            path: spec.log.clone(),
            source,
        })
    };
    // The keeper first: once the remote runs, nothing may leave it unwatched.
    let mut keeper = Lifeline::start(spec.kill_grace, Stdio::from(log_for(&log)?))
        .map_err(LaunchError::Spawn)?;
    let mut argv = spec.wrapper.clone();
    argv.push(spec.binary.display().to_string());
    argv.push("serve".to_owned());
    let (program, args) = match argv.split_first() {
        Some((program, args)) => (PathBuf::from(program), args.to_vec()),
        None => (spec.binary.clone(), Vec::new()),
    };
    let process = Spec {
        program,
        args,
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
    let remote = keeper
        .spawn_watched(&process, Stdio::from(log_for(&log)?), Stdio::from(log))
        .await;
    let remote = match remote {
        Ok(remote) => remote,
        Err(StartError::Spawn { program, source }) => {
            keeper.release().await;
            return Err(LaunchError::NotStarted { program, source });
        }
        // The gate was killed before the remote ran: no remote runs unwatched.
        Err(StartError::Unwatched(error)) => {
            drop(keeper);
            return Err(LaunchError::Spawn(error));
        }
    };
    let pid = remote
        .id()
        .and_then(|pid| i32::try_from(pid).ok())
        .unwrap_or(0);
    Ok(RunningRemote {
        remote,
        keeper: Some(keeper),
        remote_group: Pid::from_raw(pid),
        kill_grace: spec.kill_grace,
        reaped: None,
    })
}

impl RunningRemote {
    /// The remote's process group.
    pub(crate) fn group(&self) -> Pid {
        self.remote_group
    }

    /// Waits until the remote ends by itself; whatever it left in its group goes with it.
    /// Cancel-safe: a status reaped before a cancellation is kept for the next call.
    pub(crate) async fn wait(&mut self) -> RemoteExit {
        let status = match self.reaped {
            Some(status) => status,
            None => {
                let status = self.remote.wait().await.ok();
                kill_group(self.remote_group);
                self.reaped = Some(status);
                status
            }
        };
        self.release_keeper().await;
        exit_of(status)
    }

    /// Ends the remote: SIGTERM to its group, the grace, SIGKILL, reap. A remote that had
    /// already ended is not reported as a clean exit.
    pub(crate) async fn stop(&mut self) -> RemoteExit {
        let status = match self.reaped {
            Some(_) => None,
            None => {
                let end =
                    end_child_group(&mut self.remote, self.remote_group, self.kill_grace).await;
                self.reaped = Some(end.status);
                end.status
            }
        };
        self.release_keeper().await;
        match exit_of(status) {
            RemoteExit::Exited(0) => RemoteExit::Exited(0),
            _ => RemoteExit::Stopped,
        }
    }

    /// The group is ended and its leader reaped: the keeper exits without touching anything.
    async fn release_keeper(&mut self) {
        if let Some(keeper) = self.keeper.take() {
            keeper.release().await;
        }
    }
}

impl Drop for RunningRemote {
    fn drop(&mut self) {
        if self.reaped.is_none() {
            // Abandoned (a panic, a cancelled task): nothing of the session may keep running.
            // The keeper, whose lifeline closes with it, checks the group too.
            kill_group(self.remote_group);
        }
    }
}

/// A code of 128 or more is a shell's report of a signal, as is a signal itself: stopped.
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
