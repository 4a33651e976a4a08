//! Concurrency: a cap on requests in flight. Each admitted request holds one slot under a holder
//! id until it releases it (`is_negative_hits`) or its lease times out (the limit's window, e.g.
//! `unit: minute` = 60 s), so a holder that never comes back (a crashed proxy, a lost stream-done
//! call) loses its slot exactly at the timeout and a slot never leaks.
//!
//! Rules, the same in the Lua twin (`lua/concurrency.lua`, a sorted set of holders scored by the
//! microsecond their lease ends):
//! - holders whose lease ended at or before `now` are dropped first (`end <= now`);
//! - an acquisition by a holder that already holds a slot renews its lease and takes nothing more
//!   (a retried start is idempotent); a new holder is admitted iff fewer than `limit` slots are
//!   held, and a refused one is not recorded, so it can never turn into capacity;
//! - a check (0 hits) admits iff a slot is free and records nothing;
//! - a release frees the holder's slot if it holds one; an unknown holder, a refused one or a
//!   second release changes nothing.
//!
//! A holder holds one slot whatever its hits ([`super::super::limiter`] clamps them to 1), so the
//! slots in use are the number of holders; validation caps `requests_per_unit` at [`MAX_SLOTS`],
//! which bounds one key's memory.
//!
//! A holder is kept as a 64-bit keyed hash of its id ([`HolderId`]), not the text: 16 bytes a
//! holder with its lease end, whatever the id's length, and no allocation of its own. Two ids
//! are the same holder iff their hashes are equal: a new id on a key of `h` holders matches one of
//! them by chance with probability `h / 2^64` (5·10^-20 a holder), so over 10^13 acquisitions (a
//! year at 300 000 a second) on keys of one holder the chance of any such match is about 5·10^-7.
//! A match would admit the new request as a renewal of the other's slot (one more in flight than
//! the limit until one of the two releases or the lease ends), or let its release free the other's
//! slot. The hash is seeded randomly per process, so a client cannot aim an id at another's.
//!
//! The holders are a vector sorted by id rather than a map: most keys have a few holders, and a
//! map's first node costs hundreds of bytes where a vector of four holders costs 64. Every call
//! already walks the holders to drop ended leases, so the vector's insertions cost no more.

use std::sync::OnceLock;
use std::time::Duration;

use super::{Decision, LimitSpec};
use crate::clock::Timestamp;

/// Largest `requests_per_unit` (slots) a concurrency limit accepts: one key holds at most this
/// many holders (16 bytes each), about 1.6 MB at worst.
pub const MAX_SLOTS: u64 = 100_000;

/// Longest holder id the edges accept (bytes); longer ones are refused with an error.
pub const MAX_HOLDER_LEN: usize = 128;

/// A holder as a key's state keeps it: a 64-bit keyed hash of its id (see the module's text).
pub type HolderId = u64;

/// The [`HolderId`] of the holder named `holder`, under this process's random seed.
pub fn holder_id(holder: &str) -> HolderId {
    static SEED: OnceLock<ahash::RandomState> = OnceLock::new();
    SEED.get_or_init(ahash::RandomState::new).hash_one(holder)
}

/// The holders of one key and when each lease ends (µs since the epoch).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConcurrencyState {
    /// Each holder and the end of its lease, sorted by [`HolderId`], each holder once.
    pub holders: Vec<(HolderId, u64)>,
}

/// Below this many holders' room a vector keeps its capacity; above, one left less than a
/// quarter full is shrunk, so a key that once held many slots does not keep their memory.
const KEEP_CAPACITY: usize = 64;

/// What one call found and did; the Lua twin returns exactly these numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Slots held before this call (after dropping ended leases).
    pub used_before: u64,
    /// Slots held after it.
    pub used_after: u64,
    /// True when admitted (acquire, renewal or check) or for any release.
    pub allowed: bool,
    /// The earliest lease end after the call (µs), 0 when no slot is held.
    pub first_end: u64,
    /// The latest lease end after the call (µs), 0 when no slot is held.
    pub last_end: u64,
}

/// Drops ended leases, then acquires (`hits` > 0), checks (`hits` = 0) or releases (`release`)
/// the slot of `holder` at `now` (µs) for a limit of `limit` slots and leases of `timeout` µs.
pub fn step(
    state: &mut ConcurrencyState,
    limit: u64,
    timeout: u64,
    holder: &str,
    hits: u64,
    release: bool,
    now: u64,
) -> Step {
    let holders = &mut state.holders;
    holders.retain(|(_, end)| *end > now);
    if holders.capacity() > KEEP_CAPACITY && holders.len() < holders.capacity() / 4 {
        holders.shrink_to(holders.len() * 2);
    }
    let used_before = holders.len() as u64;
    let holder = holder_id(holder);
    let found = holders.binary_search_by(|(id, _)| id.cmp(&holder));
    let allowed = match found {
        Ok(i) if release => {
            holders.remove(i);
            true
        }
        Err(_) if release => true,
        Ok(i) => {
            if hits > 0 {
                holders[i].1 = now.saturating_add(timeout);
            }
            true
        }
        Err(_) if used_before >= limit => false,
        Err(i) => {
            if hits > 0 {
                holders.insert(i, (holder, now.saturating_add(timeout)));
            }
            true
        }
    };
    let ends = holders.iter().map(|(_, end)| *end);
    Step {
        used_before,
        used_after: holders.len() as u64,
        allowed,
        first_end: ends.clone().min().unwrap_or(0),
        last_end: ends.max().unwrap_or(0),
    }
}

/// How long a refused caller is told to wait (`reset_after`, hence `Retry-After`) while every
/// slot is held. A slot frees at the next release, which nobody can predict (the earliest lease
/// end is only an upper bound, usually far too late), so the answer is the shortest a
/// `Retry-After` header can say: one second.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The decision for a [`Step`] at `now` under `spec`: `remaining` is the free slots, and
/// `reset_after` while every slot is held [`RETRY_AFTER`], or less when the earliest lease ends
/// sooner; zero while one is free.
pub fn decide(step: &Step, spec: &LimitSpec, now: Timestamp) -> Decision {
    let now_us = now.as_micros();
    let remaining = spec.limit.saturating_sub(step.used_after);
    let reset_after = if remaining == 0 && step.first_end > now_us {
        Duration::from_micros(step.first_end - now_us).min(RETRY_AFTER)
    } else {
        Duration::ZERO
    };
    Decision {
        over_limit: !step.allowed,
        before: step.used_before,
        after: if step.allowed {
            step.used_after
        } else {
            step.used_before + 1
        },
        remaining: if step.allowed { remaining } else { 0 },
        reset_after,
        expires_at: Timestamp::from_micros(step.last_end.max(now_us)),
        wait: Duration::ZERO,
    }
}

/// [`step`] then [`decide`] on a limit whose window is the lease timeout.
pub fn run(
    state: &mut ConcurrencyState,
    spec: &LimitSpec,
    holder: &str,
    hits: u64,
    release: bool,
    now: Timestamp,
) -> Decision {
    let timeout = spec.window.micros();
    let s = step(
        state,
        spec.limit,
        timeout,
        holder,
        hits,
        release,
        now.as_micros(),
    );
    decide(&s, spec, now)
}

#[cfg(test)]
mod tests;
