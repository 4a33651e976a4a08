//! A quota bucket as the limiter sees it: the report's `BucketId` entries sorted by key become
//! one descriptor of the stream's domain, planned by the limiter's own [`plan`](crate::limiter::plan)
//! (request overrides aside: stored overrides, wildcards, defaults, `replaces` and `unlimited` all
//! apply exactly as for `ShouldRateLimit`). The matched limit is the bucket's global budget.

use std::collections::BTreeMap;

use crate::clock::Timestamp;
use crate::config::Domain;
use crate::limiter::plan::{self, Plan};
use crate::limiter::{Descriptor, Entry, KeyBuilder, Request};
use crate::policy::OverrideIndex;

/// A bucket's identity: its entries sorted by key (a `BucketId` map has no order).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BucketKey(pub Vec<(String, String)>);

impl BucketKey {
    /// The key of a report's `bucket` map; `None` when it is empty or has an empty key or value
    /// (the protocol requires both non-empty).
    pub fn of(bucket: &std::collections::HashMap<String, String>) -> Option<BucketKey> {
        let sorted: BTreeMap<&String, &String> = bucket.iter().collect();
        let ok = !sorted.is_empty() && sorted.iter().all(|(k, v)| !k.is_empty() && !v.is_empty());
        ok.then(|| {
            BucketKey(
                sorted
                    .into_iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        })
    }

    /// A name for the bucket's shared demand, injective over domain and entries (every piece is
    /// length-prefixed, so no value can pose as a separator).
    pub fn demand_key(&self, prefix: &str, domain: &str) -> String {
        let mut key = format!("{prefix}rlqs_demand|{}:{domain}", domain.len());
        for (k, v) in &self.0 {
            key.push_str(&format!("|{}:{k}|{}:{v}", k.len(), v.len()));
        }
        key
    }
}

/// What a bucket's limit allows, globally (before it is divided among the reporters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// `unlimited: true` (or a descriptor without a unit): ALLOW_ALL.
    AllowAll,
    /// A limit of zero requests: DENY_ALL.
    DenyAll,
    /// `per_window` requests per `window_secs`, bursting to `burst`.
    Rate {
        /// Requests per window (`requests_per_unit`).
        per_window: u64,
        /// The window in seconds (unit × `unit_multiplier`).
        window_secs: u64,
        /// The bucket capacity (`burst`, else `requests_per_unit`).
        burst: u64,
    },
}

/// The budget of bucket `key` in `domain` at `now` (`None`: no limit matches). Of several limits
/// on one descriptor (`rate_limits`), the one with the lowest rate per second is the budget.
pub fn budget(
    domain: &Domain,
    name: &str,
    key: &BucketKey,
    (stored, keys): (&OverrideIndex, &KeyBuilder),
    now: Timestamp,
) -> Option<Budget> {
    let req = Request {
        domain: name.to_string(),
        descriptors: vec![Descriptor {
            entries: key.0.iter().map(|(k, v)| Entry::new(k, v)).collect(),
            ..Descriptor::default()
        }],
        ..Request::default()
    };
    // Without a request override, planning cannot fail; an error would mean no limit.
    let plans = plan::plan(Some(domain), stored, &req, keys, now).ok()?;
    match plans.descriptors.into_iter().next()? {
        Plan::NoLimit => None,
        Plan::Unlimited => Some(Budget::AllowAll),
        Plan::Limited(l) => l
            .limit
            .all()
            .filter_map(|l| l.spec())
            .map(|s| {
                if s.limit == 0 {
                    Budget::DenyAll
                } else {
                    Budget::Rate {
                        per_window: s.limit,
                        window_secs: s.window.secs(),
                        burst: s.burst.max(1),
                    }
                }
            })
            .min_by(|a, b| per_second(a).total_cmp(&per_second(b))),
    }
}

fn per_second(b: &Budget) -> f64 {
    match b {
        Budget::AllowAll => f64::INFINITY,
        Budget::DenyAll => 0.0,
        Budget::Rate {
            per_window,
            window_secs,
            ..
        } => *per_window as f64 / *window_secs as f64,
    }
}
