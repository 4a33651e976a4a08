//! Which limit fired and grouped quotas through the whole limiter (memory store, manual clock at
//! 1000 s, so a minute window resets in 20 s): the metadata names the limit that denied, and a
//! quota group is over as soon as one member is.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::limiter::*;
use crate::test_support::{config, memory_limiter};

const CFG: &str = r#"
domain: d
descriptors:
  - {key: ip, rate_limit: {unit: minute, requests_per_unit: 5}}
  - {key: user, rate_limit: {unit: minute, requests_per_unit: 1, name: per_user}}
  - key: model
    value: gpt
    quota_mode: true
    quota_group: gpt
    rate_limit: {unit: minute, requests_per_unit: 100}
    descriptors:
      - {key: tenant, quota_mode: true, quota_group: gpt, rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: model, value: claude, quota_mode: true, quota_group: claude, rate_limit: {unit: minute, requests_per_unit: 1}}
"#;

fn limiter() -> (RateLimiter, RateLimitConfig) {
    let options = LimiterOptions {
        dynamic_metadata: true,
        ..LimiterOptions::default()
    };
    (memory_limiter(options, Arc::new(NoStats)), config(CFG))
}

fn req(descriptors: &[&[(&str, &str)]]) -> Request {
    Request::new("d", descriptors.iter().map(|d| Descriptor::of(d)).collect())
}

#[tokio::test]
async fn the_metadata_names_the_limit_that_denied() {
    let (l, cfg) = limiter();
    let both = req(&[&[("ip", "1")], &[("user", "alice")]]);
    l.should_rate_limit(Some(&cfg), &both).await.unwrap();
    let r = l.should_rate_limit(Some(&cfg), &both).await.unwrap();
    assert_eq!(r.overall_code, Code::OverLimit);
    let md = Value::Object(r.dynamic_metadata.unwrap());
    assert_eq!(
        md["overLimit"],
        json!({"descriptor": 1, "name": "per_user", "key": "d.user", "durationUntilReset": "20s"})
    );
    assert_eq!(
        md["descriptors"],
        json!([
            {"entries": ["ip=1"], "code": "OK", "limitRemaining": 3, "durationUntilReset": "20s"},
            {"entries": ["user=alice"], "code": "OVER_LIMIT", "limitName": "per_user",
             "limitRemaining": 0, "durationUntilReset": "20s"},
        ])
    );
}

#[tokio::test]
async fn nothing_over_means_no_over_limit_entry() {
    let (l, cfg) = limiter();
    let r = l
        .should_rate_limit(Some(&cfg), &req(&[&[("ip", "1")], &[("nothing", "x")]]))
        .await
        .unwrap();
    let md = r.dynamic_metadata.unwrap();
    assert!(!md.contains_key("overLimit"), "{md:?}");
    assert_eq!(
        md["descriptors"][1],
        json!({"entries": ["nothing=x"], "code": "OK"})
    );
}

#[tokio::test]
async fn a_spent_tenant_budget_closes_its_model_but_not_the_other() {
    let (l, cfg) = limiter();
    // [model=gpt] (100) and [model=gpt, tenant=acme] (1) form group gpt; [model=claude] (1) is
    // group claude. The tenant's single gpt call spends its gpt budget.
    let gpt_and_claude = req(&[
        &[("model", "gpt")],
        &[("model", "gpt"), ("tenant", "acme")],
        &[("model", "claude")],
    ]);
    let gpt_only = req(&[&[("model", "gpt")], &[("model", "gpt"), ("tenant", "acme")]]);
    let r = l.should_rate_limit(Some(&cfg), &gpt_only).await.unwrap();
    assert_eq!(r.overall_code, Code::Ok);
    // gpt's group is over (its tenant member is), though the model itself has 98 left: a request
    // that can use only gpt is denied. Without groups the model's room would have let it through.
    let r = l.should_rate_limit(Some(&cfg), &gpt_only).await.unwrap();
    assert_eq!(r.overall_code, Code::OverLimit);
    let md = Value::Object(r.dynamic_metadata.unwrap());
    assert_eq!(md["overLimit"]["key"], "d.model_gpt.tenant");
    assert_eq!(md["descriptors"][0]["quotaGroup"], "gpt");
    // claude still has room: a request that may use either model is admitted.
    let r = l
        .should_rate_limit(Some(&cfg), &gpt_and_claude)
        .await
        .unwrap();
    assert_eq!(r.overall_code, Code::Ok);
    // Now claude is spent too: every group is over.
    let r = l
        .should_rate_limit(Some(&cfg), &gpt_and_claude)
        .await
        .unwrap();
    assert_eq!(r.overall_code, Code::OverLimit);
}
