//! [`Bounded`]: the `ShouldRateLimit` service, with each request message read and checked before
//! tonic decodes it. The message is buffered up to `GRPC_MAX_RECV_MESSAGE_BYTES` (refused with
//! `OUT_OF_RANGE` as soon as its declared length is larger), then `wire` counts its
//! descriptors and entries: past `MAX_DESCRIPTORS_PER_REQUEST` or `MAX_ENTRIES_PER_DESCRIPTOR`
//! it is refused with `INVALID_ARGUMENT` naming the setting, before prost builds anything. The scan
//! of a large message runs on the blocking pool ([`crate::listener::offload`]), so what remains
//! on the runtime worker is the decode of a message within the caps. A message within the caps is
//! then answered on [`super::unary`]'s direct path from the bytes read here, without a second
//! pass through tonic's codec. The gRPC port calls it for that one exact path
//! ([`Bounded::answer`]); tonic's router never sees it.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use axum::body::Bytes;
use http_body::Body as HttpBody;
use http_body_util::{BodyExt, Full};
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{Service, http};

use super::unary::Answer;
use super::{MESSAGE_PREFIX, RlsService};
use ratelimitd_core::limiter::Limits;

/// The method whose messages are checked.
pub const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// `S`, with its `ShouldRateLimit` messages checked before they are decoded.
#[derive(Debug, Clone)]
pub(crate) struct Bounded<S> {
    inner: S,
    caps: Limits,
    max_message: usize,
    /// The handler the direct path answers with; `None` hands every message to `inner`.
    direct: Option<Arc<RlsService>>,
}

impl<S> Bounded<S> {
    /// Checks `inner`'s messages against `caps` and `max_message` (`GRPC_MAX_RECV_MESSAGE_BYTES`).
    pub(crate) fn new(inner: S, caps: Limits, max_message: usize) -> Bounded<S> {
        Bounded {
            inner,
            caps,
            max_message,
            direct: None,
        }
    }

    /// Answers the messages the direct path can take with `service` (the handler `inner` wraps),
    /// leaving the others to `inner`.
    pub(crate) fn answered_by(mut self, service: RlsService) -> Bounded<S> {
        self.direct = Some(Arc::new(service));
        self
    }
}

impl<S> Bounded<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S: Clone + Send + 'static,
    S::Future: Send + 'static,
{
    /// Answers one `ShouldRateLimit` call whatever its body's type (the gRPC port hands over
    /// the body h2 receives, so nothing re-boxes it): the message is read and checked against the
    /// caps, answered on the direct path when it can be, and handed to the inner service
    /// otherwise.
    pub(crate) fn answer<B>(
        &self,
        req: http::Request<B>,
    ) -> impl Future<Output = Answer> + Send + 'static
    where
        B: HttpBody<Data = Bytes> + Unpin + Send + 'static,
        B::Error: Into<tonic::codegen::StdError>,
    {
        let mut inner = self.inner.clone();
        let (caps, max, direct) = (self.caps, self.max_message, self.direct.clone());
        async move {
            let (parts, body) = req.into_parts();
            let bytes = match read_message(body, max).await {
                Ok(bytes) => bytes,
                Err(status) => return status.into(),
            };
            if let Err(status) = check(bytes.clone(), caps).await {
                return status.into();
            }
            if let Some(service) = direct
                && let Some(req) = super::unary::decode(&parts.headers, &bytes)
            {
                return super::unary::answer(&service, parts, req).await;
            }
            let body = Body::new(Full::new(bytes).map_err(|e| match e {}));
            // A clone of a ready service: wait for it to be ready too (tonic's always is).
            let Ok(()) = std::future::poll_fn(|cx| inner.poll_ready(cx)).await;
            let Ok(response) = inner.call(http::Request::from_parts(parts, body)).await;
            Answer::Response(response)
        }
    }
}

/// Reads a request body holding one message of at most `max` bytes. A body that arrives as one
/// data frame (the usual case for a small message) is kept as it came, without a copy.
async fn read_message<B>(mut body: B, max: usize) -> Result<Bytes, Status>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<tonic::codegen::StdError>,
{
    let too_large = |len: usize| {
        Status::out_of_range(format!(
            "message is {len} bytes; at most {max} are accepted (GRPC_MAX_RECV_MESSAGE_BYTES)"
        ))
    };
    let mut first: Option<Bytes> = None;
    let mut joined = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Status::from_error(e.into()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        match first.take() {
            None if joined.is_empty() => first = Some(data),
            earlier => {
                joined.extend_from_slice(&earlier.unwrap_or_default());
                joined.extend_from_slice(&data);
            }
        }
        let seen = first.as_deref().unwrap_or(&joined);
        if let Some(prefix) = seen.get(1..MESSAGE_PREFIX) {
            let declared = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
            let declared = declared as usize;
            if declared > max {
                return Err(too_large(declared));
            }
        }
        if seen.len() > MESSAGE_PREFIX + max {
            return Err(too_large(seen.len() - MESSAGE_PREFIX));
        }
        // The frame that ended the stream: no need to poll for the end once more.
        if body.is_end_stream() {
            break;
        }
    }
    Ok(first.unwrap_or_else(|| Bytes::from(joined)))
}

/// Counts the descriptors and entries of the message in `framed` (a compressed or incomplete
/// one is left to tonic, which refuses it).
async fn check(framed: Bytes, caps: Limits) -> Result<(), Status> {
    if framed.first() != Some(&0) {
        return Ok(());
    }
    let scan = move |b: &[u8]| {
        super::wire::check_counts(b.get(MESSAGE_PREFIX..).unwrap_or_default(), &caps)
    };
    match crate::listener::offload(framed, scan).await {
        Some(Ok(())) => Ok(()),
        Some(Err(over)) => Err(Status::invalid_argument(over.to_string())),
        None => Err(Status::unavailable("shutting down")),
    }
}
