//! `devin-bridge outpost keeper -- PROGRAM ARGS...` (internal): runs one remote in its own
//! process group and ends that group when its lifeline (stdin) closes or on SIGTERM/SIGINT.
//!
//! Protocol with the worker: the keeper prints `started <pid>` on stdout once the remote runs
//! (its pid is also its process group), then exits with the remote's status (its exit code, or
//! 128 + the signal). The environment is passed through untouched: the worker built it.

use std::process::{ExitCode, Stdio};
use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::signal::unix::{signal, SignalKind};

/// `outpost keeper` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct KeeperArgs {
    /// Between SIGTERM and SIGKILL of the remote's group.
    #[arg(long, default_value_t = 10_000)]
    pub grace_ms: u64,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Runs the keeper.
pub async fn run(args: KeeperArgs) -> anyhow::Result<ExitCode> {
    let (program, rest) = args
        .command
        .split_first()
        .context("keeper: no program given")?;
    let mut child = tokio::process::Command::new(program)
        .args(rest)
        .process_group(0)
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("keeper: cannot start {program}"))?;
    let pid = child.id().context("keeper: the remote has no pid")?;
    let group = Pid::from_raw(i32::try_from(pid).context("keeper: pid out of range")?);
    let mut stdout = tokio::io::stdout();
    stdout
        .write_all(format!("started {pid}\n").as_bytes())
        .await
        .context("keeper: cannot report the pid")?;
    stdout
        .flush()
        .await
        .context("keeper: cannot report the pid")?;

    let mut terminate = signal(SignalKind::terminate()).context("keeper: SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("keeper: SIGINT handler")?;
    // The lifeline is read through the reactor, not `tokio::io::stdin()`: that one reads on a
    // blocking thread that cannot be cancelled, and would keep this process alive after the
    // remote exited until the worker closed the pipe.
    let mut pipe = lifeline_pipe()?;
    let lifeline = async {
        let mut buffer = [0u8; 64];
        // Any byte is ignored; only the end of the pipe counts.
        while matches!(pipe.read(&mut buffer).await, Ok(n) if n > 0) {}
    };
    let grace = Duration::from_millis(args.grace_ms);
    let status = tokio::select! {
        status = child.wait() => {
            // Whatever the remote left behind in its group goes with it.
            let _ = killpg(group, Signal::SIGKILL);
            status.ok()
        }
        () = lifeline => end_group(&mut child, group, grace).await,
        _ = terminate.recv() => end_group(&mut child, group, grace).await,
        _ = interrupt.recv() => end_group(&mut child, group, grace).await,
    };
    Ok(exit_code(status))
}

/// Standard input as an async pipe (it must be one: the worker gives the keeper a pipe).
fn lifeline_pipe() -> anyhow::Result<tokio::net::unix::pipe::Receiver> {
    use std::os::fd::AsFd;
    let fd = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .context("keeper: cannot use stdin")?;
    tokio::net::unix::pipe::Receiver::from_file(std::fs::File::from(fd))
        .context("keeper: stdin must be the worker's pipe")
}

async fn end_group(
    child: &mut tokio::process::Child,
    group: Pid,
    grace: Duration,
) -> Option<std::process::ExitStatus> {
    let _ = killpg(group, Signal::SIGTERM);
    let status = match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => None,
    };
    let _ = killpg(group, Signal::SIGKILL);
    match status {
        Some(status) => Some(status),
        None => child.wait().await.ok(),
    }
}

fn exit_code(status: Option<std::process::ExitStatus>) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    let code = match status {
        Some(status) => status
            .code()
            .or_else(|| status.signal().map(|signal| 128 + signal))
            .unwrap_or(1),
        None => 1,
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
