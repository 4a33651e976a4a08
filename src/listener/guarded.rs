//! [`Guarded`]: an accepted connection that holds its listener's permit and closes itself when
//! it stays silent or idle too long. The check runs where the server reads: every HTTP/1 and
//! HTTP/2 server keeps a read pending on an idle connection, so the timer is polled exactly
//! when it matters. Once expired, every read and write fails and the server drops the
//! connection (the socket closes, the permit returns).
//!
//! On HTTP/1 listeners it also bounds how long a request head may take: bytes that arrive with
//! no request in flight start a request, and unless the server has begun one (marked it in
//! flight) within the header timeout, the connection is closed. A client trickling a byte every
//! few seconds thus holds its slot for the header timeout, not for the idle timeout.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

use super::{Activity, ConnLimits, Gate, Tracker};

/// Bound on timer re-arms in one poll (each moves the deadline past the present, so one or two
/// are the norm).
const MAX_REARMS: usize = 8;

/// An accepted connection under its listener's cap and timeouts.
#[derive(Debug)]
pub(crate) struct Guarded<S> {
    inner: S,
    activity: Arc<Activity>,
    /// When the connection was accepted, on the timer's clock.
    accepted: Instant,
    timer: Option<Pin<Box<Sleep>>>,
    idle: Option<Duration>,
    /// `HTTP_HEADER_READ_TIMEOUT` and `HTTP_BODY_TIMEOUT` (HTTP/1 listeners).
    header: Option<Duration>,
    body: Option<Duration>,
    /// When (after accept) bytes of a request not yet begun first arrived.
    head_from: Option<Duration>,
    /// Whether the client has sent a byte yet.
    spoke: bool,
    expired: bool,
}

impl<S> Guarded<S> {
    /// Wraps a connection accepted now under `permit` and `limits`.
    pub(crate) fn new(inner: S, permit: OwnedSemaphorePermit, limits: &ConnLimits) -> Guarded<S> {
        Guarded::with_streams(inner, permit, limits, None)
    }

    /// As [`Guarded::new`]; a connection that opens a long-lived stream moves its slot to
    /// `streams` ([`Activity::hold_open_for_stream`]).
    pub(crate) fn with_streams(
        inner: S,
        permit: OwnedSemaphorePermit,
        limits: &ConnLimits,
        streams: Option<Arc<Gate>>,
    ) -> Guarded<S> {
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
            activity: Activity::with_slot(permit, streams),
            accepted,
            timer,
            idle: limits.idle_timeout,
            header: limits.header_timeout,
            body: limits.body_timeout,
            head_from: None,
            spoke: limits.first_byte_timeout.is_none(),
            expired: false,
        }
    }

    /// `HTTP_BODY_TIMEOUT`, for the server to put on each request body.
    pub(crate) fn body_timeout(&self) -> Option<Duration> {
        self.body
    }

    /// The connection's activity, for the server to mark requests in flight.
    pub(crate) fn tracker(&self) -> Tracker {
        Tracker(self.activity.clone())
    }

    /// Bytes arrived: the first one ends the first-byte wait, and any that arrive with no
    /// request in flight start the header timeout.
    fn heard(&mut self) {
        let first = !self.spoke;
        self.spoke = true;
        let idle = self.activity.idle_since();
        // A head timer left from a request that has begun (and ended) since does not count.
        let stale = matches!((self.head_from, idle), (Some(from), Some(end)) if end > from);
        let head = match self.header {
            Some(h) if idle.is_some() && (self.head_from.is_none() || stale) => {
                let from = self.activity.age();
                self.head_from = Some(from);
                Some(self.accepted + from + h)
            }
            _ => None,
        };
        match (&mut self.timer, head) {
            // The timer may be set for later (idleness); the head's deadline comes first.
            (Some(t), Some(at)) if at < t.deadline() => t.as_mut().reset(at),
            (Some(t), _) if first => {
                let next = self.idle.map(|i| self.accepted + i).into_iter().chain(head);
                match next.min() {
                    Some(at) => t.as_mut().reset(at),
                    None => self.timer = None,
                }
            }
            (None, Some(at)) => self.timer = Some(Box::pin(tokio::time::sleep_until(at))),
            _ => {}
        }
    }

    /// The next moment the connection's state must be looked at (`now` is the present), or
    /// `None` when nothing can expire it.
    fn next_deadline(&mut self, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut at = |d: Instant| next = Some(next.map_or(d, |n| n.min(d)));
        if !self.spoke {
            // Silent since it was accepted: the first-byte deadline (the timer's first setting).
            return Some(now);
        }
        if let Some(idle) = self.idle {
            match self.activity.idle_since() {
                Some(from) => at(self.accepted + from + idle),
                // Busy: look again an idle timeout from now.
                None => at(now + idle),
            }
        }
        if let (Some(from), Some(h)) = (self.head_from, self.header) {
            // A request began since (in flight now, or one ended after the bytes came): the
            // head arrived in time.
            match self.activity.idle_since() {
                Some(last_end) if last_end <= from => at(self.accepted + from + h),
                _ => self.head_from = None,
            }
        }
        next
    }

    /// Polls the timer; `Err` once the connection has been silent, idle or slow too long.
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
            let now = self.accepted + self.activity.age();
            match self.next_deadline(now) {
                Some(at) if at <= now => self.expired = true,
                Some(at) => {
                    if let Some(t) = &mut self.timer {
                        t.as_mut().reset(at);
                    }
                }
                None => self.timer = None,
            }
        }
        if self.expired {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection silent, idle or slow past its timeout",
            ));
        }
        // Re-armed MAX_REARMS times without settling: look again on the next turn.
        cx.waker().wake_by_ref();
        Ok(())
    }
}

impl<S> Drop for Guarded<S> {
    fn drop(&mut self) {
        // The connection is closed: its slot returns now, whoever still holds its tracker.
        self.activity.release();
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
        if buf.filled().len() > before && (!self.spoke || self.header.is_some()) {
            self.heard();
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
