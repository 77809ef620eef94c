//! `devin-bridge companion group-keeper` (internal): the watchdog of one print run's process
//! group, so that no `devin -p` outlives the worker that started it.
//!
//! `kill -9` of a worker runs no code in the worker, so the worker alone cannot end the
//! `devin -p` it started (which leads a process group of its own). Before the run, the worker
//! starts this keeper in another process group and keeps the only write end of the keeper's
//! stdin, the lifeline. The protocol on the lifeline is two lines:
//!
//! - `watch <pid> <start time>`: devin's pid (also its process group) and its start time
//!   (field 22 of `/proc/<pid>/stat`), written as soon as devin runs;
//! - `done`: the worker has ended the group itself; the keeper exits and touches nothing.
//!
//! When the lifeline closes without `done` (the worker ended in any way, `kill -9` included:
//! the kernel closes its descriptors), or the keeper itself gets SIGTERM, SIGINT or SIGHUP, the
//! keeper ends devin's group as a cancel does: SIGTERM to the group, up to the grace for it to
//! go, SIGKILL ([`liveness::terminate`]), then the same for whatever devin left in its group if
//! devin itself is already gone ([`liveness::end_orphaned_group`]). The start time guards
//! against pid reuse: a pid now used by another process is left alone. This takes no `unsafe`
//! `pre_exec` hook in the worker, and reaches grandchildren, which a parent-death signal on
//! devin would not.

use std::process::ExitCode;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::signal::unix::{signal, Signal, SignalKind};

use super::jobs::liveness::{self, ProcessStamp};

/// The hidden subcommand that runs a keeper.
pub const SUBCOMMAND: &str = "group-keeper";
/// The longest lifeline text read: the protocol is two short lines.
const LIFELINE_LIMIT: usize = 256;

/// `group-keeper --grace-ms G`.
#[derive(Debug, Clone, clap::Args)]
pub struct KeeperArgs {
    /// Between SIGTERM and SIGKILL of the watched group.
    #[arg(long)]
    pub grace_ms: u64,
}

/// `--grace-ms MS`, the keeper's only argument.
pub fn parse_args(args: &[String]) -> Option<KeeperArgs> {
    match args {
        [flag, ms] if flag == "--grace-ms" => {
            ms.parse().ok().map(|grace_ms| KeeperArgs { grace_ms })
        }
        _ => None,
    }
}

/// The worker's end of a keeper: the lifeline's write end, and the keeper process.
pub struct Lifeline {
    stdin: Option<tokio::process::ChildStdin>,
    keeper: tokio::process::Child,
}

impl Lifeline {
    /// Starts `binary companion group-keeper --grace-ms G` in a process group of its own (so a
    /// signal to the worker's group does not reach it), its stdin the lifeline.
    pub fn start(binary: &std::path::Path, grace: Duration) -> std::io::Result<Self> {
        let mut keeper = tokio::process::Command::new(binary)
            .args(["companion", SUBCOMMAND, "--grace-ms"])
            .arg(grace.as_millis().to_string())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()?;
        let stdin = keeper.stdin.take();
        Ok(Self { stdin, keeper })
    }

    /// Tells the keeper which process (and group) to end should the worker go.
    pub async fn watch(&mut self, pid: i32) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt as _;
        let stamp = liveness::ProcessStamp::of_pid(pid)?.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, "devin is already gone")
        })?;
        match &mut self.stdin {
            Some(stdin) => {
                stdin
                    .write_all(format!("watch {} {}\n", stamp.pid, stamp.start_time).as_bytes())
                    .await
            }
            None => Err(std::io::Error::other("the keeper has no lifeline")),
        }
    }

    /// The worker ended the group itself: the keeper exits without touching anything.
    pub async fn release(mut self) {
        use tokio::io::AsyncWriteExt as _;
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"done\n").await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), self.keeper.wait()).await;
    }
}

/// The signals that ask a companion process to stop: SIGTERM, SIGINT and SIGHUP. Registered
/// when this is created, so from then on none of them ends the process by default: the holder
/// decides (a print worker ends devin with the grace, a keeper ends the group it watches).
pub struct StopSignals {
    terminate: Option<Signal>,
    interrupt: Option<Signal>,
    hangup: Option<Signal>,
}

impl StopSignals {
    /// Registers the handlers. One that cannot be registered is left at its default action
    /// (it still ends the process, and the keeper covers that).
    pub fn register() -> Self {
        let register = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(stream) => Some(stream),
            Err(error) => {
                tracing::warn!(%error, signal = name, "cannot handle a stop signal");
                None
            }
        };
        Self {
            terminate: register(SignalKind::terminate(), "SIGTERM"),
            interrupt: register(SignalKind::interrupt(), "SIGINT"),
            hangup: register(SignalKind::hangup(), "SIGHUP"),
        }
    }

    /// Waits for the first of the signals and names it.
    pub async fn recv(&mut self) -> &'static str {
        async fn one(stream: &mut Option<Signal>) {
            match stream {
                Some(stream) => {
                    if stream.recv().await.is_none() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending::<()>().await,
            }
        }
        tokio::select! {
            () = one(&mut self.terminate) => "SIGTERM",
            () = one(&mut self.interrupt) => "SIGINT",
            () = one(&mut self.hangup) => "SIGHUP",
        }
    }
}

/// How the watch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watch {
    /// The worker said `done`, or left before naming a group: nothing to end.
    Released,
    /// The worker is gone (or the keeper was told to stop) while the group was watched.
    Lost { stamp: ProcessStamp, why: String },
}

/// The lifeline's next line, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Line {
    Watch { pid: i32, start_time: u64 },
    Done,
}

fn parse_line(line: &str) -> Option<Line> {
    let mut words = line.split_ascii_whitespace();
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("done"), None, None, None) => Some(Line::Done),
        (Some("watch"), Some(pid), Some(start), None) => Some(Line::Watch {
            pid: pid.parse().ok().filter(|pid| *pid > 1)?,
            start_time: start.parse().ok()?,
        }),
        _ => None,
    }
}

/// Follows the lifeline until `done`, its end, or a stop signal.
pub async fn watch(mut lifeline: impl AsyncRead + Unpin, signals: &mut StopSignals) -> Watch {
    let mut watched: Option<ProcessStamp> = None;
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 64];
    loop {
        let why = tokio::select! {
            read = lifeline.read(&mut chunk) => match read {
                Ok(0) => "the worker's lifeline closed".to_owned(),
                Err(error) => format!("the worker's lifeline failed: {error}"),
                Ok(n) => {
                    pending.extend_from_slice(&chunk[..n]);
                    while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = pending.drain(..=end).collect();
                        match parse_line(&String::from_utf8_lossy(&line)) {
                            Some(Line::Done) => return Watch::Released,
                            Some(Line::Watch { pid, start_time }) => match liveness::boot_id() {
                                Ok(boot_id) => {
                                    watched = Some(ProcessStamp { pid, start_time, boot_id });
                                }
                                Err(error) => {
                                    tracing::warn!(%error, "keeper: cannot read the boot id");
                                }
                            },
                            None => tracing::warn!("keeper: ignored a malformed lifeline line"),
                        }
                    }
                    if pending.len() > LIFELINE_LIMIT {
                        // Not the protocol: nothing more will make sense of it.
                        pending.clear();
                    }
                    continue;
                }
            },
            name = signals.recv() => format!("the keeper received {name}"),
        };
        return match watched {
            Some(stamp) => Watch::Lost { stamp, why },
            None => Watch::Released,
        };
    }
}

/// Ends the group of `stamp`: SIGTERM, up to `grace`, SIGKILL; then what devin left in its
/// group once devin itself is gone. Returns whether anything was signalled.
pub fn end_group(stamp: &ProcessStamp, grace: Duration) -> bool {
    let leader = liveness::terminate(&[stamp], grace);
    let orphans = liveness::end_orphaned_group(stamp, grace);
    leader || orphans
}

/// Runs the keeper on this process's stdin. Always exits 0 but for a stdin that is not a pipe.
pub async fn run(args: KeeperArgs) -> ExitCode {
    let mut signals = StopSignals::register();
    let grace = Duration::from_millis(args.grace_ms);
    // A pipe read through the reactor, not tokio's stdin (a blocking thread that would keep
    // the runtime from shutting down while the worker still holds the lifeline open).
    let lifeline = std::io::stdin()
        .lock()
        .try_clone_to_owned_fd()
        .and_then(|fd| tokio::net::unix::pipe::Receiver::from_file(std::fs::File::from(fd)));
    let lifeline = match lifeline {
        Ok(lifeline) => lifeline,
        Err(error) => {
            tracing::error!(%error, "keeper: stdin is not the worker's lifeline pipe");
            return ExitCode::FAILURE;
        }
    };
    if let Watch::Lost { stamp, why } = watch(lifeline, &mut signals).await {
        tracing::warn!(pid = stamp.pid, %why, "keeper: ending the print run's process group");
        let ended = tokio::task::spawn_blocking(move || end_group(&stamp, grace)).await;
        if let Err(error) = ended {
            tracing::error!(%error, "keeper: the group could not be ended");
        }
    }
    ExitCode::SUCCESS
}

/// Fd duplication of a locked stdin, so the keeper's pipe reader owns its own descriptor.
trait CloneToOwnedFd {
    fn try_clone_to_owned_fd(&self) -> std::io::Result<std::os::fd::OwnedFd>;
}

impl CloneToOwnedFd for std::io::StdinLock<'_> {
    fn try_clone_to_owned_fd(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        self.as_fd().try_clone_to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifeline_lines_parse_strictly() {
        assert_eq!(parse_line("done\n"), Some(Line::Done));
        assert_eq!(
            parse_line("watch 4242 987\n"),
            Some(Line::Watch {
                pid: 4242,
                start_time: 987
            })
        );
        for bad in [
            "watch 1 5",
            "watch -3 5",
            "watch x 5",
            "watch 4 5 6",
            "",
            "stop",
        ] {
            assert_eq!(parse_line(bad), None, "{bad:?}");
        }
    }

    #[tokio::test]
    async fn done_releases_and_an_early_end_has_nothing_to_end() {
        let mut signals = StopSignals::register();
        let done = watch(&b"watch 4242 7\ndone\n"[..], &mut signals).await;
        assert_eq!(done, Watch::Released);
        let unnamed = watch(&b""[..], &mut signals).await;
        assert_eq!(unnamed, Watch::Released);
    }

    #[tokio::test]
    async fn a_closed_lifeline_after_watch_loses_the_group() {
        let mut signals = StopSignals::register();
        let lost = watch(&b"wat"[..], &mut signals).await;
        assert_eq!(lost, Watch::Released, "a partial line names nothing");
        let lost = watch(&b"watch 4242 7\n"[..], &mut signals).await;
        match lost {
            Watch::Lost { stamp, why } => {
                assert_eq!((stamp.pid, stamp.start_time), (4242, 7));
                assert!(why.contains("lifeline closed"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }
}
