//! The compact layouts: their size, and that keys whose state does not fit one (kept as full
//! states) decide exactly as the algorithms on their full state, moving between the two maps.

use std::mem::size_of;
use std::time::Duration;

use super::*;
use crate::algorithm::{Algorithm, LimitSpec, Window};
use crate::store::memory::MemoryStore;
use crate::store::memory::slots::{FixedSlot, cost};
use crate::store::memory::tests::store_and_model;
use crate::store::{Op, Store};

#[test]
fn every_counter_key_takes_a_fixed_windows_slot() {
    for size in [
        size_of::<TokenSlot>(),
        size_of::<LeakySlot>(),
        size_of::<SlidingSlot>(),
    ] {
        assert_eq!(size, size_of::<FixedSlot>());
    }
    for algorithm in [
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::SlidingWindow,
    ] {
        assert_eq!(
            cost(algorithm),
            cost(Algorithm::FixedWindow),
            "{algorithm:?}"
        );
    }
}

fn op(i: usize, hits: u64, refund: bool, report: bool, shaping: bool) -> Op {
    Op {
        key: format!("key{i}"),
        spec: spec_of(i),
        hits,
        refund,
        max_wait: Duration::from_millis(if shaping { 900 } else { 0 }),
        lease: None,
        holder: String::new(),
        only_admitted: false,
        report,
    }
}

/// Limits whose states often do not fit a compact slot, beside ones that do: a token bucket
/// refilling over a day (its last update lies more than 2^32 µs before its expiry while it has
/// debt), one over two seconds, a leaky bucket over a day, and sliding windows whose counts pass
/// 2^32 (a limit of 2^40, hits in the billions).
fn spec_of(i: usize) -> LimitSpec {
    let (algorithm, limit, secs, burst) = [
        (Algorithm::TokenBucket, 3, 86_400, 4),
        (Algorithm::TokenBucket, 3, 2, 4),
        (Algorithm::LeakyBucket, 3, 86_400, 4),
        (Algorithm::SlidingWindow, 1 << 40, 2, 0),
        (Algorithm::SlidingWindow, 3, 1, 0),
    ][i % 5];
    LimitSpec {
        algorithm,
        limit,
        window: Window::from_secs(secs).unwrap(),
        burst,
    }
}

#[test]
fn a_day_long_bucket_with_debt_is_held_in_full_and_comes_back_once_refilled() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let s = MemoryStore::new(10);
    let t0 = Timestamp::from_secs(1_800_000_000);
    let hit = |at: Timestamp| rt.block_on(s.apply(&[op(0, 1, false, false, false)], at));
    hit(t0).unwrap();
    assert_eq!(s.wide_keys(), 1, "a day of refill does not fit 2^32 µs");
    let d = hit(t0.saturating_add(Duration::from_secs(1))).unwrap();
    assert_eq!(d[0].decision().unwrap().remaining, 2);
    // Two days later the bucket is full: no debt, so the time of its last update no longer
    // matters and the key is back in a compact slot.
    let later = t0.saturating_add(Duration::from_secs(2 * 86_400));
    rt.block_on(s.apply(&[op(0, 0, false, false, false)], later))
        .unwrap();
    assert_eq!((s.wide_keys(), s.len()), (0, 1));
}

proptest::proptest! {
    /// As `decides_as_the_algorithms_on_their_full_state`, on limits whose keys move between the
    /// compact and the full map; with reports of billions of hits.
    #[test]
    fn keys_kept_in_full_decide_as_the_algorithms(
        events in proptest::collection::vec(
            (0usize..10, 0u64..4, proptest::bool::weighted(0.15), 0u64..3_000_000,
             proptest::bool::weighted(0.1), proptest::bool::ANY, proptest::bool::weighted(0.1)),
            1..300,
        ),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let s = MemoryStore::new(100);
        let mut model: std::collections::HashMap<usize, Option<AlgorithmState>> = Default::default();
        let mut t = 1_700_000_000_000_000u64;
        for (i, hits, refund, dt, sweep, shaping, report) in events {
            // Now and then a day passes.
            t += if dt % 97 == 0 { 86_400_000_000 } else { dt };
            let now = Timestamp::from_micros(t);
            if sweep {
                s.sweep_at(now);
            }
            let report = report && !refund;
            let hits = if report { hits << 31 } else { hits };
            let o = op(i, hits, refund, report, shaping);
            let (got, want) = store_and_model(&rt, &s, &mut model, i, &o, now);
            proptest::prop_assert_eq!(got, want, "key{} at {}", i, t);
        }
    }
}
