//! The in-memory view of the active overrides that requests read: built (by the server's policy
//! database) off the request path, swapped in whole, looked up by (domain, exact descriptor)
//! without any I/O.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::stored_override::StoredOverride;
use crate::clock::Timestamp;
use crate::config::EntryRef;

/// Active overrides by domain, then by the descriptor's entries joined into one string.
#[derive(Debug, Default, Clone)]
pub struct OverrideIndex {
    by_domain: HashMap<String, HashMap<String, Vec<Arc<StoredOverride>>>>,
    count: usize,
}

/// Joins entries into one lookup key, each key and value prefixed with its length, so two
/// different descriptor paths never share a key whatever bytes their values hold.
fn path_key<'a>(entries: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for (k, v) in entries {
        let _ = write!(out, "{}:{k}{}:{v}", k.len(), v.len());
    }
    out
}

impl OverrideIndex {
    /// An index over `overrides` (newest first: the first active one of a descriptor applies).
    pub fn new(overrides: Vec<StoredOverride>) -> OverrideIndex {
        let mut index = OverrideIndex::default();
        for o in overrides {
            index.slot(&o).push(Arc::new(o));
            index.count += 1;
        }
        index
    }

    /// The overrides of `o`'s domain and descriptor, newest first.
    fn slot(&mut self, o: &StoredOverride) -> &mut Vec<Arc<StoredOverride>> {
        let key = path_key(
            o.spec
                .descriptor
                .iter()
                .map(|e| (e.key.as_str(), e.value.as_str())),
        );
        self.by_domain
            .entry(o.spec.domain.clone())
            .or_default()
            .entry(key)
            .or_default()
    }

    /// A copy with `o` added as the newest override of its descriptor (those of the descriptor
    /// that expired by `now` dropped): a create costs a copy of the index's map, not a database
    /// read of every override.
    pub fn with(&self, o: StoredOverride, now: Timestamp) -> OverrideIndex {
        let mut next = self.clone();
        let slot = next.slot(&o);
        let before = slot.len();
        slot.retain(|x| x.active_at(now));
        slot.insert(0, Arc::new(o));
        let after = slot.len();
        next.count = next.count + after - before;
        next
    }

    /// A copy without the override `id`.
    pub fn without(&self, id: &str) -> OverrideIndex {
        let mut next = self.clone();
        for by_path in next.by_domain.values_mut() {
            for list in by_path.values_mut() {
                let before = list.len();
                list.retain(|o| o.id != id);
                next.count -= before - list.len();
            }
            by_path.retain(|_, list| !list.is_empty());
        }
        next.by_domain.retain(|_, by_path| !by_path.is_empty());
        next
    }

    /// How many overrides it holds (expired ones not yet dropped included).
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The override that applies to a descriptor of `domain` with `entries` at `now`: the newest
    /// whose `valid_until` is still ahead. Allocates only when the domain has overrides.
    pub fn find<E: EntryRef>(
        &self,
        domain: &str,
        entries: &[E],
        now: Timestamp,
    ) -> Option<&Arc<StoredOverride>> {
        let of_domain = self.by_domain.get(domain)?;
        let key = path_key(entries.iter().map(|e| (e.key(), e.value())));
        of_domain.get(&key)?.iter().find(|o| o.active_at(now))
    }

    /// Every override, sorted by id (for `/rlconfig`).
    pub fn all(&self) -> Vec<&Arc<StoredOverride>> {
        let mut all: Vec<_> = self
            .by_domain
            .values()
            .flat_map(|m| m.values().flatten())
            .collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    }
}

/// The current index, shared by the limiter and the policy runtime; swapped atomically.
#[derive(Debug, Default)]
pub struct Overrides {
    current: ArcSwap<OverrideIndex>,
}

impl Overrides {
    /// The index in service. Load once per request.
    pub fn load(&self) -> Arc<OverrideIndex> {
        self.current.load_full()
    }

    /// Puts `index` in service.
    pub fn publish(&self, index: OverrideIndex) {
        self.current.store(Arc::new(index));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Unit;
    use crate::limiter::stored_override::{NewOverride, PathEntry};
    use crate::test_support::E;

    fn ov(id: &str, path: &[(&str, &str)], until: u64) -> StoredOverride {
        StoredOverride {
            id: id.into(),
            spec: NewOverride {
                domain: "api".into(),
                descriptor: path
                    .iter()
                    .map(|(k, v)| PathEntry {
                        key: (*k).into(),
                        value: (*v).into(),
                    })
                    .collect(),
                requests_per_unit: 1,
                unit: Unit::Second,
                valid_until: Timestamp::from_secs(until),
                reason: String::new(),
            },
            created_by: "t".into(),
            created_at: Timestamp::from_secs(0),
        }
    }

    #[test]
    fn exact_path_newest_active_first() {
        let index = OverrideIndex::new(vec![
            ov("new", &[("k", "v")], 100),
            ov("old", &[("k", "v")], 200),
            ov("other", &[("k", "v"), ("x", "")], 200),
        ]);
        let at = Timestamp::from_secs;
        let find = |e: &[E], t| index.find("api", e, at(t)).map(|o| o.id.as_str());
        assert_eq!(find(&[E("k", "v")], 50), Some("new"));
        // At valid_until exactly the override is gone; the older one still applies.
        assert_eq!(find(&[E("k", "v")], 100), Some("old"));
        assert_eq!(find(&[E("k", "v")], 200), None);
        assert_eq!(find(&[E("k", "v"), E("x", "")], 50), Some("other"));
        assert_eq!(find(&[E("k", "w")], 50), None);
        assert!(index.find("web", &[E("k", "v")], at(50)).is_none());
        assert_eq!(index.len(), 3);
        // Added in place: newest first, the expired one of the same descriptor dropped.
        let added = index.with(ov("newer", &[("k", "v")], 300), at(150));
        assert_eq!(added.len(), 3);
        assert_eq!(
            added.find("api", &[E("k", "v")], at(150)).unwrap().id,
            "newer"
        );
        let removed = added.without("newer");
        assert_eq!(removed.len(), 2);
        assert_eq!(
            removed.find("api", &[E("k", "v")], at(150)).unwrap().id,
            "old"
        );
        assert_eq!(index.len(), 3, "the index in service is untouched");
    }
}
