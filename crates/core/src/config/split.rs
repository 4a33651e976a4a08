//! `split` (ratelimitd extension) checked: how many sub-keys a hot limit's counter is spread over
//! ([`crate::limiter::split`]). A split limit charges each request to one sub-key against that
//! sub-key's share of the limit, so every sub-key needs a share of at least one, and the features
//! that already divide or reserve a limit (leases, regions, priority classes and soft zones, usage
//! reports) are refused beside it rather than combined in ways nobody can reason about.

use super::error::{Sink, field_path};
use super::model::RawRateLimit;
use crate::algorithm::Algorithm;

/// The fewest sub-keys `split` may ask for: `split: 1` would be one key, which is no split.
pub const MIN_SPLIT: u32 = 2;
/// The most sub-keys `split` may ask for: far more masters than a Redis Cluster usually has,
/// and few enough that an explain or a reset of the limit (which reads every sub-key) stays small.
pub const MAX_SPLIT: u32 = 64;

/// Checks `split` of `rl` (counted by `algorithm`): `Some(n)` when it is set and valid, `None`
/// when absent or refused (reported at its path).
pub(super) fn check(rl: &RawRateLimit, algorithm: Algorithm, sink: &mut Sink<'_>) -> Option<u32> {
    let n = rl.split?;
    let at = field_path(&rl.path, "split");
    if !(MIN_SPLIT..=MAX_SPLIT).contains(&n) {
        let why = if n < MIN_SPLIT {
            " (split 1 is one key: remove the field)"
        } else {
            ""
        };
        sink.push(
            &at,
            format!("invalid split {n}: expected {MIN_SPLIT} to {MAX_SPLIT} sub-keys{why}"),
        );
        return None;
    }
    // Each sub-key counts against its own share; a share of 0 would refuse every request sent
    // to that sub-key.
    let capacity = if algorithm.has_burst() {
        rl.burst.unwrap_or(rl.requests_per_unit)
    } else {
        rl.requests_per_unit
    };
    if capacity < n {
        let field = if algorithm.has_burst() && rl.burst.is_some() {
            "burst"
        } else {
            "requests_per_unit"
        };
        sink.push(
            &at,
            format!(
                "split {n} needs {field} of at least {n} (it is {capacity}), so that every sub-key has a share of at least 1"
            ),
        );
        return None;
    }
    let others = [
        ("lease", rl.lease.is_some_and(|l| l > 0)),
        ("regions", rl.regions.is_some()),
        ("priorities", rl.shedding.priorities.is_some()),
        ("soft", rl.shedding.soft.is_some()),
        ("usage", rl.usage.is_some()),
    ];
    let mut ok = true;
    for (field, _) in others.iter().filter(|(_, set)| *set) {
        sink.push(
            &at,
            format!(
                "split does not combine with {field} (both divide or reserve the limit); use one of them"
            ),
        );
        ok = false;
    }
    ok.then_some(n)
}
