//! The local over-limit cache (`LOCAL_CACHE_SIZE_IN_BYTES`): keys known to be over their limit until
//! their window ends are answered without asking Redis. Bounded: when full, expired entries are
//! dropped, and if it is still full a new key is simply not cached (the cache only saves round
//! trips; it never changes a decision).

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::clock::Timestamp;

/// Rough memory one entry takes (key text, map slot, timestamp), to turn bytes into entries.
const BYTES_PER_ENTRY: u64 = 128;

/// Over-limit keys and when they stop being over.
#[derive(Debug)]
pub struct OverLimitCache {
    entries: Mutex<Entries>,
    max_entries: usize,
}

/// The cached keys, and the earliest time any of them expires: until then a sweep of a full
/// cache could free nothing, so it is skipped (it runs under the lock every request takes).
#[derive(Debug, Default)]
struct Entries {
    map: HashMap<String, Timestamp, ahash::RandomState>,
    next_expiry: Option<Timestamp>,
}

impl OverLimitCache {
    /// A cache using about `bytes` of memory; `None` when `bytes` is 0 (disabled).
    pub fn with_bytes(bytes: u64) -> Option<OverLimitCache> {
        (bytes > 0).then(|| OverLimitCache {
            entries: Mutex::new(Entries::default()),
            max_entries: (bytes / BYTES_PER_ENTRY).max(1) as usize,
        })
    }

    /// When `key`'s over-limit state ends, if it is known to be over its limit at `now`.
    pub fn over_until(&self, key: &str, now: Timestamp) -> Option<Timestamp> {
        let e = self.entries.lock();
        e.map.get(key).copied().filter(|until| *until > now)
    }

    /// Forgets `key` (a refund made room under its limit).
    pub fn remove(&self, key: &str) {
        self.entries.lock().map.remove(key);
    }

    /// Remembers that `key` is over its limit until `until`.
    pub fn insert(&self, key: &str, until: Timestamp, now: Timestamp) {
        let mut e = self.entries.lock();
        if e.map.len() >= self.max_entries && !e.map.contains_key(key) {
            if e.next_expiry.is_some_and(|t| t > now) {
                return;
            }
            e.map.retain(|_, u| *u > now);
            e.next_expiry = e.map.values().min().copied();
            if e.map.len() >= self.max_entries {
                return;
            }
        }
        e.map.insert(key.to_string(), until);
        e.next_expiry = Some(e.next_expiry.map_or(until, |t| t.min(until)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_the_size_is_bounded() {
        let c = OverLimitCache::with_bytes(BYTES_PER_ENTRY * 2).unwrap();
        let t = Timestamp::from_secs;
        c.insert("a", t(60), t(0));
        c.insert("b", t(10), t(0));
        c.insert("c", t(60), t(0));
        assert_eq!(c.over_until("a", t(5)), Some(t(60)));
        assert_eq!(c.over_until("b", t(5)), Some(t(10)));
        assert_eq!(c.over_until("c", t(5)), None, "full: not cached");
        assert_eq!(c.over_until("b", t(10)), None, "expired at the window end");
        c.insert("c", t(60), t(10));
        assert_eq!(
            c.over_until("c", t(11)),
            Some(t(60)),
            "expired entries made room"
        );
        assert_eq!(c.entries.lock().map.len(), 2);
        assert!(OverLimitCache::with_bytes(0).is_none());
    }
}
