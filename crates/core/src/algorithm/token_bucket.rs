//! Token bucket: capacity `burst`, refilled by `limit` tokens per window, lazily (on each call).
//!
//! The state is kept as a *debt* (how far the bucket is below full) in integer units, so that the
//! Redis twin (`lua/token_bucket.lua`, where every number is a double) computes exactly the same
//! numbers: time is counted in quanta of `quantum_micros`, one quantum refills `rate` units, one
//! token costs `token_cost` units (the window in quanta), so refilling is a multiplication and no
//! division ever happens on the Redis side. The quantum is the smallest power of ten (µs … s) that
//! keeps the full bucket under 2^52 units, where doubles are still exact integers; validation
//! refuses `burst × window` too large for even one-second quanta.
//!
//! A denied request takes no tokens (unlike fixed windows, whose counter counts every hit).

use std::time::Duration;

use super::{Decision, LimitSpec, Window};
use crate::clock::Timestamp;

/// Largest debt (full bucket) in units; below 2^53 so Lua's doubles hold every sum exactly.
pub const MAX_UNITS: u64 = 1 << 52;

/// The longest delay a shaping request may accept (`POST /check`'s `max_wait_ms` cap): a leaky
/// bucket reserves slots at most this far past its capacity.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// Largest `burst × window_secs` that fits [`MAX_UNITS`] with one-second quanta.
pub const MAX_BURST_WINDOW_SECS: u64 = MAX_UNITS;

/// The bucket of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenBucketState {
    /// Time of the last update, in quanta since the epoch.
    pub last: u64,
    /// How far below full the bucket was at `last`, in units.
    pub debt: u64,
}

/// The integer parameters of one bucket, derived from its [`LimitSpec`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Length of one time quantum in microseconds (a power of ten, 1 … 1 000 000).
    pub quantum_micros: u64,
    /// Units refilled per quantum (the limit per window; 0 never refills).
    pub rate: u64,
    /// Units one token costs (the window in quanta).
    pub token_cost: u64,
    /// Tokens the bucket holds when full.
    pub burst: u64,
    /// Units of a full bucket (`burst × token_cost`).
    pub capacity: u64,
}

impl Params {
    /// The parameters of `spec`, choosing the finest quantum that keeps every number exact.
    pub fn of(spec: &LimitSpec) -> Params {
        let window_micros = spec.window.micros();
        let mut quantum_micros = 1;
        while quantum_micros < 1_000_000
            && spec.burst.saturating_mul(window_micros / quantum_micros) > MAX_UNITS
        {
            quantum_micros *= 10;
        }
        let token_cost = window_micros / quantum_micros;
        Params {
            quantum_micros,
            rate: spec.limit,
            token_cost,
            burst: spec.burst,
            capacity: spec.burst.saturating_mul(token_cost).min(MAX_UNITS),
        }
    }

    /// `now` in quanta.
    pub fn quanta(&self, now: Timestamp) -> u64 {
        now.as_micros() / self.quantum_micros
    }

    /// Microseconds from `now` until `debt` units have drained (refilled) at `rate`, counted on
    /// whole quanta as the stores do. `rate` must not be 0.
    pub fn micros_until(&self, debt: u64, now: Timestamp) -> u64 {
        let at = self
            .quanta(now)
            .saturating_add(debt.div_ceil(self.rate))
            .saturating_mul(self.quantum_micros);
        at.saturating_sub(now.as_micros())
    }

    /// The units a shaping request may queue beyond the capacity when it accepts a delay of up to
    /// `max_wait` from `now`: `k × rate`, where `k` is the number of quantum boundaries in
    /// `(now, now + max_wait]`, so that a backlog excess `e` fits it exactly when
    /// [`Self::micros_until`]`(e, now) ≤ max_wait`. Capped at [`Self::horizon`]. 0 for a zero rate.
    pub fn budget(&self, max_wait: Duration, now: Timestamp) -> u64 {
        let wait = u64::try_from(max_wait.as_micros()).unwrap_or(u64::MAX);
        let end = now.as_micros().saturating_add(wait) / self.quantum_micros;
        let k = end - self.quanta(now);
        k.saturating_mul(self.rate).min(self.horizon())
    }

    /// The most units any shaping request can queue past the capacity: the budget of
    /// [`MAX_WAIT`] (plus one quantum, whatever `now`), capped so that capacity plus horizon stays
    /// within [`MAX_UNITS`] (every sum the Lua twin forms then stays below 2^53; for absurdly
    /// large buckets the usable wait is shorter than asked, never longer). A leaky bucket's
    /// backlog is read exactly up to capacity plus horizon ([`super::leaky_bucket::backlog`]).
    pub fn horizon(&self) -> u64 {
        let micros = u64::try_from(MAX_WAIT.as_micros()).unwrap_or(u64::MAX);
        let quanta = micros / self.quantum_micros + 1;
        let room = MAX_UNITS - self.capacity.min(MAX_UNITS);
        quanta.saturating_mul(self.rate).min(room)
    }

    /// Seconds after which an untouched bucket is full again (a TTL for the stored state).
    pub fn refill_secs(&self, window: Window) -> u64 {
        if self.rate == 0 {
            return window.secs();
        }
        let quanta = self.capacity.div_ceil(self.rate);
        quanta
            .saturating_mul(self.quantum_micros)
            .div_ceil(1_000_000)
            + 1
    }
}

/// What one call did to the bucket: the debt after lazy refill, after the hits, and whether the
/// hits were taken. The Lua twin returns exactly these three numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Debt after refilling up to now, before the hits.
    pub debt_before: u64,
    /// Debt after the hits (equal to `debt_before` when denied).
    pub debt_after: u64,
    /// True when the bucket held enough tokens.
    pub allowed: bool,
}

/// Refills the bucket up to `t` (quanta) and takes `hits` tokens if it holds them.
pub fn step(p: &Params, state: TokenBucketState, hits: u64, t: u64) -> Step {
    let elapsed = t.saturating_sub(state.last);
    // The product may exceed 2^53 on the Lua side; rounding is monotonic, so the comparison
    // still agrees, and when it is below the debt it is exact.
    let refill = u128::from(elapsed) * u128::from(p.rate);
    let debt_before = if refill >= u128::from(state.debt) {
        0
    } else {
        state.debt - refill as u64
    };
    take(p, debt_before, hits, 0)
}

/// Takes `hits` tokens from a bucket that is `debt_before` units below full, if it holds them:
/// never with a zero rate (except a check of 0 hits), never more than `burst` at once. `budget`
/// (units, see [`Params::budget`]) lets the debt go that far past the capacity: the leaky bucket
/// reserves a later slot for a caller that accepts a delay; the token bucket always passes 0.
pub fn take(p: &Params, debt_before: u64, hits: u64, budget: u64) -> Step {
    let allowed = (p.rate > 0 || hits == 0)
        && hits <= p.burst
        && debt_before.saturating_add(hits.saturating_mul(p.token_cost))
            <= p.capacity.saturating_add(budget);
    let debt_after = if allowed {
        debt_before + hits * p.token_cost
    } else {
        debt_before
    };
    Step {
        debt_before,
        debt_after,
        allowed,
    }
}

/// Gives `hits` tokens back to a bucket that is `debt_before` units below full: the debt shrinks,
/// never below zero (a bucket holds at most its capacity). The Lua twin is `give_back` in
/// `lua/bucket.lua`; a product past 2^53 there is only compared, never kept.
pub fn give_back(p: &Params, debt_before: u64, hits: u64) -> Step {
    Step {
        debt_before,
        debt_after: debt_before.saturating_sub(hits.saturating_mul(p.token_cost)),
        allowed: true,
    }
}

/// Charges `hits` tokens of reported usage to a bucket that is `debt_before` units below full,
/// whatever it holds: the debt may pass the capacity (the bucket goes negative), up to
/// [`MAX_UNITS`], where it stops (the Lua twin is `charge` in `lua/bucket.lua`; a product past
/// 2^53 there is only compared with the ceiling). Always `allowed`.
pub fn charge(debt_before: u64, hits: u64, token_cost: u64) -> Step {
    Step {
        debt_before,
        debt_after: debt_before
            .saturating_add(hits.saturating_mul(token_cost))
            .min(MAX_UNITS.max(debt_before)),
        allowed: true,
    }
}

/// Refills the bucket up to `now`, then charges `hits` of reported usage (see [`charge`]): the
/// answer is never over the limit, and `remaining` is 0 until the refill has paid the debt back.
pub fn report(
    state: &mut TokenBucketState,
    spec: &LimitSpec,
    hits: u64,
    now: Timestamp,
) -> Decision {
    let (p, s) = refill_then(state, spec, now, |p, debt| charge(debt, hits, p.token_cost));
    decide_report(&p, spec, s, hits, now)
}

/// Refills `state` up to `now`, applies `change` to the debt it then holds, and stores the result:
/// the shared first half of a report and a refund.
fn refill_then(
    state: &mut TokenBucketState,
    spec: &LimitSpec,
    now: Timestamp,
    change: impl FnOnce(&Params, u64) -> Step,
) -> (Params, Step) {
    let p = Params::of(spec);
    let t = p.quanta(now);
    let s = change(&p, step(&p, *state, 0, t).debt_before);
    *state = TokenBucketState {
        last: t,
        debt: s.debt_after,
    };
    (p, s)
}

/// The decision for a report's [`Step`]: the hits were taken, whatever the bucket held, and the
/// answer is never over the limit; `reset_after` is the time until the refill has paid the debt
/// back far enough for one more token. Shared by both stores and by [`super::leaky_bucket`].
pub fn decide_report(p: &Params, spec: &LimitSpec, s: Step, hits: u64, now: Timestamp) -> Decision {
    decide(p, spec, Step { allowed: true, ..s }, hits, now).reported()
}

/// Refills the bucket up to `now`, then gives `hits` tokens back (see [`give_back`]).
pub fn refund(
    state: &mut TokenBucketState,
    spec: &LimitSpec,
    hits: u64,
    now: Timestamp,
) -> Decision {
    let (p, s) = refill_then(state, spec, now, |p, debt| give_back(p, debt, hits));
    decide_refund(&p, spec, s, now)
}

/// The decision for a refund's [`Step`]: the bucket as a check (no hits) would find it after the
/// refund, never over the limit. Shared by both stores and by [`super::leaky_bucket`].
pub fn decide_refund(p: &Params, spec: &LimitSpec, s: Step, now: Timestamp) -> Decision {
    let after = Step {
        debt_before: s.debt_after,
        ..s
    };
    decide(p, spec, after, 0, now).refunded()
}

/// Applies `hits` at `now` to `state` and returns the decision.
pub fn apply(
    state: &mut TokenBucketState,
    spec: &LimitSpec,
    hits: u64,
    now: Timestamp,
) -> Decision {
    let p = Params::of(spec);
    let t = p.quanta(now);
    let s = step(&p, *state, hits, t);
    *state = TokenBucketState {
        last: t,
        debt: s.debt_after,
    };
    decide(&p, spec, s, hits, now)
}

/// The decision for a [`Step`]; shared by the memory store and the Redis store.
///
/// `remaining` is the whole tokens left; `reset_after` the time until one more token is in the
/// bucket, rounded up to whole seconds (0 when one is there already, at least 1 s when denied).
/// `wait` is the time until these `hits` conform, `debt_before + hits × cost − capacity` drained
/// (exact, not rounded to seconds): zero when they fit now; when denied, how long to wait before
/// retrying the same hits (never early, also for `hits > 1`; for `hits > burst`, which never fit
/// at once, the time until they would have fit one by one); when admitted past the capacity (a
/// leaky bucket's reservation, see [`take`]), the delay before the caller may proceed. A zero
/// limit never conforms: its `wait` is the window, like `reset_after`.
/// For stats, usage is measured against `limit`: an admitted request uses
/// `limit - tokens before` (floored at 0) plus its hits; a denied one counts all its hits as over.
pub fn decide(p: &Params, spec: &LimitSpec, s: Step, hits: u64, now: Timestamp) -> Decision {
    let tokens_before = (p.capacity - s.debt_before.min(p.capacity)) / p.token_cost;
    let tokens_after = (p.capacity - s.debt_after.min(p.capacity)) / p.token_cost;
    let (before, after) = if s.allowed {
        let b = spec.limit.saturating_sub(tokens_before);
        (b, b.saturating_add(hits))
    } else {
        (spec.limit, spec.limit.saturating_add(hits))
    };
    let window = spec.window.duration();
    let (reset_after, expires_at, wait) = if p.rate == 0 {
        let wait = if s.allowed { Duration::ZERO } else { window };
        (window, now.saturating_add(window), wait)
    } else {
        // Debt to shed before one more token fits, and before the bucket is full.
        let one_more = (s.debt_after + p.token_cost).saturating_sub(p.capacity);
        let micros = if one_more == 0 {
            0
        } else {
            p.micros_until(one_more, now)
        };
        let mut secs = micros.div_ceil(1_000_000);
        if !s.allowed {
            secs = secs.max(1);
        }
        let full_at = now.as_micros() + p.micros_until(s.debt_after, now);
        let queue = u128::from(s.debt_before) + u128::from(hits) * u128::from(p.token_cost);
        let excess = queue.saturating_sub(u128::from(p.capacity));
        let excess = u64::try_from(excess).unwrap_or(u64::MAX);
        let wait = Duration::from_micros(p.micros_until(excess, now));
        (
            Duration::from_secs(secs),
            Timestamp::from_micros(full_at),
            wait,
        )
    };
    Decision {
        over_limit: !s.allowed,
        before,
        after,
        remaining: if s.allowed { tokens_after } else { 0 },
        reset_after,
        expires_at,
        wait,
    }
}

#[cfg(test)]
mod tests;
