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
use tonic::codegen::http;
use tonic::metadata::MetadataMap;
use tonic::{Request, Status};

use super::RlsService;
use super::pb::envoy::service::ratelimit::v3 as rls;
use super::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;

/// A gRPC message's prefix: the compression flag and the length.
const PREFIX: usize = 5;

/// The request message in `framed` (one whole gRPC frame) if this path can take it; `None` leaves
/// the request to tonic.
pub fn decode(headers: &http::HeaderMap, framed: &[u8]) -> Option<rls::RateLimitRequest> {
    if headers.contains_key("grpc-encoding") {
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

/// Answers `message` with `service`, the request's `parts` giving its metadata and extensions.
pub async fn answer(
    service: &RlsService,
    parts: http::request::Parts,
    message: rls::RateLimitRequest,
) -> http::Response<tonic::body::Body> {
    let request = Request::from_parts(
        MetadataMap::from_headers(parts.headers),
        parts.extensions,
        message,
    );
    let response = match service.should_rate_limit(request).await {
        Ok(r) => r,
        Err(status) => return status.into_http(),
    };
    let (metadata, message, extensions) = response.into_parts();
    let mut framed = Vec::with_capacity(PREFIX + message.encoded_len());
    framed.push(0);
    framed.extend_from_slice(&(message.encoded_len() as u32).to_be_bytes());
    // Cannot fail: the buffer was sized for the message.
    let _ = message.encode(&mut framed);
    let mut headers = metadata.into_headers();
    // The names tonic keeps out of an answer's headers (it writes them itself).
    for reserved in ["te", "grpc-message", "grpc-message-type", "grpc-status"] {
        headers.remove(reserved);
    }
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    let mut http = http::Response::new(tonic::body::Body::new(OneMessage {
        data: Some(Bytes::from(framed)),
        done: false,
    }));
    *http.version_mut() = http::Version::HTTP_2;
    *http.headers_mut() = headers;
    *http.extensions_mut() = extensions;
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
        let mut trailers = http::HeaderMap::with_capacity(1);
        Status::ok("").add_header(&mut trailers)?;
        Poll::Ready(Some(Ok(Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    // No size hint: an exact one would make hyper add a content-length header tonic does not send.
}
