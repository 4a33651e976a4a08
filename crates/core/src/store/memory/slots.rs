//! How the embedded store lays out one key: a 128-bit keyed hash of its text instead of the text,
//! and per algorithm the smallest state that decides exactly as [`AlgorithmState`] does.
//!
//! Each algorithm has its own map in a shard, so a key pays for a 32-byte slot — hash 16, state 16
//! (a fixed window's count and window end here; the buckets' and the sliding window's in
//! `super::compact`; a sliding log of one entry and a concurrency limit of one holder in
//! `super::inline`) — and not for the largest state of any algorithm. The cache key names
//! its algorithm, so a key text is only ever used by one map.
//!
//! Two keys are told apart by two independent 64-bit ahash values of their text, seeded randomly
//! per process: 64 bits choose the bucket and are compared, 58 more (6 choose the shard) are
//! compared too. With `n` live keys, the chance that a new key lands on an existing one is about
//! `n / 2^122` (10^7 keys: 2·10^-30), so over 10^13 new keys — a year at 300 000 new keys a second —
//! the chance of any merged pair stays below 10^-16. A merge would only make two clients share one
//! counter (one could be limited early); aiming two keys at one slot needs the per-process seeds.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::mem::size_of;

use super::compact::{LeakySlot, SlidingSlot, TokenSlot};
use super::inline::{HeldSlot, LogSlot};
use crate::algorithm::concurrency::{ConcurrencyState, HolderId};
use crate::algorithm::fixed_window::FixedWindowState;
use crate::algorithm::leaky_bucket::LeakyBucketState;
use crate::algorithm::sliding_log::{LogEntry, SlidingLogState};
use crate::algorithm::sliding_window::SlidingWindowState;
use crate::algorithm::token_bucket::TokenBucketState;
use crate::algorithm::{Algorithm, AlgorithmState, Decision, LimitSpec};
use crate::clock::Timestamp;

/// A key as the store remembers it: two keyed hashes of its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct KeyId {
    /// Chooses the bucket in the map (and is compared).
    pub bucket: u64,
    /// Chooses the shard (low bits) and is compared.
    pub check: u64,
}

impl Hash for KeyId {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.bucket);
    }
}

/// The maps' hasher: a [`KeyId`] is already a keyed hash, so its `bucket` half is used as is.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct PassThrough;

impl BuildHasher for PassThrough {
    type Hasher = PassThroughHasher;
    fn build_hasher(&self) -> PassThroughHasher {
        PassThroughHasher(0)
    }
}

/// See [`PassThrough`].
#[derive(Debug)]
pub(super) struct PassThroughHasher(u64);

impl Hasher for PassThroughHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used by `KeyId`; anything else still mixes every byte in.
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The state of one key in its algorithm's map.
pub(super) trait Slot: Default {
    /// The state the algorithm runs on (`None`: fresh).
    fn load(self, spec: &LimitSpec) -> Option<AlgorithmState>;
    /// The slot holding `state` after a call that answered `d`, or `state` back when this layout
    /// cannot hold it exactly (then the key is kept in its algorithm's map of full states).
    fn store(
        state: Option<AlgorithmState>,
        spec: &LimitSpec,
        d: &Decision,
    ) -> Result<Self, Option<AlgorithmState>>;
    /// After this instant a fresh state decides identically, so the slot may be dropped.
    fn expires_at(&self) -> Timestamp;
}

/// A fixed window: its count and the end of its window (Unix seconds). The start is that of the
/// limit's window holding the end's last second, so it need not be stored (for a calendar window
/// the length varies, so it is not simply the end minus the length).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct FixedSlot {
    count: u64,
    end: u64,
}

impl Slot for FixedSlot {
    fn load(self, spec: &LimitSpec) -> Option<AlgorithmState> {
        Some(AlgorithmState::FixedWindow(FixedWindowState {
            window_start: (spec.window)
                .bounds(Timestamp::from_secs(self.end.saturating_sub(1)))
                .start,
            count: self.count,
        }))
    }
    fn store(
        state: Option<AlgorithmState>,
        spec: &LimitSpec,
        _: &Decision,
    ) -> Result<FixedSlot, Option<AlgorithmState>> {
        Ok(match state {
            Some(AlgorithmState::FixedWindow(s)) => FixedSlot {
                count: s.count,
                end: spec.window.bounds(Timestamp::from_secs(s.window_start)).end,
            },
            _ => FixedSlot::default(),
        })
    }
    fn expires_at(&self) -> Timestamp {
        Timestamp::from_secs(self.end)
    }
}

/// The state of any other algorithm, with the expiry its last decision named.
#[derive(Debug, Default)]
pub(super) struct Timed<S> {
    state: S,
    expires_at: Timestamp,
}

/// Moves an algorithm's own state in and out of [`AlgorithmState`].
pub(super) trait Own: Default + Sized {
    fn wrap(self) -> Option<AlgorithmState>;
    fn unwrap(state: Option<AlgorithmState>) -> Self;
}

macro_rules! own {
    ($t:ty, $variant:ident) => {
        impl Own for $t {
            fn wrap(self) -> Option<AlgorithmState> {
                Some(AlgorithmState::$variant(self))
            }
            fn unwrap(state: Option<AlgorithmState>) -> $t {
                match state {
                    Some(AlgorithmState::$variant(s)) => s,
                    _ => <$t>::default(),
                }
            }
        }
    };
}
own!(TokenBucketState, TokenBucket);
own!(SlidingWindowState, SlidingWindow);
own!(LeakyBucketState, LeakyBucket);

/// A concurrency limit's holders live behind a box too, for the same reason.
impl Own for Option<Box<ConcurrencyState>> {
    fn wrap(self) -> Option<AlgorithmState> {
        self.map(AlgorithmState::Concurrency)
    }
    fn unwrap(state: Option<AlgorithmState>) -> Self {
        match state {
            Some(AlgorithmState::Concurrency(s)) => Some(s),
            _ => None,
        }
    }
}

/// A sliding log's state lives behind a box (it grows with the admitted hits); `None` until the
/// first call, so taking a slot out to run it never allocates.
impl Own for Option<Box<SlidingLogState>> {
    fn wrap(self) -> Option<AlgorithmState> {
        self.map(AlgorithmState::SlidingLog)
    }
    fn unwrap(state: Option<AlgorithmState>) -> Self {
        match state {
            Some(AlgorithmState::SlidingLog(s)) => Some(s),
            _ => None,
        }
    }
}

impl<S: Own> Slot for Timed<S> {
    fn load(self, _: &LimitSpec) -> Option<AlgorithmState> {
        self.state.wrap()
    }
    fn store(
        state: Option<AlgorithmState>,
        _: &LimitSpec,
        d: &Decision,
    ) -> Result<Timed<S>, Option<AlgorithmState>> {
        Ok(Timed {
            state: S::unwrap(state),
            expires_at: d.expires_at,
        })
    }
    fn expires_at(&self) -> Timestamp {
        self.expires_at
    }
}

/// One algorithm's map.
pub(super) type Map<S> = HashMap<KeyId, S, PassThrough>;

/// The entries a log's or a holder table's first allocation has room for (Rust's vectors start
/// at four elements of this size).
const FIRST_ENTRIES: usize = 4;

/// Bytes one key of `algorithm` held in its compact slot costs against `MEMORY_MAX_BYTES`: its map
/// slot and control byte, doubled because a map is between 7/16 and 7/8 full (it doubles when it
/// reaches 7/8). Every algorithm's compact slot is 16 bytes of state beside the key's hash.
pub(super) fn cost(algorithm: Algorithm) -> usize {
    let slot = |size: usize| 2 * (size_of::<KeyId>() + size + 1);
    match algorithm {
        Algorithm::FixedWindow => slot(size_of::<FixedSlot>()),
        Algorithm::TokenBucket => slot(size_of::<TokenSlot>()),
        Algorithm::SlidingWindow => slot(size_of::<SlidingSlot>()),
        Algorithm::LeakyBucket => slot(size_of::<LeakySlot>()),
        Algorithm::SlidingLog => slot(size_of::<LogSlot>()),
        Algorithm::Concurrency => slot(size_of::<HeldSlot>()),
    }
}

/// Bytes one key of `algorithm` held as its full state (`super::compact`, `super::inline`) costs:
/// for a sliding log or a concurrency limit, its map slot, its boxed state and the first
/// allocation of its entries (room for four: a log's requests, a limit's holders); entries past
/// those are not counted (see `MemoryStore`). The rare counter key held in full is counted at its
/// compact size.
pub(super) fn wide_cost(algorithm: Algorithm) -> usize {
    let slot = |size: usize| 2 * (size_of::<KeyId>() + size + 1);
    match algorithm {
        Algorithm::Concurrency => {
            slot(size_of::<Timed<Option<Box<ConcurrencyState>>>>())
                + size_of::<ConcurrencyState>()
                + FIRST_ENTRIES * size_of::<(HolderId, u64)>()
        }
        Algorithm::SlidingLog => {
            slot(size_of::<Timed<Option<Box<SlidingLogState>>>>())
                + size_of::<SlidingLogState>()
                + FIRST_ENTRIES * size_of::<LogEntry>()
        }
        counter => cost(counter),
    }
}
