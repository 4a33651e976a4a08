//! Usage reported by the layer against the real ratelimitd binary: the layer reads what a response
//! used from its `x-usage-tokens` header and reports it once the body has ended, so the tenant's
//! token budget goes into debt and its next request is refused (the check before each request
//! charging nothing); with a limit's `estimate` the check charges it and the report trues it up.
//! A bad usage (a header that is not a whole number, a report above the maximum) counts nothing.

mod common;

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use common::Ratelimitd;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use ratelimitd_client::{CheckRequest, Client, Error, RateLimitLayer, usage_header};
use tower::ServiceExt;

const CONFIG: &str = "domain: llm
descriptors:
  - key: client_key
    rate_limit: {unit: minute, requests_per_unit: 100, usage: report}
  - key: client_key
    value: estimated
    rate_limit: {unit: minute, requests_per_unit: 100, usage: {mode: report, estimate: 40}}
";

/// An axum app answering `/chat?tokens=N` with `x-usage-tokens: N`, behind the layer keyed by
/// `key` and reporting that header.
fn app(client: Client, key: &'static str) -> Router {
    let handler = |uri: http::Uri| async move {
        let query = uri.query().unwrap_or_default();
        let tokens = query.strip_prefix("tokens=").unwrap_or_default().to_owned();
        ([("x-usage-tokens", tokens)], "answer")
    };
    let layer = RateLimitLayer::new(client, move |_: &Request<Body>| {
        Some(CheckRequest::new(key).domain("llm"))
    })
    .usage(usage_header("x-usage-tokens"));
    Router::new().route("/chat", get(handler)).layer(layer)
}

/// Sends `/chat?tokens=…` and reads the body to its end (the report is sent then).
async fn ask(app: &Router, tokens: &str) -> StatusCode {
    let req = Request::get(format!("/chat?tokens={tokens}"))
        .body(Body::empty())
        .unwrap();
    let r = app.clone().oneshot(req).await.unwrap();
    let status = r.status();
    r.into_body().collect().await.unwrap();
    status
}

/// Reads with `read` until it yields `want` (a report is spawned when the body ends, so it may land
/// a little after the response): at most 500 reads 20 ms apart; the last value seen otherwise.
async fn becomes<F: Future<Output = Option<u64>>>(
    mut read: impl FnMut() -> F,
    want: u64,
) -> Option<u64> {
    let mut got = read().await;
    for _ in 0..500 {
        if got == Some(want) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        got = read().await;
    }
    got
}

/// `key`'s remaining as a check of 0 finds it, once it is `want` (see [`becomes`]).
async fn remaining_becomes(client: &Client, key: &str, want: u64) -> Option<u64> {
    let check = CheckRequest::new(key).domain("llm").cost(0);
    becomes(
        || async { client.check(&check).await.unwrap().remaining },
        want,
    )
    .await
}

fn client(server: &Ratelimitd) -> Client {
    Client::builder(&server.http)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_layer_reports_the_usage_a_response_header_names() {
    let server = Ratelimitd::start(CONFIG);
    let probe = client(&server);
    let app = app(client(&server), "acme");
    // A header that is not a usage reports nothing.
    for bad in ["lots", "-3", "99999999999"] {
        assert_eq!(ask(&app, bad).await, StatusCode::OK);
    }
    assert_eq!(remaining_becomes(&probe, "acme", 100).await, Some(100));
    assert_eq!(ask(&app, "70").await, StatusCode::OK);
    assert_eq!(
        remaining_becomes(&probe, "acme", 30).await,
        Some(30),
        "the check charged nothing, 70 reported"
    );
    assert_eq!(ask(&app, "70").await, StatusCode::OK);
    assert_eq!(remaining_becomes(&probe, "acme", 0).await, Some(0));
    assert_eq!(
        ask(&app, "1").await,
        StatusCode::TOO_MANY_REQUESTS,
        "in debt"
    );
}

#[tokio::test]
async fn the_layer_trues_up_an_estimate() {
    let server = Ratelimitd::start(CONFIG);
    let probe = client(&server);
    let app = app(client(&server), "estimated");
    // Each request's check charges 40; the reports of 10 give 30 back each.
    assert_eq!(ask(&app, "10").await, StatusCode::OK);
    assert_eq!(ask(&app, "10").await, StatusCode::OK);
    // Read by a report of exactly the estimate (a true-up of nothing; a check would charge it).
    let estimated = CheckRequest::new("estimated").domain("llm");
    let left = || async { probe.report(&estimated, 40).await.unwrap().remaining };
    assert_eq!(becomes(left, 80).await, Some(80), "20 used of 100");
    // 80 more than the estimate is topped up: 100 used, no room for another estimate.
    assert_eq!(ask(&app, "120").await, StatusCode::OK);
    assert_eq!(becomes(left, 0).await, Some(0), "the top-up arrives");
    assert_eq!(ask(&app, "1").await, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_report_above_the_maximum_is_refused_before_anything_is_sent() {
    let server = Ratelimitd::start(CONFIG);
    let client = client(&server);
    let ask = CheckRequest::new("acme").domain("llm").cost(0);
    let e = client.report(&ask, 1_000_000_001).await.unwrap_err();
    assert!(matches!(e, Error::InvalidUsage(_)), "{e:?}");
    assert!(
        e.to_string()
            .contains("usage must be a whole number from 0 to 1000000000"),
        "{e}"
    );
    assert!(!e.is_unavailable(), "the caller's mistake");
    assert_eq!(client.check(&ask).await.unwrap().remaining, Some(100));
}
