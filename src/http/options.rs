//! How the ratelimitd-only edges behave: `POST /check` on the HTTP port (its default domain, body
//! caps, strict domains) and the standard rate limit headers on gRPC answers. Read from
//! `CHECK_*`, `JSON_MAX_BODY_BYTES`, `LIMIT_RESPONSE_STANDARD_HEADERS_ENABLED` and
//! `STRICT_DOMAINS` by the settings.

/// How `/check` reads requests and whether gRPC answers carry the standard headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeSettings {
    /// `CHECK_DOMAIN`: the domain of a `/check` request that names none (default `api`).
    pub check_domain: String,
    /// `CHECK_MAX_BODY_BYTES`: a larger `/check` body is refused with 400 `body_too_large` (default 64 KiB).
    pub check_max_body_bytes: usize,
    /// `JSON_MAX_BODY_BYTES`: a larger `/json` body is refused with 413 (default 1 MiB).
    pub json_max_body_bytes: usize,
    /// `LIMIT_RESPONSE_STANDARD_HEADERS_ENABLED`: gRPC answers add `Retry-After` (when over the
    /// limit) and the draft-10 `RateLimit-Policy` / `RateLimit` to `response_headers_to_add`.
    pub grpc_standard_headers: bool,
    /// `STRICT_DOMAINS` (default false, as Go): `/check` and `/json` refuse a domain the
    /// configuration does not define with 400 naming it, instead of allowing it unlimited.
    pub strict_domains: bool,
}
