//! Concurrency slots through the layer, against the real ratelimitd with a limit of one slot, in
//! an axum app served on loopback and called over raw TCP: a slow request holds the slot, a second
//! is answered 429, and the slot comes back when the first ends — whether it finished or its
//! caller hung up half-way.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use common::Ratelimitd;
use ratelimitd_client::{CheckRequest, Client, RateLimitLayer, header_key};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};

/// One request in flight per client key, as in the Python client's concurrency tests.
const CONFIG: &str = include_str!("../../testdata/concurrency.yaml");

/// The app: `/slow` tells the test it started, then waits for `finish`; `/fast` answers at once.
async fn app(server: &Ratelimitd) -> (String, mpsc::Receiver<()>, Arc<Notify>) {
    let client = Client::builder(&server.http)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let (started_tx, started) = mpsc::channel(4);
    let finish = Arc::new(Notify::new());
    let release = finish.clone();
    let router = Router::new()
        .route(
            "/slow",
            get(move || {
                let (started_tx, release) = (started_tx.clone(), release.clone());
                async move {
                    let _ = started_tx.send(()).await;
                    release.notified().await;
                    "done"
                }
            }),
        )
        .route("/fast", get(|| async { "fast" }))
        .layer(RateLimitLayer::new(client, header_key("x-key")));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, router).await });
    (addr, started, finish)
}

/// Opens a connection and sends `GET path` for key `tenant`.
async fn send(addr: &str, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nx-key: tenant\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    s
}

/// The status code of the answer on `s`.
async fn status(mut s: TcpStream) -> u16 {
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer))
        .await
        .expect("answered within 10 s")
        .unwrap();
    let text = String::from_utf8_lossy(&answer);
    text.get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {text}"))
}

/// `/fast` until it is admitted: the release is sent once the first request has ended, so it may
/// lag the end by a round trip. Bounded to 100 tries over about 5 s.
async fn admitted_soon(addr: &str) -> bool {
    for _ in 0..100 {
        if status(send(addr, "/fast").await).await == 200 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn a_slow_request_holds_the_slot_until_it_finishes() {
    let server = Ratelimitd::start(CONFIG);
    let (addr, slow, finish) = slow_holds_the_slot(&server).await;
    finish.notify_one();
    assert_eq!(status(slow).await, 200);
    assert!(
        admitted_soon(&addr).await,
        "slot given back after the response"
    );
    // The admitted /fast gave its own slot back too (its release follows its answer, so the next
    // one may need a retry): without that release the slot would stay taken for a minute.
    assert!(
        admitted_soon(&addr).await,
        "the admitted request gave its slot back"
    );
}

/// Starts the app on `server` and a `/slow` request, waits (at most 10 s) until its handler has
/// started, and checks that it holds the only slot: `/fast` is refused. The app's address, the
/// slow request's connection, and what finishes it.
async fn slow_holds_the_slot(server: &Ratelimitd) -> (String, TcpStream, Arc<Notify>) {
    let (addr, mut started, finish) = app(server).await;
    let slow = send(&addr, "/slow").await;
    tokio::time::timeout(Duration::from_secs(10), started.recv())
        .await
        .expect("the slow request is admitted and starts within 10 s")
        .unwrap();
    assert_eq!(
        status(send(&addr, "/fast").await).await,
        429,
        "slot is held"
    );
    (addr, slow, finish)
}

#[tokio::test]
async fn a_request_whose_caller_hangs_up_gives_its_slot_back() {
    let server = Ratelimitd::start(CONFIG);
    let (addr, slow, _finish) = slow_holds_the_slot(&server).await;
    drop(slow);
    assert!(
        admitted_soon(&addr).await,
        "slot given back when the caller went away"
    );
}

#[tokio::test]
async fn the_plain_client_releases_a_holder() {
    let server = Ratelimitd::start(CONFIG);
    let client = Client::new(&server.http).unwrap();
    let req = CheckRequest::new("tenant");
    let first = client.check(&req).await.unwrap();
    let holder = first
        .holder
        .clone()
        .expect("a concurrency limit names the holder");
    assert!(first.allowed);
    let second = client.check(&req).await.unwrap();
    assert!(!second.allowed);
    assert_eq!(second.retry_after, Duration::from_secs(1));
    client.release(&req, &holder).await.unwrap();
    assert!(client.check(&req).await.unwrap().allowed);
}
