//! The service's parts built from settings: the clocks, the store, health, the stats sink, the
//! limiter options.

use std::sync::Arc;

use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

use super::AppError;
use crate::clock::{Clock, ManualClock, SystemClock, Timestamp};
use crate::health::Health;
use crate::limiter::{HeaderNames, KeyBuilder, LimiterOptions, NoStats, StatsSink};
use crate::metrics::{ConfigLoads, KeyCount, LoadCounts, Metrics};
use crate::random::{Random, SeededRandom};
use crate::reload::ConfigHandle;
use crate::settings::{Backend, Settings, StatsSinkKind};
use crate::store::Store;
use crate::store::memcache::MemcacheStore;
use crate::store::memory::MemoryStore;
use crate::store::redis::RedisStore;

/// The manual clock when the settings ask for one (tests), and the clock of decisions: that one,
/// else the system's.
pub(super) fn clocks(settings: &Settings) -> (Option<Arc<ManualClock>>, Arc<dyn Clock>) {
    let manual = (settings.test_manual_clock)
        .map(|secs| Arc::new(ManualClock::new(Timestamp::from_secs(secs))));
    let clock: Arc<dyn Clock> = match &manual {
        Some(c) => c.clone(),
        None => Arc::new(SystemClock),
    };
    (manual, clock)
}

/// The source soft limits draw from: seeded by `RATELIMITD_TEST_RANDOM_SEED` (tests), else per
/// process.
pub(super) fn random(settings: &Settings) -> Arc<dyn Random> {
    Arc::new(match settings.test_random_seed {
        Some(seed) => SeededRandom::new(seed),
        None => SeededRandom::from_entropy(),
    })
}

/// The health components over `store`, and the gRPC health service they are mirrored to.
pub(super) fn health(
    settings: &Settings,
    store: &Arc<dyn Store>,
) -> (Arc<Health>, HealthServer<HealthService>) {
    let reporter = HealthReporter::new();
    let server = HealthServer::new(HealthService::from_health_reporter(reporter.clone()));
    let loaded = settings.healthy_with_at_least_one_config_loaded;
    let health = Health::new(store.clone(), loaded, reporter);
    (
        Arc::new(health.with_store_target(store_target(settings))),
        server,
    )
}

/// The store the settings ask for, and typed handles on it for the tasks that need them.
pub(super) struct StoreParts {
    /// The store the limiter uses.
    pub(super) store: Arc<dyn Store>,
    /// The memory store, for its sweeper and key gauge.
    pub(super) memory: Option<Arc<MemoryStore>>,
    /// The Redis store, for `REDIS_USE_SERVER_TIME`.
    pub(super) redis: Option<Arc<RedisStore>>,
}

/// Builds the store the settings ask for (waiting for Redis as the startup settings allow), with
/// a circuit breaker per Redis target timed by `clock`.
pub(super) async fn store(
    settings: &Settings,
    clock: &Arc<dyn Clock>,
) -> Result<StoreParts, AppError> {
    Ok(match settings.backend {
        Backend::Memory => {
            let limits = (settings.memory_max_keys, settings.limits.memory_max_bytes);
            let m = Arc::new(MemoryStore::with_limits(limits.0, limits.1));
            StoreParts {
                store: m.clone(),
                memory: Some(m),
                redis: None,
            }
        }
        Backend::Redis => {
            // Boxed: the connect futures are deep, and the service's start future holds them.
            let redis = Box::pin(RedisStore::start(&settings.redis))
                .await
                .map_err(AppError::Store)?
                .with_breakers(&settings.resilience, clock);
            let redis = Arc::new(redis);
            StoreParts {
                store: redis.clone(),
                memory: None,
                redis: Some(redis),
            }
        }
        Backend::Memcache => {
            let memcache = MemcacheStore::new(settings, clock);
            memcache.probe().await;
            if !memcache.is_healthy() {
                tracing::warn!(servers = ?settings.memcache.servers, "memcached does not answer yet; limits answer by their failure_mode until it does");
            }
            StoreParts {
                store: Arc::new(memcache),
                memory: None,
                redis: None,
            }
        }
    })
}

/// What the store is, as the settings that chose it say (`memory`, each Redis target, or the
/// memcached servers).
pub(super) fn store_target(settings: &Settings) -> String {
    match settings.backend {
        Backend::Memory => "memory".into(),
        Backend::Redis => RedisStore::describe_targets(&settings.redis).join("; "),
        Backend::Memcache => format!("MEMCACHE_HOST_PORT={}", settings.memcache.servers.join(",")),
    }
}

/// The service's counters (`None` with `DISABLE_STATS`) and the sink the limiter reports to.
pub(super) fn metrics(
    settings: &Settings,
    stores: &StoreParts,
    config: &Arc<ConfigHandle>,
    clock: &Arc<dyn Clock>,
) -> (Option<Arc<Metrics>>, Arc<dyn StatsSink>) {
    let memory = stores.memory.as_ref();
    let metrics = (settings.obs.sink != StatsSinkKind::Disabled).then(|| {
        let keys: Option<KeyCount> = memory
            .cloned()
            .map(|m| -> KeyCount { Arc::new(move || (m.len(), m.bytes())) });
        let statsd = settings.obs.sink == StatsSinkKind::Statsd;
        let config = config.clone();
        let loads: LoadCounts = Arc::new(move || ConfigLoads {
            successes: config.load_successes(),
            failures: config.load_failures(),
            rules_shadowed: config.clashes().len() as u64,
        });
        let metrics = Metrics::new(settings.obs.stats_max_keys, loads, keys, statsd)
            .with_clock(clock.clone());
        Arc::new(match stores.redis.clone() {
            Some(redis) => {
                let leases = redis.clone();
                metrics
                    .with_breakers(Arc::new(move || redis.breaker_reports()))
                    .with_leases(Arc::new(move || leases.lease_totals()))
            }
            None => metrics,
        })
    });
    let sink: Arc<dyn StatsSink> = match &metrics {
        Some(m) => m.clone(),
        None => Arc::new(NoStats),
    };
    (metrics, sink)
}

/// Service-wide limiter switches from the Go settings.
pub(super) fn limiter_options(s: &Settings) -> LimiterOptions {
    LimiterOptions {
        shadow_mode: s.shadow_mode,
        quota_mode: s.quota_mode,
        headers: s.limit_response_headers_enabled.then(|| HeaderNames {
            limit: s.limit_limit_header.clone(),
            remaining: s.limit_remaining_header.clone(),
            reset: s.limit_reset_header.clone(),
        }),
        dynamic_metadata: s.response_dynamic_metadata,
        keys: KeyBuilder::new(s.cache_key_prefix.clone(), s.cache_key_format),
        near_limit_ratio: s.near_limit_ratio,
        soft_breach_ratio: s.soft_breach_ratio,
        caps: s.limits,
        default_failure_mode: s.resilience.default_failure_mode,
    }
}
