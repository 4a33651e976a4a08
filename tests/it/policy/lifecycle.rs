//! The stored overrides' and rules' life against the real service on a real SQLite file: the
//! override list is read a page at a time (every override exactly once, ties on the creation time
//! included), expired overrides are purged on the service clock once the retention passed, and a
//! configuration file that later defines a rule's domain loads (the file wins) with the clash
//! reported instead of failing the reload.

use std::collections::HashSet;

use crate::support::policy::create;
use crate::support::reload::{eventually, wait_limit};
use crate::support::{Code, st};
use reqwest::Method;
use serde_json::json;

/// 1970-01-01T00:30:00Z, second 1800 (T0 is 1234).
const UNTIL: &str = "1970-01-01T00:30:00Z";
/// 1970-01-02T00:00:00Z.
const LATER: &str = "1970-01-02T00:00:00Z";

#[tokio::test]
async fn paging_walks_every_override_exactly_once_newest_first() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    let mut ids = Vec::new();
    // Three created in the same microsecond of the manual clock: the id breaks the tie.
    for i in 0..7 {
        if i % 3 == 0 {
            s.advance(std::time::Duration::from_secs(1));
        }
        ids.push(create(&s, &format!("user:{i}"), 5, UNTIL).await);
    }
    let (mut seen, mut pages, mut cursor) = (Vec::new(), 0, None::<String>);
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/overrides?limit=3&cursor={c}"),
            None => "/v1/overrides?limit=3".to_string(),
        };
        let (status, page) = s.admin(Method::GET, &path, None).await;
        assert_eq!(status, 200, "{page}");
        let items = page["overrides"].as_array().unwrap();
        assert!(items.len() <= 3, "{page}");
        seen.extend(items.iter().map(|o| o["id"].as_str().unwrap().to_string()));
        pages += 1;
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 7, "{seen:?}");
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 7, "no repeats");
    assert_eq!(seen.iter().collect::<HashSet<_>>(), ids.iter().collect());
    assert_eq!(seen[0], ids[6], "newest first");
    let (status, errors) = s.admin(Method::GET, "/v1/overrides?limit=1001", None).await;
    assert_eq!(status, 422, "{errors}");
    assert_eq!(errors["errors"][0]["field"], "limit");
    s.shutdown().await;
}

#[tokio::test]
async fn expired_overrides_are_purged_once_the_retention_passed_on_the_service_clock() {
    let data = tempfile::tempdir().unwrap();
    let env = [
        ("POLICY_EXPIRED_RETENTION", "1h"),
        ("POLICY_PURGE_INTERVAL", "20ms"),
    ];
    let s = crate::support::policy::start(data.path(), &env).await;
    let short = create(&s, "user:1", 5, UNTIL).await;
    let long = create(&s, "user:2", 5, LATER).await;
    let listed = || async {
        let (_, list) = s.admin(Method::GET, "/v1/overrides", None).await;
        let items = list["overrides"].as_array().unwrap().clone();
        items
            .iter()
            .map(|o| o["id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    // Expired, but kept for the retention (for the audit trail).
    s.set_time(1800 + 3600);
    assert_eq!(listed().await.len(), 2);
    s.set_time(1800 + 3600 + 1);
    eventually("the expired override is purged", || async {
        listed().await == vec![long.clone()]
    })
    .await;
    assert_ne!(short, long);
    s.shutdown().await;
}

#[tokio::test]
async fn a_file_that_defines_a_rules_domain_loads_and_the_clash_is_reported() {
    let data = tempfile::tempdir().unwrap();
    let env = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = crate::support::policy::start(data.path(), &env).await;
    let rule = json!({
        "domain": "web",
        "descriptor": [{"key": "client_key", "value": "v"}],
        "rate_limit": {"unit": "minute", "requests_per_unit": 7},
    });
    let (status, body) = s.admin(Method::PUT, "/v1/policies/r1", Some(rule)).await;
    assert_eq!(status, 201, "{body}");
    wait_limit(&s, "web", "client_key", Some(7)).await;
    assert!(s.running().config.clashes().is_empty());
    // A file now defines domain `web` too: it loads (the file wins), the rule's domain is left
    // out and reported, and the other domain keeps loading with it.
    let web = "domain: web\ndescriptors:\n  - key: client_key\n    rate_limit: {unit: minute, requests_per_unit: 40}\n";
    crate::support::reload::replace(&s.dir.path().join("web.yaml"), web);
    wait_limit(&s, "web", "client_key", Some(40)).await;
    let clashes = s.running().config.clashes();
    assert_eq!(clashes.len(), 1, "{clashes:?}");
    assert_eq!(clashes[0].domain, "web");
    assert!(clashes[0].file.ends_with("web.yaml"), "{clashes:?}");
    assert_eq!(clashes[0].rules, "policy-db/web");
    assert_eq!(
        s.running().config.load_failures(),
        0,
        "the reload did not fail"
    );
    let r = s.rl("api", &[&[("client_key", "x")]]).await;
    assert_eq!(st(&r, 0).0, Code::Ok);
    // The file goes again: the rule is back in service and the clash is gone.
    std::fs::remove_file(s.dir.path().join("web.yaml")).unwrap();
    wait_limit(&s, "web", "client_key", Some(7)).await;
    assert!(s.running().config.clashes().is_empty());
    assert_eq!(shadowed(&s).await, 0);
    s.shutdown().await;
}

/// `ratelimitd_policy_rules_shadowed` as Prometheus exports it.
async fn shadowed(s: &crate::support::TestServer) -> u64 {
    s.scrape().await.value("ratelimitd_policy_rules_shadowed")
}
