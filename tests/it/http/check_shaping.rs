//! `POST /check` shaping and retries over real HTTP on every store, with the manual clock so every
//! delay is exact: concurrent callers with `max_wait_ms` on one leaky bucket key get distinct slots
//! one emission interval apart, a caller whose slot is past its budget (or who does not shape) is
//! denied, and a denied `cost` above 1 is told to come back when all its hits fit, not one.

use crate::support::*;
use futures_util::future::join_all;
use serde_json::{Value, json};

/// `shaped`: 10 a second, burst 1 (one slot per 100 ms). `tb` and `lb`: 6 a minute (one hit per
/// 10 s), burst 5. `both`: a daily quota and the 100 ms pace on one descriptor.
const CFG: &str = r#"
domain: api
descriptors:
  - key: client_key
    value: shaped
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: leaky_bucket, burst: 1}
  - key: client_key
    value: tb
    rate_limit: {unit: minute, requests_per_unit: 6, algorithm: token_bucket, burst: 5}
  - key: client_key
    value: lb
    rate_limit: {unit: minute, requests_per_unit: 6, algorithm: leaky_bucket, burst: 5}
  - key: client_key
    value: both
    rate_limits:
      - {name: daily, unit: day, requests_per_unit: 3}
      - {name: paced, unit: second, requests_per_unit: 10, algorithm: leaky_bucket, burst: 1}
"#;

/// One `/check` call: status, `Retry-After`, JSON body.
async fn check(s: &TestServer, body: Value) -> (u16, Option<String>, Value) {
    s.check(&body).await.answer()
}

on_every_store!(shaping_delays_are_evenly_spaced_under_concurrency);
async fn shaping_delays_are_evenly_spaced_under_concurrency(store: StoreKind) {
    const K: u64 = 8;
    let s = TestServer::start_with_store(&[("api.yaml", CFG)], &[], store).await;
    s.set_time(T0);
    let shaped = |max_wait_ms: u64| json!({"client_key": "shaped", "max_wait_ms": max_wait_ms});
    // K callers at once (the clock does not move): each reserves its own slot.
    let answers = join_all((0..K).map(|_| check(&s, shaped(1_000)))).await;
    let mut delays: Vec<u64> = answers
        .iter()
        .map(|(status, retry, body)| {
            assert_eq!((*status, retry.as_deref()), (200, None), "{body}");
            assert_eq!(body["allowed"], true);
            body["delay_ms"].as_u64().unwrap()
        })
        .collect();
    delays.sort_unstable();
    let spaced: Vec<u64> = (0..K).map(|i| i * 100).collect();
    assert_eq!(
        delays, spaced,
        "distinct slots, one emission interval apart"
    );

    // The next slot is 800 ms away: over a 750 ms budget, and over for a caller who does not wait.
    let (status, retry, body) = check(&s, shaped(750)).await;
    assert_eq!((status, retry.as_deref()), (429, Some("1")));
    assert_eq!(
        (&body["delay_ms"], &body["retry_after"]),
        (&json!(0), &json!(1))
    );
    let (status, _, _) = check(&s, json!({"client_key": "shaped"})).await;
    assert_eq!(status, 429, "no max_wait_ms: policing as before");
    // Denials reserved nothing: 800 ms is still the next slot, and a budget of exactly it fits.
    let (status, _, body) = check(&s, shaped(800)).await;
    assert_eq!((status, &body["delay_ms"]), (200, &json!(800)));
    // Two seconds later the queue has drained: no delay.
    s.set_time(T0 + 2);
    let (status, _, body) = check(&s, shaped(0)).await;
    assert_eq!((status, &body["delay_ms"]), (200, &json!(0)));
}

on_every_store!(a_denied_cost_is_told_when_all_its_hits_fit);
async fn a_denied_cost_is_told_when_all_its_hits_fit(store: StoreKind) {
    let s = TestServer::start_with_store(&[("api.yaml", CFG)], &[], store).await;
    for (i, client) in ["tb", "lb"].into_iter().enumerate() {
        let t = T0 + 1000 * i as u64;
        s.set_time(t);
        let call = |cost: u64| json!({"client_key": client, "cost": cost, "details": true});
        let (status, _, _) = check(&s, call(5)).await;
        assert_eq!(status, 200, "{client}: the burst");
        // One hit fits again in 10 s, three only in 30 s: retrying after 10 s would be early.
        let (status, retry, body) = check(&s, call(3)).await;
        assert_eq!((status, retry.as_deref()), (429, Some("30")), "{client}");
        assert_eq!(body["retry_after"], 30, "{client}");
        assert_eq!(body["limits"][0]["reset_after"], 10, "{client}: one hit");
        s.set_time(t + 29);
        let (status, retry, _) = check(&s, call(3)).await;
        assert_eq!(
            (status, retry.as_deref()),
            (429, Some("1")),
            "{client}: not yet"
        );
        s.set_time(t + 30);
        let (status, _, _) = check(&s, call(3)).await;
        assert_eq!(status, 200, "{client}: on time");
    }
}

on_every_store!(a_shaped_limit_delays_even_when_another_limit_is_reported);
async fn a_shaped_limit_delays_even_when_another_limit_is_reported(store: StoreKind) {
    let s = TestServer::start_with_store(&[("api.yaml", CFG)], &[], store).await;
    s.set_time(T0);
    let call = json!({"client_key": "both", "max_wait_ms": 1_000, "details": true});
    for (delay, reported) in [(0, "paced"), (100, "paced"), (200, "daily")] {
        let (status, _, body) = check(&s, call.clone()).await;
        assert_eq!((status, &body["delay_ms"]), (200, &json!(delay)));
        // The daily quota's last hit has the least left (the first of equals) and is reported;
        // the pace's slot 200 ms ahead must still be waited for.
        let name = |i: usize| body["limits"][i]["name"].as_str().unwrap().to_owned();
        assert_eq!(name(0), reported, "{body}");
    }
    let (status, _, body) = check(&s, call).await;
    assert_eq!(
        (status, &body["delay_ms"]),
        (429, &json!(0)),
        "the quota is spent"
    );
}
