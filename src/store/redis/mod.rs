//! The Redis store: counters shared by every ratelimitd instance, updated atomically with one Lua
//! script call per request and algorithm (per hash slot on Redis Cluster), all calls of a request
//! in flight at once, the calls of concurrent requests joined into one where they can be
//! (`join.rs`), and every request's calls bounded by `REDIS_RESPONSE_TIMEOUT`.
//!
//! Redis only keeps state (one script per algorithm: `fixed_window`, `token_bucket`,
//! `sliding_window`, `sliding_log`, `leaky_bucket`); decisions come from the same pure Rust
//! functions the memory store uses, so both stores decide identically (the conformance tests check
//! this).

mod addr;
mod bucket_lease;
mod call;
mod concurrency;
pub(crate) mod conn;
pub(crate) mod describe;
mod fixed_window;
mod group;
pub(crate) mod heartbeat;
mod join;
mod leaky_bucket;
mod lease;
mod options;
pub(crate) mod pending;
pub(crate) mod quota_demand;
pub(crate) mod region_demand;
mod reset;
pub(crate) mod server_time;
mod sliding_log;
mod sliding_window;
mod slots;
mod startup;
mod targets;
mod token_bucket;
pub(crate) mod vitals;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use redis::{RedisError, Script};
use smallvec::SmallVec;

use super::lease::{Leases, Serve};
use super::local_cache::OverLimitCache;
use super::{Answer, Op, PrefixReset, ResetError, Store, StoreError};
use call::{Deadlines, Group, Increment, ScriptKind};
use conn::RedisConn;
use group::join_calls;
use ratelimitd_core::algorithm::{Algorithm, Decision, Window};
use ratelimitd_core::clock::{OffsetClock, Timestamp};
use targets::{Called, TargetGroups};

pub(crate) use options::{RedisConfig, RedisKind, RedisSettings, RedisTls};

/// Windows shorter than this go to the per-second Redis when `REDIS_PERSECOND=true` (Go sends
/// SECOND-unit limits there).
const PER_SECOND_BELOW_SECS: u64 = 60;

/// The Redis-backed store.
#[derive(Debug)]
pub struct RedisStore {
    main: RedisConn,
    per_second: Option<RedisConn>,
    fixed_window: Script,
    token_bucket: Script,
    sliding_window: Script,
    leaky_bucket: Script,
    sliding_log: Script,
    concurrency: Script,
    lease: Script,
    /// The token bucket reservation script.
    bucket_lease: Script,
    /// This instance's token leases (fixed windows and token buckets with `lease`).
    leases: Leases,
    /// The RLQS demand exchange ([`quota_demand`]).
    quota_demand: Script,
    response_timeout: Duration,
    deadlines: Deadlines,
    /// Joins the script calls of concurrent requests (`join.rs`).
    joiner: join::Joiner,
    stop_increment_when_over_limit: bool,
    jitter_max_secs: u64,
    local_cache: Option<OverLimitCache>,
    healthy: AtomicBool,
    /// One circuit breaker per target; `None` until [`RedisStore::with_breakers`] (or when
    /// `REDIS_BREAKER_FAILURES` is 0).
    breakers: Option<targets::Breakers>,
    /// The Cluster slot map of the main and the per-second connection (empty unless Cluster).
    slots: [slots::SlotMap; 2],
}

/// Marks the ops at `indices` as not answered by `target`.
fn unavailable_for<'i>(
    answers: &mut [Option<Answer>],
    indices: impl IntoIterator<Item = &'i usize>,
    target: &'static str,
    breaker_open: bool,
) {
    for &i in indices {
        answers[i] = Some(Answer::Unavailable {
            target,
            breaker_open,
        });
    }
}

/// A failure text that names what failed but never carries credentials (the redis crate's errors
/// do not include AUTH arguments; URLs with passwords are not part of them either).
fn unavailable(what: &str, e: &RedisError) -> StoreError {
    StoreError::Unavailable(format!("redis {what}: {e}"))
}

impl RedisStore {
    /// The main Redis's clock (`TIME`), bounded by the response timeout.
    pub async fn server_time(&self) -> Result<Timestamp, StoreError> {
        match tokio::time::timeout(self.response_timeout, self.main.time()).await {
            Ok(Ok(t)) => Ok(t),
            Ok(Err(e)) => Err(unavailable("TIME failed", &e)),
            Err(_) => Err(StoreError::Unavailable(format!(
                "redis did not answer TIME within {:?}",
                self.response_timeout
            ))),
        }
    }

    /// This host's clock shifted to the main Redis's: keep it in sync with [`Self::server_time`]
    /// (the app does, once a second); every script call's deadline is read from it.
    pub fn redis_clock(&self) -> Arc<OffsetClock> {
        self.deadlines.redis_clock()
    }

    /// The lifetime of the counter key of `window` at `now`: Go's (the window's length), or for
    /// a calendar window the time left until it ends; plus the expiration jitter.
    fn ttl(&self, window: Window, now: Timestamp) -> u64 {
        let jitter = if self.jitter_max_secs > 0 {
            fastrand::u64(0..self.jitter_max_secs)
        } else {
            0
        };
        window.key_ttl_secs(now) + jitter
    }

    /// Runs `script` for `indices` of `ops` on `conn` (the per-second Redis's when `per_second`):
    /// one call, or a part of one joined with concurrent requests' (`join.rs`).
    async fn run(
        &self,
        (conn, per_second): (&RedisConn, bool),
        ops: &[Op],
        ScriptKind { algorithm, leased }: ScriptKind,
        indices: &[usize],
        increment: Increment,
        now: Timestamp,
    ) -> Result<Vec<(usize, Decision)>, RedisError> {
        let g = Group {
            conn,
            ops,
            indices,
            increment,
            now,
            deadline: self.deadlines.next(),
            join: conn.joins_calls().then_some(&self.joiner),
            per_second,
        };
        if leased && algorithm == Algorithm::TokenBucket {
            return bucket_lease::run(&g, &self.bucket_lease, &self.leases).await;
        }
        if leased {
            return lease::run(&g, &self.lease, &self.leases, |w| self.ttl(w, now)).await;
        }
        match algorithm {
            Algorithm::FixedWindow => {
                fixed_window::run(&g, &self.fixed_window, |w| self.ttl(w, now)).await
            }
            Algorithm::TokenBucket => {
                token_bucket::run(&g, &self.token_bucket, &token_bucket::TOKEN_BUCKET).await
            }
            Algorithm::LeakyBucket => {
                token_bucket::run(&g, &self.leaky_bucket, &leaky_bucket::LEAKY_BUCKET).await
            }
            Algorithm::SlidingWindow => sliding_window::run(&g, &self.sliding_window).await,
            Algorithm::SlidingLog => sliding_log::run(&g, &self.sliding_log).await,
            Algorithm::Concurrency => concurrency::run(&g, &self.concurrency).await,
        }
    }
}

/// How an op is served before any call to Redis.
enum Local {
    /// Answered here: by the local over-limit cache, or from this instance's token lease.
    Answered(Answer),
    /// Sent to Redis, to run this script.
    Call(ScriptKind),
}

impl RedisStore {
    /// Serves `op` from the local cache or a token lease when either can, else says which
    /// script it goes to Redis with.
    fn serve_locally(&self, op: &Op, now: Timestamp) -> Local {
        // A usage report must reach the shared counter: neither the cache's "over" nor a lease
        // (which holds only what fits) may answer it.
        if op.report {
            return Local::Call(ScriptKind {
                algorithm: op.spec.algorithm,
                leased: false,
            });
        }
        if let Some(until) = self.cached_over(op, now) {
            return Local::Answered(Answer::CachedOver { until });
        }
        let algorithm = op.spec.algorithm;
        // Leases need every op to add its hits (`Increment::Every`), so the stop-increment
        // setting turns them off.
        if self.stop_increment_when_over_limit {
            return Local::Call(ScriptKind {
                algorithm,
                leased: false,
            });
        }
        match self.leases.serve(op, now) {
            Serve::Served(d) => Local::Answered(Answer::Leased(d)),
            serve => Local::Call(ScriptKind {
                algorithm,
                leased: serve == Serve::Reserve,
            }),
        }
    }

    /// Until when the local cache knows `op`'s key is over its limit. Only fixed windows are
    /// cached: their "over" lasts until a known instant, while a bucket admits again as soon as
    /// one token is back. A limit that sheds is over for one class and not for another: never
    /// cached. Refunds always reach Redis.
    fn cached_over(&self, op: &Op, now: Timestamp) -> Option<Timestamp> {
        let cache = self.local_cache.as_ref()?;
        if !cacheable(op) || op.refund {
            return None;
        }
        cache.over_until(&op.key, now)
    }

    /// Takes the outcomes of a request's calls into `answers` and updates health. Health follows
    /// the calls made: a failure of Redis marks it down, all answered marks it up; ops the
    /// breaker answered say nothing new, and neither does a script Redis refused for its data
    /// (one client's bad input is not Redis being down). With breakers, a failed call marks it
    /// down only once its breaker has left "closed": the calls caught in one stall are not an
    /// outage (see `resilience::breaker`).
    fn settle(
        &self,
        ops: &[Op],
        outcomes: Vec<(&'static str, &TargetGroups, Called)>,
        answers: &mut [Option<Answer>],
        now: Timestamp,
    ) {
        let (mut called, mut failed) = (false, false);
        for (target, groups, outcome) in outcomes {
            let unanswered = groups.iter().flat_map(|(_, idx)| idx);
            match outcome {
                Called::Answered(results) => {
                    called = true;
                    self.take_decisions(ops, target, groups, results, answers, now);
                }
                Called::Rejected => unavailable_for(answers, unanswered, target, true),
                Called::Failed => {
                    called = true;
                    failed |= self.failing(target);
                    unavailable_for(answers, unanswered, target, false);
                }
            }
        }
        if called {
            self.healthy.store(!failed, Ordering::Relaxed);
        }
    }

    /// Takes what `target` decided for its `groups` into `answers`, and teaches the local cache
    /// the fixed windows it decided.
    fn take_decisions(
        &self,
        ops: &[Op],
        target: &'static str,
        groups: &TargetGroups,
        results: Vec<Option<Vec<(usize, Decision)>>>,
        answers: &mut [Option<Answer>],
        now: Timestamp,
    ) {
        for ((_, idx), decisions) in groups.iter().zip(results) {
            // Refused for its data: those ops answer by their failure mode; Redis is fine.
            let Some(decisions) = decisions else {
                unavailable_for(answers, idx, target, false);
                continue;
            };
            for (i, d) in decisions {
                let op = &ops[i];
                if let Some(cache) = &self.local_cache
                    && cacheable(op)
                {
                    cache.learn(&op.key, op.refund, &d, now);
                }
                answers[i] = Some(Answer::Decided(d));
            }
        }
    }
}

/// Whether the local over-limit cache may know `op`'s key (see [`RedisStore::cached_over`]).
fn cacheable(op: &Op) -> bool {
    op.spec.algorithm == Algorithm::FixedWindow && !op.only_admitted
}

#[async_trait]
impl Store for RedisStore {
    async fn apply(&self, ops: &[Op], now: Timestamp) -> Result<Vec<Answer>, StoreError> {
        let mut answers: Vec<Option<Answer>> = vec![None; ops.len()];
        let mut to_call: SmallVec<[(usize, ScriptKind); 4]> = SmallVec::new();
        for (i, op) in ops.iter().enumerate() {
            match self.serve_locally(op, now) {
                Local::Answered(answer) => answers[i] = Some(answer),
                Local::Call(script) => to_call.push((i, script)),
            }
        }
        // Go: with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, a request already over via the local
        // cache adds nothing to its other keys.
        let cached_over = answers
            .iter()
            .any(|a| matches!(a, Some(Answer::CachedOver { .. })));
        let increment = Increment::of(self.stop_increment_when_over_limit, cached_over);
        // One script call per group, all in flight at once, each target behind its breaker.
        let per_target = self.group_calls(ops, &to_call);
        let calls = per_target
            .iter()
            .map(|(target, groups)| self.call_target(*target, groups, ops, increment, now));
        let outcomes = join_calls(calls).await;
        self.settle(ops, outcomes, &mut answers, now);
        ratelimitd_core::store::all_answered(answers, "redis")
    }

    async fn reset(&self, ops: &[Op], _now: Timestamp) -> Result<u64, StoreError> {
        self.reset_keys(ops).await
    }

    async fn reset_prefix(
        &self,
        prefix: &str,
        max_keys: usize,
        _now: Timestamp,
    ) -> Result<PrefixReset, ResetError> {
        self.reset_keys_under(prefix, max_keys).await
    }

    fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    async fn probe(&self) {
        self.check_health().await;
    }

    async fn release_leases(&self, now: Timestamp) -> u64 {
        self.leases.give_back_all(self, now).await
    }

    async fn expire_leases(&self, now: Timestamp) -> u64 {
        self.leases.give_back_expired(self, now).await
    }
}
