//! The stats' part of startup: the counters the settings ask for (none with `DISABLE_STATS`),
//! with the readers they export at scrape or flush time (configuration loads, the memory store's
//! size, the Redis leases, the fleet's gauges; the breakers are set once the global store's
//! sync exists), and the sink the limiter reports
//! each decision to. The sink's listener or flusher starts with the other listeners
//! ([`super::sinks::start`]).

use std::sync::Arc;

use super::{GaugeReport, KeyCount, LoadCounts, Metrics, Observability, StatsSinkKind};
use crate::clock::Clock;
use crate::limiter::{NoStats, StatsSink};
use crate::store::memory::MemoryStore;
use crate::store::redis::RedisStore;

/// What the counters read from the rest of the process.
pub struct MetricsDeps<'a> {
    /// Configuration loads so far (`config_load_success`, `config_load_error`).
    pub loads: LoadCounts,
    /// The memory store, whose keys and bytes are gauges.
    pub memory: Option<&'a Arc<MemoryStore>>,
    /// The Redis store, whose lease totals are exported.
    pub redis: Option<&'a Arc<RedisStore>>,
    /// Gauges of another part (the fleet's peers).
    pub gauges: Option<GaugeReport>,
    /// The clock of the stats' own timings.
    pub clock: &'a Arc<dyn Clock>,
}

impl std::fmt::Debug for MetricsDeps<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsDeps")
            .field("memory", &self.memory.is_some())
            .field("redis", &self.redis.is_some())
            .finish_non_exhaustive()
    }
}

/// The started counters.
pub struct MetricsHandle {
    /// The service's counters (`None` with `DISABLE_STATS`).
    pub metrics: Option<Arc<Metrics>>,
    /// What the limiter reports each decision to: the counters, or nothing.
    pub sink: Arc<dyn StatsSink>,
}

impl std::fmt::Debug for MetricsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsHandle")
            .field("metrics", &self.metrics.is_some())
            .finish_non_exhaustive()
    }
}

/// Builds the counters `options` ask for.
pub fn start(options: &Observability, deps: MetricsDeps<'_>) -> MetricsHandle {
    let metrics = (options.sink != StatsSinkKind::Disabled).then(|| {
        let keys: Option<KeyCount> = deps
            .memory
            .cloned()
            .map(|m| -> KeyCount { Arc::new(move || (m.len(), m.bytes())) });
        let statsd = options.sink == StatsSinkKind::Statsd;
        let metrics = Metrics::new(options.stats_max_keys, deps.loads, keys, statsd)
            .with_clock(deps.clock.clone());
        let metrics = match deps.redis.cloned() {
            Some(redis) => metrics.with_leases(Arc::new(move || redis.lease_totals())),
            None => metrics,
        };
        if let Some(gauges) = deps.gauges {
            metrics.set_gauges(gauges);
        }
        Arc::new(metrics)
    });
    let sink: Arc<dyn StatsSink> = match &metrics {
        Some(m) => m.clone(),
        None => Arc::new(NoStats),
    };
    MetricsHandle { metrics, sink }
}
