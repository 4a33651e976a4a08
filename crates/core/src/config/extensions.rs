//! Validation of the algorithm extensions of `rate_limit` (`docs/design/contract.md#extensions`):
//! `algorithm`, `burst`, `unit_multiplier`, `lease` and `split`. None of them appears in a Go config, and
//! absent they mean exactly what Go does (a fixed window of one unit), so a Go config keeps its
//! meaning.

use super::error::{Sink, field_path};
use super::model::RawRateLimit;
use super::unit::Unit;
use crate::algorithm::{Algorithm, concurrency, sliding_log, token_bucket};

/// The largest `lease` a limit may ask for (and the cap on `LEASE_DEFAULT_SIZE`): the config
/// validates it, so it lives here, below the store's leases that apply it.
pub const MAX_LEASE: u32 = 1_000_000;

/// Longest window `unit_multiplier` may build: ten (365-day) years. Longer windows are almost
/// certainly a typo, and bounding them keeps every time computation far from overflow.
pub(super) const MAX_WINDOW_SECS: u64 = 10 * 365 * 86_400;

/// The checked extensions of one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extensions {
    pub(crate) algorithm: Algorithm,
    pub(crate) burst: Option<u32>,
    pub(crate) unit_multiplier: u32,
    pub(crate) lease: Option<u32>,
    /// `split`: sub-keys of the counter ([`super::split`]); `None` = one key.
    pub(crate) split: Option<u32>,
    /// `usage: report`: every call with hits is a usage report ([`crate::algorithm::report`]).
    pub(crate) usage_report: bool,
    /// `usage.estimate`: what the request-time check charges ([`super::usage`]).
    pub(crate) usage_estimate: Option<u32>,
}

/// Checks the extensions of `rl` (whose unit is `unit`, `None` when unlimited or invalid),
/// reporting every misuse at its path.
pub(crate) fn check(rl: &RawRateLimit, unit: Option<Unit>, sink: &mut Sink<'_>) -> Extensions {
    check_unlimited_extras(rl, sink);
    let algorithm = check_algorithm(rl, sink);
    check_burst(rl, algorithm, sink);
    let (multiplier, window_secs) = check_window(rl, unit, sink);
    check_capacity(rl, algorithm, window_secs, sink);
    check_lease(rl, algorithm, sink);
    let split = match rl.unlimited {
        Some(true) => None,
        _ => super::split::check(rl, algorithm, sink),
    };
    let capacity = if algorithm.has_burst() {
        rl.burst.unwrap_or(rl.requests_per_unit)
    } else {
        rl.requests_per_unit
    };
    let usage = super::usage::check(rl, algorithm, u64::from(capacity), sink);
    Extensions {
        usage_report: usage.report,
        usage_estimate: usage.estimate,
        algorithm,
        burst: rl.burst,
        unit_multiplier: multiplier.max(1),
        lease: rl.lease,
        split,
    }
}

/// Reports every extension set on an unlimited limit, which has nothing for them to shape.
fn check_unlimited_extras(rl: &RawRateLimit, sink: &mut Sink<'_>) {
    let at = |field: &str| field_path(&rl.path, field);
    if rl.unlimited == Some(true) {
        let set = [
            ("algorithm", rl.algorithm.is_some()),
            ("burst", rl.burst.is_some()),
            ("unit_multiplier", rl.unit_multiplier.is_some()),
            ("lease", rl.lease.is_some()),
            ("split", rl.split.is_some()),
            ("usage", rl.usage.is_some()),
        ];
        for (field, _) in set.iter().filter(|(_, is_set)| *is_set) {
            sink.push(
                &at(field),
                format!("should not specify {field} when unlimited"),
            );
        }
    }
}

/// The limit's `algorithm` (fixed window when absent; an unknown name reported, read as one).
fn check_algorithm(rl: &RawRateLimit, sink: &mut Sink<'_>) -> Algorithm {
    let at = |field: &str| field_path(&rl.path, field);
    match rl.algorithm.as_deref() {
        None => Algorithm::FixedWindow,
        Some(text) => Algorithm::parse(text).unwrap_or_else(|| {
            let message = format!(
                "invalid algorithm '{text}' (expected fixed_window, sliding_window, sliding_log, token_bucket, leaky_bucket or concurrency)"
            );
            sink.push(&at("algorithm"), message);
            Algorithm::FixedWindow
        }),
    }
}

/// Reports a `burst` on an algorithm without one, or a zero burst.
fn check_burst(rl: &RawRateLimit, algorithm: Algorithm, sink: &mut Sink<'_>) {
    let at = |field: &str| field_path(&rl.path, field);
    match rl.burst {
        Some(_) if !algorithm.has_burst() => sink.push(
            &at("burst"),
            format!(
                "burst only applies to token_bucket and leaky_bucket (algorithm is {})",
                algorithm.name()
            ),
        ),
        Some(0) => sink.push(&at("burst"), "burst must be at least 1"),
        _ => {}
    }
}

/// The `unit_multiplier` as written (0 reported) and the window it makes in seconds (one over
/// [`MAX_WINDOW_SECS`] reported).
fn check_window(rl: &RawRateLimit, unit: Option<Unit>, sink: &mut Sink<'_>) -> (u32, u64) {
    let at = |field: &str| field_path(&rl.path, field);
    let multiplier = rl.unit_multiplier.unwrap_or(1);
    let window_secs = unit
        .map_or(1, Unit::seconds)
        .saturating_mul(u64::from(multiplier));
    if multiplier == 0 {
        sink.push(&at("unit_multiplier"), "unit_multiplier must be at least 1");
    } else if window_secs > MAX_WINDOW_SECS {
        sink.push(
            &at("unit_multiplier"),
            format!(
                "unit_multiplier {multiplier} makes a window of {window_secs} s; the longest allowed is {MAX_WINDOW_SECS} s (10 years)"
            ),
        );
    }
    (multiplier, window_secs)
}

/// Reports a limit whose state could not count exactly: a bucket's capacity over its window past
/// [`token_bucket::MAX_BURST_WINDOW_SECS`], a sliding log or concurrency limit past its most entries.
fn check_capacity(rl: &RawRateLimit, algorithm: Algorithm, window_secs: u64, sink: &mut Sink<'_>) {
    let at = |field: &str| field_path(&rl.path, field);
    if algorithm.has_burst() {
        let burst = u64::from(rl.burst.unwrap_or(rl.requests_per_unit));
        if burst.saturating_mul(window_secs) > token_bucket::MAX_BURST_WINDOW_SECS {
            let field = if rl.burst.is_some() {
                "burst"
            } else {
                "requests_per_unit"
            };
            sink.push(
                &at(field),
                format!(
                    "{} capacity {burst} over a {window_secs} s window is too large to count exactly (burst × window seconds must be at most 2^52)",
                    algorithm.name()
                ),
            );
        }
    }
    if algorithm == Algorithm::SlidingLog
        && u64::from(rl.requests_per_unit) > sliding_log::MAX_LIMIT
    {
        sink.push(
            &at("requests_per_unit"),
            format!(
                "sliding_log keeps one entry per admitted request; requests_per_unit {} exceeds the maximum {} (use sliding_window for higher rates)",
                rl.requests_per_unit,
                sliding_log::MAX_LIMIT
            ),
        );
    }
    if algorithm == Algorithm::Concurrency
        && u64::from(rl.requests_per_unit) > concurrency::MAX_SLOTS
    {
        sink.push(
            &at("requests_per_unit"),
            format!(
                "concurrency keeps one holder per slot; requests_per_unit {} exceeds the maximum {} slots",
                rl.requests_per_unit,
                concurrency::MAX_SLOTS
            ),
        );
    }
}

/// `lease` is only defined for fixed windows and token buckets (`store::lease` says why the others
/// are refused), and is bounded so one instance can never hold an absurd share of a counter.
fn check_lease(rl: &RawRateLimit, algorithm: Algorithm, sink: &mut Sink<'_>) {
    let Some(lease) = rl.lease else { return };
    let at = field_path(&rl.path, "lease");
    let why = match algorithm {
        Algorithm::FixedWindow | Algorithm::TokenBucket => None,
        Algorithm::SlidingLog => Some("it stamps each hit with its own time"),
        Algorithm::SlidingWindow => Some("it weighs each hit by when it came"),
        Algorithm::LeakyBucket => Some("its answer is a time slot per hit"),
        Algorithm::Concurrency => Some("each slot belongs to one holder id"),
    };
    if let Some(why) = why.filter(|_| lease > 0) {
        sink.push(
            &at,
            format!(
                "lease only applies to fixed_window and token_bucket, not {} ({why}, so a batch reserved now cannot be spent later): see README \"Token leases\"",
                algorithm.name()
            ),
        );
    } else if lease > MAX_LEASE {
        sink.push(
            &at,
            format!("lease {lease} is too large (at most {MAX_LEASE})"),
        );
    }
}
