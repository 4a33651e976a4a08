//! Reconnect waits, as pure arithmetic: the caller supplies the random draws (so tests are exact)
//! and does the waiting.
//!
//! The exponential backoff follows the Go service's (jpillora/backoff with the `XDS_CLIENT_BACKOFF_*`
//! settings): attempt `n` waits `initial × factor^n`, clamped to `[initial, max]`; with jitter the wait
//! is drawn uniformly between `initial` and that value. A factor of 1 or less (the default 0.5) thus
//! keeps every wait at the initial interval, as it does in Go.

use std::time::Duration;

use super::BackoffSettings;

/// Exponential backoff state: how many waits in a row so far.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    settings: BackoffSettings,
    attempt: u32,
}

impl Backoff {
    /// A backoff at its first attempt.
    pub(crate) fn new(settings: BackoffSettings) -> Backoff {
        Backoff {
            settings,
            attempt: 0,
        }
    }

    /// The next wait; `draw` is a uniform random number in `[0, 1)`, used only with jitter.
    pub(crate) fn next(&mut self, draw: f64) -> Duration {
        let wait = wait_for_attempt(&self.settings, self.attempt, draw);
        self.attempt = self.attempt.saturating_add(1);
        wait
    }

    /// Back to the first attempt: called once the stream works again.
    pub(crate) fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// The wait before attempt `attempt` (0-based).
pub(crate) fn wait_for_attempt(s: &BackoffSettings, attempt: u32, draw: f64) -> Duration {
    let (min, max) = (s.initial.as_secs_f64(), s.max.as_secs_f64());
    if min >= max {
        return s.max;
    }
    let mut wait = min * s.factor.powi(attempt.min(i32::MAX as u32) as i32);
    if s.jitter {
        wait = min + draw.clamp(0.0, 1.0) * (wait - min);
    }
    // NaN (0 × ∞) and overflow land on the bounds.
    Duration::from_secs_f64(if wait.is_nan() {
        max
    } else {
        wait.clamp(min, max)
    })
}

/// The linear wait between failed connection attempts
/// (`CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL`, ±50% jitter as in Go's gRPC retry option).
pub(crate) fn connect_retry(interval: Duration, draw: f64) -> Duration {
    interval.mul_f64(0.5 + draw.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(factor: f64, jitter: bool) -> BackoffSettings {
        BackoffSettings {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(10),
            factor,
            jitter,
        }
    }

    #[test]
    fn grows_by_the_factor_up_to_the_max() {
        let mut b = Backoff::new(settings(2.0, false));
        let waits: Vec<u64> = (0..6).map(|_| b.next(0.7).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 10, 10]);
        b.reset();
        assert_eq!(b.next(0.7), Duration::from_secs(1));
    }

    #[test]
    fn jitter_draws_between_the_initial_and_the_computed_wait() {
        let s = settings(2.0, true);
        assert_eq!(wait_for_attempt(&s, 3, 0.0), Duration::from_secs(1));
        assert_eq!(wait_for_attempt(&s, 3, 0.5), Duration::from_millis(4500));
        assert_eq!(wait_for_attempt(&s, 3, 1.0), Duration::from_secs(8));
        assert_eq!(wait_for_attempt(&s, 30, 1.0), Duration::from_secs(10));
    }

    #[test]
    fn a_factor_below_one_stays_at_the_initial_wait_as_in_go() {
        let s = settings(0.5, true);
        for attempt in 0..5 {
            assert_eq!(wait_for_attempt(&s, attempt, 0.9), Duration::from_secs(1));
        }
    }

    #[test]
    fn degenerate_bounds_and_huge_attempts_stay_bounded() {
        let mut s = settings(2.0, false);
        assert_eq!(wait_for_attempt(&s, u32::MAX, 0.0), Duration::from_secs(10));
        s.initial = Duration::from_secs(20);
        assert_eq!(wait_for_attempt(&s, 0, 0.0), Duration::from_secs(10));
        s.initial = Duration::ZERO;
        s.factor = f64::MAX;
        assert_eq!(wait_for_attempt(&s, 2, 0.0), Duration::from_secs(10));
    }

    #[test]
    fn connect_retries_are_the_interval_give_or_take_half() {
        let i = Duration::from_secs(2);
        assert_eq!(connect_retry(i, 0.0), Duration::from_secs(1));
        assert_eq!(connect_retry(i, 1.0), Duration::from_secs(3));
    }
}
