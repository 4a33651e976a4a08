//! How the xDS client reaches its management server: the node it announces, the server URL and
//! TLS, extra metadata, reconnect backoff and the largest response. Read from
//! `CONFIG_GRPC_XDS_*` and `XDS_CLIENT_*` by the settings.

use std::path::PathBuf;
use std::time::Duration;

/// Reconnect backoff after the stream to the management server drops (`XDS_CLIENT_BACKOFF_*`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffSettings {
    /// `XDS_CLIENT_BACKOFF_INITIAL_INTERVAL` (10s): the first wait, and the smallest.
    pub initial: Duration,
    /// `XDS_CLIENT_BACKOFF_MAX_INTERVAL` (60s): the largest wait.
    pub max: Duration,
    /// `XDS_CLIENT_BACKOFF_RANDOM_FACTOR` (0.5): the multiplier from one wait to the next.
    pub factor: f64,
    /// `XDS_CLIENT_BACKOFF_JITTER` (true): each wait is drawn between the initial and the computed one.
    pub jitter: bool,
}

/// TLS towards the management server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdsTlsSettings {
    /// `CONFIG_GRPC_XDS_SERVER_TLS_CACERT`: PEM roots the server certificate must chain to.
    pub ca_cert: PathBuf,
    /// `CONFIG_GRPC_XDS_CLIENT_TLS_CERT` and `_KEY`: a client certificate (mTLS), when both are set.
    pub client_identity: Option<(PathBuf, PathBuf)>,
    /// `CONFIG_GRPC_XDS_SERVER_TLS_SAN`: the name checked in the server certificate instead of the
    /// URL's host.
    pub san: Option<String>,
}

/// The xDS client.
#[derive(Debug, Clone, PartialEq)]
pub struct XdsSettings {
    /// `CONFIG_GRPC_XDS_NODE_ID` (`default`).
    pub node_id: String,
    /// `CONFIG_GRPC_XDS_NODE_METADATA`: `k=v,k2=v2`; entries without `=` are skipped, as in Go.
    pub node_metadata: Vec<(String, String)>,
    /// `CONFIG_GRPC_XDS_SERVER_URL` (`localhost:18000`).
    pub server_url: String,
    /// `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL` (3s): wait between failed connection attempts.
    pub connect_retry_interval: Duration,
    /// `CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS`: `k:v,k2:v2`, sent as gRPC metadata.
    pub additional_headers: Vec<(String, String)>,
    /// `CONFIG_GRPC_XDS_SERVER_USE_TLS` and the files; `None` for plaintext.
    pub tls: Option<XdsTlsSettings>,
    /// `XDS_CLIENT_BACKOFF_*`.
    pub backoff: BackoffSettings,
    /// `XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES`: the largest response accepted; `None` (0) for gRPC's 4 MiB.
    pub max_msg_size: Option<usize>,
}
