//! Copying bytes both ways between two sockets, bounded and observable.
//!
//! A tunnel direction moves bytes with `splice(2)` through a pipe of its own (created on the
//! first byte, at most `buffer_bytes` in flight): the kernel moves the pages, nothing is copied
//! through user space, and an idle tunnel holds no user-space buffer at all (each open tunnel
//! costs up to four pipe descriptors besides its two sockets). Where `splice` is unavailable the
//! direction falls back to a user-space copy whose buffer is taken only while data flows and
//! released as soon as the socket has nothing more to read. A half-close is propagated
//! (`shutdown(Write)`); the tunnel ends when both directions have ended, on the first error,
//! after `idle` with no byte either way, or on guard shutdown.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use std::os::fd::{AsRawFd, OwnedFd};

use bytes::BytesMut;
use nix::fcntl::{splice as splice_fds, OFlag, SpliceFFlags};
use tokio::io::{AsyncWriteExt, Interest};
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

/// Splice `client` and `upstream` both ways. Returns bytes client-to-upstream,
/// upstream-to-client, and how it ended.
pub(crate) async fn splice(
    client: &TcpStream,
    upstream: &TcpStream,
    buffer_bytes: usize,
    idle: Duration,
    shutdown: &mut watch::Receiver<bool>,
) -> (u64, u64, Close) {
    let up = AtomicU64::new(0);
    let down = AtomicU64::new(0);
    let activity = Activity::new();
    let both = async {
        tokio::try_join!(
            direction(client, upstream, buffer_bytes, &up, &activity),
            direction(upstream, client, buffer_bytes, &down, &activity),
        )
        .map(|_| ())
    };
    let close = supervise(both, &activity, idle, shutdown).await;
    (
        up.load(Ordering::Relaxed),
        down.load(Ordering::Relaxed),
        close,
    )
}

/// One direction: zero-copy if the kernel allows it, else a user-space copy.
async fn direction(
    src: &TcpStream,
    dst: &TcpStream,
    buffer_bytes: usize,
    counter: &AtomicU64,
    activity: &Activity,
) -> io::Result<()> {
    match zero_copy(src, dst, buffer_bytes, counter, activity).await {
        Err(ZeroCopy::Unsupported) => {
            tracing::debug!("splice(2) unavailable; copying through user space");
            copy_shared(src, dst, buffer_bytes, counter, activity).await
        }
        Err(ZeroCopy::Io(e)) => Err(e),
        Ok(()) => Ok(()),
    }
}

enum ZeroCopy {
    /// `splice`/`pipe2` refused before any byte moved: use the fallback.
    Unsupported,
    Io(io::Error),
}

fn half_close(dst: &TcpStream) {
    let _ = nix::sys::socket::shutdown(dst.as_raw_fd(), nix::sys::socket::Shutdown::Write);
}

/// Move `src` to `dst` with `splice(2)` through a private pipe. The pipe is drained completely
/// before the next read, so a would-block on the read side always means "socket empty" and on
/// the write side "socket full", which keeps tokio's readiness tracking exact.
async fn zero_copy(
    src: &TcpStream,
    dst: &TcpStream,
    chunk: usize,
    counter: &AtomicU64,
    activity: &Activity,
) -> Result<(), ZeroCopy> {
    let flags = SpliceFFlags::SPLICE_F_NONBLOCK | SpliceFFlags::SPLICE_F_MOVE;
    let mut pipe: Option<(OwnedFd, OwnedFd)> = None;
    let mut moved_any = false;
    loop {
        src.readable().await.map_err(ZeroCopy::Io)?;
        if pipe.is_none() {
            match nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC) {
                Ok(p) => pipe = Some(p),
                Err(_) if !moved_any => return Err(ZeroCopy::Unsupported),
                Err(e) => return Err(ZeroCopy::Io(e.into())),
            }
        }
        let Some((pipe_r, pipe_w)) = pipe.as_ref() else {
            return Err(ZeroCopy::Unsupported);
        };
        let read = src.try_io(Interest::READABLE, || {
            splice_fds(src, None, pipe_w, None, chunk, flags).map_err(io::Error::from)
        });
        let n = match read {
            Ok(0) => {
                half_close(dst);
                return Ok(());
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if !moved_any && unsupported(&e) => return Err(ZeroCopy::Unsupported),
            Err(e) => return Err(ZeroCopy::Io(e)),
        };
        moved_any = true;
        activity.touch();
        let mut left = n;
        while left > 0 {
            dst.writable().await.map_err(ZeroCopy::Io)?;
            let wrote = dst.try_io(Interest::WRITABLE, || {
                splice_fds(pipe_r, None, dst, None, left, flags).map_err(io::Error::from)
            });
            match wrote {
                Ok(0) => return Err(ZeroCopy::Io(io::ErrorKind::WriteZero.into())),
                Ok(m) => {
                    left = left.saturating_sub(m);
                    counter.fetch_add(m as u64, Ordering::Relaxed);
                    activity.touch();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(ZeroCopy::Io(e)),
            }
        }
    }
}

fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == nix::errno::Errno::EINVAL as i32
            || code == nix::errno::Errno::ENOSYS as i32
            || code == nix::errno::Errno::EOPNOTSUPP as i32
    )
}

/// User-space copy over shared references (the fallback of [`zero_copy`]).
async fn copy_shared(
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
