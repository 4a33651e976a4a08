//! ratelimitd unreachable, silent or answering garbage: the client's typed errors, its deadline,
//! its connection reuse, and the layer's failure policies (open, closed, local fallback).

mod common;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use common::{scripted, silent, unreachable};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use ratelimitd_client::{
    CheckRequest, Client, Error, FailurePolicy, LocalLimit, RateLimitLayer, ResponseBody,
};
use tower::util::BoxCloneService;
use tower::{ServiceExt, service_fn};

const TIMEOUT: Duration = Duration::from_millis(300);

/// A rate-limited service as the tests drive it.
type Svc = BoxCloneService<Request<Full<Bytes>>, Response<ResponseBody<Full<Bytes>>>, Infallible>;

/// The layer over a handler that counts its calls, keyed on a fixed client.
fn service(url: &str, policy: FailurePolicy) -> (Svc, Arc<AtomicUsize>) {
    let client = Client::builder(url).timeout(TIMEOUT).build().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let inner = service_fn(move |_req: Request<Full<Bytes>>| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("ok")))) }
    });
    let layer = RateLimitLayer::new(client, |_: &Request<Full<Bytes>>| {
        Some(CheckRequest::new("user:1"))
    })
    .failure_policy(policy);
    (
        BoxCloneService::new(tower::Layer::layer(&layer, inner)),
        calls,
    )
}

/// A client whose deadline a loaded machine never reaches, for tests about anything but the deadline.
fn patient(url: &str) -> Client {
    Client::builder(url)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

async fn status_of(svc: &Svc) -> (StatusCode, http::HeaderMap) {
    let req = Request::new(Full::new(Bytes::new()));
    // Bounded: a layer that hung would fail here rather than stall the suite.
    let r = tokio::time::timeout(Duration::from_secs(10), svc.clone().oneshot(req))
        .await
        .expect("the layer answers within its client's deadline")
        .unwrap();
    (r.status(), r.headers().clone())
}

#[tokio::test]
async fn an_unreachable_ratelimitd_follows_each_policy() {
    let url = unreachable().await;
    let e = patient(&url)
        .check(&CheckRequest::new("k"))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Transport(_)), "{e}");
    assert!(e.is_unavailable());

    let (open, calls) = service(&url, FailurePolicy::Open);
    assert_eq!(status_of(&open).await.0, StatusCode::OK);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "fail open: the handler runs"
    );

    let (closed, calls) = service(&url, FailurePolicy::Closed);
    let (status, headers) = status_of(&closed).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "fail closed: the handler does not run"
    );

    let local = LocalLimit::new(2, Duration::from_secs(60));
    let (fallback, calls) = service(&url, FailurePolicy::Local(local.into()));
    assert_eq!(status_of(&fallback).await.0, StatusCode::OK);
    assert_eq!(status_of(&fallback).await.0, StatusCode::OK);
    let (status, headers) = status_of(&fallback).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["ratelimit-policy"], "\"local\";q=2;w=60");
    let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(headers["ratelimit"], format!("\"local\";r=0;t={retry}"));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the local limit admitted two"
    );
}

#[tokio::test]
async fn a_silent_ratelimitd_hits_the_client_timeout() {
    let url = silent().await;
    let client = Client::builder(&url).timeout(TIMEOUT).build().unwrap();
    let e = tokio::time::timeout(
        Duration::from_secs(10),
        client.check(&CheckRequest::new("k")),
    )
    .await
    .expect("the client's own deadline fires first")
    .unwrap_err();
    assert!(matches!(e, Error::Timeout(d) if d == TIMEOUT), "{e}");

    let (closed, calls) = service(&url, FailurePolicy::Closed);
    assert_eq!(status_of(&closed).await.0, StatusCode::SERVICE_UNAVAILABLE);
    let (open, _) = service(&url, FailurePolicy::Open);
    assert_eq!(status_of(&open).await.0, StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn garbage_answers_are_typed_errors_and_fail_by_policy() {
    let mut oversized = b"HTTP/1.1 200 OK\r\ncontent-length: 2048\r\n\r\n".to_vec();
    oversized.extend([b' '; 2048]);
    let oversized: &'static [u8] = Box::leak(oversized.into_boxed_slice());
    for answer in [
        oversized,
        &b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nnot json"[..],
        b"HTTP/1.1 429 Too Many Requests\r\ncontent-length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\ncontent-length: 99999999\r\n\r\n{\"allowed\":true",
        b"HTTP/1.1 204 No Content\r\n\r\n",
    ] {
        let (url, _) = scripted(answer).await;
        let client = Client::builder(&url)
            .timeout(TIMEOUT)
            .max_answer_bytes(1024)
            .build()
            .unwrap();
        let e = client.check(&CheckRequest::new("k")).await.unwrap_err();
        assert!(
            matches!(e, Error::Malformed(_)),
            "{}: {e}",
            String::from_utf8_lossy(answer)
        );
        let (closed, _) = service(&url, FailurePolicy::Closed);
        assert_eq!(status_of(&closed).await.0, StatusCode::SERVICE_UNAVAILABLE);
    }
}

#[tokio::test]
async fn checks_reuse_one_connection() {
    const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 73\r\n\r\n{\"allowed\":true,\"remaining\":9,\"reset_at\":60,\"retry_after\":0,\"delay_ms\":0}";
    let (url, accepted) = scripted(OK).await;
    let client = patient(&url);
    for _ in 0..5 {
        let d = client.check(&CheckRequest::new("k")).await.unwrap();
        assert_eq!(d.remaining, Some(9));
    }
    let clone = client.clone();
    clone.check(&CheckRequest::new("k")).await.unwrap();
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "six sequential checks, one connection"
    );
}

#[tokio::test]
async fn a_refused_check_is_a_500_not_a_silent_pass() {
    let server = common::Ratelimitd::start(
        "domain: api\ndescriptors:\n  - key: client_key\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
    );
    let client = patient(&server.http);
    let e = client.check(&CheckRequest::new("")).await.unwrap_err();
    match &e {
        Error::Rejected {
            status: 400,
            code,
            message,
        } => {
            assert_eq!(code, "invalid_field");
            assert!(message.contains("client_key"), "{message}");
        }
        other => panic!("{other}"),
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let inner = service_fn(move |_req: Request<Full<Bytes>>| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, Infallible>(Response::new(Full::new(Bytes::new()))) }
    });
    let layer = RateLimitLayer::new(client, |_: &Request<Full<Bytes>>| {
        Some(CheckRequest::new(""))
    });
    let r = tower::Layer::layer(&layer, inner)
        .oneshot(Request::new(Full::new(Bytes::new())))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body = r.into_body().collect().await.unwrap().to_bytes();
    assert!(
        String::from_utf8_lossy(&body).contains("client_key"),
        "{body:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}
