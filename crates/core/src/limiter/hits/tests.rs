//! The hits rule, per algorithm, through a real limiter on the memory store with a manual clock:
//! huge hits are denied with a `Retry-After` the limit can refill, leave a victim's key usable
//! within its window, and refunds of any size still empty a key exactly; at the algorithm level,
//! clamping never changes a decision.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::algorithm::{self, Window};
use crate::clock::{ManualClock, Timestamp};
use crate::config::RateLimitConfig;
use crate::limiter::headers::RateLimitHeaders;
use crate::limiter::{Code, LimiterOptions, RateLimiter};
use crate::store::memory::MemoryStore;
use crate::test_support;

/// Ten per minute for every algorithm (buckets: a burst of ten).
const CFG: &str = r#"
domain: d
descriptors:
  - {key: fixed_window, rate_limit: {unit: minute, requests_per_unit: 10}}
  - {key: sliding_window, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window}}
  - {key: sliding_log, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_log}}
  - {key: token_bucket, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: token_bucket}}
  - {key: leaky_bucket, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: leaky_bucket}}
"#;

const ALGORITHMS: [&str; 5] = [
    "fixed_window",
    "sliding_window",
    "sliding_log",
    "token_bucket",
    "leaky_bucket",
];

struct Fixture {
    clock: Arc<ManualClock>,
    limiter: RateLimiter,
    config: RateLimitConfig,
}

fn fixture() -> Fixture {
    // 30 s into a minute: a fixed window has 30 s left.
    let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_230)));
    let store = Arc::new(MemoryStore::new(1_000));
    let limiter = RateLimiter::new(store, clock.clone(), LimiterOptions::default());
    let config = test_support::config(CFG);
    Fixture {
        clock,
        limiter,
        config,
    }
}

impl Fixture {
    /// `hits` on the key of `algorithm` (a refund when `refund`): the code and `Retry-After`.
    async fn send(&self, algorithm: &str, hits: u64, refund: bool) -> (Code, Option<u64>) {
        let mut d = Descriptor::of(&[(algorithm, "victim")]);
        d.hits_addend = Some(hits);
        d.refund = refund;
        let r = self
            .limiter
            .should_rate_limit(Some(&self.config), &Request::new("d", vec![d]))
            .await
            .unwrap();
        (
            r.overall_code,
            RateLimitHeaders::from_response(&r).retry_after,
        )
    }
}

#[tokio::test]
async fn huge_hits_are_denied_with_a_retry_after_the_limit_can_refill() {
    for algorithm in ALGORITHMS {
        for hits in [1 << 63, u64::MAX, 11] {
            let f = fixture();
            let (code, retry) = f.send(algorithm, hits, false).await;
            assert_eq!(code, Code::OverLimit, "{algorithm} {hits}");
            let retry = retry.unwrap();
            // Windows: the rest of the window (30 s). Buckets: the time to refill the burst plus
            // one hit, 11 × 6 s.
            assert!((1..=66).contains(&retry), "{algorithm} {hits}: {retry}");
        }
    }
}

#[tokio::test]
async fn a_victim_key_recovers_within_its_window() {
    for algorithm in ALGORITHMS {
        let f = fixture();
        for _ in 0..3 {
            assert_eq!(f.send(algorithm, u64::MAX, false).await.0, Code::OverLimit);
        }
        let (code, _) = f.send(algorithm, 1, false).await;
        if algorithm == "fixed_window" {
            // Go's fixed window counts denied hits: the key is over until its window ends (30 s).
            assert_eq!(code, Code::OverLimit);
            f.clock.advance(Duration::from_secs(30));
            assert_eq!(f.send(algorithm, 10, false).await.0, Code::Ok);
        } else {
            // The others record admitted hits only: the whole limit is still there.
            assert_eq!(code, Code::Ok, "{algorithm}");
            assert_eq!(f.send(algorithm, 9, false).await.0, Code::Ok, "{algorithm}");
        }
    }
}

#[tokio::test]
async fn a_huge_refund_empties_the_key_exactly() {
    for algorithm in ALGORITHMS {
        let f = fixture();
        assert_eq!(f.send(algorithm, 10, false).await.0, Code::Ok);
        assert_eq!(f.send(algorithm, 1, false).await.0, Code::OverLimit);
        assert_eq!(f.send(algorithm, u64::MAX, true).await.0, Code::Ok);
        // Given back in full (and never past empty): ten fit again, the eleventh does not.
        assert_eq!(
            f.send(algorithm, 10, false).await.0,
            Code::Ok,
            "{algorithm}"
        );
        assert_eq!(
            f.send(algorithm, 1, false).await.0,
            Code::OverLimit,
            "{algorithm}"
        );
    }
}

#[test]
fn clamp_is_capacity_plus_one_and_max_refund_for_refunds() {
    let spec = |algorithm, limit, burst| LimitSpec {
        algorithm,
        limit,
        window: Window::SECOND,
        burst,
    };
    let fw = spec(Algorithm::FixedWindow, 10, 10);
    assert_eq!(clamp(&fw, u64::MAX, false), 11);
    assert_eq!(clamp(&fw, 7, false), 7);
    assert_eq!(clamp(&fw, 0, false), 0);
    assert_eq!(clamp(&fw, u64::MAX, true), MAX_REFUND);
    let tb = spec(Algorithm::TokenBucket, 10, 40);
    assert_eq!(clamp(&tb, 1 << 63, false), 41);
    let lb = spec(Algorithm::LeakyBucket, 10, 3);
    assert_eq!(clamp(&lb, 1 << 63, false), 4);
    assert_eq!(clamp(&spec(Algorithm::SlidingLog, 0, 0), 5, false), 1);
}

proptest! {
    /// On any state reached by ordinary traffic, a huge request decides exactly as its clamped
    /// hits do (denied), and so does every request after it: the clamp changes no decision.
    #[test]
    fn clamped_hits_decide_as_the_raw_hits(
        alg in 0usize..5,
        limit in 0u64..20,
        burst in 1u64..20,
        huge in any::<u64>(),
        events in proptest::collection::vec((0u64..30_000, 0u64..5), 0..30),
    ) {
        let algorithm = [
            Algorithm::FixedWindow,
            Algorithm::SlidingWindow,
            Algorithm::SlidingLog,
            Algorithm::TokenBucket,
            Algorithm::LeakyBucket,
        ][alg];
        let spec = LimitSpec { algorithm, limit, window: Window::from_secs(60).unwrap(), burst };
        let mut state = None;
        let mut t = 1_000_000_000u64;
        for (dt, hits) in events {
            t += dt;
            algorithm::apply(&mut state, &spec, hits, Timestamp::from_micros(t * 1_000));
        }
        let now = Timestamp::from_micros(t * 1_000);
        let (mut raw, mut clamped) = (state.clone(), state);
        let a = algorithm::apply(&mut raw, &spec, huge, now);
        let b = algorithm::apply(&mut clamped, &spec, clamp(&spec, huge, false), now);
        prop_assert_eq!(a.over_limit, b.over_limit);
        for step in 1..4u64 {
            let at = Timestamp::from_micros((t + step * 7_000) * 1_000);
            let a = algorithm::apply(&mut raw, &spec, 1, at);
            let b = algorithm::apply(&mut clamped, &spec, 1, at);
            prop_assert_eq!(a.over_limit, b.over_limit);
        }
    }
}

#[test]
fn an_estimate_is_charged_by_the_check_and_trued_up_by_the_report() {
    use super::{Charge, true_up};
    // No estimate: every call as asked.
    assert_eq!(true_up(None, 0, None, false), Charge::Asked);
    assert_eq!(true_up(None, 5, Some(5), false), Charge::Asked);
    // The check charges the estimate; a report charges the difference, either way.
    assert_eq!(true_up(Some(30), 0, None, false), Charge::Estimate(30));
    assert_eq!(true_up(Some(30), 55, Some(55), false), Charge::TopUp(25));
    assert_eq!(true_up(Some(30), 30, Some(30), false), Charge::TopUp(0));
    assert_eq!(true_up(Some(30), 10, Some(10), false), Charge::GiveBack(20));
    assert_eq!(true_up(Some(30), 0, Some(0), false), Charge::GiveBack(30));
    // A refund stays a refund.
    assert_eq!(true_up(Some(30), 7, None, true), Charge::Asked);
}
