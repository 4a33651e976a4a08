//! Insight: who is being limited and why, without slowing the request path. The
//! features plug into the limiter as [`ratelimitd_core::limiter::Observer`]s: [`hotkeys`] (a fixed-memory
//! ranking of the hottest keys over the last minute, `/v1/hotkeys` and the
//! `ratelimitd_hot_key_hits` gauges) and [`decision_log`] (`DECISION_LOG_SAMPLE_RATE`). The
//! console reads them through [`Insight`], with the other read-only views it shows, such as the
//! decision rates of the last 15 minutes ([`rates`]). [`start`] builds them all from
//! [`InsightOptions`] for the composition root.

pub(crate) mod decision_log;
pub(crate) mod hotkeys;
pub(crate) mod metrics;
mod options;
pub(crate) mod rates;
pub(crate) mod sketch;
pub(crate) mod usage;
mod wiring;

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::policy::Overrides;
use crate::reload::ConfigHandle;
use decision_log::DecisionLog;
use hotkeys::HotKeys;
pub(crate) use options::InsightOptions;
use ratelimitd_core::clock::{Clock, Timestamp};
use ratelimitd_core::limiter::Observers;
use ratelimitd_core::resilience::BreakerReport;
pub(crate) use wiring::{InsightDeps, start};

/// One recorded violation, as the console lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ViolationView {
    /// When it happened.
    pub at: Timestamp,
    /// The request's domain.
    pub domain: String,
    /// The descriptor's entries.
    pub entries: Vec<(String, String)>,
    /// The name (or key) of the limit that was over.
    pub limit: String,
    /// How many denied requests the record covers (repeats between two writes are one record).
    pub requests: u64,
    /// The hits of those requests, summed.
    pub hits: u64,
    /// True when the limit was in shadow mode (not enforced).
    pub shadow: bool,
}

/// The answer of a [`RecentViolations`] query.
pub(crate) type ViolationsFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<ViolationView>, String>> + Send + 'a>>;

/// The hook the violation log fills for the console and explain: its newest records, newest
/// first.
pub(crate) trait RecentViolations: Send + Sync + Debug {
    /// At most `limit` of the newest violations of `domain` (all when `None`) whose descriptor
    /// has this `client_key` entry (any when `None`).
    fn recent_of(
        &self,
        domain: Option<String>,
        client_key: Option<String>,
        limit: usize,
    ) -> ViolationsFuture<'_>;

    /// At most `limit` of the newest violations.
    fn recent(&self, limit: usize) -> ViolationsFuture<'_> {
        self.recent_of(None, None, limit)
    }
}

/// Reads every Redis circuit breaker's state, when the store is Redis.
pub(crate) type BreakerStates = Arc<dyn Fn() -> Vec<BreakerReport> + Send + Sync>;

/// A feature's line on the status page: its text, and whether it shows a degraded state.
pub(crate) type StatusLine = Arc<dyn Fn() -> (String, bool) + Send + Sync>;

/// Several such lines (one per store node, say).
pub(crate) type StatusLines = Arc<dyn Fn() -> Vec<(String, bool)> + Send + Sync>;

/// What the console and `/v1/hotkeys` read. Everything here is shared with the service.
#[derive(Clone)]
pub(crate) struct Insight {
    /// The hot-key rankings.
    pub hot_keys: Arc<HotKeys>,
    /// The violation log's query; `None` until a violation log is wired in.
    pub violations: Option<Arc<dyn RecentViolations>>,
    /// The Redis breakers; `None` on the memory store.
    pub breakers: Option<BreakerStates>,
    /// The fleet mode's status line, when it runs.
    pub fleet: Option<StatusLine>,
    /// The store nodes' health figures (Redis, memcached), one line each.
    pub store_nodes: Option<StatusLines>,
    /// The live configuration and its load status.
    pub config: Arc<ConfigHandle>,
    /// The stored overrides in service.
    pub overrides: Arc<Overrides>,
    /// The service's clock (time left of overrides, page time).
    pub clock: Arc<dyn Clock>,
    /// Decisions over the last 15 minutes; `None` when stats are off (`DISABLE_STATS`).
    pub rates: Option<Arc<rates::RateHistory>>,
    /// The latest usage of each limit with priority classes; `None` when stats are off.
    pub shed_usage: Option<Arc<crate::metrics::usage::UsageGauges>>,
    /// Who this instance is.
    pub about: About,
}

/// What the console's header says about this instance.
#[derive(Debug, Clone)]
pub(crate) struct About {
    /// The crate version.
    pub version: &'static str,
    /// `INSTANCE_ID`, else the host name.
    pub instance: String,
    /// Where counters live, e.g. `memory` or `redis single 127.0.0.1:6379` (no credentials).
    pub backend: String,
    /// When the service started (the service clock).
    pub started_at: Timestamp,
}

impl Debug for Insight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Insight")
            .field("hot_keys", &self.hot_keys)
            .field("violations", &self.violations)
            .field("breakers", &self.breakers.is_some())
            .finish_non_exhaustive()
    }
}

/// Builds the insight observers the settings ask for: hot keys always, the decision log when its
/// sample rate is above 0. Returns the hot keys for the readers.
pub(crate) fn observers(
    options: &InsightOptions,
    clock: &Arc<dyn Clock>,
    observers: &mut Observers,
) -> Arc<HotKeys> {
    let hot_keys = Arc::new(HotKeys::new(options.hot_keys_capacity, clock.clone()));
    observers.push(hot_keys.clone());
    if let Some(log) = DecisionLog::new(options.decision_log_sample_rate) {
        observers.push(Arc::new(log));
    }
    hot_keys
}

/// A hasher that has taken in a client key — the request's domain and a descriptor's entries —
/// for the observers that count per key and limit (the caller adds the limit).
pub(crate) fn key_hasher(
    seed: &ahash::RandomState,
    domain: &str,
    entries: &[ratelimitd_core::limiter::Entry],
) -> ahash::AHasher {
    use std::hash::{BuildHasher, Hash};
    let mut h = seed.build_hasher();
    domain.hash(&mut h);
    for e in entries {
        e.key.hash(&mut h);
        e.value.hash(&mut h);
    }
    h
}
