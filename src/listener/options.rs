//! The cap and timeouts each listener's connections are held to, so that clients which connect
//! and then stay silent (or idle) cannot hold file descriptors without bound. Read from
//! `*_MAX_CONNECTIONS`, `CONNECTION_FIRST_BYTE_TIMEOUT`, `*_IDLE_TIMEOUT` and the HTTP read
//! timeouts by the settings.

use std::time::Duration;

/// The cap and timeouts of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// At most this many connections at once; beyond it new connections wait in the kernel's
    /// backlog until one closes.
    pub max_connections: usize,
    /// `CONNECTION_FIRST_BYTE_TIMEOUT`: a connection that has not sent one byte this long after
    /// it was accepted is closed; `None` when set to 0.
    pub first_byte_timeout: Option<Duration>,
    /// A connection with no request in flight for this long is closed; `None` when set to 0.
    pub idle_timeout: Option<Duration>,
    /// `HTTP_HEADER_READ_TIMEOUT` (HTTP/1 listeners only): a request whose head is not complete
    /// this long after its first byte closes the connection; `None` when set to 0 (and on gRPC,
    /// whose HTTP/2 frames arrive between calls).
    pub header_timeout: Option<Duration>,
    /// `HTTP_BODY_TIMEOUT` (HTTP/1 listeners only): a request body not received in full this
    /// long after its head is refused; `None` when set to 0.
    pub body_timeout: Option<Duration>,
}

/// The limits of each listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listeners {
    /// `GRPC_MAX_CONNECTIONS`, `GRPC_MAX_CONNECTION_IDLE` (TCP or `GRPC_UDS`).
    pub grpc: ConnLimits,
    /// `HTTP_MAX_CONNECTIONS`, `HTTP_IDLE_TIMEOUT` (`PORT`).
    pub http: ConnLimits,
    /// `DEBUG_MAX_CONNECTIONS`, `HTTP_IDLE_TIMEOUT` (`DEBUG_PORT`).
    pub debug: ConnLimits,
    /// `PROMETHEUS_MAX_CONNECTIONS`, `HTTP_IDLE_TIMEOUT` (`PROMETHEUS_ADDR`).
    pub prometheus: ConnLimits,
    /// `ADMIN_MAX_CONNECTIONS`, `HTTP_IDLE_TIMEOUT` (`ADMIN_PORT`).
    pub admin: ConnLimits,
    /// `GRPC_MAX_STREAM_CONNECTIONS`: gRPC connections that opened a long-lived stream (a health
    /// watch, RLQS) move from `GRPC_MAX_CONNECTIONS` to this cap, so watchers cannot hold the
    /// slots of unary clients; a stream beyond it is refused with RESOURCE_EXHAUSTED.
    pub grpc_stream_connections: usize,
}
