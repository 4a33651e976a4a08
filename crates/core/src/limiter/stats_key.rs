//! The stats key of a matched limit (`docs/design/contract.md#stats-keys`): which name its counters
//! are reported under. It depends on how each level was matched, so it is computed here, next to
//! resolution, from the match path and the request's entries.
//!
//! - Default: the config path (`domain.key1_value1.subkey1`), i.e. [`Limit::full_key`].
//! - `detailed_metric` on the limit: every level is `key_<runtime value>` (the wildcard pattern on
//!   `share_threshold` levels).
//! - `value_to_metric` on a level (limit not detailed): a default, wildcard or regex match writes
//!   the runtime value (`key` alone when it is empty); `share_threshold` (and `regex_key: shared`)
//!   keeps the pattern; an exact match writes `key_value` as always.
//! - A `value_regex` level is named `key=~pattern` wherever the config path is written.
//!
//! Keys are sanitised as the Go stats library does ([`sanitize`]), so a request value cannot
//! inject statsd syntax; the default key is sanitised once, at load ([`Limit::stats_key`]).

use std::borrow::Cow;

pub(crate) use crate::config::sanitize;
use crate::config::{Limit, MatchKind, MatchedLevel, Node};

use super::request::Entry;

/// The stats key for a limit found by matching `entries` along `path` in `domain`.
pub(crate) fn for_match<'a, 'e>(
    domain: &str,
    limit: &'a Limit,
    entries: impl IntoIterator<Item = &'e Entry>,
    path: &[MatchedLevel<'_>],
) -> Cow<'a, str> {
    let custom = limit.detailed_metric || path.iter().any(|l| l.node.value_to_metric);
    if !custom {
        return Cow::Borrowed(limit.stats_key.as_str());
    }
    let mut key = String::with_capacity(limit.full_key.len() + 16);
    key.push_str(domain);
    for (e, level) in entries.into_iter().zip(path) {
        key.push('.');
        let node = level.node;
        let shared = shares_counter(level);
        if limit.detailed_metric {
            match &node.value_regex {
                Some(regex) if shared => key.push_str(&regex.name),
                _ => {
                    key.push_str(&e.key);
                    key.push('_');
                    key.push_str(if shared { &node.value } else { &e.value });
                }
            }
            continue;
        }
        match level.kind {
            // An exact match is the config path whatever the flag says.
            MatchKind::Exact => push_node(&mut key, node),
            _ if !node.value_to_metric => push_node(&mut key, node),
            MatchKind::Wildcard | MatchKind::Regex if shared => push_node(&mut key, node),
            _ => push_composite(&mut key, &e.key, &e.value),
        }
    }
    sanitize(Cow::Owned(key))
}

/// Whether every value matched at `level` counts against one counter: a wildcard with
/// `share_threshold`, or a `value_regex` with `regex_key: shared`.
pub(crate) fn shares_counter(level: &MatchedLevel<'_>) -> bool {
    match level.kind {
        MatchKind::Wildcard => level.node.share_threshold,
        MatchKind::Regex => (level.node.value_regex.as_ref()).is_some_and(|r| r.shared),
        MatchKind::Exact | MatchKind::Default => false,
    }
}

/// How the config path names the level of `node`: `key=~pattern` for a `value_regex` node,
/// else [`push_composite`] of its key and value.
fn push_node(out: &mut String, node: &Node) {
    match &node.value_regex {
        Some(regex) => out.push_str(&regex.name),
        None => push_composite(out, &node.key, &node.value),
    }
}

/// `key` alone when `value` is empty, else `key_value`: how the config path names a level.
fn push_composite(out: &mut String, key: &str, value: &str) {
    out.push_str(key);
    if !value.is_empty() {
        out.push('_');
        out.push_str(value);
    }
}

#[cfg(test)]
mod tests;
