//! The direct path of `ShouldRateLimit`: [`super::bounded::Bounded`] already holds the whole
//! request message, so instead of handing it back to tonic as a new body (which tonic's codec then
//! streams into a fresh buffer, and whose answer it encodes through a second buffer and a stream)
//! the message is decoded from those bytes (straight into the limiter's request where it can be,
//! `src/grpc/decode.rs`), answered by the same [`RlsService`] handler, and the answer encoded once
//! into the exact bytes it will be sent as ([`Answer::Message`]; written straight from the
//! limiter's response where it can be, `src/grpc/encode.rs`). What goes
//! on the wire is what tonic sends for a unary answer: `content-type: application/grpc` and the
//! handler's metadata (none) as headers ([`message_head`]), one uncompressed message, then the
//! trailer `grpc-status: 0` ([`ok_trailers`]); an error is the status in a trailers-only answer,
//! as tonic sends it.
//!
//! Anything tonic treats in its own way is left to it: a compressed message or a `grpc-encoding`
//! header (tonic refuses those), an empty body, trailing bytes after the message, or a message
//! prost cannot decode (tonic's error text is kept that way).

use axum::body::Bytes;
use prost::Message;
use tonic::Status;
use tonic::codegen::http;
use tonic::metadata::MetadataMap;

use super::pb::envoy::service::ratelimit::v3 as rls;
use super::{MESSAGE_PREFIX, RlsService};
use ratelimitd_core::limiter::Request;

/// The header that names a message's compression.
const GRPC_ENCODING: http::HeaderName = http::HeaderName::from_static("grpc-encoding");
/// The trailer that carries the call's status.
const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");

/// The request in `framed` (one whole gRPC frame) if this path can take it; `None` leaves the
/// request to tonic. The message is read straight into the limiter's request where it can be
/// (`src/grpc/decode.rs`); prost decodes the rest.
pub(crate) fn decode(headers: &http::HeaderMap, framed: &[u8]) -> Option<Request> {
    if headers.contains_key(GRPC_ENCODING) {
        return None;
    }
    let (&[0, a, b, c, d], message) =
        (framed.get(..MESSAGE_PREFIX)?, framed.get(MESSAGE_PREFIX..)?)
    else {
        return None;
    };
    if u32::from_be_bytes([a, b, c, d]) as usize != message.len() {
        return None;
    }
    if let Some(req) = super::decode::request(message) {
        return Some(req);
    }
    rls::RateLimitRequest::decode(message)
        .ok()
        .map(Request::from)
}

/// What a `ShouldRateLimit` call answers: on the direct path, the one framed message of a
/// successful call, which the gRPC port sends as `content-type: application/grpc`, one data frame
/// and the trailer `grpc-status: 0` (what tonic sends for a unary answer, with no metadata);
/// otherwise an HTTP response as tonic makes it (an error status in a trailers-only answer, or
/// tonic's own answer to a request it decoded itself).
#[derive(Debug)]
pub(crate) enum Answer {
    /// A successful call's answer message with its gRPC prefix.
    Message(Bytes),
    /// Anything else.
    Response(http::Response<tonic::body::Body>),
}

impl From<Status> for Answer {
    fn from(status: Status) -> Answer {
        Answer::Response(status.into_http())
    }
}

/// Answers `req` with `service`, the request's `parts` giving its metadata. The handler's
/// answer has no metadata of its own, so the headers are `content-type` alone.
pub(crate) async fn answer(
    service: &RlsService,
    parts: http::request::Parts,
    req: Request,
) -> Answer {
    let metadata = MetadataMap::from_headers(parts.headers);
    let resp = match service.decide(&metadata, req).await {
        Ok(r) => r,
        Err(status) => return status.into(),
    };
    if let Some(framed) = super::encode::framed(&resp) {
        return Answer::Message(framed);
    }
    let message = rls::RateLimitResponse::from(resp);
    let len = message.encoded_len();
    let mut framed = Vec::with_capacity(MESSAGE_PREFIX + len);
    framed.push(0);
    framed.extend_from_slice(&(len as u32).to_be_bytes());
    // Cannot fail: the buffer was sized for the message.
    let _ = message.encode(&mut framed);
    Answer::Message(Bytes::from(framed))
}

/// The response head of an [`Answer::Message`].
pub(crate) fn message_head() -> http::Response<()> {
    let mut head = http::Response::new(());
    head.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    head
}

/// The trailers that end an [`Answer::Message`]: what `Status::ok("").add_header` writes,
/// without parsing the name at run time.
pub(crate) fn ok_trailers() -> http::HeaderMap {
    let mut trailers = http::HeaderMap::with_capacity(1);
    trailers.insert(GRPC_STATUS, http::HeaderValue::from_static("0"));
    trailers
}
