//! Which counter a descriptor matched by `value_regex` uses, on the memory store with a manual
//! clock: one per distinct value by default, one for every value with `regex_key: shared`, and
//! never one a request can reach by spelling the pattern.

use std::sync::Arc;

use crate::limiter::*;
use crate::test_support::{compiled, config, memory_limiter};

const CFG: &str = r#"
domain: d
descriptors:
  - key: user
    value_regex: "u-[0-9]+"
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: tenant
    value_regex: "t-[0-9]+"
    regex_key: shared
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 3}
"#;

fn limiter() -> RateLimiter {
    memory_limiter(LimiterOptions::default(), Arc::new(NoStats))
}

/// The code and remaining hits of one request with one entry.
async fn one(l: &RateLimiter, cfg: &RateLimitConfig, key: &str, value: &str) -> (Code, u32) {
    let r = l
        .should_rate_limit(
            Some(cfg),
            &Request::new("d", vec![Descriptor::of(&[(key, value)])]),
        )
        .await
        .unwrap();
    (r.statuses[0].code, r.statuses[0].limit_remaining)
}

#[tokio::test]
async fn a_regex_match_counts_per_value_by_default() {
    let (l, cfg) = (limiter(), config(CFG));
    assert_eq!(one(&l, &cfg, "user", "u-1").await, (Code::Ok, 1));
    assert_eq!(one(&l, &cfg, "user", "u-1").await, (Code::Ok, 0));
    assert_eq!(one(&l, &cfg, "user", "u-1").await.0, Code::OverLimit);
    // Another value the pattern matches has a counter of its own.
    assert_eq!(one(&l, &cfg, "user", "u-2").await, (Code::Ok, 1));
}

#[tokio::test]
async fn a_shared_regex_counts_every_matching_value_once() {
    let (l, cfg) = (limiter(), config(CFG));
    assert_eq!(one(&l, &cfg, "tenant", "t-1").await, (Code::Ok, 2));
    assert_eq!(one(&l, &cfg, "tenant", "t-2").await, (Code::Ok, 1));
    assert_eq!(one(&l, &cfg, "tenant", "t-3").await, (Code::Ok, 0));
    assert_eq!(one(&l, &cfg, "tenant", "t-1").await.0, Code::OverLimit);
    // Values no pattern matches go to the key's default, per value, untouched by the above;
    // spelling the pattern (or its name) reaches neither the pattern nor its counter.
    for value in ["=~t-[0-9]+", "t-[0-9]+", ""] {
        assert_eq!(
            one(&l, &cfg, "tenant", value).await,
            (Code::Ok, 2),
            "{value:?}"
        );
    }
}

const DOMAIN_RULES: &str = r#"
domain: d
default_limit: {unit: minute, requests_per_unit: 2}
max_request_limit: {unit: minute, requests_per_unit: 60}
descriptors:
  - key: tenant
    value: vip
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: tenant
    value: free
  - key: plan
    descriptors:
      - key: region
        value: eu
        rate_limit: {unit: minute, requests_per_unit: 4}
"#;

async fn entries(l: &RateLimiter, cfg: &RateLimitConfig, entries: &[(&str, &str)]) -> (Code, u32) {
    let r = l
        .should_rate_limit(Some(cfg), &Request::new("d", vec![Descriptor::of(entries)]))
        .await
        .unwrap();
    (r.statuses[0].code, r.statuses[0].limit_remaining)
}

#[tokio::test]
async fn default_limit_counts_each_unmatched_descriptor_on_its_own() {
    let (l, cfg) = (limiter(), config(DOMAIN_RULES));
    // An unknown tenant: no node matches, the default applies, per tenant.
    assert_eq!(one(&l, &cfg, "tenant", "acme").await, (Code::Ok, 1));
    assert_eq!(one(&l, &cfg, "tenant", "acme").await, (Code::Ok, 0));
    assert_eq!(one(&l, &cfg, "tenant", "acme").await.0, Code::OverLimit);
    assert_eq!(one(&l, &cfg, "tenant", "globex").await, (Code::Ok, 1));
    // A rule still wins, and a node written without a limit still lets values through.
    assert_eq!(one(&l, &cfg, "tenant", "vip").await, (Code::Ok, 4));
    let free = DescriptorStatus::no_limit();
    let r = l
        .should_rate_limit(
            Some(&cfg),
            &Request::new("d", vec![Descriptor::of(&[("tenant", "free")])]),
        )
        .await
        .unwrap();
    assert_eq!(r.statuses[0], free);
    // Deeper than a matched node, or an unmatched inner entry: matched nothing.
    assert_eq!(
        entries(&l, &cfg, &[("plan", "p"), ("region", "us")]).await,
        (Code::Ok, 1)
    );
    assert_eq!(
        entries(&l, &cfg, &[("plan", "p"), ("region", "eu")]).await,
        (Code::Ok, 3)
    );
    let r = l
        .should_rate_limit(
            Some(&cfg),
            &Request::new("d", vec![Descriptor::of(&[("plan", "p")])]),
        )
        .await
        .unwrap();
    assert_eq!(
        r.statuses[0],
        DescriptorStatus::no_limit(),
        "the inner node has no limit"
    );
}

#[test]
fn default_limit_is_listed_and_plans_count_what_matched_nothing() {
    let cfg = config(DOMAIN_RULES);
    let listed: Vec<&str> = cfg.limits().iter().map(|l| l.full_key.as_str()).collect();
    assert_eq!(listed.last(), Some(&"d.default_limit"));
    let domain = cfg.domain("d").unwrap();
    assert_eq!(
        domain.max_request_limit,
        Some(crate::config::RequestLimitCap {
            requests_per_unit: 60,
            unit: crate::config::Unit::Minute
        })
    );
    let req = Request::new(
        "d",
        vec![
            Descriptor::of(&[("tenant", "acme")]),
            Descriptor::of(&[("tenant", "vip")]),
            Descriptor::of(&[("other", "x")]),
        ],
    );
    let stored = OverrideIndex::default();
    let keys = KeyBuilder::default();
    let random = SeededRandom::new(1);
    let plans = plan::plan(
        Some(domain),
        &stored,
        &req,
        &keys,
        Timestamp::from_secs(1_000),
        &random,
        FailureMode::default(),
    )
    .unwrap();
    assert_eq!(
        plans.tally,
        plan::Tally {
            unmatched: 2,
            capped: 0,
            predicate_errors: 0,
            // An empty index of stored overrides is not looked up.
            stored_lookups: 0,
            stored_found: 0,
        }
    );
}

#[test]
fn the_cap_compares_rates_across_units_and_clamps_to_itself() {
    use crate::config::{RequestLimitCap, Unit};
    let cap = RequestLimitCap {
        requests_per_unit: 60,
        unit: Unit::Minute,
    };
    assert_eq!(cap.apply(60, Unit::Minute), (60, Unit::Minute));
    assert_eq!(
        cap.apply(1, Unit::Second),
        (1, Unit::Second),
        "1/s is 60/min: allowed"
    );
    assert_eq!(cap.apply(2, Unit::Second), (60, Unit::Minute));
    assert_eq!(cap.apply(3_000, Unit::Hour), (3_000, Unit::Hour));
    assert_eq!(cap.apply(3_601, Unit::Hour), (60, Unit::Minute));
    assert_eq!(cap.apply(u32::MAX, Unit::Second), (60, Unit::Minute));
}

#[tokio::test]
async fn a_request_cannot_raise_its_own_limit_above_the_cap() {
    let (l, cfg) = (limiter(), config(DOMAIN_RULES));
    let ask = |rpu: u32, unit| {
        let mut d = Descriptor::of(&[("tenant", "acme")]);
        d.limit = Some(Override {
            requests_per_unit: rpu,
            unit: Some(unit),
        });
        Request::new("d", vec![d])
    };
    let r = l
        .should_rate_limit(Some(&cfg), &ask(1_000_000, crate::config::Unit::Second))
        .await
        .unwrap();
    let limit = r.statuses[0]
        .current_limit
        .clone()
        .expect("a limit applies");
    assert_eq!(
        (limit.requests_per_unit, limit.unit),
        (60, crate::config::Unit::Minute)
    );
    assert_eq!(r.statuses[0].limit_remaining, 59);
    // Below the cap, the request's own limit (and not the default) applies.
    let r = l
        .should_rate_limit(Some(&cfg), &ask(10, crate::config::Unit::Minute))
        .await
        .unwrap();
    assert_eq!(
        r.statuses[0]
            .current_limit
            .as_ref()
            .map(|c| c.requests_per_unit),
        Some(10)
    );
}

#[test]
fn domain_rules_are_checked_at_load() {
    let bad = r#"
domain: d
default_limit: {unit: fortnight, requests_per_unit: 1, replaces: [{name: x}]}
max_request_limit: {unit: second, algorithm: token_bucket}
descriptors:
  - key: k
    default_limit: {unit: second, requests_per_unit: 1}
"#;
    let e = compiled(bad).unwrap_err();
    let got: Vec<(String, String)> =
        e.0.iter()
            .map(|e| (e.path.clone(), e.message.clone()))
            .collect();
    let paths: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "descriptors[0].default_limit",
            "default_limit.unit",
            "default_limit.replaces",
            "max_request_limit.algorithm",
            "max_request_limit.requests_per_unit",
        ],
        "{got:?}"
    );
}
