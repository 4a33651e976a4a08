//! HTTP/1 servers (the main port, the debug port, Prometheus) under a connection cap and
//! timeouts: [`serve`] accepts through a [`Gate`] into [`Guarded`] connections and marks each
//! request in flight, so a keep-alive connection is closed after the idle timeout with no request
//! running, never during one. Each request carries its connection's [`Peer`] address.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::IncomingStream;
use tokio::net::{TcpListener, TcpStream};

use super::{Gate, Guarded, Tracker};
use crate::settings::ConnLimits;

/// A TCP listener whose accepted connections are capped and timed.
#[derive(Debug)]
pub struct GuardedListener {
    inner: TcpListener,
    gate: Gate,
    limits: ConnLimits,
}

impl GuardedListener {
    /// Caps `inner`, called `name` in logs, with `limits`.
    pub fn new(name: &'static str, inner: TcpListener, limits: ConnLimits) -> GuardedListener {
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
pub struct Peer(pub SocketAddr);

/// What each connection hands its requests: its activity and its peer.
#[derive(Debug, Clone)]
struct ConnInfo(Tracker, SocketAddr);

impl Connected<IncomingStream<'_, GuardedListener>> for ConnInfo {
    fn connect_info(stream: IncomingStream<'_, GuardedListener>) -> ConnInfo {
        ConnInfo(stream.io().tracker(), *stream.remote_addr())
    }
}

/// Marks the request in flight on its connection while the handler runs (the responses here are
/// whole bodies, written as soon as the handler returns), and tags it with its [`Peer`].
async fn track(
    ConnectInfo(ConnInfo(t, peer)): ConnectInfo<ConnInfo>,
    mut req: Request,
    next: Next,
) -> Response {
    let _busy = t.0.begin();
    req.extensions_mut().insert(Peer(peer));
    next.run(req).await
}

/// Serves `router` on `listener` (called `name` in logs) under `limits` until `stop`, then
/// finishes the requests in flight.
pub async fn serve(
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
