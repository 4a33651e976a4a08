//! `ShouldRateLimit` as bytes on a real HTTP/2 connection: the answer's headers, message and
//! trailers are exactly what tonic sends for a unary call (the direct path answers most requests
//! itself, `src/grpc/unary.rs`), and the requests it leaves to tonic (compressed, undecodable,
//! several messages) still get tonic's own refusals. The port's connections are served without
//! tonic's server (`src/grpc/server/`): a call past its `grpc-timeout` and an unknown method
//! still get the answers tonic's server would send.

use http_body_util::{BodyExt, Full};
use prost::Message;
use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use tonic::body::Body;
use tonic::codegen::{Bytes, Service, http};
use tonic::transport::{Channel, Endpoint};

use crate::support::raw_grpc::{framed, should_rate_limit};
use crate::support::*;

const CFG: &str =
    "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n";

/// What came back for one request: status, headers, body bytes, trailers.
struct Answer {
    status: http::StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
    trailers: Option<http::HeaderMap>,
}

async fn send(channel: &mut Channel, extra: &[(&str, &str)], body: Vec<u8>) -> Answer {
    send_body(channel, extra, Full::new(Bytes::from(body))).await
}

/// Sends `body` as the request body, one HTTP/2 DATA frame per frame it yields.
async fn send_body<B>(channel: &mut Channel, extra: &[(&str, &str)], body: B) -> Answer
where
    B: http_body::Body<Data = Bytes, Error = std::convert::Infallible> + Send + 'static,
{
    let req = should_rate_limit(extra).map(|()| Body::new(body.map_err(|e| match e {})));
    std::future::poll_fn(|cx| channel.poll_ready(cx))
        .await
        .unwrap();
    let resp = channel.call(req).await.expect("an HTTP/2 answer");
    let (parts, body) = resp.into_parts();
    let collected = body.collect().await.expect("the whole body");
    let trailers = collected.trailers().cloned();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: collected.to_bytes(),
        trailers,
    }
}

/// The header names and values of `map`, sorted (HTTP/2 does not keep an order that matters).
/// Every header counts: an answer carries no `date`, as grpc-go's do not.
fn pairs(map: &http::HeaderMap) -> Vec<(String, String)> {
    let mut v: Vec<_> = map
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
        .collect();
    v.sort();
    v
}

fn only(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A request tonic refuses: extra headers, body, grpc-status, words of tonic's message.
type Refused<'a> = (&'a [(&'a str, &'a str)], Vec<u8>, &'a str, &'a str);

async fn channel(s: &TestServer) -> Channel {
    Endpoint::from_shared(format!("http://{}", s.running().grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_decision_is_one_message_between_tonics_headers_and_trailers() {
    let s = TestServer::start(&[("d.yaml", CFG)], &[]).await;
    let mut ch = channel(&s).await;
    let message = request("d", &[&[("k", "v")]]).encode_to_vec();
    let mut codes = Vec::new();
    for _ in 0..3 {
        let a = send(&mut ch, &[], framed(0, &message)).await;
        assert_eq!(a.status, http::StatusCode::OK);
        // No content-length, no grpc-status in the headers: a message then trailers.
        assert_eq!(
            pairs(&a.headers),
            only(&[("content-type", "application/grpc")])
        );
        assert_eq!(
            pairs(a.trailers.as_ref().expect("trailers")),
            only(&[("grpc-status", "0")])
        );
        let (prefix, rest) = a.body.split_at(5);
        assert_eq!(prefix[0], 0, "uncompressed");
        assert_eq!(
            u32::from_be_bytes(prefix[1..].try_into().unwrap()) as usize,
            rest.len()
        );
        let resp = RateLimitResponse::decode(rest).expect("one RateLimitResponse");
        assert_eq!(rest, resp.encode_to_vec(), "nothing but the message");
        codes.push(overall(&resp));
    }
    assert_eq!(codes, [Code::Ok, Code::Ok, Code::OverLimit]);
    // The generated client reads the same answers.
    assert_eq!(overall(&s.rl("d", &[&[("k", "v")]]).await), Code::OverLimit);
    s.shutdown().await;
}

#[tokio::test]
async fn requests_the_direct_path_leaves_alone_get_tonics_answers() {
    let s = TestServer::start(&[("d.yaml", CFG)], &[]).await;
    let mut ch = channel(&s).await;
    let message = request("d", &[&[("k", "v")]]).encode_to_vec();
    let mut two = framed(0, &message);
    two.extend(framed(0, &message));
    let cases: [Refused; 4] = [
        (&[], framed(1, &message), "13", "compressed-flag"),
        (
            &[("grpc-encoding", "gzip")],
            framed(1, &message),
            "12",
            "gzip",
        ),
        (&[], framed(0, &[0xff, 0xff, 0xff]), "13", "decode"),
        (&[], Vec::new(), "13", "Missing"),
    ];
    for (extra, body, code, words) in cases {
        let a = send(&mut ch, extra, body).await;
        // Trailers-only: the status is in the headers, there is no message.
        let status = a.headers.get("grpc-status").map(|v| v.to_str().unwrap());
        assert_eq!(status, Some(code), "{words}: {:?}", a.headers);
        let text = a.headers["grpc-message"].to_str().unwrap().to_string();
        assert!(text.contains(words), "{words}: {text}");
        assert!(a.body.is_empty(), "{words}");
    }
    // Two messages in a unary call: tonic answers the first and ignores the rest; nothing was
    // counted twice.
    let a = send(&mut ch, &[], two).await;
    let resp = RateLimitResponse::decode(&a.body[5..]).unwrap();
    assert_eq!(st(&resp, 0).2, 1, "one hit counted");
    s.shutdown().await;
}

/// `bytes` as a body of one DATA frame per `piece` bytes.
fn in_pieces(
    bytes: &[u8],
    piece: usize,
) -> impl http_body::Body<Data = Bytes, Error = std::convert::Infallible> + use<> {
    let frames: Vec<Result<http_body::Frame<Bytes>, std::convert::Infallible>> = bytes
        .chunks(piece)
        .map(|c| Ok(http_body::Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    http_body_util::StreamBody::new(futures_util::stream::iter(frames))
}

#[tokio::test]
async fn a_message_over_several_data_frames_is_read_whole_and_its_cap_still_holds() {
    let s = TestServer::start(
        &[("d.yaml", CFG)],
        &[("GRPC_MAX_RECV_MESSAGE_BYTES", "1024")],
    )
    .await;
    let mut ch = channel(&s).await;
    let message = request("d", &[&[("k", "v")]]).encode_to_vec();
    // The prefix itself split, then the message a few bytes at a time.
    let a = send_body(&mut ch, &[], in_pieces(&framed(0, &message), 3)).await;
    assert_eq!(a.status, http::StatusCode::OK);
    assert_eq!(
        pairs(a.trailers.as_ref().expect("trailers")),
        only(&[("grpc-status", "0")])
    );
    let resp = RateLimitResponse::decode(&a.body[5..]).expect("one RateLimitResponse");
    assert_eq!(overall(&resp), Code::Ok);
    assert_eq!(
        st(&resp, 0).2,
        1,
        "one hit counted, as for a message in one frame"
    );
    // Over the cap, as pieces: refused once the prefix is read, naming the setting.
    let big = request("d", &[&[("k", &"v".repeat(2000))]]).encode_to_vec();
    let a = send_body(&mut ch, &[], in_pieces(&framed(0, &big), 3)).await;
    let status = a.headers.get("grpc-status").map(|v| v.to_str().unwrap());
    assert_eq!(status, Some("11"), "{:?}", a.headers);
    let text = a.headers["grpc-message"].to_str().unwrap();
    assert!(text.contains("GRPC_MAX_RECV_MESSAGE_BYTES"), "{text}");
    s.shutdown().await;
}

#[tokio::test]
async fn a_call_past_its_grpc_timeout_is_cancelled() {
    let s = TestServer::start(&[("d.yaml", CFG)], &[]).await;
    // A plain HTTP/2 client: tonic's own client would end the call itself at the deadline.
    let tcp = tokio::net::TcpStream::connect(s.running().grpc_addr)
        .await
        .unwrap();
    let (mut h2, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let call = |timeout: &str| should_rate_limit(&[("grpc-timeout", timeout)]);
    // The call is opened and its message never sent: without a deadline it would wait for the
    // message (up to the connection's own timeouts); with one it ends there.
    let (answer, _open) = h2.send_request(call("200m"), false).unwrap();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), answer)
        .await
        .expect("the deadline ends the call")
        .unwrap();
    assert_eq!(answer.status(), http::StatusCode::OK);
    assert_eq!(
        answer
            .headers()
            .get("grpc-status")
            .map(|v| v.to_str().unwrap()),
        Some("1"),
        "CANCELLED: {:?}",
        answer.headers()
    );
    // The connection is still good for the next call, which finishes within its deadline.
    let (answer, mut body) = h2.send_request(call("5S"), false).unwrap();
    let message = request("d", &[&[("k", "v")]]).encode_to_vec();
    body.send_data(Bytes::from(framed(0, &message)), true)
        .unwrap();
    let mut recv = answer.await.unwrap().into_body();
    while let Some(chunk) = recv.data().await {
        chunk.unwrap();
    }
    let trailers = recv.trailers().await.unwrap().expect("trailers");
    assert_eq!(trailers.get("grpc-status").unwrap(), "0");
    s.shutdown().await;
}

#[tokio::test]
async fn a_call_its_client_resets_ends_and_no_longer_keeps_its_connection_open() {
    // A connection with no call in flight for a second is closed; one with a call waiting is not.
    let env = [("GRPC_MAX_CONNECTION_IDLE", "1s")];
    let s = TestServer::start(&[("d.yaml", CFG)], &env).await;
    let open = || async {
        let tcp = tokio::net::TcpStream::connect(s.running().grpc_addr)
            .await
            .unwrap();
        let (h2, connection) = h2::client::handshake(tcp).await.unwrap();
        (h2, tokio::spawn(connection))
    };
    // Two calls opened on two connections, their messages never sent: each waits for its body.
    let (mut reset_h2, reset_conn) = open().await;
    let (mut kept_h2, kept_conn) = open().await;
    let (_, mut reset_body) = reset_h2
        .send_request(should_rate_limit(&[]), false)
        .unwrap();
    let (_, _kept_body) = kept_h2.send_request(should_rate_limit(&[]), false).unwrap();
    // The first client gives up on its call before sending the message: the server ends it, and
    // its connection, with nothing in flight any more, is closed as idle.
    reset_body.send_reset(h2::Reason::CANCEL);
    let closed = tokio::time::timeout(std::time::Duration::from_secs(10), reset_conn).await;
    assert!(
        closed.is_ok(),
        "the connection of the reset call is closed as idle"
    );
    // The call still waiting keeps its connection open.
    assert!(
        !kept_conn.is_finished(),
        "a call in flight keeps its connection"
    );
    kept_conn.abort();
    drop(kept_h2);
    s.shutdown().await;
}

#[tokio::test]
async fn an_unknown_method_or_service_is_unimplemented() {
    let s = TestServer::start(&[("d.yaml", CFG)], &[]).await;
    let mut ch = channel(&s).await;
    for path in [
        "/envoy.service.ratelimit.v3.RateLimitService/NoSuchMethod",
        "/no.such.Service/Call",
    ] {
        let req = http::Request::post(format!("http://localhost{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Body::new(
                Full::new(Bytes::from(framed(0, b""))).map_err(|e| match e {}),
            ))
            .unwrap();
        std::future::poll_fn(|cx| ch.poll_ready(cx)).await.unwrap();
        let resp = ch.call(req).await.expect("an HTTP/2 answer");
        assert_eq!(resp.status(), http::StatusCode::OK, "{path}");
        assert_eq!(
            resp.headers()
                .get("grpc-status")
                .map(|v| v.to_str().unwrap()),
            Some("12"),
            "{path}: UNIMPLEMENTED"
        );
    }
    s.shutdown().await;
}
