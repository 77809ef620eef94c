//! `devin-bridge verify-isolation`: prove that this environment cannot reach Anthropic and
//! carries no credentials.
//!
//! Checks, one `PASS|FAIL <check>: <detail>` line each (`SKIP` for a check that was not asked
//! for), exit status non-zero on any `FAIL`:
//! - `env`: no sensitive variable (`ANTHROPIC_*`, `CLAUDE_CODE_OAUTH_TOKEN`, Bedrock/Vertex
//!   routing, `AWS_*`, `GOOGLE_*`, `GCLOUD_*`, `CLOUDSDK_*`, `AZURE_*`, `CLOUD_ML_REGION`...),
//!   unless named with `--allow-env`. Names are printed, values never.
//! - `docker_socket`: no `/var/run/docker.sock`, no `/run/docker.sock`, no `DOCKER_HOST`.
//! - `non_root`: the effective uid is not 0.
//! - `proxy`: a proxy is configured (`--proxy`, else `HTTPS_PROXY`, `https_proxy`,
//!   `HTTP_PROXY`, `http_proxy`) as `http://host:port`.
//! - `unreachable:<host>` for `api.anthropic.com` and `claude.ai` (or `--forbidden`): both a
//!   `CONNECT host:443` and a plain `GET http://host/` through the proxy are refused.
//! - `audit` (with `--audit PATH`): the guard's audit file gained a `deny` line for each of
//!   those hosts during the run, and `audit_permissions`: the file is not accessible to group
//!   or others.

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use super::client;

/// Destinations that must stay unreachable by default.
pub const DEFAULT_FORBIDDEN: &[&str] = &["api.anthropic.com", "claude.ai"];

/// Docker sockets that must not be visible.
pub const DOCKER_SOCKETS: &[&str] = &["/var/run/docker.sock", "/run/docker.sock"];

const SENSITIVE_PREFIXES: &[&str] = &[
    "ANTHROPIC_",
    "AWS_",
    "GOOGLE_",
    "GCLOUD_",
    "CLOUDSDK_",
    "AZURE_",
    "VERTEX_",
    "BEDROCK_",
];
const SENSITIVE_NAMES: &[&str] = &[
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_SKIP_BEDROCK_AUTH",
    "CLAUDE_CODE_SKIP_VERTEX_AUTH",
    "CLAUDE_CODE_API_KEY_HELPER_TTL_MS",
    "CLOUD_ML_REGION",
];

/// `devin-bridge verify-isolation`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct VerifyIsolationArgs {
    /// Proxy to probe through (default: HTTPS_PROXY, https_proxy, HTTP_PROXY, http_proxy).
    #[arg(long, value_name = "URL")]
    pub proxy: Option<String>,
    /// The guard's audit file: it must record the denials of this run.
    #[arg(long, value_name = "PATH")]
    pub audit: Option<PathBuf>,
    /// A destination that must be unreachable (repeatable; default api.anthropic.com and
    /// claude.ai).
    #[arg(long = "forbidden", value_name = "HOST")]
    pub forbidden: Vec<String>,
    /// An environment variable allowed although it matches a sensitive pattern (repeatable),
    /// e.g. ANTHROPIC_BASE_URL pointing at the local bridge.
    #[arg(long = "allow-env", value_name = "NAME")]
    pub allow_env: Vec<String>,
    /// Timeout of each probe, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub timeout_ms: u64,
    /// Also require that a direct TCP connection (no proxy) to port 443 of every forbidden
    /// destination fails, by resolution or by connection.
    #[arg(long)]
    pub direct: bool,
    /// An address (`host:port`) that must accept a TCP connection, e.g. the Devin-side guard
    /// (repeatable).
    #[arg(long = "reach", value_name = "HOST:PORT")]
    pub reach: Vec<String>,
    /// A path this identity must not be able to use: no read, no write, no connect
    /// (repeatable); e.g. the host's key file, compile cache or control socket, checked as
    /// the agent's uid.
    #[arg(long = "private", value_name = "PATH")]
    pub private: Vec<PathBuf>,
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The check holds.
    Pass,
    /// The check does not hold.
    Fail,
    /// The check was not asked for.
    Skip,
}

/// One printed line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// Check name, e.g. `env` or `unreachable:claude.ai`.
    pub name: String,
    /// Pass, fail or skip.
    pub outcome: ProbeOutcome,
    /// What was found.
    pub detail: String,
}

impl CheckResult {
    fn new(name: impl Into<String>, ok: bool, detail: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            outcome: if ok {
                ProbeOutcome::Pass
            } else {
                ProbeOutcome::Fail
            },
            detail: detail.into(),
        }
    }
}

impl fmt::Display for CheckResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = match self.outcome {
            ProbeOutcome::Pass => "PASS",
            ProbeOutcome::Fail => "FAIL",
            ProbeOutcome::Skip => "SKIP",
        };
        write!(f, "{word} {}: {}", self.name, self.detail)
    }
}

/// What the checks look at; [`Environment::current`] for the real process.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// Environment variables.
    pub vars: Vec<(String, String)>,
    /// Effective uid.
    pub euid: u32,
    /// Paths that must not exist (Docker sockets).
    pub sockets: Vec<PathBuf>,
}

impl Environment {
    /// This process.
    pub fn current() -> Self {
        Self {
            vars: std::env::vars_os()
                .map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.to_string_lossy().into_owned(),
                    )
                })
                .collect(),
            euid: nix::unistd::geteuid().as_raw(),
            sockets: DOCKER_SOCKETS.iter().map(PathBuf::from).collect(),
        }
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }
}

/// Names of sensitive variables present (non-empty) and not allowed.
pub fn sensitive_vars(vars: &[(String, String)], allow: &[String]) -> Vec<String> {
    let mut found: Vec<String> = vars
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, _)| k)
        .filter(|k| {
            let upper = k.to_ascii_uppercase();
            SENSITIVE_PREFIXES.iter().any(|p| upper.starts_with(p))
                || SENSITIVE_NAMES.contains(&upper.as_str())
        })
        .filter(|k| !allow.iter().any(|a| a == *k))
        .cloned()
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Parse `http://host:port[/]` into `host:port`.
pub fn proxy_authority(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("HTTP://"))
        .ok_or_else(|| format!("{url:?} is not an http:// proxy URL"))?;
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() || authority.contains(['/', '@', '?', '#']) {
        return Err(format!(
            "{url:?} must be http://host:port (no path, no credentials)"
        ));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0) => {
            Ok(authority.to_owned())
        }
        _ => Err(format!("{url:?} has no port")),
    }
}

/// Run every check.
pub async fn verify(args: &VerifyIsolationArgs, env: &Environment) -> Vec<CheckResult> {
    let mut out = vec![
        env_check(env, &args.allow_env),
        docker_socket_check(env),
        CheckResult::new(
            "non_root",
            env.euid != 0,
            format!("effective uid {}", env.euid),
        ),
    ];
    let forbidden: Vec<String> = if args.forbidden.is_empty() {
        DEFAULT_FORBIDDEN.iter().map(|s| s.to_string()).collect()
    } else {
        args.forbidden.clone()
    };
    let (proxy_check, proxy) = proxy_check(args.proxy.as_deref(), env);
    out.push(proxy_check);
    // The audit log's length before the probes: only what they add is read.
    let audit_start = args
        .audit
        .as_deref()
        .map(|p| std::fs::metadata(p).map(|m| m.len()));
    let timeout = Duration::from_millis(args.timeout_ms.max(1));
    for host in &forbidden {
        out.push(unreachable_check(proxy.as_deref(), host, timeout).await);
    }
    if args.direct {
        for host in &forbidden {
            out.push(check_no_direct_route(host, timeout).await);
        }
    }
    for address in &args.reach {
        out.push(check_reachable(address, timeout).await);
    }
    for path in &args.private {
        out.push(check_private(path));
    }
    match (&args.audit, audit_start) {
        (Some(path), Some(start)) => {
            out.extend(check_audit(path, start.ok(), &forbidden));
        }
        _ => out.push(CheckResult {
            name: "audit".into(),
            outcome: ProbeOutcome::Skip,
            detail: "no --audit PATH given".into(),
        }),
    }
    out
}

/// `env`: no sensitive variable (beyond those allowed) in the environment.
fn env_check(env: &Environment, allow: &[String]) -> CheckResult {
    let sensitive = sensitive_vars(&env.vars, allow);
    CheckResult::new(
        "env",
        sensitive.is_empty(),
        if sensitive.is_empty() {
            "no sensitive variable".to_owned()
        } else {
            format!("sensitive variables present: {}", sensitive.join(", "))
        },
    )
}

/// `docker_socket`: no Docker socket on disk and no `DOCKER_HOST`.
fn docker_socket_check(env: &Environment) -> CheckResult {
    let mut docker: Vec<String> = env
        .sockets
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .map(|p| p.display().to_string())
        .collect();
    if env.var("DOCKER_HOST").is_some() {
        docker.push("DOCKER_HOST".to_owned());
    }
    CheckResult::new(
        "docker_socket",
        docker.is_empty(),
        if docker.is_empty() {
            "no Docker socket".to_owned()
        } else {
            format!("present: {}", docker.join(", "))
        },
    )
}

/// `proxy`: the proxy to probe through (`--proxy`, else the environment's), and its
/// `host:port` when it is usable.
fn proxy_check(flag: Option<&str>, env: &Environment) -> (CheckResult, Option<String>) {
    let proxy_url = flag.map(str::to_owned).or_else(|| {
        ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"]
            .iter()
            .find_map(|n| env.var(n).map(str::to_owned))
    });
    match proxy_url.as_deref().map(proxy_authority) {
        None => (
            CheckResult::new(
                "proxy",
                false,
                "no proxy configured (--proxy or HTTPS_PROXY)",
            ),
            None,
        ),
        Some(Err(why)) => (CheckResult::new("proxy", false, why), None),
        Some(Ok(authority)) => (
            CheckResult::new("proxy", true, format!("http://{authority}")),
            Some(authority),
        ),
    }
}

/// `unreachable:<host>`: through the proxy, neither a CONNECT to `host:443` nor a plain GET
/// of `http://host/` succeeds.
async fn unreachable_check(proxy: Option<&str>, host: &str, timeout: Duration) -> CheckResult {
    let name = format!("unreachable:{host}");
    let Some(proxy) = proxy else {
        return CheckResult::new(name, false, "no usable proxy to probe through");
    };
    let connect = probe(
        proxy,
        format!("CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n"),
        timeout,
    )
    .await;
    let plain = probe(
        proxy,
        format!("GET http://{host}/ HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        timeout,
    )
    .await;
    let ok = matches!((&connect, &plain), (Ok(a), Ok(b)) if !is_success(*a) && !is_success(*b));
    let show = |r: &Result<u16, String>| match r {
        Ok(code) if is_success(*code) => format!("{code} (REACHABLE)"),
        Ok(code) => format!("{code}"),
        Err(e) => format!("error: {e}"),
    };
    CheckResult::new(
        name,
        ok,
        format!("CONNECT {} / plain GET {}", show(&connect), show(&plain)),
    )
}

/// `no_direct_route:<host>`: a TCP connection to `host:443` without the proxy must fail.
async fn check_no_direct_route(host: &str, timeout: Duration) -> CheckResult {
    let name = format!("no_direct_route:{host}");
    let attempt = tokio::net::TcpStream::connect((host, 443));
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(_)) => CheckResult::new(name, false, "a direct connection to port 443 succeeded"),
        Ok(Err(error)) => CheckResult::new(name, true, format!("refused: {error}")),
        Err(_) => CheckResult::new(name, true, "no answer (timed out)"),
    }
}

/// `reachable:<host:port>`: a TCP connection must succeed.
async fn check_reachable(address: &str, timeout: Duration) -> CheckResult {
    let name = format!("reachable:{address}");
    let attempt = tokio::net::TcpStream::connect(address);
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(_)) => CheckResult::new(name, true, "connected"),
        Ok(Err(error)) => CheckResult::new(name, false, format!("cannot connect: {error}")),
        Err(_) => CheckResult::new(name, false, "timed out"),
    }
}

/// `private:<path>`: this identity can neither read, write, list nor connect to `path`.
fn check_private(path: &Path) -> CheckResult {
    let name = format!("private:{}", path.display());
    let mut reached = Vec::new();
    if std::fs::File::open(path).is_ok_and(|mut file| {
        let mut byte = [0u8; 1];
        std::io::Read::read(&mut file, &mut byte).is_ok()
    }) {
        reached.push("read");
    }
    if std::fs::read_dir(path).is_ok() {
        reached.push("list");
    }
    if std::fs::OpenOptions::new().append(true).open(path).is_ok() {
        reached.push("write");
    }
    let planted = path.join(format!(".verify-isolation-{}", std::process::id()));
    if std::fs::write(&planted, b"").is_ok() {
        let _ = std::fs::remove_file(&planted);
        reached.push("create files in");
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        reached.push("connect to");
    }
    if reached.is_empty() {
        CheckResult::new(name, true, "no access")
    } else {
        CheckResult::new(
            name,
            false,
            format!("this identity can {}", reached.join(", ")),
        )
    }
}

fn is_success(code: u16) -> bool {
    (200..300).contains(&code)
}

/// Send one raw request to the proxy and return the status it answers.
async fn probe(proxy: &str, request: String, timeout: Duration) -> Result<u16, String> {
    let attempt = client::send_raw(proxy, request.as_bytes());
    match tokio::time::timeout(timeout, attempt).await {
        Err(_) => Err("timed out".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok((_stream, reply))) => Ok(reply.status),
    }
}

fn check_audit(path: &Path, start: Option<u64>, forbidden: &[String]) -> Vec<CheckResult> {
    let mut out = Vec::new();
    match std::fs::metadata(path) {
        Ok(meta) => {
            let mode = meta.permissions().mode() & 0o777;
            out.push(CheckResult::new(
                "audit_permissions",
                mode & 0o077 == 0,
                format!("mode {mode:o}"),
            ));
        }
        Err(e) => {
            out.push(CheckResult::new(
                "audit",
                false,
                format!("cannot read {}: {e}", path.display()),
            ));
            return out;
        }
    }
    let text = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            out.push(CheckResult::new(
                "audit",
                false,
                format!("cannot read {}: {e}", path.display()),
            ));
            return out;
        }
    };
    let from = usize::try_from(start.unwrap_or(0))
        .unwrap_or(0)
        .min(text.len());
    let new = String::from_utf8_lossy(text.get(from..).unwrap_or_default()).into_owned();
    let mut missing = Vec::new();
    for host in forbidden {
        let recorded = new.lines().any(|line| {
            serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| {
                v["decision"] == "deny"
                    && v["host"]
                        .as_str()
                        .is_some_and(|h| h.eq_ignore_ascii_case(host))
            })
        });
        if !recorded {
            missing.push(host.as_str());
        }
    }
    out.push(CheckResult::new(
        "audit",
        missing.is_empty(),
        if missing.is_empty() {
            format!("denials recorded for {}", forbidden.join(", "))
        } else {
            format!("no deny line for {}", missing.join(", "))
        },
    ));
    out
}

/// Run the checks on this process, print one line each, fail on any failure.
pub async fn run(args: VerifyIsolationArgs) -> anyhow::Result<ExitCode> {
    let results = verify(&args, &Environment::current()).await;
    let mut failed = false;
    for result in &results {
        println!("{result}");
        failed |= result.outcome == ProbeOutcome::Fail;
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensitive_variables() {
        let vars: Vec<(String, String)> = [
            ("PATH", "/bin"),
            ("ANTHROPIC_API_KEY", "sk-x"),
            ("ANTHROPIC_BASE_URL", "http://bridge:8080"),
            ("CLAUDE_CODE_OAUTH_TOKEN", "t"),
            ("CLAUDE_CODE_USE_BEDROCK", "1"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/x"),
            ("EMPTY_IS_FINE", ""),
            ("ANTHROPIC_MODEL", ""),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let found = sensitive_vars(&vars, &["ANTHROPIC_BASE_URL".to_owned()]);
        assert_eq!(
            found,
            vec![
                "ANTHROPIC_API_KEY",
                "AWS_SECRET_ACCESS_KEY",
                "CLAUDE_CODE_OAUTH_TOKEN",
                "CLAUDE_CODE_USE_BEDROCK",
                "GOOGLE_APPLICATION_CREDENTIALS"
            ]
        );
    }

    #[test]
    fn proxy_urls() {
        assert_eq!(
            proxy_authority("http://network-guard:8080").unwrap(),
            "network-guard:8080"
        );
        assert_eq!(
            proxy_authority("http://127.0.0.1:9/").unwrap(),
            "127.0.0.1:9"
        );
        assert!(proxy_authority("https://g:1").is_err());
        assert!(proxy_authority("http://u:p@g:1").is_err());
        assert!(proxy_authority("http://g").is_err());
        assert!(proxy_authority("http://g:0").is_err());
    }

    #[test]
    fn display_format() {
        let r = CheckResult::new("non_root", false, "effective uid 0");
        assert_eq!(r.to_string(), "FAIL non_root: effective uid 0");
    }

    #[test]
    fn a_private_path_passes_only_when_nothing_can_be_done_with_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = check_private(&dir.path().join("missing"));
        assert_eq!(missing.outcome, ProbeOutcome::Pass, "{missing}");
        let file = dir.path().join("key");
        std::fs::write(&file, "secret").expect("write");
        let readable = check_private(&file);
        assert_eq!(readable.outcome, ProbeOutcome::Fail, "{readable}");
        assert!(readable.detail.contains("read"), "{readable}");
        let listable = check_private(dir.path());
        assert_eq!(listable.outcome, ProbeOutcome::Fail, "{listable}");
        assert!(listable.detail.contains("create files in"), "{listable}");
    }

    #[tokio::test]
    async fn reach_fails_on_a_closed_port_and_passes_on_a_listener() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let open = listener.local_addr().expect("addr").to_string();
        let reached = check_reachable(&open, Duration::from_secs(5)).await;
        assert_eq!(reached.outcome, ProbeOutcome::Pass, "{reached}");
        drop(listener);
        let closed = check_reachable(&open, Duration::from_secs(5)).await;
        assert_eq!(closed.outcome, ProbeOutcome::Fail, "{closed}");
    }
}
