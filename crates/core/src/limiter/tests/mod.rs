//! Limiter tests on the memory store (and a store that is down) with a manual clock: the rules
//! that span descriptors — replaces vs unlimited, store use, header choice. Each feature seen
//! through the limiter has its own file.

mod fallback;
mod fired;
mod match_rules;
mod regional;
mod split;
mod when;

use std::sync::Arc;

use async_trait::async_trait;

use super::*;
use crate::clock::ManualClock;
use crate::config::{self, CompileOptions, ConfigFile};
use crate::store::memory::MemoryStore;
use crate::store::{Answer, Op};

const CFG: &str = r#"
domain: d
descriptors:
  - {key: a, rate_limit: {unit: minute, requests_per_unit: 2, name: a_limit}}
  - {key: b, rate_limit: {unit: minute, requests_per_unit: 5, replaces: [{name: a_limit}]}}
  - {key: u, rate_limit: {unlimited: true, name: u_limit}}
  - {key: r, rate_limit: {unlimited: true, replaces: [{name: u_limit}]}}
  - {key: q, quota_mode: true, rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: free}
  - {key: fa, rate_limit: {unit: minute, requests_per_unit: 3, failure_mode: allow}}
  - {key: fd, rate_limit: {unit: minute, requests_per_unit: 3, failure_mode: deny}}
  - key: m
    rate_limits:
      - {unit: second, requests_per_unit: 5, failure_mode: allow}
      - {unit: hour, requests_per_unit: 7, failure_mode: deny, name: hourly}
  - key: me
    rate_limits:
      - {unit: second, requests_per_unit: 5, failure_mode: allow}
      - {unit: hour, requests_per_unit: 7}
  - {key: rm, rate_limit: {unit: minute, requests_per_unit: 1, replaces: [{name: hourly}]}}
"#;

fn config() -> RateLimitConfig {
    let files = [ConfigFile {
        name: "d.yaml".into(),
        contents: CFG.into(),
    }];
    config::compile(&files, &CompileOptions::default()).unwrap()
}

/// A store that is always down.
#[derive(Debug)]
struct DownStore;

#[async_trait]
impl Store for DownStore {
    async fn apply(&self, _: &[Op], _: Timestamp) -> Result<Vec<Answer>, StoreError> {
        Err(StoreError::Unavailable("connection refused".into()))
    }
    async fn reset(&self, _: &[Op], _: Timestamp) -> Result<u64, StoreError> {
        Err(StoreError::Unavailable("connection refused".into()))
    }

    async fn reset_prefix(
        &self,
        _: &str,
        _: usize,
        _: Timestamp,
    ) -> Result<crate::store::PrefixReset, crate::store::ResetError> {
        Err(StoreError::Unavailable("connection refused".into()).into())
    }
}

fn limiter(store: Arc<dyn Store>, options: LimiterOptions) -> RateLimiter {
    let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_000)));
    RateLimiter::new(store, clock, options)
}

fn req(descriptors: &[&[(&str, &str)]]) -> Request {
    Request::new("d", descriptors.iter().map(|d| Descriptor::of(d)).collect())
}

#[tokio::test]
async fn descriptors_without_limits_never_reach_the_store() {
    let l = limiter(Arc::new(DownStore), LimiterOptions::default());
    let cfg = config();
    let r = l
        .should_rate_limit(Some(&cfg), &req(&[&[("free", "x")], &[("u", "1")]]))
        .await
        .unwrap();
    assert_eq!(r.overall_code, Code::Ok);
    assert_eq!(r.statuses[1], DescriptorStatus::unlimited());
    let e = l
        .should_rate_limit(Some(&cfg), &req(&[&[("a", "x")]]))
        .await
        .unwrap_err();
    assert!(matches!(e, RequestError::Store(StoreError::Unavailable(_))));
    assert!(!e.is_invalid_argument());
}

#[tokio::test]
async fn replaced_limits_are_dropped_but_unlimited_stays_unlimited() {
    let l = limiter(Arc::new(MemoryStore::new(100)), LimiterOptions::default());
    let cfg = config();
    let r = l
        .should_rate_limit(
            Some(&cfg),
            &req(&[&[("a", "x")], &[("b", "x")], &[("u", "x")], &[("r", "x")]]),
        )
        .await
        .unwrap();
    assert_eq!(
        r.statuses[0],
        DescriptorStatus::no_limit(),
        "a_limit is replaced by b"
    );
    assert_eq!(r.statuses[1].limit_remaining, 4);
    assert_eq!(
        r.statuses[2],
        DescriptorStatus::unlimited(),
        "unlimited wins over replaced"
    );
    assert_eq!(r.statuses[3], DescriptorStatus::unlimited());
}

#[tokio::test]
async fn headers_prefer_a_regular_over_limit_descriptor() {
    let names = HeaderNames {
        limit: "L".into(),
        remaining: "R".into(),
        reset: "T".into(),
    };
    let options = LimiterOptions {
        headers: Some(names),
        ..LimiterOptions::default()
    };
    let l = limiter(Arc::new(MemoryStore::new(100)), options);
    let cfg = config();
    let both = req(&[&[("a", "x")], &[("q", "x")]]);
    l.should_rate_limit(Some(&cfg), &both).await.unwrap();
    l.should_rate_limit(Some(&cfg), &both).await.unwrap();
    let r = l.should_rate_limit(Some(&cfg), &both).await.unwrap();
    // Both are over (remaining 0); the quota one does not take the slot from the regular one.
    assert_eq!(r.statuses[1].code, Code::OverLimit);
    let h: Vec<&str> = r.response_headers.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(h, vec!["2", "0", "20"]);
}

#[tokio::test]
async fn no_config_and_bad_requests_are_errors_with_go_messages() {
    let l = limiter(Arc::new(MemoryStore::new(100)), LimiterOptions::default());
    let e = l
        .should_rate_limit(None, &req(&[&[("a", "x")]]))
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "no rate limit configuration loaded");
    let cfg = config();
    let e = l
        .should_rate_limit(Some(&cfg), &Request::new("d", vec![]))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "rate limit descriptor list must not be empty"
    );
    assert!(e.is_invalid_argument());
}

#[tokio::test]
async fn failure_mode_answers_per_limit_when_the_store_is_down() {
    let l = limiter(Arc::new(DownStore), LimiterOptions::default());
    let cfg = config();
    let r = l
        .should_rate_limit(Some(&cfg), &req(&[&[("fa", "x")]]))
        .await
        .unwrap();
    assert_eq!(r.overall_code, Code::Ok);
    assert_eq!(
        r.statuses[0],
        DescriptorStatus::no_limit(),
        "allow: not enforced"
    );
    let r = l
        .should_rate_limit(Some(&cfg), &req(&[&[("fa", "x")], &[("fd", "x")]]))
        .await
        .unwrap();
    assert_eq!(r.overall_code, Code::OverLimit);
    assert_eq!(r.statuses[1].code, Code::OverLimit);
    assert_eq!(r.statuses[1].limit_remaining, 0);
    assert_eq!(
        r.statuses[1].duration_until_reset,
        Some(std::time::Duration::from_secs(20))
    );
    // One limit without a policy: the request errors, as in the Go service.
    let e = l
        .should_rate_limit(Some(&cfg), &req(&[&[("fa", "x")], &[("a", "x")]]))
        .await
        .unwrap_err();
    assert!(matches!(e, RequestError::Store(_)));
}

#[tokio::test]
async fn several_limits_fail_by_their_strictest_policy_and_are_replaced_by_any_name() {
    let l = limiter(Arc::new(DownStore), LimiterOptions::default());
    let cfg = config();
    let r = l
        .should_rate_limit(Some(&cfg), &req(&[&[("m", "x")]]))
        .await
        .unwrap();
    assert_eq!(
        r.statuses[0].code,
        Code::OverLimit,
        "the deny limit decides"
    );
    let reported = r.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!(
        (reported.requests_per_unit, reported.name.as_str()),
        (7, "hourly")
    );
    let e = l
        .should_rate_limit(Some(&cfg), &req(&[&[("me", "x")]]))
        .await
        .unwrap_err();
    assert!(
        matches!(e, RequestError::Store(_)),
        "one limit wants the error"
    );
    // `hourly` is the second limit of `m`; replacing it drops the descriptor's limits, so only
    // `rm` reaches the (down) store and fails.
    let l = limiter(Arc::new(MemoryStore::new(100)), LimiterOptions::default());
    let r = l
        .should_rate_limit(Some(&cfg), &req(&[&[("m", "x")], &[("rm", "x")]]))
        .await
        .unwrap();
    assert_eq!(r.statuses[0], DescriptorStatus::no_limit());
    assert_eq!(
        r.statuses[1]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        1
    );
}

/// Per descriptor: reported over-limit?, and what decided it.
type Seen = Vec<Option<(bool, Source)>>;

/// Records what it is shown, one [`Seen`] per request.
#[derive(Debug, Default)]
struct Recorder(std::sync::Mutex<Vec<Seen>>);

impl Observer for Recorder {
    fn observe(&self, d: &Observed<'_>) {
        assert_eq!(d.settled.len(), d.request.descriptors.len());
        let seen = d.settled.iter();
        let seen = seen.map(|s| s.reported.map(|(_, src, v)| (v.over_limit, src)));
        self.0.lock().unwrap().push(seen.collect());
    }
}

#[tokio::test]
async fn observers_see_every_decided_request_but_not_refused_ones() {
    let rec = Arc::new(Recorder::default());
    let mut observers = Observers::default();
    observers.push(rec.clone());
    let l = limiter(Arc::new(MemoryStore::new(100)), LimiterOptions::default())
        .with_observers(observers);
    let cfg = config();
    for _ in 0..3 {
        let r = req(&[&[("a", "x")], &[("free", "y")]]);
        l.should_rate_limit(Some(&cfg), &r).await.unwrap();
    }
    let invalid = Request::new("", vec![]);
    assert!(l.should_rate_limit(Some(&cfg), &invalid).await.is_err());
    let seen = rec.0.lock().unwrap().clone();
    let ok = Some((false, Source::Store));
    let over = Some((true, Source::Store));
    assert_eq!(seen, [[ok, None], [ok, None], [over, None]]);
}

/// A request override beyond what a sliding log may hold is counted as a sliding window: a
/// caller cannot make one key keep an entry per admitted request for a year (validation refuses
/// such a configured limit, but an override is never validated that way).
#[tokio::test]
async fn an_override_a_sliding_log_cannot_hold_keeps_one_key_small() {
    const SL: &str = "domain: d\ndescriptors:\n  - {key: sl, rate_limit: {unit: second, requests_per_unit: 100, algorithm: sliding_log}}\n";
    let files = [ConfigFile {
        name: "d.yaml".into(),
        contents: SL.into(),
    }];
    let cfg = config::compile(&files, &CompileOptions::default()).unwrap();
    let overridden = |value: &str, requests_per_unit: u32, unit: config::Unit| {
        let mut d = Descriptor::of(&[("sl", value)]);
        d.limit = Some(Override {
            requests_per_unit,
            unit: Some(unit),
        });
        Request::new("d", vec![d])
    };
    let store = Arc::new(MemoryStore::new(100));
    let l = limiter(store.clone(), LimiterOptions::default());
    let huge = overridden("a", u32::MAX, config::Unit::Year);
    for _ in 0..2_000 {
        let r = l.should_rate_limit(Some(&cfg), &huge).await.unwrap();
        assert_eq!(r.overall_code, Code::Ok);
    }
    assert_eq!(store.len(), 1);
    let one_key = store.bytes();
    assert!(
        one_key < 1_000,
        "2 000 admitted requests made one key of {one_key} bytes: a log, not a window"
    );
    // Within the sliding log's maximum the override is still an exact log.
    let small = overridden("b", 3, config::Unit::Minute);
    for _ in 0..3 {
        let r = l.should_rate_limit(Some(&cfg), &small).await.unwrap();
        assert_eq!(r.overall_code, Code::Ok);
    }
    let r = l.should_rate_limit(Some(&cfg), &small).await.unwrap();
    assert_eq!(r.overall_code, Code::OverLimit);
}
