//! Hits no limit can hold, over real gRPC and HTTP on 127.0.0.1: a descriptor `hits_addend` of
//! 2^63 or 2^64 - 1 on a Redis fixed window (where `INCRBY` used to fail in the script, and
//! three such calls opened the breaker for everyone) is a plain denial on every edge — gRPC,
//! `/json` and `/check` — while `/healthcheck` stays 200 and other clients are decided exactly by
//! Redis; on token and leaky buckets (memory, Redis and Cluster) the denial's `Retry-After` is what
//! the bucket can refill, not 117 000 years, and the key is untouched.

use std::time::Duration;

use crate::support::redis::RedisServer;
use crate::support::*;
use serde_json::{Value, json};

/// 2^63 and 2^64 - 1: the smallest `INCRBY` refused, and the largest `u64`.
const HUGE: [u64; 2] = [1 << 63, u64::MAX];

const CFG: &str = r#"
domain: api
descriptors:
  - key: client_key
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 30}
  - key: tb
    rate_limit: {unit: minute, requests_per_unit: 30, algorithm: token_bucket}
  - key: lb
    rate_limit: {unit: minute, requests_per_unit: 30, algorithm: leaky_bucket}
"#;

/// gRPC: one descriptor `key`=`value` claiming `hits`; the overall code.
async fn grpc(s: &TestServer, key: &str, value: &str, hits: u64) -> Code {
    let mut req = request("api", &[&[(key, value)]]);
    req.descriptors[0].hits_addend = Some(hits);
    overall(&s.call(req).await.expect("a decision, not an error"))
}

/// `/json`: the same; the HTTP status and the overall code.
async fn json_api(s: &TestServer, key: &str, value: &str, hits: u64) -> (u16, Value) {
    let body = json!({
        "domain": "api",
        "descriptors": [{"entries": [{"key": key, "value": value}], "hitsAddend": hits}],
    });
    let r = s.post("/json", body.to_string()).await;
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

/// `/check` for client `value` with one extra descriptor claiming `hits`: status, `Retry-After`.
async fn check(s: &TestServer, key: &str, value: &str, hits: u64) -> (u16, Option<u64>) {
    let body = json!({
        "client_key": value,
        "descriptors": [{"entries": [{"key": key, "value": value}], "hitsAddend": hits}],
    });
    let c = s.check(&body).await;
    (c.status, c.retry_after().map(|v| v.parse().unwrap()))
}

async fn healthcheck(s: &TestServer) -> u16 {
    let r = s.http.get(s.http_url("/healthcheck")).send().await.unwrap();
    r.status().as_u16()
}

#[tokio::test]
async fn huge_hits_on_a_redis_fixed_window_are_denials_not_a_breaker_trip() {
    require!(Redis);
    let redis = RedisServer::start();
    let s = TestServer::start_on(&[("api.yaml", CFG)], &[], Some(&redis)).await;
    // 30 s into a minute: the attackers' windows end in 30 s.
    s.set_time(T0 - T0 % 60 + 30);
    // Four attackers per edge and number, far past the breaker's consecutive failures.
    for (i, hits) in HUGE.into_iter().enumerate() {
        for n in 0..4 {
            let who = format!("attacker-{i}-{n}");
            assert_eq!(
                grpc(&s, "user", &who, hits).await,
                Code::OverLimit,
                "gRPC {hits}"
            );
            let (status, v) = json_api(&s, "user", &format!("json-{who}"), hits).await;
            assert_eq!(
                (status, v["overallCode"].as_str()),
                (429, Some("OVER_LIMIT"))
            );
            let (status, retry) = check(&s, "user", &format!("check-{who}"), hits).await;
            assert_eq!(status, 429, "/check {hits}");
            // The rest of the attacker's own window, never more.
            let retry = retry.expect("a denial says when to retry");
            assert!((1..=30).contains(&retry), "{retry}");
            assert_eq!(healthcheck(&s).await, 200, "health does not flip");
        }
    }
    // Another client is decided by Redis, exactly: 30 admitted, the 31st denied.
    for n in 0..30 {
        assert_eq!(grpc(&s, "user", "bob", 1).await, Code::Ok, "call {n}");
    }
    assert_eq!(grpc(&s, "user", "bob", 1).await, Code::OverLimit);
    // The counter stopped at the limit + 1 per call: nothing near INCRBY's range.
    // The gRPC attacker's own key, not its `json-` and `check-` namesakes (SCAN's order is the
    // hash table's, so the first match may be either).
    let keys = redis.cli(&["--scan", "--pattern", "*attacker-1-0*"]);
    let key = keys
        .lines()
        .find(|k| !k.contains("json-") && !k.contains("check-"))
        .expect("the attacker's counter")
        .to_owned();
    let count: u64 = redis.cli(&["GET", &key]).trim().parse().unwrap();
    assert_eq!(count, 31);
    // The attacker's key ends with its window.
    s.advance(Duration::from_secs(30));
    assert_eq!(grpc(&s, "user", "attacker-1-0", 30).await, Code::Ok);
    assert_eq!(healthcheck(&s).await, 200);
}

on_every_store!(huge_hits_on_buckets_retry_within_a_refill);

async fn huge_hits_on_buckets_retry_within_a_refill(store: StoreKind) {
    let s = TestServer::start_with_store(&[("api.yaml", CFG)], &[], store).await;
    s.set_time(T0);
    for key in ["tb", "lb"] {
        for hits in HUGE {
            let (status, retry) = check(&s, key, "victim", hits).await;
            assert_eq!(status, 429, "{key} {hits}");
            // 30 a minute with a burst of 30: one hit per 2 s, so the burst plus one refills
            // within 62 s.
            let retry = retry.expect("a denial says when to retry");
            assert!(
                (1..=62).contains(&retry),
                "{key} {hits}: Retry-After {retry}"
            );
        }
        // The denied hits took nothing: the victim still has its whole burst.
        for n in 0..30 {
            assert_eq!(grpc(&s, key, "victim", 1).await, Code::Ok, "{key} call {n}");
        }
        assert_eq!(grpc(&s, key, "victim", 1).await, Code::OverLimit, "{key}");
    }
}
