//! OTLP tracing: a minimal OTLP/HTTP collector on 127.0.0.1 (axum, decoding the protobuf export
//! request) receives the request span, whose parent is the `traceparent` the client sent.
//! Its own test binary, not a module of `it`, because the tracing subscriber it installs is
//! process-global: in the shared binary every other test's spans and logs would go through it.

#[path = "it/support/mod.rs"]
mod support;

use std::time::Duration;

use axum::body::Bytes;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use support::*;
use tokio::sync::mpsc;

/// Starts the collector; every span it receives goes to the returned channel.
async fn collector() -> (String, mpsc::UnboundedReceiver<Span>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| {
            let tx = tx.clone();
            async move {
                let req = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                for rs in req.resource_spans {
                    for ss in rs.scope_spans {
                        for span in ss.spans {
                            let _ = tx.send(span);
                        }
                    }
                }
                ""
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_span_continues_the_callers_trace() {
    let (endpoint, mut spans) = collector().await;
    let env = [
        ("TRACING_ENABLED", "true"),
        ("TRACING_EXPORTER_PROTOCOL", "http"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
    ];
    let s = TestServer::start(&[("another.yaml", CFG_INT_ANOTHER)], &env).await;
    let telemetry = ratelimitd::telemetry::init(&settings(s.dir.path(), &env)).unwrap();

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

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
