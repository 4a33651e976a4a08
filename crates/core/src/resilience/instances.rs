//! How many ratelimitd instances share the store, as last seen through it: every instance
//! announces itself once a second (the heartbeat in `app::tasks`, a sorted set in Redis scored by
//! the time it was last seen) and reads back how many announced themselves recently. While Redis
//! is down the last count stays, so the local fallback divides each limit among the instances
//! that were alive before the outage.

use std::sync::atomic::{AtomicU64, Ordering};

/// The live instance count (at least 1: this one).
#[derive(Debug)]
pub struct Instances {
    live: AtomicU64,
}

impl Default for Instances {
    fn default() -> Instances {
        Instances {
            live: AtomicU64::new(1),
        }
    }
}

impl Instances {
    /// Records the count the store reported (this instance always counts).
    pub fn seen(&self, live: u64) {
        self.live.store(live.max(1), Ordering::Relaxed);
    }

    /// The last count seen.
    pub fn live(&self) -> u64 {
        self.live.load(Ordering::Relaxed)
    }
}
