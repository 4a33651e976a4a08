//! The release hook against the real ratelimitd: reported exactly once per admitted request — when
//! the body has been sent, when the service fails, when the request is dropped mid-way (in the
//! service or in the shaping wait) — never for a denied one, and a panicking hook harms nothing.

mod common;

use std::convert::Infallible;
use std::future::pending;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use common::Ratelimitd;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use ratelimitd_client::clock::Sleeper;
use ratelimitd_client::{CheckRequest, Client, RateLimitLayer, Release, ReleaseOutcome};
use tokio::sync::{mpsc, oneshot};
use tower::{Layer, ServiceExt, service_fn};

/// The clients' shared test configuration: `scarce` takes 1 a minute, `shaped` one every 100 ms.
const CONFIG: &str = include_str!("../../testdata/api.yaml");

type Log = Arc<Mutex<Vec<(String, ReleaseOutcome, bool)>>>;

/// A layer keyed by the `x-key` header whose hook logs (client key, outcome, had a decision).
fn layer(
    server: &Ratelimitd,
    log: &Log,
) -> RateLimitLayer<impl Fn(&Request<()>) -> Option<CheckRequest> + Send + Sync + 'static> {
    let client = Client::builder(&server.http)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let log = log.clone();
    RateLimitLayer::new(client, |req: &Request<()>| {
        let key = req.headers().get("x-key")?.to_str().ok()?;
        Some(CheckRequest::new(key).max_wait(Duration::from_secs(1)))
    })
    .on_release(move |r: Release| {
        log.lock()
            .unwrap()
            .push((r.request.client_key, r.outcome, r.decision.is_some()));
    })
}

fn req(key: &str) -> Request<()> {
    Request::builder().header("x-key", key).body(()).unwrap()
}

fn taken(log: &Log) -> Vec<(String, ReleaseOutcome, bool)> {
    std::mem::take(&mut *log.lock().unwrap())
}

#[tokio::test]
async fn a_streamed_body_is_released_when_it_ends_and_a_denial_never() {
    let server = Ratelimitd::start(CONFIG);
    let log: Log = Arc::default();
    // The handler streams its body through a channel the test feeds.
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let rx = Arc::new(Mutex::new(Some(rx)));
    let svc = layer(&server, &log).layer(service_fn(move |_req: Request<()>| {
        let rx = rx.lock().unwrap().take().expect("called once");
        let body = ChannelBody(rx);
        async move { Ok::<_, Infallible>(Response::new(body)) }
    }));
    let r = svc.clone().oneshot(req("scarce")).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    tx.send(Bytes::from("part")).await.unwrap();
    let mut body = r.into_body();
    let first = body.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "part");
    assert!(taken(&log).is_empty(), "still streaming: not released yet");
    drop(tx);
    assert!(body.frame().await.is_none());
    assert_eq!(
        taken(&log),
        [("scarce".into(), ReleaseOutcome::Completed, true)]
    );

    // The second request is denied (one a minute): nothing was admitted, nothing is released.
    let r = svc.oneshot(req("scarce")).await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    drop(r);
    assert!(taken(&log).is_empty());
}

/// A response body fed by the test through a channel, one data frame per message.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|m| m.map(|b| Ok(http_body::Frame::data(b))))
    }
}

#[tokio::test]
async fn a_failing_or_cancelled_request_is_released_once() {
    let server = Ratelimitd::start(CONFIG);
    let log: Log = Arc::default();

    // The service fails.
    let failing = layer(&server, &log).layer(service_fn(|_req: Request<()>| async {
        Err::<Response<Full<Bytes>>, _>(std::io::Error::other("backend down"))
    }));
    assert!(failing.oneshot(req("a")).await.is_err());
    assert_eq!(taken(&log), [("a".into(), ReleaseOutcome::Failed, true)]);

    // The caller goes away while the service works: the future is dropped mid-call.
    let (entered_tx, entered) = oneshot::channel::<()>();
    let entered_tx = Arc::new(Mutex::new(Some(entered_tx)));
    let hanging = layer(&server, &log).layer(service_fn(move |_req: Request<()>| {
        if let Some(tx) = entered_tx.lock().unwrap().take() {
            let _ = tx.send(());
        }
        async { pending::<Result<Response<Full<Bytes>>, Infallible>>().await }
    }));
    let call = tokio::spawn(hanging.oneshot(req("b")));
    entered.await.unwrap();
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    assert_eq!(taken(&log), [("b".into(), ReleaseOutcome::Cancelled, true)]);

    // Cancelled during the shaping wait: released, and the service never ran.
    let (waiting_tx, waiting) = oneshot::channel::<Duration>();
    let waiting_tx = Arc::new(Mutex::new(Some(waiting_tx)));
    let sleeper: Sleeper = Arc::new(move |d| {
        if let Some(tx) = waiting_tx.lock().unwrap().take() {
            let _ = tx.send(d);
        }
        Box::pin(pending())
    });
    let ran = Arc::new(Mutex::new(0));
    let counted = ran.clone();
    let shaped =
        layer(&server, &log)
            .sleeper(sleeper)
            .layer(service_fn(move |_req: Request<()>| {
                *counted.lock().unwrap() += 1;
                async { Ok::<_, Infallible>(Response::new(Full::new(Bytes::new()))) }
            }));
    // The first shaped request takes the free slot; the second waits 100 ms — and is cancelled.
    assert_eq!(
        shaped
            .clone()
            .oneshot(req("shaped"))
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    let _ = taken(&log);
    let call = tokio::spawn(shaped.oneshot(req("shaped")));
    assert_eq!(waiting.await.unwrap(), Duration::from_millis(100));
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    assert_eq!(
        taken(&log),
        [("shaped".into(), ReleaseOutcome::Cancelled, true)]
    );
    assert_eq!(
        *ran.lock().unwrap(),
        1,
        "the cancelled request never reached the service"
    );
}

#[tokio::test]
async fn a_panicking_hook_does_not_break_the_request() {
    let server = Ratelimitd::start(CONFIG);
    let client = Client::builder(&server.http)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let svc = RateLimitLayer::new(client, |_: &Request<()>| Some(CheckRequest::new("p")))
        .on_release(|_| panic!("hook bug"))
        .layer(service_fn(|_req: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("fine"))))
        }));
    let r = svc.oneshot(Request::new(())).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.into_body().collect().await.unwrap().to_bytes(), "fine");
}
