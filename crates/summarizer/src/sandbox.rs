//! Where and how the agent runs: the sandbox home check, the agent command, and the
//! environment built from an allowlist.

use devin_bridge_policy::ModePolicy;
use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use crate::policy::SummarizerPolicy;
use devin_bridge_agent::identity::AgentIdentity;
use devin_bridge_agent::process::Spec;

/// The only proxy URL ever injected into the agent's environment: the Devin-side guard of the
/// compose topology. Anything else in the policy is ignored (and logged), never passed on.
pub const TRUSTED_PROXY: &str = "http://network-guard:8080";

/// Why the agent cannot be configured.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("unsafe_devin_home: {0} is neither /home/bridge nor a directory under a /.sandbox/ directory")]
    UnsafeHome(PathBuf),
    #[error("sandbox home {path}: {message}")]
    Home { path: PathBuf, message: String },
    #[error(
        "agent command {0:?} was not found (set [agent] command or DEVIN_BIN); refusing to start"
    )]
    MissingAgent(String),
}

/// Accepts `/home/bridge` or any directory strictly below a `.sandbox` directory; refuses
/// relative paths and `.`/`..` components (which could climb out of the sandbox).
pub fn check_home(home: &Path) -> Result<(), SandboxError> {
    let unsafe_home = || SandboxError::UnsafeHome(home.to_owned());
    if !home.is_absolute() {
        return Err(unsafe_home());
    }
    let components: Vec<Component> = home.components().collect();
    if components
        .iter()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(unsafe_home());
    }
    if home == Path::new("/home/bridge") {
        return Ok(());
    }
    let under_sandbox = components
        .iter()
        .enumerate()
        .any(|(i, c)| *c == Component::Normal(".sandbox".as_ref()) && i + 1 < components.len());
    if under_sandbox {
        Ok(())
    } else {
        Err(unsafe_home())
    }
}

/// Checks the home and makes sure it exists (created 0700 when it lies under `.sandbox`).
pub fn prepare_home(home: &Path) -> Result<PathBuf, SandboxError> {
    check_home(home)?;
    if home != Path::new("/home/bridge") {
        create_private_dir(home)?;
    }
    if !home.is_dir() {
        return Err(SandboxError::Home {
            path: home.to_owned(),
            message: "does not exist or is not a directory".into(),
        });
    }
    Ok(home.to_owned())
}

fn create_private_dir(dir: &Path) -> Result<(), SandboxError> {
    if dir.exists() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|error| SandboxError::Home {
            path: dir.to_owned(),
            message: error.to_string(),
        })
}

/// With a separate agent identity the host cannot create or chown the agent's directories
/// (it holds no CAP_CHOWN): they must already exist, belong to the agent's uid, and be closed
/// to group and others, so that neither side can plant files in the other's space.
fn check_agent_owned(dir: &Path, uid: u32) -> Result<(), SandboxError> {
    let error = |message: String| SandboxError::Home {
        path: dir.to_owned(),
        message,
    };
    let meta = std::fs::symlink_metadata(dir).map_err(|e| {
        error(format!(
            "{e} (it must exist and belong to the agent's uid {uid})"
        ))
    })?;
    if !meta.is_dir() {
        return Err(error("is not a directory".into()));
    }
    if meta.uid() != uid {
        return Err(error(format!(
            "belongs to uid {}, not to the agent's uid {uid}",
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(error(format!(
            "mode {:o} lets group or others in; it must be 0700",
            meta.mode() & 0o777
        )));
    }
    Ok(())
}

/// The agent's HOME (also its cwd) and TMPDIR, checked for the identity it runs under.
pub fn prepare_agent_dirs(
    policy: &SummarizerPolicy,
    identity: &AgentIdentity,
) -> Result<(PathBuf, PathBuf), SandboxError> {
    let home = policy.resolve(&policy.agent.home);
    let tmpdir = policy
        .agent
        .tmpdir
        .as_ref()
        .map_or_else(|| home.join("tmp"), |dir| policy.resolve(dir));
    match identity.switch_to() {
        Some((uid, _)) => {
            check_home(&home)?;
            check_agent_owned(&home, uid)?;
            // Inside the agent's private home the host can see nothing (and needs to: only
            // the agent can have put anything there); elsewhere the TMPDIR is checked too.
            if !tmpdir.starts_with(&home) {
                check_agent_owned(&tmpdir, uid)?;
            }
        }
        None => {
            prepare_home(&home)?;
            create_private_dir(&tmpdir)?;
        }
    }
    Ok((home, tmpdir))
}

/// The agent program: `DEVIN_BIN`, else the policy's command (a path relative to the policy,
/// or a name looked up on PATH).
pub fn resolve_command(policy: &SummarizerPolicy) -> Result<PathBuf, SandboxError> {
    let command = std::env::var("DEVIN_BIN")
        .ok()
        .filter(|bin| !bin.is_empty())
        .unwrap_or_else(|| policy.agent.command.clone());
    let candidate = if command.contains('/') {
        Some(policy.resolve(Path::new(&command)))
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(&command))
                .find(|file| is_executable(file))
        })
    };
    match candidate {
        Some(path) if is_executable(&path) => Ok(path),
        _ => Err(SandboxError::MissingAgent(command)),
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The agent's complete environment. Nothing is inherited but PATH, LANG/LC_ALL/TZ and the
/// names the policy passes through (which policy validation already filtered).
pub fn environment(
    policy: &SummarizerPolicy,
    home: &Path,
    tmpdir: &Path,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut set = |name: &str, value: OsString| env.push((name.into(), value));
    set(
        "PATH",
        std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
    );
    set("HOME", home.into());
    set("XDG_CONFIG_HOME", home.join(".config").into());
    set("XDG_DATA_HOME", home.join(".local/share").into());
    set("XDG_STATE_HOME", home.join(".local/state").into());
    set("XDG_CACHE_HOME", home.join(".cache").into());
    set("TMPDIR", tmpdir.into());
    set(
        "LANG",
        std::env::var_os("LANG").unwrap_or_else(|| "C.UTF-8".into()),
    );
    for name in ["LC_ALL", "TZ"] {
        if let Some(value) = std::env::var_os(name) {
            set(name, value);
        }
    }
    // Telemetry and self-update opt-outs understood by common CLIs.
    set("DO_NOT_TRACK", "1".into());
    set("DISABLE_AUTOUPDATER", "1".into());
    set("NO_UPDATE_NOTIFIER", "1".into());
    match policy.agent.proxy.as_deref() {
        Some(TRUSTED_PROXY) => {
            for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
                set(name, TRUSTED_PROXY.into());
            }
            set("NO_PROXY", "localhost,127.0.0.1,::1".into());
        }
        Some(other) => {
            tracing::warn!(proxy = %other, trusted = TRUSTED_PROXY, "agent.proxy is not the trusted guard URL; no proxy is injected");
        }
        None => {}
    }
    for name in &policy.agent.pass_env {
        if let Some(value) = std::env::var_os(name) {
            set(name, value);
        }
    }
    env
}

/// The full spawn recipe for one agent.
pub fn agent_spec(
    policy: &SummarizerPolicy,
    identity: &AgentIdentity,
) -> Result<Spec, SandboxError> {
    let (home, tmpdir) = prepare_agent_dirs(policy, identity)?;
    let program = resolve_command(policy)?;
    Ok(Spec {
        program,
        args: policy.agent.args.clone(),
        env: environment(policy, &home, &tmpdir),
        cwd: home,
        stderr_tail_bytes: policy.agent.stderr_tail_bytes,
        kill_grace: Duration::from_millis(policy.agent.kill_grace_ms),
        identity: identity.switch_to(),
    })
}

/// `<agent> --version` in the sandbox (first line, bounded), within 15 s.
pub(crate) async fn agent_version(spec: &Spec) -> anyhow::Result<String> {
    use anyhow::Context as _;
    let mut command = devin_bridge_agent::process::command_for(spec);
    command.arg("--version").stdin(std::process::Stdio::null());
    let output = tokio::time::timeout(Duration::from_secs(15), command.output())
        .await
        .context("timed out")??;
    if !output.status.success() {
        anyhow::bail!("exit status {}", output.status);
    }
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .chars()
        .take(200)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bridge_home_and_sandbox_subdirectories_are_safe() {
        for ok in [
            "/home/bridge",
            "/work/.sandbox/home",
            "/.sandbox/x",
            "/a/.sandbox/b/c",
        ] {
            assert!(check_home(Path::new(ok)).is_ok(), "{ok} refused");
        }
        for bad in [
            "/home/user",
            "/",
            "relative/.sandbox/x",
            "/.sandbox",
            "/a/.sandbox",
            "/a/.sandbox/../etc",
            "/a/.sandbox/./x/..",
            "/home/bridge/../root",
            "/a/.sandboxes/x",
            "/a/x.sandbox/y",
            "/home/bridge2",
        ] {
            assert!(
                matches!(check_home(Path::new(bad)), Err(SandboxError::UnsafeHome(_))),
                "{bad} accepted"
            );
        }
    }

    fn policy(extra: &str) -> SummarizerPolicy {
        SummarizerPolicy::parse(
            &format!("mode = \"summarizer\"\n{extra}"),
            Path::new("p.toml"),
            Path::new("/etc/bridge"),
        )
        .expect("policy")
    }

    #[test]
    fn the_environment_is_an_allowlist() {
        std::env::set_var("ANTHROPIC_API_KEY", "sk-leak");
        std::env::set_var("CLAUDE_CODE_OAUTH_TOKEN", "leak");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "leak");
        std::env::set_var("DEVIN_BRIDGE_TEST_PASS", "kept");
        let env = environment(
            &policy("[agent]\npass_env = [\"BRIDGE_TEST_PASS_NOT_SET\"]"),
            Path::new("/home/bridge"),
            Path::new("/home/bridge/tmp"),
        );
        let names: Vec<String> = env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        for forbidden in [
            "ANTHROPIC_API_KEY",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "HTTPS_PROXY",
            "DEVIN_BRIDGE_TEST_PASS",
        ] {
            assert!(!names.iter().any(|n| n == forbidden), "{forbidden} leaked");
        }
        assert!(names.iter().any(|n| n == "HOME"));
        let home = env
            .iter()
            .find(|(k, _)| k == "XDG_CONFIG_HOME")
            .map(|(_, v)| v.clone());
        assert_eq!(home, Some("/home/bridge/.config".into()));
    }

    #[test]
    fn the_proxy_is_injected_only_when_it_is_exactly_the_trusted_guard() {
        let has_proxy = |extra: &str| {
            environment(&policy(extra), Path::new("/home/bridge"), Path::new("/tmp"))
                .iter()
                .any(|(k, _)| k == "HTTPS_PROXY")
        };
        assert!(has_proxy("[agent]\nproxy = \"http://network-guard:8080\""));
        for other in [
            "http://network-guard:8080/",
            "http://evil:8080",
            "http://NETWORK-GUARD:8080",
            "https://network-guard:8080",
            "http://network-guard:8080@evil",
        ] {
            assert!(
                !has_proxy(&format!("[agent]\nproxy = {other:?}")),
                "{other} injected"
            );
        }
        assert!(!has_proxy(""));
    }
}
