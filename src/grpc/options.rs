//! How the gRPC server listens: on TCP or a unix socket, how long a connection may live, TLS /
//! mTLS, and the largest request message. Read from `GRPC_UDS`, `GRPC_MAX_CONNECTION_AGE[_GRACE]`,
//! `GRPC_SERVER_USE_TLS` with its files and `GRPC_MAX_RECV_MESSAGE_BYTES` by the settings.

use std::path::PathBuf;
use std::time::Duration;

/// TLS for the gRPC server. The files are watched and re-read when they change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `GRPC_SERVER_TLS_CERT`: PEM certificate chain.
    pub cert: PathBuf,
    /// `GRPC_SERVER_TLS_KEY`: PEM private key.
    pub key: PathBuf,
    /// `GRPC_CLIENT_TLS_CACERT`: when set, clients must present a certificate signed by it (mTLS).
    pub client_ca: Option<PathBuf>,
    /// `GRPC_CLIENT_TLS_SAN`: when set, the client certificate must be valid for this DNS name.
    pub client_san: Option<String>,
}

/// How the gRPC server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcServerSettings {
    /// `GRPC_UDS`: listen on this unix socket instead of `GRPC_HOST:GRPC_PORT`.
    pub uds: Option<PathBuf>,
    /// `GRPC_MAX_CONNECTION_AGE`: a connection is asked to go away (GOAWAY) after this long;
    /// `None` when set to 0.
    pub max_connection_age: Option<Duration>,
    /// `GRPC_MAX_CONNECTION_AGE_GRACE`: then closed this much later if still open.
    pub max_connection_age_grace: Option<Duration>,
    /// `GRPC_SERVER_USE_TLS` and the files; `None` for plaintext.
    pub tls: Option<TlsSettings>,
    /// `GRPC_MAX_RECV_MESSAGE_BYTES` (ratelimitd): the largest request message decoded. Envoy's
    /// requests are a few hundred bytes; a larger one is refused before it is buffered whole.
    pub max_recv_message_bytes: usize,
}
