//! The worker's settings: flags win over environment variables, which win over the policy's
//! `[outpost]` section, which has the documented defaults.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::policy::{NetworkEnforcement, OutpostPolicy, OutpostSection};
use devin_bridge_policy::{ModePolicy, PolicyError};

use super::binaries::machine_suffix;
use super::fleet::{AcceptorId, BaseUrl, BaseUrlError, Commit, Secret, SessionId};

/// The embedded default policy (`policies/outpost.toml`).
const BUILTIN_POLICY: &str = include_str!("../../../policies/outpost.toml");

/// Environment variables the worker reads.
pub(crate) mod env {
    pub(crate) const ACCEPTOR_ID: &str = "DEVIN_WORKER_ACCEPTOR_ID";
    pub(crate) const TOKEN: &str = "DEVIN_OUTPOSTS_TOKEN";
    pub(crate) const API_URL: &str = "DEVIN_API_URL";
    pub(crate) const CACHE_DIR: &str = "DEVIN_WORKER_CACHE_DIR";
    pub(crate) const STATIC_BASE_URL: &str = "DEVIN_WORKER_STATIC_BASE_URL";
    pub(crate) const GATEWAY_URL: &str = "DEVIN_OUTPOST_GATEWAY_URL";
    pub(crate) const REMOTE_SHA: &str = "DEVIN_WORKER_REMOTE_SHA";
    pub(crate) const PTY_BRIDGE_PORT: &str = "DEVIN_PTY_BRIDGE_PORT";
    pub(crate) const CHROME_PATH: &str = "DEVIN_CHROME_PATH";
}

/// Why the worker cannot start with these settings.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkerSettingsError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("no fleet API token: pass --token, set DEVIN_OUTPOSTS_TOKEN, or set token_file in the policy's [outpost] section (this build cannot borrow a Devin CLI login)")]
    NoToken,
    #[error("token file {path}: {message}")]
    TokenFile { path: PathBuf, message: String },
    #[error(transparent)]
    Url(#[from] BaseUrlError),
    #[error("{what} {value:?}: {message}")]
    Invalid {
        what: &'static str,
        value: String,
        message: String,
    },
    #[error("HOME is not set, so {0} has no default; set it in the policy or by its flag")]
    NoHome(&'static str),
    #[error("this machine ({os}/{arch}) has no published devin-remote build")]
    UnsupportedMachine {
        os: &'static str,
        arch: &'static str,
    },
    #[error("the policy says platform {configured:?}, but this machine runs {actual}: an outpost worker serves its own platform only")]
    PlatformMismatch { configured: String, actual: String },
}

/// The `outpost start` flags that override settings (all optional).
#[derive(Debug, Clone, Default)]
pub(crate) struct Overrides {
    pub outpost: Option<String>,
    pub session: Option<String>,
    pub acceptor_id: Option<String>,
    pub token: Option<String>,
    pub once: bool,
    pub api_url: Option<String>,
    pub cache_dir: Option<PathBuf>,
    pub static_base_url: Option<String>,
    pub gateway_url: Option<String>,
    pub remote_binary_sha: Option<String>,
    pub pty_bridge_port: Option<u16>,
    pub poll_interval_secs: Option<u64>,
}

/// Everything the worker runs with.
#[derive(Debug, Clone)]
pub(crate) struct WorkerSettings {
    pub token: Secret,
    pub api: BaseUrl,
    pub static_base: BaseUrl,
    pub gateway_fallback: Option<String>,
    pub remote_sha: Option<Commit>,
    pub outpost: Option<String>,
    pub session: Option<SessionId>,
    pub once: bool,
    /// Explicit identity; `None`: the one persisted in `data_dir`.
    pub acceptor_id: Option<AcceptorId>,
    pub work_dir: PathBuf,
    pub data_dir: PathBuf,
    pub cache_dir: PathBuf,
    pub max_sessions: usize,
    /// With other workers on the queue, claims wait up to this (see `worker::claim_delay`).
    pub claim_spread: Duration,
    /// `linux`, `macos` or `windows`.
    pub platform: String,
    /// The binary suffix (`linux_x64`, ...).
    pub binary_suffix: String,
    pub poll_interval: Duration,
    pub watch_idle_timeout: Duration,
    pub request_timeout: Duration,
    pub max_response_bytes: usize,
    pub max_event_bytes: u32,
    pub remote_kill_grace: Duration,
    pub exit_confirm_reads: u32,
    pub exit_confirm_interval: Duration,
    pub shutdown_grace: Duration,
    pub chrome_path: Option<PathBuf>,
    pub desktop: bool,
    pub pty_bridge_port: Option<u16>,
    pub network_enforcement: NetworkEnforcement,
    /// Values the remote may inherit from the worker's environment (the basic system ones).
    pub system_env: Vec<(String, String)>,
}

/// The variables of the worker's own environment a remote may see.
pub(crate) const SYSTEM_ENV: [&str; 10] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "LANG",
    "TZ",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
];

/// Loads the policy (`None`: the built-in one) and refuses any other mode.
pub(crate) fn load_policy(path: Option<&Path>) -> Result<OutpostPolicy, WorkerSettingsError> {
    Ok(match path {
        Some(path) => OutpostPolicy::load(path)?,
        None => builtin_policy()?,
    })
}

/// The embedded default policy; relative paths resolve against this build's `policies/`.
pub(crate) fn builtin_policy() -> Result<OutpostPolicy, WorkerSettingsError> {
    Ok(OutpostPolicy::builtin(
        BUILTIN_POLICY,
        "(built-in outpost policy)",
    )?)
}

/// This machine's platform name as outposts spell it.
pub(crate) fn machine_platform() -> &'static str {
    match std::env::consts::OS {
        "macos" => "macos",
        "windows" => "windows",
        _ => "linux",
    }
}

impl WorkerSettings {
    /// Resolves flags, then `env`, then the policy.
    pub(crate) fn resolve(
        policy: &OutpostPolicy,
        flags: &Overrides,
        env: impl Fn(&str) -> Option<String>,
        current_dir: &Path,
    ) -> Result<Self, WorkerSettingsError> {
        let section: &OutpostSection = &policy.outpost;
        let env_var = |name: &str| env(name).filter(|value| !value.trim().is_empty());
        let home = env_var("HOME").map(PathBuf::from);
        let worker_home = |what: &'static str| {
            home.as_ref()
                .map(|home| home.join(".devin/worker"))
                .ok_or(WorkerSettingsError::NoHome(what))
        };

        let token = match flags.token.clone().or_else(|| env_var(env::TOKEN)) {
            Some(token) => Secret::new(token.trim().to_owned()),
            None => match &section.token_file {
                Some(file) => read_token_file(&policy.resolve(file))?,
                None => return Err(WorkerSettingsError::NoToken),
            },
        };
        let api_url = flags
            .api_url
            .clone()
            .or_else(|| env_var(env::API_URL))
            .unwrap_or_else(|| section.api_url.clone());
        let static_base_url = flags
            .static_base_url
            .clone()
            .or_else(|| env_var(env::STATIC_BASE_URL))
            .unwrap_or_else(|| section.static_base_url.clone());
        let gateway_fallback = flags
            .gateway_url
            .clone()
            .or_else(|| env_var(env::GATEWAY_URL))
            .or_else(|| section.gateway_url.clone());
        if let Some(gateway) = &gateway_fallback {
            check_gateway_url(gateway)?;
        }
        let remote_sha = match flags
            .remote_binary_sha
            .clone()
            .or_else(|| env_var(env::REMOTE_SHA))
            .or_else(|| section.remote_binary_sha.clone())
        {
            Some(value) => {
                Some(
                    value
                        .parse::<Commit>()
                        .map_err(|error| WorkerSettingsError::Invalid {
                            what: "the devin-remote commit",
                            value,
                            message: error.to_string(),
                        })?,
                )
            }
            None => None,
        };
        let acceptor_id =
            match flags
                .acceptor_id
                .clone()
                .or_else(|| env_var(env::ACCEPTOR_ID))
            {
                Some(value) => Some(value.parse::<AcceptorId>().map_err(|error| {
                    WorkerSettingsError::Invalid {
                        what: "the acceptor id",
                        value,
                        message: error.to_string(),
                    }
                })?),
                None => None,
            };
        let session =
            match &flags.session {
                Some(value) => Some(value.parse::<SessionId>().map_err(|error| {
                    WorkerSettingsError::Invalid {
                        what: "the session id",
                        value: value.clone(),
                        message: error.to_string(),
                    }
                })?),
                None => None,
            };
        let cache_dir = match flags
            .cache_dir
            .clone()
            .or_else(|| env_var(env::CACHE_DIR).map(PathBuf::from))
        {
            Some(dir) => absolute(dir, current_dir),
            None => match &section.cache_dir {
                Some(dir) => policy.resolve(dir),
                None => worker_home("the cache directory")?.join("cache"),
            },
        };
        let data_dir = match &section.data_dir {
            Some(dir) => policy.resolve(dir),
            None => worker_home("the data directory")?,
        };
        let work_dir = match &section.work_dir {
            Some(dir) => policy.resolve(dir),
            None => current_dir.to_owned(),
        };
        let pty_bridge_port =
            match flags.pty_bridge_port {
                Some(port) => Some(port),
                None => match env_var(env::PTY_BRIDGE_PORT) {
                    Some(value) => Some(value.trim().parse::<u16>().map_err(|_| {
                        WorkerSettingsError::Invalid {
                            what: "DEVIN_PTY_BRIDGE_PORT",
                            value,
                            message: "not a port number".into(),
                        }
                    })?),
                    None => section.pty_bridge_port,
                },
            };
        let chrome_path = env_var(env::CHROME_PATH)
            .map(PathBuf::from)
            .or_else(|| section.chrome_path.clone());
        let poll_secs = flags
            .poll_interval_secs
            .unwrap_or(section.poll_interval_secs);
        if poll_secs == 0 {
            return Err(WorkerSettingsError::Invalid {
                what: "--poll-interval-secs",
                value: "0".into(),
                message: "must be at least 1".into(),
            });
        }
        let actual = machine_platform();
        let platform = match &section.platform {
            Some(configured) if configured != actual => {
                return Err(WorkerSettingsError::PlatformMismatch {
                    configured: configured.clone(),
                    actual: actual.to_owned(),
                })
            }
            _ => actual.to_owned(),
        };
        let binary_suffix = machine_suffix().ok_or(WorkerSettingsError::UnsupportedMachine {
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
        })?;
        let system_env = SYSTEM_ENV
            .iter()
            .filter_map(|name| env(name).map(|value| ((*name).to_owned(), value)))
            .collect();
        Ok(Self {
            token,
            api: BaseUrl::parse("the fleet API URL", &api_url)?,
            static_base: BaseUrl::parse("the static base URL", &static_base_url)?,
            gateway_fallback,
            remote_sha,
            outpost: flags.outpost.clone().or_else(|| section.outpost.clone()),
            session,
            once: flags.once,
            acceptor_id,
            work_dir,
            data_dir,
            cache_dir,
            max_sessions: section.max_sessions,
            claim_spread: Duration::from_millis(section.claim_spread_ms),
            platform,
            binary_suffix: binary_suffix.to_owned(),
            poll_interval: Duration::from_secs(poll_secs),
            watch_idle_timeout: Duration::from_secs(section.watch_idle_timeout_secs),
            request_timeout: Duration::from_millis(section.request_timeout_ms),
            max_response_bytes: section.max_response_bytes,
            max_event_bytes: section.max_event_bytes,
            remote_kill_grace: Duration::from_millis(section.remote_kill_grace_ms),
            exit_confirm_reads: section.exit_confirm_reads,
            exit_confirm_interval: Duration::from_millis(section.exit_confirm_interval_ms),
            shutdown_grace: Duration::from_millis(section.shutdown_grace_ms),
            chrome_path,
            desktop: section.desktop,
            pty_bridge_port,
            network_enforcement: section.network_enforcement,
            system_env,
        })
    }
}

fn absolute(path: PathBuf, current_dir: &Path) -> PathBuf {
    if path.is_absolute() {
        devin_bridge_policy::normalize(&path)
    } else {
        devin_bridge_policy::normalize(&current_dir.join(path))
    }
}

/// Reads a token file that only its owner can read.
fn read_token_file(path: &Path) -> Result<Secret, WorkerSettingsError> {
    let error = |message: String| WorkerSettingsError::TokenFile {
        path: path.to_owned(),
        message,
    };
    let metadata = std::fs::metadata(path).map_err(|e| error(e.to_string()))?;
    if !metadata.is_file() {
        return Err(error("not a regular file".into()));
    }
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(error(format!(
            "mode {mode:o} lets others read it; chmod 600 it"
        )));
    }
    if metadata.uid() != nix::unistd::geteuid().as_raw() {
        return Err(error("belongs to another user".into()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
    let token = text.trim();
    if token.is_empty() || token.contains(char::is_whitespace) {
        return Err(error("must hold exactly one token".into()));
    }
    Ok(Secret::new(token.to_owned()))
}

/// A gateway URL the remote may be pointed at: `wss`/`https`, or `ws`/`http` to loopback.
pub(crate) fn check_gateway_url(url: &str) -> Result<(), WorkerSettingsError> {
    let invalid = |message: &str| WorkerSettingsError::Invalid {
        what: "the gateway URL",
        value: url.to_owned(),
        message: message.to_owned(),
    };
    let uri: hyper::Uri = url.parse().map_err(|_| invalid("not an absolute URL"))?;
    let scheme = uri
        .scheme_str()
        .ok_or_else(|| invalid("not an absolute URL"))?;
    let host = uri.host().unwrap_or_default();
    if host.is_empty()
        || uri
            .authority()
            .is_some_and(|authority| authority.as_str().contains('@'))
    {
        return Err(invalid("no host, or credentials in the URL"));
    }
    let loopback = super::fleet::url::is_loopback_host(host);
    match scheme.to_ascii_lowercase().as_str() {
        "wss" | "https" => Ok(()),
        "ws" | "http" if loopback => Ok(()),
        "ws" | "http" => Err(invalid("must be wss or https (plain only to loopback)")),
        _ => Err(invalid("unknown scheme")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devin_bridge_policy::Mode;

    fn policy(extra: &str) -> OutpostPolicy {
        let text = format!("mode = \"outpost\"\n[outpost]\n{extra}");
        OutpostPolicy::parse(&text, Path::new("test.toml"), Path::new("/etc/db")).expect("policy")
    }

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn the_builtin_policy_is_the_shipped_outpost_file_with_the_documented_defaults() {
        let policy = builtin_policy().expect("built-in");
        assert_eq!(policy.mode, Mode::Outpost);
        let settings = WorkerSettings::resolve(
            &policy,
            &Overrides::default(),
            env_of(&[("HOME", "/home/w"), (env::TOKEN, "t")]),
            Path::new("/srv/work"),
        )
        .expect("settings");
        assert_eq!(settings.api.as_str(), "https://api.devin.ai");
        assert_eq!(settings.poll_interval, Duration::from_secs(5));
        assert_eq!(
            settings.cache_dir,
            PathBuf::from("/home/w/.devin/worker/cache")
        );
        assert_eq!(settings.data_dir, PathBuf::from("/home/w/.devin/worker"));
        assert_eq!(settings.work_dir, PathBuf::from("/srv/work"));
    }

    #[test]
    fn flags_win_over_the_environment_which_wins_over_the_policy() {
        let policy = policy("api_url = \"https://policy.example\"\ncache_dir = \"cache\"\nremote_binary_sha = \"aaaaaaa\"");
        let env = env_of(&[
            ("HOME", "/h"),
            (env::TOKEN, "from-env"),
            (env::API_URL, "https://env.example"),
            (env::CACHE_DIR, "/env/cache"),
            (env::REMOTE_SHA, "bbbbbbb"),
        ]);
        let from_env =
            WorkerSettings::resolve(&policy, &Overrides::default(), &env, Path::new("/cwd"))
                .expect("settings");
        assert_eq!(from_env.api.as_str(), "https://env.example");
        assert_eq!(from_env.cache_dir, PathBuf::from("/env/cache"));
        assert_eq!(
            from_env.remote_sha.as_ref().map(Commit::as_str),
            Some("bbbbbbb")
        );
        assert_eq!(from_env.token.expose(), "from-env");
        let flags = Overrides {
            token: Some("from-flag".into()),
            api_url: Some("https://flag.example".into()),
            cache_dir: Some("rel".into()),
            remote_binary_sha: Some("ccccccc".into()),
            ..Overrides::default()
        };
        let from_flags =
            WorkerSettings::resolve(&policy, &flags, &env, Path::new("/cwd")).expect("settings");
        assert_eq!(from_flags.api.as_str(), "https://flag.example");
        assert_eq!(from_flags.cache_dir, PathBuf::from("/cwd/rel"));
        assert_eq!(from_flags.token.expose(), "from-flag");
        assert_eq!(
            from_flags.remote_sha.as_ref().map(Commit::as_str),
            Some("ccccccc")
        );
        let from_policy = WorkerSettings::resolve(
            &policy,
            &Overrides::default(),
            env_of(&[("HOME", "/h"), (env::TOKEN, "t")]),
            Path::new("/cwd"),
        )
        .expect("settings");
        assert_eq!(from_policy.api.as_str(), "https://policy.example");
        assert_eq!(from_policy.cache_dir, PathBuf::from("/etc/db/cache"));
    }

    #[test]
    fn no_token_is_one_line_naming_the_flag_the_variable_and_the_policy_field() {
        let error = WorkerSettings::resolve(
            &policy(""),
            &Overrides::default(),
            env_of(&[("HOME", "/h")]),
            Path::new("/"),
        )
        .expect_err("no token");
        let text = error.to_string();
        assert!(!text.contains('\n'));
        for needle in [
            "--token",
            "DEVIN_OUTPOSTS_TOKEN",
            "token_file",
            "Devin CLI login",
        ] {
            assert!(text.contains(needle), "{text}");
        }
    }

    #[test]
    fn a_token_file_readable_by_others_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("token");
        std::fs::write(&file, "secret-token\n").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let policy = policy(&format!("token_file = {:?}", file.display().to_string()));
        let env = env_of(&[("HOME", "/h")]);
        let error = WorkerSettings::resolve(&policy, &Overrides::default(), &env, Path::new("/"))
            .expect_err("loose file");
        assert!(error.to_string().contains("chmod 600"), "{error}");
        assert!(!error.to_string().contains("secret-token"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let settings =
            WorkerSettings::resolve(&policy, &Overrides::default(), &env, Path::new("/"))
                .expect("private file");
        assert_eq!(settings.token.expose(), "secret-token");
    }

    #[test]
    fn a_plain_http_api_off_loopback_is_refused_before_any_token_is_sent() {
        let env = env_of(&[
            ("HOME", "/h"),
            (env::TOKEN, "t"),
            (env::API_URL, "http://api.devin.ai"),
        ]);
        let error =
            WorkerSettings::resolve(&policy(""), &Overrides::default(), env, Path::new("/"))
                .expect_err("insecure");
        assert!(matches!(
            error,
            WorkerSettingsError::Url(BaseUrlError::Insecure { .. })
        ));
    }

    #[test]
    fn a_policy_for_another_platform_is_refused() {
        let other = if machine_platform() == "windows" {
            "linux"
        } else {
            "windows"
        };
        let env = env_of(&[("HOME", "/h"), (env::TOKEN, "t")]);
        let error = WorkerSettings::resolve(
            &policy(&format!("platform = {other:?}")),
            &Overrides::default(),
            env,
            Path::new("/"),
        )
        .expect_err("wrong platform");
        assert!(matches!(
            error,
            WorkerSettingsError::PlatformMismatch { .. }
        ));
    }

    #[test]
    fn gateway_urls_must_be_secure_off_loopback() {
        assert!(check_gateway_url("wss://outpost-gateway.devin.ai").is_ok());
        assert!(check_gateway_url("http://127.0.0.1:9000/gateway").is_ok());
        assert!(check_gateway_url("ws://gateway.example").is_err());
        assert!(check_gateway_url("wss://user@gateway.example").is_err());
        assert!(check_gateway_url("gateway.example").is_err());
    }
}
