//! `CONFIG_TYPE` and the xDS configuration client's settings (`docs/design/contract.md#settings`,
//! `docs/design/contract.md#xds`): Go names, syntax and defaults. Only read by the service when
//! `CONFIG_TYPE=GRPC_XDS_SOTW`, but always validated.

use std::path::PathBuf;
use std::time::Duration;

use super::{SettingsError, Vars, parse};

pub(crate) use crate::reload::ConfigType;
pub(crate) use crate::xds::{BackoffSettings, XdsSettings, XdsTlsSettings};

fn config_type(s: &str) -> Result<ConfigType, String> {
    match s {
        "FILE" => Ok(ConfigType::File),
        "GRPC_XDS_SOTW" => Ok(ConfigType::GrpcXdsSotw),
        // The Go service's fatal text, then what would be accepted.
        _ => Err(format!(
            "Invalid setting for ConfigType: {s} (expected FILE or GRPC_XDS_SOTW)"
        )),
    }
}

/// `k=v,k2=v2` as Go's node metadata reads it: split on `,`, then on the first `=`.
fn node_metadata(s: &str) -> Result<Vec<(String, String)>, String> {
    Ok(s.split(',')
        .filter_map(|e| e.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

/// `k:v,k2:v2` as envconfig reads a map; every entry needs a `:`, and keys must be valid gRPC
/// metadata names (they are lowercased, as HTTP/2 requires).
fn headers(s: &str) -> Result<Vec<(String, String)>, String> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    s.split(',')
        .map(|e| {
            let (k, v) = e
                .split_once(':')
                .ok_or_else(|| format!("entry {e:?} is not key:value"))?;
            let k = k.trim().to_ascii_lowercase();
            tonic::metadata::AsciiMetadataKey::from_bytes(k.as_bytes())
                .map_err(|_| format!("{k:?} is not a valid gRPC metadata name"))?;
            tonic::metadata::AsciiMetadataValue::try_from(v.trim())
                .map_err(|_| format!("the value of {k:?} is not valid gRPC metadata"))?;
            Ok((k, v.trim().to_string()))
        })
        .collect()
}

fn factor(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite() && *f >= 0.0)
        .ok_or_else(|| "expected a non-negative number".into())
}

/// A non-empty string variable as a path (`""` means unset, as in the Go service).
fn path(v: &Vars, name: &str) -> Option<PathBuf> {
    Some(v.string(name, ""))
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
}

fn tls(v: &Vars) -> Result<Option<XdsTlsSettings>, SettingsError> {
    if !v.bool("CONFIG_GRPC_XDS_SERVER_USE_TLS", false)? {
        return Ok(None);
    }
    // The system roots are not available to this client: the CA must be given.
    let ca_cert = path(v, "CONFIG_GRPC_XDS_SERVER_TLS_CACERT").ok_or_else(|| SettingsError {
        name: "CONFIG_GRPC_XDS_SERVER_TLS_CACERT".into(),
        value: String::new(),
        also: Vec::new(),
        reason: "required when CONFIG_GRPC_XDS_SERVER_USE_TLS is true".into(),
    })?;
    let cert = path(v, "CONFIG_GRPC_XDS_CLIENT_TLS_CERT");
    let key = path(v, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY");
    let client_identity = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        (c, _) => {
            let (given, missing) = if c.is_some() {
                (
                    "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
                    "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
                )
            } else {
                (
                    "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
                    "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
                )
            };
            return Err(SettingsError {
                name: missing.into(),
                value: String::new(),
                also: Vec::new(),
                reason: format!("required when {given} is set"),
            });
        }
    };
    Ok(Some(XdsTlsSettings {
        ca_cert,
        client_identity,
        san: Some(v.string("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "")).filter(|s| !s.is_empty()),
    }))
}

/// Reads `CONFIG_TYPE` and the xDS client settings.
pub(super) fn from_vars(v: &Vars) -> Result<(ConfigType, XdsSettings), SettingsError> {
    let config_type = v.parse("CONFIG_TYPE", ConfigType::File, config_type)?;
    let max_msg = v.parse("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", 0, |s| {
        parse::uint_in(s, 0, i32::MAX as u64)
    })?;
    let xds = XdsSettings {
        node_id: v.string("CONFIG_GRPC_XDS_NODE_ID", "default"),
        node_metadata: v.parse("CONFIG_GRPC_XDS_NODE_METADATA", Vec::new(), node_metadata)?,
        server_url: v.string("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000"),
        connect_retry_interval: v.parse(
            "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
            Duration::from_secs(3),
            parse::go_duration,
        )?,
        additional_headers: v.parse(
            "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
            Vec::new(),
            headers,
        )?,
        tls: tls(v)?,
        backoff: BackoffSettings {
            initial: v.parse(
                "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
                Duration::from_secs(10),
                parse::go_duration,
            )?,
            max: v.parse(
                "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
                Duration::from_secs(60),
                parse::go_duration,
            )?,
            factor: v.parse("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", 0.5, factor)?,
            jitter: v.bool("XDS_CLIENT_BACKOFF_JITTER", true)?,
        },
        max_msg_size: (max_msg > 0).then_some(max_msg as usize),
    };
    Ok((config_type, xds))
}

#[cfg(test)]
mod tests;
