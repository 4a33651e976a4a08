//! gRPC server settings (`docs/design/contract.md#settings`): unix socket, connection age, and TLS
//! / mTLS. Kept apart from the main settings table because they travel together into the gRPC
//! listener.

use std::path::PathBuf;
use std::time::Duration;

use super::{SettingsError, Vars, parse};

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

/// A non-empty string variable as a path (`""` means unset, as in the Go service).
fn path(v: &Vars, name: &str) -> Option<PathBuf> {
    Some(v.string(name, ""))
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
}

fn nonzero(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

/// Reads the gRPC server settings.
pub(super) fn from_vars(v: &Vars) -> Result<GrpcServerSettings, SettingsError> {
    let day = Duration::from_secs(24 * 3600);
    let hour = Duration::from_secs(3600);
    let tls = if v.bool("GRPC_SERVER_USE_TLS", false)? {
        let required = |name: &str| {
            path(v, name).ok_or_else(|| SettingsError {
                name: name.to_string(),
                value: String::new(),
                also: Vec::new(),
                reason: "required when GRPC_SERVER_USE_TLS is true".into(),
            })
        };
        Some(TlsSettings {
            cert: required("GRPC_SERVER_TLS_CERT")?,
            key: required("GRPC_SERVER_TLS_KEY")?,
            client_ca: path(v, "GRPC_CLIENT_TLS_CACERT"),
            client_san: Some(v.string("GRPC_CLIENT_TLS_SAN", "")).filter(|s| !s.is_empty()),
        })
    } else {
        None
    };
    Ok(GrpcServerSettings {
        uds: path(v, "GRPC_UDS"),
        max_connection_age: nonzero(v.parse("GRPC_MAX_CONNECTION_AGE", day, parse::go_duration)?),
        max_connection_age_grace: nonzero(v.parse(
            "GRPC_MAX_CONNECTION_AGE_GRACE",
            hour,
            parse::go_duration,
        )?),
        tls,
        max_recv_message_bytes: v.parse("GRPC_MAX_RECV_MESSAGE_BYTES", 1 << 20, |s| {
            parse::uint_in(s, 1024, 64 << 20).map(|n| n as usize)
        })?,
    })
}
