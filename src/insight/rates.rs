//! Decisions over the last 15 minutes, for the console's charts: a bounded ring of
//! [`BUCKETS`] buckets of [`BUCKET_SECS`] seconds of the injected clock, fed from the service's
//! existing counters ([`Totals::from_metrics`]) rather than from a second count on the request
//! path. Each [`RateHistory::sample`] adds what the counters moved since the previous sample to
//! the bucket of the clock's "now"; a task samples every second and every console view samples
//! too, so a bucket holds what happened during its ten seconds, give or take one sample.
//!
//! Memory is fixed (90 buckets of four counters); a clock that goes back keeps adding to the
//! newest bucket.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::metrics::{Metrics, code_index};
use ratelimitd_core::clock::{Clock, Timestamp};
use ratelimitd_core::limiter::{Code, Source};

/// Seconds per bucket.
pub(crate) const BUCKET_SECS: u64 = 10;
/// Buckets kept: 15 minutes.
pub(crate) const BUCKETS: usize = 90;

/// Cumulative (or, in a bucket, per-bucket) counts of answered calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    /// Decisions that allowed the request.
    pub allowed: u64,
    /// Decisions over the limit.
    pub denied: u64,
    /// Decisions the store did not make: the failure mode, the open breaker or the local
    /// fallback answered (counted in `allowed`/`denied` too).
    pub degraded: u64,
    /// Calls answered with an error (the store failed under `failure_mode: error`, no
    /// configuration, a full memory store).
    pub errors: u64,
}

impl Totals {
    /// The service's counters now.
    pub(crate) fn from_metrics(m: &Metrics) -> Totals {
        let decisions = m.decisions.values();
        let (ok, over) = (code_index(Code::Ok), code_index(Code::OverLimit));
        let at = |code: usize, s: Source| decisions[code * Source::ALL.len() + s.index()];
        let sum = |code| {
            Source::ALL
                .iter()
                .fold(0u64, |a, s| a.wrapping_add(at(code, *s)))
        };
        let of = |sources: &[Source]| {
            (sources.iter()).fold(0u64, |a, s| {
                a.wrapping_add(at(ok, *s)).wrapping_add(at(over, *s))
            })
        };
        let answered_by_policy = of(&[Source::FailurePolicy, Source::Breaker]);
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        // The store error counters count every request the store failed, once, whether its
        // failure mode answered it (then it is also a FailurePolicy or Breaker decision) or it
        // got an error: the difference is the calls that got an error.
        let store_failed = load(&m.redis_errors).wrapping_add(load(&m.store_full));
        Totals {
            allowed: sum(ok),
            denied: sum(over),
            degraded: of(&[
                Source::FailurePolicy,
                Source::Breaker,
                Source::LocalFallback,
            ]),
            errors: load(&m.service_errors)
                .wrapping_add(store_failed.saturating_sub(answered_by_policy)),
        }
    }

    fn since(self, earlier: Totals) -> Totals {
        Totals {
            allowed: self.allowed.saturating_sub(earlier.allowed),
            denied: self.denied.saturating_sub(earlier.denied),
            degraded: self.degraded.saturating_sub(earlier.degraded),
            errors: self.errors.saturating_sub(earlier.errors),
        }
    }

    fn add(&mut self, d: Totals) {
        self.allowed = self.allowed.saturating_add(d.allowed);
        self.denied = self.denied.saturating_add(d.denied);
        self.degraded = self.degraded.saturating_add(d.degraded);
        self.errors = self.errors.saturating_add(d.errors);
    }
}

/// Reads the cumulative counters.
pub(crate) type ReadTotals = Arc<dyn Fn() -> Totals + Send + Sync>;

/// One bucket of a `Series`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Point {
    /// When the bucket starts.
    pub start: Timestamp,
    /// What happened in it.
    pub counts: Totals,
}

#[derive(Debug, Default)]
struct Ring {
    /// The counters at the previous sample.
    last: Option<Totals>,
    /// (bucket number, counts), oldest first, at most [`BUCKETS`].
    buckets: VecDeque<(u64, Totals)>,
}

/// The last 15 minutes of decisions. Share it as `Arc<RateHistory>`.
pub(crate) struct RateHistory {
    read: ReadTotals,
    clock: Arc<dyn Clock>,
    ring: Mutex<Ring>,
}

impl std::fmt::Debug for RateHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateHistory").finish_non_exhaustive()
    }
}

impl RateHistory {
    /// A history of what `read` counts, timed by `clock`; the first sample is the baseline.
    pub(crate) fn new(read: ReadTotals, clock: Arc<dyn Clock>) -> RateHistory {
        let history = RateHistory {
            read,
            clock,
            ring: Mutex::default(),
        };
        history.sample();
        history
    }

    /// Adds what the counters moved since the previous sample to the bucket of now.
    pub(crate) fn sample(&self) {
        let totals = (self.read)();
        let bucket = self.clock.now().as_secs() / BUCKET_SECS;
        let mut ring = self.ring.lock();
        let moved = ring.last.map_or_else(Totals::default, |l| totals.since(l));
        ring.last = Some(totals);
        match ring.buckets.back_mut() {
            // A clock that went back keeps counting in the newest bucket.
            Some((newest, counts)) if *newest >= bucket => counts.add(moved),
            _ => ring.buckets.push_back((bucket, moved)),
        }
        let oldest_kept = bucket.saturating_sub(BUCKETS as u64 - 1);
        while ring.buckets.front().is_some_and(|(b, _)| *b < oldest_kept) {
            ring.buckets.pop_front();
        }
        while ring.buckets.len() > BUCKETS {
            ring.buckets.pop_front();
        }
    }

    /// The last [`BUCKETS`] buckets ending with now's, oldest first; buckets nothing was sampled
    /// in are zero. Samples first, so the newest bucket is up to date.
    pub(crate) fn series(&self) -> Vec<Point> {
        self.sample();
        let now = self.clock.now().as_secs() / BUCKET_SECS;
        let first = now.saturating_sub(BUCKETS as u64 - 1);
        let ring = self.ring.lock();
        (first..=now)
            .map(|b| Point {
                start: Timestamp::from_secs(b * BUCKET_SECS),
                counts: (ring.buckets.iter())
                    .find(|(n, _)| *n == b)
                    .map_or_else(Totals::default, |(_, c)| *c),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use ratelimitd_core::clock::ManualClock;

    fn history() -> (Arc<AtomicU64>, Arc<ManualClock>, RateHistory) {
        let allowed = Arc::new(AtomicU64::new(0));
        let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_000)));
        let read = allowed.clone();
        let read: ReadTotals = Arc::new(move || Totals {
            allowed: read.load(Ordering::SeqCst),
            ..Totals::default()
        });
        let h = RateHistory::new(read, clock.clone());
        (allowed, clock, h)
    }

    #[test]
    fn moves_land_in_the_bucket_of_their_sample() {
        let (allowed, clock, h) = history();
        allowed.store(30, Ordering::SeqCst);
        h.sample();
        clock.advance(Duration::from_secs(10));
        allowed.store(50, Ordering::SeqCst);
        let s = h.series();
        assert_eq!(s.len(), BUCKETS);
        assert_eq!(s[BUCKETS - 2].counts.allowed, 30);
        assert_eq!(s[BUCKETS - 1].counts.allowed, 20);
        assert_eq!(s[BUCKETS - 1].start, Timestamp::from_secs(1_010));
        assert!(
            s[..BUCKETS - 2]
                .iter()
                .all(|p| p.counts == Totals::default())
        );
    }

    #[test]
    fn older_than_fifteen_minutes_is_forgotten_and_memory_stays_bounded() {
        let (allowed, clock, h) = history();
        for i in 0..500u64 {
            allowed.store(i, Ordering::SeqCst);
            h.sample();
            clock.advance(Duration::from_secs(10));
        }
        assert!(h.ring.lock().buckets.len() <= BUCKETS);
        clock.advance(Duration::from_secs(15 * 60));
        assert!(h.series().iter().all(|p| p.counts == Totals::default()));
    }

    #[test]
    fn a_clock_that_goes_back_counts_in_the_newest_bucket() {
        let (allowed, clock, h) = history();
        clock.advance(Duration::from_secs(100));
        h.sample();
        clock.set(Timestamp::from_secs(1_000));
        allowed.store(7, Ordering::SeqCst);
        h.sample();
        clock.advance(Duration::from_secs(100));
        assert_eq!(h.series()[BUCKETS - 1].counts.allowed, 7);
    }
}
