//! Priority load shedding behind a real Envoy (`envoy/envoy.yaml`'s `/priority` route with
//! `examples/envoy/config.yaml`): the edge sets the class — critical for an internal caller
//! (the connection's address, `127.0.0.2`), else from the method (GET → read, POST → write) — and
//! every class counts on one capacity of 10 a minute. No header a client sends names its class.

use crate::support::envoy::start_example;
use crate::support::require;
use crate::support::{StoreKind, on_every_store};

/// The status of one request through Envoy.
async fn status(req: reqwest::RequestBuilder) -> u16 {
    req.send().await.expect("Envoy answers").status().as_u16()
}

on_every_store!(reads_then_writes_are_shed_and_critical_keeps_the_rest);
async fn reads_then_writes_are_shed_and_critical_keeps_the_rest(store: StoreKind) {
    require!(Envoy);
    let (_rl, envoy) = start_example(store, &[]).await;
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
    // A client cannot name itself critical: neither a class header nor Envoy's own internal
    // marker survives from an external client, so these are still reads, shed at 80%.
    for (name, value) in [("x-priority", "critical"), ("x-envoy-internal", "true")] {
        let forged = http.get(&url).header(name, value);
        assert_eq!(status(forged).await, 429, "{name}: {value} from outside");
    }
    // An internal caller (by its address, which Envoy reads from the connection) is critical and
    // takes the last 10%.
    let internal = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    assert_eq!(status(internal.get(&url)).await, 200);
    assert_eq!(
        status(internal.get(&url)).await,
        429,
        "the capacity is spent"
    );
    // Other methods send no descriptor and are never limited.
    assert_eq!(status(http.put(&url)).await, 200);
}
