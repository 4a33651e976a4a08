//! Stored overrides (time-limited, from the policy database) against the real service: written over
//! the admin API into a real SQLite file, enforced over real gRPC, gone exactly at `valid_until` by
//! the manual clock, listed in `/rlconfig`, and still there after a restart on the same data
//! directory.

use crate::support::policy::{CFG_API, TOKEN, create};
use crate::support::{Code, T0, TestServer, request, st};
use ratelimitd::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use reqwest::Method;

/// `valid_until` of the overrides below: 1970-01-01T00:30:00Z, i.e. second 1800 (T0 is 1234).
const UNTIL: &str = "1970-01-01T00:30:00Z";

/// (code, `requests_per_unit`, limit name) of one hit for `client_key=value`.
async fn hit(s: &TestServer, value: &str) -> (Code, u32, String) {
    let r = s.rl("api", &[&[("client_key", value)]]).await;
    let (code, limit, _) = st(&r, 0);
    let (rpu, _, name) = limit.expect("a current limit");
    (code, rpu, name)
}

#[tokio::test]
async fn an_override_replaces_the_configured_limit_until_valid_until_then_vanishes() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    assert_eq!(
        hit(&s, "user:42").await.1,
        2,
        "the configured limit before any override"
    );
    let id = create(&s, "user:42", 5, UNTIL).await;
    let name = format!("override:{id}");
    // Counted afresh under the override's rate: 4 more fit (one hit above was counted at 2/min
    // under the same key, since the window is the same minute).
    for i in 0..4 {
        assert_eq!(
            hit(&s, "user:42").await,
            (Code::Ok, 5, name.clone()),
            "hit {i}"
        );
    }
    assert_eq!(hit(&s, "user:42").await, (Code::OverLimit, 5, name.clone()));
    // Another client keeps the configured limit.
    assert_eq!(hit(&s, "user:7").await, (Code::Ok, 2, String::new()));
    let rlconfig = s.http.get(s.debug_url("/rlconfig")).bearer_auth(TOKEN);
    let text = rlconfig.send().await.unwrap().text().await.unwrap();
    assert!(
        text.contains(&format!(r#"# override: {id} domain="api" descriptor=[{{"key":"client_key","value":"user:42"}}] unit=MINUTE requests_per_unit=5 valid_until=1970-01-01T00:30:00.000000Z by="admin""#)),
        "{text}"
    );
    // A second before valid_until it applies; at valid_until exactly it is gone.
    s.set_time(1799);
    assert_eq!(hit(&s, "user:42").await.2, name);
    s.set_time(1800);
    assert_eq!(hit(&s, "user:42").await, (Code::Ok, 2, String::new()));
    let (status, list) = s.admin(Method::GET, "/v1/overrides", None).await;
    assert_eq!(status, 200);
    assert_eq!(list["overrides"][0]["id"], id.as_str());
    assert_eq!(list["overrides"][0]["active"], false);
    s.shutdown().await;
}

#[tokio::test]
async fn deleting_an_override_restores_the_configured_limit_and_keeps_the_counters() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    let id = create(&s, "user:42", 3, UNTIL).await;
    for _ in 0..3 {
        assert_eq!(hit(&s, "user:42").await.0, Code::Ok);
    }
    assert_eq!(hit(&s, "user:42").await.0, Code::OverLimit);
    let path = format!("/v1/overrides/{id}");
    assert_eq!(s.admin(Method::DELETE, &path, None).await.0, 204);
    // Same minute, same key: the 4 hits counted stay, so 2/min is over at once.
    assert_eq!(
        hit(&s, "user:42").await,
        (Code::OverLimit, 2, String::new())
    );
    let (status, body) = s.admin(Method::DELETE, &path, None).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"], format!("no override '{id}'"));
    let text = s.get_text(&s.debug_url("/rlconfig"), Some(TOKEN)).await;
    assert!(!text.contains("# override:"), "{text}");
    s.shutdown().await;
}

#[tokio::test]
async fn a_request_override_beats_a_stored_one() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    create(&s, "user:42", 5, UNTIL).await;
    let mut req = request("api", &[&[("client_key", "user:42")]]);
    req.descriptors[0].limit = Some(RateLimitOverride {
        requests_per_unit: 9,
        unit: 2, // MINUTE
    });
    let r = s.call(req).await.unwrap();
    assert_eq!(st(&r, 0).1.unwrap().0, 9);
    s.shutdown().await;
}

#[tokio::test]
async fn overrides_survive_a_restart_on_the_same_data_directory() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    let id = create(&s, "user:42", 5, UNTIL).await;
    s.shutdown().await;
    assert!(data.path().join("policy.db").is_file());
    let s = crate::support::policy::start(data.path(), &[]).await;
    assert_eq!(hit(&s, "user:42").await.2, format!("override:{id}"));
    assert_eq!(T0, 1234, "UNTIL is after the start time");
    s.shutdown().await;
    // The files-only service ignores the database.
    let s = TestServer::start(&[("api.yaml", CFG_API)], &[]).await;
    assert_eq!(hit(&s, "user:42").await.1, 2);
    s.shutdown().await;
}

/// Polls `probe` every 20 ms until it returns true, for at most `secs` seconds (a real deadline:
/// the refresh interval is wall time, not the manual clock).
async fn within<F, Fut>(secs: u64, mut probe: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let watch = ratelimitd_core::clock::Stopwatch::start();
    while watch.elapsed() < std::time::Duration::from_secs(secs) {
        if probe().await {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn an_instance_sharing_the_database_applies_changes_within_its_refresh_interval() {
    let data = tempfile::tempdir().unwrap();
    let fast = [("POLICY_REFRESH_INTERVAL", "200ms")];
    let writer = crate::support::policy::start(data.path(), &fast).await;
    let reader = crate::support::policy::start(data.path(), &fast).await;
    let id = create(&writer, "user:42", 5, UNTIL).await;
    let name = format!("override:{id}");
    assert!(within(3, || async { hit(&reader, "user:42").await.2 == name }).await);
    let rule = serde_json::json!({
        "domain": "tenants",
        "descriptor": [{"key": "client_key", "value": "u1"}],
        "rate_limit": {"unit": "minute", "requests_per_unit": 7},
    });
    let put = writer
        .admin(Method::PUT, "/v1/policies/r1", Some(rule))
        .await;
    assert_eq!(put.0, 201);
    let seen = || async {
        let r = reader.rl("tenants", &[&[("client_key", "u1")]]).await;
        st(&r, 0).1.map(|l| l.0) == Some(7)
    };
    assert!(within(3, seen).await);
    let path = format!("/v1/overrides/{id}");
    assert_eq!(writer.admin(Method::DELETE, &path, None).await.0, 204);
    assert!(within(3, || async { hit(&reader, "user:42").await.2.is_empty() }).await);
    writer.shutdown().await;
    reader.shutdown().await;
}

/// The in-memory index of stored overrides counts its lookups per domain: none while it holds
/// no override, then a hit for each descriptor an active override decided and a miss for each it
/// did not (an expired override misses too).
#[tokio::test]
async fn stored_override_lookups_are_counted_as_hits_and_misses() {
    let data = tempfile::tempdir().unwrap();
    let env = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = crate::support::policy::start(data.path(), &env).await;
    let counts = |m: &crate::support::scrape::Scrape| {
        let of = |which: &str| {
            m.count(&format!(
                "ratelimitd_stored_override_{which}_total{{domain=\"api\"}}"
            ))
        };
        (of("hits"), of("misses"))
    };
    hit(&s, "user:42").await;
    assert_eq!(
        counts(&s.scrape().await),
        (None, None),
        "no override, no lookup"
    );
    create(&s, "user:42", 5, UNTIL).await;
    for _ in 0..3 {
        hit(&s, "user:42").await;
    }
    hit(&s, "user:7").await;
    assert_eq!(counts(&s.scrape().await), (Some(3), Some(1)));
    s.set_time(1800);
    hit(&s, "user:42").await;
    assert_eq!(
        counts(&s.scrape().await),
        (Some(3), Some(2)),
        "expired: a miss"
    );
}
