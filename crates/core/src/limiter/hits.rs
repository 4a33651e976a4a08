//! How many hits reach a limit: the one rule every edge shares (gRPC `hits_addend`, `/json`,
//! `/check`'s `cost` and `descriptors[].hitsAddend`), applied when the limiter plans a request
//! ([`super::plan`]), so no store, script or answer ever sees more than can change a decision.
//!
//! A caller may send any `u64`. Past a limit's capacity more hits change nothing — a request of
//! more hits than the limit holds is never admitted, whatever the state — so they are clamped to
//! **capacity + 1** (capacity = `requests_per_unit` for the window algorithms and the sliding log,
//! `burst` for the token and leaky buckets). That keeps every decision (a request over the capacity
//! is still denied, a smaller one is untouched) and bounds what the hits can do:
//! - a fixed window counts at most capacity + 1 per call, and its counter stops at
//!   [`fixed_window::MAX_COUNT`], so Redis's `INCRBY` never overflows, and the key still ends with
//!   its window;
//! - the other algorithms record only admitted hits, so a denied huge request leaves the key as it
//!   was;
//! - a bucket's `Retry-After` for capacity + 1 hits is the time to refill the bucket plus one
//!   token, never the years the raw number would take.
//!
//! A refund (`is_negative_hits`) gives back at most [`MAX_REFUND`]: no counter, bucket debt or log
//! holds more, so every refund keeps its exact effect (down to empty) and every number a Lua
//! script forms stays an exact double.

use super::request::{Descriptor, Request};
use crate::algorithm::{Algorithm, LimitSpec, fixed_window};

/// The most hits a refund gives back: at least what any algorithm's state can hold (a fixed
/// window counter stops at [`fixed_window::MAX_COUNT`]; a bucket's debt is below 2^52 units, each
/// hit at least one; a sliding log or window holds at most its limit), below 2^53.
pub const MAX_REFUND: u64 = fixed_window::MAX_COUNT;

/// The hits descriptor `d` of `req` asks for, as sent (Envoy: a request `hits_addend` of 0 means 1;
/// a descriptor's own 0 is a check that adds nothing).
pub fn requested(req: &Request, d: &Descriptor) -> u64 {
    d.hits_addend.unwrap_or(req.hits_addend.max(1))
}

/// The hits of a request for `hits` that reach the limit `spec` (see the module docs): at most
/// its capacity + 1 when taken, at most [`MAX_REFUND`] when given back. 0 stays 0 (a check).
pub fn clamp(spec: &LimitSpec, hits: u64, refund: bool) -> u64 {
    if refund {
        return hits.min(MAX_REFUND);
    }
    let capacity = match spec.algorithm {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => spec.burst,
        Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => spec.limit,
        // A request holds one slot whatever its hits (`algorithm::concurrency`).
        Algorithm::Concurrency => 0,
    };
    hits.min(capacity.saturating_add(1))
}

/// The most hits one usage report counts: what a fixed window counter holds
/// ([`fixed_window::MAX_COUNT`], 2^52), below 2^53 so that every number a Lua script forms from it
/// stays exact. Far past any limit, so a clamped report still puts its key in full debt.
pub const MAX_REPORT: u64 = fixed_window::MAX_COUNT;

/// The hits of a usage report of `hits` in `domain`: all of them, up to [`MAX_REPORT`]; a larger
/// report (a caller's bug or a substitution gone wrong, such as 2^64 − 1) is clamped and logged,
/// never wrapped.
pub fn clamp_report(domain: &str, hits: u64) -> u64 {
    if hits > MAX_REPORT {
        tracing::warn!(
            domain,
            reported = hits,
            counted = MAX_REPORT,
            "usage report larger than any counter holds; counted as the maximum"
        );
    }
    hits.min(MAX_REPORT)
}

/// What a descriptor's call does to a limit with a usage estimate (`usage: {mode: report,
/// estimate: N}`), by the rule of the true-up: the request-time check charges the estimate,
/// policed; the report of the actual usage then counts only the difference, a top-up (counted
/// as a report, past the limit too) or a give-back (a refund). Stateless: the report needs no
/// memory of its check, only that the check charged the limit's estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge {
    /// No estimate: the hits as asked (a report, a refund or a check, as without one).
    Asked,
    /// A check (0 hits) of a limit with an estimate: the estimate, taken only when admitted.
    Estimate(u64),
    /// A report of more than the estimate: the rest, as a report.
    TopUp(u64),
    /// A report of less than the estimate: the difference, given back.
    GiveBack(u64),
}

/// The charge of a call of `asked` hits on a limit whose estimate is `estimate` (see
/// [`Charge`]): `reported` is the usage of a report, already clamped ([`clamp_report`]), `None`
/// for any other call.
pub fn true_up(estimate: Option<u32>, asked: u64, reported: Option<u64>, refund: bool) -> Charge {
    let Some(e) = estimate.map(u64::from).filter(|_| !refund) else {
        return Charge::Asked;
    };
    match reported {
        Some(actual) if actual >= e => Charge::TopUp(actual - e),
        Some(actual) => Charge::GiveBack(e - actual),
        None if asked == 0 => Charge::Estimate(e),
        None => Charge::Asked,
    }
}

#[cfg(test)]
mod tests;
