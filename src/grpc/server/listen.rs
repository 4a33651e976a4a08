//! The gRPC listener: TCP (`GRPC_HOST:GRPC_PORT`) or a unix socket (`GRPC_UDS`), in plaintext or
//! TLS, through an accept loop that hands finished connections to [`super::conn`] (TLS
//! handshakes run concurrently so a slow client cannot hold up the others). Writes go through
//! [`Coalesce`], so responses that are ready together leave in one system call.
//!
//! Connection age: as grpc-go does, a connection gets a GOAWAY at `GRPC_MAX_CONNECTION_AGE` ±10%
//! (drawn for each connection, [`super::conn`] sends it) and is closed hard at that age +
//! grace, which [`Conn`] enforces.
//!
//! Connection cap and timeouts: the loop takes a permit of `GRPC_MAX_CONNECTIONS` before each
//! accept and wraps the socket in [`Guarded`] (below TLS, so handshakes count and are timed too);
//! each connection's [`Tracker`] goes with it ([`ConnInfo`]), where
//! [`super::idle::begin`] marks RPCs in flight for `GRPC_MAX_CONNECTION_IDLE` and moves a
//! connection with a long-lived stream to the `GRPC_MAX_STREAM_CONNECTIONS` gate.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::mpsc;

use super::coalesce::Coalesce;
use super::options::Options;
use crate::listener::{ConnLimits, Gate, Guarded, Tracker};

/// A bound gRPC socket, which [`super::serve`] takes connections from.
#[derive(Debug)]
pub(crate) enum Listener {
    /// `GRPC_HOST:GRPC_PORT`.
    Tcp(TcpListener),
    /// `GRPC_UDS`, with the socket file's path.
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// Binds the unix socket `path` (`GRPC_UDS`). A socket file left by a previous run is removed
    /// first, as it would make the bind fail; anything else at `path` is not ours to remove, and
    /// the bind then fails.
    pub(crate) fn unix(path: &Path) -> io::Result<Listener> {
        if std::fs::symlink_metadata(path)
            .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()))
        {
            std::fs::remove_file(path)?;
        }
        Ok(Listener::Unix(
            UnixListener::bind(path)?,
            path.to_path_buf(),
        ))
    }
}

trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

/// One accepted (and, with TLS, handshaken) connection, whatever the transport; it fails every
/// read and write once its deadline (connection age + grace) has passed.
pub(super) struct Conn {
    io: Box<dyn Io>,
    /// When it gets a GOAWAY: `GRPC_MAX_CONNECTION_AGE`, jittered.
    age: Option<Duration>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    tracker: Tracker,
    peer: Option<SocketAddr>,
}

/// What each gRPC connection hands its requests: its activity, which
/// [`super::idle::begin`] marks them in, and its client's address (TCP only).
#[derive(Debug, Clone)]
pub(super) struct ConnInfo {
    pub(super) tracker: Tracker,
    pub(super) peer: Option<SocketAddr>,
}

impl Conn {
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        match self.deadline.as_mut().map(|d| d.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "GRPC_MAX_CONNECTION_AGE + GRPC_MAX_CONNECTION_AGE_GRACE reached",
            )),
            _ => Ok(()),
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut *self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.check(cx)?;
        Pin::new(&mut *self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.check(cx)?;
        Pin::new(&mut *self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io).poll_shutdown(cx)
    }
}

impl Conn {
    /// How long after its accept the connection gets a GOAWAY (`GRPC_MAX_CONNECTION_AGE`, with
    /// this connection's jitter).
    pub(super) fn age(&self) -> Option<Duration> {
        self.age
    }

    /// The connection's activity and client address.
    pub(super) fn info(&self) -> ConnInfo {
        ConnInfo {
            tracker: self.tracker.clone(),
            peer: self.peer,
        }
    }
}

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a refused handshake's TLS alert may take to leave before the connection is dropped.
const ALERT_TIMEOUT: Duration = Duration::from_secs(1);

impl Listener {
    /// Accepts one connection under `gate`'s cap (waiting for room first) and `limits`.
    async fn accept(
        &self,
        gate: &Gate,
        streams: &Arc<Gate>,
        limits: &ConnLimits,
    ) -> io::Result<(Box<dyn Io>, ConnInfo)> {
        let permit = gate.admit().await;
        let guard = |s: Box<dyn Io>, peer| {
            let s = Guarded::with_streams(s, permit, limits, Some(streams.clone()));
            let tracker = s.tracker();
            (Box::new(s) as Box<dyn Io>, ConnInfo { tracker, peer })
        };
        match self {
            Listener::Tcp(l) => {
                let (s, peer) = l.accept().await?;
                // Small request/response messages: do not let Nagle delay them (Coalesce
                // batches what is ready at once instead, without waiting for an ACK).
                let _ = s.set_nodelay(true);
                Ok(guard(Box::new(Coalesce::new(s)), Some(peer)))
            }
            Listener::Unix(l, _) => Ok(guard(Box::new(Coalesce::new(l.accept().await?.0)), None)),
        }
    }
}

/// `age` scaled by a factor between 0.9 and 1.1, `draw` (in [0, 1)) placing it.
fn jittered(age: Duration, draw: f64) -> Duration {
    age.mul_f64(0.9 + 0.2 * draw.clamp(0.0, 1.0))
}

/// Accepts connections on `listener` (at most `limits.max_connections` of `options` at once, plus
/// at most `stream_connections` moved to the streams gate) until `tx` is closed (the server
/// stopped taking them) and sends them on `tx`; each gets a GOAWAY at `max_connection_age` (±10%
/// for each connection, as grpc-go does, so that connections opened together do not all reconnect
/// together) and is closed hard `max_connection_age_grace` later.
pub(super) async fn accept_loop(listener: Listener, options: Options, tx: mpsc::Sender<Conn>) {
    let Options {
        tls,
        max_connection_age: age,
        max_connection_age_grace: grace,
        limits,
        stream_connections,
    } = options;
    let gate = Gate::new("gRPC", limits.max_connections);
    let streams = Arc::new(Gate::new("gRPC streams", stream_connections));
    let conn = move |io: Box<dyn Io>, info: ConnInfo| {
        let age = age.map(|a| jittered(a, fastrand::f64()));
        Conn {
            io,
            age,
            deadline: (age.zip(grace)).map(|(a, g)| Box::pin(tokio::time::sleep(a + g))),
            tracker: info.tracker,
            peer: info.peer,
        }
    };
    loop {
        let (io, info) = tokio::select! {
            _ = tx.closed() => return,
            r = listener.accept(&gate, &streams, &limits) => match r {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "gRPC accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(tls) = &tls else {
            if tx.send(conn(io, info)).await.is_err() {
                return;
            }
            continue;
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
        let tx = tx.clone();
        tokio::spawn(async move {
            let handshake = acceptor.accept(io).into_fallible();
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
                Ok(Ok(stream)) => {
                    let _ = tx.send(conn(Box::new(stream), info)).await;
                }
                Ok(Err((e, mut io))) => {
                    tracing::debug!(error = %e, "TLS handshake failed");
                    // The alert that says why (no client certificate, an unknown CA, a name
                    // the SAN check refused) sits in the write coalescer: send it before the
                    // connection closes, so the client learns the reason rather than an EOF.
                    let _ = tokio::time::timeout(ALERT_TIMEOUT, io.shutdown()).await;
                }
                Err(_) => tracing::debug!("TLS handshake timed out"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_ages_spread_over_ten_percent_either_side() {
        let age = Duration::from_secs(100);
        assert_eq!(jittered(age, 0.0), Duration::from_secs(90));
        assert_eq!(jittered(age, 0.5), Duration::from_secs(100));
        assert!(jittered(age, 0.999_999) < Duration::from_secs(110));
        // Out-of-range draws stay within the window.
        assert_eq!(jittered(age, -1.0), Duration::from_secs(90));
        assert_eq!(jittered(age, 2.0), Duration::from_secs(110));
        // A seeded run of connections: every age in the window, both halves of it used.
        let mut rng = fastrand::Rng::with_seed(11);
        let ages: Vec<Duration> = (0..1000).map(|_| jittered(age, rng.f64())).collect();
        assert!(ages.iter().all(|a| (90..110).contains(&a.as_secs())));
        assert!(ages.iter().any(|a| a.as_secs() < 95) && ages.iter().any(|a| a.as_secs() >= 105));
    }
}
