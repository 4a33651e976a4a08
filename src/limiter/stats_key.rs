//! The stats key of a matched limit (SPEC §F "Per limit"): which name its counters are reported
//! under. It depends on how each level was matched, so it is computed here, next to resolution,
//! from the match path and the request's entries.
//!
//! - Default: the config path (`domain.key1_value1.subkey1`), i.e. [`Limit::full_key`].
//! - `detailed_metric` on the limit: every level is `key_<runtime value>` (the wildcard pattern on
//!   share_threshold levels).
//! - `value_to_metric` on a level (limit not detailed): a default or wildcard match writes the
//!   runtime value (`key` alone when it is empty); share_threshold keeps the pattern; an exact
//!   match writes `key_value` as always.
//!
//! Keys are sanitised as the Go stats library does (`:` and `|` → `_`, dots of IPv4 quads → `_`),
//! so a request value cannot inject statsd syntax.

use std::borrow::Cow;

use crate::config::{Limit, MatchKind, MatchedLevel};

use super::request::Entry;

/// The stats key for a limit found by matching `entries` along `path` in `domain`.
pub fn for_match<'a>(
    domain: &str,
    limit: &'a Limit,
    entries: &[Entry],
    path: &[MatchedLevel<'_>],
) -> Cow<'a, str> {
    let custom = limit.detailed_metric || path.iter().any(|l| l.node.value_to_metric);
    if !custom {
        return sanitize(Cow::Borrowed(limit.full_key.as_str()));
    }
    let mut key = String::with_capacity(limit.full_key.len() + 16);
    key.push_str(domain);
    for (e, level) in entries.iter().zip(path) {
        key.push('.');
        let node = level.node;
        let shared = level.kind == MatchKind::Wildcard && node.share_threshold;
        if limit.detailed_metric {
            key.push_str(&e.key);
            key.push('_');
            key.push_str(if shared { &node.value } else { &e.value });
            continue;
        }
        match level.kind {
            // An exact match is the config path whatever the flag says.
            MatchKind::Exact => push_composite(&mut key, &node.key, &node.value),
            _ if !node.value_to_metric => push_composite(&mut key, &node.key, &node.value),
            MatchKind::Wildcard if shared => push_composite(&mut key, &node.key, &node.value),
            _ => push_composite(&mut key, &e.key, &e.value),
        }
    }
    sanitize(Cow::Owned(key))
}

/// `key` alone when `value` is empty, else `key_value`: how the config path names a level.
fn push_composite(out: &mut String, key: &str, value: &str) {
    out.push_str(key);
    if !value.is_empty() {
        out.push('_');
        out.push_str(value);
    }
}

/// Applies the Go stat-name sanitiser; borrows when nothing changes (the common case).
pub fn sanitize(key: Cow<'_, str>) -> Cow<'_, str> {
    let needs = key.contains([':', '|']) || ipv4_spans(&key).next().is_some();
    if !needs {
        return key;
    }
    let mut bytes = key.replace([':', '|'], "_").into_bytes();
    let spans: Vec<(usize, usize)> = ipv4_spans(&String::from_utf8_lossy(&bytes)).collect();
    for (start, end) in spans {
        for b in &mut bytes[start..end] {
            if *b == b'.' {
                *b = b'_';
            }
        }
    }
    // Only ASCII dots were replaced by ASCII underscores, so this stays valid UTF-8.
    Cow::Owned(String::from_utf8_lossy(&bytes).into_owned())
}

/// Byte ranges of dotted quads (`\d{1,3}(\.\d{1,3}){3}`), leftmost first, non-overlapping, found
/// the way an unanchored regex scan finds them.
fn ipv4_spans(s: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let b = s.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() {
            if let Some(end) = quad_at(b, i) {
                let start = i;
                i = end;
                return Some((start, end));
            }
            i += 1;
        }
        None
    })
}

/// End of a dotted quad starting at `i`, preferring the longest match (greedy `\d{1,3}`).
fn quad_at(b: &[u8], i: usize) -> Option<usize> {
    fn group(b: &[u8], at: usize, left: u8) -> Option<usize> {
        let digits = b[at..]
            .iter()
            .take(3)
            .take_while(|c| c.is_ascii_digit())
            .count();
        // Backtrack from the longest digit run, as a regex engine would.
        (1..=digits).rev().find_map(|n| {
            let end = at + n;
            if left == 0 {
                return Some(end);
            }
            (b.get(end) == Some(&b'.'))
                .then(|| group(b, end + 1, left - 1))
                .flatten()
        })
    }
    group(b, i, 3)
}

#[cfg(test)]
mod tests;
