//! Finding the Devin CLI and checking its version against the tested interval.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use devin_bridge_agent::process::{command_for, Spec};

/// The interval of Devin CLI versions this helper was tested with: [3000.11, 3000.12).
pub(crate) const TESTED_FROM: (u64, u64) = (3000, 11);
pub(crate) const TESTED_UNTIL: (u64, u64) = (3000, 12);

/// Why the Devin CLI cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PreflightError {
    /// `missing_cli`.
    #[error("{0}")]
    Missing(String),
    /// `setup`.
    #[error("{0}")]
    Setup(String),
}

/// Where a version stands relative to the tested interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    Tested,
    Newer,
    Older,
}

impl Standing {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Standing::Tested => "inside the tested interval",
            Standing::Newer => "newer than the tested interval",
            Standing::Older => "older than the tested interval",
        }
    }
}

/// A usable Devin CLI.
#[derive(Debug, Clone)]
pub(crate) struct Devin {
    /// Resolved absolute path.
    pub path: PathBuf,
    /// `MAJOR.MINOR(.PATCH)` as printed.
    pub version: String,
    pub standing: Standing,
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// `DEVIN_BIN` if set (absolute and executable), else `command` (absolute, or searched on
/// PATH).
pub(crate) fn resolve_binary(command: &str) -> Result<PathBuf, PreflightError> {
    if let Some(bin) = std::env::var_os("DEVIN_BIN").filter(|b| !b.is_empty()) {
        let path = PathBuf::from(&bin);
        if !path.is_absolute() {
            return Err(PreflightError::Missing(
                "DEVIN_BIN must be an absolute path".into(),
            ));
        }
        if !is_executable(&path) {
            return Err(PreflightError::Missing(format!(
                "DEVIN_BIN {} is not an executable file",
                path.display()
            )));
        }
        return Ok(path);
    }
    let command_path = Path::new(command);
    if command_path.is_absolute() {
        return if is_executable(command_path) {
            Ok(command_path.to_owned())
        } else {
            Err(PreflightError::Missing(format!(
                "the Devin CLI {command} is not an executable file"
            )))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| {
            PreflightError::Missing(format!(
                "the Devin CLI ({command}) is not on PATH; install it or set DEVIN_BIN"
            ))
        })
}

/// The first `MAJOR.MINOR(.PATCH)` token of a version line.
pub(crate) fn parse_version(text: &str) -> Option<(String, (u64, u64))> {
    text.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .map(|token| token.strip_prefix('v').unwrap_or(token))
        .find_map(|token| {
            let parts: Vec<&str> = token.split('.').collect();
            if !(2..=3).contains(&parts.len())
                || parts
                    .iter()
                    .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
            {
                return None;
            }
            let major = parts[0].parse().ok()?;
            let minor = parts[1].parse().ok()?;
            Some((token.to_owned(), (major, minor)))
        })
}

/// Where `(major, minor)` stands relative to the tested interval.
pub(crate) fn standing(version: (u64, u64)) -> Standing {
    if version < TESTED_FROM {
        Standing::Older
    } else if version >= TESTED_UNTIL {
        Standing::Newer
    } else {
        Standing::Tested
    }
}

/// Runs `devin --version` (deadline `timeout`, environment `env`) and checks it.
pub(crate) async fn check(
    path: &Path,
    env: Vec<(OsString, OsString)>,
    cwd: &Path,
    timeout: Duration,
) -> Result<Devin, PreflightError> {
    let output = match probe(path, &["--version"], env, cwd, timeout).await {
        Err(ProbeError::TimedOut) => {
            return Err(PreflightError::Setup(format!(
                "`{} --version` did not answer within {} ms",
                path.display(),
                timeout.as_millis()
            )))
        }
        Err(ProbeError::Io(error)) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(PreflightError::Missing(format!(
                "cannot run the Devin CLI {}: {error}",
                path.display()
            )))
        }
        Err(ProbeError::Io(error)) => {
            return Err(PreflightError::Setup(format!(
                "cannot run `{} --version`: {error}",
                path.display()
            )))
        }
        Ok(output) => output,
    };
    let text = String::from_utf8_lossy(&output.stdout[..output.stdout.len().min(4096)]);
    let first_line = text.lines().next().unwrap_or("");
    let Some((version, parsed)) = parse_version(first_line) else {
        return Err(PreflightError::Setup(format!(
            "cannot read the Devin CLI version from {:?}",
            first_line.chars().take(80).collect::<String>()
        )));
    };
    let standing = standing(parsed);
    if standing == Standing::Older {
        return Err(PreflightError::Setup(format!(
            "Devin CLI {version} is older than the tested interval [{}.{}, {}.{}); update it",
            TESTED_FROM.0, TESTED_FROM.1, TESTED_UNTIL.0, TESTED_UNTIL.1
        )));
    }
    Ok(Devin {
        path: path.to_owned(),
        version,
        standing,
    })
}

/// Why a short-lived CLI command (`--version`, `models list`) gave no output.
#[derive(Debug)]
pub(crate) enum ProbeError {
    TimedOut,
    Io(std::io::Error),
}

/// Runs the Devin CLI with `args` through the host's process launcher (own process group, the
/// job's allowlisted environment, no stdin, stderr discarded) and collects its output within
/// `timeout`; a CLI that overstays is killed with its group.
pub(crate) async fn probe(
    program: &Path,
    args: &[&str],
    env: Vec<(OsString, OsString)>,
    cwd: &Path,
    timeout: Duration,
) -> Result<std::process::Output, ProbeError> {
    let spec = Spec {
        program: program.to_owned(),
        args: Vec::new(),
        cwd: cwd.to_owned(),
        env,
        stderr_tail_bytes: 0,
        kill_grace: Duration::from_millis(200),
        identity: None,
    };
    let mut command = command_for(&spec);
    command
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    match tokio::time::timeout(timeout, command.output()).await {
        Err(_) => Err(ProbeError::TimedOut),
        Ok(result) => result.map_err(ProbeError::Io),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_the_first_numeric_token() {
        assert_eq!(
            parse_version("devin 3000.11.4 (mock-devin offline)"),
            Some(("3000.11.4".into(), (3000, 11)))
        );
        assert_eq!(
            parse_version("devin v3000.12"),
            Some(("3000.12".into(), (3000, 12)))
        );
        assert_eq!(parse_version("devin nightly"), None);
        assert_eq!(parse_version("devin 1.2.3.4"), None);
    }

    #[test]
    fn the_tested_interval_is_half_open() {
        assert_eq!(standing((3000, 10)), Standing::Older);
        assert_eq!(standing((2999, 99)), Standing::Older);
        assert_eq!(standing((3000, 11)), Standing::Tested);
        assert_eq!(standing((3000, 12)), Standing::Newer);
        assert_eq!(standing((3001, 0)), Standing::Newer);
    }

    #[tokio::test]
    async fn an_old_cli_is_a_setup_problem_and_a_new_one_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = |name: &str, version: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, format!("#!/bin/sh\necho 'devin {version}'\n")).expect("write");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            path
        };
        let env = vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
        let old = script("old", "3000.10.9");
        let error = check(&old, env.clone(), dir.path(), Duration::from_secs(5))
            .await
            .expect_err("old");
        assert!(matches!(error, PreflightError::Setup(_)), "{error}");
        let new = script("new", "3000.13.0");
        let devin = check(&new, env, dir.path(), Duration::from_secs(5))
            .await
            .expect("newer runs");
        assert_eq!(devin.standing, Standing::Newer);
        assert_eq!(devin.version, "3000.13.0");
    }
}
