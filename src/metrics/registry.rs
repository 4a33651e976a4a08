//! The registry a feature adds its own metrics to: a [`Collect`] is read at every scrape and
//! every StatsD flush, and the features register theirs from their own `start` (RLQS, `/check`,
//! the violation log, hot keys, the regions, the fleet, the store's gauges and breakers). The
//! registry names no feature: it only holds what was registered, in registration order.
//!
//! Order: the Prometheus exposition sorts families by name (and merges families of one name
//! that two parts emit, such as the breakers of the Redis store and of the global store), so
//! only StatsD sees the order, where each part's counters follow the Go service's own (see
//! `super::statsd_names`).

use std::sync::Arc;

use parking_lot::RwLock;
use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{Gauge, IntCounter, IntGauge, Opts};

/// A feature's metrics, as the sinks read them.
pub trait Collect: Send + Sync {
    /// The Prometheus families, built at scrape time (an empty family is left out).
    fn families(&self) -> Vec<MetricFamily>;

    /// The StatsD counters under their names, with their cumulative values (the sink sends the
    /// deltas). None by default: most of ratelimitd's own metrics are exported to Prometheus
    /// only.
    fn statsd(&self, _out: &mut Vec<(String, u64)>) {}
}

/// The registered parts, in registration order.
#[derive(Default)]
pub(crate) struct Registry {
    parts: RwLock<Vec<Arc<dyn Collect>>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("parts", &self.parts.read().len())
            .finish()
    }
}

impl Registry {
    /// Adds `part`: from now on it is read at every scrape and flush.
    pub(crate) fn register(&self, part: Arc<dyn Collect>) {
        self.parts.write().push(part);
    }

    /// Every part's families.
    pub(super) fn families(&self) -> Vec<MetricFamily> {
        self.parts
            .read()
            .iter()
            .flat_map(|p| p.families())
            .collect()
    }

    /// Every part's StatsD counters, in registration order.
    pub(super) fn statsd(&self, out: &mut Vec<(String, u64)>) {
        for p in self.parts.read().iter() {
            p.statsd(out);
        }
    }
}

/// One unlabelled counter family `name` holding `value`.
pub(crate) fn counter(name: &str, help: &str, value: u64) -> Vec<MetricFamily> {
    match IntCounter::with_opts(Opts::new(name, help)) {
        Ok(c) => {
            c.inc_by(value);
            c.collect()
        }
        Err(_) => Vec::new(),
    }
}

/// One unlabelled whole-number gauge family `name` holding `value` (capped at `i64::MAX`).
pub(crate) fn int_gauge(name: &str, help: &str, value: u64) -> Vec<MetricFamily> {
    match IntGauge::with_opts(Opts::new(name, help)) {
        Ok(g) => {
            g.set(i64::try_from(value).unwrap_or(i64::MAX));
            g.collect()
        }
        Err(_) => Vec::new(),
    }
}

/// One unlabelled gauge family `name` holding `value`.
pub(crate) fn gauge(name: &str, help: &str, value: f64) -> Vec<MetricFamily> {
    match Gauge::with_opts(Opts::new(name, help)) {
        Ok(g) => {
            g.set(value);
            g.collect()
        }
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{Breakers, ConfigLoads, Metrics, prom};
    use ratelimitd_core::limiter::{LimitIncrements, StatsSink};
    use ratelimitd_core::resilience::{BreakerReport, BreakerState};

    /// A part with one breaker named `target`, opened `opened` times.
    fn breaker(target: &'static str, opened: u64) -> std::sync::Arc<Breakers> {
        std::sync::Arc::new(Breakers(std::sync::Arc::new(move || {
            vec![BreakerReport {
                target,
                state: BreakerState::Open,
                opened,
                half_opened: 0,
                closed: 0,
            }]
        })))
    }

    #[test]
    fn parts_follow_the_go_counters_in_registration_order_in_statsd() {
        let m = Metrics::new(10, std::sync::Arc::new(ConfigLoads::default), true);
        let inc = LimitIncrements {
            total_hits: 1,
            ..LimitIncrements::default()
        };
        m.limit("d.k", &inc);
        m.grpc_request("ShouldRateLimit", Duration::from_millis(1));
        m.register(breaker("main", 1));
        m.register(breaker("global", 2));
        let names: Vec<String> = m.statsd_counters().into_iter().map(|(n, _)| n).collect();
        let at = |n: &str| names.iter().position(|x| x == n).expect(n);
        let requests = at("ratelimit_server.ShouldRateLimit.total_requests");
        let main = at("ratelimitd.redis_breaker.main.opened");
        let global = at("ratelimitd.redis_breaker.global.opened");
        let folded = at("ratelimitd.stats_keys_folded");
        assert!(at("ratelimit.service.rate_limit.d.k.total_hits") < requests);
        assert!(
            requests < main && main < global && global < folded,
            "{names:?}"
        );
    }

    #[test]
    fn families_two_parts_emit_are_exposed_once_with_every_series() {
        let m = std::sync::Arc::new(Metrics::new(
            10,
            std::sync::Arc::new(ConfigLoads::default),
            false,
        ));
        m.register(breaker("main", 1));
        m.register(breaker("global", 2));
        let text = prom::render(&prom::registry(m).unwrap());
        assert_eq!(
            text.matches("# TYPE ratelimitd_redis_breaker_state gauge")
                .count(),
            1,
            "{text}"
        );
        assert!(text.contains("ratelimitd_redis_breaker_state{target=\"global\"} 2\n"));
        assert!(text.contains("ratelimitd_redis_breaker_state{target=\"main\"} 2\n"));
        assert!(text.contains(
            "ratelimitd_redis_breaker_transitions_total{target=\"global\",to=\"open\"} 2\n"
        ));
        assert!(text.contains(
            "ratelimitd_redis_breaker_transitions_total{target=\"main\",to=\"open\"} 1\n"
        ));
    }
}
