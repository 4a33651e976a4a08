//! Sixteen-byte states for a sliding log of one entry and a concurrency limit of one holder, so
//! that such a key takes a 32-byte map slot like a counter's instead of a slot, a box and the
//! first allocation of its entries (about 170 bytes).
//!
//! Most keys of these algorithms hold one entry: a client that sends one request per window, a
//! client with one request in flight. A key with more (or with values that do not fit below) is
//! kept as its full, boxed state in its algorithm's map of full states (`super::shard`), and
//! comes back to an inline slot once it holds one entry again. Loading gives back exactly the
//! state that was stored:
//! - a sliding log keeps its entry's running total and base in 32 bits each, its expiry (the
//!   entry's time plus the window) as whole Unix seconds rounded up in 32 bits, and the entry's
//!   time as microseconds before that expiry in 32 bits: a window up to about 71 minutes
//!   (`second`, `minute` and `hour` units), counts below 2^32, times before 2106;
//! - a concurrency limit keeps its holder's [`HolderId`] and lease end, as the full state does.
//!
//! An empty state is kept as the default slot, whose expiry is 0: it decides as a fresh one, so
//! the next sweep may drop it.

use std::collections::VecDeque;

use super::compact::secs_up;
use super::slots::Slot;
use crate::algorithm::concurrency::{ConcurrencyState, HolderId};
use crate::algorithm::sliding_log::{LogEntry, SlidingLogState};
use crate::algorithm::{AlgorithmState, Decision, LimitSpec};
use crate::clock::Timestamp;

/// A sliding log of at most one entry. `end == 0`: empty.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct LogSlot {
    /// The expiry in whole Unix seconds, rounded up.
    end: u32,
    /// The entry's time, in microseconds before `end`.
    ago: u32,
    /// The entry's running total.
    cum: u32,
    /// The running total before the entry.
    base: u32,
}

impl Slot for LogSlot {
    fn load(self, _: &LimitSpec) -> Option<AlgorithmState> {
        if self.end == 0 {
            return None;
        }
        let entry = LogEntry {
            at: u64::from(self.end) * 1_000_000 - u64::from(self.ago),
            cum: u64::from(self.cum),
        };
        Some(AlgorithmState::SlidingLog(Box::new(SlidingLogState {
            entries: VecDeque::from([entry]),
            base: u64::from(self.base),
        })))
    }
    fn store(
        state: Option<AlgorithmState>,
        _: &LimitSpec,
        d: &Decision,
    ) -> Result<LogSlot, Option<AlgorithmState>> {
        let Some(AlgorithmState::SlidingLog(s)) = &state else {
            return Err(state);
        };
        let entry = match (s.entries.len(), s.entries.front()) {
            (0, _) => return Ok(LogSlot::default()),
            (1, Some(e)) => *e,
            _ => return Err(state),
        };
        // The decision's expiry is the entry's time plus the window.
        let end = secs_up(d.expires_at);
        let ago = end.and_then(|end| {
            let ago = (u64::from(end) * 1_000_000).checked_sub(entry.at)?;
            u32::try_from(ago).ok()
        });
        match (
            end,
            ago,
            u32::try_from(entry.cum).ok(),
            u32::try_from(s.base).ok(),
        ) {
            (Some(end), Some(ago), Some(cum), Some(base)) if end > 0 => Ok(LogSlot {
                end,
                ago,
                cum,
                base,
            }),
            _ => Err(state),
        }
    }
    fn expires_at(&self) -> Timestamp {
        Timestamp::from_secs(u64::from(self.end))
    }
}

/// A concurrency limit of at most one holder. `end == 0`: none.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct HeldSlot {
    holder: HolderId,
    /// The end of its lease (µs since the epoch).
    end: u64,
}

impl Slot for HeldSlot {
    fn load(self, _: &LimitSpec) -> Option<AlgorithmState> {
        (self.end != 0).then(|| {
            AlgorithmState::Concurrency(Box::new(ConcurrencyState {
                holders: vec![(self.holder, self.end)],
            }))
        })
    }
    fn store(
        state: Option<AlgorithmState>,
        _: &LimitSpec,
        _: &Decision,
    ) -> Result<HeldSlot, Option<AlgorithmState>> {
        let Some(AlgorithmState::Concurrency(s)) = &state else {
            return Err(state);
        };
        match s.holders[..] {
            [] => Ok(HeldSlot::default()),
            // A lease ends after the call that took or renewed it, so never at 0.
            [(holder, end)] if end != 0 => Ok(HeldSlot { holder, end }),
            _ => Err(state),
        }
    }
    fn expires_at(&self) -> Timestamp {
        Timestamp::from_micros(self.end)
    }
}

#[cfg(test)]
mod tests;
