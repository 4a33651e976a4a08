//! Usage estimates trued up (`usage: {mode: report, estimate: N}`) through the real service on
//! every store (memcached: fixed windows), with the manual clock standing still: the request-time
//! check (0 hits) charges the estimate, policed, so a burst of concurrent requests on an empty
//! counter passes only as many estimates as fit; a report of the actual usage then counts only
//! the difference, giving back what the estimate over-charged and topping up what it
//! under-charged (past the limit too). A request refused by another descriptor gives its estimate
//! back; a report of 0 (the `ratelimitd.usage: report` entry) gives all of it back; a bad marker is
//! refused. Go's statistics add up to the usage.

use crate::support::memcached::Memcached;
use crate::support::*;
use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use serde_json::json;

/// 100 a minute (buckets hold 100), each request estimated at 30; `model` is a second descriptor
/// a request may also carry, with a budget of its own.
const CFG: &str = "domain: u
descriptors:
  - {key: fw, rate_limit: {unit: minute, requests_per_unit: 100, usage: {mode: report, estimate: 30}}}
  - {key: sw, rate_limit: {unit: minute, requests_per_unit: 100, algorithm: sliding_window, usage: {mode: report, estimate: 30}}}
  - {key: sl, rate_limit: {unit: minute, requests_per_unit: 100, algorithm: sliding_log, usage: {mode: report, estimate: 30}}}
  - {key: tb, rate_limit: {unit: minute, requests_per_unit: 100, algorithm: token_bucket, usage: {mode: report, estimate: 30}}}
  - {key: lb, rate_limit: {unit: minute, requests_per_unit: 100, algorithm: leaky_bucket, usage: {mode: report, estimate: 30}}}
  - {key: model, rate_limit: {unit: minute, requests_per_unit: 0}}
  - {key: client_key, rate_limit: {unit: minute, requests_per_unit: 100, usage: {mode: report, estimate: 30}}}
";

/// One call on `key` with `hits` (0: the request-time check); `marked` adds the report marker.
async fn send(s: &TestServer, key: &str, hits: u64, marked: bool) -> RateLimitResponse {
    let mut entries = vec![(key, "tenant-a")];
    if marked {
        entries.push(("ratelimitd.usage", "report"));
    }
    let mut req = request("u", &[&entries]);
    req.descriptors[0].hits_addend = Some(hits);
    s.call(req).await.expect("ShouldRateLimit succeeds")
}

/// (code, remaining) of the only descriptor.
fn answer(r: &RateLimitResponse) -> (Code, u32) {
    let (code, _, remaining) = st(r, 0);
    (code, remaining)
}

/// The scenario on `key` of `s`: five concurrent checks, three estimates admitted; reports of
/// less and of more than the estimate correct the counter both ways.
async fn estimates_are_trued_up(s: &TestServer, key: &str) {
    let checks: Vec<_> = (0..5).map(|_| send(s, key, 0, false)).collect();
    let answers = futures_util::future::join_all(checks).await;
    let admitted = answers.iter().filter(|r| answer(r).0 == Code::Ok).count();
    assert_eq!(
        admitted, 3,
        "{key}: 3 estimates of 30 fit in 100: {answers:?}"
    );
    // The two refused charged nothing: 90 are taken, 10 left.
    assert_eq!(
        answer(&send(s, key, 10, false).await),
        (Code::Ok, 30),
        "{key}: 10 of 30 used, 20 back"
    );
    // 70 used, a fourth estimate now fits.
    assert_eq!(
        answer(&send(s, key, 0, false).await),
        (Code::Ok, 0),
        "{key}: a fourth check"
    );
    assert_eq!(
        answer(&send(s, key, 0, false).await).0,
        Code::OverLimit,
        "{key}: full"
    );
    // A request that used 25 more than its estimate: 100 + 25 (debt), and the check is refused.
    assert_eq!(
        answer(&send(s, key, 55, false).await),
        (Code::Ok, 0),
        "{key}: top-up"
    );
    // Reports of 0 (the marker) give two estimates back: 125 − 60 = 65, so one more fits.
    assert_eq!(
        answer(&send(s, key, 0, true).await),
        (Code::Ok, 5),
        "{key}: 0 used"
    );
    assert_eq!(
        answer(&send(s, key, 0, false).await).0,
        Code::OverLimit,
        "{key}: 95 taken, 30 do not fit"
    );
    assert_eq!(
        answer(&send(s, key, 0, true).await),
        (Code::Ok, 35),
        "{key}: 0 used"
    );
    assert_eq!(
        answer(&send(s, key, 0, false).await),
        (Code::Ok, 5),
        "{key}: one more estimate"
    );
}

on_every_store!(concurrent_estimates_are_limited_and_reports_true_them_up);
async fn concurrent_estimates_are_limited_and_reports_true_them_up(store: StoreKind) {
    let s = TestServer::start_with_store(&[("u.yaml", CFG)], &[], store).await;
    for (i, key) in ALGORITHM_KEYS.into_iter().enumerate() {
        s.set_time(1_200 + 600 * i as u64);
        estimates_are_trued_up(&s, key).await;
    }
}

/// memcached counts fixed windows, estimates and their true-ups included.
#[tokio::test]
async fn estimates_are_trued_up_on_memcached() {
    require!(Memcached);
    let m = Memcached::start();
    let env = m.env(&[("LOCAL_CACHE_SIZE_IN_BYTES", "1000000")]);
    // memcached counts fixed windows only.
    let cfg = "domain: u
descriptors:
  - {key: fw, rate_limit: {unit: minute, requests_per_unit: 100, usage: {mode: report, estimate: 30}}}
";
    let s = TestServer::start(&[("u.yaml", cfg)], &env).await;
    s.set_time(1_200);
    estimates_are_trued_up(&s, "fw").await;
}

on_every_store!(a_request_refused_by_another_descriptor_gives_its_estimate_back);
async fn a_request_refused_by_another_descriptor_gives_its_estimate_back(store: StoreKind) {
    let s = TestServer::start_with_store(&[("u.yaml", CFG)], &[], store).await;
    s.set_time(1_200);
    for key in ["fw", "tb"] {
        let mut req = request("u", &[&[(key, "tenant-a")], &[("model", "m")]]);
        req.descriptors[0].hits_addend = Some(0);
        let r = s.call(req).await.unwrap();
        assert_eq!(
            overall(&r),
            Code::OverLimit,
            "{key}: the model's budget is 0"
        );
        assert_eq!(
            answer(&send(&s, key, 0, false).await),
            (Code::Ok, 70),
            "{key}: only this check's 30 taken"
        );
    }
}

#[tokio::test]
async fn a_usage_marker_other_than_report_is_refused() {
    let s = TestServer::start(&[("u.yaml", CFG)], &[]).await;
    let req = request("u", &[&[("fw", "a"), ("ratelimitd.usage", "reprot")]]);
    let e = s.call(req).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("ratelimitd.usage 'reprot'"), "{e:?}");
    assert!(e.message().contains("report"), "{e:?}");
}

#[tokio::test]
async fn go_stats_of_estimates_add_up_to_the_usage() {
    let env = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = TestServer::start(&[("u.yaml", CFG)], &env).await;
    s.set_time(1_200);
    // Two requests: one used 50 (20 over its estimate), one 0 (all 30 back); then /check's
    // report of 12 for a third estimate.
    send(&s, "client_key", 0, false).await;
    send(&s, "client_key", 50, false).await;
    send(&s, "client_key", 0, false).await;
    send(&s, "client_key", 0, true).await;
    let c = s
        .check(&json!({"domain": "u", "client_key": "tenant-a", "cost": 0}))
        .await;
    assert_eq!(
        (c.status, &c.body["remaining"]),
        (200, &json!(20)),
        "{:?}",
        c.body
    );
    let c = s
        .check(&json!({"domain": "u", "client_key": "tenant-a", "cost": 12, "report": true}))
        .await;
    assert_eq!(
        (c.status, &c.body["remaining"]),
        (200, &json!(38)),
        "{:?}",
        c.body
    );
    let m = s.scrape().await;
    let v = |stat: &str| {
        m.count(&format!(
            "ratelimit_service_rate_limit_{stat}{{domain=\"u\",key1=\"client_key\",key2=\"\"}}"
        ))
    };
    // Taken: 3 estimates of 30 and a top-up of 20; given back: 30 and 18. Net: 62 = 50 + 0 + 12.
    assert_eq!(v("total_hits"), Some(110), "{m}");
    assert_eq!(v("within_limit"), Some(110), "{m}");
    assert_eq!(v("over_limit").unwrap_or(0), 0, "{m}");
    assert_eq!(v("total_negative_hits"), Some(48), "{m}");
    let reported = "ratelimitd_usage_reported_total{domain=\"u\",key1=\"client_key\",key2=\"\"}";
    assert_eq!(m.count(reported), Some(62), "{m}");
}
