//! [`Tracked`]: a gRPC service that marks each RPC in flight on its connection, so that
//! `GRPC_MAX_CONNECTION_IDLE` measures the time with no RPC running (as grpc-go's
//! `MaxConnectionIdle` does) rather than the time without bytes (HTTP/2 pings would keep an
//! unused connection alive forever). The connection's [`Tracker`](crate::listener::Tracker) and
//! peer arrive as tonic's connect info ([`GrpcConnInfo`]).
//!
//! A unary RPC is in flight until its response is ready. A health watch (or an RLQS stream) streams for as long as
//! the client keeps it and may stay silent for hours, so a connection that opened one counts as
//! busy for the rest of its life; `GRPC_MAX_CONNECTION_AGE` still bounds it.

use std::convert::Infallible;
use std::task::{Context, Poll};

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
    S: Service<http::Request<Body>, Error = Infallible>,
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
        {
            a.hold_open();
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
