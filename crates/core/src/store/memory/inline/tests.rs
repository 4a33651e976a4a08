//! The inline layouts: their size, the store's estimate as keys move between an inline slot and
//! their full state, and exact decisions on limits whose keys often do not fit inline.

use std::mem::size_of;
use std::time::Duration;

use super::*;
use crate::algorithm::{Algorithm, LimitSpec, Window};
use crate::store::memory::MemoryStore;
use crate::store::memory::slots::{FixedSlot, cost, wide_cost};
use crate::store::memory::tests::store_and_model;
use crate::store::{Op, Store};

#[test]
fn a_log_of_one_entry_and_a_limit_of_one_holder_take_a_fixed_windows_slot() {
    assert_eq!(size_of::<LogSlot>(), size_of::<FixedSlot>());
    assert_eq!(size_of::<HeldSlot>(), size_of::<FixedSlot>());
    for algorithm in [Algorithm::SlidingLog, Algorithm::Concurrency] {
        assert_eq!(
            cost(algorithm),
            cost(Algorithm::FixedWindow),
            "{algorithm:?}"
        );
        assert!(wide_cost(algorithm) > 2 * cost(algorithm), "{algorithm:?}");
    }
}

fn op(key: &str, spec: LimitSpec, holder: &str, hits: u64, refund: bool, report: bool) -> Op {
    Op {
        key: key.to_string(),
        spec,
        hits,
        refund,
        max_wait: Duration::ZERO,
        lease: None,
        holder: holder.to_string(),
        only_admitted: false,
        report,
    }
}

fn spec(algorithm: Algorithm, limit: u64, secs: u64) -> LimitSpec {
    LimitSpec {
        algorithm,
        limit,
        window: Window::from_secs(secs).unwrap(),
        burst: 0,
    }
}

#[test]
fn a_second_entry_moves_a_key_to_its_full_state_and_the_estimate_follows() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let s = MemoryStore::new(10);
    let t0 = Timestamp::from_secs(1_800_000_000);
    let at = |secs: u64| t0.saturating_add(Duration::from_secs(secs));
    for (algorithm, second_holder) in [(Algorithm::SlidingLog, "a"), (Algorithm::Concurrency, "b")]
    {
        let spec = spec(algorithm, 5, 60);
        let run = |holder: &str, refund: bool, now: Timestamp| {
            let o = op("k", spec, holder, 1, refund, false);
            rt.block_on(s.apply(&[o], now)).unwrap()[0]
                .decision()
                .copied()
                .unwrap()
        };
        run("a", false, at(0));
        assert_eq!(
            (s.wide_keys(), s.bytes()),
            (0, cost(algorithm)),
            "{algorithm:?}"
        );
        let d = run(second_holder, false, at(1));
        assert_eq!(d.after, 2, "{algorithm:?}");
        assert_eq!(
            (s.wide_keys(), s.bytes()),
            (1, wide_cost(algorithm)),
            "{algorithm:?}"
        );
        // One entry again (both logged requests left the window before a third; the first holder
        // released): back inline, and so is the estimate.
        let d = if algorithm == Algorithm::SlidingLog {
            run("a", false, at(61))
        } else {
            run("a", true, at(2))
        };
        assert!(!d.over_limit, "{algorithm:?}");
        assert_eq!(
            (s.wide_keys(), s.bytes()),
            (0, cost(algorithm)),
            "{algorithm:?}"
        );
        assert_eq!(s.sweep_at(at(1000)), 1);
        assert_eq!((s.len(), s.bytes()), (0, 0), "{algorithm:?}");
    }
}

/// Limits whose keys often do not fit inline, beside ones that do: sliding logs over two hours
/// (an entry lies more than 2^32 µs before its expiry) and with reports in the billions (running
/// totals past 2^32), one over a second, and concurrency limits of one and of two slots.
fn spec_of(i: usize) -> LimitSpec {
    let (algorithm, limit, secs) = [
        (Algorithm::SlidingLog, 3, 7_200),
        (Algorithm::SlidingLog, 1 << 40, 2),
        (Algorithm::SlidingLog, 2, 1),
        (Algorithm::Concurrency, 1, 2),
        (Algorithm::Concurrency, 2, 1),
    ][i % 5];
    spec(algorithm, limit, secs)
}

proptest::proptest! {
    /// As `decides_as_the_algorithms_on_their_full_state`, on keys that move between an inline
    /// slot and their full state; with reports of billions of hits, and three holders.
    #[test]
    fn keys_kept_inline_or_in_full_decide_as_the_algorithms(
        events in proptest::collection::vec(
            (0usize..10, 0u64..4, proptest::bool::weighted(0.2), 0u64..1_500_000,
             proptest::bool::weighted(0.1), 0usize..3, proptest::bool::weighted(0.1)),
            1..300,
        ),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let s = MemoryStore::new(100);
        let mut model: std::collections::HashMap<usize, Option<AlgorithmState>> = Default::default();
        let mut t = 1_700_000_000_000_000u64;
        for (i, hits, refund, dt, sweep, holder, report) in events {
            // Now and then an hour passes.
            t += if dt % 89 == 0 { 3_600_000_000 } else { dt };
            let now = Timestamp::from_micros(t);
            if sweep {
                s.sweep_at(now);
            }
            let report = report && !refund;
            let hits = if report { hits << 31 } else { hits };
            let o = op(&format!("key{i}"), spec_of(i), &format!("h{holder}"), hits, refund, report);
            let (got, want) = store_and_model(&rt, &s, &mut model, i, &o, now);
            proptest::prop_assert_eq!(got, want, "key{} at {}", i, t);
        }
        // The estimate is that of the keys where they are held, and goes back to nothing.
        s.sweep_at(Timestamp::from_micros(t + 86_400_000_000));
        proptest::prop_assert_eq!((s.len(), s.bytes()), (0, 0));
    }
}
