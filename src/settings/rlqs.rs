//! Settings of the Rate Limit Quota Service (RLQS, `crate::rlqs`): whether it is served, what an
//! unmatched bucket gets, and the bounds on streams, buckets and reports.

use std::time::Duration;

use super::{SettingsError, Vars, parse};

/// What a bucket no limit matches is assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmatched {
    /// ALLOW_ALL (the default: a bucket with no limit is not limited, as in `ShouldRateLimit`).
    Allow,
    /// DENY_ALL.
    Deny,
}

/// How the RLQS service runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RlqsSettings {
    /// `RLQS_ENABLED`: serve `StreamRateLimitQuotas` on the gRPC port (default true).
    pub enabled: bool,
    /// `RLQS_UNMATCHED`: `allow` (default) or `deny`.
    pub unmatched: Unmatched,
    /// `RLQS_MAX_STREAMS`: open streams at most, per instance (default 1000); more are refused
    /// with RESOURCE_EXHAUSTED.
    pub max_streams: usize,
    /// `RLQS_MAX_BUCKETS_PER_STREAM`: buckets one stream may report (default 1000).
    pub max_buckets_per_stream: usize,
    /// `RLQS_MAX_REPORTS_PER_SECOND`: usage report messages per stream and second (default 20,
    /// bursts of twice that); a faster stream is ended with RESOURCE_EXHAUSTED.
    pub max_reports_per_second: u32,
    /// `RLQS_MIN_ASSIGNMENT_TTL`: the shortest assignment time to live (default 10s); an
    /// assignment lives three reporting intervals, never less than this; an unchanged one is
    /// renewed two reporting intervals before it expires.
    pub min_assignment_ttl: Duration,
}

/// Reads the RLQS settings.
pub(super) fn from_vars(v: &Vars) -> Result<RlqsSettings, SettingsError> {
    let unmatched = |s: &str| match s {
        "allow" => Ok(Unmatched::Allow),
        "deny" => Ok(Unmatched::Deny),
        _ => Err("expected allow or deny".to_string()),
    };
    let count = |max| move |s: &str| parse::uint_in(s, 1, max);
    Ok(RlqsSettings {
        enabled: v.bool("RLQS_ENABLED", true)?,
        unmatched: v.parse("RLQS_UNMATCHED", Unmatched::Allow, unmatched)?,
        max_streams: v.parse("RLQS_MAX_STREAMS", 1000, count(1_000_000))? as usize,
        max_buckets_per_stream: v.parse("RLQS_MAX_BUCKETS_PER_STREAM", 1000, count(1_000_000))?
            as usize,
        max_reports_per_second: v.parse("RLQS_MAX_REPORTS_PER_SECOND", 20, count(10_000))? as u32,
        min_assignment_ttl: v.parse(
            "RLQS_MIN_ASSIGNMENT_TTL",
            Duration::from_secs(10),
            parse::go_duration,
        )?,
    })
}
