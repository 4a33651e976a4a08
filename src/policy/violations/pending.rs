//! The violations waiting for the writer, aggregated: under a deny storm the same client breaks
//! the same limit thousands of times a second, and one record per denial would cost the request
//! path an allocation and a queue slot each, and the database a row each. [`Pending`] keeps one
//! record per (domain, descriptor entries, limit name, shadow, class, soft) instead: a repeat only bumps its
//! counters, found by a hash computed from the borrowed request (no allocation). The map is
//! bounded (`VIOLATIONS_QUEUE_SIZE` keys) and sharded so that concurrent requests rarely share a
//! lock; the writer swaps every shard out at once per batch.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};

use ahash::RandomState;
use parking_lot::Mutex;

use super::Violation;
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::limiter::request::Entry;

/// Locks the map is split into: enough that request tasks on a few cores seldom meet.
const SHARDS: usize = 8;

/// What identifies a violation, borrowed from the request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key<'a> {
    /// The request's domain.
    pub domain: &'a str,
    /// The descriptor's entries.
    pub entries: &'a [Entry],
    /// The reported limit's name.
    pub limit_name: &'a str,
    /// True when it was not enforced.
    pub shadow: bool,
    /// The request's class of a limit with priorities (a name from the config).
    pub class: Option<&'a str>,
    /// True for a denial by the soft zone's draw.
    pub soft: bool,
}

impl Key<'_> {
    fn hash_with(&self, state: &RandomState) -> u64 {
        let mut h = state.build_hasher();
        self.domain.hash(&mut h);
        for e in self.entries {
            e.key.hash(&mut h);
            e.value.hash(&mut h);
        }
        self.limit_name.hash(&mut h);
        self.shadow.hash(&mut h);
        self.class.hash(&mut h);
        self.soft.hash(&mut h);
        h.finish()
    }

    /// True when `v` is this key's record (a hash collision is not).
    fn is(&self, v: &Violation) -> bool {
        let same_entries = v.descriptor.len() == self.entries.len()
            && (v.descriptor.iter().zip(self.entries))
                .all(|(a, b)| a.key == b.key && a.value == b.value);
        v.domain == self.domain
            && v.limit_name == self.limit_name
            && v.shadow == self.shadow
            && v.class.as_deref() == self.class
            && v.soft == self.soft
            && same_entries
    }
}

/// One more denial of a key: what changes in its record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Repeat {
    /// The hits it asked for.
    pub hits: u64,
    /// The counter after them, when one was read.
    pub usage: Option<u64>,
    /// When.
    pub at: Timestamp,
}

/// The bounded, sharded map of pending violations.
#[derive(Debug)]
pub(crate) struct Pending {
    shards: Box<[Mutex<ahash::HashMap<u64, Violation>>]>,
    hasher: RandomState,
    /// Keys held across every shard (at most `capacity`).
    len: AtomicUsize,
    capacity: usize,
}

impl Pending {
    /// A map holding at most `capacity` distinct keys between two writes.
    pub(crate) fn new(capacity: usize) -> Pending {
        Pending {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
            len: AtomicUsize::new(0),
            capacity,
        }
    }

    /// Counts `repeat` on `key`'s record, or adds the record `first` builds when the key is new.
    /// `false` when it was dropped: the map is full, or another key has the same hash.
    pub(crate) fn note(
        &self,
        key: Key<'_>,
        repeat: Repeat,
        first: impl FnOnce() -> Violation,
    ) -> bool {
        let hash = key.hash_with(&self.hasher);
        let mut shard = self.shards[hash as usize % SHARDS].lock();
        if let Some(v) = shard.get_mut(&hash) {
            if !key.is(v) {
                return false;
            }
            v.requests = v.requests.saturating_add(1);
            v.hits = v.hits.saturating_add(repeat.hits);
            v.usage = repeat.usage.or(v.usage);
            v.last_at = v.last_at.max(repeat.at);
            return true;
        }
        if self.len.fetch_add(1, Ordering::Relaxed) >= self.capacity {
            self.len.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        shard.insert(hash, first());
        true
    }

    /// Every pending record, oldest first; the map is empty afterwards.
    pub(crate) fn take(&self) -> Vec<Violation> {
        let mut all = Vec::new();
        for shard in &self.shards {
            let taken = std::mem::take(&mut *shard.lock());
            self.len.fetch_sub(taken.len(), Ordering::Relaxed);
            all.extend(taken.into_values());
        }
        all.sort_by_key(|v| v.at);
        all
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::policy::model::PathEntry;

    fn entry(value: &str) -> Vec<Entry> {
        vec![Entry {
            key: "client_key".into(),
            value: value.into(),
        }]
    }

    fn record(entries: &[Entry], hits: u64, at: u64) -> Violation {
        Violation {
            domain: "api".into(),
            descriptor: (entries.iter())
                .map(|e| PathEntry {
                    key: e.key.clone(),
                    value: e.value.clone(),
                })
                .collect(),
            client_key: Some(entries[0].value.clone()),
            limit_name: "per_client".into(),
            requests_per_unit: 2,
            unit: "MINUTE".into(),
            hits,
            usage: Some(3),
            requests: 1,
            source: "store".into(),
            shadow: false,
            class: None,
            soft: false,
            at: Timestamp::from_secs(at),
            last_at: Timestamp::from_secs(at),
            instance: Arc::from("t"),
        }
    }

    fn deny(p: &Pending, entries: &[Entry], hits: u64, usage: u64, at: u64) -> bool {
        let key = Key {
            domain: "api",
            entries,
            limit_name: "per_client",
            shadow: false,
            class: None,
            soft: false,
        };
        let at_t = Timestamp::from_secs(at);
        let repeat = Repeat {
            hits,
            usage: Some(usage),
            at: at_t,
        };
        p.note(key, repeat, || record(entries, hits, at))
    }

    #[test]
    fn repeats_bump_one_record_and_new_keys_beyond_capacity_are_dropped() {
        let p = Pending::new(2);
        let (a, b, c) = (entry("a"), entry("b"), entry("c"));
        assert!(deny(&p, &a, 1, 3, 10));
        assert!(deny(&p, &a, 2, 5, 11));
        assert!(deny(&p, &a, 1, 6, 12));
        assert!(deny(&p, &b, 1, 3, 12));
        assert!(!deny(&p, &c, 1, 3, 12), "a third key does not fit");
        assert!(deny(&p, &b, 1, 4, 13), "a known key still counts when full");
        let taken = p.take();
        assert_eq!(taken.len(), 2);
        let r = &taken[0];
        assert_eq!(r.client_key.as_deref(), Some("a"));
        assert_eq!((r.requests, r.hits, r.usage), (3, 4, Some(6)));
        assert_eq!(
            (r.at, r.last_at),
            (Timestamp::from_secs(10), Timestamp::from_secs(12))
        );
        assert_eq!((taken[1].requests, taken[1].hits), (2, 2));
        // Taking empties the map and frees its room.
        assert!(p.take().is_empty());
        assert!(deny(&p, &c, 1, 3, 14));
        assert_eq!(p.take()[0].requests, 1);
    }
}
