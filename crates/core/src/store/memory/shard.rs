//! One shard of the embedded store: the keys of each algorithm (see [`super::slots`]), and the
//! three things done to them under its lock — run an op on a held key, add a key, drop expired
//! keys — with the bytes each changes in the store's estimate ([`cost`] of a key in its compact
//! slot, [`wide_cost`] of one held as its full state).

use super::compact::{LeakySlot, SlidingSlot, TokenSlot};
use super::inline::{HeldSlot, LogSlot};
use super::slots::{FixedSlot, KeyId, Map, Slot, Timed, cost, wide_cost};
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
    fixed: Keys<FixedSlot>,
    token: Keys<TokenSlot, Timed<TokenBucketState>>,
    sliding: Keys<SlidingSlot, Timed<SlidingWindowState>>,
    leaky: Keys<LeakySlot, Timed<LeakyBucketState>>,
    log: Keys<LogSlot, Timed<Option<Box<SlidingLogState>>>>,
    held: Keys<HeldSlot, Timed<Option<Box<ConcurrencyState>>>>,
}

/// The keys of one algorithm: each in a slot of layout `S`, or, when `S` cannot hold its state
/// exactly (see [`super::compact`], [`super::inline`]), as its full state `W`. A key is in one of the two maps; the
/// second is empty (and costs no memory) for the layouts that hold every state.
#[derive(Debug)]
pub(super) struct Keys<S, W = S> {
    slots: Map<S>,
    wide: Map<W>,
}

impl<S, W> Default for Keys<S, W> {
    fn default() -> Self {
        Keys {
            slots: Map::default(),
            wide: Map::default(),
        }
    }
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

/// A key's change of representation in one op, as the store's estimate sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Moved {
    /// It stayed where it was.
    Stayed,
    /// From its compact slot to its full state.
    ToWide,
    /// From its full state back to a compact slot.
    ToSlot,
}

impl Shard {
    /// Runs `op` on its key if this shard holds it; `None` when it does not. Also the bytes the
    /// key's estimate grew (positive) or shrank by.
    pub(super) fn update(
        &mut self,
        id: KeyId,
        op: &Op,
        now: Timestamp,
    ) -> Option<(Decision, isize)> {
        let algorithm = op.spec.algorithm;
        let (d, moved) = on_map!(self, algorithm, update(id, op, now))?;
        // Both costs are a few hundred bytes at most, so they fit an isize.
        let grown = wide_cost(algorithm) as isize - cost(algorithm) as isize;
        Some((
            d,
            match moved {
                Moved::Stayed => 0,
                Moved::ToWide => grown,
                Moved::ToSlot => -grown,
            },
        ))
    }

    /// Adds `op`'s key (not held yet), with the state `op` leaves on a fresh one. Also the bytes
    /// it costs beyond its compact [`cost`] (held in full).
    pub(super) fn insert(&mut self, id: KeyId, op: &Op, now: Timestamp) -> (Decision, usize) {
        let algorithm = op.spec.algorithm;
        let (d, wide) = on_map!(self, algorithm, insert(id, op, now));
        let extra = if wide {
            wide_cost(algorithm).saturating_sub(cost(algorithm))
        } else {
            0
        };
        (d, extra)
    }

    /// Keys held as full states because their compact slot could not hold them.
    #[cfg(test)]
    pub(super) fn wide_keys(&self) -> usize {
        self.token.wide.len()
            + self.sliding.wide.len()
            + self.leaky.wide.len()
            + self.log.wide.len()
            + self.held.wide.len()
    }

    /// Drops the key `id` of `algorithm`'s map: its estimated bytes when it was held (expired or
    /// not).
    pub(super) fn remove(&mut self, id: KeyId, algorithm: Algorithm) -> Option<usize> {
        let wide = on_map!(self, algorithm, remove(id))?;
        Some(if wide {
            wide_cost(algorithm)
        } else {
            cost(algorithm)
        })
    }

    /// Drops every key that expired at or before `now`: how many, and their estimated bytes.
    pub(super) fn sweep(&mut self, now: Timestamp) -> (usize, usize) {
        let mut total = (0, 0);
        for algorithm in Algorithm::ALL {
            let (slots, wide) = on_map!(self, algorithm, sweep(now));
            total.0 += slots + wide;
            total.1 += slots * cost(algorithm) + wide * wide_cost(algorithm);
        }
        total
    }
}

fn update<S: Slot, W: Slot>(
    keys: &mut Keys<S, W>,
    id: KeyId,
    op: &Op,
    now: Timestamp,
) -> Option<(Decision, Moved)> {
    if let Some(slot) = keys.slots.get_mut(&id) {
        let (d, state) = run_held(std::mem::take(slot), op, now);
        match S::store(state, &op.spec, &d) {
            Ok(s) => *slot = s,
            Err(state) => {
                keys.slots.remove(&id);
                keys.wide.insert(id, wide(state, op, &d));
                return Some((d, Moved::ToWide));
            }
        }
        return Some((d, Moved::Stayed));
    }
    if keys.wide.is_empty() {
        return None;
    }
    let slot = keys.wide.get_mut(&id)?;
    let (d, state) = run_held(std::mem::take(slot), op, now);
    // Back in a compact slot as soon as its state fits one again.
    match S::store(state, &op.spec, &d) {
        Ok(s) => {
            keys.wide.remove(&id);
            keys.slots.insert(id, s);
            Some((d, Moved::ToSlot))
        }
        Err(state) => {
            *slot = wide(state, op, &d);
            Some((d, Moved::Stayed))
        }
    }
}

/// Runs `op` on a held key's slot; returns the decision and the state to store.
fn run_held<S: Slot>(held: S, op: &Op, now: Timestamp) -> (Decision, Option<AlgorithmState>) {
    // An expired state decides as a fresh one would; starting fresh also drops a long log.
    let mut state = if held.expires_at() <= now {
        None
    } else {
        held.load(&op.spec)
    };
    let d = run(&mut state, op, now);
    (d, state)
}

/// The full-state slot of `state`. Every `W` used holds any state (`Timed`, `FixedSlot`); were
/// one refused, the key would start fresh on its next call.
fn wide<W: Slot>(state: Option<AlgorithmState>, op: &Op, d: &Decision) -> W {
    W::store(state, &op.spec, d).unwrap_or_default()
}

/// Adds a key; true when it is held as its full state.
fn insert<S: Slot, W: Slot>(
    keys: &mut Keys<S, W>,
    id: KeyId,
    op: &Op,
    now: Timestamp,
) -> (Decision, bool) {
    let mut state = None;
    let d = run(&mut state, op, now);
    match S::store(state, &op.spec, &d) {
        Ok(s) => {
            keys.slots.insert(id, s);
            (d, false)
        }
        Err(state) => {
            keys.wide.insert(id, wide(state, op, &d));
            (d, true)
        }
    }
}

/// Drops a key: `Some(true)` when it was held as its full state, `None` when not held.
fn remove<S: Slot, W: Slot>(keys: &mut Keys<S, W>, id: KeyId) -> Option<bool> {
    // A key is in one of the two maps, never both.
    if keys.slots.remove(&id).is_some() {
        Some(false)
    } else {
        keys.wide.remove(&id).map(|_| true)
    }
}

/// Drops expired keys: how many from the compact slots, how many from the full states.
fn sweep<S: Slot, W: Slot>(keys: &mut Keys<S, W>, now: Timestamp) -> (usize, usize) {
    let (slots, wide) = (keys.slots.len(), keys.wide.len());
    keys.slots.retain(|_, slot| slot.expires_at() > now);
    keys.wide.retain(|_, slot| slot.expires_at() > now);
    (slots - keys.slots.len(), wide - keys.wide.len())
}

/// Applies or refunds `op` on `state`.
pub(super) fn run(state: &mut Option<AlgorithmState>, op: &Op, now: Timestamp) -> Decision {
    op.run_on(state, now)
}
