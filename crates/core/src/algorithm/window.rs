//! The length of a limit's window, in whole seconds, and for a calendar window
//! ([`super::calendar`]) its calendar. The length cannot be zero, so the algorithms and the Redis
//! runners divide by it and take remainders without guarding: the one place a zero could arise (a
//! unit times `unit_multiplier`) builds a [`Window`] and is refused there.
//!
//! Where a window starts and ends is asked of [`Window::bounds`]: epoch-aligned multiples of the
//! length, exactly as envoyproxy/ratelimit, unless the window follows a calendar.

use std::num::NonZeroU64;
use std::time::Duration;

use super::calendar::{Bounds, Calendar};
use crate::clock::Timestamp;

/// A window length in seconds, at least one, and the calendar it follows, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Window {
    secs: NonZeroU64,
    calendar: Option<Calendar>,
}

impl Window {
    /// One second, the shortest window.
    pub const SECOND: Window = Window {
        secs: NonZeroU64::MIN,
        calendar: None,
    };

    /// An epoch-aligned window of `secs` seconds; `None` for zero.
    pub const fn from_secs(secs: u64) -> Option<Window> {
        match NonZeroU64::new(secs) {
            Some(secs) => Some(Window {
                secs,
                calendar: None,
            }),
            None => None,
        }
    }

    /// This window following `calendar`: its bounds are the calendar's, and its length stays
    /// the nominal one (Go's unit length times the multiplier) wherever a single number is
    /// shown (`RateLimit-Policy`'s `w=`, the safe key is told apart by the calendar itself).
    pub const fn with_calendar(self, calendar: Calendar) -> Window {
        Window {
            secs: self.secs,
            calendar: Some(calendar),
        }
    }

    /// The calendar this window follows; `None` for Go's epoch-aligned windows.
    pub const fn calendar(self) -> Option<Calendar> {
        self.calendar
    }

    /// The length in seconds (≥ 1): nominal for a calendar window.
    pub const fn secs(self) -> u64 {
        self.secs.get()
    }

    /// The length in microseconds, saturating (windows are at most ten years long in practice).
    pub const fn micros(self) -> u64 {
        self.secs.get().saturating_mul(1_000_000)
    }

    /// The length as a duration.
    pub const fn duration(self) -> Duration {
        Duration::from_secs(self.secs.get())
    }

    /// The window containing `now`: `now - now % length` and one length later, or the calendar's
    /// window. A calendar cannot place an instant past the year 9999; such an instant falls back
    /// to the epoch-aligned window rather than failing a request.
    pub fn bounds(self, now: Timestamp) -> Bounds {
        let now = now.as_secs();
        if let Some(bounds) = self.calendar.and_then(|c| c.bounds(now)) {
            return bounds;
        }
        let start = now - now % self.secs();
        Bounds {
            start,
            end: start.saturating_add(self.secs()),
        }
    }

    /// How long a store keeps the counter of the window containing `now`, in seconds: the
    /// window's length for an epoch window (what the Go service sets, unchanged), the time left
    /// until the calendar window ends (at least one second) for a calendar one.
    pub fn key_ttl_secs(self, now: Timestamp) -> u64 {
        match self.calendar {
            None => self.secs(),
            Some(_) => self.bounds(now).end.saturating_sub(now.as_secs()).max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Window;

    #[test]
    fn zero_is_not_a_window() {
        assert_eq!(Window::from_secs(0), None);
        let w = Window::from_secs(60).unwrap();
        assert_eq!((w.secs(), w.micros()), (60, 60_000_000));
        assert_eq!(Window::SECOND.secs(), 1);
        assert_eq!(Window::from_secs(u64::MAX).unwrap().micros(), u64::MAX);
    }
}
