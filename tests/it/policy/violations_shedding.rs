//! Violations of limits with priority classes or a soft zone, written to the real policy
//! database (SQLite, and PostgreSQL when installed) and read back through `GET /v1/violations`:
//! each record names the request's class and whether the denial was soft, and soft and hard
//! denials of one descriptor are separate records (manual clock, seeded random source).

use std::time::Duration;

use crate::support::policy::TOKEN;
use crate::support::postgres::shared_database;
use crate::support::{Code, TestServer, overall, require};
use ratelimitd_core::clock::Stopwatch;
use reqwest::Method;
use serde_json::Value;

const CFG: &str = "domain: api
descriptors:
  - key: client_key
    value: acme
    rate_limit:
      unit: minute
      requests_per_unit: 10
      priorities: {critical: 1.0, test: 0.5}
  - key: client_key
    value: soft
    rate_limit:
      unit: minute
      requests_per_unit: 4
      soft: {up_to: 2.0}
";

async fn start(data: &std::path::Path, db: Option<&str>) -> TestServer {
    let dir = data.display().to_string();
    let mut env = vec![
        ("POLICY_ENABLED", "true"),
        ("RATELIMITD_DATA_DIR", dir.as_str()),
        ("ADMIN_TOKEN", TOKEN),
        ("RATELIMITD_TEST_RANDOM_SEED", "27"),
        ("VIOLATIONS_BATCH_DELAY", "10ms"),
        // The scenario's minute starts with the server's clock: setting the clock after the start
        // would let the writer see the jump on its next tick and flush part of the scenario's
        // denials early, in a record of their own.
        ("RATELIMITD_TEST_MANUAL_CLOCK", "1260"),
    ];
    env.extend(db.map(|url| ("POLICY_DB_URL", url)));
    TestServer::start(&[("api.yaml", CFG)], &env).await
}

/// The records of `GET /v1/violations` once there are `n` (bounded: 10 s).
async fn records(s: &TestServer, n: usize) -> Vec<Value> {
    let watch = Stopwatch::start();
    loop {
        let (status, body) = s.admin(Method::GET, "/v1/violations", None).await;
        assert_eq!(status, 200, "{body}");
        let list = body["violations"].as_array().cloned().unwrap_or_default();
        if list.len() >= n {
            return list;
        }
        assert!(watch.elapsed() < Duration::from_secs(10), "{body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn scenario(s: &TestServer) {
    let hit = |entries: Vec<(&'static str, &'static str)>| async move {
        overall(&s.rl("api", &[&entries]).await)
    };
    // The test class is shed from 5 of 10: two shed denials.
    for n in 0..7 {
        let code = hit(vec![("client_key", "acme"), ("priority", "test")]).await;
        assert_eq!(code == Code::Ok, n < 5, "test hit {}", n + 1);
    }
    // The soft zone from 4 up to 8: some draws deny between 4 and 7 (soft), and once usage is
    // at 7 every hit is denied by the top of the zone (hard).
    let mut admitted = 0;
    for _ in 0..60 {
        admitted += usize::from(hit(vec![("client_key", "soft")]).await == Code::Ok);
    }
    assert_eq!(
        admitted, 7,
        "the soft zone of 4 up to 8 admits up to usage 7"
    );
    s.advance(Duration::from_millis(10));
    let list = records(s, 3).await;
    assert_eq!(list.len(), 3, "{list:?}");
    let find = |client: &str, soft: bool| {
        list.iter()
            .find(|r| r["client_key"] == client && r["soft"] == soft)
            .unwrap_or_else(|| panic!("no {client} record with soft {soft}: {list:?}"))
    };
    let shed = find("acme", false);
    assert_eq!(
        (shed["class"].as_str(), shed["requests"].as_u64()),
        (Some("test"), Some(2)),
        "{shed}"
    );
    let (soft, hard) = (find("soft", true), find("soft", false));
    assert_eq!(
        (&soft["class"], &hard["class"]),
        (&Value::Null, &Value::Null)
    );
    let (soft_n, hard_n) = (
        soft["requests"].as_u64().unwrap(),
        hard["requests"].as_u64().unwrap(),
    );
    assert_eq!(
        soft_n + hard_n,
        60 - 7,
        "every denial in one of the two records"
    );
    assert!(soft_n > 0 && hard_n > 0, "{soft_n} soft, {hard_n} hard");
}

#[tokio::test]
async fn violations_name_the_class_and_a_soft_denial_on_sqlite() {
    let data = tempfile::tempdir().unwrap();
    let s = start(data.path(), None).await;
    scenario(&s).await;
    s.shutdown().await;
}

#[tokio::test]
async fn violations_name_the_class_and_a_soft_denial_on_postgres() {
    require!(Postgres);
    let url = shared_database();
    let unused = tempfile::tempdir().unwrap();
    let s = start(unused.path(), Some(url.as_str())).await;
    scenario(&s).await;
    s.shutdown().await;
}
