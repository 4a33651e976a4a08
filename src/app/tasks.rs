//! The HTTP servers' tasks, each ending when its stop future resolves. (The other background
//! tasks are their parts' own: each part's `start` spawns them into a [`Background`].)

use std::future::Future;

use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::listener::ConnLimits;

/// Serves `router` on `listener` (called `name` in logs) under `limits` until `stop`, then
/// finishes requests in flight.
pub(super) fn serve_http(
    tasks: &mut JoinSet<()>,
    name: &'static str,
    listener: TcpListener,
    limits: ConnLimits,
    router: axum::Router,
    stop: impl Future<Output = ()> + Send + 'static,
) {
    tasks.spawn(async move {
        if let Err(e) = crate::listener::http::serve(name, listener, limits, router, stop).await {
            tracing::error!(error = %e, "HTTP server failed");
        }
    });
}
