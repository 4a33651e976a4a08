//! A bounded table of stat keys → counters. Request overrides, `detailed_metric` and
//! `value_to_metric` put request values into stat keys, so without a bound a caller could grow
//! memory (and every scrape) without limit — the Go service leaks exactly there. Past `max_keys`
//! distinct keys, new keys are folded into one overflow entry and the fold is counted.
//!
//! Every decision adds to a key here, and all requests of one limit add to the same key, so the
//! table is built not to make cores share memory on that path ([`ratelimitd_core::stripe`]): each key's
//! counters have one copy per stripe, and each stripe finds keys through its own small map,
//! filled from the shared table on a key's first use by that stripe. Memory per key is at most
//! 128 bytes of counters and one map entry per stripe.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use ratelimitd_core::stripe::{self, Padded};

/// The stats key that absorbs keys beyond the bound.
pub(crate) const OVERFLOW_KEY: &str = "ratelimitd_overflow";

type Map<V> = HashMap<Box<str>, V, ahash::RandomState>;

/// Key → counters.
type Keys<const N: usize> = Map<Arc<Counters<N>>>;

/// The counters of one stat key: one copy per stripe, summed when read.
#[derive(Debug)]
pub(crate) struct Counters<const N: usize> {
    stripes: Box<[Padded<[AtomicU64; N]>]>,
}

impl<const N: usize> Default for Counters<N> {
    fn default() -> Counters<N> {
        Counters::new()
    }
}

impl<const N: usize> Counters<N> {
    /// All zero.
    pub(crate) fn new() -> Counters<N> {
        Counters {
            stripes: (0..stripe::count())
                .map(|_| Padded(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    /// Adds `by[i]` to counter `i` in the calling thread's stripe; zeros are skipped so unmoved
    /// counters cost nothing.
    pub(crate) fn add(&self, by: [u64; N]) {
        let mine = &self.stripes[stripe::mine() % self.stripes.len()].0;
        for (c, v) in mine.iter().zip(by) {
            if v != 0 {
                c.fetch_add(v, Ordering::Relaxed);
            }
        }
    }

    /// Adds `by` to counter `i` in the calling thread's stripe.
    pub(crate) fn add_one(&self, i: usize, by: u64) {
        self.stripes[stripe::mine() % self.stripes.len()].0[i].fetch_add(by, Ordering::Relaxed);
    }

    /// The current values (summed over the stripes).
    pub(crate) fn values(&self) -> [u64; N] {
        std::array::from_fn(|i| {
            (self.stripes.iter())
                .map(|s| s.0[i].load(Ordering::Relaxed))
                .fold(0u64, u64::wrapping_add)
        })
    }
}

/// Stat key → counters, at most `max_keys` keys plus the overflow entry.
#[derive(Debug)]
pub(crate) struct KeyTable<const N: usize> {
    keys: RwLock<Keys<N>>,
    /// Per stripe, the keys that stripe has used (a subset of `keys`): its threads look here
    /// first, under a lock no other core takes in the common case.
    seen: Box<[Padded<Mutex<Keys<N>>>]>,
    overflow: Arc<Counters<N>>,
    folded: AtomicU64,
    max_keys: usize,
}

impl<const N: usize> KeyTable<N> {
    /// An empty table holding at most `max_keys` distinct keys.
    pub(crate) fn new(max_keys: usize) -> KeyTable<N> {
        KeyTable {
            keys: RwLock::new(Map::default()),
            seen: (0..stripe::count()).map(|_| Padded::default()).collect(),
            overflow: Arc::new(Counters::new()),
            folded: AtomicU64::new(0),
            max_keys,
        }
    }

    /// Adds `by` to `key`'s counters (the overflow entry's when the table is full).
    pub(crate) fn add(&self, key: &str, by: [u64; N]) {
        let seen = &self.seen[stripe::mine() % self.seen.len()].0;
        if let Some(c) = seen.lock().get(key) {
            c.add(by);
            return;
        }
        let c = self.get(key);
        c.add(by);
        if !Arc::ptr_eq(&c, &self.overflow) {
            seen.lock().insert(key.into(), c);
        }
    }

    /// The counters of `key`, created when there is room, else the overflow entry.
    fn get(&self, key: &str) -> Arc<Counters<N>> {
        if let Some(c) = self.keys.read().get(key) {
            return c.clone();
        }
        let mut keys = self.keys.write();
        if let Some(c) = keys.get(key) {
            return c.clone();
        }
        if keys.len() >= self.max_keys {
            self.folded.fetch_add(1, Ordering::Relaxed);
            return self.overflow.clone();
        }
        let c = Arc::new(Counters::new());
        keys.insert(key.into(), c.clone());
        c
    }

    /// How many updates went to the overflow entry because the table was full.
    pub(crate) fn folded(&self) -> u64 {
        self.folded.load(Ordering::Relaxed)
    }

    /// Every key with its values, sorted by key; the overflow entry last when it was used.
    pub(crate) fn snapshot(&self) -> Vec<(String, [u64; N])> {
        let mut out: Vec<(String, [u64; N])> = self
            .keys
            .read()
            .iter()
            .map(|(k, c)| (k.to_string(), c.values()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        if self.folded() > 0 {
            out.push((OVERFLOW_KEY.to_string(), self.overflow.values()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_past_the_bound_fold_into_overflow() {
        let t: KeyTable<1> = KeyTable::new(2);
        t.add("a", [1]);
        t.add("b", [2]);
        t.add("c", [3]);
        t.add("d", [4]);
        t.add("a", [10]);
        assert_eq!(t.folded(), 2);
        let snap = t.snapshot();
        assert_eq!(
            snap,
            vec![
                ("a".to_string(), [11]),
                ("b".to_string(), [2]),
                (OVERFLOW_KEY.to_string(), [7])
            ]
        );
    }

    #[test]
    fn counts_from_many_threads_add_up() {
        let t: Arc<KeyTable<2>> = Arc::new(KeyTable::new(10));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let t = t.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        t.add("k", [1, 2]);
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        assert_eq!(t.snapshot(), vec![("k".to_string(), [4000, 8000])]);
        assert_eq!(t.folded(), 0);
    }
}
