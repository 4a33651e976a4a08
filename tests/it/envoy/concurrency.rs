//! The concurrency recipe through a real Envoy (`envoy/envoy.yaml`'s `/inflight` route with
//! `examples/envoy/config.yaml`), on every store: each request takes a slot under its
//! `x-request-id` when it starts and gives it back when its stream is done. Two slow upstream
//! requests fill the cap of 2, the next request is 429, as soon as one finishes a new one is
//! admitted while the other is still in flight, and a client that aborts its request frees its
//! slot too. ratelimitd runs in-process on the manual clock, which never reaches a lease timeout
//! here: every slot is freed by Envoy's stream-done call.

use std::time::Duration;

use crate::support::envoy::Envoy;
use crate::support::require;
use crate::support::{StoreKind, TestServer, on_every_store};
use ratelimitd_core::clock::Stopwatch;

async fn start(store: StoreKind) -> (TestServer, Envoy) {
    let config = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/envoy/config.yaml"
    ))
    .unwrap();
    let rl = TestServer::start_with_store(&[("config.yaml", &config)], &[], store).await;
    let envoy = Envoy::start(&rl.running().grpc_addr.to_string()).await;
    (rl, envoy)
}

/// Free slots of the `/inflight` limit, as ratelimitd answers a check (0 hits).
async fn free(rl: &TestServer) -> u32 {
    let mut req = crate::support::request("envoy-demo", &[&[("generic_key", "inflight")]]);
    req.descriptors[0].hits_addend = Some(0);
    let r = rl.call(req).await.expect("ShouldRateLimit succeeds");
    r.statuses[0].limit_remaining
}

/// Waits (at most 10 s) until `free` slots are free; returns the last count seen.
async fn free_becomes(rl: &TestServer, want: u32) -> u32 {
    let watch = Stopwatch::start();
    loop {
        let got = free(rl).await;
        if got == want || watch.elapsed() > Duration::from_secs(10) {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A GET of `/inflight` that the backend answers `delay_ms` later; its status.
fn slow(envoy: &Envoy, delay_ms: u64) -> tokio::task::JoinHandle<u16> {
    let url = envoy.url("/inflight");
    tokio::spawn(async move {
        let r = reqwest::Client::new()
            .get(url)
            .header("x-envoy-fault-delay-request", delay_ms.to_string())
            .send()
            .await
            .unwrap();
        r.status().as_u16()
    })
}

on_every_store!(requests_in_flight_are_capped_and_released_at_stream_done);
async fn requests_in_flight_are_capped_and_released_at_stream_done(store: StoreKind) {
    require!(Envoy);
    let (rl, envoy) = start(store).await;
    let http = reqwest::Client::new();
    let short = slow(&envoy, 1_500);
    let long = slow(&envoy, 25_000);
    assert_eq!(free_becomes(&rl, 0).await, 0, "{}", envoy.log());
    let r = http.get(envoy.url("/inflight")).send().await.unwrap();
    assert_eq!(r.status(), 429, "both slots are held");
    assert_eq!(short.await.unwrap(), 200);
    // The short request's stream-done call reaches ratelimitd just after its answer.
    let watch = Stopwatch::start();
    let mut status = 0;
    while watch.elapsed() < Duration::from_secs(10) {
        status = http
            .get(envoy.url("/inflight"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, 200, "a new request is admitted once one finished");
    assert!(!long.is_finished(), "the long request still holds its slot");
    // The admitted request's own stream-done call may still be on its way.
    assert_eq!(
        free_becomes(&rl, 1).await,
        1,
        "one slot held, by the long request"
    );
    // A client that gives up: the aborted stream is done too, and its slot goes back.
    long.abort();
    assert_eq!(free_becomes(&rl, 2).await, 2, "{}", envoy.log());
}
