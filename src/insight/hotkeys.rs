//! Hot keys: who is hammering us right now. An [`Observer`] that feeds two fixed-memory
//! space-saving sketches ([`super::sketch`]), one ranking keys by hits and one by hits over the
//! limit (shadow-mode ones included). A key is the domain, the descriptor's entries and the name
//! of the limit it reported (only descriptors a limit applied to are counted).
//!
//! "The last minute" is two half-minute epochs of the injected clock: the current one and the one
//! before, summed when read. Counts therefore cover the last 30 to 60 seconds, and nothing older
//! than 60 seconds is ever shown. Each ranking keeps at most `HOTKEYS_CAPACITY` keys per epoch.
//!
//! Cost on the request path: a hash per descriptor, then one short `parking_lot` lock on the
//! calling thread's own stripe ([`ratelimitd_core::stripe`]): every stripe has its own pair of sketches,
//! so the worker threads of different cores never write the same memory, even when all of them
//! count the same hot key. A key already tracked costs no allocation. Reading sums a key's counts
//! (and errors) over the stripes, the usual merge of space-saving sketches: each stripe keeps
//! `capacity` keys, so the error bound is what one sketch of the whole traffic would give, and a
//! ranking shows at most `capacity` keys.
//!
//! A new key is written over the key it evicts, reusing its strings (unless a ranking being read
//! at that moment still holds the old one), so traffic of many distinct keys (one per client
//! address, say, where nearly every request brings a key the sketch does not hold) allocates
//! only for a key longer than the one it replaces, once the sketches are full. A slot keeps at
//! most 256 bytes of spare room per string, so one huge key does not pin its memory.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use parking_lot::Mutex;

use super::sketch::Sketch;
use ratelimitd_core::clock::{Clock, Timestamp};
use ratelimitd_core::limiter::{Observed, Observer, Plan};
use ratelimitd_core::stripe::{self, Padded};

/// Length of one epoch: the window shown is this to twice this long.
const EPOCH_SECS: u64 = 30;

/// A ranking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// Hits counted, allowed or not.
    Hits,
    /// Hits over the limit.
    Denials,
}

impl By {
    /// Both rankings.
    pub const ALL: [By; 2] = [By::Hits, By::Denials];

    /// `hits` or `denials` (the `?by=` value and the gauge label).
    pub fn as_str(self) -> &'static str {
        match self {
            By::Hits => "hits",
            By::Denials => "denials",
        }
    }

    /// Parses `hits` or `denials`.
    pub fn parse(s: &str) -> Option<By> {
        By::ALL.into_iter().find(|b| b.as_str() == s)
    }
}

/// A string a sketch slot holds keeps its memory for the next key up to this size; a longer one
/// is freed when a shorter key replaces it.
const RETAIN_BYTES: usize = 256;

/// Entries a slot keeps room for beyond the current key's, likewise.
const RETAIN_ENTRIES: usize = 16;

/// What a hot key is: client data, so render it escaped. Ties rank in this order.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct HotKey {
    /// The request's domain.
    pub domain: String,
    /// The descriptor's entries, outermost first.
    pub entries: Vec<(String, String)>,
    /// The name of the limit the descriptor reported (empty when unnamed).
    pub limit: String,
}

impl HotKey {
    /// Makes this key `domain`, `entries`, `limit`, reusing its memory (see [`RETAIN_BYTES`]).
    fn overwrite<'a>(
        &mut self,
        domain: &str,
        entries: impl ExactSizeIterator<Item = (&'a str, &'a str)>,
        limit: &str,
    ) {
        set(&mut self.domain, domain);
        set(&mut self.limit, limit);
        let n = entries.len();
        self.entries.truncate(n);
        if self.entries.capacity() > RETAIN_ENTRIES.max(n) {
            self.entries.shrink_to(RETAIN_ENTRIES.max(n));
        }
        for (i, (key, value)) in entries.enumerate() {
            match self.entries.get_mut(i) {
                Some((k, v)) => {
                    set(k, key);
                    set(v, value);
                }
                None => self.entries.push((key.to_owned(), value.to_owned())),
            }
        }
    }
}

/// `*dst = src`, in `dst`'s memory unless that is more than [`RETAIN_BYTES`] beyond need.
fn set(dst: &mut String, src: &str) {
    if dst.capacity() > RETAIN_BYTES.max(src.len()) {
        *dst = src.to_owned();
    } else {
        dst.clear();
        dst.push_str(src);
    }
}

/// One row of a ranking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranked {
    /// The key.
    pub key: Arc<HotKey>,
    /// Estimated count over the window (at most `error` above the true count).
    pub count: u64,
    /// How much `count` may overstate.
    pub error: u64,
}

#[derive(Debug)]
struct Epochs {
    current: Sketch<Arc<HotKey>>,
    previous: Sketch<Arc<HotKey>>,
}

#[derive(Debug)]
struct State {
    epoch: u64,
    by: [Epochs; 2],
}

impl State {
    /// Moves to the epoch of `now`; a clock that went back keeps counting in the current one.
    fn roll(&mut self, now: Timestamp) {
        let epoch = now.as_secs() / EPOCH_SECS;
        if epoch <= self.epoch {
            return;
        }
        for e in &mut self.by {
            if epoch == self.epoch + 1 {
                std::mem::swap(&mut e.current, &mut e.previous);
            } else {
                e.previous.clear();
            }
            e.current.clear();
        }
        self.epoch = epoch;
    }
}

/// The hot-key rankings. Share it as `Arc<HotKeys>`; register it as an observer.
#[derive(Debug)]
pub struct HotKeys {
    /// One per stripe.
    stripes: Box<[Padded<Mutex<State>>]>,
    capacity: usize,
    /// Hashes the keys (ahash: a per-process random seed, and a few times cheaper than `SipHash`
    /// on the request path).
    seed: ahash::RandomState,
    clock: Arc<dyn Clock>,
}

impl HotKeys {
    /// Rankings of at most `capacity` keys each (per epoch), read at `clock`'s time.
    pub fn new(capacity: usize, clock: Arc<dyn Clock>) -> HotKeys {
        let capacity = capacity.max(1);
        let epochs = || Epochs {
            current: Sketch::new(capacity),
            previous: Sketch::new(capacity),
        };
        let epoch = clock.now().as_secs() / EPOCH_SECS;
        HotKeys {
            stripes: (0..stripe::count())
                .map(|_| {
                    Padded(Mutex::new(State {
                        epoch,
                        by: [epochs(), epochs()],
                    }))
                })
                .collect(),
            capacity,
            seed: ahash::RandomState::new(),
            clock,
        }
    }

    /// The `limit` hottest keys of `by` now, hottest first: the current and the previous epoch
    /// summed (30 to 60 seconds).
    pub fn top(&self, by: By, limit: usize) -> Vec<Ranked> {
        self.ranked(by, limit, |_| 1.0)
    }

    /// The `limit` hottest keys of `by` over a rolling half minute, hottest first: the current
    /// epoch plus the previous one weighted by how much of it the last 30 seconds still cover
    /// (the sliding-window estimate). Unlike [`HotKeys::top`] it does not drop by half when an
    /// epoch ends, so a steady key keeps a steady count and rank.
    pub fn top_rolling(&self, by: By, limit: usize) -> Vec<Ranked> {
        self.ranked(by, limit, |now| {
            let epoch_micros = EPOCH_SECS * 1_000_000;
            let into = now.as_micros() % epoch_micros;
            (epoch_micros - into) as f64 / epoch_micros as f64
        })
    }

    /// Sums every stripe's counts of the current epoch and of the previous one (times
    /// `previous_weight(now)`), sorted.
    fn ranked(
        &self,
        by: By,
        limit: usize,
        previous_weight: impl Fn(Timestamp) -> f64,
    ) -> Vec<Ranked> {
        let mut rows: Vec<Ranked> = Vec::new();
        let now = self.clock.now();
        let weight = previous_weight(now).clamp(0.0, 1.0);
        // A key's hits may be spread over every stripe and both epochs: sum them all.
        let mut at: HashMap<u64, usize> = HashMap::with_capacity(self.capacity);
        for stripe in &self.stripes {
            let mut state = stripe.0.lock();
            state.roll(now);
            let e = &state.by[by as usize];
            let current = e.current.slots().iter().map(|s| (s, 1.0));
            for (slot, w) in current.chain(e.previous.slots().iter().map(|s| (s, weight))) {
                // Exact for weight 1; a weighted count is rounded down (below 2^53 it is exact).
                let scale = |n: u64| if w >= 1.0 { n } else { (n as f64 * w) as u64 };
                let (count, error) = (scale(slot.count), scale(slot.error));
                match at.get(&slot.hash) {
                    Some(&i) => {
                        rows[i].count = rows[i].count.saturating_add(count);
                        rows[i].error = rows[i].error.saturating_add(error);
                    }
                    None => {
                        at.insert(slot.hash, rows.len());
                        rows.push(Ranked {
                            key: slot.key.clone(),
                            count,
                            error,
                        });
                    }
                }
            }
        }
        rows.retain(|r| r.count > 0);
        rows.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        rows.truncate(limit.min(self.capacity));
        rows
    }

    /// Keys held in memory right now, both rankings and both epochs of every stripe (bounded by
    /// four times the capacity per stripe).
    pub fn tracked(&self) -> usize {
        (self.stripes.iter())
            .map(|stripe| {
                let state = stripe.0.lock();
                (state.by.iter())
                    .map(|e| e.current.len() + e.previous.len())
                    .sum::<usize>()
            })
            .sum()
    }
}

impl Observer for HotKeys {
    fn observe(&self, d: &Observed<'_>) {
        for (settled, descriptor) in d.settled.iter().zip(&d.request.descriptors) {
            let (Plan::Limited(plan), Some((limit, _, verdict))) = (settled.plan, settled.reported)
            else {
                continue;
            };
            if plan.refund || plan.hits == 0 {
                continue;
            }
            let mut h = super::key_hasher(&self.seed, &d.request.domain, &descriptor.entries);
            limit.name.hash(&mut h);
            let hash = h.finish();
            let mut state = self.stripes[stripe::mine() % self.stripes.len()].0.lock();
            state.roll(d.now);
            // Written only when the key enters a sketch, over the key it evicts.
            let fill = |key: &mut Arc<HotKey>| {
                let entries = descriptor.entries.iter();
                let entries = entries.map(|e| (e.key.as_str(), e.value.as_str()));
                match Arc::get_mut(key) {
                    Some(key) => key.overwrite(&d.request.domain, entries, &limit.name),
                    // A ranking being read still holds the evicted key: leave it that one.
                    None => {
                        let mut fresh = HotKey::default();
                        fresh.overwrite(&d.request.domain, entries, &limit.name);
                        *key = Arc::new(fresh);
                    }
                }
            };
            state.by[By::Hits as usize]
                .current
                .add(hash, plan.hits, fill);
            if verdict.over_limit {
                state.by[By::Denials as usize]
                    .current
                    .add(hash, plan.hits, fill);
            }
        }
    }
}

#[cfg(test)]
mod tests;
