//! A minimal OTLP/HTTP trace collector on 127.0.0.1 (axum, decoding the protobuf export
//! request), for the tracing tests: every span it receives goes to a channel.

use axum::body::Bytes;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tokio::sync::mpsc;

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
