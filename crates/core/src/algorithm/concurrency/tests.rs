//! Concurrency against hand-worked cases and a naive model: a list of (holder, lease end) pairs
//! scanned in full on every call.

use super::*;
use crate::algorithm::{Algorithm, Window};
use proptest::prelude::*;

const T0: u64 = 1_000_000_000_000;

fn spec(slots: u64, timeout_secs: u64) -> LimitSpec {
    LimitSpec {
        algorithm: Algorithm::Concurrency,
        limit: slots,
        window: Window::from_secs(timeout_secs).unwrap(),
        burst: 0,
    }
}

fn at_ms(ms: u64) -> Timestamp {
    Timestamp::from_micros(T0 + ms * 1000)
}

#[test]
fn a_full_limit_refuses_and_a_release_admits_the_next() {
    let s = spec(2, 60);
    let mut st = ConcurrencyState::default();
    let d = run(&mut st, &s, "a", 1, false, at_ms(0));
    assert_eq!(
        (d.over_limit, d.before, d.after, d.remaining),
        (false, 0, 1, 1)
    );
    run(&mut st, &s, "b", 1, false, at_ms(1));
    let d = run(&mut st, &s, "c", 1, false, at_ms(2));
    assert!(d.over_limit, "the third holder finds both slots held");
    assert_eq!((d.before, d.remaining), (2, 0));
    assert_eq!(
        d.reset_after, RETRY_AFTER,
        "the next release is unpredictable: retry in a second, not at a's lease end"
    );
    let d = run(&mut st, &s, "a", 1, true, at_ms(3));
    assert_eq!((d.over_limit, d.after, d.remaining), (false, 1, 1));
    let d = run(&mut st, &s, "c", 1, false, at_ms(4));
    assert!(!d.over_limit, "a's slot went to c");
}

#[test]
fn unknown_refused_and_duplicate_releases_free_nothing() {
    let s = spec(1, 60);
    let mut st = ConcurrencyState::default();
    run(&mut st, &s, "a", 1, false, at_ms(0));
    assert!(run(&mut st, &s, "b", 1, false, at_ms(1)).over_limit);
    for who in ["b", "nobody"] {
        let d = run(&mut st, &s, who, 1, true, at_ms(2));
        assert_eq!((d.over_limit, d.after), (false, 1), "{who} held nothing");
    }
    assert!(run(&mut st, &s, "c", 1, false, at_ms(3)).over_limit);
    run(&mut st, &s, "a", 1, true, at_ms(4));
    run(&mut st, &s, "a", 1, true, at_ms(5));
    run(&mut st, &s, "c", 1, false, at_ms(6));
    assert!(
        run(&mut st, &s, "d", 1, false, at_ms(7)).over_limit,
        "a's second release did not free c's slot"
    );
}

#[test]
fn a_lease_ends_exactly_at_the_timeout_and_a_renewal_moves_it() {
    let s = spec(1, 10);
    let mut st = ConcurrencyState::default();
    run(&mut st, &s, "a", 1, false, at_ms(0));
    let d = run(&mut st, &s, "b", 1, false, at_ms(9_999));
    assert!(d.over_limit);
    assert_eq!(
        d.reset_after,
        Duration::from_millis(1),
        "a's lease ends sooner than a second"
    );
    assert!(!run(&mut st, &s, "b", 1, false, at_ms(10_000)).over_limit);
    // b renews at t=15: its lease now ends at t=25, not t=20.
    let d = run(&mut st, &s, "b", 1, false, at_ms(15_000));
    assert_eq!(
        (d.over_limit, d.after),
        (false, 1),
        "a renewal takes nothing more"
    );
    assert!(run(&mut st, &s, "c", 1, false, at_ms(24_999)).over_limit);
    assert!(!run(&mut st, &s, "c", 1, false, at_ms(25_000)).over_limit);
}

#[test]
fn a_check_records_nothing_and_expiry_follows_the_last_lease() {
    let s = spec(1, 10);
    let mut st = ConcurrencyState::default();
    let d = run(&mut st, &s, "a", 0, false, at_ms(0));
    assert_eq!((d.over_limit, d.after, d.remaining), (false, 0, 1));
    assert!(st.holders.is_empty());
    let d = run(&mut st, &s, "a", 1, false, at_ms(0));
    assert_eq!(d.expires_at, at_ms(10_000));
    assert!(run(&mut st, &s, "b", 0, false, at_ms(1)).over_limit);
}

/// The model: every held (holder, end) pair, scanned in full.
#[derive(Default)]
struct Model(Vec<(String, u64)>);

impl Model {
    fn call(
        &mut self,
        limit: u64,
        timeout: u64,
        holder: &str,
        hits: u64,
        release: bool,
        now: u64,
    ) -> bool {
        self.0.retain(|(_, end)| *end > now);
        let pos = self.0.iter().position(|(h, _)| h == holder);
        if release {
            if let Some(i) = pos {
                self.0.remove(i);
            }
            return true;
        }
        match pos {
            Some(i) => {
                if hits > 0 {
                    self.0[i].1 = now + timeout;
                }
                true
            }
            None if (self.0.len() as u64) < limit => {
                if hits > 0 {
                    self.0.push((holder.to_owned(), now + timeout));
                }
                true
            }
            None => false,
        }
    }
}

proptest! {
    #[test]
    fn matches_the_naive_model(
        slots in 0u64..6,
        timeout in 1u64..20,
        calls in prop::collection::vec((0u8..8, 0u64..3, any::<bool>(), 0u64..4_000), 1..200),
    ) {
        let s = spec(slots, timeout);
        let mut st = ConcurrencyState::default();
        let mut model = Model::default();
        let mut now = T0;
        for (who, hits, release, step_ms) in calls {
            now += step_ms * 1000;
            let holder = format!("h{who}");
            let hits = hits.min(1);
            let d = run(&mut st, &s, &holder, hits, release, Timestamp::from_micros(now));
            let admitted = model.call(slots, timeout * 1_000_000, &holder, hits, release, now);
            prop_assert_eq!(!d.over_limit, admitted);
            prop_assert_eq!(st.holders.len(), model.0.len());
            prop_assert!(st.holders.len() as u64 <= slots, "never more holders than slots");
            prop_assert_eq!(d.remaining, if d.over_limit { 0 } else { slots - model.0.len() as u64 });
        }
    }
}
