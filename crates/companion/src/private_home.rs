//! The private home every job of the Devin CLI runs in (per-job isolation from the real home).
//!
//! Every job shares one private HOME, `<data>/home` (0700), with its XDG data, state and cache
//! directories under it, so sessions survive between jobs (resume) without touching the real
//! home. The user's Devin credentials file is linked into it by a symbolic link (never read or
//! copied). Each job gets its own XDG_CONFIG_HOME, `<data>/runs/<job>/config`, holding a
//! generated `devin/config.json` (permissions for the job's mode, everything optional off) and
//! an empty `devin/mcp_config.json`. The child environment is an allowlist.

use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde_json::json;

/// Which sandbox a job runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sandbox {
    /// consult and review: no edits, no writes, no commands.
    ReadOnly,
    /// write: writes inside the workspace (and its git directories) only.
    WorkspaceWrite,
}

/// Why a job's private home could not be prepared.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrivateHomeError {
    #[error("cannot prepare {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} is not private to this user")]
    NotPrivate(PathBuf),
    #[error("cannot find the home directory (HOME is not set)")]
    NoHome,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PrivateHomeError + '_ {
    move |source| PrivateHomeError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The private HOME and XDG directories shared by every job.
#[derive(Debug, Clone)]
pub(crate) struct SharedHome {
    pub home: PathBuf,
    pub data: PathBuf,
    pub state: PathBuf,
    pub cache: PathBuf,
}

impl SharedHome {
    pub(crate) fn paths(data_dir: &Path) -> Self {
        let home = data_dir.join("home");
        Self {
            data: home.join(".local/share"),
            state: home.join(".local/state"),
            cache: home.join(".cache"),
            home,
        }
    }
}

/// The real user's home directory (from HOME).
pub(crate) fn real_home() -> Result<PathBuf, PrivateHomeError> {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .ok_or(PrivateHomeError::NoHome)
}

/// Where the real user's Devin credentials live: `$XDG_DATA_HOME/devin/credentials.toml`,
/// default `~/.local/share/devin/credentials.toml`.
pub(crate) fn real_credentials() -> Result<PathBuf, PrivateHomeError> {
    let data = match std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        Some(dir) if Path::new(&dir).is_absolute() => PathBuf::from(dir),
        _ => real_home()?.join(".local/share"),
    };
    Ok(data.join("devin/credentials.toml"))
}

/// Creates `dir` and its missing parents 0700 and checks it is private to this user.
pub(crate) fn private_dir(dir: &Path) -> Result<(), PrivateHomeError> {
    use std::os::unix::fs::MetadataExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io(dir))?;
    let meta = std::fs::symlink_metadata(dir).map_err(io(dir))?;
    if !meta.is_dir() || meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o077 != 0 {
        return Err(PrivateHomeError::NotPrivate(dir.to_owned()));
    }
    Ok(())
}

/// Creates the shared private home and links the real credentials into it. Returns the
/// directories and whether the credentials file exists to be linked.
pub(crate) fn prepare_home(data_dir: &Path) -> Result<(SharedHome, bool), PrivateHomeError> {
    let shared = SharedHome::paths(data_dir);
    private_dir(data_dir)?;
    for dir in [&shared.home, &shared.data, &shared.state, &shared.cache] {
        private_dir(dir)?;
    }
    let devin_data = shared.data.join("devin");
    private_dir(&devin_data)?;
    let real = real_credentials()?;
    let link = devin_data.join("credentials.toml");
    match std::fs::read_link(&link) {
        Ok(target) if target == real => {}
        Ok(_) => {
            std::fs::remove_file(&link).map_err(io(&link))?;
            std::os::unix::fs::symlink(&real, &link).map_err(io(&link))?;
        }
        // Not there: link it. Something other than a link (a file written by a login inside
        // the private home) is left as it is.
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::os::unix::fs::symlink(&real, &link).map_err(io(&link))?;
        }
        Err(_) => {}
    }
    // Only whether it exists: the file is never opened.
    let present = std::fs::metadata(&real).is_ok_and(|meta| meta.is_file());
    Ok((shared, present))
}

/// Variables copied from the helper's own environment into every child.
const PASSED: [&str; 8] = [
    "PATH",
    "LANG",
    "TERM",
    "TZ",
    "USER",
    "LOGNAME",
    "SHELL",
    "WINDSURF_API_KEY",
];

/// The child environment: an allowlist of the helper's variables, the private HOME/XDG
/// directories, and `DEVIN_SANDBOX=true` for write jobs. Nothing else; no `DEVIN_*`.
pub(crate) fn child_env(
    shared: &SharedHome,
    config_home: Option<&Path>,
    sandbox: Sandbox,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(name, _)| {
            let name = name.to_string_lossy();
            PASSED.contains(&name.as_ref()) || name.starts_with("LC_")
        })
        .collect();
    env.push(("HOME".into(), shared.home.clone().into()));
    env.push(("XDG_DATA_HOME".into(), shared.data.clone().into()));
    env.push(("XDG_STATE_HOME".into(), shared.state.clone().into()));
    env.push(("XDG_CACHE_HOME".into(), shared.cache.clone().into()));
    if let Some(config) = config_home {
        env.push(("XDG_CONFIG_HOME".into(), config.to_owned().into()));
    }
    if sandbox == Sandbox::WorkspaceWrite {
        env.push(("DEVIN_SANDBOX".into(), "true".into()));
    }
    env
}

/// What a job's generated configuration allows and denies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Permissions {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// The permission rules of a job. `git_dirs` are the workspace's git directories a write job
/// may also write (a linked worktree keeps its index and refs outside the workspace).
pub(crate) fn permissions(
    sandbox: Sandbox,
    workspace: &Path,
    git_dirs: &[PathBuf],
    real_home: &Path,
    real_credentials: &Path,
) -> Permissions {
    let mut allow = vec!["Read(**)".to_owned()];
    let mut deny = Vec::new();
    match sandbox {
        Sandbox::ReadOnly => {
            deny.extend(["Edit(**)", "Write(**)", "Exec(*)"].map(String::from));
        }
        Sandbox::WorkspaceWrite => {
            allow.push(format!("Write({}/**)", workspace.display()));
            allow.push(format!("Edit({}/**)", workspace.display()));
            for dir in git_dirs {
                if !dir.starts_with(workspace) {
                    allow.push(format!("Write({}/**)", dir.display()));
                    allow.push(format!("Edit({}/**)", dir.display()));
                }
            }
            allow.push("Exec(*)".to_owned());
        }
    }
    deny.push("Fetch(*)".to_owned());
    for sensitive in [
        ".ssh",
        ".aws",
        ".gnupg",
        ".config/gcloud",
        ".docker",
        ".kube",
    ] {
        let path = real_home.join(sensitive);
        deny.push(format!("Read({}/**)", path.display()));
        deny.push(format!("Read({})", path.display()));
    }
    deny.push(format!("Read({})", real_home.join(".netrc").display()));
    deny.push(format!("Read({})", real_credentials.display()));
    if sandbox == Sandbox::WorkspaceWrite {
        // Nothing may be written where a credential lives, even if the workspace contains it.
        deny.push(format!("Write({})", real_credentials.display()));
    }
    Permissions { allow, deny }
}

/// The generated `devin/config.json` (documented in docs/companion.md).
pub(crate) fn config_json(permissions: &Permissions) -> serde_json::Value {
    json!({
        "autoUpdate": false,
        "attribution": false,
        "subagents": { "enabled": false },
        "notifications": false,
        "personalImports": false,
        "permissions": { "allow": permissions.allow, "deny": permissions.deny },
    })
}

/// The git directories of the repository holding `workspace` (`--git-dir` and
/// `--git-common-dir`, absolute), empty outside a repository.
pub(crate) fn git_dirs(workspace: &Path) -> Vec<PathBuf> {
    let output = std::process::Command::new("git")
        .args([
            "rev-parse",
            "--path-format=absolute",
            "--git-dir",
            "--git-common-dir",
        ])
        .current_dir(workspace)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let Ok(output) = output else {
        return Vec::new();
    };
    if !output.status.success() {
        return Vec::new();
    }
    let mut dirs: Vec<PathBuf> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| devin_bridge_policy::normalize(Path::new(line)))
        .collect();
    dirs.dedup();
    dirs
}

/// Project configuration files the Devin CLI would read from the workspace; each one present
/// becomes a warning on the job (they can widen permissions or add MCP servers).
pub(crate) fn project_config_warnings(workspace: &Path) -> Vec<String> {
    [
        "config.json",
        "config.local.json",
        "mcp_config.json",
        "mcp_config.local.json",
    ]
    .iter()
    .map(|name| workspace.join(".devin").join(name))
    .filter(|path| path.exists())
    .map(|path| {
        format!(
            "project_config: {} is read by the Devin CLI",
            path.display()
        )
    })
    .collect()
}

/// A job's prepared private home: its configuration directory and environment.
#[derive(Debug, Clone)]
pub(crate) struct JobHome {
    /// `<data>/runs/<job>/config`, the job's XDG_CONFIG_HOME.
    pub config_home: PathBuf,
    pub env: Vec<(OsString, OsString)>,
    pub warnings: Vec<String>,
}

/// Prepares the shared home and the job's private configuration.
pub(crate) fn prepare_job(
    data_dir: &Path,
    job_id: &str,
    sandbox: Sandbox,
    workspace: &Path,
) -> Result<JobHome, PrivateHomeError> {
    // Whether credentials are linked matters to `setup`, not to a job: the agent reports a
    // missing login itself.
    let (shared, _credentials_present) = prepare_home(data_dir)?;
    let runs = data_dir.join("runs");
    private_dir(&runs)?;
    let config_home = runs.join(job_id).join("config");
    let devin_config = config_home.join("devin");
    private_dir(&devin_config)?;
    let git = match sandbox {
        Sandbox::WorkspaceWrite => git_dirs(workspace),
        Sandbox::ReadOnly => Vec::new(),
    };
    let home = real_home()?;
    let rules = permissions(sandbox, workspace, &git, &home, &real_credentials()?);
    write_private(
        &devin_config.join("config.json"),
        &serde_json::to_vec_pretty(&config_json(&rules)).unwrap_or_default(),
    )?;
    write_private(
        &devin_config.join("mcp_config.json"),
        br#"{"mcpServers":{}}"#,
    )?;
    Ok(JobHome {
        env: child_env(&shared, Some(&config_home), sandbox),
        config_home,
        warnings: project_config_warnings(workspace),
    })
}

/// Writes a 0600 file, replacing what was there.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), PrivateHomeError> {
    use std::io::Write;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
        .map_err(io(path))?;
    file.write_all(bytes).map_err(io(path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary data directory with the mode the helper demands (0700).
    fn private_tempdir() -> tempfile::TempDir {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        dir
    }

    #[test]
    fn read_only_jobs_deny_edits_writes_commands_fetches_and_secrets() {
        let rules = permissions(
            Sandbox::ReadOnly,
            Path::new("/w"),
            &[],
            Path::new("/home/u"),
            Path::new("/home/u/.local/share/devin/credentials.toml"),
        );
        for rule in [
            "Edit(**)",
            "Write(**)",
            "Exec(*)",
            "Fetch(*)",
            "Read(/home/u/.ssh/**)",
            "Read(/home/u/.aws/**)",
            "Read(/home/u/.netrc)",
            "Read(/home/u/.local/share/devin/credentials.toml)",
        ] {
            assert!(rules.deny.iter().any(|r| r == rule), "{rule} not denied");
        }
        assert!(!rules.allow.iter().any(|r| r.starts_with("Write(")));
    }

    #[test]
    fn write_jobs_may_write_the_workspace_and_an_outside_git_dir() {
        let rules = permissions(
            Sandbox::WorkspaceWrite,
            Path::new("/w/tree"),
            &[PathBuf::from("/w/tree/.git"), PathBuf::from("/w/main/.git")],
            Path::new("/home/u"),
            Path::new("/home/u/.local/share/devin/credentials.toml"),
        );
        assert!(rules.allow.contains(&"Write(/w/tree/**)".to_owned()));
        assert!(rules.allow.contains(&"Write(/w/main/.git/**)".to_owned()));
        assert!(!rules.allow.contains(&"Write(/w/tree/.git/**)".to_owned()));
        assert!(rules.deny.contains(&"Fetch(*)".to_owned()));
        assert!(!rules.deny.contains(&"Write(**)".to_owned()));
    }

    #[test]
    fn the_child_environment_is_an_allowlist() {
        let shared = SharedHome::paths(Path::new("/d"));
        let env = child_env(
            &shared,
            Some(Path::new("/d/runs/j/config")),
            Sandbox::WorkspaceWrite,
        );
        let names: Vec<String> = env
            .iter()
            .map(|(name, _)| name.to_string_lossy().into_owned())
            .collect();
        for name in &names {
            assert!(
                PASSED.contains(&name.as_str())
                    || name.starts_with("LC_")
                    || [
                        "HOME",
                        "XDG_DATA_HOME",
                        "XDG_STATE_HOME",
                        "XDG_CACHE_HOME",
                        "XDG_CONFIG_HOME",
                        "DEVIN_SANDBOX"
                    ]
                    .contains(&name.as_str()),
                "{name} leaked"
            );
        }
        assert!(names.contains(&"DEVIN_SANDBOX".to_owned()));
        let home = env
            .iter()
            .find(|(n, _)| n == "HOME")
            .map(|(_, v)| v.clone());
        assert_eq!(home, Some(OsString::from("/d/home")));
        let read_only = child_env(&shared, None, Sandbox::ReadOnly);
        assert!(!read_only.iter().any(|(n, _)| n == "DEVIN_SANDBOX"));
    }

    #[test]
    fn prepared_jobs_get_private_generated_config() {
        use std::os::unix::fs::PermissionsExt;
        let data = private_tempdir();
        let workspace = tempfile::tempdir().expect("workspace");
        std::fs::create_dir(workspace.path().join(".devin")).expect("mkdir");
        std::fs::write(workspace.path().join(".devin/mcp_config.json"), "{}").expect("write");
        let job = prepare_job(
            data.path(),
            "job-0123456789abcdef",
            Sandbox::ReadOnly,
            workspace.path(),
        )
        .expect("prepare");
        let config = job.config_home.join("devin/config.json");
        let mode = std::fs::metadata(&config)
            .expect("meta")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let value: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&config).expect("read")).expect("json");
        assert_eq!(value["autoUpdate"], false);
        assert!(value["permissions"]["deny"]
            .as_array()
            .expect("deny")
            .iter()
            .any(|r| r == "Write(**)"));
        let mcp =
            std::fs::read_to_string(job.config_home.join("devin/mcp_config.json")).expect("mcp");
        assert_eq!(mcp, r#"{"mcpServers":{}}"#);
        assert_eq!(job.warnings.len(), 1, "{:?}", job.warnings);
        let link = data.path().join("home/.local/share/devin/credentials.toml");
        assert!(std::fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink());
    }
}
