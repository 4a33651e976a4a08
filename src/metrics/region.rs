//! The regional families, read at scrape time from the reader `app` sets
//! ([`super::Metrics::set_regions`]): `ratelimitd_region_share{region,limit}` (this region's
//! share of each regional limit; the mean over its active keys with `follow_demand`),
//! `ratelimitd_region_sync_age_seconds` (since the last round that reached the global store;
//! absent before the first) and `ratelimitd_region_sync_failures_total`.

use std::sync::Arc;
use std::time::Duration;

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{Gauge, GaugeVec, IntCounter, Opts};

use crate::region::ShareGauge;

/// What the regional families show.
#[derive(Debug, Clone, Default)]
pub struct RegionReport {
    /// This region's share of each regional limit.
    pub shares: Vec<ShareGauge>,
    /// The sync with the global store, when there is one: (age of the last success, failed
    /// rounds).
    pub sync: Option<(Option<Duration>, u64)>,
}

/// Reads the regional shares and the sync's state.
pub type RegionReader = Arc<dyn Fn() -> RegionReport + Send + Sync>;

/// The families of `report`.
pub(super) fn families(report: &RegionReport) -> Vec<MetricFamily> {
    let mut out = Vec::new();
    let opts = Opts::new(
        "ratelimitd_region_share",
        "This region's share of a regional limit (mean over its active keys with follow_demand)",
    );
    if !report.shares.is_empty()
        && let Ok(g) = GaugeVec::new(opts, &["region", "limit"])
    {
        for s in &report.shares {
            g.with_label_values(&[s.region.as_str(), s.limit.as_str()])
                .set(s.share);
        }
        out.extend(g.collect());
    }
    let Some((age, failures)) = report.sync else {
        return out;
    };
    let age_opts = Opts::new(
        "ratelimitd_region_sync_age_seconds",
        "Seconds since the last sync round that reached the global store",
    );
    if let (Some(age), Ok(g)) = (age, Gauge::with_opts(age_opts)) {
        g.set(age.as_secs_f64());
        out.extend(g.collect());
    }
    let failed = Opts::new(
        "ratelimitd_region_sync_failures_total",
        "Sync rounds that could not reach the global store for every key",
    );
    if let Ok(c) = IntCounter::with_opts(failed) {
        c.inc_by(failures);
        out.extend(c.collect());
    }
    out
}
