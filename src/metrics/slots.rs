//! The slots in use of each concurrency limit, a gauge (`ratelimitd_concurrency_slots_in_use`).
//!
//! The limiter reports, after every store decision on a concurrency limit, the holders the store
//! counted and the end of the latest lease among them ([`crate::limiter::StatsSink::slots_in_use`]).
//! The gauge shows that last count until that lease ends, then 0: a limit whose holders all
//! stopped calling (crashed proxies) does not show its slots held forever. On Redis the count is
//! the sorted set's size, so it includes every instance's holders as of this instance's last call;
//! no extra Redis call is made for the gauge.
//!
//! Keys are the limits' configured stats keys, at most `STATS_MAX_KEYS` of them; reports for
//! further keys are dropped (and counted with the other folded stats).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::clock::Timestamp;

/// The last report of one limit: slots in use, and until when (µs) that count can hold.
#[derive(Debug, Default)]
struct Slot(Mutex<(u64, u64)>);

/// Limit stats key → its last report, bounded.
#[derive(Debug)]
pub(crate) struct SlotGauges {
    keys: RwLock<HashMap<Box<str>, Arc<Slot>, ahash::RandomState>>,
    max_keys: usize,
    dropped: AtomicU64,
}

impl SlotGauges {
    /// An empty table of at most `max_keys` limits.
    pub(crate) fn new(max_keys: usize) -> SlotGauges {
        SlotGauges {
            keys: RwLock::new(HashMap::default()),
            max_keys,
            dropped: AtomicU64::new(0),
        }
    }

    /// Records that `key` had `in_use` slots held, the last of them until `until`.
    pub(crate) fn set(&self, key: &str, in_use: u64, until: Timestamp) {
        let slot = self.keys.read().get(key).cloned();
        let slot = match slot {
            Some(s) => s,
            None => {
                let mut keys = self.keys.write();
                if keys.len() >= self.max_keys && !keys.contains_key(key) {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                keys.entry(key.into()).or_default().clone()
            }
        };
        *slot.0.lock() = (in_use, until.as_micros());
    }

    /// Reports dropped because the table was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Every limit with its slots in use at `now`: the last count, or 0 once its latest lease
    /// has ended.
    pub(crate) fn snapshot(&self, now: Timestamp) -> Vec<(String, u64)> {
        let keys = self.keys.read();
        let mut out: Vec<(String, u64)> = keys
            .iter()
            .map(|(k, s)| {
                let (in_use, until) = *s.0.lock();
                (
                    k.to_string(),
                    if until > now.as_micros() { in_use } else { 0 },
                )
            })
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_holds_until_its_last_lease_ends() {
        let g = SlotGauges::new(10);
        g.set("d.k", 3, Timestamp::from_secs(100));
        assert_eq!(g.snapshot(Timestamp::from_secs(99)), [("d.k".into(), 3)]);
        g.set("d.k", 2, Timestamp::from_secs(100));
        assert_eq!(g.snapshot(Timestamp::from_secs(99)), [("d.k".into(), 2)]);
        assert_eq!(g.snapshot(Timestamp::from_secs(100)), [("d.k".into(), 0)]);
    }

    #[test]
    fn keys_past_the_bound_are_dropped_and_counted() {
        let g = SlotGauges::new(1);
        let until = Timestamp::from_secs(10);
        g.set("a", 1, until);
        g.set("b", 1, until);
        g.set("a", 2, until);
        assert_eq!(g.snapshot(Timestamp::from_secs(0)), [("a".into(), 2)]);
        assert_eq!(g.dropped(), 1);
    }
}
