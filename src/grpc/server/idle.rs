//! [`begin`]: each gRPC RPC is marked in flight on its connection, so that
//! `GRPC_MAX_CONNECTION_IDLE` measures the time with no RPC running (as grpc-go's
//! `MaxConnectionIdle` does) rather than the time without bytes (HTTP/2 pings would keep an
//! unused connection alive forever). The connection's [`Tracker`](crate::listener::Tracker) and
//! peer come with each connection ([`ConnInfo`]).
//!
//! A unary RPC is in flight until its response is ready. A health watch (or an RLQS stream)
//! streams for as long as the client keeps it and may stay silent for hours, so a connection that
//! opened one counts as busy for the rest of its life; `GRPC_MAX_CONNECTION_AGE` still bounds it.
//! Such a connection moves from `GRPC_MAX_CONNECTIONS` to `GRPC_MAX_STREAM_CONNECTIONS`, so that
//! watchers cannot take the slots of unary clients; with that cap full, the stream is refused
//! with `RESOURCE_EXHAUSTED`.

use tonic::Status;
use tonic::body::Body;
use tonic::codegen::http;

use super::listen::ConnInfo;
use crate::listener::{Busy, StreamsFull};

/// The long-lived streaming RPCs the service offers: the health watch and RLQS.
const STREAMS: [&str; 2] = [
    "/grpc.health.v1.Health/Watch",
    "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas",
];

/// Marks an RPC to `path` in flight on its connection (`info`) until the returned guard is
/// dropped, which the caller does once the response is ready. A long-lived stream first moves the
/// connection to the streams gate; with that gate full the stream is to be refused
/// (`RESOURCE_EXHAUSTED`, [`refusal`]).
pub(super) fn begin(info: &ConnInfo, path: &str) -> Result<Busy, StreamsFull> {
    let activity = &info.tracker.0;
    if STREAMS.contains(&path) {
        activity.hold_open_for_stream()?;
    }
    Ok(activity.begin())
}

/// The answer to a stream refused for want of room on the streams gate.
pub(super) fn refusal(path: &str, full: StreamsFull) -> http::Response<Body> {
    tracing::debug!(path, %full, "long-lived stream refused");
    Status::resource_exhausted(full.to_string()).into_http()
}
