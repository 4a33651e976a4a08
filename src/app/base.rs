//! The first half of startup: what every feature builds on — the clocks, the live
//! configuration's handle, the store (with the fleet around the memory store), the stats, the
//! local fallback, Redis server time, the leases' release and health — each started from its own
//! options, in dependency order.

use std::sync::Arc;

use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::HealthService;

use super::parts::{self, StoreParts};
use super::{AppError, readers};
use crate::background::Background;
use crate::fleet::FleetHandle;
use crate::health::{Health, HealthDeps, HealthHandle};
use crate::metrics::{Metrics, MetricsDeps, MetricsHandle};
use crate::reload::ConfigHandle;
use crate::settings::Settings;
use crate::store::leases::{LeaseDeps, Release};
use crate::store::redis::heartbeat::{self, HeartbeatDeps};
use crate::store::redis::server_time::{self, ServerTime};
use ratelimitd_core::clock::{Clock, ManualClock};
use ratelimitd_core::limiter::StatsSink;
use ratelimitd_core::limiter::fallback::LocalFallback;

/// The started base parts.
pub(super) struct Base {
    /// The manual clock, when the settings asked for one (tests).
    pub(super) manual_clock: Option<Arc<ManualClock>>,
    /// The clock of decisions (Redis's with `REDIS_USE_SERVER_TIME`).
    pub(super) clock: Arc<dyn Clock>,
    /// The live configuration, empty until the configuration source's first load.
    pub(super) config: Arc<ConfigHandle>,
    /// The store, and typed handles on it.
    pub(super) stores: StoreParts,
    /// The fleet mode around the memory store (`FLEET_BIND`).
    pub(super) fleet: Option<FleetHandle>,
    /// The store nodes' health figures (Redis, memcached).
    pub(super) vitals: Option<Arc<crate::store::vitals::Vitals>>,
    /// The counters (`None` with `DISABLE_STATS`) and the limiter's sink.
    pub(super) metrics: Option<Arc<Metrics>>,
    /// Where the limiter reports each decision.
    pub(super) sink: Arc<dyn StatsSink>,
    /// The local fallback of `failure_mode: local`.
    pub(super) fallback: Arc<LocalFallback>,
    /// Redis server time's sync, spawned once the listeners are bound.
    pub(super) server_time: Option<ServerTime>,
    /// Gives the unspent leases back after the drain.
    pub(super) leases: Release,
    /// Health components.
    pub(super) health: Arc<Health>,
    /// gRPC health, mirrored from `health`.
    pub(super) health_server: HealthServer<HealthService>,
}

/// Starts the base parts, their tasks in `bg`.
pub(super) async fn start(settings: &Settings, bg: &mut Background<'_>) -> Result<Base, AppError> {
    let (manual_clock, mut clock) = parts::clocks(settings);
    let config = Arc::new(ConfigHandle::new());
    // The stats first: every part after them registers its own metrics with them.
    let metrics_deps = MetricsDeps {
        loads: readers::load_counts(&config),
        clock: &clock,
    };
    let MetricsHandle { metrics, sink } = crate::metrics::start(&settings.obs, metrics_deps);
    let mut stores = parts::store(settings, &clock).await?;
    if let Some(m) = &metrics {
        let (memory, redis) = (stores.memory.as_ref(), stores.redis.as_ref());
        crate::store::stats::register(m, memory, redis, stores.leases.as_ref());
    }
    let (redis, memcache) = (stores.redis.clone(), stores.memcache.clone());
    let vitals = crate::store::vitals::start(metrics.as_ref(), redis, memcache, bg.reborrow());
    let fleet = parts::fleet(
        settings,
        &mut stores,
        &clock,
        metrics.as_ref(),
        bg.reborrow(),
    )
    .await?;
    let fallback = Arc::new(LocalFallback::default());
    if let Some(redis) = &stores.redis {
        let wanted = readers::fallback_wanted(&settings.resilience, &config);
        let deps = HeartbeatDeps {
            redis,
            fallback: &fallback,
            clock: &clock,
            background: bg.reborrow(),
        };
        heartbeat::start(&settings.cache_key_prefix, wanted, deps);
    }
    let redis = stores.redis.clone();
    let (decides, manual) = (settings.redis.use_server_time, manual_clock.is_some());
    let server_time = server_time::start(redis, decides, manual, &mut clock).await;
    let lease_deps = LeaseDeps {
        store: &stores.store,
        clock: &clock,
        background: bg.reborrow(),
    };
    let leases = crate::store::leases::start(readers::config_version(&config), lease_deps);
    let health_deps = HealthDeps {
        store: &stores.store,
        background: bg.reborrow(),
    };
    let HealthHandle {
        health,
        server: health_server,
    } = crate::health::start(parts::health_options(settings), health_deps);
    Ok(Base {
        manual_clock,
        clock,
        config,
        stores,
        fleet,
        vitals,
        metrics,
        sink,
        fallback,
        server_time,
        leases,
        health,
        health_server,
    })
}
