//! Time is a parameter: the local fallback limit and the shaping wait read time and sleep through
//! these two seams, so tests drive them by hand instead of waiting. This is the one file that reads
//! the system clock.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A source of monotonic time.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// The system's monotonic clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)] // The one place that reads the clock.
    fn now(&self) -> Instant {
        Instant::now()
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

/// A clock that moves only when told to, for tests of time-dependent behaviour.
#[derive(Debug)]
pub struct ManualClock {
    start: Instant,
    offset: std::sync::Mutex<Duration>,
}

impl ManualClock {
    /// A clock at an arbitrary start instant.
    pub fn new() -> Self {
        ManualClock {
            start: SystemClock.now(),
            offset: std::sync::Mutex::new(Duration::ZERO),
        }
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
        self.start + *self.offset.lock().unwrap_or_else(|p| p.into_inner())
    }
}
