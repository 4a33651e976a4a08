//! The one store trait and the embedded memory store; the server adds Redis behind the same trait.
//!
//! A store receives all operations of one request in one batch and applies each atomically per key,
//! in order, so a request costs one round trip whatever the store.

pub mod lease;
pub mod local_cache;
pub mod memory;

use std::time::Duration;

use async_trait::async_trait;

use crate::algorithm::{self, Algorithm, AlgorithmState, Decision, LimitSpec};
use crate::clock::Timestamp;

/// One limit to apply: the key whose state it touches, the limit, and the hits to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// The cache key (see `limiter::key`).
    pub key: String,
    /// The limit and algorithm.
    pub spec: LimitSpec,
    /// Hits to add (0 = check only), or to give back when `refund` is set.
    pub hits: u64,
    /// `is_negative_hits`: give `hits` back instead of adding them ([`crate::algorithm::refund`]).
    /// A refund never creates a key and is never over the limit.
    pub refund: bool,
    /// How long the caller accepts to wait for its hits to conform (`POST /check`'s
    /// `max_wait_ms`): a leaky bucket then reserves a later slot instead of denying
    /// ([`crate::algorithm::shape`]). Zero (policing) for every other op.
    pub max_wait: Duration,
    /// The limit's `lease`: how many hits this instance may reserve from a shared counter at once
    /// ([`lease`]); `None` = the store's default (`LEASE_DEFAULT_SIZE`), `Some(0)` = never.
    /// Stores that keep their counters in this process ignore it.
    pub lease: Option<u32>,
    /// Who holds the slot a concurrency limit's op acquires or releases
    /// ([`crate::algorithm::concurrency`]); empty for every other algorithm.
    pub holder: String,
    /// Count the hits only when they are admitted. Every algorithm but the fixed window records
    /// only admitted hits anyway; a fixed window counts every hit, as in Go, unless this is set.
    /// Set for limits that shed ([`crate::config::shedding`]): a request refused by its class's
    /// share or in a soft zone must not use up the capacity left to the classes above it.
    pub only_admitted: bool,
    /// The hits are usage reported after the fact ([`crate::algorithm::report`]): counted
    /// whatever the state, even past the limit, and never over the limit. A report is never
    /// answered from a lease or the local over-limit cache: it must reach the counter.
    pub report: bool,
}

impl Op {
    /// An op of `hits` on `key` under `spec` with nothing else asked: a take (not a refund or a
    /// report), no wait, the store's default lease, no holder, every hit counted as Go counts
    /// it. Ask for more with struct update syntax: `Op { refund: true, ..Op::new(key, spec, 1) }`.
    pub fn new(key: impl Into<String>, spec: LimitSpec, hits: u64) -> Op {
        Op {
            key: key.into(),
            spec,
            hits,
            refund: false,
            max_wait: Duration::ZERO,
            lease: None,
            holder: String::new(),
            only_admitted: false,
            report: false,
        }
    }

    /// Runs this op's algorithm on `state` (fresh when `None`) at `now`: the one step of a store
    /// that keeps each key's whole state (the memory store under a lock, DynamoDB under a
    /// version), so every such store decides as the others do.
    pub fn run_on(&self, state: &mut Option<AlgorithmState>, now: Timestamp) -> Decision {
        if self.spec.algorithm == Algorithm::Concurrency {
            algorithm::hold(state, &self.spec, &self.holder, self.hits, self.refund, now)
        } else if self.refund {
            algorithm::refund(state, &self.spec, self.hits, now)
        } else if self.report {
            algorithm::report(state, &self.spec, self.hits, now)
        } else if self.only_admitted {
            algorithm::admit(state, &self.spec, self.hits, self.max_wait, now)
        } else {
            algorithm::shape(state, &self.spec, self.hits, self.max_wait, now)
        }
    }
}

/// What a store answered for one op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The algorithm ran on the key's state.
    Decided(Decision),
    /// Served from this instance's lease on the key ([`lease`]): the hits were reserved from the
    /// shared counter earlier, so the backend was not asked. Never over the limit.
    Leased(Decision),
    /// The local over-limit cache (`LOCAL_CACHE_SIZE_IN_BYTES`) knows the key is over its limit
    /// until `until`: the backend was not asked and nothing was counted.
    CachedOver {
        /// When the key's window ends.
        until: Timestamp,
    },
    /// The backend did not answer this op: its call failed or timed out, or the circuit breaker
    /// of its target is open and no call was made. Nothing is known to have been counted.
    Unavailable {
        /// The target (`main`, `per_second`, or a Cluster master's `host:port`).
        target: &'static str,
        /// True when the breaker answered without a call.
        breaker_open: bool,
    },
}

impl Answer {
    /// The algorithm's decision, when the backend ran it.
    pub fn decision(&self) -> Option<&Decision> {
        match self {
            Answer::Decided(d) | Answer::Leased(d) => Some(d),
            Answer::CachedOver { .. } | Answer::Unavailable { .. } => None,
        }
    }
}

/// The answers of a batch in which every op must have one: an op the backend left unanswered
/// fails the batch (naming `backend`), never passes as an allow.
pub fn all_answered(
    answers: Vec<Option<Answer>>,
    backend: &str,
) -> Result<Vec<Answer>, StoreError> {
    answers
        .into_iter()
        .map(|a| {
            a.ok_or_else(|| {
                StoreError::Unavailable(format!("{backend} returned no count for an operation"))
            })
        })
        .collect()
}

/// Why a store could not decide.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The memory store holds its maximum number of live keys or bytes; new keys are refused
    /// rather than evicting live counters (which would silently reset someone's limit).
    #[error(
        "memory store is full: {keys} live keys of about {bytes} bytes tracked (MEMORY_MAX_KEYS, MEMORY_MAX_BYTES)"
    )]
    Full {
        /// Keys held when the new key was refused.
        keys: usize,
        /// Their approximate bytes.
        bytes: usize,
    },
    /// The backend could not be reached or failed; retrying later may succeed.
    #[error("store unavailable: {0}")]
    Unavailable(String),
}

/// What a prefix reset ([`Store::reset_prefix`]) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PrefixReset {
    /// Keys removed.
    pub reset: u64,
    /// True when keys under the prefix may remain: the call stopped at its bound (`max_keys`,
    /// or the scan's own budget). Calling again continues.
    pub more: bool,
}

/// Why a reset did not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResetError {
    /// This store cannot do it at all (`.0` says why, for the caller); nothing was changed.
    #[error("{0}")]
    Unsupported(String),
    /// The backend failed; part of the keys may have been removed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A place where limit state lives. Object-safe: the server holds an `Arc<dyn Store>`.
///
/// [`Store::apply`] and the two resets are required (an operator's reset must work on every
/// store, or say why it cannot). The limiter sends all ops of one request in one batch:
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// use async_trait::async_trait;
/// use ratelimitd_core::store::{Answer, Op, PrefixReset, ResetError};
/// use ratelimitd_core::{
///     Code, CompileOptions, ConfigFile, Descriptor, LimiterOptions, ManualClock, MemoryStore,
///     RateLimiter, Request, Store, StoreError, Timestamp, compile,
/// };
///
/// /// A memory store that counts the batches it is asked.
/// #[derive(Debug)]
/// struct Counted {
///     inner: MemoryStore,
///     batches: AtomicUsize,
/// }
///
/// #[async_trait]
/// impl Store for Counted {
///     async fn apply(&self, ops: &[Op], now: Timestamp) -> Result<Vec<Answer>, StoreError> {
///         self.batches.fetch_add(1, Ordering::Relaxed);
///         self.inner.apply(ops, now).await
///     }
///
///     async fn reset(&self, ops: &[Op], now: Timestamp) -> Result<u64, StoreError> {
///         self.inner.reset(ops, now).await
///     }
///
///     async fn reset_prefix(
///         &self,
///         prefix: &str,
///         max_keys: usize,
///         now: Timestamp,
///     ) -> Result<PrefixReset, ResetError> {
///         self.inner.reset_prefix(prefix, max_keys, now).await
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let yaml = r#"
/// domain: api
/// descriptors:
///   - key: user
///     rate_limit: {unit: minute, requests_per_unit: 5}
///   - key: ip
///     rate_limit: {unit: minute, requests_per_unit: 50}
/// "#;
/// let files = [ConfigFile { name: "api.yaml".into(), contents: yaml.into() }];
/// let config = compile(&files, &CompileOptions::default())?;
/// let store = Arc::new(Counted { inner: MemoryStore::new(1_000), batches: AtomicUsize::new(0) });
/// let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_700_000_000)));
/// let limiter = RateLimiter::new(store.clone(), clock, LimiterOptions::default());
///
/// let request = Request::new(
///     "api",
///     vec![Descriptor::of(&[("user", "alice")]), Descriptor::of(&[("ip", "192.0.2.1")])],
/// );
/// let response = limiter.should_rate_limit(Some(&config), &request).await?;
/// assert_eq!(response.overall_code, Code::Ok);
/// assert_eq!(store.batches.load(Ordering::Relaxed), 1); // two limits, one batch
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// Applies `ops` in order at time `now`, each atomically per key, and returns one answer
    /// per op in the same order; an op whose backend could not answer gets
    /// [`Answer::Unavailable`] (Redis, per target). An error means no op was answered.
    async fn apply(&self, ops: &[Op], now: Timestamp) -> Result<Vec<Answer>, StoreError>;

    /// Forgets the state of every op's key (`op.key`; `hits` and the rest are ignored) at `now`,
    /// whatever its algorithm: a window's count, a bucket, a log, a concurrency limit's slots.
    /// What this instance holds for those keys goes too (its local over-limit cache entry and
    /// its lease, whose reserved hits are dropped rather than given back). Returns how many of
    /// the keys held state. The next request on a key starts fresh.
    async fn reset(&self, ops: &[Op], now: Timestamp) -> Result<u64, StoreError>;

    /// Forgets every key starting with `prefix` (as [`Store::reset`] does for one key), at most
    /// `max_keys` of them per call, each step bounded. By default the store cannot find keys by
    /// their text: [`ResetError::Unsupported`] with [`Store::no_prefix_reset`]'s reason, nothing
    /// changed.
    async fn reset_prefix(
        &self,
        _prefix: &str,
        _max_keys: usize,
        _now: Timestamp,
    ) -> Result<PrefixReset, ResetError> {
        Err(ResetError::Unsupported(self.no_prefix_reset().to_string()))
    }

    /// Why this store refuses [`Store::reset_prefix`] when it keeps the default: what it cannot
    /// do and what to reset instead, for the operator who asked.
    fn no_prefix_reset(&self) -> &'static str {
        "this store cannot find keys by their text: reset descriptors one by one"
    }

    /// Whether the store can currently serve (for health checks).
    fn is_healthy(&self) -> bool {
        true
    }

    /// Re-checks the backend (e.g. PING) so health recovers or degrades while no request runs.
    async fn probe(&self) {}

    /// Gives back every hit this instance reserved but did not spend ([`lease`]), on shutdown and
    /// after a reload, at `now`; returns how many went back. Nothing to do for stores without leases.
    async fn release_leases(&self, _now: Timestamp) -> u64 {
        0
    }

    /// Gives back what leases that stopped serving at `now` still hold (a token bucket lease's
    /// TTL passed, a limit changed); called about once a second. Nothing to do without leases.
    async fn expire_leases(&self, _now: Timestamp) -> u64 {
        0
    }
}
