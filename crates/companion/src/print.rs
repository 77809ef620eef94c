//! `task --runner print`: one stateless `devin -p` run.
//!
//! The prompt is the last argument of an argv (no shell), after `--`; the workspace is the
//! cwd; the environment and isolation are those of an ACP job. Consult and review run with
//! `--permission-mode normal` (the CLI's read-only choice: it has no `ask`), write with
//! `dangerous`, or `autonomous --sandbox` when the policy's `print_sandbox` asks for the CLI's
//! own sandbox. stdout and stderr are each captured up to the policy's `output_cap_bytes`,
//! keeping the tail. Success is exit status 0; a failed run's kind and message come from what
//! devin wrote on stderr (an agent error with its error kind, `Not logged in`, a refusal of
//! its flags), read by the agent crate's Devin dialect.
//!
//! devin leads a process group of its own. A run that overstays its budget is ended as a
//! cancel ends one: SIGTERM to the group, up to `kill_grace` for devin to go, then SIGKILL to
//! the group; whatever devin left in its group when it exited is killed too, so no process of
//! the run outlives it. A stop signal to the worker (SIGTERM, SIGINT, SIGHUP: what `cancel`
//! sends) ends the group the same way, and a keeper process
//! (`devin_bridge_agent::process::keeper`, started from the running binary) does it when the
//! worker dies without a chance to. devin is started through the keeper's gate, so it runs
//! only once the keeper watches its group: a worker killed even as devin starts leaves nothing.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::failure::{FailureKind, JobFailure};
use super::jobs::RunMode;
use super::preflight::Devin;
use super::run::{failure_of, login_hint, Context};
use devin_bridge_agent::devin::print::{self as dialect, PrintFailure, PrintPermission};
use devin_bridge_agent::process::group::{end_child_group, kill_group};
use devin_bridge_agent::process::keeper::{Lifeline, StartError, StopSignals};
use devin_bridge_agent::process::{command_for, Spec};
use nix::unistd::Pid;

/// What a print run needs.
#[derive(Debug, Clone)]
pub(crate) struct PrintRequest {
    pub mode: RunMode,
    pub workspace: PathBuf,
    pub prompt: String,
    pub devin: Devin,
    pub env: Vec<(OsString, OsString)>,
    /// The catalog model uid, when `--model` was given.
    pub model: Option<String>,
    pub resume: Option<String>,
    pub timeout: Duration,
    /// Bytes kept of each stream (the tail): the policy's `output_cap_bytes`.
    pub cap: usize,
    /// Between SIGTERM and SIGKILL of the group when the budget runs out or the worker is
    /// asked to stop.
    pub kill_grace: Duration,
    /// Whether a keeper (the running `devin-bridge`) watches the run's group, so that it ends
    /// even when the worker is killed outright. False only in unit tests, whose binary is not
    /// `devin-bridge`.
    pub keeper: bool,
    /// Write jobs run inside the CLI's own sandbox (the policy's `print_sandbox`).
    pub sandbox: bool,
}

/// How a print run ended.
#[derive(Debug, Clone)]
pub(crate) struct PrintResult {
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub exit_code: Option<i32>,
    pub failure: Option<JobFailure>,
}

/// The argv after the program.
pub(crate) fn arguments(request: &PrintRequest) -> Vec<String> {
    let mut args = vec!["-p".to_owned()];
    if let Some(model) = &request.model {
        args.push("--model".into());
        args.push(model.clone());
    }
    args.extend(
        permission(request.mode, request.sandbox)
            .args()
            .iter()
            .map(|arg| (*arg).to_owned()),
    );
    if let Some(session) = &request.resume {
        args.push("-r".into());
        args.push(session.clone());
    }
    args.push("--respect-workspace-trust".into());
    args.push("false".into());
    args.push("--".into());
    args.push(request.prompt.clone());
    args
}

/// The CLI's permission mode for a job: read-only `normal` for consult and review; for write
/// `dangerous`, or `autonomous` inside the CLI's sandbox when the policy asks for it.
pub(crate) fn permission(mode: RunMode, sandbox: bool) -> PrintPermission {
    match mode {
        RunMode::Consult | RunMode::Review => PrintPermission::Normal,
        RunMode::Write if sandbox => PrintPermission::AutonomousSandboxed,
        RunMode::Write => PrintPermission::Dangerous,
    }
}

/// The failure kind and message of a run that exited with `code` (not 0) after writing
/// `stderr`. `context.client` is `None`: `devin -p` sends the CLI's own client identity.
pub(crate) fn exit_failure(stderr: &str, code: i32, context: Context<'_>) -> (FailureKind, String) {
    match dialect::failure(stderr, Some(code)) {
        PrintFailure::Agent(error) => {
            let (kind, message) = failure_of(&error, context);
            (kind, format!("devin -p failed: {message}"))
        }
        PrintFailure::NotLoggedIn => (FailureKind::Auth, login_hint(context.home)),
        PrintFailure::Usage(line) => (
            FailureKind::Setup,
            format!(
                "the Devin CLI refused the arguments of devin -p (exit status {code}; this \
                 companion may not fit its version): {line}"
            ),
        ),
        PrintFailure::Other(line) => (
            FailureKind::Error,
            format!("devin -p exited with status {code}: {line}"),
        ),
    }
}

/// Reads a stream to its end, keeping the last `cap` bytes.
async fn tail<R: AsyncRead + Unpin>(mut reader: R, cap: usize) -> (Vec<u8>, bool) {
    let mut kept: VecDeque<u8> = VecDeque::new();
    let mut truncated = false;
    let mut buffer = vec![0u8; 64 << 10];
    while let Ok(n) = reader.read(&mut buffer).await {
        if n == 0 {
            break;
        }
        kept.extend(&buffer[..n]);
        if kept.len() > cap {
            let excess = kept.len() - cap;
            kept.drain(..excess);
            truncated = true;
        }
    }
    (kept.into_iter().collect(), truncated)
}

/// Runs `devin -p`.
pub(crate) async fn run(request: PrintRequest) -> PrintResult {
    let Started {
        mut child,
        group,
        lifeline,
        mut signals,
    } = match start(&request).await {
        Ok(started) => started,
        Err((kind, message)) => return PrintResult::failed(kind, message),
    };
    let stdout = spawn_tail(child.stdout.take(), request.cap);
    let stderr = spawn_tail(child.stderr.take(), request.cap);
    let waited = wait_for_devin(&mut child, &mut signals, request.timeout).await;
    let status = end_group(&mut child, group, &waited, request.kill_grace).await;
    if let Some(lifeline) = lifeline {
        lifeline.release().await;
    }
    let (out, stdout_truncated) = collected(stdout).await;
    let (err, _) = collected(stderr).await;
    let exit_code = status.and_then(|s| s.code());
    PrintResult {
        failure: run_failure(&request, &waited, exit_code, &err),
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
        stdout_truncated,
        exit_code,
    }
}

impl PrintResult {
    /// A run that never started devin.
    fn failed(kind: FailureKind, message: String) -> Self {
        Self {
            stdout: String::new(),
            stderr: String::new(),
            stdout_truncated: false,
            exit_code: None,
            failure: Some(JobFailure::new(kind, message)),
        }
    }
}

/// A started devin: the leader of its own process group, watched by the keeper, with the
/// worker's stop signals caught.
struct Started {
    child: tokio::process::Child,
    /// devin's group (its pid); `None` when its pid could not be read.
    group: Option<Pid>,
    lifeline: Option<Lifeline>,
    signals: StopSignals,
}

/// Catches the stop signals, starts the keeper, then starts devin through the keeper's gate:
/// devin runs only once the keeper watches its group, so nothing can leave it unwatched.
async fn start(request: &PrintRequest) -> Result<Started, (FailureKind, String)> {
    let spec = Spec {
        program: request.devin.path.clone(),
        args: arguments(request),
        cwd: request.workspace.clone(),
        env: request.env.clone(),
        stderr_tail_bytes: 0,
        kill_grace: request.kill_grace,
        identity: None,
    };
    let missing_or_not = |error: &std::io::Error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            FailureKind::MissingCli
        } else {
            FailureKind::Process
        }
    };
    let piped = std::process::Stdio::piped;
    // Caught before devin starts: a stop signal from here on ends devin's group, not the worker.
    let signals = StopSignals::register();
    let (child, lifeline) = if request.keeper {
        let mut lifeline = Lifeline::start(request.kill_grace, std::process::Stdio::null())
            .map_err(|error| {
                (
                    FailureKind::Process,
                    format!("cannot start the print run's group keeper: {error}"),
                )
            })?;
        let child = lifeline
            .spawn_watched(&spec, piped(), piped())
            .await
            .map_err(|error| match &error {
                StartError::Spawn { source, .. } => (
                    missing_or_not(source),
                    format!("cannot start devin: {source}"),
                ),
                StartError::Unwatched(_) => (
                    FailureKind::Process,
                    format!("the print run's group keeper failed: {error}"),
                ),
            })?;
        (child, Some(lifeline))
    } else {
        let child = command_for(&spec)
            .args(&spec.args)
            .stdin(std::process::Stdio::null())
            .stdout(piped())
            .stderr(piped())
            .spawn()
            .map_err(|error| {
                (
                    missing_or_not(&error),
                    format!("cannot start devin: {error}"),
                )
            })?;
        (child, None)
    };
    let pgid = child.id().and_then(|pid| i32::try_from(pid).ok());
    Ok(Started {
        child,
        group: pgid.map(Pid::from_raw),
        lifeline,
        signals,
    })
}

/// Reads one of devin's streams to its end in a task of its own, keeping the last `cap` bytes.
fn spawn_tail<R>(pipe: Option<R>, cap: usize) -> tokio::task::JoinHandle<(Vec<u8>, bool)>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        match pipe {
            Some(pipe) => tail(pipe, cap).await,
            None => (Vec::new(), false),
        }
    })
}

/// What a stream's task kept; nothing when it does not finish within two seconds of devin's
/// end (a grandchild holding the pipe open) or failed.
async fn collected(task: tokio::task::JoinHandle<(Vec<u8>, bool)>) -> (Vec<u8>, bool) {
    tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .unwrap_or_else(|_| Ok((Vec::new(), false)))
        .unwrap_or_default()
}

/// How the wait for devin ended.
#[derive(Debug)]
enum Waited {
    Exited(std::process::ExitStatus),
    /// Its status could not be read.
    Lost,
    OverBudget,
    /// The worker was asked to stop, by this signal.
    Stopped(&'static str),
}

/// Waits for devin to exit within the budget, or for a stop signal to the worker.
async fn wait_for_devin(
    child: &mut tokio::process::Child,
    signals: &mut StopSignals,
    timeout: Duration,
) -> Waited {
    tokio::select! {
        status = tokio::time::timeout(timeout, child.wait()) => match status {
            Ok(Ok(status)) => Waited::Exited(status),
            Ok(Err(_)) => Waited::Lost,
            Err(_) => Waited::OverBudget,
        },
        name = signals.recv() => Waited::Stopped(name),
    }
}

/// Ends what is left of devin's group; devin's status. After devin exited, whatever it left
/// running in its group goes with it; otherwise (over budget, asked to stop) the group gets
/// SIGTERM, devin the grace, then SIGKILL.
async fn end_group(
    child: &mut tokio::process::Child,
    group: Option<Pid>,
    waited: &Waited,
    grace: Duration,
) -> Option<std::process::ExitStatus> {
    match (waited, group) {
        (Waited::Exited(status), group) => {
            if let Some(group) = group {
                kill_group(group);
            }
            Some(*status)
        }
        (_, Some(group)) => end_child_group(child, group, grace).await.status,
        (_, None) => {
            let _ = child.start_kill();
            child.wait().await.ok()
        }
    }
}

/// The run's failure, if any: a stop signal, then the budget, then devin's exit status and
/// what it wrote on stderr.
fn run_failure(
    request: &PrintRequest,
    waited: &Waited,
    exit_code: Option<i32>,
    stderr: &[u8],
) -> Option<JobFailure> {
    match (waited, exit_code) {
        (Waited::Stopped(signal), _) => Some(JobFailure::new(
            FailureKind::Cancelled,
            format!("the worker received {signal}; devin -p was ended"),
        )),
        (Waited::OverBudget, _) => Some(JobFailure::new(
            FailureKind::Timeout,
            format!(
                "devin -p exceeded its {} ms budget",
                request.timeout.as_millis()
            ),
        )),
        (_, Some(0)) => None,
        (_, Some(code)) => {
            let context = Context {
                client: None,
                resume: request.resume.as_deref(),
                home: Context::home_of(&request.env),
            };
            let (kind, message) = exit_failure(&String::from_utf8_lossy(stderr), code, context);
            Some(JobFailure::new(kind, message).with_model(request.model.as_deref()))
        }
        (_, None) => Some(JobFailure::new(
            FailureKind::Error,
            "devin -p was killed by a signal",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devin_bridge_agent::testkit::marked_process_running;

    fn request(mode: RunMode) -> PrintRequest {
        PrintRequest {
            mode,
            workspace: PathBuf::from("/w"),
            prompt: "-rf $(id)".into(),
            devin: Devin {
                path: PathBuf::from("/bin/devin"),
                version: "3000.11.4".into(),
                standing: super::super::preflight::Standing::Tested,
            },
            env: Vec::new(),
            model: Some("swe-2".into()),
            resume: Some("s1".into()),
            timeout: Duration::from_secs(1),
            cap: 16,
            kill_grace: Duration::from_secs(1),
            keeper: false,
            sandbox: false,
        }
    }

    #[test]
    fn the_prompt_is_the_last_argument_after_the_separator() {
        let args = arguments(&request(RunMode::Consult));
        assert_eq!(
            args,
            [
                "-p",
                "--model",
                "swe-2",
                "--permission-mode",
                "normal",
                "-r",
                "s1",
                "--respect-workspace-trust",
                "false",
                "--",
                "-rf $(id)"
            ]
        );
        let write = arguments(&request(RunMode::Write));
        assert_eq!(write[3..5], ["--permission-mode", "dangerous"]);
        assert_eq!(write.last().map(String::as_str), Some("-rf $(id)"));
        let sandboxed = arguments(&PrintRequest {
            sandbox: true,
            ..request(RunMode::Write)
        });
        assert_eq!(
            sandboxed[3..6],
            ["--permission-mode", "autonomous", "--sandbox"]
        );
        let review = arguments(&PrintRequest {
            sandbox: true,
            ..request(RunMode::Review)
        });
        assert_eq!(review[3..5], ["--permission-mode", "normal"]);
        assert!(!review.contains(&"--sandbox".to_owned()));
    }

    fn agent_error(message: &str, kind: &str, retryable: bool) -> String {
        format!(
            "working\nError: Agent error: {message} (trace ID: 0123abcd): {{\n  \"cognition.ai/errorKind\": \"{kind}\",\n  \"cognition.ai/retryable\": {retryable}\n}}\n"
        )
    }

    #[test]
    fn agent_errors_are_classified_as_acp_errors_are() {
        let context = Context {
            client: None,
            resume: Some("s-9"),
            home: Some(std::path::Path::new("/data/home")),
        };
        let cases = [
            (
                "Rate limit exceeded",
                "unavailable",
                true,
                FailureKind::RateLimited,
            ),
            (
                "Connection error: reset",
                "unavailable",
                true,
                FailureKind::Network,
            ),
            (
                "out of credits",
                "resource_exhausted",
                false,
                FailureKind::Quota,
            ),
            (
                "Session not found",
                "session_not_found",
                false,
                FailureKind::Input,
            ),
            (
                "Your Windsurf version is out of date",
                "internal",
                false,
                FailureKind::Setup,
            ),
        ];
        for (message, kind, retryable, expected) in cases {
            let (got, _) = exit_failure(&agent_error(message, kind, retryable), 1, context);
            assert_eq!(got, expected, "{message}");
        }
        let (kind, message) = exit_failure(
            &agent_error("Something broke", "internal", false),
            1,
            context,
        );
        assert_eq!(kind, FailureKind::Error);
        assert!(message.contains("Something broke"), "{message}");
        assert!(message.contains("(internal)"), "{message}");
        assert!(!message.contains("trace ID"), "{message}");
        let (kind, message) = exit_failure(
            &agent_error("Your Windsurf version is out of date", "internal", false),
            1,
            context,
        );
        assert_eq!(kind, FailureKind::Setup);
        assert!(message.contains("update the Devin CLI"), "{message}");
        let (_, message) = exit_failure(
            &agent_error("Session not found", "session_not_found", false),
            1,
            context,
        );
        assert!(message.contains("session s-9 is not known"), "{message}");
    }

    #[test]
    fn a_logged_out_cli_is_auth_with_how_to_log_in() {
        let context = Context {
            home: Some(std::path::Path::new("/data/home")),
            ..Context::default()
        };
        let (kind, message) = exit_failure("Error: Not logged in\n", 1, context);
        assert_eq!(kind, FailureKind::Auth);
        assert!(message.contains("devin auth login"), "{message}");
        assert!(message.contains("/data/home"), "{message}");
    }

    #[test]
    fn refused_flags_are_setup_quoting_the_cli() {
        let stderr = "error: invalid value 'ask' for '--permission-mode <PERMISSION_MODE>'\n  [possible values: normal, dangerous]\n\nFor more information, try '--help'.\n";
        let (kind, message) = exit_failure(stderr, 2, Context::default());
        assert_eq!(kind, FailureKind::Setup);
        assert!(message.contains("refused the arguments"), "{message}");
        assert!(message.contains("invalid value 'ask'"), "{message}");
        let (_, long) = exit_failure(
            &format!("error: {}", "x".repeat(10_000)),
            2,
            Context::default(),
        );
        assert!(long.len() < 600, "{}", long.len());
    }

    #[test]
    fn other_exits_quote_the_last_line() {
        let (kind, message) = exit_failure("first\nthe reason\n\n", 3, Context::default());
        assert_eq!(kind, FailureKind::Error);
        assert_eq!(message, "devin -p exited with status 3: the reason");
    }

    #[tokio::test]
    async fn the_tail_is_kept() {
        let (kept, truncated) = tail(&b"0123456789abcdefXYZ"[..], 16).await;
        assert_eq!(kept, b"3456789abcdefXYZ");
        assert!(truncated);
        let (kept, truncated) = tail(&b"short"[..], 16).await;
        assert_eq!(kept, b"short");
        assert!(!truncated);
    }

    /// A fake `devin` (a shell script) that runs `body`.
    fn fake_devin(dir: &std::path::Path, body: &str) -> Devin {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("devin");
        std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).expect("script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Devin {
            path,
            version: "3000.11.4".into(),
            standing: super::super::preflight::Standing::Tested,
        }
    }

    fn real_request(dir: &std::path::Path, body: &str) -> PrintRequest {
        PrintRequest {
            workspace: dir.to_owned(),
            devin: fake_devin(dir, body),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            resume: None,
            model: None,
            ..request(RunMode::Consult)
        }
    }

    #[tokio::test]
    async fn output_is_capped_to_the_policy_cap_and_stderr_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut request = real_request(
            dir.path(),
            "for i in $(seq 0 199); do echo line-$i; done; echo 'the reason' >&2; exit 3",
        );
        request.cap = 64;
        let result = run(request).await;
        assert!(result.stdout.len() <= 64, "{}", result.stdout.len());
        assert!(result.stdout.ends_with("line-199\n"), "{:?}", result.stdout);
        assert!(result.stdout_truncated);
        assert_eq!(result.exit_code, Some(3));
        assert_eq!(result.stderr.trim(), "the reason");
        let failure = result.failure.expect("a failure");
        assert!(
            failure.message.contains("the reason"),
            "{}",
            failure.message
        );
    }

    #[tokio::test]
    async fn over_budget_the_group_gets_sigterm_first_and_its_grace() {
        let dir = tempfile::tempdir().expect("tempdir");
        let marker = dir.path().join("got-term");
        let mut request = real_request(
            dir.path(),
            &format!(
                "trap 'echo term > {}; exit 0' TERM; sleep 30 & wait",
                marker.display()
            ),
        );
        request.timeout = Duration::from_millis(300);
        request.kill_grace = Duration::from_secs(10);
        let started = std::time::Instant::now();
        let result = run(request).await;
        assert_eq!(result.failure.map(|f| f.kind), Some(FailureKind::Timeout));
        assert!(marker.exists(), "devin never saw SIGTERM");
        // It left on SIGTERM, long before the grace ran out.
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn a_run_that_ignores_sigterm_is_killed_after_the_grace_with_its_group() {
        let dir = tempfile::tempdir().expect("tempdir");
        let marker = format!("devin-bridge-print-grandchild-{}", std::process::id());
        let mut request = real_request(
            dir.path(),
            &format!("trap '' TERM; (trap '' TERM; exec -a {marker} sleep 300) & sleep 300"),
        );
        request.timeout = Duration::from_millis(300);
        request.kill_grace = Duration::from_millis(500);
        let result = run(request).await;
        assert_eq!(result.failure.map(|f| f.kind), Some(FailureKind::Timeout));
        // SIGKILL reached the whole group: the grandchild is gone too.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while marked_process_running(&marker) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            !marked_process_running(&marker),
            "the grandchild {marker} outlived the run"
        );
    }
}
