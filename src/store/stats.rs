//! The store's own metrics, registered with the stats once the store is built ([`register`]):
//! the memory store's live keys and approximate bytes (`ratelimitd_memory_store_keys`,
//! `ratelimitd_memory_store_bytes`), the token lease totals (`ratelimitd_lease_*_total`) of the
//! Redis and DynamoDB stores, and the circuit breakers of the Redis store's targets.

use std::sync::Arc;

use prometheus::proto::MetricFamily;

use super::memory::MemoryStore;
use super::redis::RedisStore;
use crate::metrics::{Breakers, Collect, Metrics, counter, int_gauge};
use ratelimitd_core::store::lease::LeaseTotals;

/// Reads a store's token lease totals at export time.
pub(crate) type LeaseReader = Arc<dyn Fn() -> LeaseTotals + Send + Sync>;

/// The memory store's gauges: live keys, and the approximate bytes they take.
const MEMORY_GAUGES: [(&str, &str); 2] = [
    (
        "ratelimitd_memory_store_keys",
        "Live keys in the memory store",
    ),
    (
        "ratelimitd_memory_store_bytes",
        "Approximate bytes of the memory store's keys and state (MEMORY_MAX_BYTES bounds it)",
    ),
];

/// The token lease counters (`store::lease`), read from the store at export time.
const LEASE_COUNTERS: [(&str, &str); 4] = [
    (
        "ratelimitd_lease_taken_total",
        "Lease reservations that granted hits",
    ),
    (
        "ratelimitd_lease_granted_hits_total",
        "Hits granted to this instance's leases",
    ),
    (
        "ratelimitd_lease_served_hits_total",
        "Hits answered from a lease without a call to the store",
    ),
    (
        "ratelimitd_lease_returned_hits_total",
        "Unspent lease hits given back to the store (reload, shutdown, a changed limit)",
    ),
];

/// The memory store's size.
struct MemoryGauges(Arc<MemoryStore>);

impl Collect for MemoryGauges {
    fn families(&self) -> Vec<MetricFamily> {
        let values = [self.0.len(), self.0.bytes()];
        MEMORY_GAUGES
            .iter()
            .zip(values)
            .flat_map(|((name, help), v)| int_gauge(name, help, v as u64))
            .collect()
    }
}

/// A store's lease totals.
struct LeaseCounters(LeaseReader);

impl Collect for LeaseCounters {
    fn families(&self) -> Vec<MetricFamily> {
        let t = (self.0)();
        let values = [t.taken, t.granted, t.served, t.returned];
        LEASE_COUNTERS
            .iter()
            .zip(values)
            .flat_map(|((name, help), v)| counter(name, help, v))
            .collect()
    }
}

/// Registers the metrics of the store: the memory store's, the Redis store's breakers, and the
/// lease totals of a store that leases.
pub(crate) fn register(
    metrics: &Metrics,
    memory: Option<&Arc<MemoryStore>>,
    redis: Option<&Arc<RedisStore>>,
    leases: Option<&LeaseReader>,
) {
    if let Some(redis) = redis {
        let r = redis.clone();
        metrics.register(Arc::new(Breakers(Arc::new(move || r.breaker_reports()))));
    }
    if let Some(leases) = leases {
        metrics.register(Arc::new(LeaseCounters(leases.clone())));
    }
    if let Some(memory) = memory {
        metrics.register(Arc::new(MemoryGauges(memory.clone())));
    }
}
