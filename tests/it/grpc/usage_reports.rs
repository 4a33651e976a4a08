//! Usage reported after the response (`usage: report`, `POST /check`'s `report`) through the real
//! service, on every store, with the manual clock: the request-time check (`hits_addend: 0`)
//! charges nothing; a report always counts, even past the limit, and is answered OK with what is
//! left (0 in debt); the next check is refused until the window or the refill pays the debt back.
//! Go's statistics count a report's hits past the limit as `over_limit`, the rest as
//! `within_limit`, and `ratelimitd_usage_reported_total` counts every reported hit. Bad `/check` input counts nothing. Many reports from two instances on one Redis
//! lose none.

use std::sync::Arc;

use crate::support::leases;
use crate::support::redis::RedisServer;
use crate::support::*;
use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use serde_json::json;

/// 10 a minute per algorithm (buckets hold 10), every call with hits a usage report; `plain` is
/// a limit of its own for `/check`'s `report`.
const CFG: &str = "domain: u
descriptors:
  - {key: fw, rate_limit: {unit: minute, requests_per_unit: 10, usage: report}}
  - {key: sw, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window, usage: report}}
  - {key: sl, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_log, usage: report}}
  - {key: tb, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: token_bucket, burst: 10, usage: report}}
  - {key: lb, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: leaky_bucket, burst: 10, usage: report}}
  - {key: client_key, rate_limit: {unit: minute, requests_per_unit: 10}}
";

/// One call on `key` with `hits` (0: the request-time check).
async fn send(s: &TestServer, key: &str, hits: u64) -> RateLimitResponse {
    let mut req = request("u", &[&[(key, "tenant-a")]]);
    req.descriptors[0].hits_addend = Some(hits);
    s.call(req).await.expect("ShouldRateLimit succeeds")
}

/// (code, remaining) of the only descriptor.
fn answer(r: &RateLimitResponse) -> (Code, u32) {
    let (code, _, remaining) = st(r, 0);
    (code, remaining)
}

on_every_store!(a_report_goes_into_debt_and_the_window_pays_it_back);
async fn a_report_goes_into_debt_and_the_window_pays_it_back(store: StoreKind) {
    let s = TestServer::start_with_store(&[("u.yaml", CFG)], &[], store).await;
    // (key, seconds after the report when a check is still refused, when it passes again: the
    // check of 0 hits passes once the usage is back within the limit)
    let cases = [
        ("fw", 59, 60),
        ("sw", 61, 120),
        ("sl", 59, 60),
        ("tb", 89, 90),
        ("lb", 60, 61),
    ];
    for (i, (key, refused, admitted)) in cases.into_iter().enumerate() {
        let t0 = 1_200 + 600 * i as u64;
        s.set_time(t0);
        assert_eq!(answer(&send(&s, key, 0).await), (Code::Ok, 10), "{key}");
        assert_eq!(
            answer(&send(&s, key, 0).await),
            (Code::Ok, 10),
            "{key}: checks charge nothing"
        );
        // The report takes the key 15 past its limit: counted, OK, nothing left.
        assert_eq!(answer(&send(&s, key, 25).await), (Code::Ok, 0), "{key}");
        let r = send(&s, key, 0).await;
        assert_eq!(answer(&r).0, Code::OverLimit, "{key}: in debt");
        assert!(dur(&r, 0).is_some_and(|d| d >= 1), "{key}: {r:?}");
        s.set_time(t0 + refused);
        assert_eq!(
            answer(&send(&s, key, 0).await).0,
            Code::OverLimit,
            "{key} at +{refused}s"
        );
        s.set_time(t0 + admitted);
        assert_eq!(
            answer(&send(&s, key, 0).await).0,
            Code::Ok,
            "{key} at +{admitted}s"
        );
    }
}

on_every_store!(a_report_of_u64_max_is_clamped_and_still_answered);
async fn a_report_of_u64_max_is_clamped_and_still_answered(store: StoreKind) {
    let s = TestServer::start_with_store(&[("u.yaml", CFG)], &[], store).await;
    s.set_time(1_200);
    for key in ALGORITHM_KEYS {
        for _ in 0..2 {
            assert_eq!(
                answer(&send(&s, key, u64::MAX).await),
                (Code::Ok, 0),
                "{key}"
            );
        }
        assert_eq!(answer(&send(&s, key, 0).await).0, Code::OverLimit, "{key}");
    }
    // A fixed window's debt, however large, ends with its window.
    s.set_time(1_260);
    assert_eq!(answer(&send(&s, "fw", 0).await), (Code::Ok, 10));
}

on_every_store!(check_report_counts_past_the_limit);
async fn check_report_counts_past_the_limit(store: StoreKind) {
    let s = TestServer::start_with_store(&[("u.yaml", CFG)], &[], store).await;
    s.set_time(1_200);
    let c = s
        .check(&json!({"domain": "u", "client_key": "k", "cost": 0}))
        .await;
    assert_eq!((c.status, &c.body["remaining"]), (200, &json!(10)));
    // Without `report` a cost past the limit is refused and (a fixed window) counted, as in Go;
    // with it, it is counted and allowed.
    let c = s
        .check(&json!({"domain": "u", "client_key": "k", "cost": 25, "report": true}))
        .await;
    assert_eq!(c.status, 200, "{:?}", c.body);
    assert_eq!(
        (&c.body["allowed"], &c.body["remaining"]),
        (&json!(true), &json!(0))
    );
    let c = s
        .check(&json!({"domain": "u", "client_key": "k", "cost": 0}))
        .await;
    assert_eq!(c.status, 429, "in debt: {:?}", c.body);
    s.set_time(1_260);
    let c = s
        .check(&json!({"domain": "u", "client_key": "k", "cost": 0}))
        .await;
    assert_eq!(c.status, 200, "the window paid the debt back");
}

#[tokio::test]
async fn bad_report_input_is_refused_and_counts_nothing() {
    let s = TestServer::start(&[("u.yaml", CFG)], &[]).await;
    s.set_time(1_200);
    let bad = [
        (
            json!({"domain": "u", "client_key": "k", "cost": 1e20, "report": true}),
            "cost",
        ),
        (
            json!({"domain": "u", "client_key": "k", "cost": "700", "report": true}),
            "cost",
        ),
        (
            json!({"domain": "u", "client_key": "k", "cost": -5, "report": true}),
            "cost",
        ),
        (
            json!({"domain": "u", "client_key": "k", "cost": 7, "report": "yes"}),
            "report",
        ),
        (
            json!({"domain": "u", "client_key": "k", "cost": 7, "report": true, "release": true}),
            "report",
        ),
    ];
    for (body, field) in bad {
        let c = s.check(&body).await;
        assert_eq!(c.status, 400, "{body}: {:?}", c.body);
        let text = c.body.to_string();
        assert!(
            text.contains(field),
            "{body}: the error names {field}: {text}"
        );
    }
    let c = s
        .check(&json!({"domain": "u", "client_key": "k", "cost": 0}))
        .await;
    assert_eq!(
        (c.status, &c.body["remaining"]),
        (200, &json!(10)),
        "nothing was counted"
    );
}

#[tokio::test]
async fn a_report_counts_its_hits_past_the_limit_as_over_limit() {
    let env = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = TestServer::start(&[("u.yaml", CFG)], &env).await;
    s.set_time(1_200);
    for key in ["fw", "tb"] {
        send(&s, key, 0).await;
        send(&s, key, 4).await;
        send(&s, key, 21).await;
        send(&s, key, 3).await;
    }
    let m = s.scrape().await;
    for key in ["fw", "tb"] {
        let v = |stat: &str| {
            m.count(&format!(
                "ratelimit_service_rate_limit_{stat}{{domain=\"u\",key1=\"{key}\",key2=\"\"}}"
            ))
        };
        // 28 reported: 10 within the limit (4 + 6 of the 21), 18 past it (15 + 3).
        assert_eq!(v("total_hits"), Some(28), "{key}: {m}");
        assert_eq!(v("over_limit"), Some(18), "{key}");
        assert_eq!(v("within_limit"), Some(10), "{key}");
        let reported =
            format!("ratelimitd_usage_reported_total{{domain=\"u\",key1=\"{key}\",key2=\"\"}}");
        assert_eq!(m.count(&reported), Some(28), "{key}: {m}");
    }
}

#[tokio::test]
async fn no_report_is_lost_across_two_instances_on_one_redis() {
    require!(Redis);
    let redis = RedisServer::start();
    let env = [("CACHE_KEY_PREFIX", "both:")];
    let cfg = "domain: u
descriptors:
  - {key: fw, rate_limit: {unit: hour, requests_per_unit: 100, usage: report}}
";
    let a = Arc::new(TestServer::start_on(&[("u.yaml", cfg)], &env, Some(&redis)).await);
    let b = Arc::new(TestServer::start_on(&[("u.yaml", cfg)], &env, Some(&redis)).await);
    for s in [&a, &b] {
        s.set_time(3_600);
    }
    let mut tasks = Vec::new();
    for t in 0..16u64 {
        let s = if t % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let mut sum = 0;
            for i in 0..25u64 {
                // Reports of 1 to 37 hits, with request-time checks in between.
                let hits = 1 + (t * 31 + i * 7) % 37;
                assert_eq!(answer(&send(&s, "fw", hits).await).0, Code::Ok);
                sum += hits;
                send(&s, "fw", 0).await;
            }
            sum
        }));
    }
    let mut sum = 0;
    for t in tasks {
        sum += tokio::time::timeout(std::time::Duration::from_secs(120), t)
            .await
            .expect("the reports finish")
            .expect("no task panics");
    }
    assert!(sum > 100, "the reports went into debt: {sum}");
    assert_eq!(
        leases::counter(&redis, "tenant-a"),
        sum,
        "every report counted once"
    );
}

#[tokio::test]
async fn a_report_passes_the_local_cache_and_stop_increment() {
    require!(Redis);
    let redis = RedisServer::start();
    let env = [
        ("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true"),
        ("LOCAL_CACHE_SIZE_IN_BYTES", "1000000"),
    ];
    let s = TestServer::start_on(&[("u.yaml", CFG)], &env, Some(&redis)).await;
    s.set_time(1_200);
    assert_eq!(answer(&send(&s, "fw", 25).await), (Code::Ok, 0));
    // The check is refused, and the local cache now knows the key is over ...
    assert_eq!(answer(&send(&s, "fw", 0).await).0, Code::OverLimit);
    assert_eq!(answer(&send(&s, "fw", 0).await).0, Code::OverLimit);
    // ... but a report still reaches the counter, whatever the cache and the setting say.
    assert_eq!(answer(&send(&s, "fw", 5).await), (Code::Ok, 0));
    assert_eq!(leases::counter(&redis, "tenant-a"), 30);
}

/// A key in debt shows it: `/check` answers `debt` (its `remaining` is unsigned and stays 0),
/// also per limit with `details`; explain's counter has `debt` and its text says "in debt by";
/// the console's key search says it too. A bucket shows its debt as time only.
#[tokio::test]
async fn debt_is_visible_in_check_explain_and_the_console() {
    let env = [("ADMIN_TOKEN", crate::support::policy::TOKEN)];
    let s = TestServer::start(&[("u.yaml", CFG)], &env).await;
    s.set_time(1_200);
    let c = s
        .check(
            &json!({"domain": "u", "client_key": "k", "cost": 25, "report": true, "details": true}),
        )
        .await;
    assert_eq!(c.status, 200, "{:?}", c.body);
    assert_eq!(
        (&c.body["remaining"], &c.body["debt"]),
        (&json!(0), &json!(15))
    );
    assert_eq!(c.body["limits"][0]["debt"], 15, "{:?}", c.body);
    let c = s
        .check(&json!({"domain": "u", "client_key": "k", "cost": 0}))
        .await;
    assert_eq!(
        (c.status, &c.body["debt"]),
        (429, &json!(15)),
        "{:?}",
        c.body
    );
    assert_eq!(c.body["retry_after"], 60, "paid back when the window ends");
    let c = s
        .check(&json!({"domain": "u", "client_key": "other", "cost": 1, "details": true}))
        .await;
    assert_eq!(c.status, 200);
    assert_eq!(c.body.get("debt"), None, "no debt, no field: {:?}", c.body);
    assert_eq!(c.body["limits"][0].get("debt"), None);
    let (status, v) = s
        .admin(
            reqwest::Method::POST,
            "/v1/explain",
            Some(json!({"domain": "u", "descriptors": [{"entries": [{"key": "client_key", "value": "k"}]}]})),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let counter = &v["descriptors"][0]["limits"][0]["counter"];
    assert_eq!(
        (&counter["used"], &counter["debt"], &counter["remaining"]),
        (&json!(25), &json!(15), &json!(0)),
        "{v}"
    );
    let page = s
        .http
        .get(s.admin_url("/?domain=u&descriptor=client_key=k"))
        .bearer_auth(crate::support::policy::TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("25 used, 0 remaining"), "{html}");
    assert!(html.contains("in debt by 15"), "{html}");
}
