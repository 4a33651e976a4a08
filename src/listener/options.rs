//! The cap and timeouts each listener's connections are held to, so that clients which connect
//! and then stay silent (or idle) cannot hold file descriptors without bound. Read from
//! `*_MAX_CONNECTIONS`, `CONNECTION_FIRST_BYTE_TIMEOUT`, `*_IDLE_TIMEOUT` and the HTTP read
//! timeouts by the settings.

use std::time::Duration;

/// Default `GRPC_MAX_CONNECTIONS` and `HTTP_MAX_CONNECTIONS`.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Default `DEBUG_MAX_CONNECTIONS`, `PROMETHEUS_MAX_CONNECTIONS` and `ADMIN_MAX_CONNECTIONS`:
/// operators and scrapers.
pub(crate) const DEFAULT_ADMIN_MAX_CONNECTIONS: usize = 100;
/// Default `CONNECTION_FIRST_BYTE_TIMEOUT`.
pub(crate) const DEFAULT_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `GRPC_MAX_CONNECTION_IDLE`: longer than Envoy's default upstream idle timeout (1 h)
/// and grpc-go's channel idle timeout (30 min), so well-behaved clients close their idle
/// connections first, gracefully; this close (not a GOAWAY) is for clients that never do.
pub(crate) const DEFAULT_GRPC_IDLE: Duration = Duration::from_secs(2 * 3600);
/// Default `HTTP_IDLE_TIMEOUT`: longer than the usual scrape and health-check intervals.
pub(crate) const DEFAULT_HTTP_IDLE: Duration = Duration::from_secs(120);
/// Default `HTTP_HEADER_READ_TIMEOUT` and `HTTP_BODY_TIMEOUT`: as `CONNECTION_FIRST_BYTE_TIMEOUT`,
/// ample for a request head or a body of the sizes the edges accept, short enough that clients
/// trickling a byte at a time cannot keep connection slots.
pub(crate) const DEFAULT_REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `GRPC_MAX_STREAM_CONNECTIONS`: as `RLQS_MAX_STREAMS`.
pub(crate) const DEFAULT_STREAM_CONNECTIONS: usize = 1000;

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
    /// slots of unary clients; a stream beyond it is refused with `RESOURCE_EXHAUSTED`.
    pub grpc_stream_connections: usize,
}
