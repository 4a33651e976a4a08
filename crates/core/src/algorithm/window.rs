//! The length of a limit's window, in whole seconds. It cannot be zero, so the algorithms and the
//! Redis runners divide by it and take remainders without guarding: the one place a zero could
//! arise (a unit times `unit_multiplier`) builds a [`Window`] and is refused there.

use std::num::NonZeroU64;
use std::time::Duration;

/// A window length in seconds, at least one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Window(NonZeroU64);

impl Window {
    /// One second, the shortest window.
    pub const SECOND: Window = Window(NonZeroU64::MIN);

    /// A window of `secs` seconds; `None` for zero.
    pub const fn from_secs(secs: u64) -> Option<Window> {
        match NonZeroU64::new(secs) {
            Some(n) => Some(Window(n)),
            None => None,
        }
    }

    /// The length in seconds (≥ 1).
    pub const fn secs(self) -> u64 {
        self.0.get()
    }

    /// The length in microseconds, saturating (windows are at most ten years long in practice).
    pub const fn micros(self) -> u64 {
        self.0.get().saturating_mul(1_000_000)
    }

    /// The length as a duration.
    pub const fn duration(self) -> Duration {
        Duration::from_secs(self.0.get())
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
