//! The gate (`devin-bridge gate PATH ARG0 [ARG...]`, internal): a child that runs nothing until
//! its worker says so.
//!
//! A keeper can only watch a process whose pid it has been told, and a pid exists only once the
//! child runs. Started directly, a worker's child (a companion's `devin -p`, an outpost's
//! `devin-remote`) would run, and could start grandchildren, before its `watch` line reached
//! the keeper: a worker killed in that instant would leave the child unwatched forever. So the
//! worker starts the child as this gate instead ([`Lifeline::spawn_watched`]), in the child's
//! own process group, with its stdin a pipe from the worker:
//!
//! 1. the gate waits for one line on its stdin;
//! 2. the worker tells the keeper the gate's pid and start time, and waits for `watching`;
//! 3. only then does the worker write `go`; the gate replaces itself with the program (exec:
//!    the same pid, process group and start time, so the keeper's stamp names the program),
//!    its stdin `/dev/null`, its environment, directory and identity the ones the worker gave
//!    the gate.
//!
//! A worker that dies before step 3 closes the gate's stdin (the kernel closes every
//! descriptor of a killed process): the gate reads the end of its input and exits without
//! running anything. A worker that dies after it has been watched is the keeper's to clean up.
//! There is no instant in which the program runs unwatched.
//!
//! The gate writes nothing on success (its stdout and stderr are the program's). When the exec
//! itself fails (the program vanished between the worker's check and the exec), it writes one
//! line to stderr and exits 127, as a shell does for a program it cannot run.
//!
//! [`Lifeline::spawn_watched`]: super::keeper::Lifeline::spawn_watched

use std::ffi::{OsStr, OsString};
use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The hidden subcommand of `devin-bridge` that runs a gate.
pub const SUBCOMMAND: &str = "gate";
/// The line that opens the gate.
pub(crate) const GO: &[u8] = b"go\n";
/// The exit code of a gate whose worker left before opening it: nothing ran.
const CLOSED: u8 = 125;
/// The exit code of a gate that could not exec its program (a shell's "cannot run").
const CANNOT_RUN: u8 = 127;

/// What a gate runs once opened: the program's resolved path, the `argv[0]` it gets, and its
/// arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateArgs {
    pub path: PathBuf,
    pub arg0: OsString,
    pub args: Vec<OsString>,
}

impl GateArgs {
    /// The arguments after the program: `gate PATH ARG0 [ARG...]`.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = vec![
            OsString::from(SUBCOMMAND),
            self.path.clone().into_os_string(),
            self.arg0.clone(),
        ];
        args.extend(self.args.iter().cloned());
        args
    }

    /// `Some` when a command line (program first) runs the gate: its arguments, or the usage
    /// line when they are wrong.
    pub fn from_command_line(argv: &[OsString]) -> Option<Result<Self, &'static str>> {
        if argv.get(1).map(OsString::as_os_str) != Some(OsStr::new(SUBCOMMAND)) {
            return None;
        }
        Some(match &argv[2..] {
            [path, arg0, args @ ..] if Path::new(path).is_absolute() => Ok(Self {
                path: PathBuf::from(path),
                arg0: arg0.clone(),
                args: args.to_vec(),
            }),
            _ => Err("usage: devin-bridge gate ABSOLUTE-PATH ARG0 [ARG...]"),
        })
    }
}

/// The program `program` names for a child whose directory is `cwd` and environment `env`:
/// itself when it holds a `/` (relative to `cwd`, where the child would have run it), else the first executable file of that name in the environment's `PATH` (the lookup a
/// direct spawn with that environment would make). A program that cannot be found is the
/// `NotFound` error a direct spawn would return, so the worker reports a missing program as it
/// always did, before any process starts.
pub fn resolve(
    program: &Path,
    cwd: &Path,
    env: &[(OsString, OsString)],
) -> std::io::Result<PathBuf> {
    use nix::errno::Errno;
    use std::os::unix::ffi::OsStrExt as _;
    // The errors a direct spawn reports, word for word ("No such file or directory (os error
    // 2)", "Permission denied (os error 13)"), so logs and failure kinds read as they always
    // did.
    let runnable = |path: &Path| -> Result<(), Errno> {
        nix::unistd::access(path, nix::unistd::AccessFlags::X_OK)?;
        if path.is_file() {
            Ok(())
        } else {
            Err(Errno::EACCES)
        }
    };
    if program.as_os_str().as_bytes().contains(&b'/') {
        let absolute = std::path::absolute(cwd.join(program))?;
        runnable(&absolute)?;
        return Ok(absolute);
    }
    let path = env
        .iter()
        .find(|(key, _)| key == "PATH")
        .map(|(_, value)| value.clone())
        .ok_or(Errno::ENOENT)?;
    let mut denied = false;
    for dir in std::env::split_paths(&path).filter(|dir| dir.is_absolute()) {
        let candidate = dir.join(program);
        match runnable(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(Errno::EACCES) => denied = true,
            Err(_) => {}
        }
    }
    // As execvp: a name found only where it cannot be run is denied, else it is missing.
    Err(if denied { Errno::EACCES } else { Errno::ENOENT }.into())
}

/// Reads the opening line: `true` only for exactly `go`. Anything else (the end of the input,
/// a read error, another line) keeps the gate shut.
fn opened(mut input: impl std::io::Read) -> bool {
    let mut line = Vec::with_capacity(GO.len());
    let mut byte = [0u8; 1];
    while line.len() < GO.len() {
        match input.read(&mut byte) {
            Ok(1) => line.push(byte[0]),
            Ok(_) => return false,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    line == GO
}

/// The gate's whole process: wait for `go`, then become the program. Returns only when the
/// program did not run.
pub fn main(args: GateArgs) -> ExitCode {
    if !opened(std::io::stdin().lock().by_ref()) {
        return ExitCode::from(CLOSED);
    }
    // `exec` sets up the standard streams as a spawn does and resets the signal state the
    // Rust runtime changed (SIGPIPE ignored), so the program starts as a direct child would.
    let error = std::process::Command::new(&args.path)
        .arg0(&args.arg0)
        .args(&args.args)
        .stdin(std::process::Stdio::null())
        .exec();
    eprintln!("devin-bridge: cannot run {}: {error}", args.path.display());
    ExitCode::from(CANNOT_RUN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arguments_written_are_the_arguments_read() {
        let args = GateArgs {
            path: PathBuf::from("/usr/bin/devin"),
            arg0: OsString::from("devin"),
            args: vec![
                "-p".into(),
                "--".into(),
                "gate".into(),
                String::new().into(),
            ],
        };
        let mut argv: Vec<OsString> = vec!["devin-bridge".into()];
        argv.extend(args.to_args());
        assert_eq!(GateArgs::from_command_line(&argv), Some(Ok(args)));
        let relative: Vec<OsString> = ["devin-bridge", "gate", "devin", "devin"]
            .map(OsString::from)
            .to_vec();
        assert!(matches!(
            GateArgs::from_command_line(&relative),
            Some(Err(_))
        ));
        let short: Vec<OsString> = ["devin-bridge", "gate", "/bin/true"]
            .map(OsString::from)
            .to_vec();
        assert!(matches!(GateArgs::from_command_line(&short), Some(Err(_))));
        let other: Vec<OsString> = ["devin-bridge", "keeper"].map(OsString::from).to_vec();
        assert_eq!(GateArgs::from_command_line(&other), None);
        assert_eq!(GateArgs::from_command_line(&other[..1]), None);
    }

    #[test]
    fn only_the_exact_opening_line_opens_the_gate() {
        assert!(opened(&b"go\n"[..]));
        assert!(opened(&b"go\nand more"[..]));
        for shut in [&b""[..], b"go", b"g", b"GO\n", b"no\n", b"go \n", b"\n"] {
            assert!(
                !opened(shut),
                "{:?} opened the gate",
                String::from_utf8_lossy(shut)
            );
        }
    }

    #[test]
    fn a_program_is_resolved_as_a_direct_spawn_would_find_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tool = dir.path().join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").expect("write");
        let env = |path: &Path| vec![(OsString::from("PATH"), path.as_os_str().to_owned())];
        // Not executable yet: refused as a spawn refuses it, by path or by name.
        for denied in [
            resolve(&tool, dir.path(), &[]),
            resolve(Path::new("tool"), dir.path(), &env(dir.path())),
        ] {
            let denied = denied.expect_err("not executable");
            assert_eq!(denied.kind(), std::io::ErrorKind::PermissionDenied);
            assert!(
                denied.to_string().starts_with("Permission denied"),
                "{denied}"
            );
        }
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(resolve(&tool, dir.path(), &[]).expect("a path"), tool);
        assert_eq!(
            resolve(Path::new("./tool"), dir.path(), &[])
                .expect("relative to the child's directory"),
            dir.path().join("tool")
        );
        assert_eq!(
            resolve(Path::new("tool"), dir.path(), &env(dir.path())).expect("on PATH"),
            tool
        );
        // Only the child's PATH is searched, never the worker's, and a relative entry never.
        assert_eq!(
            resolve(Path::new("tool"), dir.path(), &[])
                .expect_err("no PATH")
                .kind(),
            std::io::ErrorKind::NotFound
        );
        assert_eq!(
            resolve(
                Path::new("tool"),
                dir.path(),
                &env(Path::new("relative/dir"))
            )
            .expect_err("relative")
            .kind(),
            std::io::ErrorKind::NotFound
        );
        let missing = resolve(&dir.path().join("missing"), dir.path(), &[]).expect_err("missing");
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
        assert!(missing.to_string().starts_with("No such file"), "{missing}");
        // A directory is not a program.
        assert_eq!(
            resolve(dir.path(), dir.path(), &[])
                .expect_err("a directory")
                .kind(),
            std::io::ErrorKind::PermissionDenied
        );
    }
}
