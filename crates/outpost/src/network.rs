//! A session's network policy, enforced by its own egress guard.
//!
//! When `spec.network_policy.enabled`, the session gets a private instance of the egress guard
//! (`devin_bridge_guard`) whose allowlist is the policy's hostname patterns and IPv4/IPv6 ranges, with
//! an audit file of its own (`<data>/audit/<session>.jsonl`, one line per decision).
//!
//! How much that enforces depends on where the remote runs:
//! - **In a network namespace** (the worker runs as root and `ip` and `nsenter` exist): the
//!   namespace has only its loopback interface, and the guard's listening socket is created
//!   inside it (a short-lived thread enters the namespace, binds, and ends) while the guard dials
//!   from the host's namespace. The remote, and everything its agent starts, can reach nothing
//!   but that guard: the policy is enforced.
//! - **Without one** (`proxy`): the remote gets the guard as `HTTPS_PROXY`/`HTTP_PROXY`/
//!   `ALL_PROXY`. Programs that honour proxy variables are held to the policy; a program that
//!   opens sockets itself is not. This is advisory, and the worker says so in its log.

use std::path::{Path, PathBuf};

use crate::policy::NetworkEnforcement;
use devin_bridge_guard::{Guard, GuardPolicy, HttpPolicy, RunningGuard};

use super::fleet::{AllowRule, NetworkPolicy, SessionId};

/// Why a session's network cannot be set up as its policy asks.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NetworkError {
    #[error("network policy entry {0:?} is not a hostname this guard can match (exact names and `*.suffix` only)")]
    UnsupportedPattern(String),
    #[error("network policy entry {0:?} is not an address or CIDR of its family")]
    BadRange(String),
    #[error("the policy requires a network namespace, and this worker cannot create one (it needs root, `ip` and `nsenter`)")]
    NamespaceUnavailable,
    #[error("network namespace {name}: {message}")]
    Namespace { name: String, message: String },
    #[error("the session's egress guard: {0}")]
    Guard(#[from] devin_bridge_guard::GuardError),
}

/// The guard policy for a session's network policy. The policy names destinations, not
/// ports, so every port of an allowed destination is open; the session's gateway is always
/// allowed (the remote must reach it to serve the session at all).
pub(crate) fn guard_policy(
    policy: &NetworkPolicy,
    gateway: &str,
    audit: PathBuf,
) -> Result<GuardPolicy, NetworkError> {
    let mut allow = Vec::new();
    let mut ranges = Vec::new();
    for rule in &policy.allow {
        match rule {
            AllowRule::Hostname(pattern) => allow.push(hostname_pattern(pattern)?),
            AllowRule::Ipv4(range) => ranges.push(ip_range(range, true)?),
            AllowRule::Ipv6(range) => ranges.push(ip_range(range, false)?),
        }
    }
    match gateway_host(gateway) {
        Some(GatewayHost::Ip(ip)) => {
            let prefix = if ip.is_ipv4() { 32 } else { 128 };
            let range = format!("{ip}/{prefix}");
            if !ranges.contains(&range) {
                ranges.push(range);
            }
        }
        Some(GatewayHost::Name(name)) => {
            if !allow.contains(&name) {
                allow.push(name);
            }
        }
        None => return Err(NetworkError::UnsupportedPattern(gateway.to_owned())),
    }
    Ok(GuardPolicy {
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        audit: Some(audit),
        allow,
        ports: (1..=u16::MAX).collect(),
        allow_ip_literals: ranges,
        http: HttpPolicy {
            enabled: true,
            ports: (1..=u16::MAX).collect(),
        },
        ..GuardPolicy::default()
    })
}

enum GatewayHost {
    Ip(std::net::IpAddr),
    Name(String),
}

fn gateway_host(gateway: &str) -> Option<GatewayHost> {
    let uri: hyper::Uri = gateway.parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => Some(GatewayHost::Ip(ip)),
        Err(_) => Some(GatewayHost::Name(host.to_ascii_lowercase())),
    }
}

fn hostname_pattern(pattern: &str) -> Result<String, NetworkError> {
    let unsupported = || NetworkError::UnsupportedPattern(pattern.to_owned());
    let trimmed = pattern.trim().trim_end_matches('.').to_ascii_lowercase();
    let bare = trimmed.strip_prefix("*.").unwrap_or(&trimmed);
    if bare.is_empty()
        || bare.len() > 253
        || !bare.contains('.')
        || !bare.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
    {
        return Err(unsupported());
    }
    Ok(trimmed)
}

fn ip_range(range: &str, v4: bool) -> Result<String, NetworkError> {
    let bad = || NetworkError::BadRange(range.to_owned());
    let (address, prefix) = match range.trim().split_once('/') {
        Some((address, prefix)) => (address, Some(prefix)),
        None => (range.trim(), None),
    };
    let max = if v4 { 32 } else { 128 };
    let parsed: std::net::IpAddr = address.parse().map_err(|_| bad())?;
    if parsed.is_ipv4() != v4 {
        return Err(bad());
    }
    let prefix = match prefix {
        Some(prefix) => prefix
            .parse::<u8>()
            .ok()
            .filter(|p| *p <= max)
            .ok_or_else(bad)?,
        None => max,
    };
    Ok(format!("{parsed}/{prefix}"))
}

/// A running session network: its guard, and its namespace when there is one.
pub(crate) struct SessionNetwork {
    guard: RunningGuard,
    namespace: Option<Namespace>,
    proxy: String,
}

impl SessionNetwork {
    /// Starts the guard (inside a namespace when `enforcement` allows and the worker can).
    pub(crate) async fn start(
        session: &SessionId,
        policy: &NetworkPolicy,
        gateway: &str,
        enforcement: NetworkEnforcement,
        namespace_prefix: &str,
        audit_dir: &Path,
    ) -> Result<Self, NetworkError> {
        let audit = audit_dir.join(format!("{session}.jsonl"));
        let guard_policy = guard_policy(policy, gateway, audit)?;
        let use_namespace = match enforcement {
            NetworkEnforcement::Proxy => false,
            NetworkEnforcement::Auto => Namespace::available(),
            NetworkEnforcement::Namespace => {
                if !Namespace::available() {
                    return Err(NetworkError::NamespaceUnavailable);
                }
                true
            }
        };
        if use_namespace {
            let namespace = Namespace::create(&format!("{namespace_prefix}{session}")).await?;
            let listener = match namespace.bind_loopback().await {
                Ok(listener) => listener,
                Err(error) => {
                    namespace.delete().await;
                    return Err(error);
                }
            };
            let guard = match Guard::from_listener(guard_policy, listener) {
                Ok(guard) => guard.run_in_background(),
                Err(error) => {
                    namespace.delete().await;
                    return Err(error.into());
                }
            };
            let proxy = format!("http://{}", guard.local_addr());
            tracing::info!(session = %session, namespace = %namespace.name, audit = %guard.audit_path().display(), allow = ?policy.allow, "network policy enforced: the remote runs in a namespace whose only way out is its egress guard");
            return Ok(Self {
                guard,
                namespace: Some(namespace),
                proxy,
            });
        }
        let guard = Guard::spawn(guard_policy).await?;
        let proxy = format!("http://{}", guard.local_addr());
        tracing::warn!(session = %session, audit = %guard.audit_path().display(), allow = ?policy.allow, "network policy applied through proxy variables only (no network namespace): programs that ignore HTTPS_PROXY are not held to it");
        Ok(Self {
            guard,
            namespace: None,
            proxy,
        })
    }

    /// The proxy URL the remote gets.
    pub(crate) fn proxy(&self) -> &str {
        &self.proxy
    }

    /// The command prefix that runs the remote inside the namespace (empty without one).
    pub(crate) fn wrapper(&self) -> Vec<String> {
        self.namespace
            .as_ref()
            .map(Namespace::wrapper)
            .unwrap_or_default()
    }

    /// Stops the guard and removes the namespace.
    pub(crate) async fn close(self) {
        let _ = self.guard.shutdown().await;
        if let Some(namespace) = self.namespace {
            namespace.delete().await;
        }
    }
}

/// A named network namespace (`/run/netns/<name>`) with only `lo`, up.
pub(crate) struct Namespace {
    name: String,
}

const NETNS_DIR: &str = "/run/netns";

impl Namespace {
    /// Root, with `ip` and `nsenter` on PATH.
    pub(crate) fn available() -> bool {
        nix::unistd::geteuid().is_root() && find("ip").is_some() && find("nsenter").is_some()
    }

    async fn create(name: &str) -> Result<Self, NetworkError> {
        run_ip(name, &["netns", "add", name]).await?;
        let namespace = Self {
            name: name.to_owned(),
        };
        if let Err(error) = run_ip(name, &["-n", name, "link", "set", "lo", "up"]).await {
            namespace.delete().await;
            return Err(error);
        }
        Ok(namespace)
    }

    /// A TCP listener on 127.0.0.1 inside the namespace.
    async fn bind_loopback(&self) -> Result<std::net::TcpListener, NetworkError> {
        let path = Path::new(NETNS_DIR).join(&self.name);
        let name = self.name.clone();
        let error = move |message: String| NetworkError::Namespace {
            name: name.clone(),
            message,
        };
        let joined = tokio::task::spawn_blocking(move || {
            // A thread of its own: entering the namespace changes only the calling thread, and
            // this one ends right after binding, so no other work ever runs inside it.
            std::thread::spawn(move || -> Result<std::net::TcpListener, String> {
                let handle = std::fs::File::open(&path).map_err(|e| e.to_string())?;
                nix::sched::setns(&handle, nix::sched::CloneFlags::CLONE_NEWNET)
                    .map_err(|e| format!("cannot enter it: {e}"))?;
                std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|e| e.to_string())
            })
            .join()
        })
        .await;
        match joined {
            Ok(Ok(result)) => result.map_err(error),
            _ => Err(error("the thread that binds inside it failed".into())),
        }
    }

    fn wrapper(&self) -> Vec<String> {
        let nsenter = find("nsenter")
            .map(|path| path.display().to_string())
            .unwrap_or_else(|| "nsenter".into());
        vec![
            nsenter,
            format!("--net={NETNS_DIR}/{}", self.name),
            "--".into(),
        ]
    }

    async fn delete(self) {
        if let Err(error) = run_ip(&self.name, &["netns", "delete", &self.name]).await {
            tracing::warn!(%error, "cannot delete a session network namespace");
        }
    }

    /// Deletes namespaces left by an earlier run of this worker (after a crash).
    pub(crate) async fn delete_stale(prefix: &str) {
        if !Self::available() {
            return;
        }
        let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(prefix) {
                tracing::info!(namespace = %name, "deleting a namespace left by an earlier run");
                Self { name }.delete().await;
            }
        }
    }
}

async fn run_ip(name: &str, args: &[&str]) -> Result<(), NetworkError> {
    let ip = find("ip").ok_or(NetworkError::NamespaceUnavailable)?;
    let output = tokio::process::Command::new(ip)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .await
        .map_err(|e| NetworkError::Namespace {
            name: name.to_owned(),
            message: e.to_string(),
        })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(NetworkError::Namespace {
            name: name.to_owned(),
            message: format!(
                "ip {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        })
    }
}

/// `program` in the system directories (the worker's own PATH is not trusted for this).
fn find(program: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(program))
        .find(|path| path.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(rules: Vec<AllowRule>) -> NetworkPolicy {
        NetworkPolicy {
            enabled: true,
            allow: rules,
        }
    }

    #[test]
    fn hostnames_and_ranges_become_the_guard_allowlist() {
        let guard = guard_policy(
            &policy(vec![
                AllowRule::Hostname("*.GitHub.com.".into()),
                AllowRule::Hostname("pypi.org".into()),
                AllowRule::Ipv4("10.1.0.0/16".into()),
                AllowRule::Ipv4("192.0.2.7".into()),
                AllowRule::Ipv6("2001:db8::/32".into()),
            ]),
            "wss://outpost-gateway.devin.ai",
            PathBuf::from("/tmp/a.jsonl"),
        )
        .expect("policy");
        assert_eq!(
            guard.allow,
            vec!["*.github.com", "pypi.org", "outpost-gateway.devin.ai"]
        );
        assert_eq!(
            guard.allow_ip_literals,
            vec!["10.1.0.0/16", "192.0.2.7/32", "2001:db8::/32"]
        );
        let local = guard_policy(
            &policy(Vec::new()),
            "http://127.0.0.1:9/gw",
            PathBuf::from("/tmp/a"),
        )
        .expect("policy");
        assert_eq!(local.allow_ip_literals, vec!["127.0.0.1/32"]);
        assert!(local.allow.is_empty());
    }

    #[test]
    fn patterns_the_guard_cannot_match_exactly_refuse_the_session() {
        for pattern in ["git*.com", "*", "*.com.*", "a b.com", "localhost", ""] {
            assert!(
                guard_policy(
                    &policy(vec![AllowRule::Hostname(pattern.into())]),
                    "wss://gw.devin.ai",
                    PathBuf::from("/tmp/a")
                )
                .is_err(),
                "{pattern:?}"
            );
        }
        for range in ["10.0.0.0/33", "2001:db8::/32", "x"] {
            assert!(
                guard_policy(
                    &policy(vec![AllowRule::Ipv4(range.into())]),
                    "wss://gw.devin.ai",
                    PathBuf::from("/tmp/a")
                )
                .is_err(),
                "{range:?}"
            );
        }
        assert!(guard_policy(
            &policy(vec![AllowRule::Ipv6("10.0.0.1".into())]),
            "wss://gw.devin.ai",
            PathBuf::from("/tmp/a")
        )
        .is_err());
    }
}
