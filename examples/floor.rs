//! The transport's floor: a gRPC server on ratelimitd's own HTTP/2 stack that answers every
//! `ShouldRateLimit` with the same OK, deciding nothing. What it costs per call is what any
//! decision on this stack costs before the decision itself; `bench/peers.sh instructions` counts
//! both, so ratelimitd's instructions per decision read as a multiple of this.
//!
//! ```sh
//! cargo build --release --example floor
//! target/release/examples/floor 127.0.0.1:8081
//! ```
//!
//! The same stack as ratelimitd's gRPC port (`src/grpc/server/`): the same runtime (tokio's
//! multi-threaded one) and allocator (mimalloc), `TCP_NODELAY` and the write coalescing on each
//! connection, h2's server with the same settings, a task per call, the request's body read to
//! its end (its flow-control window given back), and the answer sent as its head, one data frame
//! and the `grpc-status: 0` trailer. The answer is the message ratelimitd sends for one
//! descriptor under `bench/peers.sh`'s limit (OK, 10^9 an hour, a remaining count, the time to
//! the reset), encoded once at start. Every other path is answered `UNIMPLEMENTED`. Loopback
//! only; it runs until killed.

use std::net::SocketAddr;

use axum::body::Bytes;
use h2::RecvStream;
use h2::server::SendResponse;
use prost::Message;
use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use ratelimitd::testing::{Coalesce, SHOULD_RATE_LIMIT, h2_settings};
use tokio::net::TcpListener;
use tonic::codegen::http;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The one answer, as a gRPC length-prefixed message.
fn answer() -> Bytes {
    let message = RateLimitResponse {
        overall_code: Code::Ok as i32,
        statuses: vec![DescriptorStatus {
            code: Code::Ok as i32,
            current_limit: Some(RateLimit {
                requests_per_unit: 1_000_000_000,
                unit: Unit::Hour as i32,
                ..Default::default()
            }),
            limit_remaining: 999_999_000,
            duration_until_reset: Some(prost_types::Duration {
                seconds: 1800,
                nanos: 0,
            }),
            ..Default::default()
        }],
        ..Default::default()
    }
    .encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&u32::try_from(message.len()).unwrap_or(0).to_be_bytes());
    framed.extend_from_slice(&message);
    Bytes::from(framed)
}

/// Reads the call's body to its end, then answers it.
async fn call(
    req: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    message: Bytes,
) -> Result<(), h2::Error> {
    let known = req.uri().path() == SHOULD_RATE_LIMIT;
    let mut body = req.into_body();
    while let Some(data) = body.data().await {
        let data = data?;
        body.flow_control().release_capacity(data.len())?;
    }
    let mut head = http::Response::new(());
    let content_type = http::HeaderValue::from_static("application/grpc");
    head.headers_mut()
        .insert(http::header::CONTENT_TYPE, content_type);
    let mut trailers = http::HeaderMap::with_capacity(1);
    let status = if known { "0" } else { "12" };
    trailers.insert("grpc-status", http::HeaderValue::from_static(status));
    if !known {
        let mut tx = respond.send_response(head, false)?;
        return tx.send_trailers(trailers);
    }
    let mut tx = respond.send_response(head, false)?;
    tx.send_data(message, false)?;
    tx.send_trailers(trailers)
}

/// Serves one connection until its client closes it.
async fn connection(socket: tokio::net::TcpStream, message: Bytes) {
    let Ok(mut h2) = h2_settings()
        .handshake::<_, Bytes>(Coalesce::new(socket))
        .await
    else {
        return;
    };
    while let Some(Ok((req, respond))) = h2.accept().await {
        tokio::spawn(call(req, respond, message.clone()));
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8081".into())
        .parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    if !addr.ip().is_loopback() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{addr}: the floor server binds loopback addresses only"),
        ));
    }
    let listener = TcpListener::bind(addr).await?;
    let message = answer();
    loop {
        let (socket, _) = listener.accept().await?;
        socket.set_nodelay(true)?;
        tokio::spawn(connection(socket, message.clone()));
    }
}
