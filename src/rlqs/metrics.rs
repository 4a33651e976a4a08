//! The Rate Limit Quota Service's metrics (`ratelimitd_rlqs_*`): open streams and tracked buckets
//! (gauges), assignments sent by strategy, and the requests Envoys reported allowed and denied.
//! [`super::start`] registers them with the stats whether or not RLQS is on (the two gauges then
//! read 0), as they always were.

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, IntGauge, Opts};

use crate::metrics::Collect;

/// `ratelimitd_rlqs_streams`: open RLQS streams.
const STREAMS: (&str, &str) = (
    "ratelimitd_rlqs_streams",
    "Open Rate Limit Quota Service streams",
);

/// `ratelimitd_rlqs_buckets`: buckets tracked across the open RLQS streams.
const BUCKETS: (&str, &str) = (
    "ratelimitd_rlqs_buckets",
    "Quota buckets tracked across the open RLQS streams",
);

/// `ratelimitd_rlqs_assignments_total{strategy}`.
const ASSIGNMENTS: (&str, &str) = (
    "ratelimitd_rlqs_assignments_total",
    "RLQS bucket actions sent, by strategy (token_bucket, allow_all, deny_all, abandon)",
);

/// `ratelimitd_rlqs_reported_requests_total{outcome}`.
const REPORTED: (&str, &str) = (
    "ratelimitd_rlqs_reported_requests_total",
    "Requests Envoys reported through RLQS, by outcome (allowed, denied)",
);

/// The RLQS counters and gauges.
#[derive(Debug, Clone)]
pub struct RlqsMetrics {
    /// Open `StreamRateLimitQuotas` streams.
    pub streams: IntGauge,
    /// Buckets tracked across the open streams.
    pub buckets: IntGauge,
    /// Assignments sent, by `strategy` (`token_bucket`, `allow_all`, `deny_all`, `abandon`).
    pub assignments: IntCounterVec,
    /// Requests reported by Envoys, by `outcome` (`allowed`, `denied`).
    pub reported: IntCounterVec,
}

impl Default for RlqsMetrics {
    fn default() -> RlqsMetrics {
        // The names and labels are static and valid, so these constructors cannot fail.
        let gauge = |(name, help): (&str, &str)| {
            IntGauge::with_opts(Opts::new(name, help))
                .unwrap_or_else(|e| unreachable!("static metric: {e}"))
        };
        let counter = |(name, help): (&str, &str), label: &str| {
            IntCounterVec::new(Opts::new(name, help), &[label])
                .unwrap_or_else(|e| unreachable!("static metric: {e}"))
        };
        RlqsMetrics {
            streams: gauge(STREAMS),
            buckets: gauge(BUCKETS),
            assignments: counter(ASSIGNMENTS, "strategy"),
            reported: counter(REPORTED, "outcome"),
        }
    }
}

impl Collect for RlqsMetrics {
    fn families(&self) -> Vec<MetricFamily> {
        let mut out = self.streams.collect();
        out.extend(self.buckets.collect());
        out.extend(self.assignments.collect());
        out.extend(self.reported.collect());
        out
    }
}
