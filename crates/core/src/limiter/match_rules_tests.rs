//! Which counter a descriptor matched by `value_regex` uses, on the memory store with a manual
//! clock: one per distinct value by default, one for every value with `regex_key: shared`, and
//! never one a request can reach by spelling the pattern.

use std::sync::Arc;

use super::*;
use crate::clock::ManualClock;
use crate::config::{self, CompileOptions, ConfigFile};
use crate::store::memory::MemoryStore;

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

fn config(yaml: &str) -> RateLimitConfig {
    let files = [ConfigFile {
        name: "d.yaml".into(),
        contents: yaml.into(),
    }];
    config::compile(&files, &CompileOptions::default()).unwrap()
}

fn limiter() -> RateLimiter {
    let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_000)));
    RateLimiter::new(
        Arc::new(MemoryStore::new(100)),
        clock,
        LimiterOptions::default(),
    )
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
