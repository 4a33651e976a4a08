//! The Rate Limit Quota Service (RLQS, `envoy.service.rate_limit_quota.v3`): Envoy's
//! `rate_limit_quota` filter decides locally and streams usage reports; ratelimitd answers with
//! quota assignments per bucket, from the same configuration `ShouldRateLimit` reads.
//! - [`bucket`]: a report's `BucketId`, sorted by key, is one descriptor of the stream's domain,
//!   planned by the limiter; its limit is the bucket's global budget.
//! - [`demand`]: each stream's recent demand, posted to a board every instance reads (Redis, or
//!   this process on the memory store); [`changes`]: which buckets' demands changed lately.
//! - [`split`]: the budget divided in proportion to demand, as the token bucket Envoy enforces.
//! - [`stream`]: one stream's buckets ([`tracked`]: each one's state; [`checks`]: of its reports); [`service`]: the gRPC
//!   service and its bounds ([`slots`]: streams in all and per peer).
//! - [`RlqsOptions`] (read from `RLQS_*` by `settings`) and [`start`], which builds the service
//!   from them and what it shares with the rest of the process.

pub(crate) mod actions;
pub(crate) mod bucket;
pub(crate) mod changes;
pub(crate) mod checks;
pub(crate) mod demand;
mod metrics;
mod options;
pub(crate) mod service;
pub(crate) mod slots;
pub(crate) mod split;
pub(crate) mod stream;
pub(crate) mod tracked;
mod wiring;

use std::sync::Arc;

use crate::policy::Overrides;
use crate::reload::ConfigHandle;
use ratelimitd_core::clock::Clock;
use ratelimitd_core::limiter::KeyBuilder;

pub use demand::{Board, MemoryBoard};
pub(crate) use metrics::RlqsMetrics;
pub(crate) use options::{RlqsOptions, Unmatched};
pub(crate) use service::{RateLimitQuotaServiceServer, RlqsService};
pub(crate) use wiring::{RlqsDeps, start};

/// What every stream of the service reads.
#[derive(Debug)]
pub struct Shared {
    /// The live configuration.
    pub config: Arc<ConfigHandle>,
    /// Stored overrides (the policy database), applied as for `ShouldRateLimit`.
    pub overrides: Arc<Overrides>,
    /// The limiter's cache-key builder (planning builds keys; RLQS does not count with them).
    pub keys: KeyBuilder,
    /// Where demands meet.
    pub board: Board,
    /// The clock of demand expiry and stored overrides.
    pub clock: Arc<dyn Clock>,
    /// Bounds and defaults.
    pub options: RlqsOptions,
    /// `CACHE_KEY_PREFIX`, in front of the demand board's keys.
    pub prefix: String,
    /// Its counters (`None` with `DISABLE_STATS`).
    pub metrics: Option<RlqsMetrics>,
}

impl Shared {
    fn metrics_reported(&self, allowed: u64, denied: u64) {
        if let Some(m) = &self.metrics {
            m.reported.with_label_values(&["allowed"]).inc_by(allowed);
            m.reported.with_label_values(&["denied"]).inc_by(denied);
        }
    }

    fn metrics_buckets(&self, delta: i64) {
        if let Some(m) = &self.metrics {
            m.buckets.add(delta);
        }
    }

    fn metrics_assignment(&self, strategy: &str) {
        if let Some(m) = &self.metrics {
            m.assignments.with_label_values(&[strategy]).inc();
        }
    }

    fn metrics_streams(&self, delta: i64) {
        if let Some(m) = &self.metrics {
            m.streams.add(delta);
        }
    }
}
