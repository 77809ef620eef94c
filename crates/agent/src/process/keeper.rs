//! The keeper (`devin-bridge keeper --grace-ms G`, internal): "end my child's process group if
//! I die", for every worker that starts a long-lived child (a companion's `devin -p`, an
//! outpost's `devin-remote`).
//!
//! `kill -9` of a worker runs no code in the worker, so the worker alone cannot end the child
//! it started (which leads a process group of its own). Before it starts the child, the worker
//! starts this keeper ([`Lifeline::start`]) in another process group and keeps the only write
//! end of the keeper's stdin, the lifeline (std creates every pipe close-on-exec, so no other
//! child inherits it). The protocol on the lifeline is two lines:
//!
//! - `watch <pid> <start time>`: the child's pid (also its process group) and its start time
//!   (field 22 of `/proc/<pid>/stat`), written as soon as the child's gate runs, before its
//!   program does (see [`Lifeline::spawn_watched`]); the keeper answers
//!   `watching <pid>` on its stdout once it holds the stamp, so the worker knows the child is
//!   watched (a keeper that could not run never answers: [`WatchError::Keeper`]);
//! - `done`: the worker has ended (or reaped) the child itself; the keeper exits and touches
//!   nothing.
//!
//! When the lifeline closes without `done` (the worker ended in any way, `kill -9` included:
//! the kernel closes its descriptors), or the keeper itself gets SIGTERM, SIGINT or SIGHUP, the
//! keeper ends the watched group ([`group::end_stamped_group`]: SIGTERM, up to the grace,
//! SIGKILL, then whatever the leader left in its group). The start time guards against pid
//! reuse: a pid now used by another process is left alone. This takes no `unsafe` `pre_exec`
//! hook in the worker, and reaches grandchildren, which a parent-death signal would not. The
//! child is started through a [gate](super::gate) ([`Lifeline::spawn_watched`]) that runs its
//! program only once the keeper watches it, so there is no instant in which the program runs
//! unwatched: a worker killed before the gate opens leaves a gate that exits running nothing.
//!
//! **The keeper is always the binary the worker runs** ([`running_binary`]), never the file at
//! the binary's path: a `devin-bridge` replaced in place (renamed over, or deleted, as a package
//! upgrade does) leaves that path naming another version or nothing, while the running image
//! still executes, so the keeper starts and speaks its worker's protocol version.

use std::ffi::OsString;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::signal::unix::{signal, Signal, SignalKind};

use nix::unistd::Pid;

use super::gate::{self, GateArgs};
use super::group::{self, end_child_group, ProcessStamp};
use super::{command_for, running_binary, Spec};

/// The hidden subcommand of `devin-bridge` that runs a keeper.
pub const SUBCOMMAND: &str = "keeper";
/// The longest lifeline text read: the protocol is two short lines.
const LIFELINE_LIMIT: usize = 256;
/// How long [`Lifeline::release`] waits for the keeper to exit.
const RELEASE_WAIT: Duration = Duration::from_secs(5);
/// How long [`Lifeline::watch`] waits for the keeper's answer (it starts in milliseconds).
const ACK_WAIT: Duration = Duration::from_secs(10);

/// `keeper --grace-ms G`: the keeper's only argument, written and read here alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeeperArgs {
    /// Between SIGTERM and SIGKILL of the watched group.
    pub grace: Duration,
}

impl KeeperArgs {
    /// The arguments after the program: `keeper --grace-ms G`.
    pub fn to_args(&self) -> Vec<String> {
        vec![
            SUBCOMMAND.to_owned(),
            "--grace-ms".to_owned(),
            self.grace.as_millis().to_string(),
        ]
    }

    /// Parses the arguments after the subcommand (`--grace-ms G`).
    pub fn parse(args: &[String]) -> Option<Self> {
        match args {
            [flag, ms] if flag == "--grace-ms" => ms.parse().ok().map(|ms| Self {
                grace: Duration::from_millis(ms),
            }),
            _ => None,
        }
    }

    /// `Some` when a command line (program first) runs the keeper: its arguments, or the usage
    /// line when they are wrong.
    pub fn from_command_line(argv: &[OsString]) -> Option<Result<Self, &'static str>> {
        if argv.get(1).and_then(|arg| arg.to_str()) != Some(SUBCOMMAND) {
            return None;
        }
        let rest: Option<Vec<String>> = argv[2..]
            .iter()
            .map(|arg| arg.to_str().map(str::to_owned))
            .collect();
        Some(
            rest.and_then(|rest| Self::parse(&rest))
                .ok_or("usage: devin-bridge keeper --grace-ms MS"),
        )
    }
}

/// Why [`Lifeline::watch`] failed.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The child exited before it could be stamped: nothing is left to watch.
    #[error("the child is already gone")]
    ChildGone,
    /// The keeper did not take the watch (it could not run, or it died): the child is not
    /// watched.
    #[error("the keeper did not take the watch: {0}")]
    Keeper(std::io::Error),
}

/// Why [`Lifeline::spawn_watched`] ran nothing.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The program cannot be found or run, or its gate could not start.
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// The keeper did not take the watch: the program was never run.
    #[error("the keeper did not take the watch, so nothing was run: {0}")]
    Unwatched(std::io::Error),
}

/// The worker's end of a keeper: the lifeline's write end, the keeper's answers, and the
/// keeper process. Dropped without [`Lifeline::release`], the lifeline closes and the keeper
/// ends the watched group.
pub struct Lifeline {
    stdin: Option<ChildStdin>,
    answers: Option<BufReader<ChildStdout>>,
    keeper: Child,
}

impl Lifeline {
    /// Starts a keeper from the running binary in a process group of its own (so a signal to
    /// the worker's group does not reach it), its stdin the lifeline, its stderr `log`. It
    /// runs in `/` so it keeps no directory of the worker's busy.
    pub fn start(grace: Duration, log: Stdio) -> std::io::Result<Self> {
        let mut keeper = tokio::process::Command::new(running_binary())
            .arg0("devin-bridge")
            .args(KeeperArgs { grace }.to_args())
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .process_group(0)
            .spawn()?;
        let stdin = keeper.stdin.take();
        let answers = keeper.stdout.take().map(BufReader::new);
        Ok(Self {
            stdin,
            answers,
            keeper,
        })
    }

    /// Tells the keeper which process (and group) to end should the worker go, and waits
    /// until the keeper says it watches it.
    pub async fn watch(&mut self, pid: i32) -> Result<(), WatchError> {
        let stamp = ProcessStamp::of_pid(pid)
            .map_err(WatchError::Keeper)?
            .ok_or(WatchError::ChildGone)?;
        let (Some(stdin), Some(answers)) = (&mut self.stdin, &mut self.answers) else {
            return Err(WatchError::Keeper(std::io::Error::other(
                "the keeper has no lifeline",
            )));
        };
        stdin
            .write_all(format!("watch {} {}\n", stamp.pid, stamp.start_time).as_bytes())
            .await
            .map_err(WatchError::Keeper)?;
        let mut answer = String::new();
        let read = tokio::time::timeout(ACK_WAIT, answers.read_line(&mut answer)).await;
        let expected = format!("watching {}", stamp.pid);
        match read {
            Ok(Ok(_)) if answer.trim_end() == expected => Ok(()),
            Ok(Ok(0)) => Err(WatchError::Keeper(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the keeper exited without answering",
            ))),
            Ok(Ok(_)) => Err(WatchError::Keeper(std::io::Error::other(format!(
                "the keeper answered {:?}",
                answer.trim_end()
            )))),
            Ok(Err(error)) => Err(WatchError::Keeper(error)),
            Err(_) => Err(WatchError::Keeper(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the keeper did not answer",
            ))),
        }
    }

    /// Starts `spec`'s program watched from its first instruction, its stdin `/dev/null`: the
    /// child starts as this binary's [gate](super::gate) in a process group of its own, the
    /// keeper is told its pid, and only once the keeper watches it is the gate opened and the
    /// program run in its place (same pid, group and start time). A program that cannot be
    /// found fails here as a direct spawn would, before any process starts; a keeper that does
    /// not take the watch has the gate killed, so the program never runs unwatched.
    pub async fn spawn_watched(
        &mut self,
        spec: &Spec,
        stdout: Stdio,
        stderr: Stdio,
    ) -> Result<Child, StartError> {
        let not_started = |source| StartError::Spawn {
            program: spec.program.display().to_string(),
            source,
        };
        let path = gate::resolve(&spec.program, &spec.cwd, &spec.env).map_err(not_started)?;
        let opened = GateArgs {
            path,
            arg0: spec.program.clone().into_os_string(),
            args: spec.args.iter().map(OsString::from).collect(),
        };
        let gate_spec = Spec {
            program: running_binary().to_owned(),
            args: Vec::new(),
            ..spec.clone()
        };
        let mut child = command_for(&gate_spec)
            .arg0("devin-bridge")
            .args(opened.to_args())
            .stdin(Stdio::piped())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(not_started)?;
        let opener = child.stdin.take();
        let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) else {
            // Already reaped: nothing ran, and `wait` reads how it ended.
            return Ok(child);
        };
        match self.watch(pid).await {
            Ok(()) => {
                if let Some(mut opener) = opener {
                    // A gate gone already cannot be opened; its status says how it ended.
                    let _ = opener.write_all(gate::GO).await;
                }
                Ok(child)
            }
            // The gate ended before it could be stamped: nothing ran.
            Err(WatchError::ChildGone) => Ok(child),
            Err(WatchError::Keeper(error)) => {
                end_child_group(&mut child, Pid::from_raw(pid), Duration::ZERO).await;
                Err(StartError::Unwatched(error))
            }
        }
    }

    /// The worker ended the group itself: the keeper exits without touching anything.
    pub async fn release(mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"done\n").await;
        }
        let _ = tokio::time::timeout(RELEASE_WAIT, self.keeper.wait()).await;
    }
}

/// The signals that ask a process to stop: SIGTERM, SIGINT and SIGHUP. Registered when this is
/// created, so from then on none of them ends the process by default: the holder decides (a
/// print worker ends devin with the grace, a keeper ends the group it watches).
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

/// Follows the lifeline until `done`, its end, or a stop signal, answering each `watch` on
/// `answers`.
pub async fn watch(
    mut lifeline: impl AsyncRead + Unpin,
    mut answers: impl AsyncWrite + Unpin,
    signals: &mut StopSignals,
) -> Watch {
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
                            Some(Line::Watch { pid, start_time }) => match group::boot_id() {
                                Ok(boot_id) => {
                                    watched = Some(ProcessStamp { pid, start_time, boot_id });
                                    let answer = format!("watching {pid}\n");
                                    let answered = async {
                                        answers.write_all(answer.as_bytes()).await?;
                                        answers.flush().await
                                    };
                                    if let Err(error) = answered.await {
                                        // The worker went away: its lifeline ends next.
                                        tracing::warn!(%error, "keeper: cannot answer the worker");
                                    }
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

/// Runs the keeper on this process's stdin. Exits 0 but for a stdin that is not a pipe.
pub async fn run(args: KeeperArgs) -> ExitCode {
    let mut signals = StopSignals::register();
    // A pipe read through the reactor, not tokio's stdin (a blocking thread that would keep
    // the runtime from shutting down while the worker still holds the lifeline open).
    let lifeline = {
        use std::os::fd::AsFd as _;
        std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .and_then(|fd| tokio::net::unix::pipe::Receiver::from_file(std::fs::File::from(fd)))
    };
    let lifeline = match lifeline {
        Ok(lifeline) => lifeline,
        Err(error) => {
            tracing::error!(%error, "keeper: stdin is not the worker's lifeline pipe");
            return ExitCode::FAILURE;
        }
    };
    if let Watch::Lost { stamp, why } = watch(lifeline, tokio::io::stdout(), &mut signals).await {
        tracing::warn!(pid = stamp.pid, %why, "keeper: ending the worker's child process group");
        let grace = args.grace;
        let ended =
            tokio::task::spawn_blocking(move || group::end_stamped_group(&stamp, grace)).await;
        if let Err(error) = ended {
            tracing::error!(%error, "keeper: the group could not be ended");
        }
    }
    ExitCode::SUCCESS
}

/// The keeper's whole process: one thread is all it needs.
pub fn main(args: KeeperArgs) -> ExitCode {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(run(args)),
        Err(error) => {
            tracing::error!(%error, "keeper: cannot start the async runtime");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arguments_written_are_the_arguments_read() {
        let args = KeeperArgs {
            grace: Duration::from_millis(1500),
        };
        let written = args.to_args();
        assert_eq!(written, ["keeper", "--grace-ms", "1500"]);
        assert_eq!(KeeperArgs::parse(&written[1..]), Some(args));
        let mut argv: Vec<OsString> = vec!["devin-bridge".into()];
        argv.extend(written.iter().map(OsString::from));
        assert_eq!(KeeperArgs::from_command_line(&argv), Some(Ok(args)));
        let wrong: Vec<OsString> = vec!["devin-bridge".into(), "keeper".into(), "-x".into()];
        assert!(matches!(
            KeeperArgs::from_command_line(&wrong),
            Some(Err(_))
        ));
        let other: Vec<OsString> = vec!["devin-bridge".into(), "serve".into()];
        assert_eq!(KeeperArgs::from_command_line(&other), None);
        assert_eq!(KeeperArgs::from_command_line(&other[..1]), None);
    }

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
        let mut answers = Vec::new();
        let done = watch(&b"watch 4242 7\ndone\n"[..], &mut answers, &mut signals).await;
        assert_eq!(done, Watch::Released);
        assert_eq!(answers, b"watching 4242\n", "a watch is answered");
        let unnamed = watch(&b""[..], tokio::io::sink(), &mut signals).await;
        assert_eq!(unnamed, Watch::Released);
    }

    #[tokio::test]
    async fn a_closed_lifeline_after_watch_loses_the_group() {
        let mut signals = StopSignals::register();
        let lost = watch(&b"wat"[..], tokio::io::sink(), &mut signals).await;
        assert_eq!(lost, Watch::Released, "a partial line names nothing");
        let lost = watch(&b"watch 4242 7\n"[..], tokio::io::sink(), &mut signals).await;
        match lost {
            Watch::Lost { stamp, why } => {
                assert_eq!((stamp.pid, stamp.start_time), (4242, 7));
                assert!(why.contains("lifeline closed"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_running_binary_is_executable_after_its_path_is_replaced() {
        // What the keeper relies on: exec of /proc/self/exe runs the image of the process
        // that execs it, whatever its path now names. A copy of /bin/sh runs a child through
        // its own /proc/self/exe after the copy was deleted.
        let dir = tempfile::tempdir().expect("tempdir");
        let shell = dir.path().join("sh");
        std::fs::copy("/bin/sh", &shell).expect("copy sh");
        let output = std::process::Command::new(&shell)
            .args([
                "-c",
                "rm \"$0\" && test ! -e \"$0\" && /proc/self/exe -c 'echo ran'",
            ])
            .output()
            .expect("run the copy");
        assert!(output.status.success(), "{output:?}");
        assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "ran");
    }
}
