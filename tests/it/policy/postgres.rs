//! The policy database on a real PostgreSQL shared by two ratelimitd instances: a
//! rule or override written through one is enforced by the other within 1 s — by LISTEN/NOTIFY,
//! since the refresh interval is left at 30 s — and deleting it restores the configured limit.
//! A database killed under gRPC requests fails none of them; the API answers 503 and recovers.
//! A database that is down when ratelimitd starts does not keep it from serving its files, and
//! its rules and overrides are in service once it answers.

use std::time::Duration;

use crate::support::policy::create;
use crate::support::postgres::{Postgres, shared_database};
use crate::support::require;
use crate::support::{TestServer, st};
use ratelimitd_core::clock::Stopwatch;
use reqwest::Method;

/// True when `probe` holds within `limit` (polled every 10 ms; a real deadline).
async fn within<F, Fut>(limit: Duration, mut probe: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let watch = Stopwatch::start();
    while watch.elapsed() < limit {
        if probe().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

async fn limit_name(s: &TestServer, domain: &str, value: &str) -> Option<(u32, String)> {
    let r = s.rl(domain, &[&[("client_key", value)]]).await;
    st(&r, 0).1.map(|(rpu, _, name)| (rpu, name))
}

#[tokio::test]
async fn two_instances_on_one_postgres_see_each_others_changes_within_a_second() {
    require!(Postgres);
    let url = shared_database();
    let unused = tempfile::tempdir().unwrap();
    let env = [("POLICY_DB_URL", url.as_str())];
    let a = crate::support::policy::start(unused.path(), &env).await;
    let b = crate::support::policy::start(unused.path(), &env).await;
    assert!(
        !unused.path().join("policy.db").exists(),
        "PostgreSQL, not SQLite"
    );

    let id = create(&a, "user:42", 5, "1970-01-01T00:30:00Z").await;
    let want = Some((5, format!("override:{id}")));
    let seen = within(Duration::from_secs(1), || async {
        limit_name(&b, "api", "user:42").await == want
    });
    assert!(
        seen.await,
        "the override reached the other instance within 1 s"
    );

    let rule = serde_json::json!({
        "domain": "tenants",
        "descriptor": [{"key": "client_key", "value": "u1"}],
        "rate_limit": {"unit": "minute", "requests_per_unit": 7},
    });
    let put = a.admin(Method::PUT, "/v1/policies/r1", Some(rule)).await;
    assert_eq!(put.0, 201, "{}", put.1);
    let seen = within(Duration::from_secs(1), || async {
        limit_name(&b, "tenants", "u1").await.map(|l| l.0) == Some(7)
    });
    assert!(seen.await, "the rule reached the other instance within 1 s");

    let path = format!("/v1/overrides/{id}");
    assert_eq!(b.admin(Method::DELETE, &path, None).await.0, 204);
    let restored = within(Duration::from_secs(1), || async {
        limit_name(&a, "api", "user:42").await == Some((2, String::new()))
    });
    assert!(
        restored.await,
        "the deletion reached the writer's peer within 1 s"
    );
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn a_killed_database_leaves_requests_alone_the_api_answers_503_and_recovers() {
    require!(Postgres);
    let mut pg = Postgres::start();
    let url = pg.url();
    let unused = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(unused.path(), &[("POLICY_DB_URL", url.as_str())]).await;
    let id = create(&s, "user:42", 1000, "1970-01-01T00:30:00Z").await;
    pg.kill();
    // Requests read the index in memory: every one keeps the override and none waits on the
    // database (the bound is generous for a loaded CI machine; a database wait would be ≥ 2 s).
    for i in 0..200 {
        let watch = Stopwatch::start();
        let got = limit_name(&s, "api", "user:42").await;
        assert_eq!(got, Some((1000, format!("override:{id}"))), "request {i}");
        assert!(
            watch.elapsed() < Duration::from_millis(500),
            "request {i} waited"
        );
    }
    let (status, body) = s.admin(Method::GET, "/v1/overrides", None).await;
    assert_eq!(status, 503, "{body}");
    pg.restart();
    let recovered = within(Duration::from_secs(15), || async {
        s.admin(Method::GET, "/v1/overrides", None).await.0 == 200
    });
    assert!(
        recovered.await,
        "the API answers again once the database is back"
    );
    create(&s, "user:43", 10, "1970-01-01T00:30:00Z").await;
    assert_eq!(
        limit_name(&s, "api", "user:43").await.map(|l| l.0),
        Some(10)
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_database_down_at_startup_is_picked_up_once_it_answers() {
    require!(Postgres);
    // Rules and overrides already in the database, written by a first instance.
    let mut pg = Postgres::start();
    let url = pg.url();
    let unused = tempfile::tempdir().unwrap();
    // The open retry's backoff is capped at the refresh interval.
    let env = [
        ("POLICY_DB_URL", url.as_str()),
        ("POLICY_REFRESH_INTERVAL", "2s"),
    ];
    let first = crate::support::policy::start(unused.path(), &env).await;
    let id = create(&first, "user:42", 5, "1970-01-01T00:30:00Z").await;
    first.shutdown().await;
    pg.kill();

    // Down at startup: the service starts at once, not ready, enforcing the last good copy the
    // first instance wrote; the API answers 503.
    let s = crate::support::policy::start(unused.path(), &env).await;
    assert!(!s.running().health.is_healthy());
    assert_eq!(
        limit_name(&s, "api", "user:42").await,
        Some((5, format!("override:{id}")))
    );
    let (status, body) = s.admin(Method::GET, "/v1/overrides", None).await;
    assert_eq!(status, 503, "{body}");

    pg.restart();
    // The opener retries with backoff (1 s, doubling up to POLICY_REFRESH_INTERVAL), then reads
    // the database and turns ready.
    let ready = within(Duration::from_secs(20), || async {
        s.running().health.is_healthy()
    });
    assert!(ready.await, "ready once the database answers");
    assert_eq!(
        limit_name(&s, "api", "user:42").await,
        Some((5, format!("override:{id}")))
    );
    let (status, body) = s
        .admin(Method::GET, &format!("/v1/overrides/{id}"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["requests_per_unit"], 5);
    s.shutdown().await;
}
