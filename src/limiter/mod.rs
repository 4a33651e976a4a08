//! The rate limiter: one config snapshot + one request → response, read top to bottom in
//! [`RateLimiter::decide`]:
//! 1. validate the request (Go's messages);
//! 2. [`plan`]: each descriptor once into a [`Plan`] — its limits, hits, stats key, and one store
//!    op per limit with its cache key ([`key`]);
//! 3. run the ops in one store batch; one [`Outcome`] per op, tagged with its [`Source`] (the
//!    store, its local over-limit cache, or the [`failure`] policy when the store failed);
//! 4. [`outcome::settle`]: each descriptor reports its most restrictive outcome;
//! 5. [`stats`] and [`finish`] (statuses, overall code, headers, metadata) fold from that;
//!    [`headers`] turns a response into the standard rate limit headers every edge renders.

pub mod failure;
pub mod finish;
pub mod headers;
pub mod key;
pub mod outcome;
pub mod plan;
pub mod request;
pub mod response;
pub mod stats;
pub mod stats_key;

use std::sync::Arc;

use tracing::Instrument;

use crate::clock::{Clock, Stopwatch, Timestamp};
use crate::config::RateLimitConfig;
use crate::store::{Store, StoreError};
pub use key::KeyBuilder;
pub use outcome::{Outcome, Source, Verdict};
pub use plan::{Plan, Plans};
pub use request::{Descriptor, Entry, Override, Request};
pub use response::{Code, CurrentLimit, DescriptorStatus, Response};
pub use stats::{ErrorKind, LimitIncrements, NoStats, StatsSink};

/// Why a request was not answered with a decision. Messages are the Go service's where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The request's domain is empty.
    #[error("rate limit domain must not be empty")]
    EmptyDomain,
    /// The request has no descriptors.
    #[error("rate limit descriptor list must not be empty")]
    NoDescriptors,
    /// No configuration has loaded successfully yet.
    #[error("no rate limit configuration loaded")]
    NoConfig,
    /// A descriptor's override carries UNKNOWN or an invalid unit.
    #[error("descriptor {descriptor}: rate limit override has an invalid unit")]
    InvalidOverrideUnit {
        /// Index of the descriptor in the request.
        descriptor: usize,
    },
    /// The store could not decide.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RequestError {
    /// True when the caller sent a bad request (as opposed to a service-side failure).
    pub fn is_invalid_argument(&self) -> bool {
        matches!(
            self,
            RequestError::EmptyDomain
                | RequestError::NoDescriptors
                | RequestError::InvalidOverrideUnit { .. }
        )
    }
}

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
    /// `SHADOW_MODE`: the overall code is never OVER_LIMIT.
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
}

/// Decides requests against a store. Shared by the gRPC and HTTP edges.
#[derive(Debug)]
pub struct RateLimiter {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    options: LimiterOptions,
    stats: Arc<dyn StatsSink>,
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
        }
    }

    /// Answers `req` using `config` (the snapshot taken when the request arrived; `None` when no
    /// configuration has loaded). Every outcome, errors included, is counted in the stats sink.
    pub async fn should_rate_limit(
        &self,
        config: Option<&RateLimitConfig>,
        req: &Request,
    ) -> Result<Response, RequestError> {
        let result = self.decide(config, req).await;
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
        if req.domain.is_empty() {
            return Err(RequestError::EmptyDomain);
        }
        if req.descriptors.is_empty() {
            return Err(RequestError::NoDescriptors);
        }
        let config = config.ok_or(RequestError::NoConfig)?;
        let domain = config.domain(&req.domain);
        if domain.is_none() {
            let domain = stats_key::sanitize(req.domain.as_str().into());
            for _ in &req.descriptors {
                self.stats.domain_not_found(&domain);
            }
        }
        let now = self.clock.now();
        let plans = plan::plan(domain, req, &self.options.keys, now)?;
        let (outcomes, store_failed) = match self.run(&plans, now).await {
            Ok(outcomes) => (outcomes, false),
            Err(e) => {
                // Go counts total_hits before the store call, so they move on failure too.
                stats::record_store_failure(self.stats.as_ref(), &plans);
                (failure::outcomes(&plans, now).ok_or(e)?, true)
            }
        };
        let settled = outcome::settle(&plans, &outcomes);
        if !store_failed {
            stats::record(self.stats.as_ref(), self.options.near_limit_ratio, &settled);
        }
        let (response, global_shadow) = finish::respond(&self.options, req, &settled, now);
        if global_shadow {
            self.stats.global_shadow_mode();
        }
        Ok(response)
    }

    /// Sends every op of `plans` to the store in one batch; one outcome per op, in order.
    async fn run(&self, plans: &Plans<'_>, now: Timestamp) -> Result<Vec<Outcome>, RequestError> {
        if plans.ops.is_empty() {
            // Nothing to count: the store is not contacted (it may even be down).
            return Ok(Vec::new());
        }
        let watch = Stopwatch::start();
        let span = tracing::info_span!("store.apply", ops = plans.ops.len());
        let result = self.store.apply(&plans.ops, now).instrument(span).await;
        self.stats.store_call(watch.elapsed(), result.is_ok());
        Ok(result?
            .into_iter()
            .map(|a| Outcome::from_answer(a, now))
            .collect())
    }
}

#[cfg(test)]
mod tests;
