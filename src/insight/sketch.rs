//! A space-saving heavy-hitters sketch: at most `capacity` keys, each with an estimated count and
//! the most that estimate can be over. A key already tracked costs one hash lookup and a sift in
//! a min-heap (no allocation); a new key replaces the least counted one and inherits its count as
//! error, so memory stays at `capacity` entries however many distinct keys arrive, and every key
//! whose true count is above total/capacity is kept. A new key is written over the one it
//! replaces, in place: traffic of many distinct keys, where nearly every key is new, reuses the
//! slots' memory instead of allocating a key and freeing another on every add.
//!
//! One [`Sketch::add`] counts at most [`MAX_WEIGHT`], so a few requests claiming huge hits cannot
//! lift their keys past the real top keys (or saturate a count): a key's count grows with its
//! requests, each weighing at most what one request can use of a limit.
//!
//! Keys are found by a 64-bit hash the caller computes (with a per-process random seed), so the
//! key itself is only written when it enters the sketch.

use std::collections::HashMap;

/// The most one [`Sketch::add`] counts: a limit's capacity + 1 for the largest limit
/// (`requests_per_unit` is a `u32`), which is already the most hits the limiter lets reach a
/// limit ([`ratelimitd_core::limiter::hits`]).
pub(crate) const MAX_WEIGHT: u64 = 1 << 32;

/// One tracked key.
#[derive(Debug, Clone)]
pub(crate) struct Slot<K> {
    /// The key's hash.
    pub hash: u64,
    /// The key.
    pub key: K,
    /// Estimated count: the true count plus at most `error`.
    pub count: u64,
    /// The count the key inherited when it replaced another.
    pub error: u64,
}

/// The sketch. `capacity` is at least 1.
#[derive(Debug)]
pub(crate) struct Sketch<K> {
    capacity: usize,
    slots: Vec<Slot<K>>,
    /// Slot indices as a binary min-heap on `count`.
    heap: Vec<usize>,
    /// `pos[slot]` is the slot's place in `heap`.
    pos: Vec<usize>,
    /// Hash → slot. The hashes are already random, but ahash on a `u64` costs a few
    /// instructions where the standard `SipHash` costs a hundred.
    index: HashMap<u64, usize, ahash::RandomState>,
}

impl<K> Sketch<K> {
    /// An empty sketch of `capacity` keys (1 when 0 is given).
    pub(crate) fn new(capacity: usize) -> Sketch<K> {
        let capacity = capacity.max(1);
        Sketch {
            capacity,
            slots: Vec::with_capacity(capacity),
            heap: Vec::with_capacity(capacity),
            pos: Vec::with_capacity(capacity),
            index: HashMap::with_capacity_and_hasher(capacity, ahash::RandomState::new()),
        }
    }

    /// Adds `weight` (at most [`MAX_WEIGHT`]) to the key of `hash`. Only when that key is not
    /// tracked yet, `fill` writes it into the slot it takes: over the key that slot held (or over
    /// `K::default()`), so `fill` must replace all of it and may reuse its memory.
    pub(crate) fn add(&mut self, hash: u64, weight: u64, fill: impl FnOnce(&mut K))
    where
        K: Default,
    {
        let weight = weight.min(MAX_WEIGHT);
        if let Some(&s) = self.index.get(&hash) {
            self.slots[s].count = self.slots[s].count.saturating_add(weight);
            self.sift_down(self.pos[s]);
            return;
        }
        if self.slots.len() < self.capacity {
            let s = self.slots.len();
            let mut key = K::default();
            fill(&mut key);
            self.slots.push(Slot {
                hash,
                key,
                count: weight,
                error: 0,
            });
            self.heap.push(s);
            self.pos.push(s);
            self.index.insert(hash, s);
            self.sift_up(s);
            return;
        }
        // Full: the least counted key makes room, and its count bounds the newcomer's error.
        let s = self.heap[0];
        let min = self.slots[s].count;
        let slot = &mut self.slots[s];
        self.index.remove(&slot.hash);
        fill(&mut slot.key);
        slot.hash = hash;
        slot.count = min.saturating_add(weight);
        slot.error = min;
        self.index.insert(hash, s);
        self.sift_down(0);
    }

    /// Every tracked key, in no order.
    pub(crate) fn slots(&self) -> &[Slot<K>] {
        &self.slots
    }

    /// Tracked keys (never above the capacity).
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when nothing is tracked.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Forgets every key, keeping the memory for reuse.
    pub(crate) fn clear(&mut self) {
        self.slots.clear();
        self.heap.clear();
        self.pos.clear();
        self.index.clear();
    }

    fn count_at(&self, i: usize) -> u64 {
        self.slots[self.heap[i]].count
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a]] = a;
        self.pos[self.heap[b]] = b;
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.count_at(parent) <= self.count_at(i) {
                break;
            }
            self.swap(parent, i);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            if l < n && self.count_at(l) < self.count_at(least) {
                least = l;
            }
            if r < n && self.count_at(r) < self.count_at(least) {
                least = r;
            }
            if least == i {
                return;
            }
            self.swap(i, least);
            i = least;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sketch's slots as (key, count, error), in key order.
    fn sorted<K: Ord + Copy>(s: &Sketch<K>) -> Vec<(K, u64, u64)> {
        let mut got: Vec<_> = (s.slots().iter())
            .map(|x| (x.key, x.count, x.error))
            .collect();
        got.sort_unstable();
        got
    }

    #[test]
    fn counts_exactly_while_under_capacity() {
        let mut s = Sketch::new(4);
        for (h, w) in [(1, 3), (2, 1), (1, 2), (3, 7)] {
            s.add(h, w, |k| *k = h);
        }
        let got = sorted(&s);
        assert_eq!(got, vec![(1, 5, 0), (2, 1, 0), (3, 7, 0)]);
    }

    #[test]
    fn one_add_counts_at_most_max_weight() {
        let mut s = Sketch::new(2);
        s.add(1, u64::MAX, |k| *k = "huge");
        s.add(1, u64::MAX, |k| *k = "huge");
        s.add(2, 3, |k| *k = "real");
        s.add(3, u64::MAX, |k| *k = "new");
        let count = |k| s.slots().iter().find(|x| x.key == k).map(|x| x.count);
        assert_eq!(count("huge"), Some(2 * MAX_WEIGHT));
        // The newcomer replaced the least counted key and added one capped weight.
        assert_eq!(count("new"), Some(3 + MAX_WEIGHT));
    }

    #[test]
    fn a_new_key_replaces_the_least_counted_and_inherits_its_count_as_error() {
        let mut s = Sketch::new(2);
        s.add(1, 5, |k| *k = "a");
        s.add(2, 2, |k| *k = "b");
        s.add(3, 1, |k| *k = "c");
        let got = sorted(&s);
        assert_eq!(got, vec![("a", 5, 0), ("c", 3, 2)]);
        s.clear();
        assert!(s.is_empty());
    }

    #[test]
    fn the_heap_keeps_its_order_under_many_updates() {
        let mut s = Sketch::new(16);
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..10_000 {
            let h = rng.u64(0..64);
            s.add(h, rng.u64(1..4), |k| *k = h);
            let min = s.slots().iter().map(|x| x.count).min().unwrap();
            assert_eq!(s.count_at(0), min);
            assert!(s.len() <= 16 && s.index.len() == s.len());
        }
    }
}
