//! A rule of the policy database with a `when:` condition on its limit: stored and listed as
//! written, compiled with the files and enforced only when it holds; a bad condition is refused
//! at `PUT` (422) naming `rate_limit.when` and its position.

use crate::support::policy::start;
use crate::support::{Code, TestServer, request, st};
use reqwest::Method;
use serde_json::json;

/// (code, `requests_per_unit` of the current limit, if any) of one call of `hits` hits.
async fn hit(s: &TestServer, hits: u32) -> (Code, Option<u32>) {
    let mut req = request("tenants", &[&[("client_key", "u1")]]);
    req.hits_addend = hits;
    let r = s.call(req).await.unwrap();
    let (code, limit, _) = st(&r, 0);
    (code, limit.map(|l| l.0))
}

#[tokio::test]
async fn a_rule_with_when_round_trips_and_applies_only_when_it_holds() {
    let data = tempfile::tempdir().unwrap();
    let s = start(data.path(), &[]).await;
    let when = "hits_addend >= 5 && descriptor.client_key.startsWith(\"u\")";
    let rule = json!({
        "domain": "tenants",
        "descriptor": [{"key": "client_key", "value": "u1"}],
        "rate_limit": {"unit": "minute", "requests_per_unit": 6, "when": when},
    });
    let (status, body) = s
        .admin(Method::PUT, "/v1/policies/big-calls", Some(rule))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, one) = s.admin(Method::GET, "/v1/policies/big-calls", None).await;
    assert_eq!(
        (status, &one["rate_limit"]["when"]),
        (200, &json!(when)),
        "{one}"
    );
    // Small calls: the condition does not hold, the descriptor is not limited.
    assert_eq!(hit(&s, 1).await, (Code::Ok, None));
    // Big calls: it holds; 6 a minute fit one call of 5, not a second.
    assert_eq!(hit(&s, 5).await, (Code::Ok, Some(6)));
    assert_eq!(hit(&s, 5).await, (Code::OverLimit, Some(6)));
    assert_eq!(hit(&s, 1).await, (Code::Ok, None));

    let bad = json!({
        "domain": "tenants",
        "descriptor": [{"key": "client_key", "value": "u2"}],
        "rate_limit": {"unit": "minute", "requests_per_unit": 6, "when": "hits > 5"},
    });
    let (status, body) = s.admin(Method::PUT, "/v1/policies/bad", Some(bad)).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["errors"][0]["field"], "rate_limit.when", "{body}");
    let message = body["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("unknown variable 'hits' (expected descriptor, domain or hits_addend) at line 1, column 1"),
        "{message}"
    );
}
