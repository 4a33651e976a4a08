//! Requests in flight on one connection, and since when it has had none. The request path writes
//! it (one atomic add and one subtract per request); the connection's transport reads it when its
//! idle timer fires.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::clock::Stopwatch;

/// What one connection is doing.
#[derive(Debug)]
pub struct Activity {
    open: AtomicUsize,
    /// Started when the connection was accepted.
    age: Stopwatch,
    /// Microseconds after accept at which the last request ended (0: none yet).
    idle_from_us: AtomicU64,
}

/// A request in flight: the connection is not idle while it lives.
#[derive(Debug)]
pub struct Busy(Arc<Activity>);

/// The connection's [`Activity`], as the servers receive it with each request (connect info).
#[derive(Debug, Clone)]
pub struct Tracker(pub Arc<Activity>);

impl Activity {
    /// A connection accepted now, with nothing in flight.
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            open: AtomicUsize::new(0),
            age: Stopwatch::start(),
            idle_from_us: AtomicU64::new(0),
        })
    }

    /// Marks a request in flight until the returned guard is dropped.
    pub fn begin(self: &Arc<Self>) -> Busy {
        self.open.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    /// Marks the connection busy for the rest of its life (a stream that may stay silent for
    /// long, such as a health watch, is not idleness).
    pub fn hold_open(&self) {
        self.open.fetch_add(1, Ordering::AcqRel);
    }

    /// Time since the connection was accepted.
    pub fn age(&self) -> Duration {
        self.age.elapsed()
    }

    /// `None` while a request is in flight; otherwise the time after accept at which the
    /// connection last became idle.
    pub fn idle_since(&self) -> Option<Duration> {
        if self.open.load(Ordering::Acquire) > 0 {
            return None;
        }
        Some(Duration::from_micros(
            self.idle_from_us.load(Ordering::Acquire),
        ))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let a = &self.0;
        // Written before the count drops, so whoever sees zero also sees when it became zero.
        let now = u64::try_from(a.age.elapsed().as_micros()).unwrap_or(u64::MAX);
        a.idle_from_us.fetch_max(now, Ordering::AcqRel);
        a.open.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_while_any_request_is_in_flight() {
        let a = Activity::new();
        assert_eq!(a.idle_since(), Some(Duration::ZERO));
        let (one, two) = (a.begin(), a.begin());
        drop(one);
        assert_eq!(a.idle_since(), None);
        drop(two);
        assert!(a.idle_since().is_some());
        a.hold_open();
        assert_eq!(a.idle_since(), None);
    }
}
