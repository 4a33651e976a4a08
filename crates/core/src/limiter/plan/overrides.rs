//! The limit an override stands for while planning: a request's own override
//! (`docs/design/contract.md#request-overrides`) or a stored one from the policy database. Both
//! keep the matched limit's algorithm (but for a rate a sliding log cannot hold, see
//! [`override_limit`]), priority classes and soft zone, and report under a stats key of their own.

use std::sync::Arc;

thread_local! {
    /// The `file` of every override's limit.
    static NO_FILE: Arc<str> = Arc::from("");
}

use super::super::StoredOverride;
use crate::algorithm::{Algorithm, sliding_log};
use crate::config::{Limit, Unit};

/// The rate an override sets, and the configured limit it overrides.
#[derive(Debug, Clone, Copy)]
pub(super) struct OverrideRate<'a> {
    /// Requests per unit.
    pub(super) requests_per_unit: u32,
    /// The unit.
    pub(super) unit: Unit,
    /// The config's limit for the descriptor (matched without its class entry), `None` when
    /// none applies or it is unlimited.
    pub(super) configured: Option<&'a Limit>,
}

/// The limit an override stands for, keyed by `entries` (the descriptor's, but its class entry).
/// An override replaces the number and keeps the rest of the policy of the configured limit it
/// overrides: its algorithm (an override on a token bucket descriptor is still a token bucket),
/// and its priority classes and soft zone, which are shares of whatever the number is. Without a
/// configured limit it is a fixed window. A request override's stats key carries the values
/// (`docs/design/contract.md#request-overrides`); a stored override (`stored`) is named
/// `override:<id>` and reported under `<domain>.override_<id>`, a name bounded by
/// `POLICY_MAX_OVERRIDES` however many values exist.
///
/// A sliding log keeps one entry per admitted request of its window, which is why a configured
/// one is refused above [`sliding_log::MAX_LIMIT`]. An override comes from a caller (or an
/// operator) at run time and is never validated that way, so a rate above that maximum on a
/// sliding-log descriptor is counted as a sliding window instead — the algorithm validation names
/// for such rates — and one key's memory stays bounded whatever the override says.
pub(super) fn override_limit(
    domain: &str,
    entries: &[(&str, &str)],
    rate: OverrideRate<'_>,
    stored: Option<&Arc<StoredOverride>>,
) -> Limit {
    let OverrideRate {
        requests_per_unit,
        unit,
        configured,
    } = rate;
    let (algorithm, requests_per_unit) = overridden_algorithm(configured, requests_per_unit);
    let full_key = full_key(domain, entries);
    let (stats_key, name) = match stored {
        Some(o) => (
            format!("{domain}.override_{}", o.id),
            format!("override:{}", o.id),
        ),
        None => (full_key.clone(), String::new()),
    };
    Limit {
        stats_key: crate::config::sanitize(stats_key.as_str().into()).into_owned(),
        full_key,
        name,
        requests_per_unit,
        unit: Some(unit),
        unlimited: false,
        replaces: Vec::new(),
        shadow_mode: false,
        quota_mode: false,
        quota_group: None,
        detailed_metric: false,
        metadata: None,
        // The service's default failure mode applies to overrides.
        failure_mode: None,
        local_share: None,
        usage_report: false,
        usage_estimate: None,
        // An override is a limit of its own, not a share of the configured one.
        regions: None,
        algorithm,
        // A bucket's capacity is the overridden rate (the config's burst belongs to its rate).
        burst: None,
        unit_multiplier: 1,
        // An override's unit is its own, counted in Go's epoch windows.
        calendar: None,
        // The service's default lease applies to overrides of fixed windows.
        lease: None,
        // The sub-keys spread a hot descriptor's counter: an override of its rate is as hot, so
        // it keeps them (each with its share of the new number).
        split: configured.and_then(|l| l.split),
        also: Vec::new(),
        // The request (or the policy database) set this rate: no configured condition applies.
        when: None,
        // Not from a file: a clone of this thread's empty name, not an allocation per override.
        file: NO_FILE.with(Clone::clone),
        // The classes and the soft zone are shares of the limit: they follow the new number.
        shedding: configured.and_then(|l| l.shedding.clone()),
    }
}

/// The algorithm of an override of `configured` (a fixed window when nothing is configured) and
/// the rate it can keep: a concurrency limit at most the slots validation allows a configured
/// one, a sliding log above its largest log a sliding window.
fn overridden_algorithm(configured: Option<&Limit>, requests_per_unit: u32) -> (Algorithm, u32) {
    match configured.map_or(Algorithm::FixedWindow, |l| l.algorithm) {
        Algorithm::Concurrency => {
            let most = crate::algorithm::concurrency::MAX_SLOTS as u32;
            (Algorithm::Concurrency, requests_per_unit.min(most))
        }
        Algorithm::SlidingLog if u64::from(requests_per_unit) > sliding_log::MAX_LIMIT => {
            (Algorithm::SlidingWindow, requests_per_unit)
        }
        algorithm => (algorithm, requests_per_unit),
    }
}

/// Go's full key of `entries` in `domain`: `domain.key_value.key…`, a value left out when empty.
fn full_key(domain: &str, entries: &[(&str, &str)]) -> String {
    let mut full_key = domain.to_string();
    for (key, value) in entries {
        full_key.push('.');
        full_key.push_str(key);
        if !value.is_empty() {
            full_key.push('_');
            full_key.push_str(value);
        }
    }
    full_key
}
