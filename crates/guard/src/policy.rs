//! The guard's policy file: strict TOML with safe defaults, compiled once at load.
//!
//! Every field is optional except `audit` (the guard refuses to run without an audit file); a
//! missing field takes a default that denies more, never less: listen on loopback, an empty
//! allowlist (deny everything), port 443 only, plain HTTP off, no address range allowed beyond
//! the public unicast space, no name pins. Unknown keys are an error (`deny_unknown_fields`).
//! Relative paths are resolved against the directory of the policy file.
//!
//! The compiled policy also answers the one question CONNECT and plain HTTP both ask of a
//! destination before resolving it (`CompiledPolicy::destination_refusal`: its port, then its
//! host), so the two protocols refuse alike and name the same audit reasons.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::addr::{self, Cidr};
use super::hostmatch::{self, Allowlist};

/// Hard ceiling of the ClientHello buffer (the issue fixes it at 64 KiB).
pub(crate) const CLIENT_HELLO_CAP: usize = 64 * 1024;

/// Why a guard policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum GuardPolicyError {
    /// The file could not be read.
    #[error("cannot read guard policy {path}: {source}")]
    Read {
        /// The policy file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema (unknown key, wrong type...).
    #[error("invalid guard policy{}: {message}", path_suffix(.path))]
    Parse {
        /// The policy file, when it came from a file.
        path: Option<PathBuf>,
        /// The parser's message.
        message: String,
    },
    /// The file parsed but a value is not acceptable.
    #[error("invalid guard policy: {0}")]
    Invalid(String),
}

fn path_suffix(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|p| format!(" {}", p.display()))
        .unwrap_or_default()
}

/// A guard policy as written in TOML (see `policies/guard-*.toml`, every field is commented
/// there). Construct it with `Default` and struct update syntax in tests.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GuardPolicy {
    /// Address the proxy listens on. Default `127.0.0.1:8080`.
    pub listen: SocketAddr,
    /// Audit file (JSON lines). Required: the guard refuses to start without one.
    pub audit: Option<PathBuf>,
    /// Destination names: exact names (`devin.ai`) or `*.suffix` (`*.devin.ai`, which does not
    /// match the apex itself). Empty = deny everything.
    pub allow: Vec<String>,
    /// Ports a CONNECT may reach. Default `[443]`.
    pub ports: Vec<u16>,
    /// Resolved-address ranges (CIDR) allowed although their class is denied by default
    /// (loopback, private...). Cloud metadata and the guard's own address stay denied.
    pub allow_ranges: Vec<String>,
    /// IP-literal `CONNECT` destinations (CIDR): `CONNECT 10.1.2.3:443` or
    /// `CONNECT [2001:db8::1]:443` is allowed when the address is inside one of them. Empty (the
    /// default) = every IP literal refused. A non-public address passes only through a range
    /// that lies within its class's block (`10.0.0.0/8` opens `10.1.2.3`, `0.0.0.0/0` does
    /// not); metadata, unspecified, multicast, broadcast, IPv4-embedding IPv6 forms and the
    /// guard's own address stay refused.
    pub allow_ip_literals: Vec<String>,
    /// Plain-HTTP forwarding.
    pub http: HttpPolicy,
    /// `[connection_limits]`: what one client, or many, can make the guard hold. The old
    /// spelling `[limits]` is still read, with a deprecation warning.
    #[serde(alias = "limits")]
    pub connection_limits: ConnectionLimits,
    /// Name pins, like curl's `--resolve`: `"api.devin.ai" = "203.0.113.7"` (keeps the
    /// requested port) or `"api.devin.ai" = "127.0.0.1:8443"` (also replaces the port).
    /// A pinned name is never looked up in DNS; the pinned address is still classified.
    pub resolve: BTreeMap<String, String>,
}

impl Default for GuardPolicy {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            audit: None,
            allow: Vec::new(),
            ports: vec![443],
            allow_ranges: Vec::new(),
            allow_ip_literals: Vec::new(),
            http: HttpPolicy::default(),
            connection_limits: ConnectionLimits::default(),
            resolve: BTreeMap::new(),
        }
    }
}

/// `[http]`: plain (non-CONNECT) forwarding.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpPolicy {
    /// Forward absolute-form `http:` requests. Default `false` (answered `403`).
    pub enabled: bool,
    /// Ports a plain-HTTP request may reach. Default `[80]`.
    pub ports: Vec<u16>,
}

impl Default for HttpPolicy {
    fn default() -> Self {
        Self {
            enabled: false,
            ports: vec![80],
        }
    }
}

/// `[connection_limits]`: everything that bounds what one client, or many, can make the guard hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConnectionLimits {
    /// Connections served at once; one more is refused (`503`) and audited. Default 256.
    pub max_connections: usize,
    /// Largest request head (request line + headers), bytes. Default 16384.
    pub header_max_bytes: usize,
    /// Time allowed to receive a whole request head, ms. Default 10000.
    pub header_timeout_ms: u64,
    /// Largest ClientHello (all its records), bytes; at most 65536. Default 65536.
    pub client_hello_max_bytes: usize,
    /// Time allowed to receive the whole ClientHello after `200`, ms. Default 3000.
    pub client_hello_timeout_ms: u64,
    /// Name resolution plus TCP connect to the upstream, ms. Default 10000.
    pub connect_timeout_ms: u64,
    /// A tunnel with no byte in either direction for this long is closed, ms. Default 300000.
    pub idle_timeout_ms: u64,
    /// Copy buffer per direction while data flows (released when idle), bytes. Default 65536.
    pub buffer_bytes: usize,
    /// On SIGTERM/SIGINT, time given to open connections before the guard exits, ms.
    /// Default 5000.
    pub shutdown_grace_ms: u64,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: 256,
            header_max_bytes: 16 * 1024,
            header_timeout_ms: 10_000,
            client_hello_max_bytes: CLIENT_HELLO_CAP,
            client_hello_timeout_ms: 3_000,
            connect_timeout_ms: 10_000,
            idle_timeout_ms: 300_000,
            buffer_bytes: 64 * 1024,
            shutdown_grace_ms: 5_000,
        }
    }
}

impl ConnectionLimits {
    pub(crate) fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }
    pub(crate) fn client_hello_timeout(&self) -> Duration {
        Duration::from_millis(self.client_hello_timeout_ms)
    }
    pub(crate) fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }
    pub(crate) fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }
    pub(crate) fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }
}

/// A pinned address: with or without a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pin {
    /// Keep the requested port.
    Ip(IpAddr),
    /// Replace the requested port too.
    Socket(SocketAddr),
}

impl Pin {
    pub(crate) fn to_socket(self, port: u16) -> SocketAddr {
        match self {
            Pin::Ip(ip) => SocketAddr::new(ip, port),
            Pin::Socket(addr) => addr,
        }
    }
}

/// Says once per load that a policy still spells `[connection_limits]` the old way.
fn warn_deprecated(text: &str, source: &str) {
    let old = text
        .parse::<toml::Table>()
        .is_ok_and(|table| table.contains_key("limits"));
    if old {
        tracing::warn!(
            policy = source,
            "the guard policy's [limits] section is now [connection_limits]; the old name still works but is deprecated"
        );
    }
}

/// A validated policy, ready to serve.
#[derive(Debug, Clone)]
pub(crate) struct CompiledPolicy {
    pub listen: SocketAddr,
    pub audit: PathBuf,
    pub allow: Allowlist,
    pub ports: Vec<u16>,
    pub allow_ranges: Vec<Cidr>,
    pub allow_ip_literals: Vec<Cidr>,
    pub http: HttpPolicy,
    pub connection_limits: ConnectionLimits,
    pub resolve: BTreeMap<String, Pin>,
}

/// The protocol a destination is asked for: the ports each allows differ, the allowlist is
/// the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// A `CONNECT` tunnel (`ports`).
    Connect,
    /// A plain-HTTP request (`[http] ports`).
    PlainHttp,
}

impl CompiledPolicy {
    /// Why `port` is refused for `via` (`port_not_allowed`); `None` when it is allowed.
    pub(crate) fn port_refusal(&self, via: Via, port: u16) -> Option<&'static str> {
        let ports = match via {
            Via::Connect => &self.ports,
            Via::PlainHttp => &self.http.ports,
        };
        (!ports.contains(&port)).then_some("port_not_allowed")
    }

    /// Why a named destination is refused before anything is resolved or dialled: its port
    /// first ([`Self::port_refusal`]), then a host off the allowlist (`host_not_allowlisted`);
    /// `None` when both pass. CONNECT and plain HTTP ask the same two questions in this order,
    /// so their audit reasons agree.
    pub(crate) fn destination_refusal(
        &self,
        via: Via,
        host: &str,
        port: u16,
    ) -> Option<&'static str> {
        self.port_refusal(via, port)
            .or_else(|| (!self.allow.matches(host)).then_some("host_not_allowlisted"))
    }
}

impl GuardPolicy {
    /// Parse a policy from TOML text (relative paths stay relative).
    pub fn from_toml_str(text: &str) -> Result<Self, GuardPolicyError> {
        warn_deprecated(text, "(inline guard policy)");
        toml::from_str(text).map_err(|e| GuardPolicyError::Parse {
            path: None,
            message: e.message().to_owned(),
        })
    }

    /// Read a policy file; a relative `audit` path is resolved against the file's directory.
    pub fn load(path: &Path) -> Result<Self, GuardPolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| GuardPolicyError::Read {
            path: path.to_owned(),
            source,
        })?;
        warn_deprecated(&text, &path.display().to_string());
        let mut policy: GuardPolicy =
            toml::from_str(&text).map_err(|e| GuardPolicyError::Parse {
                path: Some(path.to_owned()),
                message: e.message().to_owned(),
            })?;
        if let Some(audit) = policy.audit.as_mut() {
            if audit.is_relative() {
                let base = path.parent().unwrap_or_else(|| Path::new("."));
                *audit = base.join(&*audit);
            }
        }
        Ok(policy)
    }

    /// Check every value and build the matcher tables. Fails closed on anything doubtful.
    pub(crate) fn compile(&self) -> Result<CompiledPolicy, GuardPolicyError> {
        let invalid = |m: String| GuardPolicyError::Invalid(m);
        let audit = self
            .audit
            .clone()
            .ok_or_else(|| invalid("`audit` is required (the path of the audit file)".into()))?;
        if audit.as_os_str().is_empty() {
            return Err(invalid("`audit` is empty".into()));
        }
        let allow = Allowlist::parse(&self.allow).map_err(|(pattern, why)| {
            invalid(format!(
                "allow entry {pattern:?} is not a host name or *.suffix: {why}"
            ))
        })?;
        check_ports("ports", &self.ports)?;
        check_ports("http.ports", &self.http.ports)?;
        let mut allow_ranges = Vec::with_capacity(self.allow_ranges.len());
        for range in &self.allow_ranges {
            allow_ranges.push(
                range
                    .parse::<Cidr>()
                    .map_err(|why| invalid(format!("allow_ranges entry {range:?}: {why}")))?,
            );
        }
        let allow_ip_literals = self
            .allow_ip_literals
            .iter()
            .map(|range| ip_literal_range(range).map_err(invalid))
            .collect::<Result<Vec<_>, _>>()?;
        let l = &self.connection_limits;
        let positive = [
            (
                "connection_limits.max_connections",
                l.max_connections as u64,
            ),
            (
                "connection_limits.header_max_bytes",
                l.header_max_bytes as u64,
            ),
            ("connection_limits.header_timeout_ms", l.header_timeout_ms),
            (
                "connection_limits.client_hello_max_bytes",
                l.client_hello_max_bytes as u64,
            ),
            (
                "connection_limits.client_hello_timeout_ms",
                l.client_hello_timeout_ms,
            ),
            ("connection_limits.connect_timeout_ms", l.connect_timeout_ms),
            ("connection_limits.idle_timeout_ms", l.idle_timeout_ms),
            ("connection_limits.buffer_bytes", l.buffer_bytes as u64),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(invalid(format!("`{name}` must be greater than 0")));
            }
        }
        if l.client_hello_max_bytes > CLIENT_HELLO_CAP {
            return Err(invalid(format!(
                "`connection_limits.client_hello_max_bytes` is at most {CLIENT_HELLO_CAP}"
            )));
        }
        if l.header_max_bytes < 256 || l.header_max_bytes > 1024 * 1024 {
            return Err(invalid(
                "`connection_limits.header_max_bytes` must be between 256 and 1048576".into(),
            ));
        }
        if l.buffer_bytes > 16 * 1024 * 1024 {
            return Err(invalid(
                "`connection_limits.buffer_bytes` is at most 16 MiB".into(),
            ));
        }
        if l.max_connections > 1_000_000 {
            return Err(invalid(
                "`connection_limits.max_connections` is at most 1000000".into(),
            ));
        }
        let mut resolve = BTreeMap::new();
        for (name, target) in &self.resolve {
            let host = hostmatch::normalize_host(name).map_err(|e| {
                invalid(format!(
                    "resolve key {name:?} is not a host name: {}",
                    e.reason()
                ))
            })?;
            let pin = if let Ok(addr) = target.parse::<SocketAddr>() {
                Pin::Socket(addr)
            } else if let Ok(ip) = target.parse::<IpAddr>() {
                Pin::Ip(ip)
            } else {
                return Err(invalid(format!(
                    "resolve value {target:?} for {name:?} is not an IP address or IP:port"
                )));
            };
            if matches!(pin, Pin::Socket(a) if a.port() == 0) {
                return Err(invalid(format!("resolve value {target:?} has port 0")));
            }
            if resolve.insert(host, pin).is_some() {
                return Err(invalid(format!(
                    "resolve key {name:?} duplicates another key after normalisation"
                )));
            }
        }
        Ok(CompiledPolicy {
            listen: self.listen,
            audit,
            allow,
            ports: self.ports.clone(),
            allow_ranges,
            allow_ip_literals,
            http: self.http.clone(),
            connection_limits: self.connection_limits,
            resolve,
        })
    }
}

/// One `allow_ip_literals` entry, refused with a message that says how to write it when it is
/// malformed, ambiguous (bits after the prefix) or could never allow anything.
fn ip_literal_range(range: &str) -> Result<Cidr, String> {
    let entry = |why: String| format!("allow_ip_literals entry {range:?}: {why}");
    let cidr: Cidr = range.trim().parse().map_err(|why: &str| {
        entry(format!(
            "{why} (expected a CIDR such as 10.0.0.0/8 or 2001:db8::/32)"
        ))
    })?;
    if cidr.has_host_bits() {
        return Err(entry(format!(
            "has bits set after the prefix; write the network, {}",
            cidr.masked()
        )));
    }
    let single = matches!(
        (cidr.network(), cidr.prefix()),
        (IpAddr::V4(_), 32) | (IpAddr::V6(_), 128)
    );
    let never = if single {
        Some(addr::classify(cidr.network()))
    } else {
        cidr.within_class()
    }
    .filter(|class| addr::literal_never(*class));
    if let Some(class) = never {
        return Err(entry(format!(
            "holds only {} addresses, which are never allowed as IP literals",
            class
                .reason()
                .trim_start_matches("address_")
                .replace('_', " ")
        )));
    }
    Ok(cidr)
}

fn check_ports(name: &str, ports: &[u16]) -> Result<(), GuardPolicyError> {
    if ports.contains(&0) {
        return Err(GuardPolicyError::Invalid(format!(
            "`{name}` must not contain 0"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_old_limits_spelling_is_still_read_and_both_spellings_are_refused() {
        let old = GuardPolicy::from_toml_str("[limits]\nmax_connections = 7\n").unwrap();
        let new = GuardPolicy::from_toml_str("[connection_limits]\nmax_connections = 7\n").unwrap();
        assert_eq!(old.connection_limits.max_connections, 7);
        assert_eq!(old.connection_limits, new.connection_limits);
        let both = GuardPolicy::from_toml_str(
            "[limits]\nmax_connections = 7\n[connection_limits]\nmax_connections = 8\n",
        );
        assert!(both.is_err(), "{both:?}");
    }

    #[test]
    fn defaults_are_safe() {
        let p = GuardPolicy::default();
        assert!(p.allow.is_empty());
        assert_eq!(p.ports, vec![443]);
        assert!(!p.http.enabled);
        assert!(p.allow_ranges.is_empty());
        assert!(p.listen.ip().is_loopback());
        assert!(p.compile().is_err(), "no audit path: refuse");
    }

    #[test]
    fn a_destination_is_refused_by_its_protocols_port_first_then_by_the_allowlist() {
        let p = GuardPolicy::from_toml_str(
            "audit = \"/tmp/x.jsonl\"\nallow = [\"api.devin.ai\"]\nports = [443]\n[http]\nenabled = true\nports = [80]\n",
        )
        .unwrap();
        let c = p.compile().unwrap();
        assert_eq!(
            c.destination_refusal(Via::Connect, "api.devin.ai", 443),
            None
        );
        assert_eq!(
            c.destination_refusal(Via::PlainHttp, "api.devin.ai", 80),
            None
        );
        assert_eq!(
            c.destination_refusal(Via::Connect, "api.devin.ai", 80),
            Some("port_not_allowed")
        );
        assert_eq!(
            c.destination_refusal(Via::PlainHttp, "api.devin.ai", 443),
            Some("port_not_allowed")
        );
        assert_eq!(
            c.destination_refusal(Via::Connect, "evil.example", 443),
            Some("host_not_allowlisted")
        );
        // Both wrong: the port is named, as both protocols always have.
        assert_eq!(
            c.destination_refusal(Via::PlainHttp, "evil.example", 443),
            Some("port_not_allowed")
        );
        assert_eq!(c.port_refusal(Via::Connect, 443), None);
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = GuardPolicy::from_toml_str("audit = \"a\"\nallowlist = []\n").unwrap_err();
        assert!(err.to_string().contains("allowlist"), "{err}");
        let err =
            GuardPolicy::from_toml_str("audit = \"a\"\n[limits]\nmax_conn = 1\n").unwrap_err();
        assert!(err.to_string().contains("max_conn"), "{err}");
    }

    #[test]
    fn parses_and_compiles_a_full_policy() {
        let p = GuardPolicy::from_toml_str(
            r#"
            listen = "0.0.0.0:8080"
            audit = "/tmp/x.jsonl"
            allow = ["*.Devin.AI", "devin.ai."]
            ports = [443, 8443]
            allow_ranges = ["127.0.0.0/8", "::1/128"]
            [http]
            enabled = true
            [limits]
            max_connections = 8
            [resolve]
            "API.devin.ai" = "127.0.0.1:9999"
            "x.devin.ai" = "::1"
            "#,
        )
        .unwrap();
        let c = p.compile().unwrap();
        assert!(c.allow.matches("api.devin.ai"));
        assert!(c.allow.matches("devin.ai"));
        assert_eq!(c.connection_limits.max_connections, 8);
        assert_eq!(
            c.resolve.get("api.devin.ai"),
            Some(&Pin::Socket("127.0.0.1:9999".parse().unwrap()))
        );
        assert_eq!(
            c.resolve.get("x.devin.ai").map(|p| p.to_socket(443)),
            Some("[::1]:443".parse().unwrap())
        );
    }

    #[test]
    fn bad_values_are_refused() {
        for text in [
            "audit='a'\nallow=['*']",
            "audit='a'\nallow=['1.2.3.4']",
            "audit='a'\nallow=['a.*.b']",
            "audit='a'\nports=[0]",
            "audit='a'\nallow_ranges=['10.0.0.0/33']",
            "audit='a'\n[limits]\nclient_hello_max_bytes=70000",
            "audit='a'\n[limits]\nidle_timeout_ms=0",
            "audit='a'\n[resolve]\n'a.b'='nope'",
            "audit=''",
        ] {
            let p = GuardPolicy::from_toml_str(text).unwrap();
            assert!(p.compile().is_err(), "{text}");
        }
    }

    #[test]
    fn ip_literal_ranges_are_parsed_and_checked_at_load() {
        let p = GuardPolicy::from_toml_str(
            "audit='a'\nallow_ip_literals=['10.0.0.0/8', '2001:db8::/32', ' 8.8.8.8 ', '0.0.0.0/0']",
        )
        .unwrap();
        let c = p.compile().unwrap();
        assert_eq!(c.allow_ip_literals.len(), 4);
        assert!(c.allow_ip_literals[0].contains("10.1.2.3".parse().unwrap()));
        assert!(c.allow_ip_literals[2].contains("8.8.8.8".parse().unwrap()));
        assert!(GuardPolicy::default().allow_ip_literals.is_empty());
        for (entry, says) in [
            ("10.1.2.3/8", "write the network, 10.0.0.0/8"),
            ("2001:db8::1/32", "write the network, 2001:db8::/32"),
            ("10.0.0.0/33", "prefix length too large"),
            ("10.0.0.0/", "prefix length is not a number"),
            ("example.com", "not an IP address"),
            ("", "not an IP address"),
            ("fe80::1%eth0/128", "not an IP address"),
            ("224.0.0.0/4", "holds only multicast addresses"),
            ("169.254.169.254", "holds only metadata addresses"),
            ("169.254.169.254/32", "holds only metadata addresses"),
            ("0.0.0.0/8", "holds only unspecified addresses"),
            ("::ffff:0:0/96", "holds only ipv4 mapped addresses"),
            ("64:ff9b::/96", "holds only nat64 addresses"),
            ("255.255.255.255", "holds only broadcast addresses"),
        ] {
            let text = format!("audit='a'\nallow_ip_literals=[{entry:?}]");
            let error = GuardPolicy::from_toml_str(&text)
                .unwrap()
                .compile()
                .expect_err(entry)
                .to_string();
            assert!(
                error.contains("allow_ip_literals entry") && error.contains(says),
                "{entry}: {error}"
            );
        }
    }

    #[test]
    fn relative_audit_path_is_resolved_against_the_policy_dir() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.toml");
        std::fs::write(&path, "audit = \"logs/a.jsonl\"\n").unwrap();
        let p = GuardPolicy::load(&path).unwrap();
        assert_eq!(p.audit.unwrap(), dir.path().join("logs/a.jsonl"));
    }
}
