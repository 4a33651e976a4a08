//! The schedule of a paced run (`--rate`): request `i` is due `i / rate` seconds after the run
//! started, whatever happened to the requests before it. The schedule is fixed at the start, so a
//! late send does not push the later ones back (which would lower the offered load exactly when
//! the server is slow, and hide it), and the latency of a request counts from when it was due.
//!
//! The pacer only computes the schedule; the clock it is read against is a parameter (`now`, the
//! time since the start), so the tests drive it with a manual clock.

use std::ops::Range;
use std::time::Duration;

/// Which requests of a paced run are due when.
#[derive(Debug)]
pub(crate) struct Pacer {
    /// Requests per second, at least 1.
    rate: u64,
    /// How many requests have been released so far (the index of the next one).
    released: u64,
    /// How many the run sends at most.
    limit: u64,
}

impl Pacer {
    /// A schedule of `rate` requests per second, `limit` requests at most.
    pub(crate) fn new(rate: u64, limit: u64) -> Pacer {
        Pacer {
            rate: rate.max(1),
            released: 0,
            limit,
        }
    }

    /// When request `i` is due, from the start of the run. Computed from `i` alone (not by adding
    /// a gap to the previous one), so rounding never accumulates into drift.
    pub(crate) fn due(&self, i: u64) -> Duration {
        let nanos = u128::from(i) * 1_000_000_000 / u128::from(self.rate);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The requests due by `now` (time since the start) that were not released yet, all of them:
    /// a pacer that wakes late releases everything it missed, each with its own due time.
    pub(crate) fn release(&mut self, now: Duration) -> Range<u64> {
        let start = self.released;
        // The first index not yet due: the smallest i with due(i) > now.
        let due_by_now = u128::from(self.rate) * now.as_nanos() / 1_000_000_000 + 1;
        let end = u64::try_from(due_by_now)
            .unwrap_or(u64::MAX)
            .min(self.limit)
            .max(start);
        self.released = end;
        start..end
    }

    /// When the next request not yet released is due; `None` once `limit` were released.
    pub(crate) fn next_due(&self) -> Option<Duration> {
        (self.released < self.limit).then(|| self.due(self.released))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimitd_core::clock::{Clock, ManualClock, Timestamp};

    /// Time since the start of the run on a manual clock that started at `start`.
    fn since(clock: &ManualClock, start: Timestamp) -> Duration {
        Duration::from_micros(clock.now().as_micros() - start.as_micros())
    }

    #[test]
    fn the_schedule_is_fixed_at_the_start_and_a_late_wake_up_releases_what_it_missed() {
        let start = Timestamp::from_secs(1);
        let clock = ManualClock::new(start);
        let mut pacer = Pacer::new(1000, u64::MAX);
        // At the start only request 0 is due.
        assert_eq!(pacer.release(since(&clock, start)), 0..1);
        assert_eq!(pacer.next_due(), Some(Duration::from_millis(1)));
        // Woken on time: one more.
        clock.advance(Duration::from_millis(1));
        assert_eq!(pacer.release(since(&clock, start)), 1..2);
        // Nothing twice.
        assert_eq!(pacer.release(since(&clock, start)), 2..2);
        // Woken 50 ms late (a stalled generator): the 50 requests it missed are released at once,
        // each keeping its own due time, so their latency counts the 50 ms they waited.
        clock.advance(Duration::from_millis(51));
        let missed = pacer.release(since(&clock, start));
        assert_eq!(missed, 2..53);
        assert_eq!(pacer.due(missed.start), Duration::from_millis(2));
        assert_eq!(pacer.due(missed.end - 1), Duration::from_millis(52));
        // And the schedule after it has not moved.
        assert_eq!(pacer.next_due(), Some(Duration::from_millis(53)));
    }

    #[test]
    fn a_rate_that_does_not_divide_a_second_does_not_drift() {
        let start = Timestamp::from_micros(0);
        let clock = ManualClock::new(start);
        // 35 001/s: a gap of 28 571.02 ns, which a gap added per request would round away.
        let mut pacer = Pacer::new(35_001, u64::MAX);
        let mut sent = 0;
        for _ in 0..10_000 {
            clock.advance(Duration::from_micros(100));
            sent += pacer.release(since(&clock, start)).count() as u64;
        }
        // One second: requests 0 to 35 001, both ends due.
        assert_eq!(since(&clock, start), Duration::from_secs(1));
        assert_eq!(sent, 35_002);
        assert_eq!(pacer.due(35_001), Duration::from_secs(1));
    }

    #[test]
    fn the_run_stops_at_its_limit() {
        let mut pacer = Pacer::new(10, 3);
        assert_eq!(pacer.release(Duration::from_secs(60)), 0..3);
        assert_eq!(pacer.release(Duration::from_secs(120)), 3..3);
        assert_eq!(pacer.next_due(), None);
    }
}
