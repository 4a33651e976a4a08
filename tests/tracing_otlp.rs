//! OTLP tracing: a minimal OTLP/HTTP collector on 127.0.0.1 (axum, decoding the protobuf export
//! request) receives the request span, whose parent is the `traceparent` the client sent.
//! Its own test binary, not a module of `it`, because the tracing subscriber it installs is
//! process-global: in the shared binary every other test's spans and logs would go through it.

#[path = "it/support/mod.rs"]
mod support;

use std::time::Duration;

use support::otlp::{collector, hex};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_span_continues_the_callers_trace() {
    let (endpoint, mut spans) = collector().await;
    let env = [
        ("TRACING_ENABLED", "true"),
        ("TRACING_EXPORTER_PROTOCOL", "http"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
    ];
    let s = TestServer::start(&[("another.yaml", CFG_INT_ANOTHER)], &env).await;
    let telemetry = ratelimitd::init_telemetry(&settings(s.dir.path(), &env).telemetry()).unwrap();

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent_id = "00f067aa0ba902b7";
    let mut req = tonic::Request::new(request("another", &[&[("key2", "R")]]));
    req.metadata_mut().insert(
        "traceparent",
        format!("00-{trace_id}-{parent_id}-01").parse().unwrap(),
    );
    s.grpc.clone().should_rate_limit(req).await.unwrap();

    // The exporter blocks while it sends: flush off the async workers.
    let telemetry = tokio::task::spawn_blocking(move || {
        telemetry.flush();
        telemetry
    })
    .await
    .unwrap();
    let mut seen = Vec::new();
    let found = loop {
        match tokio::time::timeout(Duration::from_secs(10), spans.recv()).await {
            Ok(Some(span)) if span.name == "ShouldRateLimit" => break Some(span),
            Ok(Some(span)) => seen.push(span.name),
            _ => break None,
        }
    };
    let span = found.unwrap_or_else(|| panic!("no ShouldRateLimit span; saw {seen:?}"));
    assert_eq!(hex(&span.trace_id), trace_id);
    assert_eq!(hex(&span.parent_span_id), parent_id);
    tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .unwrap();
    s.shutdown().await;
}
