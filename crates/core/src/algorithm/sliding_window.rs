//! Sliding window counter (the Cloudflare estimate): epoch-aligned windows as for fixed windows,
//! but a request is judged against `previous × (share of the previous window still inside the
//! sliding window) + current`, which removes the fixed window's 2× burst across an edge.
//!
//! The previous window's weight is an integer out of [`SCALE`], computed in Rust from the time
//! alone; every comparison is then a sum of products below 2^53, so the Redis twin
//! (`lua/sliding_window.lua`, doubles only) computes exactly what Rust does. The weight is rounded
//! up, so the estimate never undercounts. A denied request is not counted (otherwise a client over
//! the limit would carry its rejected hits into the next window's estimate).

use std::time::Duration;

use super::{Decision, LimitSpec, Window};
use crate::clock::Timestamp;

/// Denominator of the previous window's weight: 2^19, so `3 × u32::MAX × SCALE` < 2^53.
pub const SCALE: u64 = 1 << 19;

/// The counters of the current and the previous window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlidingWindowState {
    /// Start of the current window, in seconds since the epoch.
    pub window_start: u64,
    /// Admitted hits in the current window.
    pub current: u64,
    /// Admitted hits in the window before it.
    pub previous: u64,
}

/// Weight (out of [`SCALE`]) of the previous window at `now`: the share of the sliding window
/// (`now - window`, `now`] that still lies in the previous window, rounded up.
pub fn previous_weight(window: Window, now: Timestamp) -> u64 {
    let window = u128::from(window.micros());
    let into = u128::from(now.as_micros()) % window;
    ((window - into) * u128::from(SCALE)).div_ceil(window) as u64
}

/// Moves `state` to the window starting at `start` (seconds) of length `window`.
pub fn roll(state: &mut SlidingWindowState, start: u64, window: Window) {
    if state.window_start == start {
        return;
    }
    let previous = if state.window_start.saturating_add(window.secs()) == start {
        state.current
    } else {
        0
    };
    *state = SlidingWindowState {
        window_start: start,
        current: 0,
        previous,
    };
}

/// Whether `hits` more fit: `previous × weight + (current + hits) × SCALE ≤ limit × SCALE`.
pub fn fits(limit: u64, previous: u64, current: u64, weight: u64, hits: u64) -> bool {
    hits <= limit
        && u128::from(previous) * u128::from(weight)
            + u128::from(current.saturating_add(hits)) * u128::from(SCALE)
            <= u128::from(limit) * u128::from(SCALE)
}

/// Applies `hits` at `now`.
pub fn apply(
    state: &mut SlidingWindowState,
    spec: &LimitSpec,
    hits: u64,
    now: Timestamp,
) -> Decision {
    roll(state, window_start(spec.window, now), spec.window);
    let weight = previous_weight(spec.window, now);
    let allowed = fits(spec.limit, state.previous, state.current, weight, hits);
    let before = state.current;
    if allowed {
        state.current += hits;
    }
    decide(
        spec,
        state.previous,
        before,
        state.current,
        allowed,
        hits,
        now,
    )
}

/// The most a window's counter holds after reports: `u32::MAX`, far past any limit a weight can
/// still matter for, and small enough that `previous × weight + current × SCALE` stays an exact
/// double in the Lua twin.
pub const MAX_REPORTED: u64 = u32::MAX as u64;

/// Counts `hits` of reported usage in the current window whatever the estimate (the counter stops
/// at [`MAX_REPORTED`], or stays where it was when already past it): the debt weighs on the
/// estimate for as long as the window does, this one and, weighted, the next. Never over the
/// limit; `reset_after` is the time until one more hit fits when the report left no room.
pub fn report(
    state: &mut SlidingWindowState,
    spec: &LimitSpec,
    hits: u64,
    now: Timestamp,
) -> Decision {
    roll(state, window_start(spec.window, now), spec.window);
    let before = state.current;
    state.current = charged(before, hits);
    decide_report(spec, state.previous, before, state.current, now)
}

/// The current window's counter after a report of `hits` on `current` (see [`report`]).
pub fn charged(current: u64, hits: u64) -> u64 {
    current.saturating_add(hits).min(MAX_REPORTED.max(current))
}

/// The decision once a report took the current counter from `before` to `after` with `previous`
/// in the window before; shared by both stores.
pub fn decide_report(
    spec: &LimitSpec,
    previous: u64,
    before: u64,
    after: u64,
    now: Timestamp,
) -> Decision {
    let d = decide(spec, previous, before, after, true, after - before, now).reported();
    if d.remaining > 0 {
        return d;
    }
    match micros_until_one_fits(spec.limit, previous, after, spec.window, now) {
        Some(micros) => Decision {
            reset_after: Duration::from_secs(micros.div_ceil(1_000_000).max(1)),
            ..d
        },
        None => d,
    }
}

/// Gives `hits` back to the current window's counter, never below zero; the previous window's
/// count is history and stays. The answer is never over the limit.
pub fn refund(
    state: &mut SlidingWindowState,
    spec: &LimitSpec,
    hits: u64,
    now: Timestamp,
) -> Decision {
    roll(state, window_start(spec.window, now), spec.window);
    state.current = state.current.saturating_sub(hits);
    decide_refund(spec, state.previous, state.current, now)
}

/// The decision once a refund left `current` in the current window and `previous` in the one
/// before: what a check would find then, never over the limit. Shared by both stores.
pub fn decide_refund(spec: &LimitSpec, previous: u64, current: u64, now: Timestamp) -> Decision {
    decide(spec, previous, current, current, true, 0, now).refunded()
}

/// Microseconds from `now` until one more hit fits, given the `previous` and `current` counts of
/// the window containing `now`: later in this window (as the previous one's weight shrinks), else
/// in the next one (where `current` becomes the previous count), else in the one after, where
/// nothing is left. `None` for a zero limit, which never admits.
pub fn micros_until_one_fits(
    limit: u64,
    previous: u64,
    current: u64,
    window: Window,
    now: Timestamp,
) -> Option<u64> {
    if limit == 0 {
        return None;
    }
    let (w, scale) = (u128::from(window.micros()), u128::from(SCALE));
    let into = u128::from(now.as_micros()) % w;
    let windows = [
        (previous, current, 0),
        (current, 0, w - into),
        (0, 0, 2 * w - into),
    ];
    for (prev, cur, offset) in windows {
        if cur >= limit {
            continue;
        }
        // prev × weight(i) ≤ (limit − cur − 1) × SCALE with weight(i) = ⌈(w − i) × SCALE / w⌉
        // holds from i = w − ⌊max_weight × w / SCALE⌋ on.
        let first = if prev == 0 {
            0
        } else {
            let max_weight = u128::from(limit - cur - 1) * scale / u128::from(prev);
            w.saturating_sub(max_weight * w / scale)
        };
        if first < w {
            let wait = if offset == 0 {
                first.saturating_sub(into)
            } else {
                offset + first
            };
            return u64::try_from(wait).ok();
        }
    }
    None
}

/// The decision once the current counter went from `before` to `after` (equal when denied) with
/// `previous` in the window before; shared by the memory store and the Redis store.
///
/// `remaining` is how many more hits fit now; `reset_after` the time until the current window
/// ends, as for fixed windows, except when denied: then it is the time until one more hit fits
/// (at least 1 s), so a client retrying after it (Envoy's `Retry-After`) is never early, even
/// when the previous window's weight still fills the next one. For stats, usage is the estimate rounded up; a denied request counts
/// all its hits as over.
pub fn decide(
    spec: &LimitSpec,
    previous: u64,
    before: u64,
    after: u64,
    allowed: bool,
    hits: u64,
    now: Timestamp,
) -> Decision {
    let window = spec.window;
    let weight = u128::from(previous_weight(window, now));
    let scale = u128::from(SCALE);
    let estimate = |current: u64| u128::from(previous) * weight + u128::from(current) * scale;
    let limit = spec.limit;
    let (used_before, used_after) = if allowed {
        let b = estimate(before).div_ceil(scale) as u64;
        (b, b.saturating_add(hits))
    } else {
        (limit, limit.saturating_add(hits))
    };
    let remaining = if allowed {
        let room = (u128::from(limit) * scale).saturating_sub(estimate(after));
        (room / scale) as u64
    } else {
        0
    };
    let start = window_start(window, now);
    let window_end = Duration::from_secs(window.secs() - now.as_secs() % window.secs());
    let reset_after = match micros_until_one_fits(limit, previous, after, window, now) {
        Some(micros) if !allowed => Duration::from_secs(micros.div_ceil(1_000_000).max(1)),
        _ => window_end,
    };
    let window = window.secs();
    Decision {
        over_limit: !allowed,
        before: used_before,
        after: used_after,
        remaining,
        reset_after,
        // The current count still weighs on the next window; after that nothing is left.
        expires_at: Timestamp::from_secs(start.saturating_add(2 * window)),
        wait: Duration::ZERO,
    }
}

/// Start (Unix seconds) of the epoch-aligned window of `window`'s length containing `now`. The
/// weighting needs windows of one length, so a calendar is ignored here (the config refuses a
/// calendar on a sliding window).
fn window_start(window: Window, now: Timestamp) -> u64 {
    let now = now.as_secs();
    now - now % window.secs()
}

#[cfg(test)]
mod tests;
