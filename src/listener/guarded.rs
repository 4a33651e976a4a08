//! [`Guarded`]: an accepted connection that holds its listener's permit and closes itself when
//! it stays silent or idle too long. The check runs where the server reads: every HTTP/1 and
//! HTTP/2 server keeps a read pending on an idle connection, so the timer is polled exactly
//! when it matters. Once expired, every read and write fails and the server drops the
//! connection (the socket closes, the permit returns).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

use super::{Activity, Tracker};
use crate::settings::ConnLimits;

/// Bound on timer re-arms in one poll (each moves the deadline past the present, so one or two
/// are the norm).
const MAX_REARMS: usize = 8;

/// An accepted connection under its listener's cap and timeouts.
pub struct Guarded<S> {
    inner: S,
    activity: Arc<Activity>,
    /// When the connection was accepted, on the timer's clock.
    accepted: Instant,
    timer: Option<Pin<Box<Sleep>>>,
    idle: Option<Duration>,
    /// Whether the client has sent a byte yet.
    spoke: bool,
    expired: bool,
    _permit: OwnedSemaphorePermit,
}

impl<S> Guarded<S> {
    /// Wraps a connection accepted now under `permit` and `limits`.
    pub fn new(inner: S, permit: OwnedSemaphorePermit, limits: &ConnLimits) -> Guarded<S> {
        // A zero sleep's deadline is the timer's "now" (clippy.toml keeps clock reads in clock.rs).
        let mut timer = Box::pin(tokio::time::sleep(Duration::ZERO));
        let accepted = timer.deadline();
        let first = limits.first_byte_timeout.or(limits.idle_timeout);
        let timer = first.map(|d| {
            timer.as_mut().reset(accepted + d);
            timer
        });
        Guarded {
            inner,
            activity: Activity::new(),
            accepted,
            timer,
            idle: limits.idle_timeout,
            spoke: limits.first_byte_timeout.is_none(),
            expired: false,
            _permit: permit,
        }
    }

    /// The connection's activity, for the server to mark requests in flight.
    pub fn tracker(&self) -> Tracker {
        Tracker(self.activity.clone())
    }

    /// The client's first byte: from now on only idleness counts.
    fn spoke(&mut self) {
        self.spoke = true;
        match (self.idle, &mut self.timer) {
            (Some(idle), Some(t)) => t.as_mut().reset(self.accepted + idle),
            _ => self.timer = None,
        }
    }

    /// Polls the timer; `Err` once the connection has been silent or idle too long.
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        for _ in 0..MAX_REARMS {
            if self.expired {
                break;
            }
            let Some(t) = &mut self.timer else {
                return Ok(());
            };
            if t.as_mut().poll(cx).is_pending() {
                return Ok(());
            }
            let (Some(idle), true) = (self.idle, self.spoke) else {
                // Silent since it was accepted.
                self.expired = true;
                break;
            };
            let now = self.accepted + self.activity.age();
            match self.activity.idle_since() {
                Some(from) if self.accepted + from + idle <= now => self.expired = true,
                Some(from) => t.as_mut().reset(self.accepted + from + idle),
                None => t.as_mut().reset(now + idle),
            }
        }
        if self.expired {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection silent or idle past its timeout",
            ));
        }
        // Re-armed MAX_REARMS times without settling: look again on the next turn.
        cx.waker().wake_by_ref();
        Ok(())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check(cx)?;
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if !self.spoke && buf.filled().len() > before {
            self.spoke();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
