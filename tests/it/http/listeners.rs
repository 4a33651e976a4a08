//! Connection caps and timeouts on every listener, over real sockets on 127.0.0.1: silent
//! connections are closed after `CONNECTION_FIRST_BYTE_TIMEOUT`, idle ones after
//! `HTTP_IDLE_TIMEOUT` / `GRPC_MAX_CONNECTION_IDLE`, clients trickling a request head or body
//! after `HTTP_HEADER_READ_TIMEOUT` / `HTTP_BODY_TIMEOUT`, and at `*_MAX_CONNECTIONS` new clients
//! wait until a slot frees instead of costing a file descriptor each; connections holding health
//! watches count against `GRPC_MAX_STREAM_CONNECTIONS` instead. Timeouts are set short here;
//! every wait is bounded.

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::*;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// The longest any test waits for the service to close a connection or answer.
const BOUND: Duration = Duration::from_secs(10);

/// Whether the service closes `s` within [`BOUND`] (what it sends before closing is discarded).
async fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    let drain = async {
        // Bounded by the outer timeout; a closed socket reads 0 or fails at once.
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    timeout(BOUND, drain).await.is_ok()
}

/// A fresh gRPC client on its own connection (not the harness's).
fn fresh_client(addr: SocketAddr) -> RateLimitServiceClient<tonic::transport::Channel> {
    let ch = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    RateLimitServiceClient::new(ch)
}

/// Whether the service has closed `s` by now, without waiting: what it sent is read and
/// discarded, end-of-file (or a reset) means closed. Read straight from the socket, so a close
/// that reached this host before the call is seen whatever the runtime has polled.
fn closed_now(s: TcpStream) -> (bool, TcpStream) {
    use std::io::Read;
    let mut std = s.into_std().unwrap();
    let mut buf = [0u8; 1024];
    let closed = loop {
        match std.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
            Err(_) => break true,
        }
    };
    (closed, TcpStream::from_std(std).unwrap())
}

/// How many of `conns` the service has closed by now ([`closed_now`]).
fn closed_by_now(conns: &mut Vec<TcpStream>) -> usize {
    let mut closed = 0;
    for c in std::mem::take(conns) {
        let (was_closed, c) = closed_now(c);
        closed += usize::from(was_closed);
        conns.push(c);
    }
    closed
}

/// Whether one `ShouldRateLimit` call on a fresh connection is answered within `within`.
async fn served_within(addr: SocketAddr, within: Duration) -> bool {
    let mut client = fresh_client(addr);
    let call = client.should_rate_limit(request("test-domain", &[&[("a", "b")]]));
    matches!(timeout(within, call).await, Ok(Ok(_)))
}

async fn silent(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(TcpStream::connect(addr).await.unwrap());
    }
    v
}

#[tokio::test]
async fn silent_grpc_connections_at_the_cap_are_closed_then_a_real_client_is_served() {
    let env = [
        ("GRPC_MAX_CONNECTIONS", "4"),
        ("CONNECTION_FIRST_BYTE_TIMEOUT", "2s"),
    ];
    let s = TestServer::start(&[("basic.yaml", CFG_BASIC)], &env).await;
    let addr = s.running().grpc_addr;
    // The harness's own client holds one connection (and keeps being served): three more fill
    // the cap with clients that never send a byte, not even the HTTP/2 preface.
    s.rl("test-domain", &[&[("a", "b")]]).await;
    let mut idle = silent(addr, 3).await;
    let new_client = tokio::spawn(served_within(addr, BOUND));
    // Connections already accepted are still served.
    s.rl("test-domain", &[&[("a", "b")]]).await;
    assert!(
        new_client.await.unwrap(),
        "served once the silent connections are closed"
    );
    // The service closes a silent connection before it takes the next one from the backlog: at
    // the cap the new client waited for that close. Without the cap it would have been served at
    // once, while every silent connection was still open.
    assert!(
        closed_by_now(&mut idle) > 0,
        "at the cap a new connection is not accepted until a slot frees"
    );
    for c in &mut idle {
        assert!(closed_by_server(c).await, "a silent connection is closed");
    }
    s.shutdown().await;
}

#[tokio::test]
async fn an_idle_http_keep_alive_connection_is_closed_a_busy_one_is_not() {
    let env = [("HTTP_IDLE_TIMEOUT", "1500ms")];
    let s = TestServer::start(&[("basic.yaml", CFG_BASIC)], &env).await;
    let mut c = TcpStream::connect(s.running().http_addr).await.unwrap();
    for _ in 0..3 {
        // Requests closer together than the idle timeout keep the connection open.
        c.write_all(b"GET /healthcheck HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        while !got.ends_with(b"OK") {
            let n = timeout(BOUND, c.read(&mut buf)).await.unwrap().unwrap();
            assert!(n > 0, "served on the kept-alive connection");
            got.extend_from_slice(&buf[..n]);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        closed_by_server(&mut c).await,
        "idle keep-alive connection closed"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn silent_http_connections_are_closed_and_capped() {
    let env = [
        ("HTTP_MAX_CONNECTIONS", "2"),
        ("CONNECTION_FIRST_BYTE_TIMEOUT", "2s"),
    ];
    let s = TestServer::start(&[("basic.yaml", CFG_BASIC)], &env).await;
    let mut idle = silent(s.running().http_addr, 2).await;
    let mut debug = silent(s.running().debug_addr, 1).await;
    let get = |within| {
        let client = reqwest::Client::builder().timeout(within).build().unwrap();
        let url = s.http_url("/healthcheck");
        async move {
            client
                .get(url)
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
        }
    };
    assert!(get(BOUND).await, "served once the silent ones are closed");
    // Served only after the service closed a silent connection and took the request from the
    // backlog ([`closed_by_now`]): not served at the cap.
    assert!(closed_by_now(&mut idle) > 0, "not served at the cap");
    for c in idle.iter_mut().chain(&mut debug) {
        assert!(closed_by_server(c).await, "a silent connection is closed");
    }
    s.shutdown().await;
}

#[tokio::test]
async fn a_grpc_connection_without_rpcs_is_closed_and_clients_reconnect() {
    let env = [("GRPC_MAX_CONNECTION_IDLE", "1s")];
    let s = TestServer::start(&[("basic.yaml", CFG_BASIC)], &env).await;
    s.rl("test-domain", &[&[("a", "b")]]).await;
    let mut c = TcpStream::connect(s.running().grpc_addr).await.unwrap();
    // The HTTP/2 preface and an empty SETTINGS frame: a client that speaks but never calls.
    c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    assert!(
        closed_by_server(&mut c).await,
        "idle HTTP/2 connection closed"
    );
    // The harness's client lost its idle connection too (closed before the raw one: it was
    // idle first); once it has seen the close, its next call simply reconnects. A call sent in
    // the same instant as the close fails: the close is not a GOAWAY (README, Settings).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = timeout(BOUND, s.call(request("test-domain", &[&[("a", "b")]]))).await;
    assert!(matches!(r, Ok(Ok(_))), "{r:?}");
    s.shutdown().await;
}

/// Sends `head` on `c`, then one byte every 300 ms (at most 40), reading what the service sends
/// meanwhile. Returns whether the service closed the connection before the bytes ran out, and
/// what it sent.
async fn trickle(mut c: TcpStream, head: &'static [u8]) -> (bool, String) {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    if c.write_all(head).await.is_err() {
        return (true, String::new());
    }
    for _ in 0..40 {
        tokio::select! {
            r = c.read(&mut buf) => match r {
                Ok(0) | Err(_) => return (true, String::from_utf8_lossy(&got).into_owned()),
                Ok(n) => got.extend_from_slice(&buf[..n]),
            },
            _ = tokio::time::sleep(Duration::from_millis(300)) => {
                if c.write_all(b"x").await.is_err() {
                    return (true, String::from_utf8_lossy(&got).into_owned());
                }
            }
        }
    }
    (false, String::from_utf8_lossy(&got).into_owned())
}

#[tokio::test]
async fn trickling_http_clients_are_cut_off_and_check_keeps_answering() {
    let env = [
        ("HTTP_MAX_CONNECTIONS", "20"),
        ("HTTP_HEADER_READ_TIMEOUT", "1s"),
        ("HTTP_BODY_TIMEOUT", "1s"),
    ];
    let s = TestServer::start(&[("basic.yaml", CFG_BASIC)], &env).await;
    let addr = s.running().http_addr;
    // Twenty clients take every slot: nineteen trickle a request head, one a request body.
    let mut tricklers = Vec::new();
    for i in 0..20 {
        let c = TcpStream::connect(addr).await.unwrap();
        let head: &'static [u8] = match i {
            0 => b"POST /check HTTP/1.1\r\nHost: t\r\nContent-Length: 64\r\n\r\n{",
            _ => b"POST /check HTTP/1.1\r\nHost: t\r\n",
        };
        tricklers.push(tokio::spawn(trickle(c, head)));
    }
    let client = reqwest::Client::builder().timeout(BOUND).build().unwrap();
    let r = client
        .post(s.http_url("/check"))
        .body(r#"{"client_key":"a"}"#)
        .send()
        .await
        .expect("/check answered while slow clients come and go");
    assert_eq!(r.status(), 200);
    for (i, t) in tricklers.into_iter().enumerate() {
        let (closed, got) = t.await.unwrap();
        assert!(closed, "trickler {i} was cut off");
        if i == 0 {
            assert!(got.starts_with("HTTP/1.1 408"), "{got}");
            assert!(got.contains("HTTP_BODY_TIMEOUT"), "{got}");
        }
    }
    s.shutdown().await;
}

/// Opens a health watch on its own connection and waits for its first status.
async fn watch(
    addr: SocketAddr,
) -> Result<tonic::Streaming<tonic_health::pb::HealthCheckResponse>, tonic::Status> {
    let ch = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    let req = HealthCheckRequest {
        service: String::new(),
    };
    let mut w = timeout(BOUND, HealthClient::new(ch).watch(req))
        .await
        .expect("watch answered")?
        .into_inner();
    let first = timeout(BOUND, w.message()).await.expect("first status");
    assert!(matches!(first, Ok(Some(_))), "{first:?}");
    Ok(w)
}

#[tokio::test]
async fn health_watchers_do_not_hold_the_grpc_connection_cap() {
    let env = [
        ("GRPC_MAX_CONNECTIONS", "4"),
        ("GRPC_MAX_STREAM_CONNECTIONS", "21"),
    ];
    let s = TestServer::start(&[("basic.yaml", CFG_BASIC)], &env).await;
    let addr = s.running().grpc_addr;
    s.rl("test-domain", &[&[("a", "b")]]).await;
    // Five times the connection cap in watchers, each on its own connection.
    let mut watchers = Vec::new();
    for _ in 0..21 {
        watchers.push(watch(addr).await.expect("watch accepted"));
    }
    for _ in 0..3 {
        assert!(
            served_within(addr, BOUND).await,
            "a new unary client is served"
        );
    }
    let refused = watch(addr)
        .await
        .expect_err("over GRPC_MAX_STREAM_CONNECTIONS");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused}");
    assert!(
        refused.message().contains("GRPC_MAX_STREAM_CONNECTIONS"),
        "{refused}"
    );
    // Closing the watches frees their slots; the harness's client was served throughout.
    drop(watchers);
    s.rl("test-domain", &[&[("a", "b")]]).await;
    s.shutdown().await;
}
