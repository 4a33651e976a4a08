//! The direct path of `ShouldRateLimit`: [`super::bounded::Bounded`] already holds the whole
//! request message, so instead of handing it back to tonic as a new body (which tonic's codec then
//! streams into a fresh buffer, and whose answer it encodes through a second buffer and a stream)
//! the message is decoded from those bytes, answered by the same [`RlsService`] handler, and the
//! answer encoded once into the exact bytes it will be sent as. What goes on the wire is what
//! tonic sends for a unary answer: `content-type: application/grpc` and the handler's metadata as
//! headers, one uncompressed message, then the trailer `grpc-status: 0`; an error is the status
//! in a trailers-only answer, as tonic sends it.
//!
//! Anything tonic treats in its own way is left to it: a compressed message or a `grpc-encoding`
//! header (tonic refuses those), an empty body, trailing bytes after the message, or a message
//! prost cannot decode (tonic's error text is kept that way).

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Bytes;
use http_body::{Body as HttpBody, Frame};
use prost::Message;
use tonic::Status;
use tonic::codegen::http;
use tonic::metadata::MetadataMap;

use super::RlsService;
use super::pb::envoy::service::ratelimit::v3 as rls;

/// A gRPC message's prefix: the compression flag and the length.
const PREFIX: usize = 5;

/// The header that names a message's compression.
const GRPC_ENCODING: http::HeaderName = http::HeaderName::from_static("grpc-encoding");
/// The trailer that carries the call's status.
const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");

/// The request message in `framed` (one whole gRPC frame) if this path can take it; `None` leaves
/// the request to tonic.
pub fn decode(headers: &http::HeaderMap, framed: &[u8]) -> Option<rls::RateLimitRequest> {
    if headers.contains_key(GRPC_ENCODING) {
        return None;
    }
    let (&[0, a, b, c, d], message) = (framed.get(..PREFIX)?, framed.get(PREFIX..)?) else {
        return None;
    };
    if u32::from_be_bytes([a, b, c, d]) as usize != message.len() {
        return None;
    }
    rls::RateLimitRequest::decode(message).ok()
}

/// Answers `message` with `service`, the request's `parts` giving its metadata. The handler's
/// answer has no metadata of its own, so the headers are `content-type` alone.
pub async fn answer(
    service: &RlsService,
    parts: http::request::Parts,
    message: rls::RateLimitRequest,
) -> http::Response<tonic::body::Body> {
    let metadata = MetadataMap::from_headers(parts.headers);
    let message = match service.decide(&metadata, message).await {
        Ok(m) => m,
        Err(status) => return status.into_http(),
    };
    let len = message.encoded_len();
    let mut framed = Vec::with_capacity(PREFIX + len);
    framed.push(0);
    framed.extend_from_slice(&(len as u32).to_be_bytes());
    // Cannot fail: the buffer was sized for the message.
    let _ = message.encode(&mut framed);
    let mut http = http::Response::new(tonic::body::Body::new(OneMessage {
        data: Some(Bytes::from(framed)),
        done: false,
    }));
    *http.version_mut() = http::Version::HTTP_2;
    http.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    http
}

/// A body of one data frame, then the trailers of a successful call.
struct OneMessage {
    data: Option<Bytes>,
    done: bool,
}

impl HttpBody for OneMessage {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        if std::mem::replace(&mut self.done, true) {
            return Poll::Ready(None);
        }
        // What `Status::ok("").add_header` writes, without parsing the name at run time.
        let mut trailers = http::HeaderMap::with_capacity(1);
        trailers.insert(GRPC_STATUS, http::HeaderValue::from_static("0"));
        Poll::Ready(Some(Ok(Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    // No size hint: an exact one would make hyper add a content-length header tonic does not send.
}
