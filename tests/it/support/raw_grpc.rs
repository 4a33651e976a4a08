//! gRPC by hand, for the tests that need a raw HTTP/2 client (h2's) rather than tonic's: to leave
//! a message unsent, reset a call, or send bytes tonic's client would not.

use ratelimitd::testing::SHOULD_RATE_LIMIT;
use tonic::codegen::http;

/// A gRPC frame: the compression flag, the length, the message.
pub(crate) fn framed(flag: u8, message: &[u8]) -> Vec<u8> {
    let mut v = vec![flag];
    v.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    v.extend_from_slice(message);
    v
}

/// The head of a `ShouldRateLimit` call as a gRPC client sends it, `extra` headers added (a
/// `grpc-timeout`, a `grpc-encoding`).
pub(crate) fn should_rate_limit(extra: &[(&str, &str)]) -> http::Request<()> {
    let mut head = http::Request::post(format!("http://localhost{SHOULD_RATE_LIMIT}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in extra {
        head = head.header(*name, *value);
    }
    head.body(()).unwrap()
}
