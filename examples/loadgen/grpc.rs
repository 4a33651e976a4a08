//! The one call the load generator makes, `ShouldRateLimit`, as plain gRPC over an HTTP/2
//! connection driven with the `h2` crate directly.
//!
//! The generator has to cost clearly less per request than the server does per decision, or its
//! figures measure the generator. A tonic `Channel` pays, per request, a trip through its
//! `Buffer` worker task, hyper's dispatch channel to the connection task, a task hyper spawns to
//! wait for the response, tower layers, and tonic's streaming codec. Here the caller's own task
//! opens the stream, hands it the encoded message and reads the answer; the only other task is
//! the connection's. The message is the same `RateLimitRequest` prost encodes for tonic, in the
//! same gRPC frame (uncompressed), under the same headers besides the pseudo-headers (`te`,
//! `content-type`, `user-agent`), so the server does the same work for it.

use prost::Message;
use prost::bytes::{BufMut, Bytes, BytesMut};
use ratelimitd::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::codegen::http::{self, HeaderMap, HeaderValue, Method, Request, Uri, header};

/// The method's path, as tonic's generated client sends it.
pub(crate) const PATH: &str = ratelimitd::testing::SHOULD_RATE_LIMIT;

/// The `user-agent` header, in the form of tonic's (`tonic/<version>`).
pub(crate) const USER_AGENT: &str = concat!("ratelimitd-loadgen/", env!("CARGO_PKG_VERSION"));

/// The largest answer read: an answer to one descriptor is tens of bytes; a server sending more
/// is answered with an error rather than with memory.
const MAX_ANSWER: usize = 64 * 1024;

/// Why a call failed; each counts as an error in the run's tally.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error("HTTP/2: {0}")]
    H2(#[from] h2::Error),
    #[error("HTTP status {0}")]
    HttpStatus(http::StatusCode),
    #[error("grpc-status {0:?}")]
    GrpcStatus(HeaderValue),
    #[error("no grpc-status in the trailers")]
    NoStatus,
    #[error("the answer is not one uncompressed gRPC message of at most {MAX_ANSWER} bytes")]
    Framing,
    #[error("the answer does not decode: {0}")]
    Decode(#[from] prost::DecodeError),
}

/// One HTTP/2 connection to the server; clones share it (each call is a stream of its own).
#[derive(Clone)]
pub(crate) struct Connection {
    send: h2::client::SendRequest<Bytes>,
    uri: Uri,
}

impl Connection {
    /// Connects to `target` (`host:port`) with `TCP_NODELAY`, as tonic does, and spawns the task
    /// that drives the connection on the current runtime.
    pub(crate) async fn open(target: &str) -> std::io::Result<Connection> {
        let tcp = tokio::net::TcpStream::connect(target).await?;
        tcp.set_nodelay(true)?;
        let (send, connection) = h2::client::handshake(tcp)
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                eprintln!("connection to the server ended: {e}");
            }
        });
        let uri = Uri::try_from(format!("http://{target}{PATH}"))
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        Ok(Connection { send, uri })
    }

    /// Sends `frame` (see [`frame`]) and returns the answer's `overall_code`; `body` is scratch
    /// space for the answer, kept by the caller so that calls reuse it.
    pub(crate) async fn call(
        &mut self,
        frame: Bytes,
        body: &mut BytesMut,
    ) -> Result<i32, CallError> {
        std::future::poll_fn(|cx| self.send.poll_ready(cx)).await?;
        let mut request = Request::new(());
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri.clone();
        // The headers tonic's client sends, in its order; the user agent names this program.
        let headers = request.headers_mut();
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        headers.insert(header::USER_AGENT, HeaderValue::from_static(USER_AGENT));
        let (answer, mut stream) = self.send.send_request(request, false)?;
        stream.send_data(frame, true)?;
        let answer = answer.await?;
        if answer.status() != http::StatusCode::OK {
            return Err(CallError::HttpStatus(answer.status()));
        }
        // A failure may come as headers alone ("trailers-only"), grpc-status among them.
        check_status(answer.headers(), false)?;
        let mut recv = answer.into_body();
        body.clear();
        while let Some(chunk) = recv.data().await {
            let chunk = chunk?;
            // Hand the bytes back to the flow-control windows as soon as they are read (h2 would
            // otherwise do it only when the stream is dropped).
            recv.flow_control().release_capacity(chunk.len())?;
            if body.len() + chunk.len() > MAX_ANSWER {
                return Err(CallError::Framing);
            }
            body.extend_from_slice(&chunk);
        }
        match recv.trailers().await? {
            Some(trailers) => check_status(&trailers, true)?,
            None => return Err(CallError::NoStatus),
        }
        Ok(RateLimitResponse::decode(unframe(body)?)?.overall_code)
    }
}

/// Fails on a `grpc-status` other than 0, or (when `required`) on none.
fn check_status(headers: &HeaderMap, required: bool) -> Result<(), CallError> {
    match headers.get("grpc-status") {
        Some(s) if s == "0" => Ok(()),
        Some(s) => Err(CallError::GrpcStatus(s.clone())),
        None if required => Err(CallError::NoStatus),
        None => Ok(()),
    }
}

/// The message in `body`, which must hold exactly one uncompressed gRPC frame.
pub(crate) fn unframe(body: &[u8]) -> Result<&[u8], CallError> {
    match body {
        [0, a, b, c, d, message @ ..]
            if u32::from_be_bytes([*a, *b, *c, *d]) as usize == message.len() =>
        {
            Ok(message)
        }
        _ => Err(CallError::Framing),
    }
}

/// `message` in a gRPC frame (uncompressed flag, 4-byte length, message), written into `buf`
/// and split off it: once the frame is dropped, `buf` reuses the same memory for the next one.
pub(crate) fn frame(message: &RateLimitRequest, buf: &mut BytesMut) -> Bytes {
    let len = message.encoded_len();
    buf.reserve(5 + len);
    buf.put_u8(0);
    buf.put_u32(u32::try_from(len).expect("a request of one descriptor"));
    message
        .encode(buf)
        .expect("the buffer holds the encoded length");
    buf.split().freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{request, set_value};

    #[test]
    fn the_frame_holds_the_message_tonic_sends_and_the_buffer_is_reused() {
        // The bytes bench/peers.sh gives h2load: RateLimitRequest{domain "bench",
        // descriptors [{entries [{k, "10.0.7"}]}], hits_addend 1}, uncompressed, 24 bytes.
        let expected: &[u8] =
            b"\x00\x00\x00\x00\x18\x0a\x05bench\x12\x0d\x0a\x0b\x0a\x01k\x12\x0610.0.7\x18\x01";
        let mut buf = BytesMut::new();
        assert_eq!(frame(&request("bench", "k", 7), &mut buf), expected);
        // The closed loop's clients rewrite one message in place: the same bytes as a new one.
        let mut message = request("bench", "k", 123_456);
        set_value(&mut message, 7);
        let first = frame(&message, &mut buf);
        assert_eq!(first, expected);
        let at = first.as_ptr();
        drop(first);
        set_value(&mut message, 8);
        let second = frame(&message, &mut buf);
        assert_eq!(second[..], [&expected[..26], b"8\x18\x01"].concat());
        assert_eq!(
            second.as_ptr(),
            at,
            "the second frame reuses the first one's memory"
        );
    }

    #[test]
    fn an_answer_is_one_uncompressed_frame_of_its_stated_length() {
        let answer = RateLimitResponse {
            overall_code: 2,
            ..RateLimitResponse::default()
        }
        .encode_to_vec();
        let mut body = vec![0, 0, 0, 0, u8::try_from(answer.len()).unwrap()];
        body.extend_from_slice(&answer);
        let message = unframe(&body).expect("one frame");
        assert_eq!(RateLimitResponse::decode(message).unwrap().overall_code, 2);
        // Compressed, cut short, two frames, or nothing at all: each an error, not a guess.
        let mut compressed = body.clone();
        compressed[0] = 1;
        let mut two = body.clone();
        two.extend_from_slice(&body);
        for bad in [&compressed[..], &body[..body.len() - 1], &two[..], &[][..]] {
            assert!(matches!(unframe(bad), Err(CallError::Framing)), "{bad:?}");
        }
    }
}
