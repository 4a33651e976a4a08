//! Requests in flight on one connection, and since when it has had none. The request path writes
//! it (one atomic add and one subtract per request); the connection's transport reads it when its
//! idle timer fires. It also holds the connection's slot under its listener's cap, which a
//! connection that opens a long-lived stream trades for a slot under the streams cap.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::OwnedSemaphorePermit;

use super::Gate;
use ratelimitd_core::clock::Stopwatch;

/// A long-lived stream refused: the streams cap is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "{max} connections with long-lived streams are open, the most accepted (GRPC_MAX_STREAM_CONNECTIONS)"
)]
pub(crate) struct StreamsFull {
    /// The cap.
    pub max: usize,
}

/// The connection's slot: a permit of its listener's gate, or of the streams gate once moved.
#[derive(Debug, Default)]
struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    streams: Option<Arc<Gate>>,
    moved: bool,
}

/// What one connection is doing.
#[derive(Debug)]
pub(crate) struct Activity {
    open: AtomicUsize,
    /// Started when the connection was accepted.
    age: Stopwatch,
    /// Microseconds after accept at which the last request ended (0: none yet).
    idle_from_us: AtomicU64,
    slot: Mutex<Slot>,
}

/// A request in flight: the connection is not idle while it lives.
#[derive(Debug)]
pub(crate) struct Busy(Arc<Activity>);

/// The connection's [`Activity`], as the servers receive it with each request (connect info).
#[derive(Debug, Clone)]
pub(crate) struct Tracker(pub Arc<Activity>);

impl Activity {
    /// A connection accepted now, with nothing in flight.
    pub(crate) fn new() -> Arc<Activity> {
        Arc::new(Activity {
            open: AtomicUsize::new(0),
            age: Stopwatch::start(),
            idle_from_us: AtomicU64::new(0),
            slot: Mutex::new(Slot::default()),
        })
    }

    /// A connection accepted now under `permit`; with `streams`, a long-lived stream moves it
    /// there ([`Activity::hold_open_for_stream`]).
    pub(crate) fn with_slot(
        permit: OwnedSemaphorePermit,
        streams: Option<Arc<Gate>>,
    ) -> Arc<Activity> {
        let a = Activity::new();
        *a.slot.lock() = Slot {
            permit: Some(permit),
            streams,
            moved: false,
        };
        a
    }

    /// Returns the connection's slot (it closed).
    pub(crate) fn release(&self) {
        self.slot.lock().permit = None;
    }

    /// Marks a request in flight until the returned guard is dropped.
    pub(crate) fn begin(self: &Arc<Self>) -> Busy {
        self.open.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    /// Marks the connection busy for the rest of its life (a stream that may stay silent for
    /// long, such as a health watch, is not idleness).
    pub(crate) fn hold_open(&self) {
        self.open.fetch_add(1, Ordering::AcqRel);
    }

    /// As [`Activity::hold_open`], for a long-lived stream: the first one moves the connection
    /// from its listener's cap to the streams cap, where it stays for the rest of its life (its
    /// old slot frees at once). `Err` when the streams cap is full: the stream is refused and
    /// the connection stays as it was.
    pub(crate) fn hold_open_for_stream(&self) -> Result<(), StreamsFull> {
        let mut slot = self.slot.lock();
        if let (false, Some(streams)) = (slot.moved, &slot.streams) {
            let permit = streams
                .try_admit()
                .ok_or(StreamsFull { max: streams.max() })?;
            if slot.permit.is_some() {
                slot.permit = Some(permit);
            }
            slot.moved = true;
        }
        self.hold_open();
        Ok(())
    }

    /// Time since the connection was accepted.
    pub(crate) fn age(&self) -> Duration {
        self.age.elapsed()
    }

    /// `None` while a request is in flight; otherwise the time after accept at which the
    /// connection last became idle.
    pub(crate) fn idle_since(&self) -> Option<Duration> {
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

    #[tokio::test]
    async fn a_stream_moves_its_connection_to_the_streams_cap() {
        let (main, streams) = (Gate::new("main", 1), Arc::new(Gate::new("streams", 1)));
        let a = Activity::with_slot(main.admit().await, Some(streams.clone()));
        a.hold_open_for_stream().unwrap();
        // The main slot is free again; the streams slot is taken for good.
        let b = Activity::with_slot(main.admit().await, Some(streams.clone()));
        assert_eq!(b.hold_open_for_stream(), Err(StreamsFull { max: 1 }));
        a.hold_open_for_stream().unwrap();
        a.release();
        b.hold_open_for_stream().unwrap();
        assert_eq!(b.idle_since(), None);
    }
}
