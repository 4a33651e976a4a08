//! Sliding log: the exact sliding window. Every admitted request is logged with its time; a request
//! of `hits` at `now` is admitted iff the hits logged in (`now - window`, `now`] plus `hits` stay
//! within the limit. An entry exactly `window` old is out. Denied hits are not logged (as for
//! `sliding_window` and `token_bucket`: a client over the limit must not push its own recovery back).
//!
//! One request is one entry whatever its hits, so a key holds at most `min(limit, requests in the
//! window)` entries; validation caps the limit at [`MAX_LIMIT`]. Each entry carries the running
//! total of hits logged up to it (`cum`), so the hits in the window are `newest.cum - base` (`base`
//! = the running total before the oldest entry): no call sums the log. The Redis twin
//! (`lua/sliding_log.lua`, a sorted set) computes the same [`Step`] with the same rules, and both
//! stores build the decision with [`decide`].
//!
//! Time is logged as `max(now, newest)`: if a clock steps back, the log stays ordered (entries and
//! running totals grow together) and a hit is never forgotten earlier than it would have been.

use std::collections::VecDeque;
use std::time::Duration;

use super::{Decision, LimitSpec, Window};
use crate::clock::Timestamp;

/// Largest `requests_per_unit` a sliding log accepts. A log entry is 16 bytes in the memory store
/// (about 100 bytes in a Redis sorted set), so one key holds at most 1.6 MB (about 10 MB in
/// Redis), and only while its clients are admitted that often within one window. Higher rates
/// belong to `sliding_window`, which counts in constant memory with a close estimate.
pub const MAX_LIMIT: u64 = 100_000;

/// One logged request: when, and the running total of logged hits including it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEntry {
    /// Time of the request in microseconds since the epoch.
    pub at: u64,
    /// Hits logged up to and including this entry (since the log was last empty).
    pub cum: u64,
}

/// The log of one key, oldest entry first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlidingLogState {
    /// Entries still inside the window (as of the last call).
    pub entries: VecDeque<LogEntry>,
    /// Running total before the oldest entry (the `cum` of the last entry dropped).
    pub base: u64,
}

/// What one call found and did; the Lua twin returns exactly these numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Hits in the window before this request.
    pub used_before: u64,
    /// True when the hits fit (and, if any, were logged).
    pub allowed: bool,
    /// When (µs) enough entries have left the window for one more hit to fit; 0 when one fits
    /// now or never will (limit 0).
    pub free_at: u64,
    /// Time (µs) of the newest entry after the call, `None` when the log is empty.
    pub newest: Option<u64>,
}

impl SlidingLogState {
    /// Drops entries that left the window at `now` (`at + window <= now`).
    fn trim(&mut self, window: u64, now: u64) {
        while let Some(e) = self.entries.front().copied() {
            if e.at.saturating_add(window) > now {
                break;
            }
            self.base = e.cum;
            self.entries.pop_front();
        }
        if self.entries.is_empty() {
            self.base = 0;
        }
        // A burst leaves a large buffer behind; give it back once the log has shrunk well below.
        if self.entries.capacity() > 64 && self.entries.len() * 4 < self.entries.capacity() {
            self.entries.shrink_to_fit();
        }
    }

    /// Hits logged in the window.
    fn used(&self) -> u64 {
        self.entries.back().map_or(0, |e| e.cum - self.base)
    }
}

/// Trims the log to the window at `now`, then logs `hits` if they fit within `limit`.
pub fn step(state: &mut SlidingLogState, limit: u64, window: Window, hits: u64, now: u64) -> Step {
    let window = window.micros();
    state.trim(window, now);
    let used_before = state.used();
    let allowed = hits <= limit && used_before.saturating_add(hits) <= limit;
    if allowed && hits > 0 {
        let (at, cum) = state
            .entries
            .back()
            .map_or((now, state.base), |e| (e.at.max(now), e.cum));
        state.entries.push_back(LogEntry {
            at,
            cum: cum.saturating_add(hits),
        });
    }
    finish(state, limit, window, used_before, allowed)
}

/// Trims the log to the window at `now`, then logs `hits` of reported usage whatever the log
/// holds (the running total stops at [`super::fixed_window::MAX_COUNT`], so the Lua twin's
/// doubles stay exact). While the log holds
/// fewer than `max(limit, 1)` entries the report is a new entry; from there on it joins the
/// newest entry, which moves to `now`: the log never holds more entries than a policed one, and
/// the merged hits leave the window with the report, never earlier. Always `allowed`; the step's
/// `used_before` is the hits in the window before the report.
pub fn report_step(
    state: &mut SlidingLogState,
    limit: u64,
    window: Window,
    hits: u64,
    now: u64,
) -> Step {
    let window = window.micros();
    state.trim(window, now);
    let used_before = state.used();
    if hits > 0 {
        let full = state.entries.len() as u64 >= limit.max(1);
        let ceiling = super::fixed_window::MAX_COUNT;
        match state.entries.back_mut() {
            Some(e) if full => {
                e.at = e.at.max(now);
                e.cum = e.cum.saturating_add(hits).min(ceiling.max(e.cum));
            }
            newest => {
                let (at, cum) = newest.map_or((now, state.base), |e| (e.at.max(now), e.cum));
                state.entries.push_back(LogEntry {
                    at,
                    cum: cum.saturating_add(hits).min(ceiling.max(cum)),
                });
            }
        }
    }
    finish(state, limit, window, used_before, true)
}

/// Trims the log to the window at `now`, then forgets its newest `hits` hits: whole entries from
/// the newest back, and part of the last one reached. The returned step's `used_before` is the
/// hits left in the window after the refund, and it is always `allowed` (the Lua twin returns the
/// same numbers).
pub fn refund_step(
    state: &mut SlidingLogState,
    limit: u64,
    window: Window,
    hits: u64,
    now: u64,
) -> Step {
    let window = window.micros();
    state.trim(window, now);
    let mut left = hits;
    // Each turn removes an entry or ends the loop, so it runs at most once per entry.
    while left > 0 {
        let n = state.entries.len();
        let Some(newest) = state.entries.back().copied() else {
            break;
        };
        let below = if n >= 2 {
            state.entries[n - 2].cum
        } else {
            state.base
        };
        let logged = newest.cum - below;
        if logged <= left {
            state.entries.pop_back();
            left -= logged;
        } else if let Some(e) = state.entries.back_mut() {
            e.cum -= left;
            left = 0;
        }
    }
    if state.entries.is_empty() {
        state.base = 0;
    }
    let used = state.used();
    finish(state, limit, window, used, true)
}

/// The step's numbers once the log holds its final entries.
fn finish(
    state: &SlidingLogState,
    limit: u64,
    window: u64,
    used_before: u64,
    allowed: bool,
) -> Step {
    let used_after = state.used();
    // Hits that must leave before one more fits; more than one only after the limit was lowered.
    let need = used_after.saturating_add(1).saturating_sub(limit);
    let free_at = if limit == 0 || need == 0 {
        0
    } else {
        // The first entry whose leaving frees `need` hits; it exists because need <= used_after.
        let k = state.entries.partition_point(|e| e.cum - state.base < need);
        state.entries[k].at.saturating_add(window)
    };
    Step {
        used_before,
        allowed,
        free_at,
        newest: state.entries.back().map(|e| e.at),
    }
}

/// Applies `hits` at `now` to `state` and returns the decision.
pub fn apply(state: &mut SlidingLogState, spec: &LimitSpec, hits: u64, now: Timestamp) -> Decision {
    let s = step(state, spec.limit, spec.window, hits, now.as_micros());
    decide(spec, s, hits, now)
}

/// Forgets the newest `hits` hits logged (see [`refund_step`]); never over the limit.
pub fn refund(
    state: &mut SlidingLogState,
    spec: &LimitSpec,
    hits: u64,
    now: Timestamp,
) -> Decision {
    let s = refund_step(state, spec.limit, spec.window, hits, now.as_micros());
    decide_refund(spec, s, now)
}

/// Logs `hits` of reported usage (see [`report_step`]); never over the limit.
pub fn report(
    state: &mut SlidingLogState,
    spec: &LimitSpec,
    hits: u64,
    now: Timestamp,
) -> Decision {
    let s = report_step(state, spec.limit, spec.window, hits, now.as_micros());
    decide_report(spec, s, hits, now)
}

/// The decision for a report's [`Step`]: the hits were logged, and the answer is never over the
/// limit; `remaining` is 0 and `reset_after` the time until one more hit fits while the log is
/// past its limit. Shared by both stores.
pub fn decide_report(spec: &LimitSpec, s: Step, hits: u64, now: Timestamp) -> Decision {
    decide(spec, Step { allowed: true, ..s }, hits, now).reported()
}

/// The decision for a refund's [`Step`] (whose `used_before` is what is left after it): what a
/// check would find, never over the limit. Shared by both stores.
pub fn decide_refund(spec: &LimitSpec, s: Step, now: Timestamp) -> Decision {
    decide(spec, s, 0, now).refunded()
}

/// The decision for a [`Step`]; shared by the memory store and the Redis store.
///
/// `remaining` is the hits that still fit in the window (0 when denied); `reset_after` the time
/// until one more hit fits, rounded up to whole seconds (0 when one fits now, at least 1 s when
/// denied, the window when the limit is 0). For stats, an admitted request uses the exact count
/// before it plus its hits; a denied one counts all its hits as over.
pub fn decide(spec: &LimitSpec, s: Step, hits: u64, now: Timestamp) -> Decision {
    let limit = spec.limit;
    let window = spec.window.duration();
    let used_after = if s.allowed {
        s.used_before.saturating_add(hits)
    } else {
        s.used_before
    };
    let (before, after) = if s.allowed {
        (s.used_before, used_after)
    } else {
        (limit, limit.saturating_add(hits))
    };
    let reset_after = if limit == 0 {
        window
    } else {
        let mut secs = s
            .free_at
            .saturating_sub(now.as_micros())
            .div_ceil(1_000_000);
        if !s.allowed {
            secs = secs.max(1);
        }
        Duration::from_secs(secs)
    };
    let expires_at = match s.newest {
        // Once the newest entry left the window, a fresh log decides identically.
        Some(at) => Timestamp::from_micros(at).saturating_add(window),
        None => now,
    };
    Decision {
        over_limit: !s.allowed,
        before,
        after,
        remaining: if s.allowed {
            limit.saturating_sub(used_after)
        } else {
            0
        },
        reset_after,
        expires_at,
        wait: Duration::ZERO,
    }
}

#[cfg(test)]
mod tests;
