//! Time is a parameter: the local fallback limit, the shaping wait and the retry helper read time
//! and sleep through these seams, so tests drive them by hand instead of waiting. This is the one
//! file that reads the system clock.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// A source of monotonic time.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// A source of wall-clock time: what a `Retry-After` given as an HTTP date is measured against.
pub trait WallClock: Send + Sync + 'static {
    /// The current time of day.
    fn system_time(&self) -> SystemTime;
}

/// The system's clocks: monotonic ([`Clock`]) and wall ([`WallClock`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)] // The one place that reads the clock.
    fn now(&self) -> Instant {
        Instant::now()
    }
}

impl WallClock for SystemClock {
    #[allow(clippy::disallowed_methods)] // The one place that reads the clock.
    fn system_time(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A boxed future that completes after a wait.
pub type SleepFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How a wait is spent: `tokio::time::sleep` unless a test records the waits instead.
pub type Sleeper = Arc<dyn Fn(Duration) -> SleepFuture + Send + Sync>;

/// The default sleeper: tokio's timer.
pub fn tokio_sleeper() -> Sleeper {
    Arc::new(|d| Box::pin(tokio::time::sleep(d)))
}

/// A clock that moves only when told to, for tests of time-dependent behaviour. Its wall time
/// starts at the system's when it is made and moves with it.
#[derive(Debug)]
pub struct ManualClock {
    start: Instant,
    wall_start: SystemTime,
    offset: std::sync::Mutex<Duration>,
}

impl ManualClock {
    /// A clock at an arbitrary start instant.
    pub fn new() -> Self {
        ManualClock {
            start: SystemClock.now(),
            wall_start: SystemClock.system_time(),
            offset: std::sync::Mutex::new(Duration::ZERO),
        }
    }

    fn offset(&self) -> Duration {
        *self.offset.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        *self.offset.lock().unwrap_or_else(|p| p.into_inner()) += by;
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.start + self.offset()
    }
}

impl WallClock for ManualClock {
    fn system_time(&self) -> SystemTime {
        self.wall_start + self.offset()
    }
}
