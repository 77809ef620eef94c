//! What the container proof needs on this machine, set up by `test-container` itself so that
//! `cargo xtask test` works on a fresh Debian machine: the Debian packages whose programs it
//! runs, and a running Docker daemon.
//!
//! As root, a missing package is installed (see `devin_bridge_test_setup::debian`) and a
//! Docker daemon that does not answer is started (`dockerd` in the background, in its own
//! process group so that it outlives this run, its log in `target/dockerd.log`). Without root
//! nothing is changed: the run fails with the exact commands to run as root. Every step is
//! printed. Invariant: nothing is installed or started when everything is already there.
//!
//! What to do is decided first, as a [`Plan`] computed from what a [`ProgramSearch`] finds, so
//! that the decision can be checked against machines that are not this one (a `PATH` holding
//! only a `docker` client, as a fresh machine has, or nothing at all). Each program is checked
//! by itself: the `docker` client is not the daemon, and a machine that has one may lack the
//! other.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use devin_bridge_test_setup::debian::{self, Need, ProgramSearch};

use crate::workspace::workspace_root;

/// The programs the container proof runs on this machine: the Docker client and daemon
/// (`dockerd`, which the Debian package docker.io installs beside its client) and Compose,
/// `debootstrap` for the images' Debian root filesystem, `iptables` for dockerd's networks,
/// binutils' `objcopy` and GNU `tar` for the image layers, node and npm (copied into the
/// Claude Code image; npm installs the pinned Claude Code), `curl` (the outpost check's
/// calls to the fake fleet) and `ps`, which dockerd itself runs to answer `docker top` (the
/// proof's view of a container's processes: a minimal Debian has no procps).
const NEEDS: [Need; 11] = [
    Need::new("docker", "docker.io"),
    Need::new("dockerd", "docker.io"),
    Need::new("docker-compose", "docker-compose"),
    Need::new("debootstrap", "debootstrap"),
    Need::new("iptables", "iptables"),
    Need::new("objcopy", "binutils"),
    Need::new("tar", "tar"),
    Need::new("node", "nodejs"),
    Need::new("npm", "npm"),
    Need::new("curl", "curl"),
    Need::new("ps", "procps"),
];

/// What the messages call the consumer of these packages.
const WHAT: &str = "the container proof";

/// The command that starts the Docker daemon in the background, as root.
const START_DOCKERD: &str = "dockerd >/var/log/dockerd.log 2>&1 &";

/// How long a started dockerd has to answer `docker info`.
const DOCKERD_WAIT: Duration = Duration::from_secs(60);

/// What the set-up will do on a machine: the packages to install (each needed program's,
/// when that program is missing) and whether to start the Docker daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The programs to check: [`NEEDS`], without Compose where the plugin answers.
    pub(crate) needs: Vec<Need>,
    /// Debian packages to install, each once, in [`NEEDS`] order.
    pub(crate) packages: Vec<&'static str>,
    /// Whether the Docker daemon must be started: `docker info` found no daemon answering.
    pub(crate) start_daemon: bool,
    /// What `docker info` said: the server version, or why it did not answer.
    pub(crate) daemon: std::result::Result<String, String>,
}

impl Plan {
    /// The plan for the machine `search` describes: runs the `docker` it finds (if any) to ask
    /// whether the Compose plugin and a daemon answer.
    pub(crate) fn for_machine(search: &ProgramSearch) -> Plan {
        let docker = search.find("docker");
        let compose_plugin = docker.as_deref().is_some_and(compose_plugin_answers);
        let daemon = match docker.as_deref() {
            Some(docker) => docker_info(docker),
            None => Err("no docker client is installed".to_owned()),
        };
        let needs: Vec<Need> = NEEDS
            .into_iter()
            .filter(|need| !(compose_plugin && need.program == "docker-compose"))
            .collect();
        Plan {
            packages: search.missing(&needs),
            needs,
            start_daemon: daemon.is_err(),
            daemon,
        }
    }
}

/// Installs what is missing and starts the Docker daemon when it does not answer (as root), or
/// fails naming every command that would.
pub(crate) fn ensure_container_prerequisites() -> Result<()> {
    let search = ProgramSearch::from_env();
    let plan = Plan::for_machine(&search);
    eprintln!(
        "containers: set-up plan: install {}; Docker daemon: {}",
        if plan.packages.is_empty() {
            "nothing".to_owned()
        } else {
            plan.packages.join(" ")
        },
        match &plan.daemon {
            Ok(version) => format!("answers (docker {version})"),
            Err(error) => format!("start dockerd ({error})"),
        }
    );
    if !plan.packages.is_empty() {
        match debian::ensure(&plan.needs, WHAT, "containers") {
            Err(error) if error.is_not_root() => {
                let start = if plan.start_daemon {
                    format!("\nthen start the Docker daemon:\n  {START_DOCKERD}")
                } else {
                    String::new()
                };
                bail!(
                    "{error}{start}\n(run as root, `cargo xtask test-container` does this itself)"
                )
            }
            installed => installed?,
        }
    }
    eprintln!("containers: the programs {WHAT} runs are installed");
    if !plan.start_daemon {
        return Ok(());
    }
    // A client installed just now may answer where none did before (a daemon already running
    // under a client that was missing): ask again before starting one.
    let docker = ProgramSearch::from_env()
        .find("docker")
        .context("no docker client after the installation")?;
    match docker_info(&docker) {
        Ok(version) => {
            eprintln!("containers: the Docker daemon answers (docker {version})");
            Ok(())
        }
        Err(error) if debian::is_root() => {
            start_dockerd(&ProgramSearch::from_env(), &docker, &error)
        }
        Err(error) => bail!(
            "{WHAT} needs a Docker daemon that answers this user (`docker info`: {error}); \
             start it as root:\n  {START_DOCKERD}\n(run as root, `cargo xtask test-container` \
             starts it itself)"
        ),
    }
}

/// Whether `docker compose version` answers: the Compose plugin stands in for `docker-compose`.
fn compose_plugin_answers(docker: &Path) -> bool {
    Command::new(docker)
        .args(["compose", "version"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// `docker info`'s server version, or its error.
fn docker_info(docker: &Path) -> std::result::Result<String, String> {
    match Command::new(docker)
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        }
        Ok(out) => Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
        Err(error) => Err(error.to_string()),
    }
}

/// As root: starts dockerd in the background and waits for `docker info` to answer; when it
/// does not, stops the dockerd it started (a hung one would keep its pid file and refuse the
/// next start) and fails with the end of its log.
fn start_dockerd(search: &ProgramSearch, docker: &Path, error: &str) -> Result<()> {
    let dockerd = search
        .find("dockerd")
        .context("no dockerd after the installation of docker.io")?;
    let log_path = workspace_root().join("target").join("dockerd.log");
    if let Some(dir) = log_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let log =
        File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;
    eprintln!(
        "containers: the Docker daemon does not answer ({error}); starting {} in the background, its log in {}",
        dockerd.display(),
        log_path.display()
    );
    let mut child = Command::new(&dockerd)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        // Its own process group: an interrupt of this run does not stop the daemon, which
        // stays up for later runs.
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {}", dockerd.display()))?;
    eprintln!(
        "containers: waiting up to {} s for `docker info` to answer",
        DOCKERD_WAIT.as_secs()
    );
    let started = Instant::now();
    loop {
        if let Ok(version) = docker_info(docker) {
            eprintln!(
                "containers: the Docker daemon answers after {} s (docker {version})",
                started.elapsed().as_secs()
            );
            return Ok(());
        }
        let exited = child.try_wait()?;
        if exited.is_some() || started.elapsed() > DOCKERD_WAIT {
            let how = match exited {
                Some(status) => format!("dockerd exited ({status})"),
                None => {
                    let _ = child.kill();
                    let _ = child.wait();
                    format!(
                        "dockerd did not answer within {} s and was stopped",
                        DOCKERD_WAIT.as_secs()
                    )
                }
            };
            bail!(
                "{how}; the end of its log ({}):\n{}",
                log_path.display(),
                log_tail(&log_path, 40)
            );
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The last `lines` lines of a file (lossily decoded), or why it cannot be read.
fn log_tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(error) => format!("(cannot read {}: {error})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A directory holding only a `docker` client that, like the real one without a daemon,
    /// fails `docker info` and knows no `compose` command.
    fn client_only_path() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let stub = dir.path().join("docker");
        std::fs::write(
            &stub,
            "#!/bin/sh\n\
             case \"$1\" in\n\
             info) echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2; exit 1;;\n\
             *) echo \"docker: unknown command: docker $1\" >&2; exit 1;;\n\
             esac\n",
        )
        .expect("write stub");
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        dir
    }

    #[test]
    fn a_docker_client_alone_plans_docker_io_and_the_daemon_start() {
        let dir = client_only_path();
        let plan = Plan::for_machine(&ProgramSearch::only([dir.path().to_path_buf()]));
        assert!(
            plan.packages.contains(&"docker.io"),
            "the client stands in for the daemon: {plan:?}"
        );
        assert!(plan.start_daemon, "{plan:?}");
        assert!(
            plan.daemon
                .as_ref()
                .is_err_and(|error| error.contains("Cannot connect")),
            "{plan:?}"
        );
        // No plugin answered, so Compose is a package of its own.
        assert!(plan.packages.contains(&"docker-compose"), "{plan:?}");
    }

    #[test]
    fn an_empty_path_plans_every_package_and_the_daemon_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let plan = Plan::for_machine(&ProgramSearch::only([dir.path().to_path_buf()]));
        assert_eq!(
            plan.packages,
            vec![
                "docker.io",
                "docker-compose",
                "debootstrap",
                "iptables",
                "binutils",
                "tar",
                "nodejs",
                "npm",
                "curl",
                "procps"
            ]
        );
        assert!(plan.start_daemon);
    }

    #[test]
    fn a_machine_with_client_and_daemon_plans_no_docker_io() {
        let dir = client_only_path();
        std::fs::write(dir.path().join("dockerd"), "#!/bin/sh\n").expect("dockerd stub");
        let plan = Plan::for_machine(&ProgramSearch::only([dir.path().to_path_buf()]));
        assert!(!plan.packages.contains(&"docker.io"), "{plan:?}");
        // The daemon is installed but not running: it is started.
        assert!(plan.start_daemon);
    }

    #[test]
    fn the_log_tail_is_its_last_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("dockerd.log");
        let text: String = (1..=50).map(|n| format!("line {n}\n")).collect();
        std::fs::write(&log, text).expect("write");
        assert_eq!(log_tail(&log, 3), "line 48\nline 49\nline 50");
        assert_eq!(log_tail(&log, 100).lines().count(), 50);
        assert!(log_tail(&dir.path().join("absent"), 3).starts_with("(cannot read"));
    }
}
