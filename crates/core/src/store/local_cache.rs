//! The local over-limit cache (`LOCAL_CACHE_SIZE_IN_BYTES`): keys known to be over their limit until
//! their window ends are answered without asking Redis. Bounded: when full, expired entries are
//! dropped, and if it is still full a new key is simply not cached (the cache only saves round
//! trips; it never changes a decision).
//!
//! Every request of a limit that uses it looks here first, so a cache of useful size is split
//! into shards by key hash, each with its own lock and its share of the bound: requests for
//! different keys on different cores do not wait on one another.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::algorithm::Decision;
use crate::clock::Timestamp;

/// Rough memory one entry takes (key text, map slot, timestamp), to turn bytes into entries.
const BYTES_PER_ENTRY: u64 = 128;

/// Shards of a cache with room for at least `SHARDED_FROM` entries.
const SHARDS: usize = 16;
/// Below this many entries a cache is one shard (splitting a tiny bound would leave shards
/// with room for nothing).
const SHARDED_FROM: usize = 1024;

/// Over-limit keys and when they stop being over.
#[derive(Debug)]
pub struct OverLimitCache {
    shards: Box<[Mutex<Entries>]>,
    hasher: ahash::RandomState,
    /// Entries each shard may hold.
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
        (bytes > 0).then(|| {
            let total = (bytes / BYTES_PER_ENTRY).clamp(1, usize::MAX as u64) as usize;
            let shards = if total >= SHARDED_FROM { SHARDS } else { 1 };
            OverLimitCache {
                shards: (0..shards).map(|_| Mutex::default()).collect(),
                hasher: ahash::RandomState::new(),
                max_entries: total / shards,
            }
        })
    }

    fn shard(&self, key: &str) -> &Mutex<Entries> {
        let i = self.hasher.hash_one(key) as usize % self.shards.len();
        &self.shards[i]
    }

    /// When `key`'s over-limit state ends, if it is known to be over its limit at `now`.
    pub fn over_until(&self, key: &str, now: Timestamp) -> Option<Timestamp> {
        let e = self.shard(key).lock();
        e.map.get(key).copied().filter(|until| *until > now)
    }

    /// Forgets `key` (a refund made room under its limit).
    pub fn remove(&self, key: &str) {
        self.shard(key).lock().map.remove(key);
    }

    /// Learns from a backend's decision on `key`: over its limit, the key is remembered until its
    /// window ends; a refund that made room forgets it, so this instance stops answering from its
    /// cache. Every store that counts outside this process calls it the same way.
    pub fn learn(&self, key: &str, refund: bool, d: &Decision, now: Timestamp) {
        if d.over_limit {
            self.insert(key, d.expires_at, now);
        } else if refund && d.remaining > 0 {
            self.remove(key);
        }
    }

    /// Remembers that `key` is over its limit until `until`.
    pub fn insert(&self, key: &str, until: Timestamp, now: Timestamp) {
        let mut e = self.shard(key).lock();
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
        assert_eq!(c.shards[0].lock().map.len(), 2);
        assert!(OverLimitCache::with_bytes(0).is_none());
    }

    #[test]
    fn a_large_cache_is_sharded_and_still_bounded() {
        let c = OverLimitCache::with_bytes(BYTES_PER_ENTRY * 2048).unwrap();
        assert_eq!(c.shards.len(), SHARDS);
        let t = Timestamp::from_secs;
        for i in 0..10_000 {
            c.insert(&format!("k{i}"), t(60), t(0));
        }
        let held: usize = c.shards.iter().map(|s| s.lock().map.len()).sum();
        assert!(held <= 2048, "{held} entries held, bound 2048");
        assert!(held > 1900, "shards fill evenly: {held} of 2048");
        assert_eq!(c.over_until("k0", t(1)), Some(t(60)));
        c.remove("k0");
        assert_eq!(c.over_until("k0", t(1)), None);
    }
}
