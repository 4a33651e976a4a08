//! Pure rate limit algorithms: functions of `(state, limit, hits, now)` with no I/O and no clock.
//!
//! Each store keeps an [`AlgorithmState`] per key and calls [`apply`] under that key's lock (memory)
//! or runs the Lua twin of the same function (Redis), so both stores decide identically.

pub mod calendar;
pub mod concurrency;
pub mod fixed_window;
pub mod leaky_bucket;
pub mod sliding_log;
pub mod sliding_window;
pub mod token_bucket;
pub(crate) mod window;

use std::time::Duration;

use crate::clock::Timestamp;
use concurrency::ConcurrencyState;
use fixed_window::FixedWindowState;
use leaky_bucket::LeakyBucketState;
use sliding_log::SlidingLogState;
use sliding_window::SlidingWindowState;
use token_bucket::TokenBucketState;
pub use window::Window;

/// Which algorithm a limit uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Epoch-aligned fixed windows, exactly as envoyproxy/ratelimit.
    FixedWindow,
    /// Token bucket: capacity `burst`, refilled `limit` tokens per window (see [`token_bucket`]).
    TokenBucket,
    /// Sliding window counter: previous window weighted by overlap (see [`sliding_window`]).
    SlidingWindow,
    /// GCRA, a leaky bucket as a meter: capacity `burst`, one hit per `window / limit` (see
    /// [`leaky_bucket`]).
    LeakyBucket,
    /// Sliding log: the exact sliding window, one log entry per admitted request (see
    /// [`sliding_log`]).
    SlidingLog,
    /// A cap on requests in flight: `limit` slots, each held by a holder id until released or
    /// until its lease (the window) times out (see [`concurrency`]).
    Concurrency,
}

impl Algorithm {
    /// Every algorithm, in the order of their declaration.
    pub const ALL: [Algorithm; 6] = [
        Algorithm::FixedWindow,
        Algorithm::TokenBucket,
        Algorithm::SlidingWindow,
        Algorithm::LeakyBucket,
        Algorithm::SlidingLog,
        Algorithm::Concurrency,
    ];

    /// Parses the config name (`rate_limit.algorithm`). Only algorithms both stores implement are
    /// known here, so validation can never accept one the Redis store would mishandle.
    pub fn parse(name: &str) -> Option<Algorithm> {
        match name {
            "fixed_window" => Some(Algorithm::FixedWindow),
            "token_bucket" => Some(Algorithm::TokenBucket),
            "sliding_window" => Some(Algorithm::SlidingWindow),
            "leaky_bucket" => Some(Algorithm::LeakyBucket),
            "sliding_log" => Some(Algorithm::SlidingLog),
            "concurrency" => Some(Algorithm::Concurrency),
            _ => None,
        }
    }

    /// The config name.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::SlidingWindow => "sliding_window",
            Algorithm::LeakyBucket => "leaky_bucket",
            Algorithm::SlidingLog => "sliding_log",
            Algorithm::Concurrency => "concurrency",
        }
    }

    /// True when the algorithm has a bucket capacity (`burst`).
    pub fn has_burst(self) -> bool {
        matches!(self, Algorithm::TokenBucket | Algorithm::LeakyBucket)
    }

    /// A short tag that goes into cache keys, so state of one algorithm is never read as another's.
    pub fn key_tag(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fw",
            Algorithm::TokenBucket => "tb",
            Algorithm::SlidingWindow => "sw",
            Algorithm::LeakyBucket => "lb",
            Algorithm::SlidingLog => "sl",
            Algorithm::Concurrency => "cc",
        }
    }
}

/// The parameters of one limit as the algorithms see them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitSpec {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Requests allowed per window.
    pub limit: u64,
    /// Window length.
    pub window: Window,
    /// Bucket capacity for bucket algorithms (ignored by window algorithms).
    pub burst: u64,
}

/// Per-key state kept by a store between calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlgorithmState {
    /// State of a fixed window counter.
    FixedWindow(fixed_window::FixedWindowState),
    /// State of a token bucket.
    TokenBucket(token_bucket::TokenBucketState),
    /// State of a sliding window counter.
    SlidingWindow(sliding_window::SlidingWindowState),
    /// State of a leaky bucket (its theoretical arrival time).
    LeakyBucket(leaky_bucket::LeakyBucketState),
    /// The log of a sliding log, boxed so that the counters of the other algorithms (most keys)
    /// do not pay for its size in every memory store entry.
    SlidingLog(Box<sliding_log::SlidingLogState>),
    /// The holders of a concurrency limit, boxed for the same reason.
    Concurrency(Box<concurrency::ConcurrencyState>),
}

/// The outcome of applying hits to a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// True when the hits took the key over its limit.
    pub over_limit: bool,
    /// Usage before these hits (the counter before the increment for windows).
    pub before: u64,
    /// Usage after these hits.
    pub after: u64,
    /// How many more hits fit right now (0 when over).
    pub remaining: u64,
    /// Time until the window resets (windows) or one more hit is allowed (buckets).
    pub reset_after: Duration,
    /// When the state may be forgotten: after this instant a fresh state decides identically.
    pub expires_at: Timestamp,
    /// How long from `now` until these hits conform. Admitted: zero, or for a leaky bucket that
    /// reserved a later slot ([`shape`]) the delay before the caller may proceed. Denied: the
    /// time until the same hits would fit, never early whatever their number. Only the buckets
    /// compute it ([`token_bucket::decide`]); the window algorithms always report zero (their
    /// `reset_after` says when the window frees up).
    pub wait: Duration,
}

impl Decision {
    /// This decision as the answer to a refund (`is_negative_hits`): giving hits back is never
    /// over the limit and never has to wait.
    pub fn refunded(self) -> Decision {
        Decision {
            over_limit: false,
            wait: Duration::ZERO,
            ..self
        }
    }

    /// This decision as the answer to a usage report ([`report`]): a report is a fact, counted
    /// whatever the state, so it is never over the limit and never waits. `remaining` stays what
    /// the algorithm found after it (0 while the key is in debt).
    pub fn reported(self) -> Decision {
        Decision {
            over_limit: false,
            wait: Duration::ZERO,
            ..self
        }
    }
}

/// Applies `hits` to `state` (a fresh state when `None` or of another algorithm) and returns the
/// decision. Fixed windows count hits even over the limit, like the Go service; the other
/// algorithms record only admitted hits.
pub fn apply(
    state: &mut Option<AlgorithmState>,
    spec: &LimitSpec,
    hits: u64,
    now: Timestamp,
) -> Decision {
    shape(state, spec, hits, Duration::ZERO, now)
}

/// [`apply`] for a caller that accepts a delay of up to `max_wait` before its hits proceed: a
/// leaky bucket then admits hits that conform within that delay and reserves their slot
/// ([`leaky_bucket::shape`], [`Decision::wait`] is the delay). The other algorithms police, so
/// `max_wait` changes nothing for them.
pub fn shape(
    state: &mut Option<AlgorithmState>,
    spec: &LimitSpec,
    hits: u64,
    max_wait: Duration,
    now: Timestamp,
) -> Decision {
    run(state, spec, hits, Mode::Take(max_wait), now)
}

/// [`shape`] that records the hits only when they are admitted: the rule of every algorithm but
/// the fixed window, which counts every hit (as Go) unless asked this way
/// ([`fixed_window::admit`]; `store::Op::only_admitted`).
pub fn admit(
    state: &mut Option<AlgorithmState>,
    spec: &LimitSpec,
    hits: u64,
    max_wait: Duration,
    now: Timestamp,
) -> Decision {
    if spec.algorithm != Algorithm::FixedWindow {
        return shape(state, spec, hits, max_wait, now);
    }
    with(state, |s: &mut FixedWindowState| {
        fixed_window::admit(s, spec.limit, spec.window, hits, now)
    })
}

/// Gives `hits` back to `state` (`is_negative_hits`) and returns the decision, which is never over
/// the limit. Each algorithm undoes what admitted hits did, never past its empty state: a fixed or
/// sliding window decrements its current window's counter (not below zero), a token bucket gets
/// tokens back up to its capacity, a leaky bucket moves its arrival time back (never before now),
/// a sliding log forgets its newest hits. A fresh state is already empty, so a refund on it
/// changes nothing: stores never create a key for a refund.
pub fn refund(
    state: &mut Option<AlgorithmState>,
    spec: &LimitSpec,
    hits: u64,
    now: Timestamp,
) -> Decision {
    run(state, spec, hits, Mode::Refund, now)
}

/// Records `hits` of usage reported after the fact (an LLM response's tokens, a response's bytes)
/// and returns the decision, which is never over the limit ([`Decision::reported`]). A report
/// always counts, even past the limit: the key goes into debt, and the next request-time check
/// is refused until the window or the refill has paid the debt back. Fixed and sliding windows
/// add the hits to the current window's counter (a sliding window carries them for as long as
/// they weigh in its estimate), a sliding log logs them (joining its newest entry once the log
/// holds `limit` entries, so memory stays bounded), a token bucket's debt passes its capacity
/// (the bucket goes negative and refills), a leaky bucket's arrival time moves past its full
/// queue. Each stops at the most its state counts exactly ([`fixed_window::MAX_COUNT`],
/// [`token_bucket::MAX_UNITS`], [`leaky_bucket::report`]). A concurrency limit has no usage to
/// report: a report there takes a slot like any request.
pub fn report(
    state: &mut Option<AlgorithmState>,
    spec: &LimitSpec,
    hits: u64,
    now: Timestamp,
) -> Decision {
    run(state, spec, hits, Mode::Report, now)
}

/// Acquires (`hits` > 0), checks (0) or releases (`release`) the slot of `holder` on a
/// concurrency limit's `state` ([`concurrency`]). For any other algorithm the holder does not
/// matter and this is [`apply`] or [`refund`].
pub fn hold(
    state: &mut Option<AlgorithmState>,
    spec: &LimitSpec,
    holder: &str,
    hits: u64,
    release: bool,
    now: Timestamp,
) -> Decision {
    if spec.algorithm != Algorithm::Concurrency {
        let mode = if release {
            Mode::Refund
        } else {
            Mode::Take(Duration::ZERO)
        };
        return run(state, spec, hits, mode, now);
    }
    with(state, |s: &mut Box<ConcurrencyState>| {
        concurrency::run(s, spec, holder, hits, release, now)
    })
}

/// What [`run`] does with the hits.
#[derive(Clone, Copy)]
enum Mode {
    /// Take them, accepting a delay of up to this long (leaky buckets only).
    Take(Duration),
    /// Give them back.
    Refund,
    /// Count them whatever the state ([`report`]).
    Report,
}

/// What a caller asks of an algorithm: `hits` of the limit `spec` at `now`, taken or given back
/// as `mode` says.
#[derive(Clone, Copy)]
struct Ask<'a> {
    spec: &'a LimitSpec,
    hits: u64,
    mode: Mode,
    now: Timestamp,
}

/// [`shape`] or [`refund`], on the state of `spec`'s algorithm. Each arm names its state
/// type at compile time, so the hot path has no dynamic dispatch.
fn run(
    state: &mut Option<AlgorithmState>,
    spec: &LimitSpec,
    hits: u64,
    mode: Mode,
    now: Timestamp,
) -> Decision {
    let ask = Ask {
        spec,
        hits,
        mode,
        now,
    };
    match spec.algorithm {
        Algorithm::FixedWindow => with(state, |s: &mut FixedWindowState| s.run(ask)),
        Algorithm::TokenBucket => with(state, |s: &mut TokenBucketState| s.run(ask)),
        Algorithm::SlidingWindow => with(state, |s: &mut SlidingWindowState| s.run(ask)),
        Algorithm::LeakyBucket => with(state, |s: &mut LeakyBucketState| s.run(ask)),
        Algorithm::SlidingLog => with(state, |s: &mut Box<SlidingLogState>| s.run(ask)),
        Algorithm::Concurrency => with(state, |s: &mut Box<ConcurrencyState>| s.run(ask)),
    }
}

/// Runs `f` on the `S` in `state` (a fresh one when `state` is `None` or another algorithm's) and
/// keeps what `f` left there. The state moves out of the option and back, a boxed one with its
/// box: nothing is allocated but a fresh boxed state.
fn with<S: Kept>(
    state: &mut Option<AlgorithmState>,
    f: impl FnOnce(&mut S) -> Decision,
) -> Decision {
    let mut s = S::unwrap(state.take());
    let d = f(&mut s);
    *state = Some(s.wrap());
    d
}

/// The state one algorithm keeps in its [`AlgorithmState`] variant, and what the algorithm does
/// to it.
trait Kept: Default {
    /// The state in `state` when it is this algorithm's, a fresh one otherwise (the key had no
    /// state, or the limit's algorithm changed).
    fn unwrap(state: Option<AlgorithmState>) -> Self;
    /// This state as a store keeps it.
    fn wrap(self) -> AlgorithmState;
    /// Does what `ask` asks.
    fn run(&mut self, ask: Ask) -> Decision;
}

/// Implements [`Kept`] for the state in each `Variant(Type)`: `take` runs for [`Mode::Take`] with
/// its delay bound to the fourth name, `refund` for [`Mode::Refund`], `report` for
/// [`Mode::Report`]; all see the state and the
/// [`Ask`]'s spec, hits and now under the other names.
macro_rules! kept {
    ($($variant:ident($ty:ty) |$s:ident, $spec:ident, $hits:ident, $wait:ident, $now:ident| {
        take: $take:expr,
        refund: $refund:expr,
        report: $report:expr $(,)?
    })+) => {$(
        impl Kept for $ty {
            fn unwrap(state: Option<AlgorithmState>) -> Self {
                match state {
                    Some(AlgorithmState::$variant(s)) => s,
                    _ => Self::default(),
                }
            }

            fn wrap(self) -> AlgorithmState {
                AlgorithmState::$variant(self)
            }

            fn run(&mut self, ask: Ask) -> Decision {
                let Ask {
                    spec: $spec,
                    hits: $hits,
                    mode,
                    now: $now,
                } = ask;
                let $s = self;
                match mode {
                    Mode::Take($wait) => $take,
                    Mode::Refund => $refund,
                    Mode::Report => $report,
                }
            }
        }
    )+};
}

kept! {
    FixedWindow(FixedWindowState) |s, spec, hits, _max_wait, now| {
        take: fixed_window::apply(s, spec.limit, spec.window, hits, now),
        refund: fixed_window::refund(s, spec.limit, spec.window, hits, now),
        report: fixed_window::apply(s, spec.limit, spec.window, hits, now).reported(),
    }
    TokenBucket(TokenBucketState) |s, spec, hits, _max_wait, now| {
        take: token_bucket::apply(s, spec, hits, now),
        refund: token_bucket::refund(s, spec, hits, now),
        report: token_bucket::report(s, spec, hits, now),
    }
    SlidingWindow(SlidingWindowState) |s, spec, hits, _max_wait, now| {
        take: sliding_window::apply(s, spec, hits, now),
        refund: sliding_window::refund(s, spec, hits, now),
        report: sliding_window::report(s, spec, hits, now),
    }
    LeakyBucket(LeakyBucketState) |s, spec, hits, max_wait, now| {
        take: leaky_bucket::shape(s, spec, hits, max_wait, now),
        refund: leaky_bucket::refund(s, spec, hits, now),
        report: leaky_bucket::report(s, spec, hits, now),
    }
    SlidingLog(Box<SlidingLogState>) |s, spec, hits, _max_wait, now| {
        take: sliding_log::apply(s, spec, hits, now),
        refund: sliding_log::refund(s, spec, hits, now),
        report: sliding_log::report(s, spec, hits, now),
    }
    // Without a holder id every caller is the empty holder: the edges always name one ([`hold`]),
    // so this path only serves callers that do not know the algorithm.
    Concurrency(Box<ConcurrencyState>) |s, spec, hits, _max_wait, now| {
        take: concurrency::run(s, spec, "", hits, false, now),
        refund: concurrency::run(s, spec, "", hits, true, now),
        report: concurrency::run(s, spec, "", hits, false, now),
    }
}

#[cfg(test)]
mod tests;
