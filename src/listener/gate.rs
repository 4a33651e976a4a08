//! The connection cap of one listener. An accept loop takes a permit before it accepts, so at
//! the cap it stops accepting: new connections wait in the kernel's backlog (and are served once
//! a connection closes) instead of costing a file descriptor each. The permit travels with the
//! connection and is returned when it closes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use ratelimitd_core::clock::Stopwatch;

/// At most one "at the cap" log line per listener in this long.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// The connection cap of one listener.
#[derive(Debug)]
pub(crate) struct Gate {
    name: &'static str,
    max: usize,
    permits: Arc<Semaphore>,
    /// Times an accept had to wait since the last log line.
    waits: AtomicU64,
    last_log: Mutex<Option<Stopwatch>>,
}

impl Gate {
    /// A cap of `max` connections on the listener called `name` (for logs).
    pub(crate) fn new(name: &'static str, max: usize) -> Gate {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        Gate {
            name,
            max,
            permits: Arc::new(Semaphore::new(max)),
            waits: AtomicU64::new(0),
            last_log: Mutex::new(None),
        }
    }

    /// The listener's name, for logs.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// The cap.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// A slot if one is free now (logged as a wait at the cap otherwise).
    pub(crate) fn try_admit(&self) -> Option<OwnedSemaphorePermit> {
        let p = self.permits.clone().try_acquire_owned().ok();
        if p.is_none() {
            self.note_full();
        }
        p
    }

    /// Waits until the listener has room for one more connection.
    pub(crate) async fn admit(&self) -> OwnedSemaphorePermit {
        if let Ok(p) = self.permits.clone().try_acquire_owned() {
            return p;
        }
        self.note_full();
        match self.permits.clone().acquire_owned().await {
            Ok(p) => p,
            // The semaphore is never closed; should it be, stop accepting.
            Err(_) => std::future::pending().await,
        }
    }

    /// Counts a wait at the cap, and logs at most once per [`LOG_EVERY`].
    fn note_full(&self) {
        let waits = self.waits.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = self.last_log.lock();
        if last.as_ref().is_some_and(|t| t.elapsed() < LOG_EVERY) {
            return;
        }
        *last = Some(Stopwatch::start());
        self.waits.store(0, Ordering::Relaxed);
        tracing::warn!(
            listener = self.name,
            max_connections = self.max,
            waits,
            "listener at its connection cap; new connections wait until one closes"
        );
    }
}
