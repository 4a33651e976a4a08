//! What the leases did, counted for the `ratelimitd_lease_*` metrics: read at export time, so
//! the request path only adds to three atomics.

use std::sync::atomic::{AtomicU64, Ordering};

/// Running totals of one store's leases.
#[derive(Debug, Default)]
pub struct LeaseCounters {
    taken: AtomicU64,
    granted: AtomicU64,
    served: AtomicU64,
    returned: AtomicU64,
}

/// A reading of [`LeaseCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseTotals {
    /// Reservations that granted hits.
    pub taken: u64,
    /// Hits those reservations granted.
    pub granted: u64,
    /// Hits answered from a lease without a Redis call.
    pub served: u64,
    /// Unspent hits given back to Redis (reload, shutdown, a changed limit).
    pub returned: u64,
}

impl LeaseCounters {
    /// One reservation granted `hits`.
    pub fn taken(&self, hits: u64) {
        self.taken.fetch_add(1, Ordering::Relaxed);
        self.granted.fetch_add(hits, Ordering::Relaxed);
    }

    /// `hits` were answered from a lease.
    pub fn served(&self, hits: u64) {
        self.served.fetch_add(hits, Ordering::Relaxed);
    }

    /// `hits` went back to Redis.
    pub fn returned(&self, hits: u64) {
        self.returned.fetch_add(hits, Ordering::Relaxed);
    }

    /// The totals so far.
    pub fn read(&self) -> LeaseTotals {
        LeaseTotals {
            taken: self.taken.load(Ordering::Relaxed),
            granted: self.granted.load(Ordering::Relaxed),
            served: self.served.load(Ordering::Relaxed),
            returned: self.returned.load(Ordering::Relaxed),
        }
    }
}
