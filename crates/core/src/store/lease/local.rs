//! What a lease answers on its own, per algorithm: the decision for hits served from it, and how
//! long it lives. A fixed window lease lives as long as its window (its counter key ends with it,
//! taking the grant along). A token bucket lease lives for [`bucket_ttl`], after which its unspent
//! tokens go back into the bucket; the decisions it serves are the bucket as this instance last
//! saw it, minus what it served since (the refill since then is not counted: never more
//! optimistic than the shared bucket).

use std::time::Duration;

use crate::algorithm::token_bucket::{self, Params, Step};
use crate::algorithm::{Algorithm, Decision, LimitSpec, fixed_window};
use crate::clock::Timestamp;

/// How long a token bucket lease of `size` tokens on `spec` lives: the time the bucket takes to
/// refill `size` tokens (`size × window / limit`), at least 1 s and at most the window. Within it
/// the fleet's other instances see the bucket refill as much as this one holds, so holding a lease
/// never keeps the bucket emptier than one lease's worth for longer.
pub fn bucket_ttl(spec: &LimitSpec, size: u32) -> Duration {
    let window = spec.window.duration();
    if spec.limit == 0 {
        return window;
    }
    let micros = u128::from(size) * window.as_micros() / u128::from(spec.limit);
    let refill = Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX));
    refill.min(window).max(Duration::from_secs(1))
}

/// When a lease taken at `now` on `spec` (the reserving op decided `d`) stops serving.
pub(super) fn until(spec: &LimitSpec, size: u32, d: &Decision, now: Timestamp) -> Timestamp {
    match spec.algorithm {
        Algorithm::TokenBucket => now.saturating_add(bucket_ttl(spec, size)),
        _ => d.expires_at,
    }
}

/// The decision for `hits` served from a lease at `now`, `remaining` being what is left of the
/// limit after them as this instance counts it.
pub(super) fn decide(spec: &LimitSpec, remaining: u64, hits: u64, now: Timestamp) -> Decision {
    if spec.algorithm == Algorithm::TokenBucket {
        let p = Params::of(spec);
        let debt_after = p
            .capacity
            .saturating_sub(remaining.saturating_mul(p.token_cost));
        let step = Step {
            debt_before: debt_after.saturating_sub(hits.saturating_mul(p.token_cost)),
            debt_after,
            allowed: true,
        };
        return token_bucket::decide(&p, spec, step, hits, now);
    }
    let after = spec.limit.saturating_sub(remaining);
    fixed_window::decide(
        after.saturating_sub(hits),
        after,
        spec.limit,
        spec.window,
        now,
    )
}
