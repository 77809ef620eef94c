//! What xtask and the container tool share of their own work: the workspace they build and
//! run in, and running one program to its end. One definition, so that both find the same
//! root and word a failed program alike.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// The workspace root: this crate lives in `tools/test-setup/`.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// A program that could not be started, or ended without success.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot run {command}")]
    Start {
        /// The whole command, as `Command`'s `Debug` shows it.
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{program:?} failed with {status}")]
    Failed {
        program: OsString,
        status: ExitStatus,
    },
}

/// Runs `command` with the caller's standard streams and waits for it; an error unless it
/// exits with success.
pub fn run(command: &mut Command) -> Result<(), RunError> {
    let status = command.status().map_err(|source| RunError::Start {
        command: format!("{command:?}"),
        source,
    })?;
    if !status.success() {
        return Err(RunError::Failed {
            program: command.get_program().to_owned(),
            status,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_holds_the_workspace_manifest_and_this_crate() {
        let root = root();
        assert!(root.join("Cargo.toml").is_file(), "{}", root.display());
        assert!(root.join("tools/test-setup/src/workspace.rs").is_file());
    }

    #[test]
    fn a_failed_or_missing_program_is_an_error_that_names_it() {
        assert!(run(&mut Command::new("true")).is_ok());
        let failed = run(&mut Command::new("false")).expect_err("false fails");
        assert!(matches!(failed, RunError::Failed { .. }), "{failed:?}");
        assert!(
            failed.to_string().starts_with("\"false\" failed with"),
            "{failed}"
        );
        let missing = run(&mut Command::new("/nonexistent/program")).expect_err("missing");
        assert!(matches!(missing, RunError::Start { .. }), "{missing:?}");
        assert!(
            missing.to_string().contains("/nonexistent/program"),
            "{missing}"
        );
    }
}
