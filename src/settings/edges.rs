//! Settings of the ratelimitd-only edges: `POST /check` on the HTTP port, and the standard rate
//! limit headers on gRPC answers. Off or harmless by default, so a Go deployment sees no change.

use super::{SettingsError, Vars, parse};

/// The default `CHECK_MAX_BODY_BYTES`: far above any sensible `/check` body.
pub const DEFAULT_CHECK_MAX_BODY_BYTES: u64 = 64 * 1024;

/// The default `JSON_MAX_BODY_BYTES`: as `GRPC_MAX_RECV_MESSAGE_BYTES`, the largest request
/// Envoy's protocol is accepted in.
pub(crate) const DEFAULT_JSON_MAX_BODY_BYTES: u64 = 1 << 20;

pub(crate) use crate::http::EdgeSettings;

/// Reads the edge settings.
pub(super) fn from_vars(v: &Vars) -> Result<EdgeSettings, SettingsError> {
    let check_domain = v.string("CHECK_DOMAIN", "api");
    if check_domain.is_empty() {
        return Err(SettingsError {
            name: "CHECK_DOMAIN".into(),
            value: check_domain,
            also: Vec::new(),
            reason: "must not be empty".into(),
        });
    }
    Ok(EdgeSettings {
        check_domain,
        check_max_body_bytes: v.parse(
            "CHECK_MAX_BODY_BYTES",
            DEFAULT_CHECK_MAX_BODY_BYTES,
            |s| parse::uint_in(s, 2, 64 * 1024 * 1024),
        )? as usize,
        json_max_body_bytes: v.parse("JSON_MAX_BODY_BYTES", DEFAULT_JSON_MAX_BODY_BYTES, |s| {
            parse::uint_in(s, 2, 64 * 1024 * 1024)
        })? as usize,
        grpc_standard_headers: v.bool("LIMIT_RESPONSE_STANDARD_HEADERS_ENABLED", false)?,
        strict_domains: v.bool("STRICT_DOMAINS", false)?,
    })
}
