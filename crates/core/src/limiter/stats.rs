//! Per-limit and service stats of one decision (`docs/design/contract.md#descriptor-status`,
//! `docs/design/contract.md#stats`), counted in one place after the store answered, into an
//! injected [`StatsSink`]. The limiter knows the stat *rules* (which counter moves by how much);
//! the sink knows storage and exposition (Prometheus, StatsD).

use std::time::Duration;

use super::outcome::{Settled, Source, Verdict};
use super::plan::{Plan, Plans};
use super::response::Code;
use super::signals::{self, ShedOutcome};
use crate::clock::Timestamp;

/// How much each per-limit counter moves for one descriptor
/// (`docs/design/contract.md#descriptor-status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LimitIncrements {
    /// `total_hits`.
    pub total_hits: u64,
    /// `over_limit`.
    pub over_limit: u64,
    /// `near_limit`.
    pub near_limit: u64,
    /// `over_limit_with_local_cache`: hits answered by the local over-limit cache.
    pub over_limit_with_local_cache: u64,
    /// `within_limit`.
    pub within_limit: u64,
    /// `shadow_mode`.
    pub shadow_mode: u64,
    /// `local_fallback` (ratelimitd): hits decided by the local fallback while the store did
    /// not answer.
    pub local_fallback: u64,
    /// `total_negative_hits`: hits given back by refunds (`is_negative_hits`), which move no
    /// other counter.
    pub total_negative_hits: u64,
}

/// Why a `ShouldRateLimit` call failed, as the Go error counters name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// `call.should_rate_limit.redis_error`: the store failed.
    Redis,
    /// `call.should_rate_limit.service_error`: bad request or no configuration.
    Service,
    /// `call.should_rate_limit.store_full` (ratelimitd): the memory store refused a new key
    /// (`MEMORY_MAX_KEYS` / `MEMORY_MAX_BYTES`); counted apart from backend failures.
    StoreFull,
}

/// Where the limiter reports stats. Implementations must be cheap and must never block or fail:
/// they run on the request path.
pub trait StatsSink: Send + Sync + std::fmt::Debug + 'static {
    /// Adds `inc` to the counters of stats key `key` (already sanitised).
    fn limit(&self, key: &str, inc: &LimitIncrements);
    /// One descriptor named the unknown `domain` (already sanitised).
    fn domain_not_found(&self, domain: &str);
    /// `n` descriptors of one request to the configured `domain` (already sanitised) matched no
    /// node of its tree: limited by its `default_limit` if it has one, else let through.
    fn unmatched(&self, domain: &str, n: u64) {
        let _ = (domain, n);
    }
    /// `n` request overrides (a descriptor's own `limit`) to `domain` (already sanitised) were
    /// above its `max_request_limit` and were counted at it.
    fn request_limit_capped(&self, domain: &str, n: u64) {
        let _ = (domain, n);
    }
    /// `n` `when:` predicates of one request to `domain` (already sanitised) failed at run time
    /// and answered by their limit's `failure_mode`.
    fn predicate_errors(&self, domain: &str, n: u64) {
        let _ = (domain, n);
    }
    /// `looked` descriptors of one request to `domain` (already sanitised) were looked up among
    /// the stored overrides, and one was found for `found` of them.
    fn stored_overrides(&self, domain: &str, looked: u64, found: u64) {
        let _ = (domain, looked, found);
    }
    /// Global shadow mode turned an `OVER_LIMIT` answer into OK.
    fn global_shadow_mode(&self);
    /// A call failed.
    fn error(&self, kind: ErrorKind);
    /// One batch went to the store and took `elapsed`.
    fn store_call(&self, elapsed: Duration, ok: bool);
    /// One request was answered with `code`, decided by `source` (the first limit's source that
    /// was not the store, else the store).
    fn decision(&self, code: Code, source: Source);
    /// A descriptor of a limit that sheds (`priorities`, `soft`) came to `outcome`; `class` is
    /// the request's class (a name from the config, never a request value; empty without
    /// classes).
    fn shed(&self, _key: &str, _class: &str, _outcome: ShedOutcome) {}
    /// The store counted `hits` of usage reported after the response on limit `key` (its stats
    /// key), debt included. Sinks without such a counter ignore it.
    fn usage_reported(&self, _key: &str, _hits: u64) {}
    /// A descriptor reached its limit's soft-breach ratio (`soft.breach_ratio`, else the
    /// service's `SOFT_BREACH_RATIO`).
    fn soft_breach(&self, _key: &str) {}
    /// The store counted `in_use` slots held on concurrency limit `key` (its configured stats
    /// key), the latest of them until `until`: a gauge, replaced by the next report. Sinks
    /// without gauges ignore it.
    fn slots_in_use(&self, key: &str, in_use: u64, until: Timestamp) {
        let _ = (key, in_use, until);
    }
    /// The store counted `usage` of `limit` on limit `key` (its configured stats key), which
    /// has priority classes (`shedding`): the counter after this instance's latest decision on
    /// it, as of a window that ends at `until`. A gauge, replaced by the next report; sinks
    /// without gauges ignore it.
    fn shed_usage(&self, usage: &ShedUsage<'_>) {
        let _ = usage;
    }
}

/// One report of [`StatsSink::shed_usage`].
#[derive(Debug, Clone, Copy)]
pub struct ShedUsage<'a> {
    /// The limit's configured stats key (its config path; `<domain>.override_<id>` for a stored
    /// override), never a request value.
    pub key: &'a str,
    /// The counter after the decision: a refused request counted nothing.
    pub usage: u64,
    /// The limit (`requests_per_unit`) the classes' shares are of.
    pub limit: u64,
    /// The limit's classes and soft zone (from the config).
    pub shedding: &'a std::sync::Arc<crate::config::Shedding>,
    /// When the window of that count ends: past it the count says nothing of the new window.
    pub until: Timestamp,
}

/// A sink that drops everything (`DISABLE_STATS`, unit tests).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoStats;

impl StatsSink for NoStats {
    fn limit(&self, _: &str, _: &LimitIncrements) {}
    fn domain_not_found(&self, _: &str) {}
    fn global_shadow_mode(&self) {}
    fn error(&self, _: ErrorKind) {}
    fn store_call(&self, _: Duration, _: bool) {}
    fn decision(&self, _: Code, _: Source) {}
}

/// `floor(float32(limit) * ratio)`: the product is taken in float32, as the Go service does, so
/// thresholds agree with it to the unit (e.g. limit 10, ratio 0.7 gives 7, not 6).
pub(crate) fn near_threshold(limit: u64, ratio: f32) -> u64 {
    let product = (limit as f32) * ratio;
    f64::from(product).floor() as u64
}

/// The counter increments of one decided descriptor (`docs/design/contract.md#descriptor-status`).
/// A verdict reached without a counter (the local over-limit cache) counts as a key already over
/// before these hits.
pub(crate) fn increments(
    v: &Verdict,
    source: Source,
    limit: u64,
    hits: u64,
    shadow: bool,
    ratio: f32,
) -> LimitIncrements {
    let near = near_threshold(limit, ratio);
    let (before, after) = v.usage.unwrap_or((limit, limit.saturating_add(hits)));
    let mut inc = LimitIncrements {
        total_hits: hits,
        ..LimitIncrements::default()
    };
    match source {
        Source::LocalCache => inc.over_limit_with_local_cache = hits,
        Source::LocalFallback => inc.local_fallback = hits,
        _ => {}
    }
    if v.over_limit {
        if before >= limit {
            inc.over_limit = hits;
        } else {
            inc.over_limit = after.saturating_sub(limit);
            inc.near_limit = limit.saturating_sub(near.max(before));
        }
        if shadow {
            inc.shadow_mode = if before >= limit {
                hits
            } else {
                after.saturating_sub(limit)
            };
        }
    } else {
        if after > near {
            inc.near_limit = if before >= near { hits } else { after - near };
        }
        inc.within_limit = hits;
    }
    inc
}

/// The increments of a refund of `hits`: only `total_negative_hits` moves (a refund is neither a
/// hit nor ever near or over a limit).
pub(crate) fn refunded(hits: u64) -> LimitIncrements {
    LimitIncrements {
        total_negative_hits: hits,
        ..LimitIncrements::default()
    }
}

/// The counter increments of a usage report of `hits` that took the key's usage from `before`
/// to `after` (its [`Verdict::usage`]): `total_hits` moves by every reported hit; the part that
/// went past the limit is `over_limit`, as Go counts the hits past the limit of a fixed window;
/// the rest is `within_limit`, and the part of it past the near-limit threshold `near_limit`.
/// A report is never refused, so `over_limit + within_limit = total_hits` and the shadow-mode
/// counter stays still.
pub(crate) fn reported(v: &Verdict, limit: u64, hits: u64, ratio: f32) -> LimitIncrements {
    let near = near_threshold(limit, ratio);
    let (before, after) = v.usage.unwrap_or((0, hits));
    let over = after.saturating_sub(before.max(limit)).min(hits);
    let within_end = after.min(limit);
    LimitIncrements {
        total_hits: hits,
        over_limit: over,
        within_limit: hits - over,
        near_limit: within_end.saturating_sub(before.max(near)).min(hits - over),
        ..LimitIncrements::default()
    }
}

/// Reports the stats of a decided request, per descriptor under its reported limit. Unlimited
/// and replaced descriptors count nothing.
pub(crate) fn record(sink: &dyn StatsSink, ratio: f32, settled: &[Settled<'_>]) {
    for s in settled {
        if let (Plan::Limited(l), Some((limit, source, verdict))) = (s.plan, s.reported) {
            if l.refund {
                sink.limit(&l.stats_key, &refunded(l.hits));
                // A report of less than its estimate is a refund of the difference.
                if let Some(usage) = l.usage {
                    sink.usage_reported(&l.stats_key, usage);
                }
                continue;
            }
            if l.report && source == Source::Store {
                let limit = u64::from(limit.requests_per_unit);
                sink.limit(&l.stats_key, &reported(verdict, limit, l.hits, ratio));
                sink.usage_reported(&l.stats_key, l.usage.unwrap_or(l.hits));
                continue;
            }
            // A request refused by a limit that sheds (`priorities`, `soft`) was judged against
            // its effective limit (its class's share, the soft zone's draw): it is an over-limit
            // hit of that limit, counted as Go counts one, not near-limit hits of the full limit.
            // Only a refusal looks the shed up: an admitted descriptor (most) costs nothing more.
            let shed = verdict.over_limit.then(|| signals::shed_of(s)).flatten();
            // A split limit's request was judged by one sub-key against its share.
            let whole = l
                .share_of(limit)
                .unwrap_or(u64::from(limit.requests_per_unit));
            let judged = shed.map_or(whole, |shed| shed.effective);
            let inc = increments(verdict, source, judged, l.hits, limit.shadow_mode, ratio);
            sink.limit(&l.stats_key, &inc);
        }
    }
}

/// Reports what is known when the store failed: `total_hits` is counted before the store call in
/// the Go service, so it moves even when the call fails.
pub(crate) fn record_store_failure(sink: &dyn StatsSink, plans: &Plans<'_>, kind: ErrorKind) {
    for plan in &plans.descriptors {
        if let Plan::Limited(l) = plan {
            let inc = if l.refund {
                refunded(l.hits)
            } else {
                LimitIncrements {
                    total_hits: l.hits,
                    ..LimitIncrements::default()
                }
            };
            sink.limit(&l.stats_key, &inc);
        }
    }
    sink.error(kind);
}

#[cfg(test)]
mod tests;
