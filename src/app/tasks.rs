//! The service's background tasks that no part owns yet: HTTP servers, the memory-store sweeper
//! and the instance heartbeat, each ending when the shutdown flag turns true.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinSet;

pub(super) use crate::background::{Background, every_second};
use crate::clock::Clock;
use crate::config::FailureMode;
use crate::limiter::fallback::LocalFallback;
use crate::listener::ConnLimits;
use crate::reload::ConfigHandle;
use crate::settings::Settings;
use crate::store::Store;
use crate::store::memory::MemoryStore;
use crate::store::redis::RedisStore;
use crate::store::redis::heartbeat::instances_key;

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

/// The local fallback the limiter uses for `failure_mode: local`; with Redis, kept up to date by
/// the heartbeat task spawned into `tasks`, which runs while some limit of the current `config`
/// (or `DEFAULT_FAILURE_MODE`) says `local` — a deployment that never falls back locally writes
/// no instance key.
pub(super) fn local_fallback(
    settings: &Settings,
    redis: Option<&Arc<RedisStore>>,
    config: &Arc<ConfigHandle>,
    clock: &Arc<dyn Clock>,
    bg: &mut Background<'_>,
) -> Arc<LocalFallback> {
    let fallback = Arc::new(LocalFallback::default());
    if let Some(redis) = redis {
        let default_local = settings.resilience.default_failure_mode == FailureMode::Local;
        let config = config.clone();
        let wanted = move || default_local || uses_local(&config);
        let beat = Heartbeat {
            redis: redis.clone(),
            fallback: fallback.clone(),
            clock: clock.clone(),
            key: instances_key(&settings.cache_key_prefix),
        };
        bg.spawn(heartbeat(beat, wanted, bg.stopped()));
    }
    fallback
}

/// True when some limit of the current configuration names `failure_mode: local`.
fn uses_local(config: &ConfigHandle) -> bool {
    let Some(snapshot) = config.snapshot() else {
        return false;
    };
    snapshot.config.limits().iter().any(|l| {
        std::iter::once(*l)
            .chain(l.also.iter().map(|a| a.as_ref()))
            .any(|l| l.failure_mode == Some(FailureMode::Local))
    })
}

/// What [`heartbeat`] announces through and updates.
struct Heartbeat {
    redis: Arc<RedisStore>,
    fallback: Arc<LocalFallback>,
    clock: Arc<dyn Clock>,
    /// The instances' sorted set (`CACHE_KEY_PREFIX` in front).
    key: String,
}

/// Announces this instance through Redis once a second and keeps the local fallback's instance
/// count; once Redis answers every target again, drops the fallback's local counts (the store's
/// counts are the truth again). A failed heartbeat keeps the last count and logs nothing (the
/// breakers log the outage once).
async fn heartbeat(beat: Heartbeat, wanted: impl Fn() -> bool, stop: impl Future<Output = ()>) {
    let Heartbeat {
        redis,
        fallback,
        clock,
        key,
    } = beat;
    let id = format!("{:016x}", fastrand::u64(..));
    every_second(stop, || async {
        if !wanted() {
            return;
        }
        if let Ok(live) = redis.heartbeat(&key, &id, clock.now()).await {
            fallback.instances().seen(live);
            if redis.is_healthy() && !fallback.is_empty() {
                let dropped = fallback.forget();
                tracing::info!(
                    keys = dropped,
                    "Redis is back: local fallback counts dropped"
                );
            }
        }
    })
    .await;
}
