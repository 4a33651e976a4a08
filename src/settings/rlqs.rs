//! The `RLQS_*` variables, translated into the Rate Limit Quota Service's options
//! ([`crate::rlqs::RlqsOptions`]): whether it is served, what an unmatched bucket gets, and the
//! bounds on streams (in all and per peer), buckets, bucket ids, reports and idle time.

use std::time::Duration;

use super::{SettingsError, Vars, parse};
use crate::rlqs::{RlqsOptions, Unmatched};

/// Reads the RLQS settings.
pub(super) fn from_vars(v: &Vars) -> Result<RlqsOptions, SettingsError> {
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
    Ok(RlqsOptions {
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

    fn rlqs(pairs: &[(&str, &str)]) -> Result<crate::rlqs::RlqsOptions, super::SettingsError> {
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
