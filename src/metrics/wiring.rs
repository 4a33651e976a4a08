//! The stats' part of startup: the counters the settings ask for (none with `DISABLE_STATS`),
//! with the configuration loads they export at scrape or flush time, and the sink the limiter
//! reports each decision to. The features register their own metrics from their starts
//! ([`Metrics::register`]); the sink's listener or flusher starts with the other listeners
//! ([`super::sinks::start`]).

use std::sync::Arc;

use super::{LoadCounts, Metrics, Observability, StatsSinkKind};
use ratelimitd_core::clock::Clock;
use ratelimitd_core::limiter::{NoStats, StatsSink};

/// What the counters read from the rest of the process.
pub(crate) struct MetricsDeps<'a> {
    /// Configuration loads so far (`config_load_success`, `config_load_error`).
    pub loads: LoadCounts,
    /// The clock of the stats' own timings.
    pub clock: &'a Arc<dyn Clock>,
}

impl std::fmt::Debug for MetricsDeps<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsDeps").finish_non_exhaustive()
    }
}

/// The started counters.
pub(crate) struct MetricsHandle {
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
pub(crate) fn start(options: &Observability, deps: MetricsDeps<'_>) -> MetricsHandle {
    let metrics = (options.sink != StatsSinkKind::Disabled).then(|| {
        let statsd = options.sink == StatsSinkKind::Statsd;
        let metrics =
            Metrics::new(options.stats_max_keys, deps.loads, statsd).with_clock(deps.clock.clone());
        Arc::new(metrics)
    });
    let sink: Arc<dyn StatsSink> = match &metrics {
        Some(m) => m.clone(),
        None => Arc::new(NoStats),
    };
    MetricsHandle { metrics, sink }
}
