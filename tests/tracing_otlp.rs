//! OTLP tracing: a minimal OTLP/HTTP collector on 127.0.0.1 (axum, decoding the protobuf export
//! request) receives the request span, whose parent is the `traceparent` the client sent.
//! Its own test binary, not a module of `it`, because the tracing subscriber it installs is
//! process-global: in the shared binary every other test's spans and logs would go through it.

#[path = "it/support/mod.rs"]
mod support;

use support::otlp::{Traced, hex};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_span_continues_the_callers_trace() {
    let mut traced = Traced::start().await;
    let s = &traced.s;

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent_id = "00f067aa0ba902b7";
    let mut req = tonic::Request::new(request("another", &[&[("key2", "R")]]));
    req.metadata_mut().insert(
        "traceparent",
        format!("00-{trace_id}-{parent_id}-01").parse().unwrap(),
    );
    s.grpc.clone().should_rate_limit(req).await.unwrap();

    let (spans, seen) = traced.request_spans(1).await;
    let span = (spans.first()).unwrap_or_else(|| panic!("no ShouldRateLimit span; saw {seen:?}"));
    assert_eq!(hex(&span.trace_id), trace_id);
    assert_eq!(hex(&span.parent_span_id), parent_id);
    traced.shutdown().await;
}
