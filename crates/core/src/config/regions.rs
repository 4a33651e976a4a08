//! A rate limit's `regions` (ratelimitd extension): the limit is worldwide and each region
//! enforces a share of it (`crate::region`). Read here from the YAML map
//! `{shares: {eu: 0.5, us: 0.3}, default_share: 0.2}` and checked: every share above 0 and at most
//! 1, region names of letters, digits, `-`, `_` and `.`, the shares (with `default_share`) at most
//! 1 together. Errors name the YAML path; the walk carries on.

use std::collections::BTreeMap;

use serde_yaml::{Mapping, Value};

use super::convert::{go_fmt, untag};
use super::error::field_path;
use super::typed::Typed;
use crate::region::{FollowDemand, Regions};

/// The keys of a `regions` map.
const KEYS: [&str; 3] = ["shares", "default_share", "follow_demand"];

/// Slack for decimal shares that sum to exactly 1 in writing (0.7 + 0.2 + 0.1).
const SUM_SLACK: f64 = 1e-9;

impl Typed<'_, '_> {
    /// The `regions` of the `rate_limit` map `rl` at `parent`; `None` when absent or invalid
    /// (reported).
    pub(super) fn regions(&mut self, rl: &Mapping, parent: &str) -> Option<Regions> {
        let path = field_path(parent, "regions");
        let v = rl.get("regions")?;
        let Value::Mapping(m) = untag(v) else {
            self.sink.push(
                &path,
                format!(
                    "invalid regions {} (expected a map such as {{shares: {{eu: 0.6, us: 0.4}}}})",
                    go_fmt(v)
                ),
            );
            return None;
        };
        let mut ok = true;
        for k in m.keys() {
            let name = untag(k).as_str().unwrap_or_default();
            if !KEYS.contains(&name) {
                let hint =
                    super::suggest::nearest(name, KEYS).map(|k| format!("did you mean `{k}`?"));
                let msg = format!(
                    "unknown key '{}' in regions (expected shares, default_share or follow_demand)",
                    go_fmt(k)
                );
                self.sink.push_hinted(&path, msg, hint);
                ok = false;
            }
        }
        let shares = self.shares(m, &path, &mut ok);
        let listed: f64 = shares.values().sum();
        let given = m.get("default_share");
        let default_share = match given {
            // What the listed regions leave; float noise (0.7 + 0.2 + 0.1) is no share.
            None => Some(1.0 - listed)
                .filter(|rest| *rest > SUM_SLACK)
                .unwrap_or(0.0),
            Some(v) => self
                .share(v, &field_path(&path, "default_share"))
                .unwrap_or_else(|| {
                    ok = false;
                    0.0
                }),
        };
        let total = listed + if given.is_some() { default_share } else { 0.0 };
        if ok && total > 1.0 + SUM_SLACK {
            let with = if given.is_some() {
                " with default_share"
            } else {
                ""
            };
            self.sink.push(
                &path,
                format!(
                    "the shares{with} add up to {} (expected at most 1: together the regions \
                     may not admit more than the limit)",
                    (total * 1e6).round() / 1e6
                ),
            );
            ok = false;
        }
        let follow = self.follow_demand(m, &path, shares.len(), &mut ok);
        if follow.is_some() && given.is_some() {
            self.sink.push(
                &field_path(&path, "default_share"),
                "default_share cannot be used with follow_demand (every region must be listed \
                 under shares, where its share starts)",
            );
            ok = false;
        }
        ok.then_some(Regions {
            path,
            shares,
            default_share,
            follow,
        })
    }

    /// `shares`: region name → share; at least one region.
    fn shares(&mut self, m: &Mapping, parent: &str, ok: &mut bool) -> BTreeMap<String, f64> {
        let path = field_path(parent, "shares");
        let mut out = BTreeMap::new();
        let Some(Value::Mapping(listed)) = m.get("shares").map(untag) else {
            self.sink.push(
                &path,
                "regions needs shares, a map of region name to share (e.g. {eu: 0.6, us: 0.4})",
            );
            *ok = false;
            return out;
        };
        if listed.is_empty() {
            self.sink.push(&path, "shares lists no region");
            *ok = false;
        }
        for (k, v) in listed {
            let name = match untag(k) {
                Value::String(s) if valid_region(s) => s.clone(),
                other => {
                    let msg = format!(
                        "invalid region name {} (expected letters, digits, '-', '_' or '.')",
                        go_fmt(other)
                    );
                    self.sink.push(&path, msg);
                    *ok = false;
                    continue;
                }
            };
            match self.share(v, &field_path(&path, &name)) {
                Some(s) => {
                    out.insert(name, s);
                }
                None => *ok = false,
            }
        }
        out
    }

    /// `follow_demand`: `true` (the defaults), `false`, or `{floor, max_step}`.
    fn follow_demand(
        &mut self,
        m: &Mapping,
        parent: &str,
        regions: usize,
        ok: &mut bool,
    ) -> Option<FollowDemand> {
        let path = field_path(parent, "follow_demand");
        let v = m.get("follow_demand")?;
        let fields = match untag(v) {
            Value::Bool(true) => return Some(FollowDemand::DEFAULT),
            Value::Bool(false) | Value::Null => return None,
            Value::Mapping(f) => f,
            _ => {
                let msg = format!(
                    "invalid follow_demand {} (expected true, false or {{floor: 0.05, max_step: 0.1}})",
                    go_fmt(v)
                );
                self.sink.push(&path, msg);
                *ok = false;
                return None;
            }
        };
        let mut follow = FollowDemand::DEFAULT;
        for (k, v) in fields {
            let name = untag(k).as_str().unwrap_or_default();
            let at = field_path(&path, name);
            let n = match untag(v) {
                Value::Number(n) => n.as_f64(),
                _ => None,
            };
            let most_floor = 1.0 / regions.max(1) as f64;
            let parsed = match name {
                "floor" => n.filter(|f| (0.0..=most_floor).contains(f)).map(|f| follow.floor = f).ok_or_else(|| {
                    format!("invalid floor {} (expected a number from 0 to 1 / the regions listed = {most_floor})", go_fmt(v))
                }),
                "max_step" => n.filter(|s| *s > 0.0 && *s <= 1.0).map(|s| follow.max_step = s).ok_or_else(|| {
                    format!("invalid max_step {} (expected a number above 0, at most 1)", go_fmt(v))
                }),
                _ => Err(format!("unknown key '{}' in follow_demand (expected floor or max_step)", go_fmt(k))),
            };
            if let Err(msg) = parsed {
                self.sink.push(&at, msg);
                *ok = false;
            }
        }
        Some(follow)
    }

    /// One share: a number above 0, at most 1 (reported otherwise).
    fn share(&mut self, v: &Value, path: &str) -> Option<f64> {
        let n = match untag(v) {
            Value::Number(n) => n.as_f64(),
            _ => None,
        };
        let valid = n.filter(|s| *s > 0.0 && *s <= 1.0);
        if valid.is_none() {
            self.sink.push(
                path,
                format!(
                    "invalid share {} (expected a number above 0, at most 1)",
                    go_fmt(v)
                ),
            );
        }
        valid
    }
}

/// Whether `name` may name a region (as the `REGION` setting accepts).
pub fn valid_region(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}
