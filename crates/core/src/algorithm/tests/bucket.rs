//! Properties both bucket algorithms share: over any span of time they admit at most
//! `burst + span / T` hits (`T = window / limit`), and the leaky bucket (GCRA) polices exactly as
//! the token bucket does, only measured from the other end (a TAT instead of a fill level).

use proptest::prelude::*;

use crate::algorithm::token_bucket::{MAX_UNITS, Params};
use crate::algorithm::{Algorithm, AlgorithmState, LimitSpec, apply};
use crate::clock::Timestamp;

/// The limit of a bucket test.
pub(in crate::algorithm) fn bucket_spec(
    algorithm: Algorithm,
    limit: u64,
    window_secs: u64,
    burst: u64,
) -> LimitSpec {
    LimitSpec {
        algorithm,
        limit,
        window: crate::algorithm::Window::from_secs(window_secs).unwrap(),
        burst,
    }
}

/// `ms` milliseconds after a fixed instant in 2001 (far from 0, where no state is ever fresh).
pub(in crate::algorithm) fn at_ms(ms: u64) -> Timestamp {
    Timestamp::from_micros(1_000_000_000_000 + ms * 1000)
}

#[test]
fn huge_buckets_use_coarser_quanta_and_stay_exact() {
    for algorithm in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        let s = bucket_spec(algorithm, 1_000_000, 365 * 86_400, 100_000_000);
        let p = Params::of(&s);
        assert_eq!(p.quantum_micros, 1_000_000);
        assert!(p.capacity <= MAX_UNITS);
        // Shaping never lets a backlog pass MAX_UNITS (2^52): Lua's sums stay exact.
        assert!(p.capacity + p.horizon() <= MAX_UNITS);
        assert!(p.budget(crate::algorithm::token_bucket::MAX_WAIT, at_ms(0)) <= p.horizon());
        let mut b = None;
        assert_eq!(apply(&mut b, &s, 99_999_999, at_ms(0)).remaining, 1);
        assert!(apply(&mut b, &s, 2, at_ms(0)).over_limit, "{algorithm:?}");
    }
}

/// The admitted `(time µs, hits)` of `events` (gaps in µs, hits) on a fresh bucket of `spec`.
fn admitted(spec: &LimitSpec, events: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut state: Option<AlgorithmState> = None;
    let mut now = 5_000_000u64;
    let mut out = Vec::new();
    for &(dt, hits) in events {
        now += dt;
        if !apply(&mut state, spec, hits, Timestamp::from_micros(now)).over_limit {
            out.push((now, hits));
        }
    }
    out
}

proptest! {
    /// Over any span of time `d`, admitted hits never exceed `burst + d / T`.
    #[test]
    fn buckets_never_admit_more_than_burst_plus_span_over_interval(
        leaky in any::<bool>(),
        limit in 1u64..10,
        burst in 1u64..10,
        events in proptest::collection::vec((0u64..400_000, 0u64..4), 1..150),
    ) {
        let algorithm = if leaky { Algorithm::LeakyBucket } else { Algorithm::TokenBucket };
        let spec = bucket_spec(algorithm, limit, 1, burst);
        let admitted = admitted(&spec, &events);
        for (i, &(start, _)) in admitted.iter().enumerate() {
            let mut sum = 0u128;
            for &(at, h) in &admitted[i..] {
                sum += u128::from(h);
                // sum ≤ burst + (at − start) / T, with T = 1 s / limit.
                let bound = u128::from(burst) * 1_000_000 + u128::from(at - start) * u128::from(limit);
                prop_assert!(sum * 1_000_000 <= bound);
            }
        }
    }

    /// The same requests get the same answers from both buckets, `wait` included (the time until
    /// the hits conform).
    #[test]
    fn the_leaky_bucket_polices_like_the_token_bucket(
        (limit, window_secs, burst) in (0u64..20, 1u64..100, 1u64..20),
        events in proptest::collection::vec((0u64..3_000_000, 0u64..25), 1..100),
    ) {
        let spec = |algorithm| bucket_spec(algorithm, limit, window_secs, burst);
        let (tb, lb) = (spec(Algorithm::TokenBucket), spec(Algorithm::LeakyBucket));
        let (mut t, mut l) = (None, None);
        let mut now = 1_000_000_000_000u64;
        for (dt, hits) in events {
            now += dt;
            let at = Timestamp::from_micros(now);
            let a = apply(&mut t, &tb, hits, at);
            let b = apply(&mut l, &lb, hits, at);
            prop_assert_eq!(a, b);
            prop_assert_eq!(b.wait.is_zero(), !b.over_limit);
        }
    }
}
