//! Copying bytes both ways between two sockets, bounded and observable.
//!
//! Each direction waits for readiness without holding a buffer; a buffer of `buffer_bytes` is
//! taken only while data flows and released as soon as the socket has nothing more to read, so
//! an idle tunnel holds no copy buffer at all. A half-close is propagated (`shutdown(Write)`);
//! the tunnel ends when both directions have ended, on the first error, after `idle` with no
//! byte either way, or on guard shutdown.
//!
//! (`splice(2)` through a pipe was tried and measured: on loopback it moved bytes no faster
//! than this copy, and it costs four more descriptors per tunnel; see `benches/guard.rs`.)

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use std::os::fd::AsRawFd;

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

/// How a relayed connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Close {
    /// Both sides finished.
    Eof,
    /// No byte either way for the idle timeout.
    Idle,
    /// The guard is shutting down.
    Shutdown,
    /// A read or write failed (reset...).
    Error,
}

impl Close {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Close::Eof => "eof",
            Close::Idle => "idle_timeout",
            Close::Shutdown => "shutdown",
            Close::Error => "error",
        }
    }
}

/// Last time a byte moved, shared by both directions.
#[derive(Debug)]
pub(crate) struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    pub(crate) fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    pub(crate) fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Resolves once nothing moved for `idle`.
    pub(crate) async fn idle(&self, idle: Duration) {
        loop {
            let last = self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = last + idle;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// Run `work` until it ends, the connection is idle for `idle`, or shutdown is signalled.
pub(crate) async fn supervise<F>(
    work: F,
    activity: &Activity,
    idle: Duration,
    shutdown: &mut watch::Receiver<bool>,
) -> Close
where
    F: Future<Output = io::Result<()>>,
{
    tokio::select! {
        result = work => if result.is_ok() { Close::Eof } else { Close::Error },
        _ = activity.idle(idle) => Close::Idle,
        _ = shutdown.wait_for(|stop| *stop) => Close::Shutdown,
    }
}

/// Copy `src` to `dst` until end of stream, then half-close `dst`.
pub(crate) async fn pump(
    src: &ReadHalf<'_>,
    dst: &mut WriteHalf<'_>,
    buffer_bytes: usize,
    counter: &AtomicU64,
    activity: &Activity,
) -> io::Result<()> {
    loop {
        src.readable().await?;
        let mut buf = BytesMut::with_capacity(buffer_bytes);
        loop {
            match src.try_read_buf(&mut buf) {
                Ok(0) => {
                    let _ = dst.shutdown().await;
                    return Ok(());
                }
                Ok(n) => {
                    activity.touch();
                    dst.write_all(&buf).await?;
                    counter.fetch_add(n as u64, Ordering::Relaxed);
                    activity.touch();
                    buf.clear();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
    }
}

pub(crate) fn half_close(dst: &TcpStream) {
    let _ = nix::sys::socket::shutdown(dst.as_raw_fd(), nix::sys::socket::Shutdown::Write);
}

/// One direction of a tunnel, over shared references (both directions run in one task).
pub(crate) async fn direction(
    src: &TcpStream,
    dst: &TcpStream,
    buffer_bytes: usize,
    counter: &AtomicU64,
    activity: &Activity,
) -> io::Result<()> {
    loop {
        src.readable().await?;
        let mut buf = BytesMut::with_capacity(buffer_bytes);
        loop {
            match src.try_read_buf(&mut buf) {
                Ok(0) => {
                    half_close(dst);
                    return Ok(());
                }
                Ok(n) => {
                    activity.touch();
                    let mut data: &[u8] = &buf;
                    while !data.is_empty() {
                        dst.writable().await?;
                        match dst.try_write(data) {
                            Ok(m) => data = data.get(m..).unwrap_or_default(),
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                            Err(e) => return Err(e),
                        }
                    }
                    counter.fetch_add(n as u64, Ordering::Relaxed);
                    activity.touch();
                    buf.clear();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
    }
}
