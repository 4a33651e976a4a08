//! What every listener shares: a cap on connections at once ([`Gate`]) and a transport wrapper
//! ([`Guarded`]) that closes a connection which stays silent after it was accepted, or which has
//! had no request in flight for the idle timeout. The servers mark requests in flight through the
//! connection's [`Activity`] (handed to them as connect info, a [`Tracker`]); the transport only
//! reads it. Without this, clients that connect and say nothing hold a file descriptor each until
//! the process runs out of them (when measured, 370 silent connections held for 35 s did).
//!
//! Lives below `app` and `metrics` because the gRPC, HTTP, debug and Prometheus servers all use
//! it; it names neither.

mod activity;
mod gate;
mod guarded;
pub(crate) mod http;
mod offload;
mod options;

pub(crate) use activity::{Activity, Busy, StreamsFull, Tracker};
pub(crate) use gate::Gate;
pub(crate) use guarded::Guarded;
pub(crate) use offload::offload;
pub(crate) use options::{
    ConnLimits, DEFAULT_ADMIN_MAX_CONNECTIONS, DEFAULT_FIRST_BYTE_TIMEOUT, DEFAULT_GRPC_IDLE,
    DEFAULT_HTTP_IDLE, DEFAULT_MAX_CONNECTIONS, DEFAULT_REQUEST_READ_TIMEOUT,
    DEFAULT_STREAM_CONNECTIONS, Listeners,
};
