//! The C.4 stat arithmetic, including Go's float32 near-limit threshold.

use std::time::Duration;

use super::*;
use crate::algorithm::Decision;
use crate::algorithm::Window;
use crate::algorithm::fixed_window::{FixedWindowState, apply};
use crate::clock::Timestamp;
use crate::limiter::outcome::{Source, Verdict};

/// Runs `calls` single hits against a fixed window of `limit` and sums the increments.
fn run(limit: u64, calls: u64, shadow: bool, ratio: f32) -> LimitIncrements {
    let mut state = FixedWindowState::default();
    let mut sum = LimitIncrements::default();
    for _ in 0..calls {
        let window = Window::from_secs(60).unwrap();
        let d = apply(&mut state, limit, window, 1, Timestamp::from_secs(1234));
        let i = increments(&Verdict::from(d), Source::Store, limit, 1, shadow, ratio);
        sum.total_hits += i.total_hits;
        sum.over_limit += i.over_limit;
        sum.near_limit += i.near_limit;
        sum.within_limit += i.within_limit;
        sum.shadow_mode += i.shadow_mode;
    }
    sum
}

#[test]
fn limit_20_after_25_calls() {
    let s = run(20, 25, false, 0.8);
    assert_eq!(
        (s.total_hits, s.over_limit, s.near_limit, s.within_limit),
        (25, 5, 4, 20)
    );
    assert_eq!(s.shadow_mode, 0);
}

#[test]
fn shadow_rule_counts_over_and_shadow() {
    // Scenario 40 of `docs/design/contract.md#scenarios`: 3/min shadow, 5 hits → over_limit = 2,
    // shadow_mode = 2.
    let s = run(3, 5, true, 0.8);
    assert_eq!((s.over_limit, s.shadow_mode, s.within_limit), (2, 2, 3));
}

#[test]
fn near_threshold_is_float32() {
    // float32(10) * float32(0.7) rounds to 7.0; widening 0.7f32 to f64 first would give 6.
    assert_eq!(near_threshold(10, 0.7), 7);
    assert_eq!(near_threshold(20, 0.8), 16);
    assert_eq!(near_threshold(0, 0.8), 0);
    assert_eq!(near_threshold(7, 1.0), 7);
}

#[test]
fn a_batch_crossing_the_limit_splits_over_and_near() {
    // before 15, +10 → 25 over a limit of 20 (near 16): over 5, near 20 - 16 = 4.
    let d = Decision {
        over_limit: true,
        before: 15,
        after: 25,
        remaining: 0,
        reset_after: Duration::from_secs(1),
        expires_at: Timestamp::from_secs(1),
        wait: Duration::ZERO,
    };
    let i = increments(&Verdict::from(d), Source::Store, 20, 10, true, 0.8);
    assert_eq!((i.total_hits, i.over_limit, i.near_limit), (10, 5, 4));
    assert_eq!(i.shadow_mode, 5);
    // Crossing the near threshold only: before 14, +4 → 18: near 2, within 4.
    let d = Decision {
        over_limit: false,
        before: 14,
        after: 18,
        remaining: 2,
        ..d
    };
    let i = increments(&Verdict::from(d), Source::Store, 20, 4, false, 0.8);
    assert_eq!((i.near_limit, i.within_limit, i.over_limit), (2, 4, 0));
}

#[test]
fn the_local_cache_counts_every_hit_over_and_cached() {
    let v = Verdict::over(Duration::from_secs(3));
    let i = increments(&v, Source::LocalCache, 20, 3, true, 0.8);
    assert_eq!(
        (i.total_hits, i.over_limit, i.over_limit_with_local_cache),
        (3, 3, 3)
    );
    assert_eq!((i.near_limit, i.within_limit, i.shadow_mode), (0, 0, 3));
}

/// The increments of a usage report of `hits` on a fixed window of `limit` already at `used`.
fn report_of(limit: u64, used: u64, hits: u64) -> LimitIncrements {
    let window = Window::from_secs(60).unwrap();
    let now = Timestamp::from_secs(1234);
    let mut state = FixedWindowState::default();
    apply(&mut state, limit, window, used, now);
    let d = apply(&mut state, limit, window, hits, now).reported();
    reported(&Verdict::from(d), limit, hits, 0.8)
}

#[test]
fn a_report_counts_its_hits_past_the_limit_as_over_and_the_rest_within() {
    // Limit 10 (near at 8), 4 used, 21 reported: 4..10 within (8..10 of it near), 10..25 over.
    let i = report_of(10, 4, 21);
    assert_eq!(
        (i.total_hits, i.over_limit, i.within_limit, i.near_limit),
        (21, 15, 6, 2)
    );
    assert_eq!(i.shadow_mode, 0);
    // Already in debt: all over. Within the limit: all within.
    let i = report_of(10, 12, 3);
    assert_eq!((i.over_limit, i.within_limit, i.near_limit), (3, 0, 0));
    let i = report_of(10, 0, 5);
    assert_eq!((i.over_limit, i.within_limit, i.near_limit), (0, 5, 0));
}
