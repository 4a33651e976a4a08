//! ratelimitd behind a real Envoy (`envoy/envoy.yaml` with `examples/envoy/config.yaml`): what an
//! HTTP client sees — 200 then 429, Envoy's x-ratelimit-* headers, per-descriptor hits, a limit
//! override from dynamic metadata, failing open or closed when ratelimitd is gone, a reload, and
//! the 200-then-429 path on every store. ratelimitd runs in-process on the manual clock (T0 = 1234 s, so a minute
//! window resets in 26 s and an hour window in 2366 s).

use std::time::Duration;

use crate::support::envoy::{Envoy, envoy_yaml_path, example_config, start_example, validate};
use crate::support::require;
use crate::support::{StoreKind, TestServer, on_every_store};
use ratelimitd_core::clock::Stopwatch;

/// ratelimitd on `store` with the example config, and Envoy in front of it.
async fn start(store: StoreKind) -> (TestServer, Envoy) {
    start_example(store, &[]).await
}

/// One request: `(status, x-ratelimit-limit, -remaining, -reset, x-envoy-ratelimited)`, with
/// missing headers as "".
async fn get(req: reqwest::RequestBuilder) -> (u16, String, String, String, String) {
    let r = req.send().await.expect("Envoy answers");
    let h = |k: &str| {
        r.headers()
            .get(k)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    (
        r.status().as_u16(),
        h("x-ratelimit-limit"),
        h("x-ratelimit-remaining"),
        h("x-ratelimit-reset"),
        h("x-envoy-ratelimited"),
    )
}

fn row(
    status: u16,
    limit: &str,
    remaining: &str,
    reset: &str,
    limited: &str,
) -> (u16, String, String, String, String) {
    (
        status,
        limit.into(),
        remaining.into(),
        reset.into(),
        limited.into(),
    )
}

/// [`remote_address`] at 3 per minute: three 200s counting down, a 429, then a new window.
async fn remote_address_limit(rl: &TestServer, envoy: &Envoy) {
    let http = reqwest::Client::new();
    let url = envoy.url("/remote");
    for remaining in ["2", "1", "0"] {
        assert_eq!(
            get(http.get(&url)).await,
            row(200, "3, 3;w=60", remaining, "26", "")
        );
    }
    assert_eq!(
        get(http.get(&url)).await,
        row(429, "3, 3;w=60", "0", "26", "true")
    );
    rl.advance(Duration::from_secs(26));
    assert_eq!(
        get(http.get(&url)).await,
        row(200, "3, 3;w=60", "2", "60", "")
    );
}

on_every_store!(remote_address_200_then_429_with_draft_03_headers);
async fn remote_address_200_then_429_with_draft_03_headers(store: StoreKind) {
    require!(Envoy);
    let (rl, envoy) = start(store).await;
    remote_address_limit(&rl, &envoy).await;
}

#[tokio::test]
async fn headers_describe_the_status_with_least_remaining() {
    require!(Envoy);
    let (_rl, envoy) = start(StoreKind::Memory).await;
    let http = reqwest::Client::new();
    let user = |name: &str| http.get(envoy.url("/user")).header("x-user", name);
    // [generic_key=per_user, user=alice] 2/hour and [remote_address] 3/minute. Envoy lists every
    // limit in x-ratelimit-limit, led by the one with the least remaining.
    assert_eq!(
        get(user("alice")).await,
        row(200, "2, 2;w=3600, 3;w=60", "1", "2366", "")
    );
    assert_eq!(
        get(user("alice")).await,
        row(200, "2, 2;w=3600, 3;w=60", "0", "2366", "")
    );
    let (status, _, remaining, _, limited) = get(user("alice")).await;
    assert_eq!(
        (status, remaining.as_str(), limited.as_str()),
        (429, "0", "true")
    );
    // Another user has its own counter, but the shared per-address one (3 used) is now exhausted.
    let (status, limit, remaining, reset, _) = get(user("bob")).await;
    assert_eq!(
        (status, remaining.as_str(), reset.as_str()),
        (429, "0", "26")
    );
    assert!(limit.starts_with("3, "), "{limit}");
    // Without x-user only [remote_address] is sent.
    assert_eq!(
        get(http.get(envoy.url("/user"))).await,
        row(429, "3, 3;w=60", "0", "26", "true")
    );
}

#[tokio::test]
async fn header_value_match_limits_only_posts() {
    require!(Envoy);
    let (_rl, envoy) = start(StoreKind::Memory).await;
    let http = reqwest::Client::new();
    let url = envoy.url("/write");
    assert_eq!(
        get(http.post(&url)).await,
        row(200, "1, 1;w=60", "0", "26", "")
    );
    assert_eq!(
        get(http.post(&url)).await,
        row(429, "1, 1;w=60", "0", "26", "true")
    );
    // A GET produces no descriptor, so Envoy does not even ask.
    for _ in 0..3 {
        assert_eq!(get(http.get(&url)).await, row(200, "", "", "", ""));
    }
}

#[tokio::test]
async fn hits_addend_from_a_request_header() {
    require!(Envoy);
    let (_rl, envoy) = start(StoreKind::Memory).await;
    let http = reqwest::Client::new();
    let cost = |n: &str| http.get(envoy.url("/cost")).header("x-cost", n);
    assert_eq!(get(cost("4")).await, row(200, "10, 10;w=60", "6", "26", ""));
    assert_eq!(get(cost("6")).await, row(200, "10, 10;w=60", "0", "26", ""));
    assert_eq!(
        get(cost("1")).await,
        row(429, "10, 10;w=60", "0", "26", "true")
    );
}

/// The /plan route's `limit` override comes from dynamic metadata (set by the Lua filter from
/// x-plan-limit): it replaces the configured 5 per minute for that client only.
#[tokio::test]
async fn limit_override_from_dynamic_metadata() {
    require!(Envoy);
    let (_rl, envoy) = start(StoreKind::Memory).await;
    let http = reqwest::Client::new();
    let plan = |user: &str| http.get(envoy.url("/plan")).header("x-user", user);
    let two = || plan("a").header("x-plan-limit", "2");
    assert_eq!(get(two()).await, row(200, "2, 2;w=60", "1", "26", ""));
    assert_eq!(get(two()).await, row(200, "2, 2;w=60", "0", "26", ""));
    assert_eq!(get(two()).await, row(429, "2, 2;w=60", "0", "26", "true"));
    // Another client without a plan gets the configured rate, on its own counter.
    assert_eq!(get(plan("b")).await, row(200, "5, 5;w=60", "4", "26", ""));
}

#[tokio::test]
async fn ratelimitd_down_fails_open_and_failure_mode_deny_returns_500() {
    require!(Envoy);
    let (rl, envoy) = start(StoreKind::Memory).await;
    let http = reqwest::Client::new();
    assert_eq!(get(http.get(envoy.url("/remote"))).await.0, 200);
    assert_eq!(get(http.get(envoy.deny_url("/"))).await.0, 200);
    rl.shutdown().await;
    // Envoy needs no time to notice: the connection is gone, so the next call fails at once.
    let (status, limit, ..) = get(http.get(envoy.url("/remote"))).await;
    assert_eq!((status, limit.as_str()), (200, ""), "fails open, unlimited");
    assert_eq!(
        get(http.get(envoy.deny_url("/"))).await.0,
        500,
        "failure_mode_deny"
    );
}

#[tokio::test]
async fn reload_is_seen_through_envoy() {
    require!(Envoy);
    let (rl, envoy) = start(StoreKind::Memory).await;
    let http = reqwest::Client::new();
    assert_eq!(get(http.get(envoy.url("/remote"))).await.1, "3, 3;w=60");
    let raised = example_config().replace(
        "rate_limit: {unit: minute, requests_per_unit: 3}",
        "rate_limit: {unit: minute, requests_per_unit: 100}",
    );
    std::fs::write(rl.dir.path().join("config.yaml"), raised).unwrap();
    let watch = Stopwatch::start();
    let mut last = String::new();
    for _ in 0..400 {
        if watch.elapsed() > Duration::from_secs(20) {
            break;
        }
        last = get(http.get(envoy.url("/remote"))).await.1;
        if last == "100, 100;w=60" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("reload not seen through Envoy within 20s; last x-ratelimit-limit {last:?}");
}

#[test]
fn envoy_validates_the_committed_config() {
    require!(Envoy);
    let (ok, text) = validate(&envoy_yaml_path());
    assert!(ok && text.contains("OK"), "{text}");
}
