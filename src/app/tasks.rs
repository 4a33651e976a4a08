//! The service's background tasks: HTTP servers, the memory-store sweeper and the store health
//! probe, each ending when the shutdown flag turns true.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::clock::Clock;
use crate::health::Health;
use crate::settings::ConnLimits;
use crate::store::Store;
use crate::store::memory::MemoryStore;

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

/// Resolves when the shutdown flag turns true (or its sender is gone).
pub(super) async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// Runs `round` once a second until `stop` (a round in progress finishes first).
pub(super) async fn every_second<F, Fut>(stop: impl Future<Output = ()>, mut round: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = tick.tick() => round().await,
        }
    }
}

/// Reclaims expired memory-store entries once a second, so memory follows live keys only.
pub(super) async fn sweep_expired(
    store: Arc<MemoryStore>,
    clock: Arc<dyn Clock>,
    stop: impl Future<Output = ()>,
) {
    every_second(stop, || {
        store.sweep_at(clock.now());
        std::future::ready(())
    })
    .await;
}

/// Probes the store once a second and republishes health when it changed, so gRPC health
/// watchers see Redis going away and coming back even when no request is running.
pub(super) async fn watch_store_health(
    health: Arc<Health>,
    store: Arc<dyn Store>,
    stop: impl Future<Output = ()>,
) {
    let last = std::sync::atomic::AtomicBool::new(health.is_healthy());
    every_second(stop, || async {
        store.probe().await;
        let now = health.is_healthy();
        if last.swap(now, std::sync::atomic::Ordering::Relaxed) != now {
            health.publish().await;
        }
    })
    .await;
}
