//! What a server does when ratelimitd cannot answer (unreachable, timed out, `503`, a malformed
//! answer): let requests through, refuse them, or limit them with a small in-process fixed window
//! per key until ratelimitd is back. The local window is per process, so a fleet of N servers admits
//! up to N times its limit: it bounds an outage, it does not replace the global limit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::clock::{Clock, SystemClock};

/// The policy when ratelimitd cannot answer.
#[derive(Clone, Debug, Default)]
pub enum FailurePolicy {
    /// Let the request through (availability over the limit): the default.
    #[default]
    Open,
    /// Refuse it with `503 Service Unavailable` and `Retry-After: 1`.
    Closed,
    /// Count it against a local per-key limit; over it, `429` with the local window's headers.
    Local(Arc<LocalLimit>),
}

/// What the local limit says about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalVerdict {
    /// Within the limit; `remaining` hits are left in this window.
    Allowed {
        /// Hits left in the window.
        remaining: u64,
    },
    /// Over the limit until the window ends.
    Denied {
        /// Time until the window ends, rounded up to whole seconds.
        retry_after: Duration,
    },
}

/// A fixed-window limit per key, in process memory: at most `max_keys` keys, plus one overflow
/// window that every further key shares while all tracked windows are still current.
pub struct LocalLimit {
    limit: u64,
    window: Duration,
    max_keys: usize,
    clock: Arc<dyn Clock>,
    windows: Mutex<HashMap<String, Window>>,
}

#[derive(Clone, Copy)]
struct Window {
    start: Instant,
    used: u64,
}

/// The key every request shares once the table is full.
const OVERFLOW: &str = "";

impl LocalLimit {
    /// `limit` hits per `window` per key, on the system clock, at most 10 000 keys.
    pub fn new(limit: u64, window: Duration) -> Self {
        LocalLimit {
            limit,
            window: window.max(Duration::from_millis(1)),
            max_keys: 10_000,
            clock: Arc::new(SystemClock),
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Tracks at most `max_keys` keys (at least 1).
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys.max(1);
        self
    }

    /// Reads time from `clock` (tests pass a manual one).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The limit in hits per window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window's length.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Counts `cost` hits for `key` if they fit in its current window.
    pub fn check(&self, key: &str, cost: u64) -> LocalVerdict {
        let now = self.clock.now();
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if !windows.contains_key(key) && windows.len() >= self.max_keys {
            let window = self.window;
            windows.retain(|_, w| now.saturating_duration_since(w.start) < window);
        }
        let key = if windows.contains_key(key) || windows.len() < self.max_keys {
            key
        } else {
            OVERFLOW
        };
        let w = windows.entry(key.to_owned()).or_insert(Window {
            start: now,
            used: 0,
        });
        if now.saturating_duration_since(w.start) >= self.window {
            *w = Window {
                start: now,
                used: 0,
            };
        }
        match w.used.checked_add(cost) {
            Some(used) if used <= self.limit => {
                w.used = used;
                LocalVerdict::Allowed {
                    remaining: self.limit - used,
                }
            }
            _ => {
                let left = (w.start + self.window).saturating_duration_since(now);
                LocalVerdict::Denied {
                    retry_after: Duration::from_secs(
                        left.as_secs() + u64::from(left.subsec_nanos() > 0),
                    )
                    .max(Duration::from_secs(1)),
                }
            }
        }
    }

    /// How many keys are tracked now.
    pub fn tracked_keys(&self) -> usize {
        self.windows.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

impl std::fmt::Debug for LocalLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLimit")
            .field("limit", &self.limit)
            .field("window", &self.window)
            .field("max_keys", &self.max_keys)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn limit(clock: &Arc<ManualClock>) -> LocalLimit {
        LocalLimit::new(2, Duration::from_secs(10))
            .max_keys(3)
            .clock(clock.clone())
    }

    #[test]
    fn a_key_gets_its_limit_per_window_then_waits_for_the_next() {
        let clock = Arc::new(ManualClock::new());
        let l = limit(&clock);
        assert_eq!(l.check("a", 1), LocalVerdict::Allowed { remaining: 1 });
        assert_eq!(l.check("a", 1), LocalVerdict::Allowed { remaining: 0 });
        clock.advance(Duration::from_millis(2_500));
        assert_eq!(
            l.check("a", 1),
            LocalVerdict::Denied {
                retry_after: Duration::from_secs(8)
            },
            "7.5 s left, rounded up"
        );
        assert_eq!(
            l.check("b", 1),
            LocalVerdict::Allowed { remaining: 1 },
            "keys are apart"
        );
        assert!(
            matches!(l.check("b", 3), LocalVerdict::Denied { .. }),
            "a cost over the limit"
        );
        clock.advance(Duration::from_millis(7_500));
        assert_eq!(l.check("a", 1), LocalVerdict::Allowed { remaining: 1 });
    }

    #[test]
    fn memory_stays_bounded_under_many_keys() {
        let clock = Arc::new(ManualClock::new());
        let l = limit(&clock);
        for i in 0..1_000 {
            let _ = l.check(&format!("k{i}"), 1);
        }
        assert_eq!(
            l.tracked_keys(),
            4,
            "three keys and the shared overflow window"
        );
        // The overflow window is itself limited.
        assert!(matches!(l.check("new", 1), LocalVerdict::Denied { .. }));
        // Once the windows expire, new keys get their own again.
        clock.advance(Duration::from_secs(10));
        assert_eq!(l.check("new", 1), LocalVerdict::Allowed { remaining: 1 });
    }
}
