//! Leaky bucket as a meter: GCRA (the generic cell rate algorithm), which keeps one instant per key,
//! the *theoretical arrival time* (TAT) at which the virtual queue of admitted hits has drained.
//!
//! With emission interval `T = window / limit`, a request of `hits` at `now` is admitted iff
//! `max(TAT, now) + hits × T − now ≤ burst × T` (the queue does not overflow; this is GCRA with
//! tolerance `tau = (burst − hits) × T`), and then `TAT = max(TAT, now) + hits × T`. A full idle
//! bucket therefore admits `burst` hits at once, then one per `T`. Denied requests leave the TAT
//! alone; `hits = 0` is a check that is never over; a limit of 0 blocks every hit.
//!
//! **Shaping** ([`shape`]): a caller that accepts a delay of up to `max_wait` is admitted when its
//! hits conform within that delay, `max(TAT, now) + hits × T − now − burst × T ≤ max_wait`; the TAT
//! moves exactly as for any admitted request, so the slot is reserved, and [`Decision::wait`] is
//! the delay. Concurrent shapers each reserve the next slot, one `T` apart. `max_wait = 0` is
//! policing ([`apply`]).
//!
//! The integers are the token bucket's ([`Params`]: time in quanta, one quantum = `limit` units,
//! `T` = `token_cost` units, `burst × T` = `capacity`, the wait budget in units from
//! [`Params::budget`]), so `lua/leaky_bucket.lua` computes exactly what Rust does. The TAT is kept
//! as whole quanta plus a remainder in units, because the TAT in units since the epoch would pass
//! 2^53; only `TAT − now` (at most capacity plus [`Params::horizon`]) is ever formed. Policing
//! decisions equal a token bucket's of the same config (GCRA is the token bucket measured from the
//! other end; they differ only when the clock steps back, see [`backlog`]).

use std::time::Duration;

use super::token_bucket::{self, Params, Step};
use super::{Decision, LimitSpec};
use crate::clock::Timestamp;

/// The theoretical arrival time of one key: `tat + frac / limit` quanta since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeakyBucketState {
    /// Whole quanta of the TAT.
    pub tat: u64,
    /// The TAT's fraction of a quantum, in units (below `limit`).
    pub frac: u64,
}

/// How far the TAT lies ahead of `t` (quanta), in units: the queue's backlog. Read exactly up
/// to the capacity plus [`Params::horizon`] (the furthest a shaping request can reserve), so
/// every caller, shaping or not, sees reserved slots and is never told to come back early.
/// Further ahead only a clock that stepped back (or an instance whose clock is behind) can put
/// the TAT; such a TAT reads as a full queue. Either way every number stays below 2^53 for Lua.
pub fn backlog(p: &Params, state: LeakyBucketState, t: u64) -> u64 {
    if state.tat < t {
        return 0;
    }
    let ahead = u128::from(state.tat - t) * u128::from(p.rate) + u128::from(state.frac);
    if ahead > u128::from(p.capacity) + u128::from(p.horizon()) {
        return p.capacity;
    }
    ahead as u64
}

/// The state whose TAT lies `backlog` units after `t`. `p.rate` must not be 0 (a zero limit never
/// admits a hit, so its state is never written).
pub fn tat_after(p: &Params, backlog: u64, t: u64) -> LeakyBucketState {
    LeakyBucketState {
        tat: t + backlog / p.rate,
        frac: backlog % p.rate,
    }
}

/// Applies `hits` at `now` to the bucket whose TAT is `tat` and returns the decision (policing:
/// [`shape`] with no wait).
pub fn apply(tat: &mut LeakyBucketState, spec: &LimitSpec, hits: u64, now: Timestamp) -> Decision {
    shape(tat, spec, hits, Duration::ZERO, now)
}

/// Applies `hits` at `now` for a caller that accepts a delay of up to `max_wait`: admitted when
/// the hits conform within it, reserving their slot (the TAT moves), with [`Decision::wait`] the
/// delay before the caller may proceed.
pub fn shape(
    tat: &mut LeakyBucketState,
    spec: &LimitSpec,
    hits: u64,
    max_wait: Duration,
    now: Timestamp,
) -> Decision {
    let p = Params::of(spec);
    let t = p.quanta(now);
    let budget = p.budget(max_wait, now);
    // Admission is the token bucket's with the backlog as its debt: same test, same numbers.
    let s = token_bucket::take(&p, backlog(&p, *tat, t), hits, budget);
    if s.allowed && hits > 0 {
        *tat = tat_after(&p, s.debt_after, t);
    }
    decide(&p, spec, s, hits, now)
}

/// Gives `hits` back: the TAT moves back by `hits × T`, but never before `now` (an idle bucket has
/// nothing to give back, and its state is left as it was). Behind shaped reservations it gives
/// back its own hits and no more ([`backlog`]). The answer is never over the limit.
pub fn refund(tat: &mut LeakyBucketState, spec: &LimitSpec, hits: u64, now: Timestamp) -> Decision {
    let p = Params::of(spec);
    let t = p.quanta(now);
    let s = token_bucket::give_back(&p, backlog(&p, *tat, t), hits);
    if s.debt_before > 0 && p.rate > 0 {
        *tat = tat_after(&p, s.debt_after, t);
    }
    token_bucket::decide_refund(&p, spec, s, now)
}

/// Charges `hits` of reported usage: the TAT moves by `hits × T` whatever the queue holds, past
/// the full queue. GCRA reads its TAT exactly only up to the capacity plus [`Params::horizon`]
/// (one minute of drain past the full queue, see [`backlog`]; further ahead reads as a clock that
/// stepped back), so a report's debt stops there: a leaky bucket carries at most about a minute
/// of debt past its burst. The answer is never over the limit.
pub fn report(tat: &mut LeakyBucketState, spec: &LimitSpec, hits: u64, now: Timestamp) -> Decision {
    let p = Params::of(spec);
    let t = p.quanta(now);
    let s = charge(&p, backlog(&p, *tat, t), hits);
    if s.debt_after > s.debt_before {
        *tat = tat_after(&p, s.debt_after, t);
    }
    token_bucket::decide_report(&p, spec, s, hits, now)
}

/// [`token_bucket::charge`] capped at the backlog GCRA reads exactly, capacity plus horizon
/// (never below `backlog`). A zero limit never drains: nothing is charged.
pub fn charge(p: &Params, backlog: u64, hits: u64) -> Step {
    let mut s = token_bucket::charge(backlog, hits, p.token_cost);
    let ceiling = p.capacity.saturating_add(p.horizon()).max(backlog);
    if p.rate == 0 {
        s.debt_after = backlog;
    }
    s.debt_after = s.debt_after.min(ceiling);
    s
}

/// The decision for a [`Step`] whose debts are backlogs; shared by the memory and Redis stores.
///
/// It is the token bucket's [`token_bucket::decide`]: `remaining` = whole hits still admitted now,
/// `(burst × T − backlog) / T` (0 when denied or queued past the capacity); `reset_after` = time
/// until one more hit fits, `backlog + T − burst × T`, rounded up to whole seconds (0 if one fits
/// now, at least 1 s when denied); `expires_at` = the TAT; `wait` = `max(TAT, now) + hits × T −
/// now − burst × T`, the delay that makes the hits conform: zero when admitted at once, the
/// shaping delay when admitted into a later slot, and when denied the time until the hits, sent
/// one by one at the conforming pace, would all have gone out.
pub fn decide(p: &Params, spec: &LimitSpec, s: Step, hits: u64, now: Timestamp) -> Decision {
    token_bucket::decide(p, spec, s, hits, now)
}

#[cfg(test)]
mod tests;
