//! One shard of the embedded store: a map per algorithm (see [`super::slots`]), and the three
//! things done to it under its lock — run an op on a held key, add a key, drop expired keys.

use super::slots::{FixedSlot, KeyId, Map, Slot, Timed, cost};
use crate::algorithm::concurrency::ConcurrencyState;
use crate::algorithm::leaky_bucket::LeakyBucketState;
use crate::algorithm::sliding_log::SlidingLogState;
use crate::algorithm::sliding_window::SlidingWindowState;
use crate::algorithm::token_bucket::TokenBucketState;
use crate::algorithm::{Algorithm, AlgorithmState, Decision};
use crate::clock::Timestamp;
use crate::store::Op;

/// The keys of one shard, by algorithm.
#[derive(Debug, Default)]
pub(super) struct Shard {
    fixed: Map<FixedSlot>,
    token: Map<Timed<TokenBucketState>>,
    sliding: Map<Timed<SlidingWindowState>>,
    leaky: Map<Timed<LeakyBucketState>>,
    log: Map<Timed<Option<Box<SlidingLogState>>>>,
    held: Map<Timed<Option<Box<ConcurrencyState>>>>,
}

/// Calls the generic `$f(map, args…)` on the map of `$algorithm`.
macro_rules! on_map {
    ($shard:expr, $algorithm:expr, $f:ident($($arg:expr),*)) => {
        match $algorithm {
            Algorithm::FixedWindow => $f(&mut $shard.fixed, $($arg),*),
            Algorithm::TokenBucket => $f(&mut $shard.token, $($arg),*),
            Algorithm::SlidingWindow => $f(&mut $shard.sliding, $($arg),*),
            Algorithm::LeakyBucket => $f(&mut $shard.leaky, $($arg),*),
            Algorithm::SlidingLog => $f(&mut $shard.log, $($arg),*),
            Algorithm::Concurrency => $f(&mut $shard.held, $($arg),*),
        }
    };
}

impl Shard {
    /// Runs `op` on its key if this shard holds it; `None` when it does not.
    pub(super) fn update(&mut self, id: KeyId, op: &Op, now: Timestamp) -> Option<Decision> {
        on_map!(self, op.spec.algorithm, update(id, op, now))
    }

    /// Adds `op`'s key (not held yet), with the state `op` leaves on a fresh one.
    pub(super) fn insert(&mut self, id: KeyId, op: &Op, now: Timestamp) -> Decision {
        on_map!(self, op.spec.algorithm, insert(id, op, now))
    }

    /// Drops every key that expired at or before `now`: how many, and their [`cost`] in bytes.
    pub(super) fn sweep(&mut self, now: Timestamp) -> (usize, usize) {
        let mut total = (0, 0);
        for algorithm in [
            Algorithm::FixedWindow,
            Algorithm::TokenBucket,
            Algorithm::SlidingWindow,
            Algorithm::LeakyBucket,
            Algorithm::SlidingLog,
            Algorithm::Concurrency,
        ] {
            let removed = on_map!(self, algorithm, sweep(now));
            total.0 += removed;
            total.1 += removed * cost(algorithm);
        }
        total
    }
}

fn update<S: Slot>(map: &mut Map<S>, id: KeyId, op: &Op, now: Timestamp) -> Option<Decision> {
    let slot = map.get_mut(&id)?;
    let held = std::mem::take(slot);
    // An expired state decides as a fresh one would; starting fresh also drops a long log.
    let mut state = if held.expires_at() <= now {
        None
    } else {
        held.load(&op.spec)
    };
    let d = run(&mut state, op, now);
    *slot = S::store(state, &op.spec, &d);
    Some(d)
}

fn insert<S: Slot>(map: &mut Map<S>, id: KeyId, op: &Op, now: Timestamp) -> Decision {
    let mut state = None;
    let d = run(&mut state, op, now);
    map.insert(id, S::store(state, &op.spec, &d));
    d
}

fn sweep<S: Slot>(map: &mut Map<S>, now: Timestamp) -> usize {
    let before = map.len();
    map.retain(|_, slot| slot.expires_at() > now);
    before - map.len()
}

/// Applies or refunds `op` on `state`.
pub(super) fn run(state: &mut Option<AlgorithmState>, op: &Op, now: Timestamp) -> Decision {
    op.run_on(state, now)
}
