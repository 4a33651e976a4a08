//! Serving the gRPC connections the accept loop ([`super::listen`]) hands over: h2's HTTP/2
//! server on each, every call it accepts answered on a task of its own ([`super::stream`]).
//!
//! Neither tonic's server nor hyper's is in between: per call they would add a tower stack
//! (connect info, `grpc-timeout`, error recovery, a re-boxed body) and a second HTTP layer
//! (request and answer bodies wrapped, connection headers stripped again, a content length
//! parsed) that together cost about an eighth of a decision (`docs/performance.md`). What this
//! project needs of them is kept here and in [`super::stream`]:
//! - HTTP/2 only, with the settings hyper's server gives h2 (1 MiB stream and connection windows,
//!   16 KiB frames and header lists, 400 KiB of send buffer per stream, at most 1 024 streams
//!   reset for a client's errors), except the number of concurrent streams per connection, which
//!   stays unbounded as tonic's server had it (and as grpc-go's default is);
//! - GOAWAY at `GRPC_MAX_CONNECTION_AGE`, ±10% as grpc-go does (the hard close after the grace
//!   is [`super::listen`]'s);
//! - at shutdown, no new connection is taken, every open one gets a GOAWAY and is drained.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use axum::body::Bytes;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::listen::Conn;
use super::stream::{self, Services};

/// Serves each connection `incoming` yields with `services` until `stop`, then sends every open
/// connection a GOAWAY and returns once all of them are done. A connection gets a GOAWAY at its
/// age too ([`Conn::age`]).
pub(super) async fn serve(
    mut incoming: tokio::sync::mpsc::Receiver<Conn>,
    services: Services,
    stop: impl Future<Output = ()>,
) {
    let http2 = settings();
    let (closing, closed) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut stop = pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            conn = incoming.recv() => {
                let Some(conn) = conn else { break };
                let serving = run(http2.clone(), conn, services.clone(), closed.clone());
                connections.spawn(serving);
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    // No new connection from here: the accept loop ends (and closes the socket) when this is gone.
    drop(incoming);
    let _ = closing.send(true);
    while connections.join_next().await.is_some() {}
}

/// The HTTP/2 settings of every connection: hyper's server's (see the module's header), streams
/// unbounded. The transport floor benchmark (`examples/floor.rs`) serves with the same.
pub fn settings() -> h2::server::Builder {
    const MIB: u32 = 1024 * 1024;
    let mut builder = h2::server::Builder::new();
    builder
        .initial_window_size(MIB)
        .initial_connection_window_size(MIB)
        .max_frame_size(16 * 1024)
        .max_header_list_size(16 * 1024)
        .max_local_error_reset_streams(Some(1024))
        .max_send_buffer_size(400 * 1024);
    builder
}

/// Serves `conn` until its client or the server ends it: a GOAWAY at the connection's age or once
/// `closing` turns true, after which the calls in flight finish. Each call the client opens is
/// answered on a task of its own, which hands its frames to this one to write.
async fn run(
    http2: h2::server::Builder,
    conn: Conn,
    services: Services,
    mut closing: watch::Receiver<bool>,
) {
    let max_age = conn.age();
    let shared = Arc::new(stream::Connection {
        services,
        info: conn.info(),
    });
    let mut aged = pin!(async {
        match max_age {
            Some(age) => tokio::time::sleep(age).await,
            None => std::future::pending().await,
        }
    });
    // An error means the server is gone: finish as well.
    let mut closed = pin!(async move {
        let _ = closing.wait_for(|c| *c).await;
    });
    let mut h2 = tokio::select! {
        handshake = http2.handshake::<_, Bytes>(conn) => match handshake {
            Ok(h2) => h2,
            Err(e) => {
                tracing::debug!(error = %e, "gRPC connection ended in its HTTP/2 handshake");
                return;
            }
        },
        // Nothing was asked on it yet: closing it is all the GOAWAY would do.
        () = &mut closed => return,
    };
    let mut goaway_sent = false;
    let ended = poll_fn(|cx| {
        if !goaway_sent
            && (aged.as_mut().poll(cx).is_ready() || closed.as_mut().poll(cx).is_ready())
        {
            goaway_sent = true;
            h2.graceful_shutdown();
        }
        loop {
            match h2.poll_accept(cx) {
                Poll::Ready(Some(Ok((req, respond)))) => {
                    let call = stream::serve(shared.clone(), req, respond);
                    tokio::spawn(call);
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    })
    .await;
    if let Err(e) = ended {
        tracing::debug!(error = %e, "gRPC connection ended");
    }
}
