//! The layer in an axum app against the real ratelimitd binary: 200s with the draft headers, then a
//! 429 with every header and the handler not called; a shaped request waiting exactly its delay.

mod common;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use common::{Ratelimitd, T0};
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use ratelimitd_client::clock::Sleeper;
use ratelimitd_client::{CheckRequest, Client, RateLimitLayer, header_key};
use tower::ServiceExt;

/// The clients' shared test configuration (see the file's header).
const CONFIG: &str = include_str!("../../testdata/api.yaml");

/// An axum app whose one handler counts its calls, behind the layer keyed by `x-api-key`.
fn app(
    layer: RateLimitLayer<impl Fn(&Request<Body>) -> Option<CheckRequest> + Send + Sync + 'static>,
) -> (Router, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let handler = move || {
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, Ordering::SeqCst);
            "found"
        }
    };
    (
        Router::new().route("/search", get(handler)).layer(layer),
        calls,
    )
}

fn get_as(key: Option<&str>) -> Request<Body> {
    let mut r = Request::get("/search");
    if let Some(k) = key {
        r = r.header("x-api-key", k);
    }
    r.body(Body::empty()).unwrap()
}

fn header(r: &http::Response<Body>, name: &str) -> String {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no {name} in {:?}", r.headers()))
}

#[tokio::test]
async fn an_axum_app_answers_200s_then_429_with_every_header() {
    let server = Ratelimitd::start(CONFIG);
    let client = Client::builder(&server.http)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let (app, calls) = app(RateLimitLayer::new(client, header_key("x-api-key")));

    for remaining in [2, 1, 0] {
        let r = app.clone().oneshot(get_as(Some("user:42"))).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(header(&r, "x-ratelimit-remaining"), remaining.to_string());
        assert_eq!(
            header(&r, "ratelimit-policy"),
            "\"per-client\";q=100;w=60, \"search\";q=3;w=60"
        );
        assert!(header(&r, "ratelimit").contains(&format!("\"search\";r={remaining};t=60")));
        assert!(
            r.headers().get("retry-after").is_none(),
            "allowed: no Retry-After"
        );
        let body = r.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "found");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);

    let r = app.clone().oneshot(get_as(Some("user:42"))).await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&r, "retry-after"), "60");
    assert_eq!(
        header(&r, "ratelimit-policy"),
        "\"per-client\";q=100;w=60, \"search\";q=3;w=60"
    );
    assert!(
        header(&r, "ratelimit").contains("\"search\";r=0;t=60"),
        "{}",
        header(&r, "ratelimit")
    );
    assert_eq!(header(&r, "x-ratelimit-limit"), "3");
    assert_eq!(header(&r, "x-ratelimit-remaining"), "0");
    assert_eq!(header(&r, "x-ratelimit-reset"), (T0 + 60).to_string());
    assert_eq!(header(&r, "content-type"), "application/json");
    let body: serde_json::Value =
        serde_json::from_slice(&r.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(
        (&body["error"], &body["retry_after"]),
        (&"rate_limited".into(), &60.into())
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "a denied request never reaches the handler"
    );

    // Another client is counted apart; a request without a key is not checked.
    let r = app.clone().oneshot(get_as(Some("user:7"))).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = app.clone().oneshot(get_as(None)).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.headers().get("ratelimit").is_none(),
        "unchecked: no rate limit headers"
    );
    // The next window admits the first client again.
    server.set_time(T0 + 60);
    let r = app.oneshot(get_as(Some("user:42"))).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 6);
}

#[tokio::test]
async fn a_shaped_request_waits_its_delay_before_the_handler() {
    let server = Ratelimitd::start(CONFIG);
    let client = Client::builder(&server.http)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    // The waits are recorded (and skipped), and each notes how many handler calls preceded it.
    let waits: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let recorded = waits.clone();
    let sleeper: Sleeper = Arc::new(move |d| {
        recorded.lock().unwrap().push(d);
        Box::pin(async {})
    });
    let layer = RateLimitLayer::new(client, |_: &Request<Body>| {
        Some(CheckRequest::new("shaped").max_wait(Duration::from_millis(250)))
    })
    .sleeper(sleeper);
    let (app, calls) = app(layer);

    // The manual clock stands still: one slot every 100 ms is reserved per call.
    for _ in 0..3 {
        let r = app.clone().oneshot(get_as(None)).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    assert_eq!(
        *waits.lock().unwrap(),
        [Duration::from_millis(100), Duration::from_millis(200)],
        "the first slot is free, then one emission interval apart"
    );
    // The fourth slot is 300 ms away, past the 250 ms the request accepts: denied, not waited.
    let r = app.clone().oneshot(get_as(None)).await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&r, "retry-after"), "1");
    assert_eq!(waits.lock().unwrap().len(), 2);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn descriptors_of_another_domain_are_checked_alongside() {
    // The quick-start shape: a domain of its own and a remote_address descriptor.
    let server = Ratelimitd::start(
        "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 2}\n",
    );
    let client = Client::builder(&server.http)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let req = CheckRequest::new("10.0.0.1")
        .domain("edge")
        .descriptor([("remote_address", "10.0.0.1")]);
    let allowed: Vec<bool> = [
        client.check(&req).await.unwrap(),
        client.check(&req).await.unwrap(),
        client.check(&req).await.unwrap(),
    ]
    .iter()
    .map(|d| d.allowed)
    .collect();
    assert_eq!(allowed, [true, true, false]);
    // Another address is apart.
    let other = CheckRequest::new("10.0.0.2")
        .domain("edge")
        .descriptor([("remote_address", "10.0.0.2")]);
    assert_eq!(client.check(&other).await.unwrap().remaining, Some(1));
}
