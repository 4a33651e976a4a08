//! The violation log against the real service: denials driven over real gRPC land in
//! `rate_limit_violations` on a real SQLite file and a real PostgreSQL, and read back through
//! `GET /v1/violations` with the right fields, newest first, filtered and paginated without
//! duplicates or gaps; repeated denials of one key between two writes are one row with their
//! request count; the token is required; retention deletes old rows (manual clock); a deny storm
//! of many keys on a tiny queue drops and counts records while every request is still answered.

use std::time::Duration;

use crate::support::policy::call;
use crate::support::postgres::shared_database;
use crate::support::require;
use crate::support::{Code, T0, TestServer, st};
use ratelimitd_core::clock::Stopwatch;
use reqwest::Method;
use serde_json::{Value, json};

const FAST: [(&str, &str); 3] = [
    ("VIOLATIONS_BATCH_DELAY", "10ms"),
    ("VIOLATIONS_RETENTION_INTERVAL", "50ms"),
    ("INSTANCE_ID", "test-1"),
];

/// Polls `path` until its `violations` has `n` records (bounded: 10 s).
async fn wait_for(s: &TestServer, path: &str, n: usize) -> Value {
    let watch = Stopwatch::start();
    loop {
        let (status, body) = s.admin(Method::GET, path, None).await;
        assert_eq!(status, 200, "{body}");
        if body["violations"].as_array().unwrap().len() == n {
            return body;
        }
        assert!(watch.elapsed() < Duration::from_secs(10), "{path}: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn deny(s: &TestServer, value: &str, times: usize) {
    for _ in 0..times {
        s.rl("api", &[&[("client_key", value)]]).await;
    }
}

async fn scenario(s: &TestServer) {
    // 2 per minute: user:1 is over 3 times; one second later user:2 once and user:3 twice.
    // Denials of one key before the writer runs are one row; the writer runs once the (manual)
    // clock has moved by the batch delay.
    deny(s, "user:1", 5).await;
    s.advance(Duration::from_secs(1));
    // The writer's next tick writes user:1's row; wait for it, so that the denials below cannot
    // be split by that write (then they wait for the next move of the clock, all together).
    wait_for(s, "/v1/violations", 1).await;
    deny(s, "user:2", 3).await;
    deny(s, "user:3", 4).await;
    s.advance(Duration::from_millis(10));
    let all = wait_for(s, "/v1/violations", 3).await;
    let v = &all["violations"];
    let mut newest: Vec<_> = (0..2).map(|i| v[i]["client_key"].as_str()).collect();
    newest.sort();
    assert_eq!(
        newest,
        [Some("user:2"), Some("user:3")],
        "newest first: {all}"
    );
    let first = &v[2];
    assert_eq!(first["domain"], "api");
    assert_eq!(
        first["descriptor"],
        json!([{"key": "client_key", "value": "user:1"}])
    );
    assert_eq!(
        first["limit"],
        json!({"name": "api.client_key", "requests_per_unit": 2, "unit": "minute"})
    );
    // The three denials of one instant are one row: 3 requests, their hits summed, the last
    // counter (5).
    assert_eq!(first["requests"].as_u64(), Some(3), "{first}");
    assert_eq!(first["hits"].as_u64(), Some(3));
    assert_eq!(first["count"].as_u64(), Some(5));
    let by_key = |k: &str| v.as_array().unwrap().iter().find(|r| r["client_key"] == k);
    let (u2, u3) = (by_key("user:2").unwrap(), by_key("user:3").unwrap());
    assert_eq!(
        (u2["requests"].as_u64(), u2["count"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(
        (u3["requests"].as_u64(), u3["count"].as_u64()),
        (Some(2), Some(4))
    );
    assert_eq!(
        (first["source"].as_str(), first["shadow"].as_bool()),
        (Some("store"), Some(false))
    );
    assert_eq!(first["instance"], "test-1");
    assert_eq!(first["at"], "1970-01-01T00:20:34.000000Z");
    assert_eq!(first["last_at"], "1970-01-01T00:20:34.000000Z");
    assert_eq!(u3["last_at"], "1970-01-01T00:20:35.000000Z");
    assert_eq!(all["next_cursor"], Value::Null);

    // Filters.
    wait_for(s, "/v1/violations?client_key=user:1", 1).await;
    wait_for(s, "/v1/violations?domain=api&client_key=user:2", 1).await;
    wait_for(s, "/v1/violations?domain=other", 0).await;
    wait_for(s, "/v1/violations?since=1970-01-01T00:20:35Z", 2).await;
    wait_for(s, "/v1/violations?until=1970-01-01T00:20:35Z", 1).await;

    // Pages of 1: together exactly the 3 rows, in order; the first cursor lies between the two
    // rows that share their time.
    let mut paged = Vec::new();
    let mut path = "/v1/violations?limit=1".to_string();
    for page in 0..3 {
        let p = wait_for(s, &path, 1).await;
        paged.push(p["violations"][0]["id"].clone());
        let next = p["next_cursor"].as_str();
        if page < 2 {
            let c = next.unwrap_or_else(|| panic!("a next page after page {page}: {p}"));
            path = format!("/v1/violations?limit=1&cursor={c}");
        } else {
            assert_eq!(next, None, "no page after the third: {p}");
        }
    }
    let ids: Vec<Value> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].clone())
        .collect();
    assert_eq!(paged, ids);

    // Token required; bad parameters are 422 with every error.
    assert_eq!(
        call(s, Method::GET, "/v1/violations", None, None).await.0,
        401
    );
    assert_eq!(
        call(s, Method::GET, "/v1/violations", Some("wrong"), None)
            .await
            .0,
        401
    );
    let (status, body) = s
        .admin(
            Method::GET,
            "/v1/violations?limit=5000&since=x&cursor=zz",
            None,
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["errors"].as_array().unwrap().len(), 3, "{body}");

    // Retention (7 days): eight days later the old rows go, a new one stays.
    s.set_time(T0 + 8 * 86_400);
    deny(s, "user:4", 3).await;
    s.advance(Duration::from_millis(10));
    let left = wait_for(s, "/v1/violations", 1).await;
    assert_eq!(left["violations"][0]["client_key"], "user:4");
}

#[tokio::test]
async fn violations_are_written_and_read_back_on_sqlite() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &FAST).await;
    scenario(&s).await;
    s.shutdown().await;
}

#[tokio::test]
async fn violations_are_written_and_read_back_on_postgres() {
    require!(Postgres);
    let url = shared_database();
    let unused = tempfile::tempdir().unwrap();
    let mut env = FAST.to_vec();
    env.push(("POLICY_DB_URL", url.as_str()));
    let s = crate::support::policy::start(unused.path(), &env).await;
    scenario(&s).await;
    s.shutdown().await;
}

#[tokio::test]
async fn a_deny_storm_on_a_tiny_queue_drops_and_counts_and_answers_every_request() {
    let data = tempfile::tempdir().unwrap();
    let env = [
        ("VIOLATIONS_QUEUE_SIZE", "1"),
        ("VIOLATIONS_BATCH_DELAY", "1s"),
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = crate::support::policy::start(data.path(), &env).await;
    // 50 clients, 4 calls each: 2 allowed and 2 denied per client. The (manual) clock stays put,
    // so the writer never takes the map: the first denied client's record holds its one place
    // and counts both its denials; every denial of the 49 others is dropped and counted.
    let keys: Vec<String> = (0..50).map(|i| format!("user:{i}")).collect();
    let server = &s;
    let calls = keys
        .iter()
        .cycle()
        .take(200)
        .map(|k| async move { server.rl("api", &[&[("client_key", k.as_str())]]).await });
    let answers = futures_util::future::join_all(calls).await;
    let over = answers
        .iter()
        .filter(|r| st(r, 0).0 == Code::OverLimit)
        .count();
    assert_eq!(
        over, 100,
        "two per client fit the limit, every other call is denied"
    );
    let text = s.scrape().await;
    assert_eq!(
        text.value("ratelimitd_violations_dropped_total"),
        98,
        "{text}"
    );
    s.shutdown().await;
}

/// `VIOLATIONS_LOG=json` without any database: the over-limit descriptors are JSON lines on the
/// binary's output, with the record's fields and how many denials each covers; allowed requests
/// write none.
#[tokio::test]
async fn json_lines_without_a_database_carry_each_violation() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("api.yaml"), crate::support::policy::CFG_API).unwrap();
    let env = [
        ("RATELIMITD_CONFIG", dir.path().display().to_string()),
        ("VIOLATIONS_LOG", "json".into()),
        ("VIOLATIONS_BATCH_DELAY", "10ms".into()),
        ("INSTANCE_ID", "json-1".into()),
    ];
    let env: Vec<(String, String)> = env.into_iter().map(|(k, v)| (k.into(), v)).collect();
    let p = crate::support::process::spawn(&env);
    let client = reqwest::Client::new();
    let body =
        r#"{"domain":"api","descriptors":[{"entries":[{"key":"client_key","value":"u7"}]}]}"#;
    for _ in 0..4 {
        let url = format!("http://{}/json", p.http_addr);
        client.post(url).body(body).send().await.unwrap();
    }
    // 2 per minute: the third and fourth calls are over. They are one line with 2 requests,
    // or two lines of 1 when the writer ran between them (real clock): read until both are in.
    let mut records = Vec::new();
    let requests =
        |records: &[Value]| -> u64 { records.iter().filter_map(|r| r["requests"].as_u64()).sum() };
    let watch = Stopwatch::start();
    while let Some(left) = Duration::from_secs(5).checked_sub(watch.elapsed()) {
        let Ok(line) = p.lines.recv_timeout(left) else {
            break;
        };
        let v: Value = serde_json::from_str(&line).unwrap_or_default();
        if v["id"].as_str().is_some_and(|id| id.starts_with("vi_")) {
            records.push(v);
        }
        if requests(&records) >= 2 {
            break;
        }
    }
    assert_eq!(requests(&records), 2, "{records:?}");
    let hits: u64 = records.iter().filter_map(|r| r["hits"].as_u64()).sum();
    assert_eq!(hits, 2, "{records:?}");
    let r = &records[0];
    assert_eq!(r["domain"], "api");
    assert_eq!(r["client_key"], "u7");
    assert_eq!(
        r["descriptor"],
        json!([{"key": "client_key", "value": "u7"}])
    );
    assert_eq!(r["limit"]["requests_per_unit"], 2);
    assert_eq!(r["limit"]["unit"], "minute");
    assert_eq!(r["source"], "store");
    assert_eq!(r["shadow"], false);
    assert_eq!(r["instance"], "json-1");
    assert!(
        r["last_at"]
            .as_str()
            .is_some_and(|t| t >= r["at"].as_str().unwrap())
    );
    // The last line's counter is the fourth call's.
    assert_eq!(records.last().unwrap()["count"].as_u64(), Some(4));
}
