//! Resolve a name once, classify every address, dial one of those exact addresses.
//!
//! A `[resolve]` pin replaces DNS for that name. Otherwise one lookup happens, and its answer is
//! all there is: every address must pass [`addr::check`](super::addr) (one bad address denies
//! the connection, since a name that resolves partly to a private range is not trusted), then
//! the addresses are dialled in order, at most four, within the connect timeout. There is no
//! second lookup, so DNS rebinding cannot change the destination after the check.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use tokio::net::TcpStream;

use super::addr::{self, AddrDenied};
use super::state::Shared;

const MAX_ADDRESSES: usize = 16;
const MAX_DIALS: usize = 4;

/// Why no upstream connection was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DialError {
    ResolveFailed,
    ResolveTimeout,
    Denied(AddrDenied),
    ConnectFailed,
    ConnectTimeout,
}

impl DialError {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            DialError::ResolveFailed => "resolve_failed",
            DialError::ResolveTimeout => "resolve_timeout",
            DialError::Denied(d) => d.reason(),
            DialError::ConnectFailed => "upstream_connect_failed",
            DialError::ConnectTimeout => "upstream_connect_timeout",
        }
    }
}

/// Resolve `host` (already normalised and allowlisted) once and connect to `port` there.
/// On failure also returns the address concerned, when there is one.
pub(crate) async fn resolve_and_dial(
    shared: &Shared,
    host: &str,
    port: u16,
) -> Result<(TcpStream, SocketAddr), (DialError, Option<SocketAddr>)> {
    let policy = &shared.policy;
    let deadline = tokio::time::Instant::now() + policy.connection_limits.connect_timeout();
    shared.stats.resolutions.fetch_add(1, Ordering::Relaxed);
    let addrs: Vec<SocketAddr> = match policy.resolve.get(host) {
        Some(pin) => vec![pin.to_socket(port)],
        None => {
            let lookup = tokio::net::lookup_host((host, port));
            match tokio::time::timeout_at(deadline, lookup).await {
                Err(_) => return Err((DialError::ResolveTimeout, None)),
                Ok(Err(_)) => return Err((DialError::ResolveFailed, None)),
                Ok(Ok(found)) => {
                    let mut out: Vec<SocketAddr> = Vec::new();
                    for a in found.take(MAX_ADDRESSES) {
                        if !out.contains(&a) {
                            out.push(a);
                        }
                    }
                    out
                }
            }
        }
    };
    if addrs.is_empty() {
        return Err((DialError::ResolveFailed, None));
    }
    for a in &addrs {
        if let Err(denied) = addr::check(*a, &policy.allow_ranges, &shared.self_addrs) {
            return Err((DialError::Denied(denied), Some(*a)));
        }
    }
    let mut last = (DialError::ConnectFailed, None);
    for a in addrs.iter().take(MAX_DIALS) {
        match tokio::time::timeout_at(deadline, TcpStream::connect(*a)).await {
            Ok(Ok(stream)) => return Ok((stream, *a)),
            Ok(Err(error)) => {
                tracing::debug!(%error, addr = %a, "upstream connect failed");
                last = (DialError::ConnectFailed, Some(*a));
            }
            Err(_) => return Err((DialError::ConnectTimeout, Some(*a))),
        }
    }
    Err(last)
}
