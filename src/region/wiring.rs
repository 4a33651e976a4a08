//! Building the regional parts from the settings: the shares the limiter asks (always; empty
//! without `REGION`), and — with `GLOBAL_REDIS_URL` — the global store and the sync task, one
//! per instance. Connecting never holds the ports longer than the Redis store's first attempt:
//! an unreachable global store is dialled in the background while the region enforces static
//! shares as listed and demand-following ones at their floors.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use super::RegionSettings;
use super::{BREAKER_TARGET, RegionSync};
use crate::background::Background;
use crate::metrics::Metrics;
use crate::store::Resilience;
use crate::store::redis::RedisConfig;
use crate::store::redis::RedisStore;
use ratelimitd_core::clock::Clock;
use ratelimitd_core::region::RegionShares;
use ratelimitd_core::resilience::{Breaker, BreakerReport};

/// What the regional parts share with the rest of the process.
pub(crate) struct RegionDeps<'a> {
    /// The decision clock.
    pub clock: &'a Arc<dyn Clock>,
    /// The regional Redis settings, whose TLS files and timeouts the global store uses too.
    pub redis: &'a RedisConfig,
    /// The circuit breaker settings, for the global store's own breaker.
    pub resilience: &'a Resilience,
    /// On the manual clock (tests), rounds run only when asked ([`RegionSync::round`]).
    pub manual: bool,
    /// Where the sync task runs.
    pub background: Background<'a>,
    /// The stats the regional families register with (`None` with `DISABLE_STATS`).
    pub metrics: Option<&'a Arc<Metrics>>,
    /// The configuration in service, whose regional limits the share gauge reads.
    pub config: super::LiveConfig,
}

impl std::fmt::Debug for RegionDeps<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegionDeps")
            .field("manual", &self.manual)
            .field("metrics", &self.metrics.is_some())
            .finish_non_exhaustive()
    }
}

/// The regional parts of a running service.
#[derive(Debug, Clone)]
pub struct Regional {
    /// The shares the limiter asks.
    pub shares: Arc<RegionShares>,
    /// The sync with the global store, with `GLOBAL_REDIS_URL`.
    pub sync: Option<Arc<RegionSync>>,
    /// The decision clock, against which the shares' lease is read for listings.
    pub clock: Arc<dyn Clock>,
}

/// The regional parts for `settings`, their metrics registered.
pub(crate) async fn start(settings: &RegionSettings, deps: RegionDeps<'_>) -> Regional {
    let (metrics, config) = (deps.metrics, deps.config.clone());
    let regional = connect(settings, deps).await;
    if let Some(m) = metrics {
        super::metrics::register(m, &regional, config);
    }
    regional
}

/// The regional parts for `settings`.
async fn connect(settings: &RegionSettings, mut deps: RegionDeps<'_>) -> Regional {
    let clock = deps.clock.clone();
    let Some(region) = settings.region.clone() else {
        return Regional {
            shares: Arc::new(RegionShares::default()),
            sync: None,
            clock,
        };
    };
    let shares = Arc::new(RegionShares::new(region));
    let Some(global) = &settings.global else {
        return Regional {
            shares,
            sync: None,
            clock,
        };
    };
    let cfg = RedisConfig {
        main: global.clone(),
        per_second: None,
        response_timeout: settings.global_response_timeout,
        // Never wait for it: the region serves on its last shares meanwhile.
        startup_max_elapsed: Duration::ZERO,
        local_cache_size_in_bytes: 0,
        lease_default_size: 0,
        use_server_time: false,
        main_prefix: "GLOBAL_REDIS_",
        ..deps.redis.clone()
    };
    let store = Box::pin(RedisStore::start(&cfg)).await;
    let store = match store {
        Ok(s) => Arc::new(s),
        Err(e) => {
            tracing::error!(error = %e, "the global store (GLOBAL_REDIS_URL) cannot be used; demand-following shares stay at their floors");
            return Regional {
                shares,
                sync: None,
                clock,
            };
        }
    };
    let member = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    // Its own breaker: the global store failing says nothing about the regional one.
    let r = deps.resilience;
    let breaker = (r.breaker_failures > 0).then(|| {
        let clock = deps.clock.clone();
        Breaker::new(
            BREAKER_TARGET,
            r.breaker_failures,
            r.breaker_cooldown,
            clock,
        )
    });
    let timing = (settings.sync_interval, deps.clock.clone());
    let sync = RegionSync::new(shares.clone(), store, member, timing, breaker);
    let sync = Arc::new(sync);
    if !deps.manual {
        let stopped = deps.background.stopped();
        deps.background.spawn(sync.clone().run(stopped));
    }
    Regional {
        shares,
        sync: Some(sync),
        clock,
    }
}

impl Regional {
    /// The global store's breaker (target `global`; none without a global store or breakers).
    pub fn breaker_reports(&self) -> Vec<BreakerReport> {
        (self.sync.iter())
            .flat_map(|s| s.breaker_reports())
            .collect()
    }
}
