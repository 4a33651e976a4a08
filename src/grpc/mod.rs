//! The gRPC edge: `envoy.service.ratelimit.v3.RateLimitService` on top of [`Service`], plus the
//! `grpc.health.v1` service. Errors keep the Go service's messages with truthful status codes:
//! a bad request is `INVALID_ARGUMENT`, no configuration is `FAILED_PRECONDITION`, a store failure is
//! UNAVAILABLE (Envoy treats any error the same way: its `failure_mode_deny` decides). Request
//! messages are checked against the caps before they are decoded ([`bounded`]). The port's
//! transport (accept, HTTP/2, each call's stream, the drain) is `server`.

pub(crate) mod bounded;
pub(crate) mod convert;
mod decode;
mod encode;
mod options;
/// Generated protos; see the module's own doc.
#[allow(missing_docs, clippy::all)]
pub mod pb;
pub(crate) mod server;
pub(crate) mod tls;
pub(crate) mod unary;
pub(crate) mod unit;
mod wire;

use std::sync::Arc;

use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::metrics::Metrics;
use ratelimitd_core::clock::Stopwatch;

use self::pb::envoy::service::ratelimit::v3 as rls;
use crate::service::Service;
use ratelimitd_core::limiter::RequestError;

pub(crate) use options::GrpcServerSettings;
pub use options::TlsSettings;
pub(crate) use rls::rate_limit_service_server::RateLimitServiceServer;

/// A gRPC message's prefix on the wire: the compression flag and the length.
const MESSAGE_PREFIX: usize = 5;

/// The RLS v3 gRPC service.
#[derive(Debug, Clone)]
pub(crate) struct RlsService {
    service: Arc<Service>,
    metrics: Option<Arc<Metrics>>,
    standard_headers: bool,
}

impl RlsService {
    /// A gRPC front for `service`, counting requests and response times into `metrics`.
    pub(crate) fn new(service: Arc<Service>, metrics: Option<Arc<Metrics>>) -> RlsService {
        RlsService {
            service,
            metrics,
            standard_headers: false,
        }
    }

    /// Adds `Retry-After` and the draft-10 `RateLimit-Policy` / `RateLimit` to every answer's
    /// `response_headers_to_add` (`LIMIT_RESPONSE_STANDARD_HEADERS_ENABLED`).
    pub(crate) fn with_standard_headers(mut self, on: bool) -> RlsService {
        self.standard_headers = on;
        self
    }
}

/// The gRPC status for a request error.
pub fn status_of(e: &RequestError) -> Status {
    match e {
        _ if e.is_invalid_argument() => Status::invalid_argument(e.to_string()),
        RequestError::NoConfig => Status::failed_precondition(e.to_string()),
        _ => Status::unavailable(e.to_string()),
    }
}

impl RlsService {
    /// Decides `req`, the call's `metadata` carrying a remote trace parent if there is one:
    /// the answer both tonic's handler and the direct path ([`unary`]) send, before it becomes
    /// a message.
    pub(crate) async fn decide(
        &self,
        metadata: &MetadataMap,
        req: ratelimitd_core::limiter::Request,
    ) -> Result<ratelimitd_core::limiter::Response, Status> {
        let watch = Stopwatch::start();
        let span = tracing::info_span!("ShouldRateLimit", domain = tracing::field::Empty);
        crate::telemetry::set_remote_parent(&span, metadata);
        span.record("domain", req.domain.as_str());
        let result = self.service.should_rate_limit(&req).instrument(span).await;
        if let Some(m) = &self.metrics {
            m.grpc_request("ShouldRateLimit", watch.elapsed());
        }
        match result {
            Ok(mut resp) => {
                if self.standard_headers {
                    convert::add_standard_headers(&mut resp);
                }
                Ok(resp)
            }
            Err(e) => Err(status_of(&e)),
        }
    }
}

#[tonic::async_trait]
impl rls::rate_limit_service_server::RateLimitService for RlsService {
    async fn should_rate_limit(
        &self,
        request: Request<rls::RateLimitRequest>,
    ) -> Result<Response<rls::RateLimitResponse>, Status> {
        let (metadata, _, message) = request.into_parts();
        let req = ratelimitd_core::limiter::Request::from(message);
        let resp = self.decide(&metadata, req).await?;
        Ok(Response::new(resp.into()))
    }
}
