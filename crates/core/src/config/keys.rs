//! Check 2 of `docs/design/contract.md#validation`: the generic key check Go runs on the untyped
//! document before the typed unmarshal. Flat allow-list, recursive except inside `metadata`, lists
//! must hold maps, leaves must be string, integer, bool or null.

use serde_yaml::Value;

use super::convert::{go_fmt, is_go_leaf, untag};
use super::error::{Sink, field_path, index_path};

/// Go's allow-list. Flat on purpose: a key valid anywhere is accepted everywhere (e.g. `unit` at
/// descriptor level), and the typed pass then ignores it, exactly like the reference.
const VALID_KEYS: [&str; 16] = [
    "domain",
    "key",
    "value",
    "descriptors",
    "rate_limit",
    "unit",
    "requests_per_unit",
    "unlimited",
    "shadow_mode",
    "quota_mode",
    "name",
    "replaces",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
];

/// ratelimitd's opt-in extensions (`docs/design/contract.md#extensions`). A Go config never uses
/// them, so adding them to the allow-list cannot change what a Go config means.
const EXTENSION_KEYS: [&str; 21] = [
    "failure_mode",
    "local_share",
    "algorithm",
    "burst",
    "unit_multiplier",
    "rate_limits",
    "lease",
    "split",
    "quota_group",
    "calendar",
    "time_zone",
    "regions",
    "priority_key",
    "priorities",
    "soft",
    "usage",
    "value_regex",
    "regex_key",
    "default_limit",
    "max_request_limit",
    "when",
];

/// Checks every key of `map` (at `path`) and below, reporting each problem.
pub(crate) fn check_keys(map: &serde_yaml::Mapping, path: &str, sink: &mut Sink<'_>) {
    for (k, v) in map {
        let Value::String(key) = untag(k) else {
            sink.push(
                path,
                format!("config error, key is not of type string: {}", go_fmt(k)),
            );
            continue;
        };
        let here = field_path(path, key);
        if !VALID_KEYS.contains(&key.as_str()) && !EXTENSION_KEYS.contains(&key.as_str()) {
            let hint = super::suggest::nearest(key, VALID_KEYS.into_iter().chain(EXTENSION_KEYS))
                .map(|k| format!("did you mean `{k}`?"));
            sink.push_hinted(&here, format!("config error, unknown key '{key}'"), hint);
            continue;
        }
        // Metadata is free-form (it becomes a protobuf Struct), so Go skips it; `local_share` is
        // a fraction (a float, which Go's leaf check refuses) checked by its own reader, and so
        // are `regions` (region names as keys, fractions as values), `priorities` (class names
        // are the operator's), `soft` (`config::shedding`) and `usage`'s map (`config::usage`).
        if ![
            "metadata",
            "local_share",
            "regions",
            "priorities",
            "soft",
            "usage",
        ]
        .contains(&key.as_str())
        {
            check_value(v, &here, sink);
        }
    }
}

/// Checks one value of an allowed key.
fn check_value(v: &Value, path: &str, sink: &mut Sink<'_>) {
    match untag(v) {
        Value::Sequence(items) => {
            for (i, item) in items.iter().enumerate() {
                match untag(item) {
                    Value::Mapping(m) => check_keys(m, &index_path(path, i), sink),
                    other => sink.push(
                        &index_path(path, i),
                        format!(
                            "config error, yaml file contains list of type other than map: {}",
                            go_fmt(other)
                        ),
                    ),
                }
            }
        }
        Value::Mapping(m) => check_keys(m, path, sink),
        leaf if !is_go_leaf(leaf) => sink.push(path, "error checking config"),
        _ => {}
    }
}
