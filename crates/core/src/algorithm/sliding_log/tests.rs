//! Sliding log against hand-worked cases and a naive model that keeps every admitted event.

use super::*;
use crate::algorithm::Algorithm;
use proptest::prelude::*;

fn spec(limit: u64, window_secs: u64) -> LimitSpec {
    LimitSpec {
        algorithm: Algorithm::SlidingLog,
        limit,
        window: crate::algorithm::Window::from_secs(window_secs).unwrap(),
        burst: 0,
    }
}

const T0: u64 = 1_000_000_000_000;

fn at_ms(ms: u64) -> Timestamp {
    Timestamp::from_micros(T0 + ms * 1000)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn counts_exactly_and_an_entry_one_window_old_is_out() {
    let s = spec(3, 10);
    let mut log = SlidingLogState::default();
    let d = apply(&mut log, &s, 2, at_ms(0));
    assert!(!d.over_limit);
    assert_eq!((d.before, d.after, d.remaining), (0, 2, 1));
    assert_eq!(d.reset_after, Duration::ZERO, "one more fits now");
    let d = apply(&mut log, &s, 1, at_ms(4_000));
    assert_eq!((d.over_limit, d.remaining), (false, 0));
    assert_eq!(d.reset_after, secs(6), "the 2 hits of t=0 leave at t=10");
    assert_eq!(d.expires_at, at_ms(14_000));
    let d = apply(&mut log, &s, 1, at_ms(5_000));
    assert!(d.over_limit);
    assert_eq!((d.before, d.after, d.remaining), (3, 4, 0));
    assert_eq!(d.reset_after, secs(5));
    let d = apply(&mut log, &s, 1, at_ms(9_999));
    assert!(
        d.over_limit,
        "1 ms before the edge the oldest hits still count"
    );
    assert_eq!(d.reset_after, secs(1), "1 ms, rounded up");
    // Exactly one window after t=0 its 2 hits are out; the hit of t=4 stays until t=14.
    let d = apply(&mut log, &s, 2, at_ms(10_000));
    assert!(!d.over_limit);
    assert_eq!((d.before, d.after, d.remaining), (1, 3, 0));
    assert_eq!(d.reset_after, secs(4));
    assert_eq!(d.expires_at, at_ms(20_000));
}

#[test]
fn a_request_of_many_hits_is_one_entry_and_denied_hits_are_not_logged() {
    let s = spec(100, 60);
    let mut log = SlidingLogState::default();
    apply(&mut log, &s, 40, at_ms(0));
    apply(&mut log, &s, 60, at_ms(1));
    assert_eq!(log.entries.len(), 2);
    assert!(apply(&mut log, &s, 1, at_ms(2)).over_limit);
    assert!(apply(&mut log, &s, u64::MAX, at_ms(3)).over_limit);
    assert_eq!(log.entries.len(), 2, "denied requests leave no entry");
    // The 40 leave at 60 s: then exactly 40 fit, not 41.
    assert!(apply(&mut log, &s, 41, at_ms(60_000)).over_limit);
    let d = apply(&mut log, &s, 40, at_ms(60_000));
    assert_eq!((d.over_limit, d.remaining), (false, 0));
}

#[test]
fn hits_zero_checks_and_hits_over_the_limit_are_refused() {
    let s = spec(2, 10);
    let mut log = SlidingLogState::default();
    let d = apply(&mut log, &s, 0, at_ms(0));
    assert_eq!(
        (d.over_limit, d.remaining, d.expires_at),
        (false, 2, at_ms(0))
    );
    assert!(log.entries.is_empty(), "a check logs nothing");
    assert!(apply(&mut log, &s, 3, at_ms(0)).over_limit);
    apply(&mut log, &s, 2, at_ms(1_000));
    let d = apply(&mut log, &s, 0, at_ms(2_000));
    assert_eq!((d.over_limit, d.remaining), (false, 0));
    assert_eq!(
        d.reset_after,
        secs(9),
        "a check at the limit still says when one fits"
    );
}

#[test]
fn zero_limit_denies_every_hit_for_a_window() {
    let s = spec(0, 30);
    let mut log = SlidingLogState::default();
    let d = apply(&mut log, &s, 1, at_ms(0));
    assert_eq!(
        (d.over_limit, d.remaining, d.reset_after),
        (true, 0, secs(30))
    );
    let d = apply(&mut log, &s, 0, at_ms(0));
    assert_eq!((d.over_limit, d.remaining), (false, 0));
    assert!(log.entries.is_empty());
}

#[test]
fn a_lowered_limit_waits_for_enough_entries_to_leave() {
    let mut log = SlidingLogState::default();
    for (i, hits) in [1, 2, 2].into_iter().enumerate() {
        apply(&mut log, &spec(5, 10), hits, at_ms(i as u64 * 1_000));
    }
    // 5 in the window, limit now 2: 4 hits must leave, i.e. the entries of t=0 and t=1 (3 hits)
    // and the one of t=2.
    let d = apply(&mut log, &spec(2, 10), 1, at_ms(3_000));
    assert!(d.over_limit);
    assert_eq!(d.reset_after, secs(9));
    let d = apply(&mut log, &spec(4, 10), 0, at_ms(3_000));
    assert_eq!(
        d.reset_after,
        secs(8),
        "with limit 4, the t=0 and t=1 entries suffice"
    );
}

#[test]
fn a_clock_stepping_back_keeps_the_log_ordered() {
    let s = spec(3, 10);
    let mut log = SlidingLogState::default();
    apply(&mut log, &s, 1, at_ms(5_000));
    apply(&mut log, &s, 1, at_ms(4_000));
    let times: Vec<u64> = log.entries.iter().map(|e| e.at).collect();
    assert_eq!(times, [T0 + 5_000_000, T0 + 5_000_000]);
    assert_eq!(apply(&mut log, &s, 0, at_ms(4_000)).remaining, 1);
}

#[test]
fn the_buffer_of_a_burst_is_given_back() {
    let s = spec(10_000, 1);
    let mut log = SlidingLogState::default();
    for i in 0..10_000 {
        apply(&mut log, &s, 1, Timestamp::from_micros(T0 + i));
    }
    let big = log.entries.capacity();
    apply(&mut log, &s, 1, at_ms(5_000));
    assert_eq!(log.entries.len(), 1);
    assert!(
        log.entries.capacity() < big / 4,
        "{}",
        log.entries.capacity()
    );
}

/// The naive answer at `now` from every admitted event `(µs, hits)`: hits in the window, and the
/// first instant from `now` on at which one more hit fits.
fn model(events: &[(u64, u64)], limit: u64, window: u64, now: u64) -> (u64, Option<u64>) {
    let in_window = |t: u64| {
        let used: u64 = events
            .iter()
            .filter(|(at, _)| at + window > t)
            .map(|e| e.1)
            .sum();
        used
    };
    let mut candidates: Vec<u64> = events.iter().map(|(at, _)| at + window).collect();
    candidates.push(now);
    candidates.sort_unstable();
    let free = candidates
        .into_iter()
        .filter(|&t| t >= now)
        .find(|&t| limit > 0 && in_window(t) < limit);
    (in_window(now), free)
}

proptest! {
    /// Every decision against the naive model, with exact window edges (steps of 250 ms),
    /// arbitrary microseconds, hits over the limit, and a limit that is sometimes lowered.
    #[test]
    fn matches_a_naive_model(
        limit in 0u64..8,
        lowered in 0u64..8,
        window_secs in 1u64..5,
        events in proptest::collection::vec(
            (
                prop_oneof![(0u64..12).prop_map(|q| q * 250_000), 0u64..3_000_000],
                prop_oneof![6 => 0u64..5, 1 => Just(u64::MAX)],
                any::<bool>(),
            ),
            1..120,
        ),
    ) {
        let window = window_secs * 1_000_000;
        let mut log = SlidingLogState::default();
        let mut admitted: Vec<(u64, u64)> = Vec::new();
        let mut now = T0;
        for (dt, hits, low) in events {
            now += dt;
            let limit = if low { lowered.min(limit) } else { limit };
            let (used, _) = model(&admitted, limit, window, now);
            let ok = hits <= limit && used + hits <= limit;
            if ok && hits > 0 {
                admitted.push((now, hits));
            }
            let (used_after, free) = model(&admitted, limit, window, now);
            let d = apply(&mut log, &spec(limit, window_secs), hits, Timestamp::from_micros(now));
            prop_assert_eq!(d.over_limit, !ok);
            prop_assert_eq!(d.remaining, if ok { limit - used_after } else { 0 });
            let mut wait = match free {
                Some(t) => (t - now).div_ceil(1_000_000),
                None => window_secs,
            };
            if !ok && limit > 0 {
                wait = wait.max(1);
            }
            prop_assert_eq!(d.reset_after, Duration::from_secs(wait));
            let (before, after) = if ok { (used, used + hits) } else { (limit, limit.saturating_add(hits)) };
            prop_assert_eq!((d.before, d.after), (before, after));
            let live: Vec<_> = admitted.iter().filter(|(at, _)| at + window > now).collect();
            prop_assert_eq!(log.entries.len(), live.len());
            let newest = live.last().map_or(now, |(at, _)| at + window);
            prop_assert_eq!(d.expires_at, Timestamp::from_micros(newest));
        }
    }
}

#[test]
fn a_refund_forgets_the_newest_hits_whole_entries_then_part_of_one() {
    let s = spec(10, 10);
    let mut log = SlidingLogState::default();
    for (ms, hits) in [(0, 3), (1_000, 4), (2_000, 2)] {
        apply(&mut log, &s, hits, at_ms(ms));
    }
    let d = refund(&mut log, &s, 3, at_ms(3_000));
    assert_eq!((d.over_limit, d.remaining), (false, 4));
    let cums: Vec<u64> = log.entries.iter().map(|e| e.cum).collect();
    assert_eq!(cums, [3, 6]);
    let d = refund(&mut log, &s, 50, at_ms(3_000));
    assert_eq!((d.remaining, log.entries.len(), log.base), (10, 0, 0));
}

proptest! {
    /// Refunds mixed into the naive log: the newest hits are forgotten (whole entries, then part
    /// of one), and every later decision still agrees with the model.
    #[test]
    fn refunds_match_the_naive_model(
        limit in 0u64..8,
        window_secs in 1u64..5,
        events in proptest::collection::vec((0u64..3_000_000, 0u64..6, any::<bool>()), 1..120),
    ) {
        let window = window_secs * 1_000_000;
        let s = spec(limit, window_secs);
        let mut log = SlidingLogState::default();
        let mut admitted: Vec<(u64, u64)> = Vec::new();
        let mut now = T0;
        for (dt, hits, give_back) in events {
            now += dt;
            admitted.retain(|(at, _)| at + window > now);
            let at = Timestamp::from_micros(now);
            if give_back {
                let mut left = hits;
                while left > 0 {
                    let Some(last) = admitted.last_mut() else { break };
                    let take = last.1.min(left);
                    last.1 -= take;
                    left -= take;
                    if last.1 == 0 { admitted.pop(); }
                }
                let d = refund(&mut log, &s, hits, at);
                let (used, _) = model(&admitted, limit, window, now);
                prop_assert!(!d.over_limit);
                prop_assert_eq!(d.remaining, limit.saturating_sub(used));
            } else {
                let (used, _) = model(&admitted, limit, window, now);
                let ok = hits <= limit && used + hits <= limit;
                if ok && hits > 0 { admitted.push((now, hits)); }
                prop_assert_eq!(apply(&mut log, &s, hits, at).over_limit, !ok);
            }
            prop_assert_eq!(log.entries.len(), admitted.len());
        }
    }
}
