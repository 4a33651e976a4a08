//! Rules from the policy database against the real service: `PUT /v1/policies/{id}`
//! over real HTTP, checked by the configuration validator with the files in service, stored in a
//! real SQLite file, compiled into the one snapshot and enforced over real gRPC at once.

use crate::support::policy::{TOKEN, call};
use crate::support::{Code, TestServer, st};
use reqwest::Method;
use serde_json::{Value, json};

fn rule(domain: &str, value: &str, rpu: u32) -> Value {
    json!({
        "domain": domain,
        "descriptor": [{"key": "client_key", "value": value}],
        "rate_limit": {"unit": "minute", "requests_per_unit": rpu},
    })
}

async fn put(s: &TestServer, id: &str, body: Value) -> (u16, Value) {
    let path = format!("/v1/policies/{id}");
    s.admin(Method::PUT, &path, Some(body)).await
}

/// (code, `requests_per_unit` of the current limit, if any) of one hit in domain `tenants`.
async fn hit(s: &TestServer, value: &str) -> (Code, Option<u32>) {
    let r = s.rl("tenants", &[&[("client_key", value)]]).await;
    let (code, limit, _) = st(&r, 0);
    (code, limit.map(|l| l.0))
}

async fn rlconfig(s: &TestServer) -> String {
    // The limits of stored rules are client data: listed to a token holder only.
    let r = s.http.get(s.debug_url("/rlconfig")).bearer_auth(TOKEN);
    let r = r.send().await.unwrap();
    r.text().await.unwrap()
}

#[tokio::test]
async fn a_rule_written_over_the_api_is_enforced_at_once_and_can_be_replaced_and_deleted() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    assert_eq!(
        hit(&s, "u1").await,
        (Code::Ok, None),
        "no domain tenants yet"
    );
    let (status, body) = put(&s, "gold-u1", rule("tenants", "u1", 2)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["rate_limit"]["requests_per_unit"], 2);
    assert_eq!(hit(&s, "u1").await, (Code::Ok, Some(2)));
    assert_eq!(hit(&s, "u1").await, (Code::Ok, Some(2)));
    assert_eq!(hit(&s, "u1").await, (Code::OverLimit, Some(2)));
    assert!(
        rlconfig(&s)
            .await
            .contains("tenants.client_key_u1: unit=MINUTE requests_per_unit=2")
    );
    // The file domain is untouched.
    let r = s.rl("api", &[&[("client_key", "x")]]).await;
    assert_eq!(st(&r, 0).1.unwrap().0, 2);

    let (status, _) = put(&s, "gold-u1", rule("tenants", "u1", 10)).await;
    assert_eq!(status, 200, "replaced");
    // Same key, same window: the 3 hits counted stay; 10 per minute leaves room.
    assert_eq!(hit(&s, "u1").await, (Code::Ok, Some(10)));
    let (status, one) = s.admin(Method::GET, "/v1/policies/gold-u1", None).await;
    assert_eq!(
        (status, one["rate_limit"]["requests_per_unit"].clone()),
        (200, json!(10))
    );
    let (_, of_tenants) = s
        .admin(Method::GET, "/v1/policies?domain=tenants", None)
        .await;
    assert_eq!(of_tenants["policies"].as_array().unwrap().len(), 1);
    let (_, of_api) = s.admin(Method::GET, "/v1/policies?domain=api", None).await;
    assert_eq!(of_api, json!({"policies": []}));

    let del = s.admin(Method::DELETE, "/v1/policies/gold-u1", None).await;
    assert_eq!(del.0, 204);
    assert_eq!(hit(&s, "u1").await, (Code::Ok, None));
    let again = s.admin(Method::DELETE, "/v1/policies/gold-u1", None).await;
    assert_eq!(again.0, 404);
    assert_eq!(
        s.admin(Method::GET, "/v1/policies/gold-u1", None).await.0,
        404
    );
    s.shutdown().await;
}

#[tokio::test]
async fn rules_that_would_not_validate_are_refused_whole_with_the_validators_texts() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    let bad = json!({
        "domain": "tenants",
        "descriptor": [{"key": "client_key"}],
        "rate_limit": {"unit": "fortnight", "requests_per_unit": 1, "colour": "red"},
    });
    let (status, body) = put(&s, "bad", bad).await;
    assert_eq!(status, 422);
    let errors = body["errors"].as_array().unwrap();
    assert!(
        errors.contains(
            &json!({"field": "rate_limit.unit", "message": "invalid rate limit unit 'fortnight'"})
        ),
        "{body}"
    );
    assert!(
        errors.iter().any(|e| e["message"]
            .as_str()
            .unwrap()
            .contains("unknown key 'colour'")),
        "{body}"
    );
    // A domain the files configure: the validator's duplicate domain error, nothing applied.
    let (status, body) = put(&s, "clash", rule("api", "u1", 5)).await;
    assert_eq!(status, 422);
    assert_eq!(
        body["errors"][0]["message"],
        "policy-db/api: domain: duplicate domain 'api' in config file (already defined in api.yaml)"
    );
    // Two rules on one path: the second is refused.
    assert_eq!(put(&s, "one", rule("tenants", "u1", 5)).await.0, 201);
    let (status, body) = put(&s, "two", rule("tenants", "u1", 6)).await;
    assert_eq!(status, 422);
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("duplicate descriptor composite key"),
        "{body}"
    );
    let (_, all) = s.admin(Method::GET, "/v1/policies", None).await;
    let ids: Vec<&str> = all["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["one"]);
    assert_eq!(hit(&s, "u1").await, (Code::Ok, Some(5)));
    s.shutdown().await;
}

#[tokio::test]
async fn rules_are_in_service_after_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    assert_eq!(put(&s, "gold-u1", rule("tenants", "u1", 4)).await.0, 201);
    s.shutdown().await;
    let s = crate::support::policy::start(data.path(), &[]).await;
    assert_eq!(hit(&s, "u1").await, (Code::Ok, Some(4)));
    let unauthorised = call(
        &s,
        Method::PUT,
        "/v1/policies/x",
        None,
        Some(rule("tenants", "u2", 1)),
    )
    .await;
    assert_eq!(unauthorised.0, 401);
    s.shutdown().await;
}
