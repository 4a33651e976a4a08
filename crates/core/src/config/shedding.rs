//! Priority load shedding and soft limits on one `rate_limit` (ratelimitd extensions,
//! `docs/configuration.md#priority-shedding-and-soft-limits`), compiled into [`Shedding`].
//!
//! Both are a per-request **effective limit** over the limit's one shared counter, so no store or
//! Lua script needs a new algorithm ([`effective_limit`]):
//! - `priorities` maps class → share of the limit. A request of class `c` is admitted while the
//!   usage after it stays within `share(c) × limit`; every class counts against the same key (the
//!   class entry is taken out of the descriptor before matching and keying), so critical traffic
//!   keeps the top of the capacity once the lower classes are shed.
//! - `soft: {up_to: 1.2}` lets usage run past the limit with a denial probability that rises
//!   linearly from 0 at the limit to 1 at `up_to × limit`: the effective limit is
//!   `limit × (1 + (up_to − 1)·u)` with `u` uniform in `[0, 1)` from the injected
//!   [`crate::random::Random`].
//! - `soft: {breach_ratio: 0.8}` raises the soft-breach signal from 80% of the limit on.
//!
//! "Usage" is well defined for counters of hits or holders: fixed and sliding windows, the
//! sliding log, and concurrency slots. A token or leaky bucket measures time debt, not a share
//! of a capacity that every class sees alike, so both are refused there.

use serde_yaml::{Mapping, Value};

use super::compiled::Level;
use super::convert::{go_fmt, untag};
use super::error::{Sink, field_path};
use super::typed::Typed;
use crate::algorithm::Algorithm;

/// The most classes a limit may name: each has its own stats counters.
pub const MAX_CLASSES: usize = 16;
/// The longest class name (it becomes part of stats names).
pub const MAX_CLASS_NAME: usize = 64;
/// The highest `soft.up_to`: a zone ten times the limit is already no limit at all.
pub const MAX_SOFT_UP_TO: f64 = 10.0;
/// The descriptor entry that names the class when `priority_key` is not written.
pub const DEFAULT_PRIORITY_KEY: &str = "priority";

/// What a limit sheds and how softly, as compiled.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Shedding {
    /// `priorities` with `priority_key`.
    pub priorities: Option<Priorities>,
    /// `soft`.
    pub soft: Option<Soft>,
}

/// Priority classes of a limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Priorities {
    /// The descriptor entry key whose value names the request's class (`priority_key`).
    pub key: String,
    /// `(class, share of the limit)` in config order.
    pub classes: Vec<(String, f64)>,
    /// Index of the class of a request with no class entry or an unknown class: the class called
    /// `default` when there is one, else the one with the lowest share.
    pub default: usize,
}

impl Priorities {
    /// The index of the class named `value` (`None`: the request named none).
    pub fn class_of(&self, value: Option<&str>) -> usize {
        value
            .and_then(|v| self.classes.iter().position(|(name, _)| name == v))
            .unwrap_or(self.default)
    }

    /// The name of class `index`.
    pub fn name(&self, index: usize) -> &str {
        self.classes.get(index).map_or("", |(name, _)| name)
    }

    /// The share of the limit class `index` may use.
    pub fn share(&self, index: usize) -> f64 {
        self.classes.get(index).map_or(1.0, |(_, share)| *share)
    }
}

/// A soft zone and the soft-breach warning of a limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Soft {
    /// Top of the soft zone as a multiple of the limit (1.0: no zone, a hard limit).
    pub up_to: f64,
    /// Share of the limit from which the soft-breach signal is raised; `None`: the service's
    /// `SOFT_BREACH_RATIO`.
    pub breach_ratio: Option<f64>,
}

/// The limit one request is judged against: `limit × share × (1 + (up_to − 1)·u)`, rounded down
/// (usage is a whole number of hits, so `after ≤ floor(x)` exactly when `after ≤ x`). `u` is a
/// uniform draw in `[0, 1)`; with `up_to = 1` it does not matter. The tiny epsilon keeps products
/// such as `100 × 0.57` from landing one below the integer they denote.
pub fn effective_limit(limit: u64, share: f64, up_to: f64, u: f64) -> u64 {
    let x = limit as f64 * share * (1.0 + (up_to - 1.0) * u);
    (x + 1e-9).floor().min(u64::MAX as f64) as u64
}

/// The distinct `priority_key`s of the limits in `level` and below, in config order.
pub(crate) fn priority_keys(level: &Level) -> Vec<String> {
    let mut limits = Vec::new();
    level.collect_limits(&mut limits);
    let mut keys: Vec<String> = Vec::new();
    for p in limits
        .iter()
        .filter_map(|l| l.shedding.as_ref()?.priorities.as_ref())
    {
        if !keys.contains(&p.key) {
            keys.push(p.key.clone());
        }
    }
    keys
}

/// `priority_key`, `priorities` and `soft` as written, before checking.
#[derive(Debug, Default)]
pub(crate) struct RawShedding {
    pub(crate) priority_key: Option<String>,
    /// `(class, share)` of `priorities`, `None` when absent or not a map (reported).
    pub(crate) priorities: Option<Vec<(String, f64)>>,
    /// `soft.up_to` and `soft.breach_ratio`, `None` when `soft` is absent.
    pub(crate) soft: Option<(Option<f64>, Option<f64>)>,
}

impl Typed<'_, '_> {
    /// Reads `priority_key`, `priorities` and `soft` of the `rate_limit` map `rl` at `path`.
    pub(super) fn shedding(&mut self, rl: &Mapping, path: &str) -> RawShedding {
        RawShedding {
            priority_key: self.string(rl, path, "priority_key"),
            priorities: self.priorities(rl, path),
            soft: self.soft(rl, path),
        }
    }

    fn priorities(&mut self, rl: &Mapping, parent: &str) -> Option<Vec<(String, f64)>> {
        let path = field_path(parent, "priorities");
        let map = self.map_at(rl, &path, "priorities")?;
        let mut out = Vec::with_capacity(map.len());
        for (k, v) in map {
            let name = match untag(k) {
                Value::String(s) => s.clone(),
                other => go_fmt(other),
            };
            let at = field_path(&path, &name);
            match untag(v) {
                Value::Number(n) if n.as_f64().is_some() => {
                    out.push((name, n.as_f64().unwrap_or_default()));
                }
                other => self.sink.push(
                    &at,
                    format!(
                        "invalid share '{}' for class '{name}' (expected a number above 0, at most 1)",
                        go_fmt(other)
                    ),
                ),
            }
        }
        Some(out)
    }

    fn soft(&mut self, rl: &Mapping, parent: &str) -> Option<(Option<f64>, Option<f64>)> {
        let path = field_path(parent, "soft");
        let map = self.map_at(rl, &path, "soft")?;
        for k in map.keys() {
            let key = go_fmt(k);
            if key != "up_to" && key != "breach_ratio" {
                self.sink.push_hinted(
                    &field_path(&path, &key),
                    format!("unknown soft limit key '{key}'"),
                    Some("expected up_to or breach_ratio".into()),
                );
            }
        }
        Some((
            self.number(map, &path, "up_to"),
            self.number(map, &path, "breach_ratio"),
        ))
    }

    /// The map under `name`, or `None` when absent, null, or not a map (reported).
    fn map_at<'m>(&mut self, rl: &'m Mapping, path: &str, name: &str) -> Option<&'m Mapping> {
        match untag(rl.get(name)?) {
            Value::Null => None,
            Value::Mapping(m) => Some(m),
            other => {
                let got = go_fmt(other);
                self.sink
                    .push(path, format!("{name} must be a map, not '{got}'"));
                None
            }
        }
    }
}

/// Checks what `raw` asks of a limit at `path` using `algorithm` (unlimited when `unlimited`),
/// reporting every problem at its YAML path; `None` when nothing is asked.
pub(crate) fn build(
    raw: &RawShedding,
    path: &str,
    algorithm: Algorithm,
    unlimited: bool,
    sink: &mut Sink<'_>,
) -> Option<Shedding> {
    if raw.priority_key.is_none() && raw.priorities.is_none() && raw.soft.is_none() {
        return None;
    }
    let first = [
        ("priorities", raw.priorities.is_some()),
        ("soft", raw.soft.is_some()),
        ("priority_key", raw.priority_key.is_some()),
    ]
    .into_iter()
    .find(|(_, set)| *set)
    .map_or("priorities", |(field, _)| field);
    let at = field_path(path, first);
    if unlimited {
        sink.push(&at, format!("should not specify {first} when unlimited"));
    } else if !usage_is_a_count(algorithm) {
        sink.push_hinted(
            &at,
            format!("{first} does not apply to {}", algorithm.name()),
            Some(
                "priorities and soft limits need a usage count: fixed_window, sliding_window, sliding_log or concurrency"
                    .into(),
            ),
        );
    }
    let priorities = build_priorities(raw, path, sink);
    let soft = raw
        .soft
        .map(|(up_to, breach)| build_soft(up_to, breach, path, sink));
    Some(Shedding { priorities, soft })
}

/// True for the algorithms whose usage is a count of hits or holders.
fn usage_is_a_count(algorithm: Algorithm) -> bool {
    !algorithm.has_burst()
}

fn build_priorities(raw: &RawShedding, path: &str, sink: &mut Sink<'_>) -> Option<Priorities> {
    let key_path = field_path(path, "priority_key");
    let Some(classes) = &raw.priorities else {
        if raw.priority_key.is_some() {
            sink.push(&key_path, "priority_key needs a priorities map");
        }
        return None;
    };
    let at = field_path(path, "priorities");
    let key = raw
        .priority_key
        .clone()
        .unwrap_or(DEFAULT_PRIORITY_KEY.into());
    if key.is_empty() {
        sink.push(&key_path, "priority_key must not be empty");
    }
    if classes.is_empty() {
        sink.push(&at, "priorities must name at least one class");
    } else if classes.len() > MAX_CLASSES {
        sink.push(
            &at,
            format!(
                "{} classes is too many (at most {MAX_CLASSES})",
                classes.len()
            ),
        );
    }
    for (name, share) in classes {
        let here = field_path(&at, name);
        let valid_name = !name.is_empty()
            && name.len() <= MAX_CLASS_NAME
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            sink.push(
                &here,
                format!("invalid class name '{name}' (expected 1 to {MAX_CLASS_NAME} letters, digits, '_' or '-')"),
            );
        }
        if !(*share > 0.0 && *share <= 1.0) {
            sink.push(
                &here,
                format!("invalid share {share} for class '{name}' (expected a number above 0, at most 1)"),
            );
        }
    }
    let lowest = (0..classes.len())
        .min_by(|&a, &b| classes[a].1.total_cmp(&classes[b].1))
        .unwrap_or(0);
    let default = classes
        .iter()
        .position(|(name, _)| name == "default")
        .unwrap_or(lowest);
    Some(Priorities {
        key,
        classes: classes.clone(),
        default,
    })
}

fn build_soft(up_to: Option<f64>, breach: Option<f64>, path: &str, sink: &mut Sink<'_>) -> Soft {
    let at = field_path(path, "soft");
    let up_to = up_to.unwrap_or(1.0);
    if !(1.0..=MAX_SOFT_UP_TO).contains(&up_to) {
        sink.push(
            &field_path(&at, "up_to"),
            format!("invalid soft up_to {up_to} (expected a multiple of the limit from 1.0 to {MAX_SOFT_UP_TO})"),
        );
    }
    if let Some(ratio) = breach.filter(|r| !(*r > 0.0 && *r <= up_to.max(1.0))) {
        sink.push(
            &field_path(&at, "breach_ratio"),
            format!("invalid soft breach_ratio {ratio} (expected a share of the limit above 0, at most up_to)"),
        );
    }
    Soft {
        up_to,
        breach_ratio: breach,
    }
}
