//! How the gRPC port holds its connections: TLS, their age and its grace, the connection cap and
//! timeouts, and the cap on connections with long-lived streams. The composition root fills it
//! from `GRPC_SERVER_USE_TLS`, `GRPC_MAX_CONNECTION_AGE[_GRACE]`, `GRPC_MAX_CONNECTIONS`,
//! `GRPC_MAX_CONNECTION_IDLE`, `CONNECTION_FIRST_BYTE_TIMEOUT` and `GRPC_MAX_STREAM_CONNECTIONS`.

use std::sync::Arc;
use std::time::Duration;

use crate::grpc::tls::ReloadingTls;
use crate::listener::ConnLimits;

/// How the gRPC port accepts and keeps connections.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// The certificates, with `GRPC_SERVER_USE_TLS`; `None` for plaintext.
    pub(crate) tls: Option<Arc<ReloadingTls>>,
    /// `GRPC_MAX_CONNECTION_AGE`: a GOAWAY this long after the accept (±10% for each connection).
    pub(crate) max_connection_age: Option<Duration>,
    /// `GRPC_MAX_CONNECTION_AGE_GRACE`: the hard close this long after the GOAWAY.
    pub(crate) max_connection_age_grace: Option<Duration>,
    /// The connection cap and timeouts (`GRPC_MAX_CONNECTIONS`, `GRPC_MAX_CONNECTION_IDLE`, ...).
    pub(crate) limits: ConnLimits,
    /// The cap on connections holding long-lived streams (`GRPC_MAX_STREAM_CONNECTIONS`).
    pub(crate) stream_connections: usize,
}
