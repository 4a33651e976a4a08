//! A circuit breaker for one Redis target (the main Redis, the per-second Redis, one Cluster
//! master, ...): it opens on a Redis that is failing, not on one slow moment of a healthy one.
//!
//! Closed: calls go through; `failures` failure *events* in a row open it. A failure is a call
//! that failed to reach Redis or got no reply within `REDIS_RESPONSE_TIMEOUT` (an error reply is
//! a reply: the store decides which replies are Redis refusing to work, see
//! `store::redis::call`). Calls in flight together that fail together are one event: every
//! permit carries the breaker's *epoch*, which moves whenever an outcome is recorded under the
//! lock (a failure counted, a success that ends a run of failures, a state change), and a failed
//! call counts only if the epoch has not moved since it was let through. So the 8 or 64 calls
//! waiting behind one 20 ms stall (an expire cycle, a fork for a snapshot, `DEBUG SLEEP`) make one
//! event, and the next calls, answered once Redis resumes, end the run. The same rule keeps time
//! spent inside this process off Redis's account: calls that waited for a busy runtime or for a
//! connection time out together (one event), and a call that waited while Redis answered later
//! calls finds the epoch moved by their success. A Redis that is down fails call after call, each
//! sent after the previous failure was counted: with the defaults (3 failures, 15 ms timeout) a hung
//! Redis opens the breaker after about three timeouts, a refusing one after three calls. Rates over
//! a time window were the other design; they need a minimum volume and a window, and they treat a
//! stall as many failures at once, which is what this rule avoids by construction.
//!
//! Open: no call goes through — the caller answers at once by each limit's failure policy — until
//! the cool-down has passed; then it is half-open and lets one probe call through at a time
//! (another probe only if that one never reported back within a cool-down, e.g. its request was
//! cancelled). A successful probe closes it. A failed probe lets the next one through at once;
//! `failures` failed probes in a row open it again for another cool-down, so one late reply while
//! Redis recovers does not cost a whole cool-down. The store's once-a-second health PING closes it
//! too ([`Breaker::probed`]), so recovery does not wait for traffic or for a pool of broken
//! connections to be tried one probe at a time.
//!
//! Pure state under a short lock, timed by the injected [`Clock`] (tests drive it with
//! `ManualClock`); grouping by epoch needs no clock at all, so it holds on a manual clock too. A
//! healthy breaker takes no lock and writes nothing: two atomic flags mirror "closed" and "closed
//! with no failures counted", and the epoch is only read, so the request path of every core reads
//! three values that change only on failures (the lock is for state changes, which are rare).
//! Transitions are counted for the metrics and logged once each: opening at `warn`, closing at
//! `info`, the probes in between at `debug` (an outage logs two lines, not one per request or per
//! probe).

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
    /// Call: the breaker is closed. `epoch` is the breaker's epoch when the call was let through
    /// (see the module doc).
    Call {
        /// The epoch the call's failure is judged against.
        epoch: u64,
    },
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
    /// Failure events in a row while closed; failed probes in a row while half-open.
    failures: u32,
    /// When the breaker last opened, or the last probe was let through.
    since: Timestamp,
    /// Half-open: a probe is out and has not reported back.
    probing: bool,
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
    /// `inner.failures > 0` while closed, readable without the lock.
    failing: AtomicBool,
    /// Moves on every outcome recorded under the lock; written only under it.
    epoch: AtomicU64,
    counts: [AtomicU64; 3],
}

impl Breaker {
    /// A closed breaker for `target` that opens after `threshold` (at least 1) failure events in
    /// a row and probes every `cooldown`.
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
                probing: false,
            }),
            closed: AtomicBool::new(true),
            failing: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            counts: Default::default(),
        }
    }

    /// Whether a call may go to the target now.
    pub fn permit(&self) -> Permit {
        // The epoch first: an outcome recorded between the two reads only makes this call's
        // failure part of that outcome's event, never a new one.
        let epoch = self.epoch.load(Ordering::Acquire);
        if self.closed.load(Ordering::Acquire) {
            return Permit::Call { epoch };
        }
        let mut inner = self.inner.lock();
        let now = self.clock.now();
        match inner.state {
            BreakerState::Closed => Permit::Call {
                epoch: self.epoch.load(Ordering::Acquire),
            },
            BreakerState::Open if now < inner.since.saturating_add(self.cooldown) => {
                Permit::Rejected
            }
            BreakerState::HalfOpen
                if inner.probing && now < inner.since.saturating_add(self.cooldown) =>
            {
                Permit::Rejected
            }
            BreakerState::Open | BreakerState::HalfOpen => {
                if inner.state == BreakerState::Open {
                    inner.failures = 0;
                    self.moved(&mut inner, BreakerState::HalfOpen);
                }
                inner.probing = true;
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
        if matches!(permit, Permit::Call { .. })
            && ok
            && self.closed.load(Ordering::Acquire)
            && !self.failing.load(Ordering::Acquire)
        {
            return;
        }
        let mut inner = self.inner.lock();
        self.record_locked(&mut inner, permit, ok);
        self.failing.store(
            inner.state == BreakerState::Closed && inner.failures > 0,
            Ordering::Release,
        );
    }

    fn record_locked(&self, inner: &mut Inner, permit: Permit, ok: bool) {
        match (permit, ok, inner.state) {
            (Permit::Rejected, ..) => {}
            (Permit::Call { .. }, true, BreakerState::Closed) => {
                // Redis answers: the run ends, and calls in flight now saw it answer.
                if inner.failures > 0 {
                    inner.failures = 0;
                    self.next_epoch();
                }
            }
            (Permit::Call { epoch }, false, BreakerState::Closed) => {
                // In flight when an outcome was recorded: part of that event (see the module doc).
                if epoch != self.epoch.load(Ordering::Acquire) {
                    return;
                }
                inner.failures += 1;
                self.next_epoch();
                if inner.failures >= self.threshold {
                    inner.since = self.clock.now();
                    self.moved(inner, BreakerState::Open);
                }
            }
            // A call let through before the breaker opened says nothing new once it has.
            (Permit::Call { .. }, ..) => {}
            (Permit::Probe, true, BreakerState::HalfOpen) => {
                inner.failures = 0;
                inner.probing = false;
                self.moved(inner, BreakerState::Closed);
            }
            (Permit::Probe, false, BreakerState::HalfOpen) => {
                // One late reply while Redis recovers: the next call probes again at once.
                inner.probing = false;
                inner.failures += 1;
                if inner.failures >= self.threshold {
                    inner.since = self.clock.now();
                    self.moved(inner, BreakerState::Open);
                }
            }
            (Permit::Probe, ..) => {}
        }
    }

    fn next_epoch(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Records a check made off the request path (the health PING): a target that answers
    /// closes an open or half-open breaker at once; a failed check changes nothing (only calls
    /// count towards opening).
    pub fn probed(&self, ok: bool) {
        let mut inner = self.inner.lock();
        if ok && inner.state != BreakerState::Closed {
            inner.failures = 0;
            inner.probing = false;
            self.failing.store(false, Ordering::Release);
            self.moved(&mut inner, BreakerState::Closed);
        }
    }

    /// Whether calls go through without probing, read without the lock (the store asks on every
    /// failed call, which during a stall are many at once).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
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
        // Calls let through before a change are judged by the state they were let through in.
        self.next_epoch();
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
                );
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
