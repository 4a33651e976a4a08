//! Sliding window against hand-worked cases and a naive model with exact fractions.

use super::*;
use crate::algorithm::Algorithm;
use proptest::prelude::*;

fn spec(limit: u64, window_secs: u64) -> LimitSpec {
    LimitSpec {
        algorithm: Algorithm::SlidingWindow,
        limit,
        window: crate::algorithm::Window::from_secs(window_secs).unwrap(),
        burst: 0,
    }
}

fn at_ms(ms: u64) -> Timestamp {
    Timestamp::from_micros(ms * 1000)
}

#[test]
fn the_previous_window_weighs_by_its_overlap() {
    let s = spec(10, 60);
    let mut w = SlidingWindowState::default();
    assert!(!apply(&mut w, &s, 10, at_ms(59_000)).over_limit);
    // At the edge the previous window still counts fully: no 2x burst.
    assert!(apply(&mut w, &s, 1, at_ms(60_000)).over_limit);
    // 15 s in: previous weighs 3/4 → 7.5 used, 2 more fit.
    let d = apply(&mut w, &s, 2, at_ms(75_000));
    assert!(!d.over_limit);
    assert_eq!((d.remaining, d.before, d.after), (0, 8, 10));
    assert_eq!(d.reset_after, Duration::from_secs(45));
    assert!(apply(&mut w, &s, 1, at_ms(75_000)).over_limit);
    // A window later the 10 are forgotten; the 2 weigh 3/4.
    let d = apply(&mut w, &s, 0, at_ms(135_000));
    assert_eq!(d.remaining, 8);
    assert_eq!(d.expires_at, Timestamp::from_secs(240));
}

#[test]
fn a_gap_of_two_windows_forgets_everything_and_zero_limit_blocks() {
    let s = spec(3, 10);
    let mut w = SlidingWindowState::default();
    apply(&mut w, &s, 3, at_ms(5_000));
    assert_eq!(apply(&mut w, &s, 3, at_ms(25_000)).remaining, 0);
    assert!(apply(&mut w, &s, 4, at_ms(99_000)).over_limit);
    let mut w = SlidingWindowState::default();
    assert!(apply(&mut w, &spec(0, 10), 1, at_ms(0)).over_limit);
}

proptest! {
    /// Against a naive model: per-window admitted sums and the estimate in exact fractions.
    #[test]
    fn matches_a_naive_model(
        limit in 0u64..20,
        window in 1u64..30,
        events in proptest::collection::vec((0u64..9_000, 0u64..5), 1..150),
    ) {
        let s = spec(limit, window);
        let mut w = SlidingWindowState::default();
        let mut admitted: Vec<(u64, u64)> = Vec::new(); // (window index, hits)
        let mut now_ms = 0u64;
        let wms = window * 1000;
        for (dt, hits) in events {
            now_ms += dt;
            let idx = now_ms / wms;
            let cur: u64 = admitted.iter().filter(|(i, _)| *i == idx).map(|(_, h)| h).sum();
            let prev: u64 = admitted.iter().filter(|(i, _)| *i + 1 == idx).map(|(_, h)| h).sum();
            // Weight rounded up to 1/SCALE, as specified.
            let into = now_ms % wms;
            let weight = (u128::from(wms - into) * u128::from(SCALE)).div_ceil(u128::from(wms));
            let ok = hits <= limit
                && u128::from(prev) * weight + u128::from(cur + hits) * u128::from(SCALE)
                    <= u128::from(limit) * u128::from(SCALE);
            if ok { admitted.push((idx, hits)); }
            let d = apply(&mut w, &s, hits, at_ms(now_ms));
            prop_assert_eq!(d.over_limit, !ok);
            // Never more than the limit in one fixed window, whatever the previous one held.
            let in_window = cur + if ok { hits } else { 0 };
            prop_assert!(in_window <= limit);
        }
    }
}

#[test]
fn a_refund_decrements_the_current_window_only() {
    let s = spec(4, 10);
    let mut w = SlidingWindowState::default();
    apply(&mut w, &s, 2, at_ms(9_000));
    assert!(!apply(&mut w, &s, 2, at_ms(10_500)).over_limit);
    let d = refund(&mut w, &s, 5, at_ms(10_500));
    assert_eq!((w.previous, w.current), (2, 0));
    assert!(!d.over_limit);
    // The previous window still weighs 2 × 0.95: two more fit, not four.
    assert_eq!(d.remaining, 2);
}

proptest! {
    /// Refunds mixed into the model: the current window's count drops, never below zero, and the
    /// remaining room follows the estimate.
    #[test]
    fn refunds_match_the_model(
        limit in 0u64..20,
        window in 1u64..30,
        events in proptest::collection::vec((0u64..9_000, 0u64..5, any::<bool>()), 1..150),
    ) {
        let s = spec(limit, window);
        let mut w = SlidingWindowState::default();
        let mut counts = std::collections::HashMap::<u64, u64>::new();
        let mut now_ms = 0u64;
        let wms = window * 1000;
        let scale = u128::from(SCALE);
        for (dt, hits, give_back) in events {
            now_ms += dt;
            let idx = now_ms / wms;
            let prev = idx.checked_sub(1).and_then(|i| counts.get(&i)).copied().unwrap_or(0);
            let cur = counts.entry(idx).or_default();
            let into = now_ms % wms;
            let weight = (u128::from(wms - into) * scale).div_ceil(u128::from(wms));
            if give_back {
                *cur = cur.saturating_sub(hits);
                let d = refund(&mut w, &s, hits, at_ms(now_ms));
                let used = u128::from(prev) * weight + u128::from(*cur) * scale;
                let room = (u128::from(limit) * scale).saturating_sub(used) / scale;
                prop_assert!(!d.over_limit);
                prop_assert_eq!(u128::from(d.remaining), room);
            } else {
                let ok = hits <= limit
                    && u128::from(prev) * weight + u128::from(*cur + hits) * scale
                        <= u128::from(limit) * scale;
                if ok { *cur += hits; }
                prop_assert_eq!(apply(&mut w, &s, hits, at_ms(now_ms)).over_limit, !ok);
            }
            prop_assert_eq!(w.current, counts[&idx]);
        }
    }
}

#[test]
fn a_denied_request_is_told_when_one_more_fits() {
    let s = spec(3, 60);
    let mut w = SlidingWindowState::default();
    apply(&mut w, &s, 3, at_ms(1_234_000));
    // The window ends in 26 s, but then the 3 weigh fully: one more fits once they weigh 2 of 3,
    // just after 20 s into the next window (the weight is rounded up), so 47 s from now.
    let d = apply(&mut w, &s, 1, at_ms(1_234_000));
    assert_eq!(d.reset_after, Duration::from_secs(47));
    assert!(apply(&mut w, &s, 1, at_ms(1_280_000)).over_limit);
    assert!(!apply(&mut w, &s, 1, at_ms(1_281_000)).over_limit);
    // A limit of 1 over a full window: the next window's weight never reaches 0, so two ends.
    let s1 = spec(1, 10);
    let mut w = SlidingWindowState::default();
    apply(&mut w, &s1, 1, at_ms(3_000));
    assert_eq!(
        apply(&mut w, &s1, 1, at_ms(3_000)).reset_after,
        Duration::from_secs(17)
    );
}

proptest! {
    /// A denied request's `reset_after` is exact to the second: one hit is still denied a second
    /// before it (when that is still after now) and admitted at it.
    #[test]
    fn a_denied_reset_is_never_early(
        limit in 1u64..10,
        window in 1u64..30,
        events in proptest::collection::vec((0u64..9_000, 0u64..4), 1..60),
    ) {
        let s = spec(limit, window);
        let mut w = SlidingWindowState::default();
        let mut now_ms = 0u64;
        for (dt, hits) in events {
            now_ms += dt;
            let d = apply(&mut w, &s, hits.max(1), at_ms(now_ms));
            if d.over_limit && hits <= 1 {
                let reset = d.reset_after.as_millis() as u64;
                let mut later = w;
                prop_assert!(!apply(&mut later, &s, 1, at_ms(now_ms + reset)).over_limit);
                if reset > 1_000 {
                    let mut before = w;
                    prop_assert!(apply(&mut before, &s, 1, at_ms(now_ms + reset - 1_000)).over_limit);
                }
            }
        }
    }
}
