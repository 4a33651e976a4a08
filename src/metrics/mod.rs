//! Metrics, the bottom layer the features build on: the counters behind the Go service's stats
//! (`docs/design/contract.md#stats`) that the limiter reports into [`Metrics`] through
//! [`StatsSink`] and the gRPC edge feeds with requests and response times; the [`registry`] each
//! feature adds its own metrics to from its `start` (a [`Collect`]: RLQS, `/check`, the violation
//! log, hot keys, the regions, the fleet, the store's gauges, leases and [`breakers`]); and the
//! two sinks that read both ([`prom`]: Prometheus with the Go default mapper's names; [`statsd`]:
//! the Go wire format). This module names no feature: config loads are read at export time
//! through a [`LoadCounts`] reader the composition root hands in, and each feature's families
//! live in its own folder.
//!
//! Memory is bounded: per-limit keys and unknown domains each live in a [`table::KeyTable`] of at
//! most `STATS_MAX_KEYS` entries (excess folded into `ratelimitd_overflow` and counted).

pub(crate) mod breakers;
mod families;
pub(crate) mod mogrifier;
mod options;
pub(crate) mod prom;
pub(crate) mod registry;
mod reported;
mod scrape;
pub(crate) mod shedding;
pub(crate) mod sinks;
mod slots;
pub(crate) mod statsd;
mod statsd_names;
pub(crate) mod striped;
pub(crate) mod table;
pub(crate) mod usage;
mod wiring;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, Opts};

pub(crate) use breakers::Breakers;
pub(crate) use options::{Observability, StatsSinkKind, StatsdProtocol};
use ratelimitd_core::clock::{Clock, SystemClock, Timestamp};
use ratelimitd_core::limiter::{
    Code, ErrorKind, LimitIncrements, ShedOutcome, ShedUsage, Source, StatsSink,
};
pub(crate) use registry::{Collect, Registry, counter, gauge, int_gauge};
use striped::Striped;
use table::{Counters, KeyTable};
pub(crate) use wiring::{MetricsDeps, MetricsHandle, start};

/// Names of the per-limit counters, in [`table::Counters`] index order (Go stat names).
pub(crate) const LIMIT_STATS: [&str; 8] = [
    "total_hits",
    "over_limit",
    "near_limit",
    "over_limit_with_local_cache",
    "within_limit",
    "shadow_mode",
    "local_fallback",
    "total_negative_hits",
];

/// Most timer observations kept between two StatsD flushes; more are dropped (and counted).
const MAX_PENDING_TIMINGS: usize = 10_000;

/// Configuration loads so far, for `config_load_success` and `config_load_error`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConfigLoads {
    /// Loads that were published.
    pub successes: u64,
    /// Loads that failed (the previous configuration stayed).
    pub failures: u64,
    /// Policy-database domains the configuration in service leaves out, since a file defines
    /// them too (a gauge).
    pub rules_shadowed: u64,
}

/// Reads the configuration load counts, at export time.
pub(crate) type LoadCounts = Arc<dyn Fn() -> ConfigLoads + Send + Sync>;

/// The Go service's counters and the limiter's, and the registry of the features' own
/// metrics. Share it as `Arc<Metrics>`.
pub struct Metrics {
    pub(crate) limits: KeyTable<8>,
    pub(crate) unknown_domains: KeyTable<1>,
    /// Usage reported per limit (`ratelimitd_usage_reported_total`).
    pub(crate) reported: reported::ReportedUsage,
    /// Per configured domain: descriptors that matched nothing, request overrides capped.
    pub(crate) domain_rules: KeyTable<5>,
    /// Per limit and class: admitted, shed, soft-denied, denied, soft breaches.
    pub(crate) shedding: shedding::ShedCounters,
    /// Slots in use per concurrency limit, as the store last counted them.
    pub(crate) slots: slots::SlotGauges,
    /// Usage per limit with priority classes, as the store last counted it.
    pub shed_usage: Arc<usage::UsageGauges>,
    /// The clock the slot gauges compare lease ends with (the limiter's).
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) global_shadow: AtomicU64,
    pub(crate) redis_errors: AtomicU64,
    pub(crate) service_errors: AtomicU64,
    pub(crate) store_full: AtomicU64,
    pub(crate) store_errors: AtomicU64,
    pub(crate) timings_dropped: AtomicU64,
    /// Answered requests by code (OK, `OVER_LIMIT`) and deciding [`Source`] ([`Source::index`]).
    /// Row-major: `code_index(code) * Source::ALL.len() + source.index()`.
    pub(crate) decisions: Counters<{ 2 * Source::ALL.len() }>,
    pub(crate) total_requests: Striped<IntCounterVec>,
    pub(crate) response_time: Striped<HistogramVec>,
    pub(crate) store_latency: Striped<Histogram>,
    pub(crate) config_loads: LoadCounts,
    /// The features' own metrics, registered from their starts.
    pub(crate) parts: Registry,
    /// Response times (ms) waiting for the next StatsD flush; `None` when StatsD is off.
    timings: Option<Mutex<Vec<(&'static str, f64)>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Counters bounded to `max_keys` keys per table, reading config loads from `config_loads`,
    /// with no feature registered yet. `statsd_timers` keeps timer observations for StatsD.
    pub fn new(max_keys: usize, config_loads: LoadCounts, statsd_timers: bool) -> Metrics {
        // The label names and buckets are static and valid, so these constructors cannot fail.
        let total_requests = Striped::new(|| {
            IntCounterVec::new(
                Opts::new(
                    "ratelimit_service_total_requests",
                    "gRPC requests by method",
                ),
                &["grpc_method"],
            )
            .unwrap_or_else(|e| unreachable!("static metric: {e}"))
        });
        let response_time = Striped::new(|| {
            HistogramVec::new(
                HistogramOpts::new(
                    "ratelimit_service_response_time_seconds",
                    "gRPC response time by method",
                ),
                &["grpc_method"],
            )
            .unwrap_or_else(|e| unreachable!("static metric: {e}"))
        });
        let store_latency = Striped::new(|| {
            let buckets = prometheus::exponential_buckets(0.000_05, 2.0, 16)
                .unwrap_or_else(|e| unreachable!("static buckets: {e}"));
            Histogram::with_opts(
                HistogramOpts::new(
                    "ratelimitd_store_latency_seconds",
                    "Time of one batched store call",
                )
                .buckets(buckets),
            )
            .unwrap_or_else(|e| unreachable!("static metric: {e}"))
        });
        Metrics {
            limits: KeyTable::new(max_keys),
            unknown_domains: KeyTable::new(max_keys),
            reported: reported::ReportedUsage::new(max_keys),
            domain_rules: KeyTable::new(max_keys),
            shedding: shedding::ShedCounters::new(max_keys),
            slots: slots::SlotGauges::new(max_keys),
            shed_usage: Arc::new(usage::UsageGauges::new(max_keys)),
            clock: Arc::new(SystemClock),
            global_shadow: AtomicU64::new(0),
            redis_errors: AtomicU64::new(0),
            service_errors: AtomicU64::new(0),
            store_full: AtomicU64::new(0),
            store_errors: AtomicU64::new(0),
            timings_dropped: AtomicU64::new(0),
            decisions: Counters::new(),
            total_requests,
            response_time,
            store_latency,
            config_loads,
            parts: Registry::default(),
            timings: statsd_timers.then(|| Mutex::new(Vec::new())),
        }
    }

    /// Adds a feature's metrics: from now on `part` is read at every scrape and flush.
    pub fn register(&self, part: Arc<dyn Collect>) {
        self.parts.register(part);
    }

    /// Reads time from `clock` (the limiter's) to tell when a concurrency limit's leases ended.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Metrics {
        self.clock = clock;
        self
    }

    /// One gRPC call of `method` (e.g. `ShouldRateLimit`) that took `elapsed`.
    pub fn grpc_request(&self, method: &'static str, elapsed: Duration) {
        self.total_requests
            .mine()
            .with_label_values(&[method])
            .inc();
        let secs = elapsed.as_secs_f64();
        self.response_time
            .mine()
            .with_label_values(&[method])
            .observe(secs);
        if let Some(t) = &self.timings {
            let mut t = t.lock();
            if t.len() < MAX_PENDING_TIMINGS {
                t.push((method, secs * 1000.0));
            } else {
                self.timings_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Takes the timer observations recorded since the last call (method, milliseconds).
    pub fn take_timings(&self) -> Vec<(&'static str, f64)> {
        self.timings
            .as_ref()
            .map(|t| std::mem::take(&mut *t.lock()))
            .unwrap_or_default()
    }
}

impl StatsSink for Metrics {
    fn limit(&self, key: &str, inc: &LimitIncrements) {
        self.limits.add(
            key,
            [
                inc.total_hits,
                inc.over_limit,
                inc.near_limit,
                inc.over_limit_with_local_cache,
                inc.within_limit,
                inc.shadow_mode,
                inc.local_fallback,
                inc.total_negative_hits,
            ],
        );
    }

    fn shed(&self, key: &str, class: &str, outcome: ShedOutcome) {
        self.shedding.shed(key, class, outcome);
    }

    fn soft_breach(&self, key: &str) {
        self.shedding.soft_breach(key);
    }

    fn usage_reported(&self, key: &str, hits: u64) {
        self.reported.add(key, hits);
    }

    fn domain_not_found(&self, domain: &str) {
        self.unknown_domains.add(domain, [1]);
    }

    fn unmatched(&self, domain: &str, n: u64) {
        self.domain_rules.add(domain, [n, 0, 0, 0, 0]);
    }

    fn request_limit_capped(&self, domain: &str, n: u64) {
        self.domain_rules.add(domain, [0, n, 0, 0, 0]);
    }

    fn predicate_errors(&self, domain: &str, n: u64) {
        self.domain_rules.add(domain, [0, 0, n, 0, 0]);
    }

    fn stored_overrides(&self, domain: &str, looked: u64, found: u64) {
        self.domain_rules
            .add(domain, [0, 0, 0, found, looked - found]);
    }

    fn global_shadow_mode(&self) {
        self.global_shadow.fetch_add(1, Ordering::Relaxed);
    }

    fn error(&self, kind: ErrorKind) {
        let counter = match kind {
            ErrorKind::Redis => &self.redis_errors,
            ErrorKind::Service => &self.service_errors,
            ErrorKind::StoreFull => &self.store_full,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn decision(&self, code: Code, source: Source) {
        self.decisions
            .add_one(code_index(code) * Source::ALL.len() + source.index(), 1);
    }

    fn slots_in_use(&self, key: &str, in_use: u64, until: Timestamp) {
        self.slots.set(key, in_use, until);
    }

    fn shed_usage(&self, usage: &ShedUsage<'_>) {
        self.shed_usage.set(usage);
    }

    fn store_call(&self, elapsed: Duration, ok: bool) {
        self.store_latency.mine().observe(elapsed.as_secs_f64());
        if !ok {
            self.store_errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A code's row in [`Metrics::decisions`].
pub(crate) fn code_index(code: Code) -> usize {
    match code {
        Code::Ok => 0,
        Code::OverLimit => 1,
    }
}

/// The `code` label of each row of [`Metrics::decisions`].
pub(crate) const CODE_LABELS: [&str; 2] = ["ok", "over_limit"];
