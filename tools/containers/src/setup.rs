//! What the container proof needs on this machine, set up by `test-container` itself so that
//! `cargo xtask test` works on a fresh Debian machine: the Debian packages whose programs it
//! runs, and a running Docker daemon.
//!
//! As root, a missing package is installed (see `devin_bridge_test_setup::debian`) and a
//! Docker daemon that does not answer is started (`dockerd` in the background, in its own
//! process group so that it outlives this run, its log in `target/dockerd.log`). Without root
//! nothing is changed: the run fails with the exact commands to run as root. Every step is
//! printed. Invariant: nothing is installed or started when everything is already there.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use devin_bridge_test_setup::debian::{self, Need};

use crate::workspace_root;

/// The programs the container proof runs on this machine: a Docker engine and Compose,
/// `debootstrap` for the images' Debian root filesystem, `iptables` for dockerd's networks,
/// binutils' `objcopy` and GNU `tar` for the image layers, node and npm (copied into the
/// Claude Code image; npm installs the pinned Claude Code) and `curl` (the outpost check's
/// calls to the fake fleet).
const NEEDS: [Need; 9] = [
    Need::new("docker", "docker.io"),
    Need::new("docker-compose", "docker-compose"),
    Need::new("debootstrap", "debootstrap"),
    Need::new("iptables", "iptables"),
    Need::new("objcopy", "binutils"),
    Need::new("tar", "tar"),
    Need::new("node", "nodejs"),
    Need::new("npm", "npm"),
    Need::new("curl", "curl"),
];

/// What the messages call the consumer of these packages.
const WHAT: &str = "the container proof";

/// The command that starts the Docker daemon in the background, as root.
const START_DOCKERD: &str = "dockerd >/var/log/dockerd.log 2>&1 &";

/// How long a started dockerd has to answer `docker info`.
const DOCKERD_WAIT: Duration = Duration::from_secs(60);

/// Installs what is missing and starts the Docker daemon when it does not answer (as root), or
/// fails naming every command that would.
pub(crate) fn ensure_container_prerequisites() -> Result<()> {
    let needs = needs();
    let packages = debian::ensure(&needs, WHAT, "containers");
    let daemon = docker_info();
    match (packages, daemon) {
        (Ok(()), Ok(version)) => {
            eprintln!(
                "containers: the programs {WHAT} runs are installed; the Docker daemon answers (docker {version})"
            );
            Ok(())
        }
        (Ok(()), Err(error)) if debian::is_root() => {
            eprintln!("containers: the programs {WHAT} runs are installed");
            start_dockerd(&error)
        }
        (Ok(()), Err(error)) => bail!(
            "{WHAT} needs a Docker daemon that answers this user (`docker info`: {error}); \
             start it as root:\n  {START_DOCKERD}\n(run as root, `cargo xtask test-container` \
             starts it itself)"
        ),
        (Err(packages), daemon) if packages.is_not_root() => {
            let start = match daemon {
                Ok(_) => String::new(),
                Err(_) => format!("\nthen start the Docker daemon:\n  {START_DOCKERD}"),
            };
            bail!("{packages}{start}\n(run as root, `cargo xtask test-container` does this itself)")
        }
        (Err(packages), _) => Err(packages.into()),
    }
}

/// [`NEEDS`], without Compose when the `docker compose` plugin answers.
fn needs() -> Vec<Need> {
    let plugin = Command::new("docker")
        .args(["compose", "version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    NEEDS
        .into_iter()
        .filter(|need| !(plugin && need.program == "docker-compose"))
        .collect()
}

/// `docker info`'s server version, or its error.
fn docker_info() -> std::result::Result<String, String> {
    match Command::new("docker")
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
fn start_dockerd(error: &str) -> Result<()> {
    let dockerd =
        debian::find_program("dockerd").context("docker.io is installed but has no dockerd")?;
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
        if let Ok(version) = docker_info() {
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
