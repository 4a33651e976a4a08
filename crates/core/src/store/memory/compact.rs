//! Sixteen-byte states for the buckets and the sliding window, so that their keys take a 32-byte
//! map slot like a fixed window's (hash 16, state 16) instead of 40 or 48.
//!
//! Each keeps its expiry as whole Unix seconds in 32 bits, rounded up: a key is then dropped up to
//! a second after its state came to decide as a fresh one would, never before, so no decision
//! changes. The rest is encoded so that loading gives back exactly the state that was stored:
//! - a token bucket keeps its debt and how many quanta before its expiry it was last updated
//!   (`ago`); with no debt the time of the last update never matters (a bucket without debt is
//!   full whenever it is read), so it is not kept;
//! - a leaky bucket keeps its TAT's fraction and how many quanta before its expiry the TAT lies
//!   (the TAT is where the queue empties, so that is at most a second);
//! - a sliding window keeps its start and its two counts in 32 bits each.
//!
//! A state that does not fit (a refill or a TAT further than 2^32 quanta from the expiry, counts
//! from 2^32 on, times past 2106) is refused by [`Slot::store`] and the store keeps that key in
//! its algorithm's map of full states instead (`super::shard`).

use super::slots::Slot;
use crate::algorithm::leaky_bucket::LeakyBucketState;
use crate::algorithm::sliding_window::SlidingWindowState;
use crate::algorithm::token_bucket::{Params, TokenBucketState};
use crate::algorithm::{AlgorithmState, Decision, LimitSpec};
use crate::clock::Timestamp;

/// `t` in whole seconds, rounded up, if that fits 32 bits (a slot's expiry).
pub(super) fn secs_up(t: Timestamp) -> Option<u32> {
    u32::try_from(t.as_micros().div_ceil(1_000_000)).ok()
}

/// The quanta of `spec`'s bucket in `secs` seconds (a quantum divides a second).
fn quanta_in(spec: &LimitSpec, secs: u32) -> u64 {
    u64::from(secs) * (1_000_000 / Params::of(spec).quantum_micros)
}

/// A token bucket: debt, expiry, and the last update `ago` quanta before the expiry.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TokenSlot {
    debt: u64,
    end: u32,
    ago: u32,
}

impl Slot for TokenSlot {
    fn load(self, spec: &LimitSpec) -> Option<AlgorithmState> {
        Some(AlgorithmState::TokenBucket(TokenBucketState {
            last: quanta_in(spec, self.end).saturating_sub(u64::from(self.ago)),
            debt: self.debt,
        }))
    }
    fn store(
        state: Option<AlgorithmState>,
        spec: &LimitSpec,
        d: &Decision,
    ) -> Result<TokenSlot, Option<AlgorithmState>> {
        let s = match &state {
            Some(AlgorithmState::TokenBucket(s)) => *s,
            _ => return Err(state),
        };
        let Some(end) = secs_up(d.expires_at) else {
            return Err(state);
        };
        let ago = if s.debt == 0 {
            Some(0)
        } else {
            (quanta_in(spec, end).checked_sub(s.last)).and_then(|a| u32::try_from(a).ok())
        };
        match ago {
            Some(ago) => Ok(TokenSlot {
                debt: s.debt,
                end,
                ago,
            }),
            None => Err(state),
        }
    }
    fn expires_at(&self) -> Timestamp {
        Timestamp::from_secs(u64::from(self.end))
    }
}

/// `LeakySlot::ago` of a TAT of 0 (the state of a bucket that never admitted a hit).
const TAT_ZERO: u32 = u32::MAX;

/// A leaky bucket: the TAT's fraction, expiry, and the TAT's whole quanta `ago` quanta before it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct LeakySlot {
    frac: u64,
    end: u32,
    ago: u32,
}

impl Slot for LeakySlot {
    fn load(self, spec: &LimitSpec) -> Option<AlgorithmState> {
        let tat = if self.ago == TAT_ZERO {
            0
        } else {
            quanta_in(spec, self.end).saturating_sub(u64::from(self.ago))
        };
        Some(AlgorithmState::LeakyBucket(LeakyBucketState {
            tat,
            frac: self.frac,
        }))
    }
    fn store(
        state: Option<AlgorithmState>,
        spec: &LimitSpec,
        d: &Decision,
    ) -> Result<LeakySlot, Option<AlgorithmState>> {
        let s = match &state {
            Some(AlgorithmState::LeakyBucket(s)) => *s,
            _ => return Err(state),
        };
        let Some(end) = secs_up(d.expires_at) else {
            return Err(state);
        };
        let ago = if s.tat == 0 {
            Some(TAT_ZERO)
        } else {
            (quanta_in(spec, end).checked_sub(s.tat))
                .and_then(|a| u32::try_from(a).ok())
                .filter(|&a| a != TAT_ZERO)
        };
        match ago {
            Some(ago) => Ok(LeakySlot {
                frac: s.frac,
                end,
                ago,
            }),
            None => Err(state),
        }
    }
    fn expires_at(&self) -> Timestamp {
        Timestamp::from_secs(u64::from(self.end))
    }
}

/// A sliding window: its start, its expiry and both counts, in 32 bits each.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SlidingSlot {
    start: u32,
    end: u32,
    current: u32,
    previous: u32,
}

impl Slot for SlidingSlot {
    fn load(self, _: &LimitSpec) -> Option<AlgorithmState> {
        Some(AlgorithmState::SlidingWindow(SlidingWindowState {
            window_start: u64::from(self.start),
            current: u64::from(self.current),
            previous: u64::from(self.previous),
        }))
    }
    fn store(
        state: Option<AlgorithmState>,
        _: &LimitSpec,
        d: &Decision,
    ) -> Result<SlidingSlot, Option<AlgorithmState>> {
        let s = match &state {
            Some(AlgorithmState::SlidingWindow(s)) => *s,
            _ => return Err(state),
        };
        let fit = |v: u64| u32::try_from(v).ok();
        match (
            fit(s.window_start),
            secs_up(d.expires_at),
            fit(s.current),
            fit(s.previous),
        ) {
            (Some(start), Some(end), Some(current), Some(previous)) => Ok(SlidingSlot {
                start,
                end,
                current,
                previous,
            }),
            _ => Err(state),
        }
    }
    fn expires_at(&self) -> Timestamp {
        Timestamp::from_secs(u64::from(self.end))
    }
}

#[cfg(test)]
mod tests;
