//! The Rate Limit Quota Service's metrics (`ratelimitd_rlqs_*`; names and help in
//! `families`): open streams and tracked buckets (gauges), assignments sent by strategy,
//! and the requests Envoys reported allowed and denied.

use prometheus::{IntCounterVec, IntGauge, Opts, Registry};

use super::families::{RLQS_ASSIGNMENTS, RLQS_BUCKETS, RLQS_REPORTED, RLQS_STREAMS};

/// The RLQS counters and gauges, registered with the Prometheus registry.
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
            streams: gauge(RLQS_STREAMS),
            buckets: gauge(RLQS_BUCKETS),
            assignments: counter(RLQS_ASSIGNMENTS, "strategy"),
            reported: counter(RLQS_REPORTED, "outcome"),
        }
    }
}

impl RlqsMetrics {
    /// Registers every RLQS metric with `r`.
    pub fn register(&self, r: &Registry) -> Result<(), prometheus::Error> {
        r.register(Box::new(self.streams.clone()))?;
        r.register(Box::new(self.buckets.clone()))?;
        r.register(Box::new(self.assignments.clone()))?;
        r.register(Box::new(self.reported.clone()))
    }
}
