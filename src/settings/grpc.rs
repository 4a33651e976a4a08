//! gRPC server settings (`docs/design/contract.md#settings`): unix socket, connection age, and TLS
//! / mTLS. Kept apart from the main settings table because they travel together into the gRPC
//! listener.

use std::path::PathBuf;
use std::time::Duration;

use super::{SettingsError, Vars, parse};

pub(crate) use crate::grpc::{GrpcServerSettings, TlsSettings};

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
