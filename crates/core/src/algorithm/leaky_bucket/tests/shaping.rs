//! Leaky bucket shaping ([`shape`]): evenly spaced slots within a wait budget, hand-worked and
//! against a model that keeps the TAT as an exact fraction of a microsecond (as in `tests/mod.rs`).

use super::{MS, as_model_answer, fresh, model_answer};
use crate::algorithm::leaky_bucket::*;
use crate::algorithm::tests::bucket::at_ms;
use proptest::prelude::*;

#[test]
fn shaping_reserves_evenly_spaced_slots_within_the_wait_budget() {
    // 10 per second, burst 1: T = 100 ms. Five callers at the same instant, each accepting 1 s.
    let (s, mut b) = fresh(10, 1, 1);
    let second = Duration::from_secs(1);
    let waits: Vec<Duration> = (0..5)
        .map(|_| {
            let d = shape(&mut b, &s, 1, second, at_ms(0));
            assert!(!d.over_limit);
            d.wait
        })
        .collect();
    assert_eq!(waits, [0, 100, 200, 300, 400].map(|ms| ms * MS));
    // The next slot is 500 ms away: over a 450 ms budget, and over for a policing caller.
    let d = shape(&mut b, &s, 1, 450 * MS, at_ms(0));
    assert_eq!((d.over_limit, d.wait), (true, 500 * MS));
    let kept = b;
    let d = apply(&mut b, &s, 1, at_ms(0));
    assert_eq!(
        (d.over_limit, d.wait),
        (true, 500 * MS),
        "a policing caller sees the slots too"
    );
    assert_eq!(b, kept, "denied: nothing reserved");
    // Exactly the budget fits (TAT 600 ms); at 250 ms the next slot is 350 ms away.
    assert_eq!(shape(&mut b, &s, 1, 500 * MS, at_ms(0)).wait, 500 * MS);
    let d = shape(&mut b, &s, 1, second, at_ms(250));
    assert_eq!((d.over_limit, d.wait, d.remaining), (false, 350 * MS, 0));
}

#[test]
fn shaping_a_cost_waits_for_all_its_intervals() {
    // 10 per second, burst 2: two hits now; two more conform 200 ms later.
    let (s, mut b) = fresh(10, 1, 2);
    assert!(!apply(&mut b, &s, 2, at_ms(0)).over_limit);
    let d = shape(&mut b, &s, 2, Duration::from_secs(1), at_ms(0));
    assert_eq!((d.over_limit, d.wait), (false, 200 * MS));
    // More hits than the burst never conform, whatever the budget.
    let d = shape(&mut b, &s, 3, Duration::from_secs(60), at_ms(0));
    assert!(d.over_limit);
}

/// The bucket the shaping model runs: its rate, the TAT units of one hit, and its burst.
#[derive(Clone, Copy)]
struct ModelBucket {
    limit: u64,
    w: u128,
    burst: u64,
}

/// The shaping model: the TAT in 1/limit µs, with a wait budget of `max_wait` µs (`max_wait × limit` units;
/// the backlog is read exactly, a minute past the capacity at most); returns (admitted, remaining,
/// wait µs, reset s, expiry µs).
fn shaped_model(
    tat: &mut u128,
    bucket: ModelBucket,
    hits: u64,
    max_wait: u64,
    now: u64,
) -> [u128; 5] {
    let ModelBucket { limit, w, burst } = bucket;
    let (l, n) = (u128::from(limit), u128::from(now) * u128::from(limit));
    let cap = u128::from(burst) * w;
    let budget = u128::from(max_wait) * l;
    let backlog = tat.saturating_sub(n);
    assert!(
        backlog <= cap + 60_000_001 * l,
        "time only moves forward here"
    );
    let queue = backlog + u128::from(hits) * w;
    let ok = hits <= burst && queue <= cap + budget;
    let after = if ok { queue } else { backlog };
    if ok && hits > 0 {
        *tat = n + after;
    }
    let wait = queue.saturating_sub(cap).div_ceil(l);
    let remaining = if ok { cap.saturating_sub(after) / w } else { 0 };
    model_answer(ok, remaining, wait, after, (cap, w, l), now)
}

proptest! {
    /// Shaping against the model, with callers arriving together (gaps of 0), budgets from none
    /// to a minute, and policing requests in between: same decisions, an admitted request's wait
    /// never exceeds its budget, and a denied one's always does.
    #[test]
    fn shaping_matches_the_model(
        (limit, window, burst) in (1u64..20, 1u64..120, 1u64..30),
        events in proptest::collection::vec(
            (prop_oneof![Just(0u64), 0u64..3_000_000], 0usize..4, 0u64..6),
            1..150,
        ),
    ) {
        let (s, mut b) = fresh(limit, window, burst);
        let w = u128::from(window) * 1_000_000;
        let budgets = [0u64, 40_000, 2_000_000, 60_000_000];
        let mut tat = 0u128;
        let mut now = 1_000_000_000_000u64;
        for (dt, budget, hits) in events {
            now += dt;
            let max_wait = budgets[budget];
            let want = shaped_model(&mut tat, ModelBucket { limit, w, burst }, hits, max_wait, now);
            let d = shape(&mut b, &s, hits, Duration::from_micros(max_wait), Timestamp::from_micros(now));
            prop_assert_eq!(as_model_answer(&d), want);
            if hits <= burst {
                prop_assert_eq!(d.over_limit, d.wait > Duration::from_micros(max_wait));
            }
        }
    }
}
