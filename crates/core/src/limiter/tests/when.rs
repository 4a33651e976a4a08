//! `when:` predicates through the limiter on the memory store with a manual clock: a limit
//! applies only to the requests its predicate holds for, a node's predicate passes it over for the
//! next candidate, and a failing predicate answers by its limit's `failure_mode` (failing the
//! request under `error`) and is counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::limiter::*;
use crate::test_support::{self, memory_limiter};

const CFG: &str = r#"
domain: d
descriptors:
  - key: tenant
    value: acme
    when: 'descriptor.tier == "gold"'
    descriptors:
      - key: tier
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: tenant
    descriptors:
      - key: tier
        rate_limits:
          - {unit: minute, requests_per_unit: 2}
          - {unit: hour, requests_per_unit: 1, when: 'hits_addend >= 10 || domain != "d"'}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1, failure_mode: allow, when: 'int(descriptor.user) > 0'}
  - key: strict
    rate_limit: {unit: minute, requests_per_unit: 1, when: 'int(descriptor.strict) > 0'}
  - key: closed
    rate_limit: {unit: minute, requests_per_unit: 1, failure_mode: deny, when: 'int(descriptor.closed) > 0'}
"#;

/// Counts `predicate_errors` per call.
#[derive(Debug, Default)]
struct Errors(AtomicU64);

impl StatsSink for Errors {
    fn limit(&self, _: &str, _: &LimitIncrements) {}
    fn domain_not_found(&self, _: &str) {}
    fn global_shadow_mode(&self) {}
    fn error(&self, _: ErrorKind) {}
    fn store_call(&self, _: std::time::Duration, _: bool) {}
    fn decision(&self, _: Code, _: Source) {}
    fn predicate_errors(&self, domain: &str, n: u64) {
        assert_eq!(domain, "d");
        self.0.fetch_add(n, Ordering::Relaxed);
    }
}

fn config() -> RateLimitConfig {
    test_support::config(CFG)
}

fn limiter(stats: Arc<Errors>) -> RateLimiter {
    memory_limiter(LimiterOptions::default(), stats)
}

async fn ask(
    l: &RateLimiter,
    cfg: &RateLimitConfig,
    entries: &[(&str, &str)],
    hits: u64,
) -> Result<(Code, u32), RequestError> {
    let mut d = Descriptor::of(entries);
    d.hits_addend = Some(hits);
    let r = l
        .should_rate_limit(Some(cfg), &Request::new("d", vec![d]))
        .await?;
    Ok((r.statuses[0].code, r.statuses[0].limit_remaining))
}

#[tokio::test]
async fn an_entry_predicate_chooses_the_node() {
    let stats = Arc::new(Errors::default());
    let (l, cfg) = (limiter(Arc::clone(&stats)), config());
    // Gold: the exact node's limit of 5.
    let gold = [("tenant", "acme"), ("tier", "gold")];
    assert_eq!(ask(&l, &cfg, &gold, 1).await.unwrap(), (Code::Ok, 4));
    // Silver: the exact node does not apply, the key-only default (2 per minute) does.
    let silver = [("tenant", "acme"), ("tier", "silver")];
    assert_eq!(ask(&l, &cfg, &silver, 1).await.unwrap(), (Code::Ok, 1));
    assert_eq!(ask(&l, &cfg, &silver, 1).await.unwrap(), (Code::Ok, 0));
    assert_eq!(ask(&l, &cfg, &silver, 1).await.unwrap().0, Code::OverLimit);
    assert_eq!(ask(&l, &cfg, &gold, 1).await.unwrap(), (Code::Ok, 3));
    assert_eq!(stats.0.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn a_limit_predicate_adds_its_limit_only_when_it_holds() {
    let stats = Arc::new(Errors::default());
    let (l, cfg) = (limiter(Arc::clone(&stats)), config());
    let big = [("tenant", "globex"), ("tier", "x")];
    // 0 hits is a check: the hourly limit's predicate does not hold, the minute's 2 apply.
    assert_eq!(ask(&l, &cfg, &big, 0).await.unwrap(), (Code::Ok, 2));
    // 10 hits: the hourly limit of 1 applies too, and refuses.
    assert_eq!(ask(&l, &cfg, &big, 10).await.unwrap().0, Code::OverLimit);
}

#[tokio::test]
async fn a_failing_predicate_answers_by_its_failure_mode_and_is_counted() {
    let stats = Arc::new(Errors::default());
    let (l, cfg) = (limiter(Arc::clone(&stats)), config());
    // The positive path first: a number holds, and each limit counts (1 per minute).
    for key in ["user", "strict", "closed"] {
        assert_eq!(
            ask(&l, &cfg, &[(key, "7")], 1).await.unwrap(),
            (Code::Ok, 0)
        );
        assert_eq!(
            ask(&l, &cfg, &[(key, "7")], 1).await.unwrap().0,
            Code::OverLimit
        );
    }
    assert_eq!(stats.0.load(Ordering::Relaxed), 0);
    // Not a number, so `int()` fails: allow skips the limit (no limit: OK, nothing counted).
    let no_limit = DescriptorStatus::no_limit();
    for _ in 0..2 {
        let r = l
            .should_rate_limit(
                Some(&cfg),
                &Request::new("d", vec![Descriptor::of(&[("user", "abc")])]),
            )
            .await
            .unwrap();
        assert_eq!(r.statuses[0], no_limit);
    }
    assert_eq!(stats.0.load(Ordering::Relaxed), 2);
    // deny applies the limit: 1 per minute, so the second is over.
    let closed = [("closed", "abc")];
    assert_eq!(ask(&l, &cfg, &closed, 1).await.unwrap(), (Code::Ok, 0));
    assert_eq!(ask(&l, &cfg, &closed, 1).await.unwrap().0, Code::OverLimit);
    assert_eq!(stats.0.load(Ordering::Relaxed), 4);
    // No failure_mode: the service's default (error) fails the request.
    let err = ask(&l, &cfg, &[("strict", "abc")], 1).await.unwrap_err();
    assert!(
        matches!(&err, RequestError::PredicateFailed { descriptor: 0, reason } if reason.contains("int(descriptor.strict)")),
        "{err:?}"
    );
    assert_eq!(stats.0.load(Ordering::Relaxed), 5);
}
