//! Store health figures: how full and busy each backend node is, sampled every
//! [`EVERY_SECS`] seconds by one background task (the first sample at once) and exported as
//! gauges labelled `backend` (`redis`, `memcached`) and `target` (`main`, `per_second`, a Cluster
//! master's or memcached server's `host:port`), so the series are bounded by the configured
//! servers. Each sample costs two calls per Redis node (`PING`, `INFO`:
//! [`super::redis::vitals`]) or one per memcached server (`stats`), all bounded by the store's
//! timeout. The embedded memory store's keys and bytes are its own gauges (`super::stats`).
//! The console shows the same figures ([`Vitals::summary`]).

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts};

use super::memcache::MemcacheStore;
use super::redis::RedisStore;
use crate::background::{Background, every_second};
use crate::metrics::{Collect, Metrics};

/// Seconds between two samples.
pub(crate) const EVERY_SECS: u64 = 10;

/// One backend node's figures; `None` for what the node did not tell.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeVitals {
    /// `redis` or `memcached`.
    pub backend: &'static str,
    /// The target's name (`main`, `per_second`) or address.
    pub target: String,
    /// True when the node answered the sample.
    pub up: bool,
    /// Memory in use (`used_memory`, `bytes`).
    pub used_bytes: Option<u64>,
    /// The memory bound (`maxmemory`, 0 = none; `limit_maxbytes`).
    pub max_bytes: Option<u64>,
    /// Keys evicted since the server started (`evicted_keys`, `evictions`).
    pub evictions: Option<u64>,
    /// Keys held (every database's `keys=`, `curr_items`).
    pub keys: Option<u64>,
    /// Connected clients (`connected_clients`, `curr_connections`).
    pub clients: Option<u64>,
    /// The round trip of the probe call (`PING`, `stats`).
    pub round_trip: Option<Duration>,
}

impl NodeVitals {
    /// A node that told nothing yet.
    pub(crate) fn new(backend: &'static str, target: &str) -> NodeVitals {
        NodeVitals {
            backend,
            target: target.to_string(),
            up: false,
            used_bytes: None,
            max_bytes: None,
            evictions: None,
            keys: None,
            clients: None,
            round_trip: None,
        }
    }
}

/// The stores sampled, and the last sample.
#[derive(Debug, Default)]
pub(crate) struct Vitals {
    last: ArcSwap<Vec<NodeVitals>>,
}

impl Vitals {
    /// The last sample's nodes.
    pub(crate) fn nodes(&self) -> Arc<Vec<NodeVitals>> {
        self.last.load_full()
    }

    /// One line per node for the console, and whether one looks unwell (not answering, or
    /// memory above 80 % of its bound).
    pub(crate) fn summary(&self) -> Vec<(String, bool)> {
        (self.nodes().iter())
            .map(|n| {
                if !n.up {
                    return (format!("{} {}: not answering", n.backend, n.target), true);
                }
                let mib = |b: u64| b as f64 / 1_048_576.0;
                let used = n.used_bytes.unwrap_or(0);
                let (memory, full) = match n.max_bytes {
                    Some(max) if max > 0 => (
                        format!(
                            "{:.1} of {:.1} MiB ({:.0} %)",
                            mib(used),
                            mib(max),
                            used as f64 * 100.0 / max as f64
                        ),
                        used as f64 > max as f64 * 0.8,
                    ),
                    _ => (format!("{:.1} MiB, no memory bound", mib(used)), false),
                };
                let line = format!(
                    "{} {}: {memory}, {} keys, {} evicted, {} clients, round trip {:.1} ms",
                    n.backend,
                    n.target,
                    n.keys.unwrap_or(0),
                    n.evictions.unwrap_or(0),
                    n.clients.unwrap_or(0),
                    n.round_trip.unwrap_or_default().as_secs_f64() * 1000.0
                );
                (line, full)
            })
            .collect()
    }
}

/// Starts sampling the Redis or memcached store (nothing to do for the other stores) and
/// registers the gauges with `metrics` when there are any. Returns the samples for the console.
pub(crate) fn start(
    metrics: Option<&Arc<Metrics>>,
    redis: Option<Arc<RedisStore>>,
    memcache: Option<Arc<MemcacheStore>>,
    mut bg: Background<'_>,
) -> Option<Arc<Vitals>> {
    if redis.is_none() && memcache.is_none() {
        return None;
    }
    let vitals = Arc::new(Vitals::default());
    if let Some(m) = metrics {
        m.register(Arc::new(VitalsGauges(vitals.clone())));
    }
    let sampled = vitals.clone();
    let mut tick = 0u64;
    bg.spawn(every_second(bg.stopped(), move || {
        let due = tick.is_multiple_of(EVERY_SECS);
        tick += 1;
        let (redis, memcache, sampled) = (redis.clone(), memcache.clone(), sampled.clone());
        async move {
            if !due {
                return;
            }
            let mut nodes = Vec::new();
            if let Some(r) = &redis {
                nodes.extend(r.vitals().await);
            }
            if let Some(m) = &memcache {
                nodes.extend(m.vitals().await);
            }
            sampled.last.store(Arc::new(nodes));
        }
    }));
    Some(vitals)
}

/// The gauges: (name, help).
const USED: (&str, &str) = (
    "ratelimitd_store_used_memory_bytes",
    "Memory the store node uses (Redis used_memory, memcached bytes)",
);
const MAX: (&str, &str) = (
    "ratelimitd_store_max_memory_bytes",
    "Memory bound of the store node (Redis maxmemory, 0 = none; memcached limit_maxbytes)",
);
const EVICTED: (&str, &str) = (
    "ratelimitd_store_evicted_keys_total",
    "Keys the store node evicted since it started (Redis evicted_keys, memcached evictions)",
);
const KEYS: (&str, &str) = (
    "ratelimitd_store_keys",
    "Keys the store node holds (Redis keys of every database, memcached curr_items)",
);
const CLIENTS: (&str, &str) = (
    "ratelimitd_store_connected_clients",
    "Clients connected to the store node (every client, not only this instance)",
);
const ROUND_TRIP: (&str, &str) = (
    "ratelimitd_store_probe_round_trip_seconds",
    "Round trip of the last health probe of the store node (Redis PING, memcached stats)",
);
const UP: (&str, &str) = (
    "ratelimitd_store_node_up",
    "1 when the store node answered the last health sample, else 0",
);

/// The last sample as gauges.
struct VitalsGauges(Arc<Vitals>);

impl Collect for VitalsGauges {
    fn families(&self) -> Vec<MetricFamily> {
        let labels = ["backend", "target"];
        let int = |(name, help): (&str, &str)| IntGaugeVec::new(Opts::new(name, help), &labels);
        let (Ok(used), Ok(max), Ok(evicted), Ok(keys), Ok(clients), Ok(rtt), Ok(up)) = (
            int(USED),
            int(MAX),
            IntCounterVec::new(Opts::new(EVICTED.0, EVICTED.1), &labels),
            int(KEYS),
            int(CLIENTS),
            GaugeVec::new(Opts::new(ROUND_TRIP.0, ROUND_TRIP.1), &labels),
            int(UP),
        ) else {
            return Vec::new();
        };
        let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        for n in self.0.nodes().iter() {
            let l = [n.backend, n.target.as_str()];
            up.with_label_values(&l).set(i64::from(n.up));
            let set = |g: &IntGaugeVec, v: Option<u64>| {
                if let Some(v) = v {
                    g.with_label_values(&l).set(clamp(v));
                }
            };
            set(&used, n.used_bytes);
            set(&max, n.max_bytes);
            set(&keys, n.keys);
            set(&clients, n.clients);
            if let Some(e) = n.evictions {
                evicted.with_label_values(&l).inc_by(e);
            }
            if let Some(t) = n.round_trip {
                rtt.with_label_values(&l).set(t.as_secs_f64());
            }
        }
        let mut out = used.collect();
        for more in [
            max.collect(),
            evicted.collect(),
            keys.collect(),
            clients.collect(),
            rtt.collect(),
            up.collect(),
        ] {
            out.extend(more);
        }
        out
    }
}
