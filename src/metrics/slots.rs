//! The slots in use of each concurrency limit, a gauge (`ratelimitd_concurrency_slots_in_use`).
//!
//! The limiter reports, after every store decision on a concurrency limit, the holders the store
//! counted and the end of the latest lease among them ([`ratelimitd_core::limiter::StatsSink::slots_in_use`]).
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

use ratelimitd_core::clock::Timestamp;

/// The last report of one limit: its value (slots in use by default), and until when (µs)
/// that value can hold.
#[derive(Debug, Default)]
struct Slot<T>(Mutex<(T, u64)>);

/// Limit stats key → its last report, bounded. The value is the slots in use of a concurrency
/// limit by default; the usage gauge of limits with priority classes keeps its own value
/// (`metrics::usage`) under the same rules.
#[derive(Debug)]
pub(crate) struct SlotGauges<T = u64> {
    keys: RwLock<HashMap<Box<str>, Arc<Slot<T>>, ahash::RandomState>>,
    max_keys: usize,
    dropped: AtomicU64,
}

impl<T: Clone + Default> SlotGauges<T> {
    /// An empty table of at most `max_keys` limits.
    pub(crate) fn new(max_keys: usize) -> SlotGauges<T> {
        SlotGauges {
            keys: RwLock::new(HashMap::default()),
            max_keys,
            dropped: AtomicU64::new(0),
        }
    }

    /// Records that `key` had `value` (e.g. slots held), which holds until `until`.
    pub(crate) fn set(&self, key: &str, value: T, until: Timestamp) {
        let slot = self.keys.read().get(key).cloned();
        let slot = match slot {
            Some(s) => s,
            None => {
                let mut keys = self.keys.write();
                if keys.len() >= self.max_keys && !keys.contains_key(key) {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                keys.entry(key.into())
                    .or_insert_with(|| Arc::new(Slot(Mutex::new((T::default(), 0)))))
                    .clone()
            }
        };
        *slot.0.lock() = (value, until.as_micros());
    }

    /// Reports dropped because the table was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Every limit with its last value and until when it holds, sorted by key.
    pub(crate) fn latest(&self) -> Vec<(String, T, Timestamp)> {
        let keys = self.keys.read();
        let mut out: Vec<(String, T, Timestamp)> = keys
            .iter()
            .map(|(k, s)| {
                let (value, until) = s.0.lock().clone();
                (k.to_string(), value, Timestamp::from_micros(until))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

impl SlotGauges {
    /// Every limit with its slots in use at `now`: the last count, or 0 once its latest lease
    /// has ended.
    pub(crate) fn snapshot(&self, now: Timestamp) -> Vec<(String, u64)> {
        self.latest()
            .into_iter()
            .map(|(k, in_use, until)| (k, if until > now { in_use } else { 0 }))
            .collect()
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
