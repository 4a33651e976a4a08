//! A minimal OTLP/HTTP trace collector on 127.0.0.1 (axum, decoding the protobuf export
//! request), for the tracing tests: every span it receives goes to a channel.

use std::time::Duration;

use axum::body::Bytes;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use ratelimitd::{Telemetry, init_telemetry};
use tokio::sync::mpsc;

use super::{CFG_INT_ANOTHER, TestServer, settings};

/// Starts the collector; every span it receives goes to the returned channel.
pub(crate) async fn collector() -> (String, mpsc::UnboundedReceiver<Span>) {
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

/// Lowercase hex of an id's bytes.
pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The service of `CFG_INT_ANOTHER` tracing its requests over OTLP/HTTP to a new [`collector`],
/// with this process's tracing installed (`init_telemetry`: once per test binary).
pub(crate) struct Traced {
    pub s: TestServer,
    /// Taken by [`Traced::request_spans`] while it flushes, off the async workers.
    telemetry: Option<Telemetry>,
    spans: mpsc::UnboundedReceiver<Span>,
}

impl Traced {
    /// Starts the collector and the service, and installs the tracing.
    pub(crate) async fn start() -> Traced {
        let (endpoint, spans) = collector().await;
        let env = [
            ("TRACING_ENABLED", "true"),
            ("TRACING_EXPORTER_PROTOCOL", "http"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ];
        let s = TestServer::start(&[("another.yaml", CFG_INT_ANOTHER)], &env).await;
        let telemetry = init_telemetry(&settings(s.dir.path(), &env).telemetry()).unwrap();
        Traced {
            s,
            telemetry: Some(telemetry),
            spans,
        }
    }

    /// Flushes the exporter, then reads what the collector received until `n` `ShouldRateLimit`
    /// spans came, or nothing came for 10 s: those spans, and the names of the others seen.
    pub(crate) async fn request_spans(&mut self, n: usize) -> (Vec<Span>, Vec<String>) {
        let telemetry = self.telemetry.take().unwrap();
        // The exporter blocks while it sends: flush off the async workers.
        let telemetry = tokio::task::spawn_blocking(move || {
            telemetry.flush();
            telemetry
        })
        .await
        .unwrap();
        self.telemetry = Some(telemetry);
        let (mut found, mut others) = (Vec::new(), Vec::new());
        while found.len() < n {
            match tokio::time::timeout(Duration::from_secs(10), self.spans.recv()).await {
                Ok(Some(span)) if span.name == "ShouldRateLimit" => found.push(span),
                Ok(Some(span)) => others.push(span.name),
                _ => break,
            }
        }
        (found, others)
    }

    /// Shuts the tracing down (off the async workers), then the service.
    pub(crate) async fn shutdown(mut self) {
        let telemetry = self.telemetry.take().unwrap();
        tokio::task::spawn_blocking(move || telemetry.shutdown())
            .await
            .unwrap();
        self.s.shutdown().await;
    }
}
