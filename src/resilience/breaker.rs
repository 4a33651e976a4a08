//! A circuit breaker for one Redis target (the main Redis, the per-second Redis, one Cluster
//! master, ...).
//!
//! Closed: calls go through; `failures` consecutive failed or timed-out calls open it. Open: no
//! call goes through — the caller answers at once by each limit's failure policy — until the
//! cool-down has passed; then it is half-open and lets exactly one probe call through (another
//! probe only if that one never reported back within a cool-down, e.g. its request was
//! cancelled). A successful probe closes it; a failed one opens it again for another cool-down.
//! The store's once-a-second health PING closes it too ([`Breaker::probed`]), so recovery does
//! not wait for traffic or for a pool of broken connections to be tried one probe at a time.
//!
//! Pure state under a short lock, timed by the injected [`Clock`] (tests drive it with
//! `ManualClock`). A healthy breaker takes no lock at all: two atomic flags mirror "closed" and
//! "closed with no failures counted", so the request path of every core only reads them (the
//! lock is for state changes, which are rare). Transitions are counted for the metrics and logged once each: opening at
//! `warn`, closing at `info`, the probes in between at `debug` (an outage logs two lines, not
//! one per request or per probe).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::clock::{Clock, Timestamp};

/// The state of a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go through.
    Closed,
    /// One probe call at a time goes through.
    HalfOpen,
    /// No call goes through.
    Open,
}

impl BreakerState {
    /// The gauge value: 0 closed, 1 half-open, 2 open.
    pub fn gauge(self) -> i64 {
        match self {
            BreakerState::Closed => 0,
            BreakerState::HalfOpen => 1,
            BreakerState::Open => 2,
        }
    }
}

/// What a caller may do now. Hand it back to [`Breaker::record`] with the call's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permit {
    /// Call: the breaker is closed.
    Call,
    /// Call: this call is the half-open breaker's probe.
    Probe,
    /// Do not call: the breaker is open (or another probe is in flight).
    Rejected,
}

/// A breaker's state and transition counts, for the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerReport {
    /// The target's name (`main`, `per_second`, or a Cluster master's `host:port`).
    pub target: &'static str,
    /// The current state.
    pub state: BreakerState,
    /// Transitions into open, half-open and closed so far.
    pub opened: u64,
    /// See `opened`.
    pub half_opened: u64,
    /// See `opened`.
    pub closed: u64,
}

#[derive(Debug)]
struct Inner {
    state: BreakerState,
    /// Consecutive failures while closed.
    failures: u32,
    /// When the breaker last opened, or the last probe was let through.
    since: Timestamp,
}

/// The breaker of one target.
#[derive(Debug)]
pub struct Breaker {
    target: &'static str,
    threshold: u32,
    cooldown: Duration,
    clock: Arc<dyn Clock>,
    inner: Mutex<Inner>,
    /// `inner.state == Closed`, readable without the lock.
    closed: AtomicBool,
    /// `inner.failures > 0`, readable without the lock.
    failing: AtomicBool,
    counts: [AtomicU64; 3],
}

impl Breaker {
    /// A closed breaker for `target` that opens after `threshold` (at least 1) consecutive
    /// failures and probes every `cooldown`.
    pub fn new(
        target: &'static str,
        threshold: u32,
        cooldown: Duration,
        clock: Arc<dyn Clock>,
    ) -> Breaker {
        Breaker {
            target,
            threshold: threshold.max(1),
            cooldown,
            clock,
            inner: Mutex::new(Inner {
                state: BreakerState::Closed,
                failures: 0,
                since: Timestamp::default(),
            }),
            closed: AtomicBool::new(true),
            failing: AtomicBool::new(false),
            counts: Default::default(),
        }
    }

    /// Whether a call may go to the target now.
    pub fn permit(&self) -> Permit {
        if self.closed.load(Ordering::Acquire) {
            return Permit::Call;
        }
        let mut inner = self.inner.lock();
        match inner.state {
            BreakerState::Closed => Permit::Call,
            BreakerState::Open | BreakerState::HalfOpen => {
                let now = self.clock.now();
                if now < inner.since.saturating_add(self.cooldown) {
                    return Permit::Rejected;
                }
                if inner.state == BreakerState::Open {
                    self.moved(&mut inner, BreakerState::HalfOpen);
                }
                inner.since = now;
                Permit::Probe
            }
        }
    }

    /// Records how a call let through by `permit` ended (`ok`: the target answered in time).
    pub fn record(&self, permit: Permit, ok: bool) {
        // A success on a closed breaker with no failures counted changes nothing: the common
        // case, decided from the flags. (Racing a failure recorded at the same moment, it reads
        // as if the success came first, which the lock could not tell apart either.)
        if permit == Permit::Call
            && ok
            && self.closed.load(Ordering::Acquire)
            && !self.failing.load(Ordering::Acquire)
        {
            return;
        }
        let mut inner = self.inner.lock();
        self.record_locked(&mut inner, permit, ok);
        self.failing.store(inner.failures > 0, Ordering::Release);
    }

    fn record_locked(&self, inner: &mut Inner, permit: Permit, ok: bool) {
        match (permit, ok, inner.state) {
            (Permit::Rejected, ..) => {}
            (Permit::Call, true, BreakerState::Closed) => inner.failures = 0,
            (Permit::Call, false, BreakerState::Closed) => {
                inner.failures += 1;
                if inner.failures >= self.threshold {
                    inner.since = self.clock.now();
                    self.moved(inner, BreakerState::Open);
                }
            }
            // A call let through before the breaker opened says nothing new once it has.
            (Permit::Call, ..) => {}
            (Permit::Probe, true, BreakerState::HalfOpen) => {
                inner.failures = 0;
                self.moved(inner, BreakerState::Closed);
            }
            (Permit::Probe, false, BreakerState::HalfOpen) => {
                inner.since = self.clock.now();
                self.moved(inner, BreakerState::Open);
            }
            (Permit::Probe, ..) => {}
        }
    }

    /// Records a check made off the request path (the health PING): a target that answers
    /// closes an open or half-open breaker at once; a failed check changes nothing (only calls
    /// count towards opening).
    pub fn probed(&self, ok: bool) {
        let mut inner = self.inner.lock();
        if ok && inner.state != BreakerState::Closed {
            inner.failures = 0;
            self.failing.store(false, Ordering::Release);
            self.moved(&mut inner, BreakerState::Closed);
        }
    }

    /// The current state.
    pub fn state(&self) -> BreakerState {
        self.inner.lock().state
    }

    /// The state and transition counts.
    pub fn report(&self) -> BreakerReport {
        let count = |i: usize| self.counts[i].load(Ordering::Relaxed);
        BreakerReport {
            target: self.target,
            state: self.state(),
            opened: count(0),
            half_opened: count(1),
            closed: count(2),
        }
    }

    fn moved(&self, inner: &mut Inner, to: BreakerState) {
        let from = inner.state;
        inner.state = to;
        self.closed
            .store(to == BreakerState::Closed, Ordering::Release);
        let target = self.target;
        match (from, to) {
            (BreakerState::Closed, _) => tracing::warn!(
                target_redis = target,
                failures = inner.failures,
                cooldown = ?self.cooldown,
                "Redis breaker opened: answering by each limit's failure mode until Redis answers again"
            ),
            (_, BreakerState::Closed) => {
                tracing::info!(
                    target_redis = target,
                    "Redis breaker closed: Redis answers again"
                )
            }
            _ => tracing::debug!(target_redis = target, state = ?to, "Redis breaker probing"),
        }
        let i = match to {
            BreakerState::Open => 0,
            BreakerState::HalfOpen => 1,
            BreakerState::Closed => 2,
        };
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
