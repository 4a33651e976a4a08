//! Token bucket against hand-worked cases and a naive model (exact fractions of tokens).

use super::*;
use crate::algorithm::Algorithm;
use crate::algorithm::tests::bucket::{at_ms, bucket_spec};
use proptest::prelude::*;

fn spec(limit: u64, window_secs: u64, burst: u64) -> LimitSpec {
    bucket_spec(Algorithm::TokenBucket, limit, window_secs, burst)
}

#[test]
fn a_full_bucket_admits_burst_then_refills_at_the_rate() {
    let s = spec(10, 1, 20);
    let mut b = TokenBucketState::default();
    let d = apply(&mut b, &s, 20, at_ms(0));
    assert!(!d.over_limit);
    assert_eq!(d.remaining, 0);
    assert_eq!(
        d.reset_after,
        Duration::from_secs(1),
        "one token in 100 ms, rounded up"
    );
    let d = apply(&mut b, &s, 1, at_ms(50));
    assert!(d.over_limit, "half a token is not a token");
    assert_eq!((d.remaining, d.before, d.after), (0, 10, 11));
    let d = apply(&mut b, &s, 1, at_ms(100));
    assert!(!d.over_limit);
    assert_eq!(d.remaining, 0);
    let d = apply(&mut b, &s, 0, at_ms(1100));
    assert_eq!(d.remaining, 10);
    assert_eq!(d.reset_after, Duration::ZERO);
}

#[test]
fn a_denied_request_takes_nothing_and_a_huge_one_is_refused() {
    let s = spec(5, 60, 5);
    let mut b = TokenBucketState::default();
    assert!(apply(&mut b, &s, 6, at_ms(0)).over_limit);
    let d = apply(&mut b, &s, 5, at_ms(0));
    assert!(!d.over_limit);
    assert!(apply(&mut b, &s, u64::MAX, at_ms(1)).over_limit);
    let d = apply(&mut b, &s, 1, at_ms(1));
    assert!(d.over_limit);
    assert_eq!(d.reset_after, Duration::from_secs(12), "one token per 12 s");
}

#[test]
fn zero_limit_blocks_everything_but_checks() {
    let s = spec(0, 60, 0);
    let mut b = TokenBucketState::default();
    assert!(apply(&mut b, &s, 1, at_ms(0)).over_limit);
    assert!(!apply(&mut b, &s, 0, at_ms(0)).over_limit);
}

#[test]
fn state_expires_when_the_bucket_is_full_again() {
    let s = spec(1, 3600, 2);
    let mut b = TokenBucketState::default();
    let d = apply(&mut b, &s, 2, at_ms(0));
    assert_eq!(d.expires_at, at_ms(2 * 3_600_000));
    assert!(Params::of(&s).refill_secs(crate::algorithm::Window::from_secs(3600).unwrap()) >= 7200);
}

proptest! {
    /// Against a naive model holding tokens as an exact fraction `num / window_micros`.
    #[test]
    fn matches_a_naive_fractional_model(
        limit in 1u64..20,
        window in 1u64..120,
        burst in 1u64..30,
        events in proptest::collection::vec((0u64..5_000_000, 0u64..5), 1..150),
    ) {
        let s = spec(limit, window, burst);
        let w = u128::from(window) * 1_000_000;
        let full = u128::from(burst) * w;
        let mut b = TokenBucketState::default();
        let (mut num, mut last) = (full, None::<u128>);
        let mut now = 1_000_000_000_000u64;
        for (dt, hits) in events {
            now += dt;
            let t = u128::from(now);
            if let Some(l) = last {
                num = (num + (t - l) * u128::from(limit)).min(full);
            }
            last = Some(t);
            let ok = u128::from(hits) * w <= num;
            if ok { num -= u128::from(hits) * w; }
            let d = apply(&mut b, &s, hits, Timestamp::from_micros(now));
            prop_assert_eq!(d.over_limit, !ok);
            prop_assert_eq!(d.remaining, if ok { (num / w) as u64 } else { 0 });
        }
    }
}

#[test]
fn a_refund_puts_tokens_back_up_to_the_capacity() {
    let s = spec(1, 60, 5);
    let mut b = TokenBucketState::default();
    apply(&mut b, &s, 5, at_ms(0));
    assert!(apply(&mut b, &s, 1, at_ms(1)).over_limit);
    let d = refund(&mut b, &s, 2, at_ms(2));
    assert_eq!((d.over_limit, d.remaining), (false, 2));
    let d = refund(&mut b, &s, 100, at_ms(3));
    assert_eq!((d.over_limit, d.remaining, b.debt), (false, 5, 0));
    assert!(!apply(&mut b, &s, 5, at_ms(4)).over_limit);
}

proptest! {
    /// Refunds mixed into the fractional model: tokens come back, never past a full bucket, and a
    /// refund is never over the limit.
    #[test]
    fn refunds_match_the_fractional_model(
        limit in 1u64..20,
        window in 1u64..120,
        burst in 1u64..30,
        events in proptest::collection::vec((0u64..5_000_000, 0u64..5, any::<bool>()), 1..150),
    ) {
        let s = spec(limit, window, burst);
        let w = u128::from(window) * 1_000_000;
        let full = u128::from(burst) * w;
        let mut b = TokenBucketState::default();
        let (mut num, mut last) = (full, None::<u128>);
        let mut now = 1_000_000_000_000u64;
        for (dt, hits, give_back) in events {
            now += dt;
            let t = u128::from(now);
            if let Some(l) = last {
                num = (num + (t - l) * u128::from(limit)).min(full);
            }
            last = Some(t);
            let at = Timestamp::from_micros(now);
            if give_back {
                num = (num + u128::from(hits) * w).min(full);
                let d = refund(&mut b, &s, hits, at);
                prop_assert!(!d.over_limit);
                prop_assert_eq!(d.remaining, (num / w) as u64);
            } else {
                let ok = u128::from(hits) * w <= num;
                if ok { num -= u128::from(hits) * w; }
                prop_assert_eq!(apply(&mut b, &s, hits, at).over_limit, !ok);
            }
        }
    }
}

#[test]
fn a_denied_cost_waits_until_all_its_tokens_are_back() {
    // 1 per 10 s, burst 5: after the bucket is emptied, 3 tokens are back only after 30 s, while
    // one token (`reset_after`) is back after 10 s: a retry after 10 s would be early.
    let s = spec(1, 10, 5);
    let mut b = TokenBucketState::default();
    assert!(!apply(&mut b, &s, 5, at_ms(0)).over_limit);
    let d = apply(&mut b, &s, 3, at_ms(0));
    assert!(d.over_limit);
    assert_eq!(d.reset_after, Duration::from_secs(10));
    assert_eq!(d.wait, Duration::from_secs(30));
    assert!(apply(&mut b, &s, 3, at_ms(29_999)).over_limit, "not early");
    assert!(!apply(&mut b, &s, 3, at_ms(30_000)).over_limit);
}

proptest! {
    /// A denied request's `wait` is never early and never late: the same hits are admitted after
    /// exactly `wait` and not a microsecond before.
    #[test]
    fn a_denied_requests_wait_is_exact(
        limit in 1u64..20,
        window in 1u64..120,
        burst in 1u64..30,
        events in proptest::collection::vec((0u64..5_000_000, 1u64..30), 1..60),
    ) {
        let s = spec(limit, window, burst);
        let mut b = TokenBucketState::default();
        let mut now = 1_000_000_000_000u64;
        for (dt, hits) in events {
            now += dt;
            let d = apply(&mut b, &s, hits, Timestamp::from_micros(now));
            if d.over_limit && hits <= burst {
                let wait = d.wait.as_micros() as u64;
                prop_assert!(wait > 0);
                let mut early = b;
                let at = Timestamp::from_micros(now + wait - 1);
                prop_assert!(apply(&mut early, &s, hits, at).over_limit, "early");
                let mut on_time = b;
                let at = Timestamp::from_micros(now + wait);
                prop_assert!(!apply(&mut on_time, &s, hits, at).over_limit, "late");
            }
        }
    }
}
