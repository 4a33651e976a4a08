//! Time source. This is the only file that reads the system clock: everything else takes `now` as a
//! parameter, so tests drive time with [`ManualClock`] instead of sleeping. `clippy.toml` makes
//! that a lint: `SystemTime::now` and `Instant::now` are disallowed methods outside this file.
//! Tests and examples that bound a real wait (end-to-end deadlines) or time a run use
//! [`Stopwatch`].

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A point in time: microseconds since the Unix epoch. Microseconds keep bucket algorithms exact at
/// high rates while fitting in a `u64` for the next 500 000 years.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The timestamp `secs` whole seconds after the epoch.
    pub fn from_secs(secs: u64) -> Timestamp {
        Timestamp(secs.saturating_mul(1_000_000))
    }

    /// The timestamp `micros` microseconds after the epoch.
    pub fn from_micros(micros: u64) -> Timestamp {
        Timestamp(micros)
    }

    /// Whole seconds since the epoch (rounded down), as the Go service uses for windows.
    pub fn as_secs(self) -> u64 {
        self.0 / 1_000_000
    }

    /// Microseconds since the epoch.
    pub fn as_micros(self) -> u64 {
        self.0
    }

    /// This timestamp plus `d`, saturating instead of overflowing.
    pub fn saturating_add(self, d: Duration) -> Timestamp {
        Timestamp(
            self.0
                .saturating_add(d.as_micros().min(u128::from(u64::MAX)) as u64),
        )
    }
}

/// Something that tells the time. Object-safe so the server can hold an `Arc<dyn Clock>`.
///
/// Code that needs the time takes a clock (or a `now`), so a test can drive time instead of
/// sleeping:
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// use ratelimitd_core::{Clock, ManualClock, SystemClock, Timestamp};
///
/// let manual = Arc::new(ManualClock::new(Timestamp::from_secs(1_700_000_000)));
/// let clock: Arc<dyn Clock> = manual.clone();
/// manual.advance(Duration::from_millis(1_500));
/// assert_eq!(clock.now().as_secs(), 1_700_000_001);
/// assert_eq!(clock.now().as_micros(), 1_700_000_001_500_000);
///
/// // The real clock is read the same way.
/// let real: Arc<dyn Clock> = Arc::new(SystemClock);
/// assert!(real.now() > Timestamp::from_secs(1_700_000_000));
/// ```
pub trait Clock: Send + Sync + Debug + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The real wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    // The one read of wall time (clippy.toml forbids it everywhere else).
    #[allow(clippy::disallowed_methods)]
    fn now(&self) -> Timestamp {
        // A clock before 1970 is a broken host; treating it as the epoch keeps the service answering.
        let d = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        Timestamp(d.as_micros().min(u128::from(u64::MAX)) as u64)
    }
}

/// Measures an elapsed duration on the monotonic clock (response times, store latency). Not a
/// source of `now`: decisions never depend on it.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch(Instant);

impl Stopwatch {
    /// Starts measuring.
    // The one read of the monotonic clock (clippy.toml forbids it everywhere else).
    #[allow(clippy::disallowed_methods)]
    pub fn start() -> Stopwatch {
        Stopwatch(Instant::now())
    }

    /// Time since [`Stopwatch::start`].
    pub fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}

impl Timestamp {
    /// RFC 3339 in UTC with microseconds, e.g. `2026-01-02T03:04:05.000006Z` (log timestamps).
    pub fn to_rfc3339(self) -> String {
        let secs = self.0 / 1_000_000;
        let micros = self.0 % 1_000_000;
        let (days, rem) = (secs / 86_400, secs % 86_400);
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days as i64 + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        )
    }
}

/// A clock that only moves when told to: for tests, and for the test-only
/// `RATELIMITD_TEST_MANUAL_CLOCK` setting of the binary.
#[derive(Debug, Default)]
pub struct ManualClock {
    micros: AtomicU64,
}

impl ManualClock {
    /// A manual clock showing `start`.
    pub fn new(start: Timestamp) -> ManualClock {
        ManualClock {
            micros: AtomicU64::new(start.0),
        }
    }

    /// Sets the time.
    pub fn set(&self, t: Timestamp) {
        self.micros.store(t.0, Ordering::SeqCst);
    }

    /// Moves the time forward by `d`.
    pub fn advance(&self, d: Duration) {
        let add = d.as_micros().min(u128::from(u64::MAX)) as u64;
        self.micros.fetch_add(add, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.micros.load(Ordering::SeqCst))
    }
}

/// Another clock shifted by an offset learnt from a reference clock: with `REDIS_USE_SERVER_TIME`
/// every instance tells Redis's time, so instances whose own clocks disagree still share windows
/// and buckets. The offset is measured outside the request path (see `app::server_time`), so a
/// decision costs no extra round trip; its error is half the round trip of the measurement, plus
/// what the two clocks may have drifted apart since.
///
/// A measurement taken while Redis or this process was busy (a stall, a loaded host) has a wide
/// error bound; adopting it would shorten every call's deadline for a second. So a new
/// measurement replaces the kept one only when its bound is no wider than the kept one's after
/// ageing it by [`MAX_DRIFT_PPM`]; a good measurement is kept for a few seconds, a noisy one
/// never displaces it.
#[derive(Debug)]
pub struct OffsetClock {
    base: Arc<dyn Clock>,
    offset_micros: AtomicI64,
    /// Half the base-clock span of the kept measurement; `u64::MAX` until the first one.
    uncertainty_micros: AtomicU64,
    /// When the kept measurement ended, on the base clock.
    measured_at: AtomicU64,
}

/// How fast two clocks may drift apart, in parts per million: the fastest an NTP-disciplined
/// Linux clock slews (500 ppm), so 0.5 ms per second a measurement is kept.
pub const MAX_DRIFT_PPM: u64 = 500;

impl OffsetClock {
    /// `base` with no offset yet.
    pub fn new(base: Arc<dyn Clock>) -> OffsetClock {
        OffsetClock {
            base,
            offset_micros: AtomicI64::new(0),
            uncertainty_micros: AtomicU64::new(u64::MAX),
            measured_at: AtomicU64::new(0),
        }
    }

    /// The time of the base clock (to bracket a reference reading).
    pub fn base_now(&self) -> Timestamp {
        self.base.now()
    }

    /// Adopts `reference`, read between the base clock readings `before` and `after` (the
    /// reference is taken to be the midpoint of the two), unless the kept measurement, aged to
    /// `after`, is still the tighter one.
    pub fn sync(&self, reference: Timestamp, before: Timestamp, after: Timestamp) {
        let half_span = after.0.saturating_sub(before.0) / 2;
        if self
            .uncertainty_at(after)
            .is_some_and(|kept| kept < half_span)
        {
            return;
        }
        let mid = i128::midpoint(i128::from(before.0), i128::from(after.0));
        let offset = (i128::from(reference.0) - mid).clamp(i64::MIN.into(), i64::MAX.into());
        self.offset_micros.store(offset as i64, Ordering::Relaxed);
        self.uncertainty_micros.store(half_span, Ordering::Relaxed);
        self.measured_at.store(after.0, Ordering::Relaxed);
    }

    /// How far the offset may be off now (half the span of the kept measurement, plus the drift
    /// since), or `None` before the first [`OffsetClock::sync`]: a caller that needs the
    /// reference's time (a deadline on Redis's clock) must not guess it.
    pub fn uncertainty(&self) -> Option<Duration> {
        self.uncertainty_at(self.base.now())
            .map(Duration::from_micros)
    }

    /// [`OffsetClock::uncertainty`] at base time `at`, in microseconds.
    fn uncertainty_at(&self, at: Timestamp) -> Option<u64> {
        let kept = self.uncertainty_micros.load(Ordering::Relaxed);
        if kept == u64::MAX {
            return None;
        }
        let age =
            at.0.saturating_sub(self.measured_at.load(Ordering::Relaxed));
        Some(kept.saturating_add(age.saturating_mul(MAX_DRIFT_PPM) / 1_000_000))
    }

    /// The current offset in microseconds (reference minus base).
    pub fn offset_micros(&self) -> i64 {
        self.offset_micros.load(Ordering::Relaxed)
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> Timestamp {
        let shifted = i128::from(self.base.now().0) + i128::from(self.offset_micros());
        Timestamp(shifted.clamp(0, u64::MAX.into()) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(Timestamp::from_secs(1234));
        assert_eq!(c.now().as_secs(), 1234);
        c.advance(Duration::from_millis(1500));
        assert_eq!(c.now().as_micros(), 1_235_500_000);
        c.set(Timestamp::from_secs(10));
        assert_eq!(c.now().as_secs(), 10);
    }

    #[test]
    fn offset_clock_follows_the_reference_from_the_midpoint() {
        let base = Arc::new(ManualClock::new(Timestamp::from_secs(100)));
        let c = OffsetClock::new(base.clone());
        assert_eq!(
            c.now(),
            Timestamp::from_secs(100),
            "no offset before a sync"
        );
        assert_eq!(c.uncertainty(), None, "nothing measured yet");
        // The reference said 5000 s while the base went from 100 s to 100.2 s.
        let (before, after) = (
            Timestamp::from_secs(100),
            Timestamp::from_micros(100_200_000),
        );
        c.sync(Timestamp::from_secs(5000), before, after);
        base.set(after);
        assert_eq!(c.now(), Timestamp::from_micros(5_000_100_000));
        assert_eq!(c.uncertainty(), Some(Duration::from_millis(100)));
        // A reference behind the base moves the clock back; it never goes below the epoch.
        c.sync(
            Timestamp::from_secs(0),
            Timestamp::from_secs(200),
            Timestamp::from_secs(200),
        );
        assert_eq!(c.now(), Timestamp::from_secs(0));
    }

    #[test]
    fn offset_clock_keeps_a_tight_measurement_over_a_noisy_one_until_it_ages() {
        let base = Arc::new(ManualClock::new(Timestamp::from_secs(100)));
        let c = OffsetClock::new(base.clone());
        let at = |ms: u64| Timestamp::from_micros(100_000_000 + ms * 1_000);
        // A tight reading (±0.2 ms): Redis is 1 s ahead.
        let before = Timestamp::from_micros(99_999_600);
        c.sync(Timestamp::from_micros(100_999_800), before, at(0));
        base.set(at(1_000));
        assert_eq!(c.uncertainty(), Some(Duration::from_micros(200 + 500)));
        // One second later a reading taken during a stall (±5 ms): the kept one is still tighter.
        c.sync(Timestamp::from_secs(200), at(1_000), at(1_010));
        assert_eq!(c.now(), Timestamp::from_micros(102_000_000));
        assert_eq!(c.uncertainty(), Some(Duration::from_micros(700)));
        // Ten seconds on, the kept one has aged past a ±2 ms reading, which replaces it.
        base.set(at(11_004));
        c.sync(Timestamp::from_micros(112_000_000), at(11_000), at(11_004));
        assert_eq!(c.now(), Timestamp::from_micros(112_002_000));
        assert_eq!(c.uncertainty(), Some(Duration::from_millis(2)));
    }

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(
            Timestamp::from_secs(951_782_400).to_rfc3339(),
            "2000-02-29T00:00:00.000000Z",
            "leap day"
        );
        assert_eq!(
            Timestamp::from_micros(0).to_rfc3339(),
            "1970-01-01T00:00:00.000000Z"
        );
        assert_eq!(
            Timestamp::from_micros(1_709_210_096_123_456).to_rfc3339(),
            "2024-02-29T12:34:56.123456Z"
        );
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now().as_secs() > 1_577_836_800);
    }
}
