//! `GetLimit` (`docs/design/contract.md#matching`): walk the tree one request entry per level —
//! exact `key_value`, then the first `value_regex` of the key in config order (a ratelimitd
//! extension), then the first wildcard in config order, then the key-only default — never
//! backtracking, and return the limit only if it sits on the node matched by the last entry.
//! A level without regex nodes costs what it did before they existed: an exact match returns
//! before any pattern is looked at, and an empty list is all the regex step costs otherwise.

use super::compiled::{Domain, EntryRef, Level, Match, MatchKind, MatchedLevel, Node};
use super::predicate::{Gate, Ungated};

impl Domain {
    /// Finds the limit for one request descriptor's entries, with the path that reached it.
    /// `None` for no entries, no matching node, a limit-less last node, or more entries than the
    /// tree is deep.
    pub fn get_limit<E: EntryRef>(&self, entries: &[E]) -> Option<Match<'_>> {
        match self.lookup(entries) {
            Lookup::Limit(m) => Some(m),
            Lookup::NoLimit | Lookup::Unmatched => None,
        }
    }

    /// What the tree says of one request descriptor's entries: a limit, a matched node without
    /// one (what the operator wrote: Go's way of letting values through), or no node for some
    /// entry — the descriptors a `default_limit` is for. `when:` predicates are not evaluated:
    /// [`Domain::lookup_gated`] is for a domain that has them.
    pub fn lookup<E: EntryRef>(&self, entries: &[E]) -> Lookup<'_> {
        self.lookup_gated(entries, &mut Ungated)
    }

    /// [`Domain::lookup`], a node with a `when:` matching only when `gate` admits it; one that
    /// does not is passed over for the next candidate of its level. With [`Ungated`] every check
    /// compiles away.
    pub fn lookup_gated<E: EntryRef, G: Gate>(&self, entries: &[E], gate: &mut G) -> Lookup<'_> {
        let Some(last) = entries.len().checked_sub(1) else {
            return Lookup::NoLimit;
        };
        let mut level = &self.root;
        let mut path = Vec::with_capacity(entries.len());
        // One buffer for every level's `key_value`, instead of an allocation per entry.
        let mut composite = Composite::default();
        for (i, entry) in entries.iter().enumerate() {
            let Some((node, kind)) = level.find(entry, &mut composite, gate) else {
                return Lookup::Unmatched;
            };
            path.push(MatchedLevel { node, kind });
            if i == last {
                return match node.limit.as_ref() {
                    Some(limit) => Lookup::Limit(Match { limit, path }),
                    None => Lookup::NoLimit,
                };
            }
            // A limit here is ignored (not the last entry); with no children the request is
            // deeper than the config: its next entry matches nothing.
            if node.children.is_empty() {
                return Lookup::Unmatched;
            }
            level = &node.children;
        }
        Lookup::NoLimit
    }
}

/// What [`Domain::lookup`] found for a descriptor.
#[derive(Debug, Clone)]
pub enum Lookup<'a> {
    /// The last entry's node has a limit.
    Limit(Match<'a>),
    /// Every entry matched a node, and the last node has no limit.
    NoLimit,
    /// Some entry matched no node (or the request is deeper than the tree).
    Unmatched,
}

impl Level {
    /// The node one entry selects at this level, and how; `composite` is scratch space.
    fn find<E: EntryRef, G: Gate>(
        &self,
        entry: &E,
        composite: &mut Composite,
        gate: &mut G,
    ) -> Option<(&Node, MatchKind)> {
        // A node without `when` always applies; with an inactive gate this is `true` at compile
        // time and the predicate field is never read.
        let mut admits =
            |node: &Node| !G::ACTIVE || node.when.as_ref().is_none_or(|p| gate.admits(p));
        // Go always appends `_`, so an empty value looks up `key_`, which matches no key-only node.
        let composite = composite.join(entry.key(), entry.value());
        if let Some(node) = self.by_key.get(composite).filter(|n| admits(n)) {
            return Some((node, MatchKind::Exact));
        }
        let regex = self.regexes.iter().find(|node| {
            node.key == entry.key()
                && node
                    .value_regex
                    .as_ref()
                    .is_some_and(|r| r.compiled.is_match(entry.value()))
                && admits(node)
        });
        if let Some(node) = regex {
            return Some((node, MatchKind::Regex));
        }
        let wildcard = self
            .wildcards
            .iter()
            .filter(|(_, parts)| wildcard_match(parts, composite))
            .filter_map(|(key, _)| self.by_key.get(key))
            .find(|n| admits(n));
        if let Some(node) = wildcard {
            return Some((node, MatchKind::Wildcard));
        }
        self.by_key
            .get(entry.key())
            .filter(|n| admits(n))
            .map(|node| (node, MatchKind::Default))
    }
}

/// Scratch space for a level's `key_value`: on the stack when it fits, as nearly every
/// descriptor's does, so matching a request allocates nothing; a longer one goes to the heap.
struct Composite {
    stack: [u8; 128],
    heap: String,
}

impl Default for Composite {
    fn default() -> Composite {
        Composite {
            stack: [0; 128],
            heap: String::new(),
        }
    }
}

impl Composite {
    /// `key_value`.
    fn join(&mut self, key: &str, value: &str) -> &str {
        let len = key.len() + 1 + value.len();
        if len > self.stack.len() {
            self.heap.clear();
            self.heap.push_str(key);
            self.heap.push('_');
            self.heap.push_str(value);
            return &self.heap;
        }
        self.stack[..key.len()].copy_from_slice(key.as_bytes());
        self.stack[key.len()] = b'_';
        self.stack[key.len() + 1..len].copy_from_slice(value.as_bytes());
        // Two strings joined by an ASCII byte are UTF-8: the check cannot fail.
        std::str::from_utf8(&self.stack[..len]).unwrap_or_default()
    }
}

/// Whether `s` matches a pattern split on `*`: it starts with the first part, ends with the last,
/// and holds the middle parts in order without overlap; each `*` matches zero or more characters.
/// Taking the leftmost occurrence of each middle part is enough: it leaves the most room for the
/// rest.
pub(crate) fn wildcard_match(parts: &[String], s: &str) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return s == first;
    };
    if s.len() < first.len() + last.len()
        || !s.starts_with(first.as_str())
        || !s.ends_with(last.as_str())
    {
        return false;
    }
    // Both bounds are char boundaries: they end a matched prefix and start a matched suffix.
    let Some(mut inner) = s.get(first.len()..s.len() - last.len()) else {
        return false;
    };
    for part in middle {
        match inner.find(part.as_str()) {
            Some(at) => inner = inner.get(at + part.len()..).unwrap_or_default(),
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::wildcard_match;

    fn m(pattern: &str, s: &str) -> bool {
        let parts: Vec<String> = pattern.split('*').map(str::to_owned).collect();
        wildcard_match(&parts, s)
    }

    #[test]
    fn star_matches_zero_or_more_characters_anywhere() {
        assert!(m("wild_foo*", "wild_foo"));
        assert!(m("wild_foo*", "wild_foo123"));
        assert!(!m("wild_foo*", "wild_fo"));
        assert!(m("midWild_bar*b", "midWild_barb"));
        assert!(m("midWild_bar*b", "midWild_barxyzb"));
        assert!(!m("midWild_bar*b", "midWild_barbx"));
        assert!(m("m_foo*bar*baz", "m_foobarbaz"));
        assert!(m("m_foo*bar*baz", "m_foo1bar2baz"));
        assert!(!m("m_foo*bar*baz", "m_foo1baz2bar"));
        assert!(m("k_*", "k_"));
        assert!(m("*", ""));
        assert!(m("a**b", "ab"));
    }

    #[test]
    fn parts_may_not_overlap() {
        // `ab` prefix and `ba` suffix overlap in `aba`; the length check refuses it.
        assert!(!m("ab*ba", "aba"));
        assert!(m("ab*ba", "abba"));
        assert!(!m("a*bc*cd", "abcd"));
        assert!(m("a*bc*cd", "abccd"));
    }

    #[test]
    fn multibyte_text_never_panics() {
        assert!(m("k_é*é", "k_éé"));
        assert!(!m("k_é*é", "k_é"));
        assert!(m("k_*ü*", "k_aüb"));
    }
}
