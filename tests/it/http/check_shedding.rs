//! Priority classes and the soft-breach warning over HTTP: `POST /check` sends the class as a
//! descriptor entry and carries `x-ratelimit-soft-breach` from the limit's ratio on, on 200 and
//! 429; `/json`'s 200 carries the warning too.

use serde_json::json;

use crate::support::*;

const API: &str = "domain: api
descriptors:
  - key: client_key
    rate_limit: {unit: minute, requests_per_unit: 10, soft: {breach_ratio: 0.7}}
  - key: service
    value: search
    rate_limit: {unit: minute, requests_per_unit: 10, priorities: {critical: 1.0, read: 0.5}}
";

#[tokio::test]
async fn check_warns_from_the_breach_ratio_on() {
    let s = TestServer::start(&[("api.yaml", API)], &[]).await;
    for usage in 1..=11 {
        let r = s.check(&json!({"client_key": "c1"})).await;
        assert_eq!(
            r.status,
            if usage <= 10 { 200 } else { 429 },
            "usage {usage}"
        );
        let warned = r.header("x-ratelimit-soft-breach") == Some("true");
        assert_eq!(warned, usage >= 7, "usage {usage}");
    }
}

#[tokio::test]
async fn check_sheds_by_the_class_entry_of_its_descriptors() {
    let s = TestServer::start(&[("api.yaml", API)], &[]).await;
    // Each call from another client, so only the shared search capacity decides.
    let call = |n: usize, class: &str| {
        json!({"client_key": format!("client-{n}"), "descriptors": [{"entries": [
            {"key": "service", "value": "search"}, {"key": "priority", "value": class}]}]})
    };
    let mut n = 0;
    let mut statuses = Vec::new();
    for class in ["read"; 7].into_iter().chain(["critical"; 7]) {
        n += 1;
        statuses.push(s.check(&call(n, class)).await.status);
    }
    let (reads, critical) = statuses.split_at(7);
    assert_eq!(
        reads,
        [200, 200, 200, 200, 200, 429, 429],
        "reads stop at 50%"
    );
    assert_eq!(
        critical,
        [200, 200, 200, 200, 200, 429, 429],
        "critical gets the rest"
    );
}

#[tokio::test]
async fn json_200_carries_the_warning() {
    let s = TestServer::start(&[("api.yaml", API)], &[]).await;
    let body = r#"{"domain":"api","descriptors":[{"entries":[{"key":"client_key","value":"j"}]}]}"#;
    for usage in 1..=8 {
        let r = s.post("/json", body).await;
        assert_eq!(r.status(), 200);
        let warned = r.headers().get("x-ratelimit-soft-breach").is_some();
        assert_eq!(warned, usage >= 7, "usage {usage}");
    }
}
