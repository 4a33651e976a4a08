//! The service's parts built from settings: the clocks, the store (and the fleet around the
//! memory store), health's options, the limiter options.

use std::sync::Arc;

use super::AppError;
use crate::background::Background;
use crate::fleet::FleetHandle;
use crate::health::HealthOptions;
use crate::metrics::Metrics;
use crate::settings::Settings;
use crate::store::Backend;
use crate::store::memcache::MemcacheStore;
use crate::store::redis::RedisStore;
use crate::store::stats::LeaseReader;
use ratelimitd_core::clock::{Clock, ManualClock, SystemClock, Timestamp};
use ratelimitd_core::limiter::{HeaderNames, KeyBuilder, LimiterOptions};
use ratelimitd_core::random::{Random, SeededRandom};
use ratelimitd_core::store::Store;
use ratelimitd_core::store::memory::MemoryStore;

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

/// The store the settings ask for, and typed handles on it for the tasks that need them.
pub(super) struct StoreParts {
    /// The store the limiter uses.
    pub(super) store: Arc<dyn Store>,
    /// The memory store, for its sweeper and key gauge.
    pub(super) memory: Option<Arc<MemoryStore>>,
    /// The Redis store, for `REDIS_USE_SERVER_TIME`.
    pub(super) redis: Option<Arc<RedisStore>>,
    /// The memcached store, for its health figures.
    pub(super) memcache: Option<Arc<MemcacheStore>>,
    /// The lease totals of a store that leases (Redis, DynamoDB), for the metrics.
    pub(super) leases: Option<LeaseReader>,
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
                memcache: None,
                leases: None,
            }
        }
        Backend::Redis => redis(settings, clock).await?,
        #[cfg(feature = "dynamodb")]
        Backend::Dynamodb => dynamodb(settings, clock).await?,
        // The settings refuse BACKEND_TYPE=dynamodb in a build without the store.
        #[cfg(not(feature = "dynamodb"))]
        Backend::Dynamodb => {
            return Err(AppError::Store(
                ratelimitd_core::store::StoreError::Unavailable(
                    "this build has no DynamoDB store (feature dynamodb)".into(),
                ),
            ));
        }
        Backend::Memcache => memcache(settings, clock).await,
    })
}

/// The Redis store, once it answers (as the startup settings allow), a breaker per target.
async fn redis(settings: &Settings, clock: &Arc<dyn Clock>) -> Result<StoreParts, AppError> {
    // Boxed: the connect futures are deep, and the service's start future holds them.
    let redis = Box::pin(RedisStore::start(&settings.redis))
        .await
        .map_err(AppError::Store)?
        .with_breakers(&settings.resilience, clock);
    let redis = Arc::new(redis);
    let r = redis.clone();
    Ok(StoreParts {
        store: redis.clone(),
        memory: None,
        redis: Some(redis),
        memcache: None,
        leases: Some(Arc::new(move || r.lease_totals())),
    })
}

/// The DynamoDB store; one that does not answer yet is started anyway (with a warning): its
/// limits answer by their failure mode until it does.
#[cfg(feature = "dynamodb")]
async fn dynamodb(settings: &Settings, clock: &Arc<dyn Clock>) -> Result<StoreParts, AppError> {
    let store = crate::store::dynamodb::DynamoStore::new(
        &settings.dynamodb,
        &settings.resilience,
        &settings.redis,
        clock,
    )
    .await
    .map_err(AppError::Store)?;
    store.probe().await;
    if !store.is_healthy() {
        tracing::warn!(target = %store_target(settings), "DynamoDB does not answer yet; limits answer by their failure_mode until it does");
    }
    let store = Arc::new(store);
    let s = store.clone();
    Ok(StoreParts {
        store,
        memory: None,
        redis: None,
        memcache: None,
        leases: Some(Arc::new(move || s.lease_totals())),
    })
}

/// The memcached store; servers that do not answer yet are warned about, as for DynamoDB.
async fn memcache(settings: &Settings, clock: &Arc<dyn Clock>) -> StoreParts {
    let memcache = MemcacheStore::new(
        &settings.memcache,
        &settings.resilience,
        &settings.redis,
        clock,
    );
    memcache.probe().await;
    if !memcache.is_healthy() {
        tracing::warn!(servers = ?settings.memcache.servers, "memcached does not answer yet; limits answer by their failure_mode until it does");
    }
    let memcache = Arc::new(memcache);
    StoreParts {
        store: memcache.clone(),
        memory: None,
        redis: None,
        memcache: Some(memcache),
        leases: None,
    }
}

/// With `FLEET_BIND` on the memory store: the fleet started around it, whose store (adding the
/// peers' counts) then replaces the memory store as the limiter's.
pub(super) async fn fleet(
    settings: &Settings,
    stores: &mut StoreParts,
    clock: &Arc<dyn Clock>,
    metrics: Option<&Arc<Metrics>>,
    bg: Background<'_>,
) -> Result<Option<FleetHandle>, AppError> {
    let (Some(options), Some(memory)) = (&settings.fleet, &stores.memory) else {
        return Ok(None);
    };
    let fleet = crate::fleet::start(options, memory.clone(), clock.clone(), metrics, bg).await?;
    stores.store = fleet.store.clone();
    Ok(Some(fleet))
}

/// How health is judged: `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`, and the store's target.
pub(super) fn health_options(settings: &Settings) -> HealthOptions {
    HealthOptions {
        require_config: settings.healthy_with_at_least_one_config_loaded,
        store_target: store_target(settings),
    }
}

/// What the store is, as the settings that chose it say (`memory`, each Redis target, or the
/// memcached servers).
pub(super) fn store_target(settings: &Settings) -> String {
    match settings.backend {
        Backend::Memory => "memory".into(),
        Backend::Redis => RedisStore::describe_targets(&settings.redis).join("; "),
        Backend::Memcache => format!("MEMCACHE_HOST_PORT={}", settings.memcache.servers.join(",")),
        Backend::Dynamodb => {
            let d = &settings.dynamodb;
            let mut target = format!("DYNAMODB_TABLE={}", d.table);
            if let Some(region) = &d.region {
                target += &format!(" DYNAMODB_REGION={region}");
            }
            if let Some(endpoint) = &d.endpoint {
                target += &format!(" DYNAMODB_ENDPOINT={endpoint}");
            }
            target
        }
    }
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
