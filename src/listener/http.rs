//! HTTP/1 servers (the main port, the debug port, Prometheus) under a connection cap and
//! timeouts: [`serve`] accepts through a [`Gate`] into [`Guarded`] connections and marks each
//! request in flight, so a keep-alive connection is closed after the idle timeout with no request
//! running, never during one. Each request carries its connection's [`Peer`] address.
//!
//! Slow clients: [`Guarded`] closes a connection whose request head is not complete within
//! `HTTP_HEADER_READ_TIMEOUT` of its first byte, and every request body here must arrive within
//! `HTTP_BODY_TIMEOUT` of its head (`Deadline`), or reading it fails with [`BodyTimeout`].

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::IncomingStream;
use futures_util::Stream;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;

use super::{ConnLimits, Gate, Guarded, Tracker};

/// A TCP listener whose accepted connections are capped and timed.
#[derive(Debug)]
pub(crate) struct GuardedListener {
    inner: TcpListener,
    gate: Gate,
    limits: ConnLimits,
}

impl GuardedListener {
    /// Caps `inner`, called `name` in logs, with `limits`.
    pub(crate) fn new(
        name: &'static str,
        inner: TcpListener,
        limits: ConnLimits,
    ) -> GuardedListener {
        GuardedListener {
            inner,
            gate: Gate::new(name, limits.max_connections),
            limits,
        }
    }
}

impl axum::serve::Listener for GuardedListener {
    type Io = Guarded<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let permit = self.gate.admit().await;
            match self.inner.accept().await {
                Ok((s, addr)) => return (Guarded::new(s, permit, &self.limits), addr),
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(listener = self.gate.name(), error = %e, "accept failed");
                    drop(permit);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// The address of the client of a request, in its extensions (the status page is open to
/// loopback peers only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Peer(pub SocketAddr);

/// What each connection hands its requests: its activity, its peer and the body timeout.
#[derive(Debug, Clone)]
struct ConnInfo(Tracker, SocketAddr, Option<Duration>);

impl Connected<IncomingStream<'_, GuardedListener>> for ConnInfo {
    fn connect_info(stream: IncomingStream<'_, GuardedListener>) -> ConnInfo {
        let io = stream.io();
        ConnInfo(io.tracker(), *stream.remote_addr(), io.body_timeout())
    }
}

/// A request body not received in full within `HTTP_BODY_TIMEOUT` of the request's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("request body not received within {0:?} (HTTP_BODY_TIMEOUT)")]
pub(crate) struct BodyTimeout(pub Duration);

/// A body's data, failing with [`BodyTimeout`] once its deadline passes.
struct Deadline {
    inner: axum::body::BodyDataStream,
    sleep: Pin<Box<Sleep>>,
    after: Duration,
}

impl Stream for Deadline {
    type Item = Result<Bytes, BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Poll::Ready(item) = Pin::new(&mut self.inner).poll_next(cx) {
            return Poll::Ready(item.map(|r| r.map_err(BoxError::from)));
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout(self.after))))),
            Poll::Pending => Poll::Pending,
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Marks the request in flight on its connection while the handler runs (the responses here are
/// whole bodies, written as soon as the handler returns), tags it with its [`Peer`], and puts
/// `HTTP_BODY_TIMEOUT` on its body (a body known to be empty needs none).
async fn track(
    ConnectInfo(ConnInfo(t, peer, body_timeout)): ConnectInfo<ConnInfo>,
    mut req: Request,
    next: Next,
) -> Response {
    let _busy = t.0.begin();
    req.extensions_mut().insert(Peer(peer));
    if let Some(after) = body_timeout.filter(|_| !req.body().is_end_stream()) {
        req = req.map(|body| {
            Body::from_stream(Deadline {
                inner: body.into_data_stream(),
                sleep: Box::pin(tokio::time::sleep(after)),
                after,
            })
        });
    }
    next.run(req).await
}

/// Serves `router` on `listener` (called `name` in logs) under `limits` until `stop`, then
/// finishes the requests in flight.
pub(crate) async fn serve(
    name: &'static str,
    listener: TcpListener,
    limits: ConnLimits,
    router: Router,
    stop: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let app = router
        .layer(axum::middleware::from_fn(track))
        .into_make_service_with_connect_info::<ConnInfo>();
    axum::serve(GuardedListener::new(name, listener, limits), app)
        .with_graceful_shutdown(stop)
        .await
}
