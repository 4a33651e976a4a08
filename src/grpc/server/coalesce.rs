//! Write coalescing for gRPC connections. The HTTP/2 server flushes after every response it
//! sends, and each flush is a `writev` system call; under load that call (with the TCP stack
//! behind it) was a third of the server's CPU, one call per decision. [`Coalesce`] holds written
//! bytes and, on a flush, first lets the other ready tasks run once, so the responses of every
//! request that finishes in that round leave in one write. It is the idea of Netty's
//! `FlushConsolidationHandler`.
//!
//! Latency: one pass of the scheduler's queue (microseconds), and nothing when the server is idle,
//! where the queue is empty. Memory: at most [`MAX_HELD`] bytes per connection; beyond that the
//! held bytes are written before more are taken.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most bytes held back per connection.
pub(super) const MAX_HELD: usize = 64 * 1024;

/// A transport whose writes are held until a flush, and whose flushes wait for one scheduler pass.
#[derive(Debug)]
pub struct Coalesce<S> {
    inner: S,
    held: Vec<u8>,
    /// How much of `held` has already been written.
    written: usize,
    /// Whether this flush has already let the other tasks run.
    yielded: bool,
}

impl<S> Coalesce<S> {
    /// `inner` with its writes held until a flush.
    pub fn new(inner: S) -> Self {
        Coalesce {
            inner,
            held: Vec::new(),
            written: 0,
            yielded: false,
        }
    }
}

impl<S: AsyncWrite + Unpin> Coalesce<S> {
    /// Writes out everything held.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.held.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.held[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.held.clear();
        self.written = 0;
        // A burst can grow the buffer to MAX_HELD; an idle connection need not keep that.
        if self.held.capacity() > 16 * 1024 {
            self.held.shrink_to(16 * 1024);
        }
        Poll::Ready(Ok(()))
    }

    /// Makes room for `len` more bytes; `false` when they should bypass the buffer.
    fn poll_room(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<io::Result<bool>> {
        if self.held.len() + len > MAX_HELD {
            ready!(self.poll_drain(cx))?;
        }
        Poll::Ready(Ok(len <= MAX_HELD))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Coalesce<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Coalesce<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !ready!(self.poll_room(cx, buf.len()))? {
            return Pin::new(&mut self.inner).poll_write(cx, buf);
        }
        self.held.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        if !ready!(self.poll_room(cx, len))? {
            return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        }
        for b in bufs {
            self.held.extend_from_slice(b);
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.held.is_empty() && !self.yielded {
            // Waking ourselves from inside our own poll puts this task at the back of the
            // scheduler's queue (tokio treats it as a yield), behind the request tasks that are
            // about to hand over their responses.
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        ready!(self.poll_drain(cx))?;
        self.yielded = false;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Counts the writes that reach the transport.
    struct Counting {
        writes: usize,
        bytes: Vec<u8>,
    }

    impl AsyncWrite for Counting {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.writes += 1;
            self.bytes.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn writes_before_a_flush_leave_in_one_write_in_order() {
        let mut c = Coalesce::new(Counting {
            writes: 0,
            bytes: Vec::new(),
        });
        c.write_all(b"one ").await.unwrap();
        let two_three = [io::IoSlice::new(b"two "), io::IoSlice::new(b"three")];
        assert_eq!(c.write_vectored(&two_three).await.unwrap(), 9);
        assert_eq!(c.inner.writes, 0, "nothing is written before a flush");
        c.flush().await.unwrap();
        assert_eq!(
            (c.inner.writes, &c.inner.bytes[..]),
            (1, &b"one two three"[..])
        );
        c.flush().await.unwrap();
        assert_eq!(c.inner.writes, 1, "an empty flush writes nothing");
    }

    #[tokio::test]
    async fn held_bytes_stay_bounded_and_large_writes_pass_through() {
        let mut c = Coalesce::new(Counting {
            writes: 0,
            bytes: Vec::new(),
        });
        let chunk = vec![7u8; MAX_HELD / 2 + 1];
        c.write_all(&chunk).await.unwrap();
        c.write_all(&chunk).await.unwrap();
        assert_eq!(c.inner.writes, 1, "the first chunk went out to make room");
        assert!(c.held.len() <= MAX_HELD);
        c.write_all(&vec![8u8; MAX_HELD + 1]).await.unwrap();
        c.shutdown().await.unwrap();
        assert_eq!(c.inner.bytes.len(), 2 * chunk.len() + MAX_HELD + 1);
        assert!(c.inner.bytes.ends_with(&[8]) && c.inner.bytes[chunk.len() * 2] == 8);
    }

    #[tokio::test]
    async fn reads_and_a_real_socket_pair_work_through_it() {
        let (a, b) = tokio::io::duplex(1024);
        let mut a = Coalesce::new(a);
        let mut b = Coalesce::new(b);
        a.write_all(b"ping").await.unwrap();
        a.flush().await.unwrap();
        let mut got = [0u8; 4];
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
    }
}
