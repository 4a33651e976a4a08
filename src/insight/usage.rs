//! How full each limit's keys are, per limit and never per client: an [`Observer`] notes, for every
//! key a decision reported (domain, entries, limit — the hot keys' notion of a key), the highest
//! share of its limit in use during the current interval; every [`INTERVAL_SECS`] of the service
//! clock the interval is closed and summed per limit into four gauges:
//!
//! - `ratelimitd_limit_active_keys{domain,limit}`: keys decided in the interval;
//! - `ratelimitd_limit_keys_near_limit{domain,limit}`: those at 80 % of their limit or more;
//! - `ratelimitd_limit_keys_over_limit{domain,limit}`: those at 100 % or more (denied, or at the
//!   last admitted hit);
//! - `ratelimitd_limit_max_usage_ratio{domain,limit}`: the highest share any key reached (above 1
//!   when a fixed window counted denied hits too, as Go's does).
//!
//! `limit` is the limit's `name`, else its configuration path (`full_key`); a stored or request
//! override, whose path holds the client's values, is `override`. So the series are bounded by the
//! configuration, whatever the number of clients. Memory is bounded too: each stripe notes at
//! most [`KEYS_PER_STRIPE`] keys per interval; beyond that, new keys of the interval are not
//! counted (`ratelimitd_limit_usage_keys_dropped_total` says how many).
//!
//! Cost on the request path: a hash per limited descriptor and one short lock on the calling
//! thread's own stripe; a key already noted this interval allocates nothing.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, IntCounter, IntGaugeVec, Opts};

use crate::metrics::Collect;
use ratelimitd_core::clock::Clock;
use ratelimitd_core::config::Limit;
use ratelimitd_core::limiter::{Observed, Observer, Plan};
use ratelimitd_core::stripe::{self, Padded};

/// Length of one interval of the service clock.
pub(crate) const INTERVAL_SECS: u64 = 10;
/// Keys one stripe notes per interval.
pub(crate) const KEYS_PER_STRIPE: usize = 4096;
/// The share of a limit from which a key counts as near it.
const NEAR: f64 = 0.8;

/// One key noted in the interval.
#[derive(Debug)]
struct Noted {
    domain: String,
    limit: Arc<Limit>,
    /// The highest share of the limit in use seen in the interval.
    ratio: f64,
}

/// The keys one stripe noted in the interval, by hash.
type Keys = HashMap<u64, Noted>;

/// One limit's row of the closed interval.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LimitUsage {
    /// The request's domain.
    pub domain: String,
    /// The limit's label (see the module).
    pub limit: String,
    /// Keys decided in the interval.
    pub active: u64,
    /// Keys at [`NEAR`] of the limit or more.
    pub near: u64,
    /// Keys at the limit or over.
    pub over: u64,
    /// The highest share reached.
    pub max_ratio: f64,
}

/// The per-limit usage of the last closed interval, and the interval being filled.
#[derive(Debug)]
pub(crate) struct LimitUsageTracker {
    stripes: Box<[Padded<Mutex<Keys>>]>,
    seed: ahash::RandomState,
    clock: Arc<dyn Clock>,
    /// Start (service clock, seconds) of the interval being filled.
    interval: AtomicU64,
    closed: ArcSwap<Vec<LimitUsage>>,
    dropped: AtomicU64,
}

/// The label of `limit`: its name, else its configuration path; `override` for overrides.
fn label(limit: &Limit) -> String {
    if limit.file.is_empty() || limit.name.starts_with("override:") {
        "override".to_string()
    } else if limit.name.is_empty() {
        limit.full_key.clone()
    } else {
        limit.name.clone()
    }
}

/// The share of the limit in use after a decision; `None` when the decision read no counter
/// and was not over (a lease or the local cache answered).
fn ratio(
    over_limit: bool,
    remaining: u64,
    usage: Option<(u64, u64)>,
    requests_per_unit: u32,
) -> Option<f64> {
    let configured = f64::from(requests_per_unit.max(1));
    match usage {
        Some((_, after)) if over_limit => Some((after as f64 / configured).max(1.0)),
        Some((_, after)) => {
            let capacity = after.saturating_add(remaining);
            (capacity > 0).then(|| after as f64 / capacity as f64)
        }
        None if over_limit => Some(1.0),
        None => None,
    }
}

impl LimitUsageTracker {
    /// A tracker reading `clock`.
    pub(crate) fn new(clock: Arc<dyn Clock>) -> LimitUsageTracker {
        let start = clock.now().as_secs() / INTERVAL_SECS * INTERVAL_SECS;
        LimitUsageTracker {
            stripes: (0..stripe::count())
                .map(|_| Padded(Mutex::new(HashMap::new())))
                .collect(),
            seed: ahash::RandomState::new(),
            clock,
            interval: AtomicU64::new(start),
            closed: ArcSwap::from_pointee(Vec::new()),
            dropped: AtomicU64::new(0),
        }
    }

    /// Closes the interval when the service clock has passed its end (called once a second):
    /// its keys are summed per limit and become what the gauges show.
    pub(crate) fn sample(&self) {
        let now = self.clock.now().as_secs();
        let start = self.interval.load(Ordering::Relaxed);
        if now < start.saturating_add(INTERVAL_SECS) {
            return;
        }
        self.interval
            .store(now / INTERVAL_SECS * INTERVAL_SECS, Ordering::Relaxed);
        self.closed.store(Arc::new(self.close()));
    }

    /// Takes every stripe's keys and sums them per limit.
    fn close(&self) -> Vec<LimitUsage> {
        let mut keys: HashMap<u64, Noted> = HashMap::new();
        for stripe in &self.stripes {
            let taken = std::mem::take(&mut *stripe.0.lock());
            for (hash, noted) in taken {
                match keys.get_mut(&hash) {
                    Some(k) => k.ratio = k.ratio.max(noted.ratio),
                    None => {
                        keys.insert(hash, noted);
                    }
                }
            }
        }
        let mut rows: HashMap<(String, String), LimitUsage> = HashMap::new();
        for noted in keys.into_values() {
            let limit = label(&noted.limit);
            let row = rows
                .entry((noted.domain.clone(), limit.clone()))
                .or_insert_with(|| LimitUsage {
                    domain: noted.domain,
                    limit,
                    active: 0,
                    near: 0,
                    over: 0,
                    max_ratio: 0.0,
                });
            row.active += 1;
            row.near += u64::from(noted.ratio >= NEAR);
            row.over += u64::from(noted.ratio >= 1.0);
            row.max_ratio = row.max_ratio.max(noted.ratio);
        }
        let mut rows: Vec<LimitUsage> = rows.into_values().collect();
        rows.sort_by(|a, b| (&a.domain, &a.limit).cmp(&(&b.domain, &b.limit)));
        rows
    }

    /// The rows of the last closed interval.
    pub(crate) fn rows(&self) -> Arc<Vec<LimitUsage>> {
        self.closed.load_full()
    }

    fn note(&self, hash: u64, domain: &str, limit: &Arc<Limit>, ratio: f64) {
        let mut keys = self.stripes[stripe::mine() % self.stripes.len()].0.lock();
        if let Some(k) = keys.get_mut(&hash) {
            k.ratio = k.ratio.max(ratio);
            return;
        }
        if keys.len() >= KEYS_PER_STRIPE {
            drop(keys);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        keys.insert(
            hash,
            Noted {
                domain: domain.to_string(),
                limit: limit.clone(),
                ratio,
            },
        );
    }
}

impl Observer for LimitUsageTracker {
    fn observe(&self, d: &Observed<'_>) {
        for (settled, descriptor) in d.settled.iter().zip(&d.request.descriptors) {
            let (Plan::Limited(plan), Some((limit, _, verdict))) = (settled.plan, settled.reported)
            else {
                continue;
            };
            if plan.refund {
                continue;
            }
            let Some(ratio) = ratio(
                verdict.over_limit,
                verdict.remaining,
                verdict.usage,
                limit.requests_per_unit,
            ) else {
                continue;
            };
            let mut h = super::key_hasher(&self.seed, &d.request.domain, &descriptor.entries);
            Arc::as_ptr(limit).hash(&mut h);
            self.note(h.finish(), &d.request.domain, limit, ratio);
        }
    }
}

/// The gauges: (name, help).
const ACTIVE: (&str, &str) = (
    "ratelimitd_limit_active_keys",
    "Keys of this limit decided in the last closed 10-second interval (per limit, never per client)",
);
const NEAR_KEYS: (&str, &str) = (
    "ratelimitd_limit_keys_near_limit",
    "Keys of this limit that reached 80% of it or more in the last closed 10-second interval",
);
const OVER_KEYS: (&str, &str) = (
    "ratelimitd_limit_keys_over_limit",
    "Keys of this limit that reached 100% of it or more in the last closed 10-second interval",
);
const MAX_RATIO: (&str, &str) = (
    "ratelimitd_limit_max_usage_ratio",
    "Highest share of this limit any key used in the last closed 10-second interval (1 = at the limit)",
);
const DROPPED: (&str, &str) = (
    "ratelimitd_limit_usage_keys_dropped_total",
    "Keys left out of the limit usage gauges because an interval already noted its maximum of keys",
);

/// The tracker's rows as gauges.
pub(super) struct LimitUsageGauges(pub(super) Arc<LimitUsageTracker>);

impl Collect for LimitUsageGauges {
    fn families(&self) -> Vec<MetricFamily> {
        let labels = ["domain", "limit"];
        let int = |(name, help): (&str, &str)| IntGaugeVec::new(Opts::new(name, help), &labels);
        let (Ok(active), Ok(near), Ok(over), Ok(max), Ok(dropped)) = (
            int(ACTIVE),
            int(NEAR_KEYS),
            int(OVER_KEYS),
            GaugeVec::new(Opts::new(MAX_RATIO.0, MAX_RATIO.1), &labels),
            IntCounter::new(DROPPED.0, DROPPED.1),
        ) else {
            return Vec::new();
        };
        let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        for r in self.0.rows().iter() {
            let l = [r.domain.as_str(), r.limit.as_str()];
            active.with_label_values(&l).set(clamp(r.active));
            near.with_label_values(&l).set(clamp(r.near));
            over.with_label_values(&l).set(clamp(r.over));
            max.with_label_values(&l).set(r.max_ratio);
        }
        dropped.inc_by(self.0.dropped.load(Ordering::Relaxed));
        let mut out = active.collect();
        out.extend(near.collect());
        out.extend(over.collect());
        out.extend(max.collect());
        out.extend(dropped.collect());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_in_use_follows_the_counter_or_the_verdict() {
        let limit = 10;
        assert_eq!(ratio(false, 2, Some((7, 8)), limit), Some(0.8));
        assert_eq!(ratio(true, 0, Some((10, 15)), limit), Some(1.5));
        assert_eq!(ratio(true, 0, Some((3, 4)), limit), Some(1.0));
        assert_eq!(ratio(true, 0, None, limit), Some(1.0));
        assert_eq!(ratio(false, 5, None, limit), None);
    }
}
