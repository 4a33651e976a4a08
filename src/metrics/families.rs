//! The Prometheus families of [`super::Metrics`], as data: the Go default mapper's names and
//! labels (`docs/design/contract.md#stats`) and ratelimitd's own stats of each decision. `prom.rs`
//! builds and fills them at scrape time; keeping the table apart keeps that code short and the
//! names easy to review. A feature's own families live in its folder.

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
        "ratelimit_service_rate_limit_total_negative_hits",
        "Hits given back by refunds (is_negative_hits)",
        &["domain", "key1", "key2"],
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
    (
        "ratelimitd_predicate_errors_total",
        "when: predicates that failed at run time and answered by their limit's failure_mode",
        &["domain"],
    ),
    (
        "ratelimitd_stored_override_hits_total",
        "Descriptors for which the in-memory index of the policy database's overrides held an active override",
        &["domain"],
    ),
    (
        "ratelimitd_stored_override_misses_total",
        "Descriptors looked up in the in-memory index of the policy database's overrides (while it held any) without an active override",
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

/// Index in [`FAMILIES`] of `local_fallback` (stat 6), mapped like the Go stats above it.
pub(super) const LOCAL_FALLBACK_FAMILY: usize = 12;

/// Index in [`FAMILIES`] of `total_negative_hits` (stat 7), mapped like the Go stats above it.
pub(super) const NEGATIVE_HITS_FAMILY: usize = 13;

/// Indexes in [`FAMILIES`] of `unmatched_descriptors_total`, `request_limit_capped_total`,
/// `predicate_errors_total`, `stored_override_hits_total` and `stored_override_misses_total`.
pub(super) const DOMAIN_RULE_FAMILIES: [usize; 5] = [14, 15, 16, 17, 18];
