//! One gRPC call on a connection [`super::conn`] serves: its request handed to its service,
//! its answer sent on the stream it came on.
//!
//! `ShouldRateLimit`'s exact path goes straight to its service ([`Bounded`]), whose answer on the
//! direct path of [`crate::grpc::unary`] is the framed message alone: it is sent as its head, one
//! data frame and the `grpc-status: 0` trailer, with no body to poll. Every other path goes to
//! tonic's router (health, RLQS, and anything unknown, which the router answers `UNIMPLEMENTED`),
//! whose answer body is sent frame by frame as the client's flow-control window allows.
//!
//! What an HTTP/2 server owes each call is kept here: a `grpc-timeout` header bounds the call
//! (past it the answer is `CANCELLED`, as tonic sends); a client that resets the stream cancels
//! the call (its future is dropped); an answer body that fails resets the stream with
//! `INTERNAL_ERROR`. Each call is marked in flight on its connection until its answer is ready,
//! and a long-lived stream moves its connection to the streams gate ([`super::idle`]).

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http_body::{Body as HttpBody, Frame};
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{Service as TowerService, http};

use super::idle;
use super::listen::ConnInfo;
use crate::grpc::bounded::{Bounded, SHOULD_RATE_LIMIT};
use crate::grpc::unary::{self, Answer};
use crate::grpc::{RateLimitServiceServer, RlsService};
use crate::listener::http::Peer;

/// A call's answer to come.
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What the gRPC port serves.
#[derive(Clone)]
pub(crate) struct Services {
    /// `ShouldRateLimit`, answered in front of the router.
    pub(crate) should_rate_limit: Bounded<RateLimitServiceServer<RlsService>>,
    /// Every service (for `ShouldRateLimit`, its other paths; a message the direct path leaves
    /// to tonic's codec goes through [`Bounded`]'s fallback, not through here).
    pub(crate) router: tonic::service::Routes,
}

/// What every call on one connection is answered with: the services, and the connection's
/// activity and client address.
pub(super) struct Connection {
    pub(super) services: Services,
    pub(super) info: ConnInfo,
}

/// Answers the call `req` on `respond`, on connection `conn`.
pub(super) async fn serve(
    conn: Arc<Connection>,
    req: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
) {
    let Connection { services, info } = &*conn;
    let path = req.uri().path();
    let answer = match idle::begin(info, path) {
        Err(full) => Some(Answer::Response(idle::refusal(path, full))),
        Ok(busy) => {
            let deadline = grpc_timeout(req.headers());
            let call = call(services, info, req.map(RecvBody::new));
            let answer = within(call, deadline, &mut respond).await;
            drop(busy);
            answer
        }
    };
    let sent = match answer {
        None => return,
        Some(Answer::Message(framed)) => send_message(framed, respond),
        // Boxed for the same reason as the call: the task stays small.
        Some(Answer::Response(response)) => Box::pin(send(response, respond)).await,
    };
    if let Err(e) = sent {
        tracing::debug!(error = %e, "gRPC answer not sent");
    }
}

/// The call `req` makes of `services`: `ShouldRateLimit`'s own service or the router. Boxed where
/// it is made: a call's future is a few kilobytes, which every move of the task answering it
/// (tokio moves a task's future into place more than once) would copy.
fn call(services: &Services, info: &ConnInfo, req: http::Request<RecvBody>) -> BoxFuture<Answer> {
    if req.uri().path() == SHOULD_RATE_LIMIT {
        return Box::pin(services.should_rate_limit.answer(req));
    }
    let mut req = req.map(Body::new);
    // As on the HTTP listeners, the request carries its client's address (RLQS shares its
    // stream cap per peer).
    if let Some(peer) = info.peer {
        req.extensions_mut().insert(Peer(peer));
    }
    // The router is always ready (it holds no queue), so each call takes a clone.
    let call = services.router.clone().call(req);
    Box::pin(async move {
        let Ok(response) = call.await;
        Answer::Response(response)
    })
}

/// What `call` answers within `deadline` (`CANCELLED` past it, as tonic answers); `None` if the
/// client reset the stream first, which drops the call.
async fn within(
    mut call: BoxFuture<Answer>,
    deadline: Option<Duration>,
    respond: &mut SendResponse<Bytes>,
) -> Option<Answer> {
    // Boxed, to keep this task small; a call without a deadline sets no timer.
    let mut expiry = deadline.map(|d| Box::pin(tokio::time::sleep(d)));
    poll_fn(|cx| {
        if let Poll::Ready(answer) = call.as_mut().poll(cx) {
            return Poll::Ready(Some(answer));
        }
        if let Some(timer) = &mut expiry
            && timer.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Some(Status::cancelled("Timeout expired").into()));
        }
        // Still working: a RST_STREAM from the client cancels the call.
        match respond.poll_reset(cx) {
            Poll::Ready(reason) => {
                tracing::debug!(?reason, "gRPC call reset by its client");
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Sends a successful call's answer message `framed` on `respond`: its head, one data frame and
/// the `grpc-status: 0` trailer. An error means the stream or its connection is gone.
fn send_message(framed: Bytes, mut respond: SendResponse<Bytes>) -> Result<(), h2::Error> {
    let mut tx = respond.send_response(unary::message_head(), false)?;
    tx.send_data(framed, false)?;
    tx.send_trailers(unary::ok_trailers())
}

/// Sends `response` on `respond`, its body as the client's window allows. An error means the
/// stream or its connection is gone.
async fn send(
    response: http::Response<Body>,
    mut respond: SendResponse<Bytes>,
) -> Result<(), h2::Error> {
    let (head, body) = response.into_parts();
    let head = http::Response::from_parts(head, ());
    if body.is_end_stream() {
        return respond.send_response(head, true).map(drop);
    }
    let tx = respond.send_response(head, false)?;
    pipe(body, tx).await
}

/// Sends `body` on `tx`, each data frame once the client's window has room for some of it (so
/// that at most one frame waits in h2's buffer), until the body ends or the client resets the
/// stream.
async fn pipe(body: Body, mut tx: SendStream<Bytes>) -> Result<(), h2::Error> {
    let mut body = pin!(body);
    loop {
        let frame = poll_fn(|cx| {
            if let Some(reset) = reset(&mut tx, cx) {
                return Poll::Ready(Err(reset));
            }
            body.as_mut().poll_frame(cx).map(Ok)
        })
        .await?;
        let frame = match frame {
            None => return tx.send_data(Bytes::new(), true),
            Some(Err(status)) => {
                tracing::debug!(%status, "gRPC answer body failed");
                tx.send_reset(Reason::INTERNAL_ERROR);
                return Ok(());
            }
            Some(Ok(frame)) => frame,
        };
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    tx.reserve_capacity(0);
                    return tx.send_trailers(trailers);
                }
                continue;
            }
        };
        let end = body.is_end_stream();
        if !data.is_empty() {
            // A claim of one byte, not the frame's length: enough to be woken when the window
            // opens, without holding connection window that other streams could use.
            tx.reserve_capacity(1);
            poll_fn(|cx| room(&mut tx, cx)).await?;
        }
        tx.send_data(data, end)?;
        if end {
            return Ok(());
        }
    }
}

/// Ready once `tx` has send capacity, or with the error that ends the stream (a reset by the
/// client included).
fn room(tx: &mut SendStream<Bytes>, cx: &mut Context<'_>) -> Poll<Result<(), h2::Error>> {
    if let Some(reset) = reset(tx, cx) {
        return Poll::Ready(Err(reset));
    }
    while tx.capacity() == 0 {
        match ready!(tx.poll_capacity(cx)) {
            Some(Ok(_)) => {}
            Some(Err(e)) => return Poll::Ready(Err(e)),
            // The stream is no longer open for sending.
            None => return Poll::Ready(Err(h2::Error::from(Reason::STREAM_CLOSED))),
        }
    }
    Poll::Ready(Ok(()))
}

/// The error that ends `tx`'s stream if the client has reset it (registering for the reset
/// otherwise).
fn reset(tx: &mut SendStream<Bytes>, cx: &mut Context<'_>) -> Option<h2::Error> {
    match tx.poll_reset(cx) {
        Poll::Ready(reset) => Some(reset.map_or_else(|e| e, h2::Error::from)),
        Poll::Pending => None,
    }
}

/// A request's body as h2 receives it, each data frame's flow-control window given back to the
/// client as the frame is handed on. A stream the client ends with `RST_STREAM(NO_ERROR)` ends the
/// body early without an error (RFC 9113 §8.1).
struct RecvBody {
    recv: RecvStream,
    data_done: bool,
}

impl RecvBody {
    fn new(recv: RecvStream) -> RecvBody {
        RecvBody {
            recv,
            data_done: false,
        }
    }
}

impl HttpBody for RecvBody {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        if !self.data_done {
            match ready!(self.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    // Fails only once the stream is gone, when nothing is owed.
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(e)) if e.reason() == Some(Reason::NO_ERROR) => return Poll::Ready(None),
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => self.data_done = true,
            }
        }
        match ready!(self.recv.poll_trailers(cx)) {
            Ok(trailers) => Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t)))),
            Err(e) => Poll::Ready(Some(Err(e))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.recv.is_end_stream()
    }
}

/// The deadline a `grpc-timeout` header sets: at most eight digits and a unit (`H`, `M`, `S`,
/// `m`, `u`, `n`), as the gRPC wire format has it. A malformed value is ignored, as tonic does.
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    const GRPC_TIMEOUT: http::HeaderName = http::HeaderName::from_static("grpc-timeout");
    let value = headers.get(GRPC_TIMEOUT)?.as_bytes();
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
