//! A bounded table of stat keys → counters. Request overrides, `detailed_metric` and
//! `value_to_metric` put request values into stat keys, so without a bound a caller could grow
//! memory (and every scrape) without limit — the Go service leaks exactly there. Past `max_keys`
//! distinct keys, new keys are folded into one overflow entry and the fold is counted.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

/// The stats key that absorbs keys beyond the bound.
pub const OVERFLOW_KEY: &str = "ratelimitd_overflow";

/// The counters of one stat key.
#[derive(Debug)]
pub struct Counters<const N: usize>(
    /// One counter per stat, in the order the owner defines.
    pub [AtomicU64; N],
);

impl<const N: usize> Counters<N> {
    fn new() -> Counters<N> {
        Counters(std::array::from_fn(|_| AtomicU64::new(0)))
    }

    /// Adds `by` to counter `i`; 0 is skipped so unmoved counters cost nothing.
    pub fn add(&self, i: usize, by: u64) {
        if by != 0 {
            self.0[i].fetch_add(by, Ordering::Relaxed);
        }
    }

    /// The current values.
    pub fn values(&self) -> [u64; N] {
        std::array::from_fn(|i| self.0[i].load(Ordering::Relaxed))
    }
}

/// Stat key → counters, at most `max_keys` keys plus the overflow entry.
#[derive(Debug)]
pub struct KeyTable<const N: usize> {
    keys: RwLock<HashMap<Box<str>, Arc<Counters<N>>, ahash::RandomState>>,
    overflow: Arc<Counters<N>>,
    folded: AtomicU64,
    max_keys: usize,
}

impl<const N: usize> KeyTable<N> {
    /// An empty table holding at most `max_keys` distinct keys.
    pub fn new(max_keys: usize) -> KeyTable<N> {
        KeyTable {
            keys: RwLock::new(HashMap::default()),
            overflow: Arc::new(Counters::new()),
            folded: AtomicU64::new(0),
            max_keys,
        }
    }

    /// The counters of `key`, created when there is room, else the overflow entry.
    pub fn get(&self, key: &str) -> Arc<Counters<N>> {
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
    pub fn folded(&self) -> u64 {
        self.folded.load(Ordering::Relaxed)
    }

    /// Every key with its values, sorted by key; the overflow entry last when it was used.
    pub fn snapshot(&self) -> Vec<(String, [u64; N])> {
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
        t.get("a").add(0, 1);
        t.get("b").add(0, 2);
        t.get("c").add(0, 3);
        t.get("d").add(0, 4);
        t.get("a").add(0, 10);
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
}
