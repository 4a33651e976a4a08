//! The embedded in-memory store: sharded maps under short per-shard locks, expired state reclaimed,
//! and a hard bound on live keys.
//!
//! Each op locks only its key's shard for the few nanoseconds the pure algorithm takes, so requests
//! on different keys run in parallel and a request never waits on I/O. A key is held as a 128-bit
//! keyed hash of its text and the smallest state of its algorithm (`slots`): about 60–100 bytes of
//! memory for a counter, a sliding log of one entry or a concurrency limit of one holder. Expired entries are removed by [`MemoryStore::sweep_at`]
//! (called periodically by the server) and, when the bound is reached, by an immediate sweep of the
//! shard that needs room, then of every shard (at most once a second, so a flood of new keys
//! against a full store cannot turn each request into a full scan). "Full" is a key count
//! (`MEMORY_MAX_KEYS`) or an approximate byte budget (`MEMORY_MAX_BYTES`: a fixed cost per key of
//! each algorithm, `slots::cost`, or `slots::wide_cost` for a key held as its full state),
//! whichever comes first. If the store is still full, new keys
//! are refused with [`StoreError::Full`]: existing counters are never evicted, so nothing already
//! counted is lost.

mod compact;
mod inline;
mod shard;
mod slots;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use async_trait::async_trait;
use parking_lot::Mutex;

use super::{Answer, Op, Store, StoreError};
use crate::algorithm::Decision;
use crate::clock::Timestamp;
use shard::Shard;
use slots::{KeyId, cost};

/// Number of shards: a power of two well above the core count, so lock contention stays rare.
const SHARDS: usize = 64;

/// The embedded store. Cheap to share behind an `Arc`.
///
/// Every op of a batch runs its algorithm on its key's state; a full store refuses new keys and
/// never evicts a live counter:
///
/// ```
/// use std::time::Duration;
///
/// use ratelimitd_core::algorithm::{Algorithm, LimitSpec, Window};
/// use ratelimitd_core::store::Op;
/// use ratelimitd_core::{MemoryStore, Store, StoreError, Timestamp};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let window = Window::from_secs(60).ok_or("a minute is a valid window")?;
/// let spec = LimitSpec { algorithm: Algorithm::FixedWindow, limit: 2, window, burst: 0 };
/// let one_hit = |key: &str| Op::new(key, spec, 1);
/// let store = MemoryStore::new(1); // at most one live key
/// let now = Timestamp::from_secs(1_700_000_000);
///
/// let answers = store.apply(&[one_hit("a"), one_hit("a"), one_hit("a")], now).await?;
/// let over: Vec<bool> = answers
///     .iter()
///     .map(|a| a.decision().is_some_and(|d| d.over_limit))
///     .collect();
/// assert_eq!(over, [false, false, true]);
///
/// // A second key does not fit, and "a" keeps its count.
/// let refused = store.apply(&[one_hit("b")], now).await;
/// assert!(matches!(refused, Err(StoreError::Full { .. })));
///
/// // Once its window is over, a sweep frees the key.
/// assert_eq!(store.sweep_at(now.saturating_add(Duration::from_secs(120))), 1);
/// assert!(store.is_empty());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct MemoryStore {
    shards: Vec<Mutex<Shard>>,
    // Two independently seeded hashes make a key's [`KeyId`]; random per process, so a caller
    // can neither aim many keys at one shard nor two keys at one id.
    hash_bucket: ahash::RandomState,
    hash_check: ahash::RandomState,
    len: AtomicUsize,
    /// Approximate bytes of the live keys ([`cost`], `slots::wide_cost`).
    bytes: AtomicUsize,
    /// `MEMORY_MAX_BYTES`.
    max_bytes: usize,
    /// Bounds keys (and with `max_bytes`, their approximate bytes). A key costs 60–100 bytes, but
    /// a `sliding_log` key of more than one entry also holds 16 bytes per logged request, up to
    /// `sliding_log::MAX_LIMIT` (100 000) of them: 1.6 MB (a concurrency limit: 16 bytes a holder). The worst case is `MEMORY_MAX_KEYS` × 1.6 MB (1.6 TB at the default 10^6 keys);
    /// it needs that many distinct keys each admitted 100 000 times within its window, so in
    /// practice memory follows the admitted request rate × the window of `sliding_log` limits.
    max_keys: usize,
    /// When the last on-demand sweep of all shards ran (microseconds since the epoch).
    last_full_sweep: AtomicU64,
}

/// `last_full_sweep` before the first on-demand sweep.
const NEVER: u64 = u64::MAX;

/// Minimum time between two on-demand sweeps of all shards.
const FULL_SWEEP_EVERY_MICROS: u64 = 1_000_000;

impl MemoryStore {
    /// A store that tracks at most `max_keys` live keys (at least 1), with no byte budget.
    pub fn new(max_keys: usize) -> MemoryStore {
        MemoryStore::with_limits(max_keys, usize::MAX)
    }

    /// A store that tracks at most `max_keys` live keys taking about `max_bytes`.
    pub fn with_limits(max_keys: usize, max_bytes: usize) -> MemoryStore {
        MemoryStore {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hash_bucket: ahash::RandomState::new(),
            hash_check: ahash::RandomState::new(),
            len: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            max_bytes,
            max_keys: max_keys.max(1),
            last_full_sweep: AtomicU64::new(NEVER),
        }
    }

    /// Number of keys currently held (expired ones count until swept).
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Approximate bytes the held keys take (see `slots::cost`).
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Keys held as full states, outside the compact slots (see `compact`).
    #[cfg(test)]
    fn wide_keys(&self) -> usize {
        self.shards.iter().map(|s| s.lock().wide_keys()).sum()
    }

    /// True when no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every entry that expired at or before `now`; returns how many were removed.
    pub fn sweep_at(&self, now: Timestamp) -> usize {
        self.shards
            .iter()
            .map(|shard| self.sweep_shard(&mut shard.lock(), now))
            .sum()
    }

    fn sweep_shard(&self, shard: &mut Shard, now: Timestamp) -> usize {
        let (removed, freed) = shard.sweep(now);
        self.len.fetch_sub(removed, Ordering::Relaxed);
        self.bytes.fetch_sub(freed, Ordering::Relaxed);
        removed
    }

    /// Forgets the key of `op` (in its algorithm's map): true when it was held.
    pub fn remove(&self, op: &Op) -> bool {
        let id = self.id(&op.key);
        let removed = self.shards[(id.check as usize) % SHARDS]
            .lock()
            .remove(id, op.spec.algorithm);
        if let Some(bytes) = removed {
            self.len.fetch_sub(1, Ordering::Relaxed);
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
        }
        removed.is_some()
    }

    /// Counts a held key's change of estimated bytes (see `shard::Shard::update`). A key that
    /// grows is never refused: nothing already counted is lost.
    fn resize(&self, grown: isize) {
        if grown > 0 {
            self.bytes
                .fetch_add(grown.unsigned_abs(), Ordering::Relaxed);
        } else if grown < 0 {
            self.bytes
                .fetch_sub(grown.unsigned_abs(), Ordering::Relaxed);
        }
    }

    /// Applies one op; when the store is full, sweeps every shard (rate-limited) and tries again.
    fn apply_one(&self, op: &Op, now: Timestamp) -> Result<Decision, StoreError> {
        match self.apply_in_shard(op, now) {
            Err(StoreError::Full { .. }) if self.may_sweep_all(now) => {
                // No shard lock is held here, so sweeping every shard cannot deadlock.
                self.sweep_at(now);
                self.apply_in_shard(op, now)
            }
            r => r,
        }
    }

    /// True (and recorded) when no full sweep ran in the last second.
    fn may_sweep_all(&self, now: Timestamp) -> bool {
        let last = self.last_full_sweep.load(Ordering::Relaxed);
        let due = last == NEVER || now.as_micros() >= last.saturating_add(FULL_SWEEP_EVERY_MICROS);
        due && self
            .last_full_sweep
            .compare_exchange(last, now.as_micros(), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// The id under which `key` is held.
    fn id(&self, key: &str) -> KeyId {
        KeyId {
            bucket: self.hash_bucket.hash_one(key),
            check: self.hash_check.hash_one(key),
        }
    }

    /// Applies one op under its shard's lock.
    fn apply_in_shard(&self, op: &Op, now: Timestamp) -> Result<Decision, StoreError> {
        let id = self.id(&op.key);
        // The shard comes from `check`, the map bucket from `bucket`: independent bits.
        let mut shard = self.shards[(id.check as usize) % SHARDS].lock();
        if let Some((d, grown)) = shard.update(id, op, now) {
            self.resize(grown);
            return Ok(d);
        }
        if op.refund {
            // A missing key is already empty: the refund is answered without creating it.
            return Ok(shard::run(&mut None, op, now));
        }
        self.reserve_slot(&mut shard, cost(op.spec.algorithm), now)?;
        let (d, extra) = shard.insert(id, op, now);
        self.resize(extra.cast_signed());
        Ok(d)
    }

    /// Counts a new key of `bytes` against both bounds, sweeping the shard first when one is
    /// reached.
    fn reserve_slot(
        &self,
        shard: &mut Shard,
        bytes: usize,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        if self.try_reserve(bytes) {
            return Ok(());
        }
        self.sweep_shard(shard, now);
        if self.try_reserve(bytes) {
            return Ok(());
        }
        Err(StoreError::Full {
            keys: self.len(),
            bytes: self.bytes(),
        })
    }

    /// Takes one key and `bytes` if both fit; takes nothing otherwise.
    fn try_reserve(&self, bytes: usize) -> bool {
        if self.len.fetch_add(1, Ordering::Relaxed) >= self.max_keys {
            self.len.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        if self
            .bytes
            .fetch_add(bytes, Ordering::Relaxed)
            .saturating_add(bytes)
            > self.max_bytes
        {
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
            self.len.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        true
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn apply(&self, ops: &[Op], now: Timestamp) -> Result<Vec<Answer>, StoreError> {
        ops.iter()
            .map(|op| self.apply_one(op, now).map(Answer::Decided))
            .collect()
    }

    async fn reset(&self, ops: &[Op], _now: Timestamp) -> Result<u64, StoreError> {
        Ok(ops.iter().filter(|op| self.remove(op)).count() as u64)
    }

    /// A key is held as a hash of its text (see `slots`), so no key can be found by the
    /// beginning of its text.
    fn no_prefix_reset(&self) -> &'static str {
        NO_PREFIX
    }
}

/// Why the memory store refuses prefix resets.
pub const NO_PREFIX: &str = "the embedded memory store keeps a hash of each key, not its text, \
     so it cannot find keys by prefix: reset by descriptor instead";

#[cfg(test)]
mod tests;
