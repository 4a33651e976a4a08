//! The regional families, read at scrape time: `ratelimitd_region_share{region,limit}` (this
//! region's share of each regional limit; the mean over its active keys with `follow_demand`),
//! `ratelimitd_region_sync_age_seconds` (since the last round that reached the global store;
//! absent before the first) and `ratelimitd_region_sync_failures_total`, and the global store's
//! breaker. [`super::start`] registers them with the stats.

use std::sync::Arc;

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, Opts};

use super::Regional;
use crate::metrics::{Breakers, Metrics, counter, gauge};
use ratelimitd_core::config::RateLimitConfig;

/// Calls its argument with the configuration in service, once there is one (the shares are
/// those of its regional limits).
pub(crate) type LiveConfig = Arc<dyn Fn(&mut dyn FnMut(&RateLimitConfig)) + Send + Sync>;

/// The regional shares and the sync's state, as metrics.
struct RegionMetrics {
    regions: Regional,
    config: LiveConfig,
}

impl crate::metrics::Collect for RegionMetrics {
    fn families(&self) -> Vec<MetricFamily> {
        let mut shares = Vec::new();
        (self.config)(&mut |c| shares = self.regions.gauges(c));
        let mut out = Vec::new();
        let opts = Opts::new(
            "ratelimitd_region_share",
            "This region's share of a regional limit (mean over its active keys with follow_demand)",
        );
        if !shares.is_empty()
            && let Ok(g) = GaugeVec::new(opts, &["region", "limit"])
        {
            for s in &shares {
                g.with_label_values(&[s.region.as_str(), s.limit.as_str()])
                    .set(s.share);
            }
            out.extend(g.collect());
        }
        let Some(sync) = &self.regions.sync else {
            return out;
        };
        if let Some(age) = sync.age() {
            out.extend(gauge(
                "ratelimitd_region_sync_age_seconds",
                "Seconds since the last sync round that reached the global store",
                age.as_secs_f64(),
            ));
        }
        out.extend(counter(
            "ratelimitd_region_sync_failures_total",
            "Sync rounds that could not reach the global store for every key",
            sync.status().failures,
        ));
        out
    }
}

/// Registers the regional families of `regions` with `metrics`, and the global store's breaker
/// when there is a sync.
pub(super) fn register(metrics: &Metrics, regions: &Regional, config: LiveConfig) {
    metrics.register(Arc::new(RegionMetrics {
        regions: regions.clone(),
        config,
    }));
    if regions.sync.is_some() {
        let r = regions.clone();
        metrics.register(Arc::new(Breakers(Arc::new(move || r.breaker_reports()))));
    }
}
