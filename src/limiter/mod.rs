//! The rate limiter: one config snapshot + one request → store ops (one batch) → response.
//!
//! Steps: validate the request (Go's messages), resolve each descriptor's limit ([`resolve`]), build
//! one store op per limit with its cache key ([`key`]), apply them in one batch, then turn decisions
//! into statuses and the overall answer ([`finish`]).

pub mod failure;
pub mod finish;
pub mod key;
pub mod request;
pub mod resolve;
pub mod response;
pub mod stats;
pub mod stats_key;

use std::sync::Arc;

use tracing::Instrument;

use crate::algorithm::{Decision, LimitSpec};
use crate::clock::{Clock, Stopwatch, Timestamp};
use crate::config::{Limit, RateLimitConfig};
use crate::store::{Op, Store, StoreError};
pub use key::KeyBuilder;
pub use request::{Descriptor, Entry, Override, Request};
pub use resolve::Resolved;
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
        let mut resolved = resolve::resolve(domain, req)?;
        let decisions = match self.apply(req, &mut resolved, now).await {
            Ok(d) => {
                let ratio = self.options.near_limit_ratio;
                stats::record(self.stats.as_ref(), ratio, req, &resolved, &d);
                d
            }
            Err(e) => {
                stats::record_store_failure(self.stats.as_ref(), req, &resolved);
                failure::answer(req, &mut resolved, now).ok_or(e)?
            }
        };
        let (response, global_shadow) = finish::respond(&self.options, req, &resolved, &decisions);
        if global_shadow {
            self.stats.global_shadow_mode();
        }
        Ok(response)
    }

    /// Sends one op per applicable limit (several for `rate_limits`) to the store in one batch;
    /// returns a decision per descriptor. Where a descriptor has several limits, its `Resolved`
    /// is pointed at the most restrictive one, so the status and stats report that limit.
    async fn apply(
        &self,
        req: &Request,
        resolved: &mut [Resolved<'_>],
        now: Timestamp,
    ) -> Result<Vec<Option<Decision>>, RequestError> {
        let mut ops = Vec::with_capacity(resolved.len());
        for (d, r) in req.descriptors.iter().zip(resolved.iter()) {
            if let Resolved::Limited {
                limit, key_entries, ..
            } = r
            {
                for (i, l) in limit.all().enumerate() {
                    let spec = limit_spec(l);
                    let entries = key_entries.iter().copied();
                    let keys = &self.options.keys;
                    let key = if i == 0 {
                        keys.build(&req.domain, entries, &spec, now)
                    } else {
                        keys.build_extra(&req.domain, entries, &spec, now)
                    };
                    ops.push(Op {
                        key,
                        spec,
                        hits: req.hits_for(d),
                    });
                }
            }
        }
        let mut decisions = if ops.is_empty() {
            // Nothing to count: the store is not contacted (it may even be down).
            Vec::new().into_iter()
        } else {
            let watch = Stopwatch::start();
            let span = tracing::info_span!("store.apply", ops = ops.len());
            let result = self.store.apply(&ops, now).instrument(span).await;
            self.stats.store_call(watch.elapsed(), result.is_ok());
            result?.into_iter()
        };
        Ok(resolved
            .iter_mut()
            .map(|r| match r {
                Resolved::Limited { limit, .. } => {
                    let mine = decisions.by_ref().take(1 + limit.also.len());
                    let (i, d) = most_restrictive(mine)?;
                    if i > 0 {
                        *limit = Arc::clone(&limit.also[i - 1]);
                    }
                    Some(d)
                }
                _ => None,
            })
            .collect())
    }
}

/// The decision a descriptor with several limits reports, and its index: the first over the
/// limit, else the one with the least remaining (the first of equals), as Envoy's headers pick
/// among descriptors.
fn most_restrictive(decisions: impl Iterator<Item = Decision>) -> Option<(usize, Decision)> {
    decisions
        .enumerate()
        .min_by_key(|(_, d)| (!d.over_limit, d.remaining))
}

/// The algorithm parameters of a configured limit.
pub fn limit_spec(limit: &Limit) -> LimitSpec {
    LimitSpec {
        algorithm: limit.algorithm,
        limit: u64::from(limit.requests_per_unit),
        window_secs: limit.window_secs(),
        burst: u64::from(limit.burst.unwrap_or(limit.requests_per_unit)),
    }
}

#[cfg(test)]
mod tests;
