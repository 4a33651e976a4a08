//! [`Tracked`]: a gRPC service that marks each RPC in flight on its connection, so that
//! `GRPC_MAX_CONNECTION_IDLE` measures the time with no RPC running (as grpc-go's
//! `MaxConnectionIdle` does) rather than the time without bytes (HTTP/2 pings would keep an
//! unused connection alive forever). The connection's [`Tracker`](crate::listener::Tracker) and
//! peer arrive as tonic's connect info ([`GrpcConnInfo`]).
//!
//! A unary RPC is in flight until its response is ready. A health watch (or an RLQS stream)
//! streams for as long as the client keeps it and may stay silent for hours, so a connection that
//! opened one counts as busy for the rest of its life; `GRPC_MAX_CONNECTION_AGE` still bounds it.
//! Such a connection moves from `GRPC_MAX_CONNECTIONS` to `GRPC_MAX_STREAM_CONNECTIONS`, so that
//! watchers cannot take the slots of unary clients; with that cap full, the stream is refused
//! with `RESOURCE_EXHAUSTED`.

use std::convert::Infallible;
use std::task::{Context, Poll};

use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Service, http};
use tonic::server::NamedService;

use super::grpc_listen::GrpcConnInfo;
use crate::listener::http::Peer;

/// The long-lived streaming RPCs the service offers: the health watch and RLQS.
const STREAMS: [&str; 2] = [
    "/grpc.health.v1.Health/Watch",
    "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas",
];

/// `S`, with its RPCs marked in flight on their connection.
#[derive(Debug, Clone)]
pub(super) struct Tracked<S>(pub(super) S);

impl<S: NamedService> NamedService for Tracked<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for Tracked<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = Infallible;
    type Future = BoxFuture<S::Response, Infallible>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<Body>) -> Self::Future {
        let info = req.extensions().get::<GrpcConnInfo>().cloned();
        // As on the HTTP listeners, a request carries its client's address (RLQS shares its
        // stream cap per peer).
        if let Some(peer) = info.as_ref().and_then(|i| i.peer) {
            req.extensions_mut().insert(Peer(peer));
        }
        let activity = info.map(|i| i.tracker.0);
        if let Some(a) = activity
            .as_ref()
            .filter(|_| STREAMS.contains(&req.uri().path()))
            && let Err(full) = a.hold_open_for_stream()
        {
            tracing::debug!(path = req.uri().path(), %full, "long-lived stream refused");
            let refused = Status::resource_exhausted(full.to_string()).into_http();
            return Box::pin(std::future::ready(Ok(refused)));
        }
        let busy = activity.map(|a| a.begin());
        let response = self.0.call(req);
        Box::pin(async move {
            let r = response.await;
            drop(busy);
            r
        })
    }
}
