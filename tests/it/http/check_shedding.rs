//! Priority classes and the soft-breach warning over HTTP: `POST /check` sends the class as a
//! descriptor entry or in its `priority` field (an entry wins) and carries `x-ratelimit-soft-breach` from the limit's ratio on, on 200 and
//! 429; `/json`'s 200 carries the warning too. `remaining` counts against the request's class's
//! share, and only a descriptor's first class entry counts.

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

const SHOP: &str = "domain: shop
descriptors:
  - key: client_key
    descriptors:
      - key: endpoint
        rate_limit: {unit: minute, requests_per_unit: 10, priorities: {critical: 1.0, read: 0.5}}
";

#[tokio::test]
async fn check_takes_the_class_from_its_priority_field_unless_an_entry_names_one() {
    let s = TestServer::start(&[("shop.yaml", SHOP)], &[]).await;
    let pay = |priority: Option<&str>| {
        let mut body = json!({"domain": "shop", "client_key": "p", "endpoint": "/pay"});
        if let Some(p) = priority {
            body["priority"] = json!(p);
        }
        body
    };
    let mut statuses = Vec::new();
    for priority in [None; 6].into_iter().chain([Some("critical"); 6]) {
        statuses.push(s.check(&pay(priority)).await.status);
    }
    let (default, critical) = statuses.split_at(6);
    // Without a class a request is the lowest (read): shed from 5 of 10.
    assert_eq!(default, [200, 200, 200, 200, 200, 429], "no priority");
    // `priority: critical` is admitted up to the full 10.
    assert_eq!(
        critical,
        [200, 200, 200, 200, 200, 429],
        "priority critical"
    );
    // An entry of the descriptor names the class: it wins over the field.
    let sent = json!({"domain": "shop", "client_key": "q", "priority": "critical",
        "descriptors": [{"entries": [{"key": "client_key", "value": "q"},
            {"key": "endpoint", "value": "/pay"}, {"key": "priority", "value": "read"}]}]});
    let statuses: Vec<u16> = futures_util::future::join_all((0..6).map(|_| s.check(&sent)))
        .await
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(
        statuses.iter().filter(|c| **c == 200).count(),
        5,
        "{statuses:?}"
    );
    // A priority that is no string is refused, naming the field.
    let r = s.check(&json!({"client_key": "p", "priority": 1})).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"], "invalid_field");
    assert_eq!(r.body["message"], "priority: must be a string");
}

#[tokio::test]
async fn remaining_counts_against_the_requests_class_and_later_class_entries_are_ignored() {
    let s = TestServer::start(&[("api.yaml", API)], &[]).await;
    let call = |classes: &[&str], details: bool| {
        let mut entries = vec![json!({"key": "service", "value": "search"})];
        entries.extend(
            classes
                .iter()
                .map(|c| json!({"key": "priority", "value": c})),
        );
        json!({"client_key": "one", "descriptors": [{"entries": entries}], "details": details})
    };
    for _ in 0..3 {
        assert_eq!(s.check(&call(&["critical"], false)).await.status, 200);
    }
    // 3 of 10 used: a read (half the limit) has 2 left, a critical call 7; the quota is the full
    // limit for both.
    let read = s.check(&call(&["read"], true)).await;
    let search = |r: &crate::support::check::Checked| r.body["limits"][1].clone();
    assert_eq!(
        (
            search(&read)["limit"].clone(),
            search(&read)["remaining"].clone()
        ),
        (json!(10), json!(1)),
        "{}",
        read.body
    );
    let critical = s.check(&call(&["critical"], true)).await;
    assert_eq!(search(&critical)["remaining"], 5, "{}", critical.body);
    // Usage 5: reads are shed. A second class entry is no fallback: the first names the class,
    // and an unknown first class gets the default (the lowest share, read), not the second.
    assert_eq!(
        s.check(&call(&["read", "critical"], false)).await.status,
        429
    );
    assert_eq!(
        s.check(&call(&["gold", "critical"], false)).await.status,
        429
    );
    assert_eq!(
        s.check(&call(&["critical", "read"], false)).await.status,
        200
    );
}
