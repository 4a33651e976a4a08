//! B3 trace propagation, as the Go service accepts it: a request carrying Zipkin's `b3` header
//! (and, separately, the `x-b3-*` headers) gets a request span in the caller's trace, exported
//! over OTLP/HTTP to a collector on 127.0.0.1. Its own test binary, because the tracing
//! subscriber is process-global.

#[path = "it/support/mod.rs"]
mod support;

use support::otlp::{Traced, hex};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_span_continues_a_b3_trace() {
    let mut traced = Traced::start().await;
    let s = &traced.s;

    let single = ("80f198ee56343ba864fe8b2a57d3eff7", "e457b5a2e4d86bd1");
    let multi = ("463ac35c9f6413ad48485a3953bb6124", "a2fb4a1d1a96d312");
    let mut req = tonic::Request::new(request("another", &[&[("key2", "R")]]));
    let b3 = format!("{}-{}-1", single.0, single.1);
    req.metadata_mut().insert("b3", b3.parse().unwrap());
    s.grpc.clone().should_rate_limit(req).await.unwrap();
    let mut req = tonic::Request::new(request("another", &[&[("key2", "R")]]));
    let m = req.metadata_mut();
    m.insert("x-b3-traceid", multi.0.parse().unwrap());
    m.insert("x-b3-spanid", multi.1.parse().unwrap());
    m.insert("x-b3-sampled", "1".parse().unwrap());
    s.grpc.clone().should_rate_limit(req).await.unwrap();

    let (spans, _) = traced.request_spans(2).await;
    let mut parents: Vec<(String, String)> = spans
        .iter()
        .map(|span| (hex(&span.trace_id), hex(&span.parent_span_id)))
        .collect();
    parents.sort();
    let mut want = vec![
        (single.0.to_string(), single.1.to_string()),
        (multi.0.to_string(), multi.1.to_string()),
    ];
    want.sort();
    assert_eq!(
        parents, want,
        "both requests continue the caller's B3 trace"
    );
    traced.shutdown().await;
}
