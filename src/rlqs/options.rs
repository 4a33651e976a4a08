//! The Rate Limit Quota Service's options: whether it is served, what a bucket no limit matches
//! gets, and the bounds that keep one stream, one peer and all streams together small.

use std::time::Duration;

/// What a bucket no limit matches is assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmatched {
    /// `ALLOW_ALL` (the default: a bucket with no limit is not limited, as in `ShouldRateLimit`).
    Allow,
    /// `DENY_ALL`.
    Deny,
}

/// How the RLQS service runs (read from the `RLQS_*` variables by `settings`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RlqsOptions {
    /// `RLQS_ENABLED`: serve `StreamRateLimitQuotas` on the gRPC port (default true).
    pub enabled: bool,
    /// `RLQS_UNMATCHED`: `allow` (default) or `deny`.
    pub unmatched: Unmatched,
    /// `RLQS_MAX_STREAMS`: open streams at most, per instance (default 1000); more are refused
    /// with `RESOURCE_EXHAUSTED`.
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
    /// bursts of twice that); a faster stream is ended with `RESOURCE_EXHAUSTED`.
    pub max_reports_per_second: u32,
    /// `RLQS_MIN_ASSIGNMENT_TTL`: the shortest assignment time to live (default 10s); an
    /// assignment lives three reporting intervals, never less than this; an unchanged one is
    /// renewed two reporting intervals before it expires.
    pub min_assignment_ttl: Duration,
    /// `RLQS_STREAM_IDLE_TIMEOUT`: a stream that sent no usage report for this long (on the
    /// service clock) is closed (default 2m).
    pub stream_idle_timeout: Duration,
}
