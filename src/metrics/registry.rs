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
pub struct Registry {
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
    pub fn register(&self, part: Arc<dyn Collect>) {
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
pub fn counter(name: &str, help: &str, value: u64) -> Vec<MetricFamily> {
    match IntCounter::with_opts(Opts::new(name, help)) {
        Ok(c) => {
            c.inc_by(value);
            c.collect()
        }
        Err(_) => Vec::new(),
    }
}

/// One unlabelled whole-number gauge family `name` holding `value` (capped at `i64::MAX`).
pub fn int_gauge(name: &str, help: &str, value: u64) -> Vec<MetricFamily> {
    match IntGauge::with_opts(Opts::new(name, help)) {
        Ok(g) => {
            g.set(i64::try_from(value).unwrap_or(i64::MAX));
            g.collect()
        }
        Err(_) => Vec::new(),
    }
}

/// One unlabelled gauge family `name` holding `value`.
pub fn gauge(name: &str, help: &str, value: f64) -> Vec<MetricFamily> {
    match Gauge::with_opts(Opts::new(name, help)) {
        Ok(g) => {
            g.set(value);
            g.collect()
        }
        Err(_) => Vec::new(),
    }
}
