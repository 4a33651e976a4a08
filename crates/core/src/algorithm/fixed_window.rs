//! Fixed window counter, epoch-aligned, exactly as envoyproxy/ratelimit: the window containing `now`
//! starts at `now - now % window` (or at its calendar boundary, [`super::calendar`]); every hit increments the counter (even past the limit); the result
//! is over the limit when the counter after the increment exceeds the limit. The counter stops at
//! [`MAX_COUNT`] (far past any limit, so no decision changes): Redis's 64-bit `INCRBY` can then
//! never overflow, and every count stays an exact double in the Lua twin.

use std::time::Duration;

use super::{Decision, Window};
use crate::clock::Timestamp;

/// The most a window's counter holds: 2^52, far above any limit (a `u32`), below 2^53 so that
/// the Lua twin's doubles hold it exactly. `lua/fixed_window.lua` and `lua/lease.lua` stop at the
/// same number.
pub const MAX_COUNT: u64 = 1 << 52;

/// The counter of the current window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FixedWindowState {
    /// Start of the window the count belongs to, in seconds since the epoch.
    pub window_start: u64,
    /// Hits counted in that window.
    pub count: u64,
}

/// Applies `hits` at `now` to a window of length `window` allowing `limit` hits.
/// `hits == 0` is a check: nothing is added, the current count is judged.
pub fn apply(
    state: &mut FixedWindowState,
    limit: u64,
    window: Window,
    hits: u64,
    now: Timestamp,
) -> Decision {
    let window_start = window_start(window, now);
    if state.window_start != window_start {
        *state = FixedWindowState {
            window_start,
            count: 0,
        };
    }
    let before = state.count;
    state.count = before.saturating_add(hits).min(MAX_COUNT);
    decide(before, state.count, limit, window, now)
}

/// [`apply`] that adds the hits only when they fit: a denied request leaves the counter as it was
/// (for limits that shed, `store::Op::only_admitted`). The decision is the same as [`apply`]'s.
pub fn admit(
    state: &mut FixedWindowState,
    limit: u64,
    window: Window,
    hits: u64,
    now: Timestamp,
) -> Decision {
    let start = window_start(window, now);
    let before = if state.window_start == start {
        state.count
    } else {
        0
    };
    if before.saturating_add(hits) > limit {
        return decide(before, before.saturating_add(hits), limit, window, now);
    }
    apply(state, limit, window, hits, now)
}

/// Takes `hits` back from the counter of the window containing `now`, never below zero. A counter
/// of another (older) window is left alone: the current window has nothing to give back. The answer
/// is never over the limit; `remaining` is what fits after the refund.
pub fn refund(
    state: &mut FixedWindowState,
    limit: u64,
    window: Window,
    hits: u64,
    now: Timestamp,
) -> Decision {
    let before = if state.window_start == window_start(window, now) {
        state.count
    } else {
        0
    };
    let after = before.saturating_sub(hits);
    if before > 0 {
        state.count = after;
    }
    decide_refund(before, after, limit, window, now)
}

/// The decision once a refund took the window's counter from `before` to `after`; shared by the
/// memory store and the Redis store.
pub fn decide_refund(
    before: u64,
    after: u64,
    limit: u64,
    window: Window,
    now: Timestamp,
) -> Decision {
    Decision {
        remaining: limit.saturating_sub(after),
        ..decide(before, after, limit, window, now).refunded()
    }
}

/// Start (Unix seconds) of the window that contains `now` (the key suffix of its counter).
pub fn window_start(window: Window, now: Timestamp) -> u64 {
    window.bounds(now).start
}

/// The decision once the window's counter went from `before` to `after`. Shared by the memory
/// store and the Redis store (whose Lua script only increments), so both decide identically.
pub fn decide(before: u64, after: u64, limit: u64, window: Window, now: Timestamp) -> Decision {
    let end = window.bounds(now).end;
    let over_limit = after > limit;
    Decision {
        over_limit,
        before,
        after,
        remaining: if over_limit { 0 } else { limit - after },
        reset_after: Duration::from_secs(end.saturating_sub(now.as_secs())),
        expires_at: Timestamp::from_secs(end),
        wait: Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(secs: u64) -> Timestamp {
        Timestamp::from_secs(secs)
    }

    const W60: Window = w(60);

    const fn w(secs: u64) -> Window {
        match Window::from_secs(secs) {
            Some(w) => w,
            None => Window::SECOND,
        }
    }

    #[test]
    fn admit_counts_only_the_hits_that_fit() {
        let mut s = FixedWindowState::default();
        for n in 1..=3 {
            assert_eq!(admit(&mut s, 3, W60, 1, at(60)).after, n);
        }
        // Refused: judged as the 4th hit, but the counter stays at 3 (apply would make it 4).
        let d = admit(&mut s, 3, W60, 1, at(61));
        assert!(d.over_limit);
        assert_eq!((d.before, d.after, s.count), (3, 4, 3));
        // A larger limit (another class's share) still finds room on the same counter.
        assert!(!admit(&mut s, 4, W60, 1, at(62)).over_limit);
        assert_eq!(s.count, 4);
        // A new window starts from zero.
        assert_eq!(admit(&mut s, 3, W60, 2, at(120)).after, 2);
    }

    #[test]
    fn counts_until_the_limit_then_rejects() {
        let mut s = FixedWindowState::default();
        let d = apply(&mut s, 2, W60, 1, at(1234));
        assert_eq!((d.over_limit, d.remaining, d.after), (false, 1, 1));
        assert_eq!(d.reset_after, Duration::from_secs(26));
        assert_eq!(d.expires_at, at(1260));
        let d = apply(&mut s, 2, W60, 1, at(1250));
        assert_eq!((d.over_limit, d.remaining), (false, 0));
        let d = apply(&mut s, 2, W60, 1, at(1259));
        assert_eq!(
            (d.over_limit, d.remaining, d.before, d.after),
            (true, 0, 2, 3)
        );
        assert_eq!(d.reset_after, Duration::from_secs(1));
    }

    #[test]
    fn the_counter_stops_at_max_count_and_stays_over_the_limit() {
        let mut s = FixedWindowState {
            window_start: 1200,
            count: MAX_COUNT - 3,
        };
        let d = apply(&mut s, 10, W60, 11, at(1201));
        assert_eq!(
            (d.over_limit, d.before, d.after),
            (true, MAX_COUNT - 3, MAX_COUNT)
        );
        let d = apply(&mut s, 10, W60, 11, at(1202));
        assert_eq!(
            (d.over_limit, d.after, s.count),
            (true, MAX_COUNT, MAX_COUNT)
        );
        // The window still ends on time: the next one starts from zero.
        let d = apply(&mut s, 10, W60, 1, at(1260));
        assert_eq!((d.over_limit, d.before, d.after), (false, 0, 1));
    }

    #[test]
    fn a_new_window_starts_from_zero() {
        let mut s = FixedWindowState::default();
        apply(&mut s, 1, W60, 5, at(1259));
        let d = apply(&mut s, 1, W60, 1, at(1260));
        assert_eq!((d.over_limit, d.before, d.remaining), (false, 0, 0));
        assert_eq!(d.reset_after, Duration::from_secs(60));
    }

    #[test]
    fn zero_hits_checks_without_counting() {
        let mut s = FixedWindowState::default();
        apply(&mut s, 10, W60, 10, at(0));
        let d = apply(&mut s, 10, W60, 0, at(1));
        assert_eq!((d.over_limit, d.after, d.remaining), (false, 10, 0));
        apply(&mut s, 10, W60, 1, at(2));
        let d = apply(&mut s, 10, W60, 0, at(3));
        assert!(d.over_limit);
        assert_eq!(s.count, 11);
    }

    #[test]
    fn zero_limit_blocks_everything() {
        let mut s = FixedWindowState::default();
        assert!(apply(&mut s, 0, Window::SECOND, 1, at(5)).over_limit);
    }

    #[test]
    fn go_durations_for_hour_and_day() {
        let mut s = FixedWindowState::default();
        let d = apply(&mut s, 1, w(3600), 1, at(1_000_000));
        assert_eq!(d.reset_after, Duration::from_secs(800));
        let mut s = FixedWindowState::default();
        let d = apply(&mut s, 1, w(86_400), 1, at(1_000_000));
        assert_eq!(d.reset_after, Duration::from_secs(36_800));
    }

    #[test]
    fn a_refund_takes_hits_back_but_never_below_zero() {
        let mut s = FixedWindowState::default();
        apply(&mut s, 3, W60, 4, at(1200));
        let d = refund(&mut s, 3, W60, 2, at(1201));
        assert_eq!(
            (d.over_limit, d.before, d.after, d.remaining),
            (false, 4, 2, 1)
        );
        let d = refund(&mut s, 3, W60, 9, at(1202));
        assert_eq!((d.over_limit, d.after, d.remaining), (false, 0, 3));
        assert_eq!(s.count, 0);
        assert_eq!(d.reset_after, Duration::from_secs(58));
    }

    #[test]
    fn a_refund_still_over_the_limit_answers_ok_with_nothing_remaining() {
        let mut s = FixedWindowState::default();
        apply(&mut s, 2, W60, 6, at(0));
        let d = refund(&mut s, 2, W60, 1, at(1));
        assert_eq!((d.over_limit, d.after, d.remaining), (false, 5, 0));
    }

    #[test]
    fn a_refund_never_reaches_into_an_older_window() {
        let mut s = FixedWindowState::default();
        apply(&mut s, 5, W60, 5, at(59));
        let d = refund(&mut s, 5, W60, 5, at(60));
        assert_eq!((d.before, d.after, d.remaining), (0, 0, 5));
        assert_eq!(
            s,
            FixedWindowState {
                window_start: 0,
                count: 5
            }
        );
    }

    proptest! {
        /// Refunds against a model: the count of the current window minus refunds, floored at 0
        /// at each refund; a refund never answers over the limit.
        #[test]
        fn refunds_match_a_floored_counter(
            limit in 0u64..20,
            window in 1u64..100,
            events in proptest::collection::vec((0u64..50, 0u64..6, any::<bool>()), 1..200),
        ) {
            let mut s = FixedWindowState::default();
            let (mut t, mut start, mut count) = (0u64, 0u64, 0u64);
            for (dt, hits, give_back) in events {
                t += dt;
                if t - t % window != start {
                    (start, count) = (t - t % window, 0);
                }
                let now = Timestamp::from_secs(t);
                let d = if give_back {
                    count = count.saturating_sub(hits);
                    let d = refund(&mut s, limit, w(window), hits, now);
                    prop_assert!(!d.over_limit);
                    prop_assert_eq!(d.remaining, limit.saturating_sub(count));
                    d
                } else {
                    count += hits;
                    apply(&mut s, limit, w(window), hits, now)
                };
                prop_assert_eq!(d.after, count);
            }
        }

        /// Against a naive model: admitted hits per window never exceed the limit, and the decision
        /// equals "sum of hits in this window so far > limit".
        #[test]
        fn matches_a_naive_event_model(
            limit in 0u64..20,
            window in 1u64..100,
            events in proptest::collection::vec((0u64..50, 0u64..4), 1..200),
        ) {
            let mut s = FixedWindowState::default();
            let mut t = 0u64;
            let mut log: Vec<(u64, u64)> = Vec::new();
            for (dt, hits) in events {
                t += dt;
                log.push((t, hits));
                let start = t - t % window;
                let sum: u64 = log.iter().filter(|(at, _)| *at >= start).map(|(_, h)| h).sum();
                let d = apply(&mut s, limit, w(window), hits, Timestamp::from_secs(t));
                prop_assert_eq!(d.after, sum);
                prop_assert_eq!(d.over_limit, sum > limit);
                prop_assert!(d.reset_after.as_secs() >= 1 && d.reset_after.as_secs() <= window);
            }
        }
    }
}
