//! What this instance publishes: the window counts of its recently active keys, at most
//! `FLEET_MAX_KEYS` of them. Each key holds one numbered slot of the gossip state (`s<slot>`),
//! so the state a peer keeps about this instance never exceeds the cap and a key dropped from it
//! leaves no tombstone behind: the slot is simply reused or cleared. When a new key arrives at
//! the cap, the least recently used key is dropped (and counted): from then on its hits are
//! counted here only, so the fleet may admit that key's count on this instance once more.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};

use lru::LruCache;
use parking_lot::Mutex;

use ratelimitd_core::algorithm::Window;
use ratelimitd_core::algorithm::sliding_window::{SlidingWindowState, roll};
use ratelimitd_core::clock::Timestamp;

/// One key's published counts.
#[derive(Debug, Clone, Copy)]
struct Entry {
    slot: u32,
    window: Window,
    counts: SlidingWindowState,
    /// Changed since it was last published.
    dirty: bool,
}

/// A slot of the gossip state to write: its new value, or `None` to clear it.
pub(crate) type SlotWrite = (u32, Option<String>);

#[derive(Debug)]
struct Inner {
    keys: LruCache<String, Entry>,
    /// Slots no key holds.
    free: Vec<u32>,
}

/// The published counts; one short lock per shared op.
#[derive(Debug)]
pub(crate) struct Tally {
    inner: Mutex<Inner>,
    dropped: AtomicU64,
}

impl Tally {
    /// A tally of at most `max_keys` keys (at least 1).
    pub(crate) fn new(max_keys: usize) -> Tally {
        let cap = NonZeroUsize::new(max_keys).unwrap_or(NonZeroUsize::MIN);
        Tally {
            inner: Mutex::new(Inner {
                keys: LruCache::new(cap),
                free: (0..cap.get() as u32).rev().collect(),
            }),
            dropped: AtomicU64::new(0),
        }
    }

    /// Keys dropped at the cap since startup.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Keys published now.
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().keys.len()
    }

    /// True when no key is published.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Moves `key`'s counts to the window starting at `start` and lets `change` adjust them.
    pub(crate) fn update(
        &self,
        key: &str,
        window: Window,
        start: u64,
        change: impl FnOnce(&mut SlidingWindowState),
    ) {
        let mut inner = self.inner.lock();
        if !inner.keys.contains(key) {
            let slot = match inner.free.pop() {
                Some(slot) => slot,
                None => {
                    // At the cap: the least recently used key gives up its slot.
                    let Some((_, oldest)) = inner.keys.pop_lru() else {
                        return;
                    };
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    oldest.slot
                }
            };
            let entry = Entry {
                slot,
                window,
                counts: SlidingWindowState::default(),
                dirty: true,
            };
            inner.keys.put(key.to_string(), entry);
        }
        let Some(entry) = inner.keys.get_mut(key) else {
            return;
        };
        entry.window = window;
        roll(&mut entry.counts, start, window);
        change(&mut entry.counts);
        entry.dirty = true;
    }

    /// The slot writes since the last call: changed keys' values, and the slots of keys whose
    /// counts no longer weigh on any decision at `now` (their previous window is over) cleared.
    pub(crate) fn drain(&self, now: Timestamp) -> Vec<SlotWrite> {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let mut out: Vec<SlotWrite> = Vec::new();
        let mut expired = Vec::new();
        for (key, entry) in &mut inner.keys {
            let len = entry.window.secs();
            if entry.counts.window_start.saturating_add(2 * len) <= now.as_secs() {
                expired.push(key.clone());
            } else if entry.dirty {
                entry.dirty = false;
                out.push((entry.slot, Some(encode(key, entry))));
            }
        }
        for key in expired {
            if let Some(entry) = inner.keys.pop(&key) {
                inner.free.push(entry.slot);
                out.push((entry.slot, None));
            }
        }
        out
    }
}

/// A slot's value: `window_start window_secs current previous key`.
fn encode(key: &str, e: &Entry) -> String {
    let c = e.counts;
    format!(
        "{} {} {} {} {key}",
        c.window_start,
        e.window.secs(),
        c.current,
        c.previous
    )
}

/// A peer's published counts of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Published {
    /// The window length the counts belong to, in seconds.
    pub window_secs: u64,
    /// Start, current and previous counts.
    pub counts: SlidingWindowState,
}

/// Reads a slot's value back: the key and its counts; `None` for a cleared or malformed slot.
pub(crate) fn decode(value: &str) -> Option<(&str, Published)> {
    let mut parts = value.splitn(5, ' ');
    let mut num = || parts.next()?.parse::<u64>().ok();
    let (window_start, window_secs, current, previous) = (num()?, num()?, num()?, num()?);
    let key = parts.next()?;
    let counts = SlidingWindowState {
        window_start,
        current,
        previous,
    };
    Some((
        key,
        Published {
            window_secs,
            counts,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(secs: u64) -> Window {
        Window::from_secs(secs).unwrap()
    }

    #[test]
    fn publishes_changes_once_and_round_trips_them() {
        let t = Tally::new(4);
        t.update("k 1", window(60), 120, |c| c.current += 3);
        let writes = t.drain(Timestamp::from_secs(130));
        assert_eq!(writes.len(), 1);
        let (key, p) = decode(writes[0].1.as_deref().unwrap()).unwrap();
        assert_eq!((key, p.window_secs, p.counts.current), ("k 1", 60, 3));
        assert!(
            t.drain(Timestamp::from_secs(131)).is_empty(),
            "unchanged keys are not re-sent"
        );
        // The next window rolls the count into `previous`.
        t.update("k 1", window(60), 180, |c| c.current += 1);
        let writes = t.drain(Timestamp::from_secs(181));
        let (_, p) = decode(writes[0].1.as_deref().unwrap()).unwrap();
        assert_eq!((p.counts.previous, p.counts.current), (3, 1));
    }

    #[test]
    fn drops_the_oldest_key_at_the_cap_and_clears_expired_slots() {
        let t = Tally::new(2);
        for key in ["a", "b", "c"] {
            t.update(key, window(1), 100, |c| c.current += 1);
        }
        assert_eq!((t.len(), t.dropped()), (2, 1));
        let writes = t.drain(Timestamp::from_secs(100));
        let keys: Vec<_> = writes
            .iter()
            .map(|(_, v)| decode(v.as_deref().unwrap()).unwrap().0.to_string())
            .collect();
        assert_eq!(keys.len(), 2);
        assert!(!keys.contains(&"a".to_string()), "{keys:?}");
        let slots: std::collections::HashSet<u32> = writes.iter().map(|w| w.0).collect();
        assert_eq!(slots.len(), 2, "two slots for two keys");
        // Two windows later the counts weigh on nothing: both slots are cleared.
        let writes = t.drain(Timestamp::from_secs(102));
        assert!(writes.iter().all(|(_, v)| v.is_none()) && writes.len() == 2);
        assert!(t.is_empty());
    }
}
