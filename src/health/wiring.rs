//! Health's part of startup: the components (`HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`, the
//! store and its target), the gRPC health service they are mirrored to, and the task that probes
//! the store once a second, so gRPC health watchers see Redis going away and coming back even
//! when no request is running.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

use super::Health;
use crate::background::{Background, every_second};
use ratelimitd_core::store::Store;

/// How health is judged.
#[derive(Debug, Clone, Default)]
pub(crate) struct HealthOptions {
    /// `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`: ready only once a domain is loaded.
    pub require_config: bool,
    /// What the store is (`REDIS_URL=… with REDIS_SOCKET_TYPE=…`), for the "store down" reason.
    pub store_target: String,
}

/// What health shares with the rest of the process.
#[derive(Debug)]
pub(crate) struct HealthDeps<'a> {
    /// The store whose health is a component.
    pub store: &'a Arc<dyn Store>,
    /// Where the probe task runs.
    pub background: Background<'a>,
}

/// The started health.
#[derive(Debug)]
pub(crate) struct HealthHandle {
    /// The components, which the reload pipeline, the policy database and the drain report to.
    pub health: Arc<Health>,
    /// The gRPC health service (`grpc.health.v1`), for the gRPC router.
    pub server: HealthServer<HealthService>,
}

/// Builds health over `deps.store` and starts probing the store.
pub(crate) fn start(options: HealthOptions, deps: HealthDeps<'_>) -> HealthHandle {
    let HealthDeps {
        store,
        background: mut bg,
    } = deps;
    let reporter = HealthReporter::new();
    let server = HealthServer::new(HealthService::from_health_reporter(reporter.clone()));
    let health = Health::new(store.clone(), options.require_config, reporter);
    let health = Arc::new(health.with_store_target(options.store_target));
    bg.spawn(watch_store(health.clone(), store.clone(), bg.stopped()));
    HealthHandle { health, server }
}

/// Probes the store once a second and republishes health when it changed.
async fn watch_store(
    health: Arc<Health>,
    store: Arc<dyn Store>,
    stop: impl std::future::Future<Output = ()>,
) {
    let last = AtomicBool::new(health.is_healthy());
    every_second(stop, || async {
        store.probe().await;
        let now = health.is_healthy();
        if last.swap(now, Ordering::Relaxed) != now {
            health.publish().await;
        }
    })
    .await;
}
