//! Leaky bucket (GCRA) against hand-worked cases and a naive model that keeps the TAT as an exact
//! fraction of a microsecond (in 1/limit µs, so `T = window / limit` is a whole number); shaping
//! has its own file.

mod shaping;

use super::*;
use crate::algorithm::Algorithm;
use crate::algorithm::tests::bucket::{at_ms, bucket_spec};
use proptest::prelude::*;

/// A fresh bucket of `limit` per `window_secs` holding `burst`.
fn fresh(limit: u64, window_secs: u64, burst: u64) -> (LimitSpec, LeakyBucketState) {
    let spec = bucket_spec(Algorithm::LeakyBucket, limit, window_secs, burst);
    (spec, LeakyBucketState::default())
}

const MS: Duration = Duration::from_millis(1);

#[test]
fn a_full_bucket_admits_burst_then_one_hit_per_interval() {
    // 10 per second: T = 100 ms; the queue holds 20 T.
    let (s, mut b) = fresh(10, 1, 20);
    let d = apply(&mut b, &s, 20, at_ms(0));
    assert!(!d.over_limit);
    assert_eq!((d.remaining, d.wait), (0, Duration::ZERO));
    assert_eq!(d.reset_after, Duration::from_secs(1), "100 ms, rounded up");
    assert_eq!(d.expires_at, at_ms(2000), "the TAT: 20 T from now");
    let d = apply(&mut b, &s, 1, at_ms(50));
    assert!(d.over_limit);
    assert_eq!((d.remaining, d.before, d.after), (0, 10, 11));
    assert_eq!(d.wait, 50 * MS, "the hit conforms at 100 ms");
    let d = apply(&mut b, &s, 1, at_ms(100));
    assert!(!d.over_limit);
    let d = apply(&mut b, &s, 3, at_ms(100));
    assert!(d.over_limit);
    assert_eq!(d.wait, 300 * MS, "three more T");
    let d = apply(&mut b, &s, 0, at_ms(2100));
    assert_eq!(
        (d.over_limit, d.remaining, d.reset_after),
        (false, 20, Duration::ZERO)
    );
}

#[test]
fn denied_requests_and_checks_leave_the_tat_alone() {
    let (s, mut b) = fresh(5, 60, 5);
    assert!(!apply(&mut b, &s, 2, at_ms(0)).over_limit);
    let kept = b;
    assert!(apply(&mut b, &s, 4, at_ms(1)).over_limit);
    assert!(!apply(&mut b, &s, 0, at_ms(2)).over_limit);
    assert_eq!(b, kept);
    let d = apply(&mut b, &s, 1, at_ms(3));
    assert_eq!((d.over_limit, d.remaining), (false, 2));
}

#[test]
fn more_hits_than_the_burst_never_conform_and_wait_for_the_queue_then_the_excess() {
    // 10 per second, burst 5: T = 100 ms.
    let (s, mut b) = fresh(10, 1, 5);
    let d = apply(&mut b, &s, 8, at_ms(0));
    assert!(d.over_limit);
    assert_eq!(d.wait, 300 * MS, "one by one, the last of 8 goes at 3 T");
    assert!(!apply(&mut b, &s, 5, at_ms(0)).over_limit);
    assert_eq!(apply(&mut b, &s, 8, at_ms(0)).wait, 800 * MS);
    let d = apply(&mut b, &s, u64::MAX, at_ms(0));
    assert!(d.over_limit && d.wait > Duration::from_secs(1 << 40));
}

#[test]
fn zero_limit_blocks_everything_but_checks() {
    let (s, mut b) = fresh(0, 60, 1);
    let d = apply(&mut b, &s, 1, at_ms(0));
    assert!(d.over_limit);
    assert_eq!(
        (d.wait, d.reset_after),
        (Duration::from_secs(60), Duration::from_secs(60))
    );
    assert!(!apply(&mut b, &s, 0, at_ms(0)).over_limit);
    assert_eq!(b, LeakyBucketState::default());
}

#[test]
fn a_tat_far_ahead_reads_as_a_full_queue() {
    // A clock stepping back 10 minutes: the TAT is then more than the capacity ahead.
    let (s, mut b) = fresh(10, 1, 20);
    assert!(!apply(&mut b, &s, 20, at_ms(600_000)).over_limit);
    let kept = b;
    let d = apply(&mut b, &s, 1, at_ms(0));
    assert_eq!((d.over_limit, d.wait), (true, 100 * MS));
    assert!(!apply(&mut b, &s, 0, at_ms(0)).over_limit);
    assert_eq!(b, kept);
}

#[test]
fn a_tat_less_than_a_minute_past_the_capacity_is_read_exactly() {
    // A clock 10 s behind: the TAT is 12 s ahead, within the shaping horizon, so a denied
    // caller waits for it exactly rather than for one interval.
    let (s, mut b) = fresh(10, 1, 20);
    assert!(!apply(&mut b, &s, 20, at_ms(10_000)).over_limit);
    let d = apply(&mut b, &s, 1, at_ms(0));
    assert_eq!((d.over_limit, d.wait), (true, 10_100 * MS));
    let d = shape(&mut b, &s, 1, Duration::from_secs(11), at_ms(0));
    assert_eq!((d.over_limit, d.wait), (false, 10_100 * MS));
}

#[test]
fn the_tat_keeps_fractions_of_a_quantum() {
    // 3 per second: T = 333 333.33… µs; three hits put the TAT exactly one second ahead.
    let (s, mut b) = fresh(3, 1, 3);
    for _ in 0..3 {
        assert!(!apply(&mut b, &s, 1, at_ms(0)).over_limit);
    }
    assert_eq!((b.tat - at_ms(0).as_micros(), b.frac), (1_000_000, 0));
    assert!(
        apply(
            &mut b,
            &s,
            1,
            Timestamp::from_micros(at_ms(333).as_micros() + 333)
        )
        .over_limit
    );
    assert!(
        !apply(
            &mut b,
            &s,
            1,
            Timestamp::from_micros(at_ms(333).as_micros() + 334)
        )
        .over_limit
    );
    assert_eq!(b.frac, 1, "a third of a microsecond");
}

/// The model: TAT in 1/limit µs; returns (admitted, remaining, wait µs, reset s, expiry µs).
fn model(tat: &mut u128, limit: u64, w: u128, burst: u64, hits: u64, now: u64) -> [u128; 5] {
    let (l, n) = (u128::from(limit), u128::from(now) * u128::from(limit));
    let cap = u128::from(burst) * w;
    let backlog = tat.saturating_sub(n);
    let queue = backlog + u128::from(hits) * w;
    let ok = queue <= cap;
    if ok {
        *tat = (*tat).max(n) + u128::from(hits) * w;
    }
    let backlog = tat.saturating_sub(n);
    let remaining = if ok { (cap - backlog) / w } else { 0 };
    let wait = if ok { 0 } else { (queue - cap).div_ceil(l) };
    model_answer(ok, remaining, wait, backlog, (cap, w, l), now)
}

/// `d` in the form of a model's answer ([`model_answer`]).
fn as_model_answer(d: &Decision) -> [u128; 5] {
    [
        u128::from(!d.over_limit),
        u128::from(d.remaining),
        d.wait.as_micros(),
        u128::from(d.reset_after.as_secs()),
        u128::from(d.expires_at.as_micros()),
    ]
}

/// A model's answer once it decided `ok`, `remaining` and `wait` (µs) with `backlog` TAT units
/// queued past `now` (µs), in a bucket of `cap` units, `w` units a hit and `l` units a µs:
/// (admitted, remaining, wait µs, reset s, expiry µs). The reset is the time until one more hit
/// conforms, at least a second when denied.
fn model_answer(
    ok: bool,
    remaining: u128,
    wait: u128,
    backlog: u128,
    (cap, w, l): (u128, u128, u128),
    now: u64,
) -> [u128; 5] {
    let one_more = (backlog + w).saturating_sub(cap).div_ceil(l);
    let reset = one_more.div_ceil(1_000_000).max(u128::from(!ok));
    [
        u128::from(ok),
        remaining,
        wait,
        reset,
        u128::from(now) + backlog.div_ceil(l),
    ]
}

proptest! {
    /// Against the model, with times landing exactly on (or 1 µs before) the next conforming
    /// instant, hits of 0 and hits above the burst.
    #[test]
    fn matches_a_naive_tat_model(
        (limit, window, burst) in (1u64..20, 1u64..120, 1u64..30),
        events in proptest::collection::vec((0u64..5_000_000, 0u8..3, 0u64..40), 1..150),
    ) {
        let (s, mut b) = fresh(limit, window, burst);
        let w = u128::from(window) * 1_000_000;
        let mut tat = 0u128;
        let mut now = 1_000_000_000_000u64;
        for (dt, kind, hits) in events {
            let hits = if hits >= 30 { hits % 3 } else { hits };
            let next = tat.saturating_sub(u128::from(now) * u128::from(limit));
            let next = (next + w).saturating_sub(u128::from(burst) * w).div_ceil(u128::from(limit)) as u64;
            now += match kind { 0 => dt, 1 => next, _ => next.saturating_sub(1) };
            let want = model(&mut tat, limit, w, burst, hits, now);
            let d = apply(&mut b, &s, hits, Timestamp::from_micros(now));
            prop_assert_eq!(as_model_answer(&d), want);
        }
    }
}

#[test]
fn a_refund_moves_the_tat_back_but_never_before_now() {
    let (s, mut b) = fresh(1, 10, 3);
    let now = 1_000_000_000_000u64;
    apply(&mut b, &s, 3, Timestamp::from_micros(now));
    assert_eq!(b.tat, now + 30_000_000);
    let d = refund(&mut b, &s, 1, Timestamp::from_micros(now + 1));
    assert_eq!(
        (d.over_limit, d.remaining, b.tat),
        (false, 1, now + 20_000_000)
    );
    refund(&mut b, &s, 9, Timestamp::from_micros(now + 2));
    assert_eq!((b.tat, b.frac), (now + 2, 0));
    // An idle bucket has nothing to give back and is left alone.
    let idle = b;
    refund(&mut b, &s, 1, Timestamp::from_micros(now + 5));
    assert_eq!(b, idle);
}

proptest! {
    /// Refunds mixed into the TAT model: the TAT moves back by `hits × T`, never before now, and
    /// the next decisions agree with the model's.
    #[test]
    fn refunds_match_the_tat_model(
        (limit, window, burst) in (1u64..20, 1u64..120, 1u64..30),
        events in proptest::collection::vec((0u64..5_000_000, 0u64..8, any::<bool>()), 1..150),
    ) {
        let (s, mut b) = fresh(limit, window, burst);
        let w = u128::from(window) * 1_000_000;
        let mut tat = 0u128;
        let mut now = 1_000_000_000_000u64;
        for (dt, hits, give_back) in events {
            now += dt;
            let at = Timestamp::from_micros(now);
            if give_back {
                let n = u128::from(now) * u128::from(limit);
                if tat > n {
                    tat = tat.saturating_sub(u128::from(hits) * w).max(n);
                }
                let d = refund(&mut b, &s, hits, at);
                let backlog = tat.saturating_sub(n);
                prop_assert!(!d.over_limit);
                prop_assert_eq!(u128::from(d.remaining), (u128::from(burst) * w - backlog) / w);
            } else {
                let want = model(&mut tat, limit, w, burst, hits, now);
                let d = apply(&mut b, &s, hits, at);
                prop_assert_eq!((u128::from(!d.over_limit), u128::from(d.remaining)), (want[0], want[1]));
            }
        }
    }
}
