//! `rate_limit.usage` (ratelimitd extension, `docs/configuration.md#usage-based-limits`): how a
//! limit's hits arrive. `usage: report` (or `usage: {mode: report}`) counts every call with hits
//! as usage reported after the response; `usage: {mode: report, estimate: N}` also charges `N`,
//! policed, at the request-time check, which the report then trues up to the usage it brings.
//! `request` (the default) is every other limit: each call asks.

use serde_yaml::{Mapping, Value};

use super::convert::{go_fmt, untag};
use super::error::{Sink, field_path};
use super::model::RawRateLimit;
use super::typed::Typed;
use crate::algorithm::Algorithm;

impl Typed<'_, '_> {
    /// `usage`'s mode: the string itself, or the map's `mode`; `None` when absent or wrongly
    /// typed (reported, with every unknown key of the map).
    pub(super) fn usage_mode(&mut self, rl: &Mapping, path: &str) -> Option<String> {
        match untag(rl.get("usage")?) {
            Value::Mapping(map) => {
                let at = field_path(path, "usage");
                for k in map.keys() {
                    let key = go_fmt(k);
                    if key != "mode" && key != "estimate" {
                        self.sink.push_hinted(
                            &field_path(&at, &key),
                            format!("unknown usage key '{key}'"),
                            Some("expected mode or estimate".into()),
                        );
                    }
                }
                match map.get("mode") {
                    Some(_) => self.string(map, &at, "mode"),
                    None => {
                        self.sink.push(
                            &field_path(&at, "mode"),
                            "usage needs a mode (report or request)",
                        );
                        None
                    }
                }
            }
            _ => self.string(rl, path, "usage"),
        }
    }

    /// `usage.estimate`, when `usage` is a map that has one (a whole number, reported otherwise).
    pub(super) fn usage_estimate(&mut self, rl: &Mapping, path: &str) -> Option<u32> {
        match untag(rl.get("usage")?) {
            Value::Mapping(map) => self.uint32(map, &field_path(path, "usage"), "estimate"),
            _ => None,
        }
    }
}

/// A limit's checked `usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Usage {
    /// `mode: report`: every call with hits is a usage report ([`crate::algorithm::report`]).
    pub(crate) report: bool,
    /// `estimate`: what the request-time check charges before the usage is known.
    pub(crate) estimate: Option<u32>,
}

/// Checks `usage` on `rl` of `algorithm` whose capacity (the most one request may take) is
/// `capacity`. A concurrency limit counts requests in flight, never usage; an estimate only
/// applies to reports, and must fit in the limit, else no check could ever pass.
pub(crate) fn check(
    rl: &RawRateLimit,
    algorithm: Algorithm,
    capacity: u64,
    sink: &mut Sink<'_>,
) -> Usage {
    let at = field_path(&rl.path, "usage");
    let report = match rl.usage.as_deref() {
        None | Some("request") => false,
        Some("report") if algorithm == Algorithm::Concurrency => {
            sink.push(
                &at,
                "usage: report does not apply to concurrency (it counts requests in flight, not usage); use fixed_window, sliding_window, sliding_log, token_bucket or leaky_bucket",
            );
            false
        }
        Some("report") => true,
        Some(other) => {
            sink.push(
                &at,
                format!("invalid usage '{other}' (expected report or request)"),
            );
            false
        }
    };
    let estimate = rl.usage_estimate.filter(|&e| {
        let at = field_path(&at, "estimate");
        if !report {
            if rl.usage.as_deref() != Some("report") || algorithm != Algorithm::Concurrency {
                sink.push(
                    &at,
                    "an estimate is charged by the check of a reported usage; it needs mode: report",
                );
            }
            return false;
        }
        if e == 0 || u64::from(e) > capacity {
            sink.push(
                &at,
                format!(
                    "invalid usage estimate {e} (expected 1 to {capacity}, the most one request may take from this limit)"
                ),
            );
            return false;
        }
        true
    });
    Usage { report, estimate }
}
