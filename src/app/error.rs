//! Why the service could not start: each setup step's error, with what and where.

use crate::grpc::tls::TlsError;
use crate::store::StoreError;
use crate::xds::XdsError;

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A listener could not be bound.
    #[error("cannot listen on {what} address {addr}: {source}")]
    Bind {
        /// Which listener (gRPC, HTTP, debug).
        what: &'static str,
        /// The address asked for.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The store could not be set up (Redis unreachable for longer than allowed).
    #[error("cannot start the store: {0}")]
    Store(StoreError),
    /// The stats sink could not start.
    #[error(transparent)]
    Metrics(#[from] crate::metrics::sinks::SinkError),
    /// The gRPC TLS files are not a usable configuration.
    #[error("gRPC TLS: {0}")]
    Tls(#[from] TlsError),
    /// The xDS client settings are not usable.
    #[error(transparent)]
    Xds(#[from] XdsError),
    /// The configuration source yielded no domain and nothing allows an empty start.
    #[error("{0}")]
    EmptyConfig(String),
    /// `ADMIN_TOKEN_FILE` cannot be used.
    #[error(transparent)]
    AdminTokens(crate::policy::auth::TokenError),
}
