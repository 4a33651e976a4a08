//! Refunds and Retry-After through a real Envoy (`envoy/envoy.yaml` with
//! `examples/envoy/config.yaml`), on every store: a failed upstream request gives its hit back
//! (Envoy's `apply_on_stream_done` rate limit with `hits_addend.is_negative_hits`), and a 429's
//! `Retry-After` (`enable_retry_after_header`) is ratelimitd's `duration_until_reset` for each
//! algorithm — at least 1 s, and never early: one second before it the retry is still refused,
//! at it the retry goes through. ratelimitd runs in-process on the manual clock (T0 = 1234 s).

use std::time::Duration;

use crate::support::envoy;
use crate::support::require;
use crate::support::{StoreKind, TestServer, on_every_store};
use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitResponse;

/// ratelimitd's own answer for `entry` with `hits` (0 checks without counting).
async fn direct(rl: &TestServer, entry: (&str, &str), hits: u64) -> RateLimitResponse {
    let mut req = crate::support::request("envoy-demo", &[&[entry]]);
    req.descriptors[0].hits_addend = Some(hits);
    rl.call(req).await.expect("ShouldRateLimit succeeds")
}

/// `limit_remaining` of the only descriptor of a check, once it equals `want` (Envoy sends the
/// refund after the response); the last value seen after 10 s otherwise.
async fn remaining_becomes(rl: &TestServer, entry: (&str, &str), want: u32) -> u32 {
    envoy::remaining_becomes(rl, &envoy::example_check(&[entry]), want).await
}

on_every_store!(a_failed_upstream_request_is_refunded);
async fn a_failed_upstream_request_is_refunded(store: StoreKind) {
    require!(Envoy);
    let (rl, envoy) = envoy::start_example(store, &[]).await;
    let http = reqwest::Client::new();
    let upstream = ("generic_key", "upstream");
    for _ in 0..3 {
        let r = http.get(envoy.url("/upstream/fail")).send().await.unwrap();
        assert_eq!(r.status(), 503, "{}", envoy.log());
        assert_eq!(r.headers()["x-ratelimit-remaining"], "1");
        assert_eq!(remaining_becomes(&rl, upstream, 2).await, 2, "refunded");
    }
    // Successful requests keep their hit: 2 per minute, then 429.
    for status in [200, 200, 429] {
        let r = http.get(envoy.url("/upstream/ok")).send().await.unwrap();
        assert_eq!(r.status(), status);
    }
    // A request refused by the limit never reached the upstream and is not refunded either.
    let r = http.get(envoy.url("/upstream/fail")).send().await.unwrap();
    assert_eq!(r.status(), 429);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        direct(&rl, upstream, 0).await.statuses[0].limit_remaining,
        0
    );
}

/// Per algorithm (2 per minute, buckets of 2, both hits at T0): the Retry-After of the 429.
/// A fixed window resets at 1260; a bucket has one more token after 30 s; the sliding window's
/// full current window weighs 1/2 half-way into the next one (1290); the log's entries leave at
/// 1294.
const RETRY_AFTER: [(&str, u64); 5] = [
    ("fixed_window", 26),
    ("token_bucket", 30),
    ("sliding_window", 56),
    ("leaky_bucket", 30),
    ("sliding_log", 60),
];

on_every_store!(retry_after_is_duration_until_reset_and_never_early);
async fn retry_after_is_duration_until_reset_and_never_early(store: StoreKind) {
    require!(Envoy);
    let (rl, envoy) = envoy::start_example(store, &[]).await;
    let http = reqwest::Client::new();
    let mut now = crate::support::T0;
    for (algorithm, want) in RETRY_AFTER {
        let get = || {
            http.get(envoy.url("/algorithm"))
                .header("x-algorithm", algorithm)
                .send()
        };
        for _ in 0..2 {
            assert_eq!(get().await.unwrap().status(), 200, "{algorithm}");
        }
        let r = get().await.unwrap();
        assert_eq!(r.status(), 429, "{algorithm}");
        let retry_after: u64 = r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(retry_after, want, "{algorithm}");
        // What ratelimitd itself answers for the same refused hit.
        let own = direct(&rl, ("algorithm", algorithm), 1).await;
        let reset = own.statuses[0].duration_until_reset.unwrap().seconds;
        assert_eq!(u64::try_from(reset).unwrap(), retry_after, "{algorithm}");
        rl.set_time(now + retry_after - 1);
        let r = get().await.unwrap();
        assert_eq!(r.status(), 429, "{algorithm}: not before Retry-After");
        assert_eq!(r.headers()["retry-after"], "1", "{algorithm}");
        rl.set_time(now + retry_after);
        assert_eq!(
            get().await.unwrap().status(),
            200,
            "{algorithm}: at Retry-After"
        );
        // The next algorithm starts a fresh minute.
        now = (now + retry_after) / 60 * 60 + 60 + 34;
        rl.set_time(now);
    }
}
