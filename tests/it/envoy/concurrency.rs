//! The concurrency recipe through a real Envoy (`envoy/envoy.yaml`'s `/inflight` route with
//! `examples/envoy/config.yaml`), on every store: each request takes a slot under its
//! `x-request-id` when it starts and gives it back when its stream is done. Two slow upstream
//! requests fill the cap of 2, the next request is 429, as soon as one finishes a new one is
//! admitted while the other is still in flight, and a client that aborts its request frees its
//! slot too. ratelimitd runs in-process on the manual clock, which never reaches a lease timeout
//! here: every slot is freed by Envoy's stream-done call.

use std::time::Duration;

use crate::support::envoy::{self, Envoy};
use crate::support::require;
use crate::support::{StoreKind, TestServer, on_every_store};
use ratelimitd_core::clock::Stopwatch;

/// Waits (at most 10 s) until `want` slots of the `/inflight` limit are free, as ratelimitd
/// answers a check (0 hits); returns the last count seen.
async fn free_becomes(rl: &TestServer, want: u32) -> u32 {
    let check = envoy::example_check(&[("generic_key", "inflight")]);
    envoy::remaining_becomes(rl, &check, want).await
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
    let (rl, envoy) = envoy::start_example(store, &[]).await;
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
