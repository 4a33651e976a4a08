//! Grouped quotas and "which limit fired" over real gRPC (and `/json`) with the manual clock, on
//! every store: the AI-gateway example `examples/features/quota_groups.yaml` (tokens per model
//! and per tenant on each model) fails over from a model whose tenant budget is spent, denies
//! once every model is spent, and the dynamic metadata names the limit that denied.

use prost_types::value::Kind;
use serde_json::{Value, json};

use crate::support::*;
use ratelimitd::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};

fn example() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/features/quota_groups.yaml"
    );
    std::fs::read_to_string(path).unwrap()
}

const GPT: &str = "gpt-4o";
const CLAUDE: &str = "claude-sonnet";

/// A request for `tenant` that may use `models`, each descriptor charged `tokens`.
fn tokens(tenant: &str, models: &[&str], tokens: u64) -> RateLimitRequest {
    let mut descriptors: Vec<Vec<(&str, &str)>> = Vec::new();
    for m in models {
        descriptors.push(vec![("model", m)]);
        descriptors.push(vec![("model", m), ("tenant", tenant)]);
    }
    let refs: Vec<&[(&str, &str)]> = descriptors.iter().map(std::vec::Vec::as_slice).collect();
    let mut req = request("ai-gateway", &refs);
    for d in &mut req.descriptors {
        d.hits_addend = Some(tokens);
    }
    req
}

/// `overLimit.<field>` of the response's dynamic metadata, as text.
fn over_limit(r: &RateLimitResponse, field: &str) -> Option<String> {
    let md = r.dynamic_metadata.as_ref()?;
    let Some(Kind::StructValue(over)) = md.fields.get("overLimit")?.kind.as_ref() else {
        return None;
    };
    match over.fields.get(field)?.kind.as_ref()? {
        Kind::StringValue(s) => Some(s.clone()),
        Kind::NumberValue(n) => Some(n.to_string()),
        other => panic!("overLimit.{field} is {other:?}"),
    }
}

on_every_store!(a_spent_tenant_budget_fails_over_to_the_other_model);
async fn a_spent_tenant_budget_fails_over_to_the_other_model(store: StoreKind) {
    let s = TestServer::start_with_store(
        &[("ai.yaml", &example())],
        &[("RESPONSE_DYNAMIC_METADATA", "true")],
        store,
    )
    .await;
    let call = |req| async { s.call(req).await.expect("a decision") };
    // acme spends its whole gpt-4o budget (10000 of the model's 100000).
    let r = call(tokens("acme", &[GPT], 10_000)).await;
    assert_eq!(overall(&r), Code::Ok);
    // gpt-4o's model budget still has 90000 tokens, but acme's share is spent: the group is over,
    // so a request that can only use gpt-4o is denied (every quota over would have admitted it).
    let r = call(tokens("acme", &[GPT], 1)).await;
    assert_eq!(st(&r, 0).0, Code::Ok, "the model budget itself has room");
    assert_eq!(st(&r, 1).0, Code::OverLimit);
    assert_eq!(overall(&r), Code::OverLimit);
    assert_eq!(
        over_limit(&r, "name").as_deref(),
        Some("gpt-4o-tenant-tokens")
    );
    assert_eq!(over_limit(&r, "descriptor").as_deref(), Some("1"));
    // Another tenant's gpt-4o budget is its own.
    assert_eq!(overall(&call(tokens("globex", &[GPT], 1)).await), Code::Ok);
    // acme may still use claude-sonnet: with both models offered the request is admitted.
    let r = call(tokens("acme", &[GPT, CLAUDE], 4_000)).await;
    assert_eq!(overall(&r), Code::Ok);
    // That spent 4000 of acme's 5000 on claude-sonnet; 2000 more overflows it too. No model
    // can serve the request now.
    let r = call(tokens("acme", &[GPT, CLAUDE], 2_000)).await;
    assert_eq!(st(&r, 3).0, Code::OverLimit);
    assert_eq!(overall(&r), Code::OverLimit);
    // The next window opens both again.
    s.advance(std::time::Duration::from_secs(60));
    assert_eq!(overall(&call(tokens("acme", &[GPT], 1)).await), Code::Ok);
}

on_every_store!(json_metadata_names_the_limit_that_denied);
async fn json_metadata_names_the_limit_that_denied(store: StoreKind) {
    let cfg = r#"
domain: web
descriptors:
  - {key: remote_address, rate_limit: {unit: minute, requests_per_unit: 10, name: per-address}}
  - {key: user, rate_limit: {unit: hour, requests_per_unit: 1, name: per-user}}
"#;
    let s = TestServer::start_with_store(
        &[("web.yaml", cfg)],
        &[("RESPONSE_DYNAMIC_METADATA", "true")],
        store,
    )
    .await;
    let body = json!({"domain": "web", "descriptors": [
        {"entries": [{"key": "remote_address", "value": "10.0.0.1"}]},
        {"entries": [{"key": "user", "value": "alice"}]},
    ]})
    .to_string();
    assert_eq!(s.post("/json", body.clone()).await.status().as_u16(), 200);
    let r = s.post("/json", body).await;
    assert_eq!(r.status().as_u16(), 429);
    let answer: Value = r.json().await.unwrap();
    let md = &answer["dynamicMetadata"];
    // Manual clock at 1234 s: the hour window resets in 2366 s.
    assert_eq!(
        md["overLimit"],
        json!({"descriptor": 1, "name": "per-user", "key": "web.user", "durationUntilReset": "2366s"})
    );
    assert_eq!(md["descriptors"][0]["code"], "OK");
    assert_eq!(md["descriptors"][0]["limitRemaining"], 8);
    assert_eq!(md["descriptors"][1]["code"], "OVER_LIMIT");
    assert_eq!(md["descriptors"][1]["limitName"], "per-user");
}
