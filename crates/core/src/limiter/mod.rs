//! The rate limiter: one config snapshot + one request → response, read top to bottom in
//! `RateLimiter::decide`:
//! 1. `validate`: the request is well formed (Go's messages) and within the caps;
//! 2. [`plan`]: each descriptor once into a [`Plan`] — its limits, hits (clamped to what can
//!    change a decision, [`hits`]), stats key, and one store op per limit with its cache key
//!    ([`key`]);
//!    `regional` scales the ops of worldwide limits to this region's share;
//! 3. run the ops in one store batch; one [`Outcome`] per op, tagged with its [`Source`] (the
//!    store, its local over-limit cache, or — for ops the store did not answer — the `failure`
//!    policy, the open circuit breaker, or the local [`fallback`]);
//! 4. [`outcome::settle`]: each descriptor reports its most restrictive outcome;
//! 5. `stats` and `finish` (statuses, overall code, headers, metadata) fold from that;
//!    [`headers`] turns a response into the standard rate limit headers every edge renders;
//! 6. `observe`: the settled decision is shown to the observers (violations, hot keys, the
//!    decision log), which never block the request.

pub(crate) mod error;
pub(crate) mod failure;
pub mod fallback;
pub(crate) mod finish;
pub mod fired;
pub(crate) mod give_back;
pub mod headers;
pub mod hits;
pub mod key;
pub(crate) mod limits;
pub(crate) mod observe;
pub mod outcome;
pub(crate) mod override_index;
pub mod plan;
pub(crate) mod quota;
pub(crate) mod regional;
pub mod request;
pub(crate) mod response;
pub mod signals;
pub(crate) mod slots;
pub mod split;
pub(crate) mod stats;
pub(crate) mod stats_key;
pub(crate) mod stored_override;
pub(crate) mod validate;

use std::sync::Arc;

use tracing::Instrument;

use crate::clock::{Clock, Stopwatch, Timestamp};
use crate::config::FailureMode;
use crate::config::RateLimitConfig;
use crate::random::{Random, SeededRandom};
use crate::region::RegionShares;
use crate::store::{Answer, Store, StoreError};
pub use error::RequestError;
use failure::Degraded;
use fallback::LocalFallback;
pub use key::{KeyBuilder, KeyFormat};
pub use limits::{Limits, OverCap};
pub use observe::{Observed, Observer, Observers};
pub use outcome::{Outcome, Source, Verdict};
pub use override_index::{OverrideIndex, Overrides};
pub use plan::{Plan, Plans};
pub use request::{Descriptor, Entry, Override, Request};
pub use response::{Code, CurrentLimit, DescriptorStatus, OtherLimit, Response};
pub use signals::{SOFT_BREACH_HEADER, ShedOutcome};
pub use stats::{ErrorKind, LimitIncrements, NoStats, ShedUsage, StatsSink};
pub use stored_override::{NewOverride, PathEntry, StoredOverride};

/// Names of the headers added when `LIMIT_RESPONSE_HEADERS_ENABLED` is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderNames {
    /// `LIMIT_LIMIT_HEADER`.
    pub limit: String,
    /// `LIMIT_REMAINING_HEADER`.
    pub remaining: String,
    /// `LIMIT_RESET_HEADER`.
    pub reset: String,
}

/// Service-wide behaviour switches (the Go settings of the same names).
#[derive(Debug, Clone, Default)]
pub struct LimiterOptions {
    /// `SHADOW_MODE`: the overall code is never `OVER_LIMIT`.
    pub shadow_mode: bool,
    /// `QUOTA_MODE`: every descriptor is a quota descriptor.
    pub quota_mode: bool,
    /// `LIMIT_RESPONSE_HEADERS_ENABLED` with the header names.
    pub headers: Option<HeaderNames>,
    /// `RESPONSE_DYNAMIC_METADATA`.
    pub dynamic_metadata: bool,
    /// Cache key prefix and format.
    pub keys: KeyBuilder,
    /// `NEAR_LIMIT_RATIO`: the share of a limit above which hits count as `near_limit`.
    pub near_limit_ratio: f32,
    /// `SOFT_BREACH_RATIO`: the share of a limit from which a descriptor raises the soft-breach
    /// signal, for limits without their own `soft.breach_ratio`; `None`: only those do.
    pub soft_breach_ratio: Option<f64>,
    /// `DEFAULT_FAILURE_MODE`: the failure mode of limits that do not name one.
    pub default_failure_mode: FailureMode,
    /// Caps on one request (descriptors, entries, value lengths).
    pub caps: Limits,
}

/// Decides requests against a store. Shared by the gRPC and HTTP edges.
///
/// A request's hits go to every descriptor a rule matches; a descriptor no rule matches is not
/// limited, and the request is over the limit when any of its descriptors is:
///
/// ```
/// use std::sync::Arc;
///
/// use ratelimitd_core::{
///     Code, CompileOptions, ConfigFile, Descriptor, LimiterOptions, ManualClock, MemoryStore,
///     RateLimiter, Request, Timestamp, compile,
/// };
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let yaml = r#"
/// domain: files
/// descriptors:
///   - key: path
///     value: /upload
///     rate_limit: {unit: second, requests_per_unit: 10}
/// "#;
/// let files = [ConfigFile { name: "files.yaml".into(), contents: yaml.into() }];
/// let config = compile(&files, &CompileOptions::default())?;
/// let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_700_000_000)));
/// let limiter = RateLimiter::new(
///     Arc::new(MemoryStore::new(1_000)),
///     clock,
///     LimiterOptions::default(),
/// );
///
/// let mut request = Request::new(
///     "files",
///     vec![Descriptor::of(&[("path", "/upload")]), Descriptor::of(&[("path", "/health")])],
/// );
/// request.hits_addend = 8; // one request that counts as 8 hits
/// let response = limiter.should_rate_limit(Some(&config), &request).await?;
/// assert_eq!(response.overall_code, Code::Ok);
/// assert_eq!(response.statuses[0].limit_remaining, 2);
/// assert_eq!(response.statuses[1].current_limit, None); // no rule for /health
///
/// // 8 more hits do not fit in the 2 left this second.
/// let response = limiter.should_rate_limit(Some(&config), &request).await?;
/// assert_eq!(response.overall_code, Code::OverLimit);
/// assert_eq!(response.statuses[0].code, Code::OverLimit);
/// assert_eq!(response.statuses[1].code, Code::Ok);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct RateLimiter {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    options: LimiterOptions,
    stats: Arc<dyn StatsSink>,
    fallback: Arc<LocalFallback>,
    random: Arc<dyn Random>,
    failure_log: failure::FailureLog,
    overrides: Arc<Overrides>,
    observers: Observers,
    regions: Arc<RegionShares>,
}

impl RateLimiter {
    /// A limiter over `store`, reading time from `clock`, counting nothing.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        options: LimiterOptions,
    ) -> RateLimiter {
        RateLimiter::with_stats(store, clock, options, Arc::new(NoStats))
    }

    /// A limiter that reports its stats to `stats`.
    pub fn with_stats(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        options: LimiterOptions,
        stats: Arc<dyn StatsSink>,
    ) -> RateLimiter {
        RateLimiter {
            store,
            clock,
            options,
            stats,
            fallback: Arc::new(LocalFallback::default()),
            random: Arc::new(SeededRandom::from_entropy()),
            failure_log: failure::FailureLog::default(),
            overrides: Arc::new(Overrides::default()),
            observers: Observers::default(),
            regions: Arc::new(RegionShares::default()),
        }
    }

    /// Uses `fallback` for `failure_mode: local` (shared with the heartbeat task, which sets its
    /// instance count and drops its counts when the store is back).
    pub fn with_fallback(mut self, fallback: Arc<LocalFallback>) -> RateLimiter {
        self.fallback = fallback;
        self
    }

    /// Draws the soft limits' numbers from `random` (a [`SeededRandom`] with a fixed seed in
    /// tests; by default one seeded per process).
    pub fn with_random(mut self, random: Arc<dyn Random>) -> RateLimiter {
        self.random = random;
        self
    }

    /// Applies the stored overrides of `overrides` (the policy database's index, swapped in by
    /// the policy runtime; read once per request).
    pub fn with_overrides(mut self, overrides: Arc<Overrides>) -> RateLimiter {
        self.overrides = overrides;
        self
    }

    /// Counts regional limits against `regions`' share of them ([`crate::region`]).
    pub fn with_regions(mut self, regions: Arc<RegionShares>) -> RateLimiter {
        self.regions = regions;
        self
    }

    /// Shows every decision to `observers` (`observe`).
    pub fn with_observers(mut self, observers: Observers) -> RateLimiter {
        self.observers = observers;
        self
    }

    /// Answers `req` using `config` (the snapshot taken when the request arrived; `None` when no
    /// configuration has loaded). Every outcome, errors included, is counted in the stats sink.
    pub async fn should_rate_limit(
        &self,
        config: Option<&RateLimitConfig>,
        req: &Request,
    ) -> Result<Response, RequestError> {
        let span = tracing::info_span!("limiter.decide", source = tracing::field::Empty);
        let result = self.decide(config, req).instrument(span).await;
        match &result {
            Err(RequestError::Store(_)) => {} // counted with its total_hits in `decide`
            Err(_) => self.stats.error(ErrorKind::Service),
            Ok(_) => {}
        }
        result
    }

    async fn decide(
        &self,
        config: Option<&RateLimitConfig>,
        req: &Request,
    ) -> Result<Response, RequestError> {
        validate::check(req, &self.options.caps)?;
        let config = config.ok_or(RequestError::NoConfig)?;
        let now = self.clock.now();
        let mut plans = self.plan(config, req, now)?;
        regional::scale(&mut plans, &self.regions, now);
        let answers = self.run(&plans, now).await;
        let mut taken = give_back::releases(&plans.ops, &answers);
        taken.extend(give_back::estimates(&plans, &answers));
        let slots_seen = slots::seen(&plans, &answers);
        let failed = failure::describe(&answers);
        if let Some((_, why)) = &failed {
            self.failure_log.note(why, now);
        }
        // Go counts total_hits before the store call, so they move on failure too.
        let record_failure = || {
            if let Some((kind, _)) = &failed {
                stats::record_store_failure(self.stats.as_ref(), &plans, *kind);
            }
        };
        let degraded = Degraded {
            default_mode: self.options.default_failure_mode,
            fallback: &self.fallback,
        };
        let outcomes = match failure::resolve(&plans, answers, degraded, now).await {
            Ok(outcomes) => outcomes,
            Err(e) => {
                record_failure();
                return Err(e.into());
            }
        };
        let store_failed = outcomes.iter().any(|o| o.source.is_failure_policy());
        if store_failed {
            record_failure();
        }
        // The span says what decided the request: the first source that was not the store.
        let source = outcomes
            .iter()
            .map(|o| o.source)
            .find(|s| *s != Source::Store)
            .unwrap_or(Source::Store);
        tracing::Span::current().record("source", source.as_str());
        let settled = outcome::settle(&plans, &outcomes);
        if !store_failed {
            self.record_settled(&settled, now);
        }
        let (response, global_shadow) = finish::respond(&self.options, req, &settled, now);
        if global_shadow {
            self.stats.global_shadow_mode();
        }
        let refused = response.overall_code == Code::OverLimit;
        if refused {
            give_back::release(self.store.as_ref(), &taken, now).await;
        }
        slots::report(self.stats.as_ref(), &slots_seen, refused);
        self.stats.decision(response.overall_code, source);
        if !self.observers.is_empty() {
            self.observers.observe(&Observed {
                request: req,
                settled: &settled,
                shadow_mode: self.options.shadow_mode,
                now,
            });
        }
        Ok(response)
    }

    /// Plans `req` against its domain of `config` and the stored overrides in service at `now`,
    /// counting what planning saw: descriptors of an unknown domain, failed predicates (even when
    /// one fails the request) and the per-domain [`Tally`](plan::Tally).
    fn plan<'a>(
        &self,
        config: &'a RateLimitConfig,
        req: &'a Request,
        now: Timestamp,
    ) -> Result<Plans<'a>, RequestError> {
        let domain = config.domain(&req.domain);
        if domain.is_none() {
            let domain = stats_key::sanitize(req.domain.as_str().into());
            for _ in &req.descriptors {
                self.stats.domain_not_found(&domain);
            }
        }
        let stored = self.overrides.load();
        let random = self.random.as_ref();
        let default_mode = self.options.default_failure_mode;
        let keys = &self.options.keys;
        let planned = plan::plan(domain, &stored, req, keys, now, random, default_mode);
        let plans = match planned {
            Ok(plans) => plans,
            Err(e) => {
                // The failed predicate is counted although the request gets no decision.
                if matches!(e, RequestError::PredicateFailed { .. }) {
                    let domain = stats_key::sanitize(req.domain.as_str().into());
                    self.stats.predicate_errors(&domain, 1);
                }
                return Err(e);
            }
        };
        self.count_tally(req, plans.tally);
        Ok(plans)
    }

    /// Counts a request's per-domain [`Tally`](plan::Tally) in the stats sink.
    fn count_tally(&self, req: &Request, tally: plan::Tally) {
        if tally.predicate_errors > 0 {
            let domain = stats_key::sanitize(req.domain.as_str().into());
            self.stats
                .predicate_errors(&domain, u64::from(tally.predicate_errors));
        }
        if tally.unmatched > 0 || tally.capped > 0 || tally.stored_lookups > 0 {
            let domain = stats_key::sanitize(req.domain.as_str().into());
            if tally.stored_lookups > 0 {
                let found = u64::from(tally.stored_found);
                (self.stats).stored_overrides(&domain, u64::from(tally.stored_lookups), found);
            }
            if tally.unmatched > 0 {
                self.stats.unmatched(&domain, u64::from(tally.unmatched));
            }
            if tally.capped > 0 {
                self.stats
                    .request_limit_capped(&domain, u64::from(tally.capped));
            }
        }
    }

    /// Records the statistics and signals of a request whose store answered (or that needed no
    /// store): the Go counters, shedding outcomes and usage, soft-limit breaches.
    fn record_settled(&self, settled: &[outcome::Settled<'_>], now: Timestamp) {
        stats::record(self.stats.as_ref(), self.options.near_limit_ratio, settled);
        for (key, class, outcome) in signals::outcomes(settled) {
            self.stats.shed(key, class, outcome);
        }
        for usage in signals::usages(settled, now) {
            self.stats.shed_usage(&usage);
        }
        for s in settled
            .iter()
            .filter(|s| signals::soft_breach(&self.options, s))
        {
            if let Plan::Limited(l) = s.plan {
                self.stats.soft_breach(&l.stats_key);
            }
        }
    }

    /// Sends every op of `plans` to the store in one batch; one answer per op, in order.
    async fn run(&self, plans: &Plans<'_>, now: Timestamp) -> Result<Vec<Answer>, StoreError> {
        if plans.ops.is_empty() {
            // Nothing to count: the store is not contacted (it may even be down).
            return Ok(Vec::new());
        }
        let watch = Stopwatch::start();
        let span = tracing::info_span!("store.apply", ops = plans.ops.len());
        let result = self.store.apply(&plans.ops, now).instrument(span).await;
        let ok = matches!(&result, Ok(a) if !failure::unanswered(a));
        self.stats.store_call(watch.elapsed(), ok);
        result
    }
}

#[cfg(test)]
mod tests;
