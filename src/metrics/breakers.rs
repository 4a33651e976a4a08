//! The circuit breaker families, for every part that keeps breakers (the Redis store's targets,
//! the regions' global store): `ratelimitd_redis_breaker_state{target}` (0 closed, 1 half-open,
//! 2 open) and `ratelimitd_redis_breaker_transitions_total{target,to}`, and in StatsD
//! `ratelimitd.redis_breaker.<target>.<to>`. Each part registers a [`Breakers`] over its own
//! reader; the exposition merges their series into one family each.

use std::sync::Arc;

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, IntGaugeVec, Opts};

use super::registry::Collect;
use ratelimitd_core::resilience::BreakerReport;

/// Reads the state and transition counts of some circuit breakers, at export time.
pub(crate) type BreakerReports = Arc<dyn Fn() -> Vec<BreakerReport> + Send + Sync>;

/// The transitions counter: (name, help).
const TRANSITIONS: (&str, &str) = (
    "ratelimitd_redis_breaker_transitions_total",
    "Redis circuit breaker transitions, by target and new state",
);

/// The state gauge: (name, help).
const STATE: (&str, &str) = (
    "ratelimitd_redis_breaker_state",
    "Redis circuit breaker state by target: 0 closed, 1 half-open, 2 open",
);

/// The breakers one reader reports, as metrics.
pub(crate) struct Breakers(pub BreakerReports);

impl std::fmt::Debug for Breakers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breakers").finish_non_exhaustive()
    }
}

impl Collect for Breakers {
    fn families(&self) -> Vec<MetricFamily> {
        let breakers = (self.0)();
        let mut out = Vec::new();
        if let Ok(vec) =
            IntCounterVec::new(Opts::new(TRANSITIONS.0, TRANSITIONS.1), &["target", "to"])
        {
            for r in &breakers {
                vec.with_label_values(&[r.target, "open"]).inc_by(r.opened);
                vec.with_label_values(&[r.target, "half_open"])
                    .inc_by(r.half_opened);
                vec.with_label_values(&[r.target, "closed"])
                    .inc_by(r.closed);
            }
            out.extend(vec.collect());
        }
        if !breakers.is_empty()
            && let Ok(g) = IntGaugeVec::new(Opts::new(STATE.0, STATE.1), &["target"])
        {
            for r in &breakers {
                g.with_label_values(&[r.target]).set(r.state.gauge());
            }
            out.extend(g.collect());
        }
        out
    }

    fn statsd(&self, out: &mut Vec<(String, u64)>) {
        for r in (self.0)() {
            // A Cluster master is named `host:port`: a colon would end a StatsD name and a dot
            // would add levels, so both become `_` there (Prometheus labels keep the address).
            let target = r.target.replace([':', '.'], "_");
            for (to, v) in [
                ("opened", r.opened),
                ("half_opened", r.half_opened),
                ("closed", r.closed),
            ] {
                out.push((format!("ratelimitd.redis_breaker.{target}.{to}"), v));
            }
        }
    }
}
