//! The `CONNECT` flow.
//!
//! 1. The authority must be `host:port`; the host a DNS name (no IP literal unless
//!    `allow_ip_literals` lists it, see below; never with userinfo); the port one of the policy's; the name on the allowlist. Otherwise the answer
//!    is `403 Forbidden` (or `400` for syntax), written after the audit line and before any name
//!    resolution.
//! 2. `200 Connection Established`, then the ClientHello is read (reassembled, capped, timed)
//!    and its SNI must equal the CONNECT host after normalisation. Otherwise the connection is
//!    closed and the reason recorded.
//! 3. Only then the name is resolved once, every address classified, and one of those exact
//!    addresses dialled; the buffered bytes are replayed and both directions spliced.
//!    Until the handshake turns to encrypted records, every later ClientHello the client sends
//!    is held back and checked like the first (`handshake`); a refusal closes the tunnel and
//!    its audit line is a denial with its own reason.
//!    One audit line is written when the tunnel ends, with bytes each way and how it ended.
//!
//! An IP-literal target (`10.1.2.3:443`, `[2001:db8::1]:443`) is refused as always unless the
//! policy lists ranges in `allow_ip_literals`; then [`handle_literal`] decides it on the address
//! and port alone, like a network policy's CIDR rule: there is no name for an SNI to match and
//! nothing to resolve, so the tunnel is dialled before `200` and its bytes are not inspected.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::addr;
use super::audit::{sanitize, Decision, Pending};
use super::client_hello::read_client_hello;
use super::dial;
use super::handshake::{splice_watched, ClientWatch, TunnelEnd};
use super::head::RequestHead;
use super::hostmatch::{normalize_host, HostError};
use super::policy::Via;
use super::splice::{direction, supervise, Activity};
use super::state::Shared;

const FORBIDDEN: (u16, &str) = (403, "Forbidden");
const BAD_REQUEST: (u16, &str) = (400, "Bad Request");
const BAD_GATEWAY: (u16, &str) = (502, "Bad Gateway");
/// The audit reason of a tunnel to an IP literal inside `allow_ip_literals`.
const LITERAL_ALLOWED: &str = "ip_literal_allowed";
const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection Established\r\n\r\n";

/// Why a request target was refused before any policy lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TargetError {
    /// Not `host:port`.
    Syntax,
    /// The port is not a number in 1..=65535.
    Port,
    /// `user@host`.
    Userinfo,
    /// A host name problem.
    Host(HostError),
}

impl TargetError {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            TargetError::Syntax => "bad_target",
            TargetError::Port => "invalid_port",
            TargetError::Userinfo => "userinfo_in_url",
            TargetError::Host(e) => e.reason(),
        }
    }

    pub(crate) fn status(self) -> (u16, &'static str) {
        match self {
            TargetError::Syntax | TargetError::Port => BAD_REQUEST,
            TargetError::Userinfo | TargetError::Host(_) => FORBIDDEN,
        }
    }
}

/// Split `host:port` (or `[v6]:port`). The host is returned as written.
pub(crate) fn split_authority(authority: &str) -> Result<(&str, u16), TargetError> {
    let (host, port) = if authority.starts_with('[') {
        let close = authority.find(']').ok_or(TargetError::Syntax)?;
        let (host, rest) = authority.split_at(close + 1);
        (host, rest.strip_prefix(':').ok_or(TargetError::Syntax)?)
    } else {
        authority.rsplit_once(':').ok_or(TargetError::Syntax)?
    };
    if host.is_empty() {
        return Err(TargetError::Syntax);
    }
    Ok((host, parse_port(port)?))
}

pub(crate) fn parse_port(port: &str) -> Result<u16, TargetError> {
    if port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TargetError::Port);
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(TargetError::Port),
        Ok(p) => Ok(p),
    }
}

/// Check a requested host: userinfo, syntax, IP literal. Returns the normalised name.
pub(crate) fn check_host(host: &str) -> Result<String, TargetError> {
    if host.contains('@') {
        return Err(TargetError::Userinfo);
    }
    normalize_host(host).map_err(TargetError::Host)
}

pub(crate) async fn handle(
    shared: &Shared,
    mut stream: TcpStream,
    mut pending: Pending,
    request: RequestHead,
    early: Vec<u8>,
) {
    // 1. Policy on the request alone: no resolution, no upstream.
    let (host, port) = match target(shared, &mut pending, &request.target) {
        Target::Named(host, port) => (host, port),
        Target::Literal(address) => {
            return handle_literal(shared, stream, pending, address, early).await
        }
        Target::Refused(error) => {
            return shared
                .deny_with(&mut stream, &pending, error.status(), error.reason())
                .await
        }
    };
    if let Some(reason) = shared.policy.destination_refusal(Via::Connect, &host, port) {
        return shared
            .deny_with(&mut stream, &pending, FORBIDDEN, reason)
            .await;
    }
    // 2. The tunnel is open on the client side; read the ClientHello.
    let (raw, after) = match client_hello(shared, &mut stream, &mut pending, &host, early).await {
        Ok(read) => read,
        Err(reason) => return shared.decide(&pending, Decision::Deny, reason, None, (0, 0)),
    };
    // 3. Resolve once, classify, dial that address.
    let Some((upstream, resolved)) = dial_and_replay(shared, &mut pending, &host, port, &raw).await
    else {
        return;
    };
    let replayed = raw.len() as u64;
    drop(raw);
    tracing::debug!(%host, port, %resolved, "tunnel open");
    // 4. Splice, with every later ClientHello of the handshake checked before it is forwarded.
    let limits = shared.policy.connection_limits;
    let mut shutdown = shared.shutdown.clone();
    let watch = ClientWatch::new(host, limits.client_hello_max_bytes);
    let (up, down, end) =
        splice_watched(&stream, &upstream, &limits, &mut shutdown, watch, &after).await;
    drop(after);
    match end {
        TunnelEnd::Closed(close) => shared.decide(
            &pending,
            Decision::Allow,
            "allowlisted",
            Some(close.as_str()),
            (replayed + up, down),
        ),
        TunnelEnd::Refused(e) => shared.decide(
            &pending,
            Decision::Deny,
            e.reason(),
            None,
            (replayed + up, down),
        ),
    }
}

/// What a CONNECT target is, read from the request alone.
enum Target {
    /// A DNS name, normalised, and the port.
    Named(String, u16),
    /// An IP literal the policy's `allow_ip_literals` may let through.
    Literal(SocketAddr),
    Refused(TargetError),
}

/// Reads the target `host:port`, recording in `pending` the host in the form the decision is
/// made on (IDNA-mapped), with the raw text escaped beside it when they differ.
fn target(shared: &Shared, pending: &mut Pending, authority: &str) -> Target {
    let (raw_host, port) = match split_authority(authority) {
        Ok(parts) => parts,
        Err(e) => {
            pending.set_host(authority, None);
            return Target::Refused(e);
        }
    };
    pending.port = Some(port);
    match check_host(raw_host) {
        Ok(host) => {
            pending.set_host(raw_host, Some(&host));
            Target::Named(host, port)
        }
        Err(e @ TargetError::Host(HostError::IpLiteral))
            if !shared.policy.allow_ip_literals.is_empty() =>
        {
            match ip_literal(raw_host) {
                Some(ip) => {
                    pending.set_host(raw_host, Some(&ip.to_string()));
                    Target::Literal(SocketAddr::new(ip, port))
                }
                // Only the plain forms are addresses here: a bare IPv6 address, a zone, or a
                // spelling a resolver would read as a number (`2130706433`, `0x7f.1`) is
                // refused as before.
                None => {
                    pending.set_host(raw_host, None);
                    Target::Refused(e)
                }
            }
        }
        Err(e) => {
            pending.set_host(raw_host, None);
            Target::Refused(e)
        }
    }
}

/// Answers `200`, then reads the ClientHello (reassembled, capped, timed) and checks that its
/// SNI is the CONNECT host: its raw bytes and what the client sent after it, or the audit
/// reason of a denial.
async fn client_hello(
    shared: &Shared,
    stream: &mut TcpStream,
    pending: &mut Pending,
    host: &str,
    early: Vec<u8>,
) -> Result<(Vec<u8>, Vec<u8>), &'static str> {
    if stream.write_all(ESTABLISHED).await.is_err() {
        return Err("client_write_error");
    }
    let limits = shared.policy.connection_limits;
    let (hello, raw, after) = read_client_hello(
        stream,
        early,
        limits.client_hello_max_bytes,
        limits.client_hello_timeout(),
    )
    .await
    .map_err(|e| e.reason())?;
    pending.sni = Some(sanitize(&hello.sni));
    match normalize_host(&hello.sni) {
        Ok(sni) if sni == host => Ok((raw, after)),
        Ok(_) => Err("sni_mismatch"),
        Err(_) => Err("invalid_sni"),
    }
}

/// Resolves `host` once, dials one of its classified addresses and replays the ClientHello to
/// it: the upstream and its address; `None` when the connection was decided here (a refused
/// address, or a failed replay).
async fn dial_and_replay(
    shared: &Shared,
    pending: &mut Pending,
    host: &str,
    port: u16,
    raw: &[u8],
) -> Option<(TcpStream, SocketAddr)> {
    let (mut upstream, resolved) = match dial::resolve_and_dial(shared, host, port).await {
        Ok(found) => found,
        Err((e, addr)) => {
            pending.resolved = addr;
            shared.decide(pending, Decision::Deny, e.reason(), None, (0, 0));
            return None;
        }
    };
    pending.resolved = Some(resolved);
    let _ = upstream.set_nodelay(true);
    if upstream.write_all(raw).await.is_err() {
        shared.decide(
            pending,
            Decision::Allow,
            "allowlisted",
            Some("error"),
            (0, 0),
        );
        return None;
    }
    Some((upstream, resolved))
}

/// The address of a dotted-quad IPv4 target or a bracketed IPv6 one, in the strict forms the
/// standard library parses (no leading zeros, no zone).
pub(crate) fn ip_literal(host: &str) -> Option<IpAddr> {
    match host
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
    {
        Some(inner) => inner.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
        None => host.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
    }
}

/// An IP-literal `CONNECT`: port, `allow_ip_literals` and the address class, then dial, `200`
/// and splice the bytes as they are.
async fn handle_literal(
    shared: &Shared,
    mut stream: TcpStream,
    mut pending: Pending,
    target: SocketAddr,
    early: Vec<u8>,
) {
    let policy = &shared.policy;
    if let Some(reason) = policy.port_refusal(Via::Connect, target.port()) {
        return shared
            .deny_with(&mut stream, &pending, FORBIDDEN, reason)
            .await;
    }
    pending.resolved = Some(target);
    if let Err(denied) = addr::check_literal(target, &policy.allow_ip_literals, &shared.self_addrs)
    {
        return shared
            .deny_with(&mut stream, &pending, FORBIDDEN, denied.reason())
            .await;
    }
    let limits = policy.connection_limits;
    let mut upstream =
        match tokio::time::timeout(limits.connect_timeout(), TcpStream::connect(target)).await {
            Ok(Ok(upstream)) => upstream,
            Ok(Err(error)) => {
                tracing::debug!(%error, %target, "upstream connect failed");
                return shared
                    .deny_with(
                        &mut stream,
                        &pending,
                        BAD_GATEWAY,
                        "upstream_connect_failed",
                    )
                    .await;
            }
            Err(_) => {
                return shared
                    .deny_with(
                        &mut stream,
                        &pending,
                        BAD_GATEWAY,
                        "upstream_connect_timeout",
                    )
                    .await
            }
        };
    let _ = upstream.set_nodelay(true);
    if stream.write_all(ESTABLISHED).await.is_err() {
        return shared.decide(&pending, Decision::Deny, "client_write_error", None, (0, 0));
    }
    // Bytes the client sent right behind the request head belong to the tunnel.
    if upstream.write_all(&early).await.is_err() {
        return shared.decide(
            &pending,
            Decision::Allow,
            LITERAL_ALLOWED,
            Some("error"),
            (0, 0),
        );
    }
    let up = AtomicU64::new(early.len() as u64);
    drop(early);
    let down = AtomicU64::new(0);
    let activity = Activity::new();
    let both = async {
        tokio::try_join!(
            direction(&stream, &upstream, limits.buffer_bytes, &up, &activity),
            direction(&upstream, &stream, limits.buffer_bytes, &down, &activity),
        )
        .map(|_| ())
    };
    let mut shutdown = shared.shutdown.clone();
    let close = supervise(both, &activity, limits.idle_timeout(), &mut shutdown).await;
    shared.decide(
        &pending,
        Decision::Allow,
        LITERAL_ALLOWED,
        Some(close.as_str()),
        (up.load(Ordering::Relaxed), down.load(Ordering::Relaxed)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_ip_literals_are_addresses() {
        for (host, ip) in [
            ("10.1.2.3", Some("10.1.2.3")),
            ("[2001:db8::1]", Some("2001:db8::1")),
            ("[::ffff:10.1.2.3]", Some("::ffff:10.1.2.3")),
            ("2001:db8::1", None),
            ("[10.1.2.3]", None),
            ("[fe80::1%eth0]", None),
            ("010.1.2.3", None),
            ("2130706433", None),
            ("0x7f.1", None),
            ("10.1.2", None),
            ("[2001:db8::1", None),
            ("api.devin.ai", None),
        ] {
            assert_eq!(
                ip_literal(host),
                ip.map(|ip| ip.parse::<IpAddr>().unwrap()),
                "{host}"
            );
        }
    }

    #[test]
    fn authority_parsing() {
        assert_eq!(split_authority("a.b:443"), Ok(("a.b", 443)));
        assert_eq!(split_authority("[::1]:443"), Ok(("[::1]", 443)));
        assert_eq!(split_authority("::1:443"), Ok(("::1", 443)));
        assert_eq!(split_authority("a.b"), Err(TargetError::Syntax));
        assert_eq!(split_authority(":443"), Err(TargetError::Syntax));
        assert_eq!(split_authority("a.b:"), Err(TargetError::Port));
        assert_eq!(split_authority("a.b:0"), Err(TargetError::Port));
        assert_eq!(split_authority("a.b:65536"), Err(TargetError::Port));
        assert_eq!(split_authority("a.b:+443"), Err(TargetError::Port));
        assert_eq!(split_authority("[::1]443"), Err(TargetError::Syntax));
        assert_eq!(check_host("u:p@a.b"), Err(TargetError::Userinfo));
        assert_eq!(
            check_host("[::1]"),
            Err(TargetError::Host(HostError::IpLiteral))
        );
        assert_eq!(check_host("A.B."), Ok("a.b".to_owned()));
    }
}
