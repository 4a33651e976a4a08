//! The local fallback and the breaker's answers, through the limiter: `failure_mode: local`
//! enforces this instance's share of the limit, `DEFAULT_FAILURE_MODE` applies to limits without
//! their own, and the response says what decided.

use std::sync::Arc;

use async_trait::async_trait;

use crate::clock::ManualClock;
use crate::limiter::fallback::LocalFallback;
use crate::limiter::*;
use crate::resilience::Instances;
use crate::store::{Answer, Op};
use crate::test_support::config;

use super::DownStore;

const CFG: &str = r#"
domain: d
descriptors:
  - {key: plain, rate_limit: {unit: minute, requests_per_unit: 6}}
  - {key: loc, rate_limit: {unit: minute, requests_per_unit: 6, failure_mode: local}}
  - {key: half, rate_limit: {unit: minute, requests_per_unit: 6, failure_mode: local, local_share: 0.5}}
  - {key: deny, rate_limit: {unit: minute, requests_per_unit: 6, failure_mode: deny}}
  - {key: slots, rate_limit: {unit: minute, requests_per_unit: 6, algorithm: concurrency, failure_mode: local, local_share: 0.5}}
"#;

/// A Redis whose breaker is open: every op answered without a call.
#[derive(Debug)]
struct BreakerOpen;

#[async_trait]
impl Store for BreakerOpen {
    async fn apply(&self, ops: &[Op], _: Timestamp) -> Result<Vec<Answer>, StoreError> {
        let open = Answer::Unavailable {
            target: "main",
            breaker_open: true,
        };
        Ok(vec![open; ops.len()])
    }
    // Resets are refused as by a store that is down.
    async fn reset(&self, ops: &[Op], now: Timestamp) -> Result<u64, StoreError> {
        DownStore.reset(ops, now).await
    }

    async fn reset_prefix(
        &self,
        prefix: &str,
        max_keys: usize,
        now: Timestamp,
    ) -> Result<crate::store::PrefixReset, crate::store::ResetError> {
        DownStore.reset_prefix(prefix, max_keys, now).await
    }
}

fn setup(default_failure_mode: FailureMode, live: u64) -> (RateLimiter, RateLimitConfig) {
    let cfg = config(CFG);
    let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_000)));
    let instances = Arc::new(Instances::default());
    instances.seen(live);
    let options = LimiterOptions {
        default_failure_mode,
        dynamic_metadata: true,
        ..LimiterOptions::default()
    };
    let limiter = RateLimiter::new(Arc::new(BreakerOpen), clock, options)
        .with_fallback(Arc::new(LocalFallback::new(instances)));
    (limiter, cfg)
}

fn req(key: &str) -> Request {
    Request::new("d", vec![Descriptor::of(&[(key, "x")])])
}

/// How many of `n` calls on descriptor `key` were admitted.
async fn admitted(l: &RateLimiter, cfg: &RateLimitConfig, key: &str, n: usize) -> usize {
    let mut ok = 0;
    for _ in 0..n {
        let req = req(key);
        let r = l.should_rate_limit(Some(cfg), &req).await.unwrap();
        ok += usize::from(r.overall_code == Code::Ok);
    }
    ok
}

#[tokio::test]
async fn local_mode_enforces_this_instances_share_of_the_limit() {
    // Three instances were alive: each admits a third of 6.
    let (l, cfg) = setup(FailureMode::Error, 3);
    assert_eq!(admitted(&l, &cfg, "loc", 10).await, 2);
    // local_share overrides the instance count.
    assert_eq!(admitted(&l, &cfg, "half", 10).await, 3);
    // Never below one hit, however many instances.
    let (l, cfg) = setup(FailureMode::Error, 1_000);
    assert_eq!(admitted(&l, &cfg, "loc", 10).await, 1);
}

#[tokio::test]
async fn the_response_says_the_local_fallback_decided() {
    let (l, cfg) = setup(FailureMode::Error, 1);
    let req = req("loc");
    let r = l.should_rate_limit(Some(&cfg), &req).await.unwrap();
    let md = r.dynamic_metadata.unwrap();
    assert_eq!(md["decisionSource"], "local_fallback");
    assert_eq!(r.statuses[0].limit_remaining, 5);
}

#[tokio::test]
async fn the_default_failure_mode_applies_to_limits_without_one() {
    let (l, cfg) = setup(FailureMode::Error, 1);
    let plain = req("plain");
    assert!(matches!(
        l.should_rate_limit(Some(&cfg), &plain).await,
        Err(RequestError::Store(_))
    ));
    let (l, cfg) = setup(FailureMode::Local, 2);
    assert_eq!(admitted(&l, &cfg, "plain", 10).await, 3);
    // A limit's own mode still wins over the default.
    let r = l.should_rate_limit(Some(&cfg), &req("deny")).await.unwrap();
    assert_eq!(r.overall_code, Code::OverLimit);
    assert_eq!(r.dynamic_metadata.unwrap()["decisionSource"], "breaker");
}

#[tokio::test]
async fn local_fallback_keeps_a_share_of_the_slots_and_releases_them() {
    let (l, cfg) = setup(FailureMode::Error, 1);
    let slot = |holder: &str, release: bool| {
        let mut d = Descriptor::of(&[("slots", "x")]);
        d.holder = Some(holder.into());
        d.refund = release;
        Request::new("d", vec![d])
    };
    let mut codes = Vec::new();
    for h in ["h1", "h2", "h3", "h4"] {
        let r = l
            .should_rate_limit(Some(&cfg), &slot(h, false))
            .await
            .unwrap();
        codes.push(r.overall_code);
    }
    assert_eq!(
        codes,
        [Code::Ok, Code::Ok, Code::Ok, Code::OverLimit],
        "half of 6 slots on this instance"
    );
    l.should_rate_limit(Some(&cfg), &slot("h1", true))
        .await
        .unwrap();
    let r = l
        .should_rate_limit(Some(&cfg), &slot("h4", false))
        .await
        .unwrap();
    assert_eq!(r.overall_code, Code::Ok, "h1's local slot went back");
}
