//! Serving the gRPC connections: hyper's HTTP/2 server on each connection the accept loop
//! ([`super::grpc_listen`]) hands over, with the requests dispatched here.
//!
//! `ShouldRateLimit`'s exact path goes straight to its service ([`Bounded`], which answers it on
//! the direct path of [`crate::grpc::unary`]); every other path goes to tonic's router (health,
//! RLQS, and anything unknown, which the router answers `UNIMPLEMENTED`). tonic's own server is
//! not in between: per request it would add a tower stack (connect info, `grpc-timeout`, error
//! recovery, a re-boxed body) that costs a tenth of a decision, and what this project needs of
//! it is kept here instead:
//! - HTTP/2 only, with hyper's defaults for everything but the number of concurrent streams per
//!   connection, which stays unbounded as tonic's server had it (and as grpc-go's default is),
//!   and the `date` header, which gRPC answers do not carry;
//! - a `grpc-timeout` header bounds the call: past it the answer is `CANCELLED`, as tonic sends;
//! - GOAWAY at `GRPC_MAX_CONNECTION_AGE`, ±10% as grpc-go does (the hard close after the grace
//!   is [`super::grpc_listen`]'s);
//! - at shutdown, no new connection is taken, every open one gets a GOAWAY and is drained.
//!
//! Each request is marked in flight on its connection for `GRPC_MAX_CONNECTION_IDLE`, and a
//! long-lived stream moves its connection to the streams gate ([`super::grpc_idle`]).

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Service as TowerService, http};

use super::grpc_idle;
use super::grpc_listen::{Conn, GrpcConnInfo};
use crate::grpc::bounded::{Bounded, SHOULD_RATE_LIMIT};
use crate::grpc::{RateLimitServiceServer, RlsService};
use crate::listener::Busy;
use crate::listener::http::Peer;

/// What the gRPC port serves.
#[derive(Clone)]
pub(super) struct GrpcServices {
    /// `ShouldRateLimit`, answered in front of the router.
    pub(super) should_rate_limit: Bounded<RateLimitServiceServer<RlsService>>,
    /// Every service (for `ShouldRateLimit`, its other paths; a message the direct path leaves
    /// to tonic's codec goes through [`Bounded`]'s fallback, not through here).
    pub(super) router: tonic::service::Routes,
}

/// One connection's request handler: the services, and the connection's activity and peer.
#[derive(Clone)]
struct PerConnection {
    services: GrpcServices,
    info: GrpcConnInfo,
}

impl hyper::service::Service<http::Request<Incoming>> for PerConnection {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<http::Response<Body>, Infallible>;

    fn call(&self, req: http::Request<Incoming>) -> Self::Future {
        let busy = match grpc_idle::begin(&self.info, req.uri().path()) {
            Ok(busy) => busy,
            Err(full) => {
                let refused = grpc_idle::refusal(req.uri().path(), full);
                return Box::pin(std::future::ready(Ok(refused)));
            }
        };
        let deadline = grpc_timeout(req.headers());
        if req.uri().path() == SHOULD_RATE_LIMIT {
            // Boxed where it is made: the answer's future is a few kilobytes, which every move
            // would copy.
            let answer = Box::pin(self.services.should_rate_limit.answer(req));
            return Box::pin(finish(async move { Ok(answer.await) }, deadline, busy));
        }
        let mut req = req.map(Body::new);
        // As on the HTTP listeners, the request carries its client's address (RLQS shares its
        // stream cap per peer).
        if let Some(peer) = self.info.peer {
            req.extensions_mut().insert(Peer(peer));
        }
        // The router is always ready (it holds no queue), so each call takes a clone.
        let call = self.services.router.clone().call(req);
        Box::pin(finish(call, deadline, busy))
    }
}

/// The answer `call` gives within `deadline` (`CANCELLED` past it, as tonic answers), its RPC
/// in flight until then.
async fn finish<F>(call: F, deadline: Option<Duration>, busy: Busy) -> Result<Response, Infallible>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    let response = match deadline {
        None => call.await,
        Some(d) => tokio::time::timeout(d, call)
            .await
            .unwrap_or_else(|_| Ok(Status::cancelled("Timeout expired").into_http())),
    };
    drop(busy);
    response
}

/// What a gRPC call answers.
type Response = http::Response<Body>;

/// The deadline a `grpc-timeout` header sets: at most eight digits and a unit (`H`, `M`, `S`,
/// `m`, `u`, `n`), as the gRPC wire format has it. A malformed value is ignored, as tonic does.
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.as_bytes();
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // Eight digits at most: no overflow.
    let n = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Serves each connection `incoming` yields with `services` until `stop`, then sends every open
/// connection a GOAWAY and returns once all of them are done. A connection gets a GOAWAY at its
/// age too ([`Conn::age`]).
pub(super) async fn serve(
    mut incoming: tokio::sync::mpsc::Receiver<Conn>,
    services: GrpcServices,
    stop: impl Future<Output = ()>,
) {
    let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    // No `date` header on answers: gRPC servers send none (grpc-go does not, Envoy reads none),
    // and encoding it costs every call.
    http2
        .timer(TokioTimer::new())
        .max_concurrent_streams(None)
        .auto_date_header(false);
    let (closing, closed) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut stop = pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            conn = incoming.recv() => {
                let Some(conn) = conn else { break };
                let handler = PerConnection { services: services.clone(), info: conn.info() };
                let max_age = conn.age();
                let connection = http2.serve_connection(TokioIo::new(conn), handler);
                connections.spawn(run(connection, max_age, closed.clone()));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    // No new connection from here: the accept loop ends (and closes the socket) when this is gone.
    drop(incoming);
    let _ = closing.send(true);
    while connections.join_next().await.is_some() {}
}

/// One connection until its client or the server ends it: a GOAWAY at `max_age` or once
/// `closing` turns true, after which the streams in flight finish.
async fn run(
    connection: Connection,
    max_age: Option<Duration>,
    mut closing: watch::Receiver<bool>,
) {
    let mut connection = pin!(connection);
    let mut aged = pin!(async {
        match max_age {
            Some(age) => tokio::time::sleep(age).await,
            None => std::future::pending().await,
        }
    });
    let mut goaway_sent = false;
    loop {
        tokio::select! {
            result = &mut connection => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "gRPC connection ended");
                }
                return;
            }
            () = &mut aged, if !goaway_sent => {
                goaway_sent = true;
                connection.as_mut().graceful_shutdown();
            }
            // An error means the server is gone: finish as well.
            _ = closing.wait_for(|c| *c), if !goaway_sent => {
                goaway_sent = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

/// A served connection.
type Connection =
    hyper::server::conn::http2::Connection<TokioIo<Conn>, PerConnection, TokioExecutor>;

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout_of(value: &'static str) -> Option<Duration> {
        let mut headers = http::HeaderMap::new();
        headers.insert("grpc-timeout", http::HeaderValue::from_static(value));
        grpc_timeout(&headers)
    }

    #[test]
    fn grpc_timeout_takes_every_unit_of_the_wire_format() {
        assert_eq!(timeout_of("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(timeout_of("3M"), Some(Duration::from_secs(180)));
        assert_eq!(timeout_of("5S"), Some(Duration::from_secs(5)));
        assert_eq!(timeout_of("250m"), Some(Duration::from_millis(250)));
        assert_eq!(
            timeout_of("99999999u"),
            Some(Duration::from_micros(99_999_999))
        );
        assert_eq!(timeout_of("7n"), Some(Duration::from_nanos(7)));
    }

    #[test]
    fn a_malformed_grpc_timeout_sets_no_deadline() {
        for bad in ["", "S", "123456789S", "10x", "1.5S", "-1S", "10"] {
            assert_eq!(timeout_of(bad), None, "{bad:?}");
        }
        assert_eq!(grpc_timeout(&http::HeaderMap::new()), None);
    }
}
