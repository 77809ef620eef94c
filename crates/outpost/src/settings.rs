//! The worker's settings: flags win over environment variables, which win over the policy's
//! `[outpost]` section, which has the documented defaults.
//!
//! That precedence is spelt once, by `Setting`; a blank environment variable counts as unset.
//! Each setting that is more than a copy of the policy's value is one named step of
//! `Sources`, and `WorkerSettings::resolve` runs the steps in a fixed order, so that of
//! several faults the same one is reported first.

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
        let sources = Sources {
            policy,
            section: &policy.outpost,
            flags,
            env: &env,
            current_dir,
        };
        let section = sources.section;
        // The steps run in this order, so that of several faults the same one is reported.
        let token = sources.token()?;
        let (api_url, static_base_url) = sources.base_urls();
        let gateway_fallback = sources.gateway_fallback()?;
        let remote_sha = sources.remote_sha()?;
        let acceptor_id = sources.acceptor_id()?;
        let session = flags
            .session
            .clone()
            .map(|value| parse_as("the session id", value))
            .transpose()?;
        let (cache_dir, data_dir, work_dir) = sources.directories()?;
        let pty_bridge_port = sources.pty_bridge_port()?;
        let chrome_path = Setting::no_flag()
            .or_env(sources.var(env::CHROME_PATH).map(PathBuf::from))
            .or_policy(|| section.chrome_path.clone());
        let poll_interval = poll_interval(flags, section)?;
        let (platform, binary_suffix) = served_machine(section)?;
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
            binary_suffix,
            poll_interval,
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
            system_env: sources.system_env(),
        })
    }
}

/// One setting in the worker's precedence: its flag, else its environment variable, else the
/// policy. A later source is consulted only while no earlier one has set the value.
#[derive(Debug)]
struct Setting<T>(Option<T>);

impl<T> Setting<T> {
    /// Starts from the flag's value (`None`: the flag was not given).
    fn flag(value: Option<T>) -> Self {
        Self(value)
    }

    /// Starts a setting that has no flag.
    fn no_flag() -> Self {
        Self(None)
    }

    /// Unless set already: the environment variable's value (`None`: unset or blank).
    fn or_env(self, value: Option<T>) -> Self {
        Self(self.0.or(value))
    }

    /// Unless set already: the environment variable's text (`None`: unset or blank), read
    /// by `parse` only when it is the value used.
    fn try_or_env(
        self,
        text: Option<String>,
        parse: impl FnOnce(String) -> Result<T, WorkerSettingsError>,
    ) -> Result<Self, WorkerSettingsError> {
        match self.0 {
            Some(value) => Ok(Self(Some(value))),
            None => text.map(parse).transpose().map(Self),
        }
    }

    /// The flag's or the environment's value, converted (the policy's is not).
    fn map<U>(self, convert: impl FnOnce(T) -> U) -> Setting<U> {
        Setting(self.0.map(convert))
    }

    /// Unless set already: the policy's value, which may be unset; the setting's final value.
    fn or_policy(self, value: impl FnOnce() -> Option<T>) -> Option<T> {
        self.0.or_else(value)
    }

    /// Unless set already: the policy's value, which always is (a default stands in for an
    /// absent key); the setting's final value.
    fn or_policy_value(self, value: impl FnOnce() -> T) -> T {
        self.0.unwrap_or_else(value)
    }

    /// The flag's or the environment's value, for a setting whose policy side is not a plain
    /// value (a file to read, a default to compute).
    fn given(self) -> Option<T> {
        self.0
    }
}

/// What a worker's settings are resolved from.
struct Sources<'a> {
    policy: &'a OutpostPolicy,
    section: &'a OutpostSection,
    flags: &'a Overrides,
    env: &'a dyn Fn(&str) -> Option<String>,
    current_dir: &'a Path,
}

impl Sources<'_> {
    /// An environment variable's value; a blank one counts as unset.
    fn var(&self, name: &str) -> Option<String> {
        (self.env)(name).filter(|value| !value.trim().is_empty())
    }

    /// `~/.devin/worker`, the default home of `what`.
    fn worker_home(&self, what: &'static str) -> Result<PathBuf, WorkerSettingsError> {
        self.var("HOME")
            .map(|home| PathBuf::from(home).join(".devin/worker"))
            .ok_or(WorkerSettingsError::NoHome(what))
    }

    /// The fleet API token: the flag's or the variable's (trimmed), else the policy's file.
    fn token(&self) -> Result<Secret, WorkerSettingsError> {
        let given = Setting::flag(self.flags.token.clone())
            .or_env(self.var(env::TOKEN))
            .given();
        match (given, &self.section.token_file) {
            (Some(token), _) => Ok(Secret::new(token.trim().to_owned())),
            (None, Some(file)) => read_token_file(&self.policy.resolve(file)),
            (None, None) => Err(WorkerSettingsError::NoToken),
        }
    }

    /// The fleet API's and the published binaries' base URLs, not yet parsed.
    fn base_urls(&self) -> (String, String) {
        let api = Setting::flag(self.flags.api_url.clone())
            .or_env(self.var(env::API_URL))
            .or_policy_value(|| self.section.api_url.clone());
        let static_base = Setting::flag(self.flags.static_base_url.clone())
            .or_env(self.var(env::STATIC_BASE_URL))
            .or_policy_value(|| self.section.static_base_url.clone());
        (api, static_base)
    }

    /// The gateway used when a claim answer carries none, checked.
    fn gateway_fallback(&self) -> Result<Option<String>, WorkerSettingsError> {
        let gateway = Setting::flag(self.flags.gateway_url.clone())
            .or_env(self.var(env::GATEWAY_URL))
            .or_policy(|| self.section.gateway_url.clone());
        if let Some(gateway) = &gateway {
            check_gateway_url(gateway)?;
        }
        Ok(gateway)
    }

    /// The `devin-remote` commit used when a session pins none.
    fn remote_sha(&self) -> Result<Option<Commit>, WorkerSettingsError> {
        Setting::flag(self.flags.remote_binary_sha.clone())
            .or_env(self.var(env::REMOTE_SHA))
            .or_policy(|| self.section.remote_binary_sha.clone())
            .map(|value| parse_as("the devin-remote commit", value))
            .transpose()
    }

    /// An explicit acceptor id (the policy has none: the persisted one is the default).
    fn acceptor_id(&self) -> Result<Option<AcceptorId>, WorkerSettingsError> {
        Setting::flag(self.flags.acceptor_id.clone())
            .or_env(self.var(env::ACCEPTOR_ID))
            .given()
            .map(|value| parse_as("the acceptor id", value))
            .transpose()
    }

    /// The cache, data and work directories, in that order. A flag's or variable's path is
    /// taken against the current directory, a policy's against the policy's origin.
    fn directories(&self) -> Result<(PathBuf, PathBuf, PathBuf), WorkerSettingsError> {
        let section = self.section;
        let cache_dir = Setting::flag(self.flags.cache_dir.clone())
            .or_env(self.var(env::CACHE_DIR).map(PathBuf::from))
            .map(|dir| absolute(dir, self.current_dir))
            .or_policy(|| {
                section
                    .cache_dir
                    .as_ref()
                    .map(|dir| self.policy.resolve(dir))
            });
        let cache_dir = match cache_dir {
            Some(dir) => dir,
            None => self.worker_home("the cache directory")?.join("cache"),
        };
        let data_dir = match &section.data_dir {
            Some(dir) => self.policy.resolve(dir),
            None => self.worker_home("the data directory")?,
        };
        let work_dir = match &section.work_dir {
            Some(dir) => self.policy.resolve(dir),
            None => self.current_dir.to_owned(),
        };
        Ok((cache_dir, data_dir, work_dir))
    }

    /// A fixed PTY bridge port; the variable's text is read only when no flag is given.
    fn pty_bridge_port(&self) -> Result<Option<u16>, WorkerSettingsError> {
        Ok(Setting::flag(self.flags.pty_bridge_port)
            .try_or_env(self.var(env::PTY_BRIDGE_PORT), |value| {
                value
                    .trim()
                    .parse::<u16>()
                    .map_err(|_| WorkerSettingsError::Invalid {
                        what: "DEVIN_PTY_BRIDGE_PORT",
                        value,
                        message: "not a port number".into(),
                    })
            })?
            .or_policy(|| self.section.pty_bridge_port))
    }

    /// The worker's own variables a remote may inherit, as set (blank ones too).
    fn system_env(&self) -> Vec<(String, String)> {
        SYSTEM_ENV
            .iter()
            .filter_map(|name| (self.env)(name).map(|value| ((*name).to_owned(), value)))
            .collect()
    }
}

/// `value` read as a `T`; a refusal names `what`.
fn parse_as<T>(what: &'static str, value: String) -> Result<T, WorkerSettingsError>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    value
        .parse::<T>()
        .map_err(|error| WorkerSettingsError::Invalid {
            what,
            message: error.to_string(),
            value,
        })
}

/// The polling interval: the flag's, else the policy's; never zero.
fn poll_interval(
    flags: &Overrides,
    section: &OutpostSection,
) -> Result<Duration, WorkerSettingsError> {
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
    Ok(Duration::from_secs(poll_secs))
}

/// This machine's platform and binary suffix; a policy naming another platform is refused.
fn served_machine(section: &OutpostSection) -> Result<(String, String), WorkerSettingsError> {
    let actual = machine_platform();
    if let Some(configured) = section.platform.as_ref().filter(|c| *c != actual) {
        return Err(WorkerSettingsError::PlatformMismatch {
            configured: configured.clone(),
            actual: actual.to_owned(),
        });
    }
    let binary_suffix = machine_suffix().ok_or(WorkerSettingsError::UnsupportedMachine {
        os: std::env::consts::OS,
        arch: std::env::consts::ARCH,
    })?;
    Ok((actual.to_owned(), binary_suffix.to_owned()))
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
    fn the_port_variable_is_read_only_when_no_flag_gives_a_port() {
        let policy = policy("pty_bridge_port = 7000");
        let env = env_of(&[
            ("HOME", "/h"),
            (env::TOKEN, "t"),
            (env::PTY_BRIDGE_PORT, "not-a-port"),
        ]);
        let flags = Overrides {
            pty_bridge_port: Some(9000),
            ..Overrides::default()
        };
        let from_flag =
            WorkerSettings::resolve(&policy, &flags, &env, Path::new("/")).expect("settings");
        assert_eq!(from_flag.pty_bridge_port, Some(9000));
        let error = WorkerSettings::resolve(&policy, &Overrides::default(), &env, Path::new("/"))
            .expect_err("unreadable variable");
        assert!(
            error.to_string().contains("DEVIN_PTY_BRIDGE_PORT"),
            "{error}"
        );
        let from_policy = WorkerSettings::resolve(
            &policy,
            &Overrides::default(),
            env_of(&[
                ("HOME", "/h"),
                (env::TOKEN, "t"),
                (env::PTY_BRIDGE_PORT, " "),
            ]),
            Path::new("/"),
        )
        .expect("settings");
        assert_eq!(from_policy.pty_bridge_port, Some(7000));
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
