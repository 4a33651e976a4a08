//! Usage reports ([`crate::algorithm::report`]) on every algorithm, on a manual clock: a report
//! past the limit counts in full (debt) and is never over; the next check is refused; the window or
//! the refill pays the debt back, and then the key admits again.

use super::bucket::bucket_spec;
use crate::algorithm::sliding_log::SlidingLogState;
use crate::algorithm::{Algorithm, AlgorithmState, LimitSpec, apply, report};
use crate::clock::Timestamp;

/// `secs` seconds after the start of a minute (window-aligned for 60 s windows).
fn at(secs: u64) -> Timestamp {
    Timestamp::from_secs(1_000_000_020 + secs)
}

/// 10 per 60 s (burst 10 for the buckets).
fn spec(algorithm: Algorithm) -> LimitSpec {
    bucket_spec(algorithm, 10, 60, 10)
}

/// Reports 25 at 0 s on a fresh key of `algorithm`, then checks that a check is refused at
/// `refused` s and one hit admitted at `admitted` s.
fn debt_is_paid_back(algorithm: Algorithm, refused: u64, admitted: u64) {
    let s = spec(algorithm);
    let mut state: Option<AlgorithmState> = None;
    let d = report(&mut state, &s, 25, at(0));
    assert!(!d.over_limit, "{algorithm:?}: a report is never over");
    assert_eq!(d.remaining, 0, "{algorithm:?}: in debt, nothing is left");
    assert!(
        d.reset_after.as_secs() >= 1,
        "{algorithm:?}: reset {:?}",
        d.reset_after
    );
    // The next request-time check (0 hits) is refused while the debt lasts.
    assert!(apply(&mut state, &s, 0, at(1)).over_limit, "{algorithm:?}");
    assert!(
        apply(&mut state, &s, 1, at(refused)).over_limit,
        "{algorithm:?} at {refused} s"
    );
    let d = apply(&mut state, &s, 1, at(admitted));
    assert!(!d.over_limit, "{algorithm:?} at {admitted} s: {d:?}");
}

#[test]
fn fixed_window_debt_lasts_until_the_window_ends() {
    debt_is_paid_back(Algorithm::FixedWindow, 59, 60);
}

#[test]
fn sliding_window_debt_weighs_while_the_window_does() {
    // At 61 s the previous window (25) still weighs 59/60; a window later it is gone.
    debt_is_paid_back(Algorithm::SlidingWindow, 61, 120);
}

#[test]
fn sliding_log_debt_leaves_with_its_entry() {
    debt_is_paid_back(Algorithm::SlidingLog, 59, 60);
}

#[test]
fn token_bucket_goes_negative_and_refills() {
    // 25 taken from 10 tokens: −15; one token per 6 s, so one is back after 16 × 6 = 96 s.
    debt_is_paid_back(Algorithm::TokenBucket, 95, 96);
}

#[test]
fn leaky_bucket_debt_stops_a_minute_past_the_full_queue() {
    // The queue holds 10 + a minute's drain (10): the report's other 5 are past what GCRA reads
    // exactly. One more fits once 11 have drained: 66 s (and one quantum).
    debt_is_paid_back(Algorithm::LeakyBucket, 66, 67);
}

#[test]
fn a_report_within_the_limit_counts_like_hits() {
    for algorithm in [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
    ] {
        let s = spec(algorithm);
        let mut state = None;
        let d = report(&mut state, &s, 4, at(0));
        assert_eq!((d.over_limit, d.remaining), (false, 6), "{algorithm:?}");
        assert_eq!(
            apply(&mut state, &s, 6, at(0)).remaining,
            0,
            "{algorithm:?}"
        );
        assert!(apply(&mut state, &s, 1, at(0)).over_limit, "{algorithm:?}");
    }
}

#[test]
fn a_report_of_u64_max_is_clamped_never_wraps() {
    for algorithm in [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
    ] {
        let s = spec(algorithm);
        let mut state = None;
        for _ in 0..3 {
            let d = report(&mut state, &s, u64::MAX, at(0));
            assert_eq!((d.over_limit, d.remaining), (false, 0), "{algorithm:?}");
        }
        // Still in debt: the counters stopped at their ceiling instead of wrapping to zero.
        assert!(apply(&mut state, &s, 0, at(1)).over_limit, "{algorithm:?}");
        assert!(apply(&mut state, &s, 1, at(1)).over_limit, "{algorithm:?}");
    }
}

#[test]
fn a_sliding_log_past_its_limit_merges_reports_instead_of_growing() {
    let s = spec(Algorithm::SlidingLog);
    let mut state = None;
    for i in 0..1000 {
        assert!(!report(&mut state, &s, 1, at(i % 50)).over_limit);
    }
    let Some(AlgorithmState::SlidingLog(log)) = &state else {
        panic!("a sliding log state: {state:?}");
    };
    let log: &SlidingLogState = log;
    assert_eq!(log.entries.len(), 10);
    assert_eq!(log.entries.back().map(|e| e.cum - log.base), Some(1000));
    // The merged hits leave with the newest entry (49 s), never earlier.
    assert!(apply(&mut state, &s, 1, at(108)).over_limit);
    assert!(!apply(&mut state, &s, 1, at(109)).over_limit);
}
