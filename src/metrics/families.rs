//! The Prometheus families ratelimitd exposes, as data: the Go default mapper's names and labels
//! (`docs/design/contract.md#stats`) and ratelimitd's own. `prom.rs` builds and fills them at
//! scrape time; keeping the table apart keeps that code short and the names easy to review.

/// Per-limit stats the Go default mapper exposes (`over_limit_with_local_cache` is unmapped there).
pub(super) const MAPPED: [(usize, &str); 5] = [
    (2, "near_limit"),
    (1, "over_limit"),
    (0, "total_hits"),
    (4, "within_limit"),
    (5, "shadow_mode"),
];

pub(super) type Family = (&'static str, &'static str, &'static [&'static str]);

/// Counter families built at scrape time: (name, help, labels).
pub(super) const FAMILIES: &[Family] = &[
    (
        "ratelimit_service_rate_limit_near_limit",
        "Hits above NEAR_LIMIT_RATIO of a limit",
        &["domain", "key1", "key2"],
    ),
    (
        "ratelimit_service_rate_limit_over_limit",
        "Hits over a limit",
        &["domain", "key1", "key2"],
    ),
    (
        "ratelimit_service_rate_limit_total_hits",
        "Hits on a limit",
        &["domain", "key1", "key2"],
    ),
    (
        "ratelimit_service_rate_limit_within_limit",
        "Hits within a limit",
        &["domain", "key1", "key2"],
    ),
    (
        "ratelimit_service_rate_limit_shadow_mode",
        "Over-limit hits let through by a shadow rule",
        &["domain", "key1", "key2"],
    ),
    (
        "ratelimit_service_rate_limit_domain_not_found",
        "Descriptors naming an unknown domain",
        &["domain"],
    ),
    (
        "ratelimit_service_should_rate_limit_error",
        "Failed ShouldRateLimit calls",
        &["err_type"],
    ),
    (
        "ratelimit_service_config_load_success",
        "Successful configuration loads",
        &[],
    ),
    (
        "ratelimit_service_config_load_error",
        "Failed configuration loads",
        &[],
    ),
    (
        "ratelimit_service_global_shadow_mode",
        "Answers turned OK by SHADOW_MODE",
        &[],
    ),
    ("ratelimitd_store_errors_total", "Failed store calls", &[]),
    (
        "ratelimitd_stats_keys_folded_total",
        "Stat updates folded into the overflow key (STATS_MAX_KEYS)",
        &[],
    ),
    (
        "ratelimit_service_rate_limit_local_fallback",
        "Hits decided by the local fallback while Redis did not answer",
        &["domain", "key1", "key2"],
    ),
    (
        "ratelimitd_redis_breaker_transitions_total",
        "Redis circuit breaker transitions, by target and new state",
        &["target", "to"],
    ),
    (
        "ratelimit_service_rate_limit_total_negative_hits",
        "Hits given back by refunds (is_negative_hits)",
        &["domain", "key1", "key2"],
    ),
    (
        "ratelimitd_violations_dropped_total",
        "Violation records dropped: the queue was full or their batch failed to write",
        &[],
    ),
    (
        "ratelimitd_violations_written_total",
        "Violation records written to the database and/or the JSON log",
        &[],
    ),
    (
        "ratelimitd_unmatched_descriptors_total",
        "Descriptors that matched no rule of their (configured) domain: limited by its default_limit if set, else let through",
        &["domain"],
    ),
    (
        "ratelimitd_request_limit_capped_total",
        "Request overrides (a descriptor's own limit) above the domain's max_request_limit, counted at the cap",
        &["domain"],
    ),
];

/// Answered requests by overall code and by what decided them (a bounded label set: two codes
/// × the limiter's sources).
pub(super) const DECISIONS: Family = (
    "ratelimitd_decisions_total",
    "Answered rate limit requests by overall code and deciding source",
    &["code", "source"],
);

/// The memory store's gauges: live keys, and the approximate bytes they take.
pub(super) const MEMORY_GAUGES: [(&str, &str); 2] = [
    (
        "ratelimitd_memory_store_keys",
        "Live keys in the memory store",
    ),
    (
        "ratelimitd_memory_store_bytes",
        "Approximate bytes of the memory store's keys and state (MEMORY_MAX_BYTES bounds it)",
    ),
];

/// The token lease counters (`store::lease`), read from the Redis store at export time.
pub(super) const LEASE_COUNTERS: [(&str, &str); 4] = [
    (
        "ratelimitd_lease_taken_total",
        "Lease reservations that granted hits",
    ),
    (
        "ratelimitd_lease_granted_hits_total",
        "Hits granted to this instance's leases",
    ),
    (
        "ratelimitd_lease_served_hits_total",
        "Hits answered from a lease without a Redis call",
    ),
    (
        "ratelimitd_lease_returned_hits_total",
        "Unspent lease hits given back to Redis (reload, shutdown, a changed limit)",
    ),
];

/// The gauge of policy-database domains left out of the configuration because a file (or an
/// xDS push) defines them too.
pub(super) const RULES_SHADOWED: (&str, &str) = (
    "ratelimitd_policy_rules_shadowed",
    "Policy database rule domains not enforced because a configuration file or xDS push defines the same domain (the file wins; see the WARN log)",
);

/// The gauge of each concurrency limit's slots in use (`metrics::slots`), labelled like the
/// per-limit counters: one series per configured concurrency limit.
pub(super) const SLOTS_IN_USE: (&str, &str) = (
    "ratelimitd_concurrency_slots_in_use",
    "Slots held on a concurrency limit, as the store counted them at this instance's last decision on it (0 once every lease it saw has ended)",
);

/// The gauge of each Redis target's breaker state.
pub(super) const BREAKER_STATE: (&str, &str) = (
    "ratelimitd_redis_breaker_state",
    "Redis circuit breaker state by target: 0 closed, 1 half-open, 2 open",
);

/// The hot-key gauge: the count of the Nth hottest key of a ranking. Labels `by` and `rank` only
/// (at most 2 × [`super::HOT_KEY_RANKS`] series): a label carrying the key would grow without bound
/// under a key-cardinality attack, so the keys themselves are only at `/v1/hotkeys`.
pub(super) const HOT_KEYS: (&str, &str) = (
    "ratelimitd_hot_key_hits",
    "Estimated hits (by=hits) or hits over the limit (by=denials) of the rank-th hottest key over the last minute; the keys are at /v1/hotkeys",
);

/// Index in [`FAMILIES`] of `local_fallback` (stat 6), mapped like the Go stats above it.
pub(super) const LOCAL_FALLBACK_FAMILY: usize = 12;

/// Index in [`FAMILIES`] of `total_negative_hits` (stat 7), mapped like the Go stats above it.
pub(super) const NEGATIVE_HITS_FAMILY: usize = 14;

/// Indexes in [`FAMILIES`] of `violations_dropped_total` and `violations_written_total`.
pub(super) const VIOLATION_FAMILIES: [usize; 2] = [15, 16];

/// Indexes in [`FAMILIES`] of `unmatched_descriptors_total` and `request_limit_capped_total`.
pub(super) const DOMAIN_RULE_FAMILIES: [usize; 2] = [17, 18];

/// `ratelimitd_check_requests_total{code}`: `POST /check` requests by HTTP status.
pub(super) const CHECK_REQUESTS: (&str, &str) = (
    "ratelimitd_check_requests_total",
    "POST /check requests by HTTP status code (200 allowed, 429 denied, 400 bad input, 503 unavailable)",
);

/// `ratelimitd_check_response_time_seconds`: time to answer one `POST /check`.
pub(super) const CHECK_RESPONSE_TIME: (&str, &str) = (
    "ratelimitd_check_response_time_seconds",
    "POST /check response time, body read to answer",
);

/// `ratelimitd_rlqs_streams`: open RLQS streams.
pub(super) const RLQS_STREAMS: (&str, &str) = (
    "ratelimitd_rlqs_streams",
    "Open Rate Limit Quota Service streams",
);

/// `ratelimitd_rlqs_buckets`: buckets tracked across the open RLQS streams.
pub(super) const RLQS_BUCKETS: (&str, &str) = (
    "ratelimitd_rlqs_buckets",
    "Quota buckets tracked across the open RLQS streams",
);

/// `ratelimitd_rlqs_assignments_total{strategy}`.
pub(super) const RLQS_ASSIGNMENTS: (&str, &str) = (
    "ratelimitd_rlqs_assignments_total",
    "RLQS bucket actions sent, by strategy (token_bucket, allow_all, deny_all, abandon)",
);

/// `ratelimitd_rlqs_reported_requests_total{outcome}`.
pub(super) const RLQS_REPORTED: (&str, &str) = (
    "ratelimitd_rlqs_reported_requests_total",
    "Requests Envoys reported through RLQS, by outcome (allowed, denied)",
);
