//! Settings of the Rate Limit Quota Service (RLQS, `crate::rlqs`): whether it is served, what an
//! unmatched bucket gets, and the bounds on streams (in all and per peer), buckets, bucket ids,
//! reports and idle time.

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
    /// `RLQS_MAX_STREAMS_PER_PEER`: open streams at most from one client IP address (default a
    /// tenth of `RLQS_MAX_STREAMS`, at least 1), so one client cannot lock the others out.
    pub max_streams_per_peer: usize,
    /// `RLQS_MAX_BUCKETS_PER_STREAM`: buckets one stream may report (default 1000).
    pub max_buckets_per_stream: usize,
    /// `RLQS_MAX_BUCKET_ENTRIES`: entries of one `bucket_id` at most (default 16).
    pub max_bucket_entries: usize,
    /// `RLQS_MAX_BUCKET_ID_BYTES`: the keys and values of one `bucket_id` together, in bytes, at
    /// most (default 512).
    pub max_bucket_id_bytes: usize,
    /// `RLQS_MAX_REPORTS_PER_SECOND`: usage report messages per stream and second (default 20,
    /// bursts of twice that); a faster stream is ended with RESOURCE_EXHAUSTED.
    pub max_reports_per_second: u32,
    /// `RLQS_MIN_ASSIGNMENT_TTL`: the shortest assignment time to live (default 10s); an
    /// assignment lives three reporting intervals, never less than this; an unchanged one is
    /// renewed two reporting intervals before it expires.
    pub min_assignment_ttl: Duration,
    /// `RLQS_STREAM_IDLE_TIMEOUT`: a stream that sent no usage report for this long (on the
    /// service clock) is closed (default 2m).
    pub stream_idle_timeout: Duration,
}

/// Reads the RLQS settings.
pub(super) fn from_vars(v: &Vars) -> Result<RlqsSettings, SettingsError> {
    let unmatched = |s: &str| match s {
        "allow" => Ok(Unmatched::Allow),
        "deny" => Ok(Unmatched::Deny),
        _ => Err("expected allow or deny".to_string()),
    };
    let count = |max| move |s: &str| parse::uint_in(s, 1, max);
    let max_streams = v.parse("RLQS_MAX_STREAMS", 1000, count(1_000_000))? as usize;
    let per_peer = move |s: &str| {
        let n = parse::uint_in(s, 1, 1_000_000)? as usize;
        if n > max_streams {
            return Err(format!("must not exceed RLQS_MAX_STREAMS ({max_streams})"));
        }
        Ok(n)
    };
    let at_least_a_second = |s: &str| {
        let d = parse::go_duration(s)?;
        if d < Duration::from_secs(1) {
            return Err("expected a duration of at least 1s".to_string());
        }
        Ok(d)
    };
    Ok(RlqsSettings {
        enabled: v.bool("RLQS_ENABLED", true)?,
        unmatched: v.parse("RLQS_UNMATCHED", Unmatched::Allow, unmatched)?,
        max_streams,
        max_streams_per_peer: v.parse(
            "RLQS_MAX_STREAMS_PER_PEER",
            (max_streams / 10).max(1),
            per_peer,
        )?,
        max_buckets_per_stream: v.parse("RLQS_MAX_BUCKETS_PER_STREAM", 1000, count(1_000_000))?
            as usize,
        max_bucket_entries: v.parse("RLQS_MAX_BUCKET_ENTRIES", 16, count(1000))? as usize,
        max_bucket_id_bytes: v.parse("RLQS_MAX_BUCKET_ID_BYTES", 512, count(65_536))? as usize,
        max_reports_per_second: v.parse("RLQS_MAX_REPORTS_PER_SECOND", 20, count(10_000))? as u32,
        min_assignment_ttl: v.parse(
            "RLQS_MIN_ASSIGNMENT_TTL",
            Duration::from_secs(10),
            parse::go_duration,
        )?,
        stream_idle_timeout: v.parse(
            "RLQS_STREAM_IDLE_TIMEOUT",
            Duration::from_secs(120),
            at_least_a_second,
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::Settings;
    use std::time::Duration;

    fn rlqs(pairs: &[(&str, &str)]) -> Result<super::RlqsSettings, super::SettingsError> {
        let env = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        Settings::from_env(env.collect::<Vec<_>>()).map(|s| s.rlqs)
    }

    #[test]
    fn defaults_bound_streams_buckets_and_ids() {
        let s = rlqs(&[]).unwrap();
        assert_eq!((s.max_streams, s.max_streams_per_peer), (1000, 100));
        assert_eq!((s.max_bucket_entries, s.max_bucket_id_bytes), (16, 512));
        assert_eq!(s.stream_idle_timeout, Duration::from_secs(120));
        // The peer share follows a smaller stream cap.
        let s = rlqs(&[("RLQS_MAX_STREAMS", "5")]).unwrap();
        assert_eq!(s.max_streams_per_peer, 1);
    }

    #[test]
    fn bad_bounds_are_refused_with_the_variable_named() {
        let e = rlqs(&[
            ("RLQS_MAX_STREAMS", "10"),
            ("RLQS_MAX_STREAMS_PER_PEER", "11"),
        ]);
        let e = e.unwrap_err();
        assert_eq!(e.name, "RLQS_MAX_STREAMS_PER_PEER");
        assert!(e.reason.contains("RLQS_MAX_STREAMS (10)"), "{e}");
        let e = rlqs(&[("RLQS_STREAM_IDLE_TIMEOUT", "500ms")]).unwrap_err();
        assert_eq!(e.name, "RLQS_STREAM_IDLE_TIMEOUT");
        assert!(rlqs(&[("RLQS_MAX_BUCKET_ID_BYTES", "0")]).is_err());
        assert!(rlqs(&[("RLQS_MAX_BUCKET_ENTRIES", "1001")]).is_err());
    }
}
