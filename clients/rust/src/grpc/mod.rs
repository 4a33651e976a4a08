//! A client for Envoy's `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` on
//! ratelimitd's gRPC port, for callers that build descriptors themselves (as Envoy does) rather
//! than use `POST /check`. One HTTP/2 connection, multiplexed, reconnected by tonic when it breaks;
//! a deadline on every call.

pub mod pb;

use std::time::Duration;

use http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};

use crate::error::Error;
pub use pb::{Code, RateLimitDescriptor, RateLimitRequest, RateLimitResponse};

const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// A gRPC `ShouldRateLimit` client. Cheap to clone: clones share the connection.
#[derive(Clone, Debug)]
pub struct GrpcClient {
    channel: Channel,
    timeout: Duration,
}

impl GrpcClient {
    /// A client of `url` (e.g. `http://127.0.0.1:8081`) that connects on first use and gives every
    /// call (connecting included) `timeout` to answer.
    pub fn new(url: &str, timeout: Duration) -> Result<GrpcClient, Error> {
        if timeout.is_zero() {
            return Err(Error::Config("timeout: must be above zero".into()));
        }
        let endpoint = Endpoint::from_shared(url.to_owned())
            .map_err(|e| Error::Config(format!("gRPC URL {url:?}: {e}")))?
            .connect_timeout(timeout)
            .timeout(timeout)
            .tcp_nodelay(true);
        Ok(GrpcClient {
            channel: endpoint.connect_lazy(),
            timeout,
        })
    }

    /// Calls `ShouldRateLimit`. An answer whose overall code is neither `OK` nor `OVER_LIMIT` is
    /// [`Error::Malformed`]; gRPC errors map onto [`Error`] (`UNAVAILABLE` and `FAILED_PRECONDITION`
    /// to [`Error::Unavailable`], `INVALID_ARGUMENT` to [`Error::Rejected`]).
    pub async fn should_rate_limit(
        &self,
        req: RateLimitRequest,
    ) -> Result<RateLimitResponse, Error> {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        let call = async {
            grpc.ready()
                .await
                .map_err(|e| Error::Transport(e.to_string()))?;
            let codec = tonic_prost::ProstCodec::<RateLimitRequest, RateLimitResponse>::default();
            grpc.unary(
                tonic::Request::new(req),
                PathAndQuery::from_static(PATH),
                codec,
            )
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| self.status_error(s))
        };
        let answer = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| Error::Timeout(self.timeout))??;
        match Code::try_from(answer.overall_code) {
            Ok(Code::Ok | Code::OverLimit) => Ok(answer),
            _ => Err(Error::Malformed(format!(
                "overall_code {} is neither OK nor OVER_LIMIT",
                answer.overall_code
            ))),
        }
    }

    fn status_error(&self, s: tonic::Status) -> Error {
        use tonic::Code as C;
        match s.code() {
            C::DeadlineExceeded | C::Cancelled => Error::Timeout(self.timeout),
            C::Unavailable | C::FailedPrecondition | C::ResourceExhausted => Error::Unavailable {
                code: format!("{:?}", s.code()),
                retry_after: None,
            },
            C::InvalidArgument => Error::Rejected {
                status: 400,
                code: "invalid_argument".into(),
                message: s.message().to_owned(),
            },
            _ => Error::Transport(format!("{:?}: {}", s.code(), s.message())),
        }
    }
}

impl RateLimitDescriptor {
    /// A descriptor from `(key, value)` entries, outermost first.
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        RateLimitDescriptor {
            entries: entries
                .into_iter()
                .map(|(key, value)| pb::Entry {
                    key: key.to_owned(),
                    value: value.to_owned(),
                })
                .collect(),
            hits_addend: None,
        }
    }
}

impl RateLimitResponse {
    /// Whether every descriptor is within its limit.
    pub fn is_ok(&self) -> bool {
        self.overall_code == Code::Ok as i32
    }
}
