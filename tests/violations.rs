//! The violation log (issue 17) against the real service: denials driven over real gRPC land in
//! `rate_limit_violations` on a real SQLite file and a real PostgreSQL, and read back through
//! `GET /v1/violations` with the right fields, newest first, filtered and paginated without
//! duplicates or gaps; the token is required; retention deletes old rows (manual clock); a deny
//! storm on a tiny queue drops and counts records while every request is still answered.

mod common;

use std::time::Duration;

use common::policy::{TOKEN, call};
use common::postgres::Postgres;
use common::{Code, T0, TestServer, st};
use ratelimitd::clock::Stopwatch;
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
        let (status, body) = call(s, Method::GET, path, Some(TOKEN), None).await;
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
    // 2 per minute: user:1 is over 3 times, user:2 once, one second apart.
    deny(s, "user:1", 5).await;
    s.advance(Duration::from_secs(1));
    deny(s, "user:2", 3).await;
    let all = wait_for(s, "/v1/violations", 4).await;
    let v = &all["violations"];
    assert_eq!(v[0]["client_key"], "user:2", "newest first: {all}");
    let first = &v[3];
    assert_eq!(first["domain"], "api");
    assert_eq!(
        first["descriptor"],
        json!([{"key": "client_key", "value": "user:1"}])
    );
    assert_eq!(
        first["limit"],
        json!({"name": "api.client_key", "requests_per_unit": 2, "unit": "minute"})
    );
    assert_eq!(first["hits"].as_u64(), Some(1));
    // The three denials of one instant come in id order; their counters were 3, 4 and 5.
    let mut counts: Vec<_> = (1..4).map(|i| v[i]["count"].as_u64().unwrap()).collect();
    counts.sort();
    assert_eq!(counts, [3, 4, 5]);
    assert_eq!(
        (first["source"].as_str(), first["shadow"].as_bool()),
        (Some("store"), Some(false))
    );
    assert_eq!(first["instance"], "test-1");
    assert_eq!(first["at"], "1970-01-01T00:20:34.000000Z");
    assert_eq!(all["next_cursor"], Value::Null);

    // Filters.
    wait_for(s, "/v1/violations?client_key=user:1", 3).await;
    wait_for(s, "/v1/violations?domain=api&client_key=user:2", 1).await;
    wait_for(s, "/v1/violations?domain=other", 0).await;
    wait_for(s, "/v1/violations?since=1970-01-01T00:20:35Z", 1).await;
    wait_for(s, "/v1/violations?until=1970-01-01T00:20:35Z", 3).await;

    // Pages of 3, then 1: together exactly the 4 records, in order.
    let p1 = wait_for(s, "/v1/violations?limit=3", 3).await;
    let cursor = p1["next_cursor"].as_str().expect("a next page").to_string();
    let p2 = wait_for(s, &format!("/v1/violations?limit=3&cursor={cursor}"), 1).await;
    assert_eq!(p2["next_cursor"], Value::Null);
    let ids = |p: &Value| -> Vec<Value> {
        p["violations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].clone())
            .collect()
    };
    let mut paged = ids(&p1);
    paged.extend(ids(&p2));
    assert_eq!(paged, ids(&all));

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
    let (status, body) = call(
        s,
        Method::GET,
        "/v1/violations?limit=5000&since=x&cursor=zz",
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["errors"].as_array().unwrap().len(), 3, "{body}");

    // Retention (7 days): eight days later the old rows go, a new one stays.
    s.set_time(T0 + 8 * 86_400);
    deny(s, "user:3", 3).await;
    let left = wait_for(s, "/v1/violations", 1).await;
    assert_eq!(left["violations"][0]["client_key"], "user:3");
}

#[tokio::test]
async fn violations_are_written_and_read_back_on_sqlite() {
    let data = tempfile::tempdir().unwrap();
    let s = common::policy::start(data.path(), &FAST).await;
    scenario(&s).await;
    s.shutdown().await;
}

#[tokio::test]
async fn violations_are_written_and_read_back_on_postgres() {
    let pg = Postgres::start();
    let url = pg.url();
    let unused = tempfile::tempdir().unwrap();
    let mut env = FAST.to_vec();
    env.push(("POLICY_DB_URL", url.as_str()));
    let s = common::policy::start(unused.path(), &env).await;
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
    let s = common::policy::start(data.path(), &env).await;
    let calls = (0..200).map(|_| s.rl("api", &[&[("client_key", "user:9")]]));
    let answers = futures_util::future::join_all(calls).await;
    let over = answers
        .iter()
        .filter(|r| st(r, 0).0 == Code::OverLimit)
        .count();
    assert_eq!(over, 198, "two fit the limit, every other one is denied");
    let addr = s.running().metrics_addr.unwrap();
    let text = s
        .http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let dropped: u64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("ratelimitd_violations_dropped ")?
                .parse()
                .ok()
        })
        .expect("the dropped counter is exported");
    assert!(dropped > 0, "{text}");
    s.shutdown().await;
}

/// `VIOLATIONS_LOG=json` without any database: each over-limit descriptor is one JSON line on the
/// binary's output, with the record's fields; allowed requests write none.
#[tokio::test]
async fn json_lines_without_a_database_carry_each_violation() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("api.yaml"), common::policy::CFG_API).unwrap();
    let env = [
        ("RATELIMITD_CONFIG", dir.path().display().to_string()),
        ("VIOLATIONS_LOG", "json".into()),
        ("VIOLATIONS_BATCH_DELAY", "10ms".into()),
        ("INSTANCE_ID", "json-1".into()),
    ];
    let env: Vec<(String, String)> = env.into_iter().map(|(k, v)| (k.into(), v)).collect();
    let p = common::process::spawn(&env);
    let client = reqwest::Client::new();
    let body =
        r#"{"domain":"api","descriptors":[{"entries":[{"key":"client_key","value":"u7"}]}]}"#;
    for _ in 0..4 {
        let url = format!("http://{}/json", p.http_addr);
        client.post(url).body(body).send().await.unwrap();
    }
    // 2 per minute: the third and fourth calls are over.
    let mut records = Vec::new();
    let watch = Stopwatch::start();
    while let Some(left) = Duration::from_secs(5).checked_sub(watch.elapsed()) {
        let Ok(line) = p.lines.recv_timeout(left) else {
            break;
        };
        let v: Value = serde_json::from_str(&line).unwrap_or_default();
        if v["id"].as_str().is_some_and(|id| id.starts_with("vi_")) {
            records.push(v);
        }
        if records.len() == 2 {
            break;
        }
    }
    assert_eq!(records.len(), 2, "{records:?}");
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
    let counts: Vec<_> = records.iter().map(|r| r["count"].as_u64()).collect();
    assert_eq!(counts, [Some(3), Some(4)]);
}
