//! Priority load shedding behind a real Envoy (`envoy/envoy.yaml`'s `/priority` route with
//! `examples/envoy/config.yaml`): the class comes from the `x-priority` header, else from the
//! method (GET → read, POST → write), and every class counts on one capacity of 10 a minute.

use crate::support::envoy::Envoy;
use crate::support::require;
use crate::support::{StoreKind, TestServer, on_every_store};

fn config() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/envoy/config.yaml"
    ))
    .unwrap()
}

/// The status of one request through Envoy.
async fn status(req: reqwest::RequestBuilder) -> u16 {
    req.send().await.expect("Envoy answers").status().as_u16()
}

on_every_store!(reads_then_writes_are_shed_and_critical_keeps_the_rest);
async fn reads_then_writes_are_shed_and_critical_keeps_the_rest(store: StoreKind) {
    require!(Envoy);
    let rl = TestServer::start_with_store(&[("config.yaml", &config())], &[], store).await;
    let envoy = Envoy::start(&rl.running().grpc_addr.to_string()).await;
    let http = reqwest::Client::new();
    let url = envoy.url("/priority");
    // GETs are reads: admitted up to 8 of 10, then shed (and a shed read uses nothing up).
    for n in 1..=8 {
        assert_eq!(status(http.get(&url)).await, 200, "read {n}");
    }
    for _ in 0..3 {
        assert_eq!(status(http.get(&url)).await, 429, "reads are shed from 80%");
    }
    // POSTs are writes: one more fits (90%), then they are shed too.
    assert_eq!(status(http.post(&url)).await, 200);
    assert_eq!(
        status(http.post(&url)).await,
        429,
        "writes are shed from 90%"
    );
    // The header names the class whatever the method: critical takes the last 10%.
    let critical = || http.get(&url).header("x-priority", "critical");
    assert_eq!(status(critical()).await, 200);
    assert_eq!(status(critical()).await, 429, "the capacity is spent");
    // The header wins over the method: a GET named `write` is a write, shed at 90%.
    let write = http.get(&url).header("x-priority", "write");
    assert_eq!(status(write).await, 429);
    // Other methods send no descriptor and are never limited.
    assert_eq!(status(http.put(&url)).await, 200);
}
