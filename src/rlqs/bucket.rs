//! A quota bucket as the limiter sees it: the report's `BucketId` entries sorted by key, held once
//! as the bucket's demand name ([`BucketKey`]), become one descriptor of the stream's domain, planned by the limiter's own [`plan`]
//! (request overrides aside: stored overrides, wildcards, defaults, `replaces` and `unlimited` all
//! apply exactly as for `ShouldRateLimit`). The matched limit is the bucket's global budget.

use std::sync::Arc;

use crate::grpc::pb::envoy::service::rate_limit_quota::v3 as pb;
use crate::policy::OverrideIndex;
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::config::{Domain, FailureMode};
use ratelimitd_core::limiter::plan::{self, Plan};
use ratelimitd_core::limiter::{Descriptor, Entry, KeyBuilder, Request};

/// A bucket's identity, held once per stream: the name of its demand on the board
/// (`{prefix}rlqs_demand|len:domain` then `|len:key|len:value` per entry, sorted by key — every
/// piece length-prefixed, so the name is injective over domain and entries and no value can pose
/// as a separator). The entries are read back from the name when a descriptor or a `BucketId`
/// is needed, so neither is kept beside it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BucketKey {
    name: Arc<str>,
    /// Where the entries start in `name`.
    entries_at: usize,
}

impl BucketKey {
    /// The key of `entries` (sorted by key, each key and value non-empty) of `domain`.
    pub fn new(prefix: &str, domain: &str, entries: &[(&str, &str)]) -> BucketKey {
        let mut name = format!("{prefix}rlqs_demand|{}:{domain}", domain.len());
        let entries_at = name.len();
        for (k, v) in entries {
            name.push_str(&format!("|{}:{k}|{}:{v}", k.len(), v.len()));
        }
        BucketKey {
            name: name.into(),
            entries_at,
        }
    }

    /// The name of the bucket's shared demand (the Redis hash of the fleet's board).
    pub fn demand_key(&self) -> &str {
        &self.name
    }

    /// The shared name itself (the memory board keys its buckets by it, without a copy).
    pub fn shared(&self) -> Arc<str> {
        self.name.clone()
    }

    /// The entries, sorted by key.
    pub fn entries(&self) -> Vec<(&str, &str)> {
        let mut rest = self.name.get(self.entries_at..).unwrap_or_default();
        let mut out = Vec::new();
        // Each turn reads one `|len:key|len:value` pair and shortens `rest`.
        while let Some((k, after)) = piece(rest).and_then(|(k, r)| Some((k, piece(r)?))) {
            out.push((k, after.0));
            rest = after.1;
        }
        out
    }

    /// The protocol's `BucketId` of these entries (for the actions sent back).
    pub fn id(&self) -> pb::BucketId {
        pb::BucketId {
            bucket: self
                .entries()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// A 48-bit hash of the name (FNV-1a), the same in every process: how the change feed names
    /// the bucket (48 bits travel exactly through Lua's numbers; two buckets that collide only
    /// cost each other an extra board read).
    pub fn fingerprint(&self) -> u64 {
        let hash = self.name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        hash & 0xffff_ffff_ffff
    }

    /// Bytes held for the identity (the gauge of what buckets cost).
    pub fn bytes(&self) -> usize {
        self.name.len()
    }
}

/// `|len:text` at the start of `s`: the text and what follows it.
fn piece(s: &str) -> Option<(&str, &str)> {
    let s = s.strip_prefix('|')?;
    let (len, rest) = s.split_once(':')?;
    let len: usize = len.parse().ok()?;
    Some((rest.get(..len)?, rest.get(len..)?))
}

/// What a bucket's limit allows, globally (before it is divided among the reporters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Budget {
    /// `unlimited: true` (or a descriptor without a unit): `ALLOW_ALL`.
    AllowAll,
    /// A limit of zero requests: `DENY_ALL`.
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
pub(crate) fn budget(
    domain: &Domain,
    name: &str,
    key: &BucketKey,
    stored: &OverrideIndex,
    keys: &KeyBuilder,
    now: Timestamp,
) -> Option<Budget> {
    let req = Request {
        domain: name.to_string(),
        descriptors: vec![Descriptor {
            entries: key
                .entries()
                .into_iter()
                .map(|(k, v)| Entry::new(k, v))
                .collect(),
            ..Descriptor::default()
        }],
        ..Request::default()
    };
    // Without a request override, planning cannot fail; an error would mean no limit.
    // The bucket's budget is the limit as configured: no soft zone is drawn.
    let still = ratelimitd_core::random::Fixed(0.0);
    let plans = plan::plan(
        Some(domain),
        stored,
        &req,
        keys,
        now,
        &still,
        FailureMode::default(),
    )
    .ok()?;
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

#[cfg(test)]
mod tests {
    use super::BucketKey;

    #[test]
    fn the_key_holds_the_entries_once_and_gives_them_back() {
        // Separators and digits inside keys and values cannot confuse the reading.
        let entries = [("a|1:", "x|2:yy"), ("name", "api"), ("z", "é:|")];
        let key = BucketKey::new("p:", "do|main", &entries);
        assert_eq!(key.entries(), entries);
        assert_eq!(
            key.demand_key(),
            "p:rlqs_demand|7:do|main|4:a|1:|6:x|2:yy|4:name|3:api|1:z|4:é:|"
        );
        let id = key.id();
        assert_eq!(id.bucket.len(), 3);
        assert_eq!(id.bucket["name"], "api");
        // Another split of the same characters is another bucket.
        let other = BucketKey::new("p:", "do|main", &[("a|1:", "x"), ("2:yy", "v")]);
        assert_ne!(other, key);
        // The fingerprint is fixed (every instance of a fleet computes the same) and under 2^48.
        assert_eq!(
            BucketKey::new("", "d", &[("k", "v")]).fingerprint(),
            248_991_308_879_697
        );
        assert_ne!(key.fingerprint(), other.fingerprint());
        assert!(key.fingerprint() < 1 << 48);
    }
}
