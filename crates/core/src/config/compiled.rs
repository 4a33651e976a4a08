//! The compiled, immutable configuration: domain → descriptor tree, indexed for matching.
//!
//! Matching follows envoyproxy/ratelimit exactly (`docs/design/contract.md#matching`): at each
//! level the exact composite key `key_value` first, then the first wildcard pattern in config
//! order, then the key-only default; no backtracking; a limit applies only on the node matched by
//! the request's last entry.

use std::collections::HashMap;
use std::sync::Arc;

use super::error::ConfigError;
pub use super::failure_mode::FailureMode;
use super::predicate::Predicate;
use super::shedding::Shedding;
use super::unit::Unit;
use crate::algorithm::calendar::{Calendar, Zone};
use crate::algorithm::{Algorithm, LimitSpec, Window};

/// What matching needs from one request entry. The limiter's request type implements it, so this
/// module stays free of request and wire types.
pub trait EntryRef {
    /// The entry's key.
    fn key(&self) -> &str;
    /// The entry's value (may be empty).
    fn value(&self) -> &str;
}

impl<T: EntryRef + ?Sized> EntryRef for &T {
    fn key(&self) -> &str {
        (**self).key()
    }
    fn value(&self) -> &str {
        (**self).value()
    }
}

/// A map of names looked up on every request (domains, composite keys). Only the configuration
/// inserts into it, so the hash need not resist chosen keys, and ahash costs a fraction of the
/// standard `SipHash` on these short strings.
pub(crate) type Map<V> = HashMap<String, V, ahash::RandomState>;

/// The whole loaded configuration: every domain, compiled. Cheap to share behind an `Arc`.
#[derive(Debug, Default)]
pub struct RateLimitConfig {
    pub(crate) domains: Map<Domain>,
    /// What was accepted but looks like a mistake (e.g. a limit with no `requests_per_unit`).
    pub(crate) warnings: Vec<ConfigError>,
}

/// One domain's descriptor tree.
#[derive(Debug)]
pub struct Domain {
    /// The domain name from the YAML `domain:` field.
    pub name: String,
    pub(crate) root: Level,
    /// The `priority_key`s of the domain's limits: a request entry with one of these keys names
    /// the request's class and is taken out of its descriptor before matching
    /// ([`super::shedding`]). Empty for a domain without priority classes (every Go config).
    pub priority_keys: Vec<String>,
    /// `default_limit` (ratelimitd extension): the limit of every descriptor that matches no
    /// node, counted per distinct descriptor; `None` = such descriptors are not limited (Go).
    pub default_limit: Option<Arc<Limit>>,
    /// `max_request_limit` (ratelimitd extension): the highest rate a request's own `limit`
    /// (Envoy Gateway's per-request limit) may set; `None` = any (Go).
    pub max_request_limit: Option<RequestLimitCap>,
    /// Whether some node or limit of the domain has a `when:` predicate (ratelimitd extension);
    /// `false` keeps matching on the path that evaluates nothing.
    pub has_predicates: bool,
}

/// The highest rate a request may ask for its own descriptor: `requests_per_unit` per `unit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimitCap {
    /// Requests per unit.
    pub requests_per_unit: u32,
    /// The unit.
    pub unit: Unit,
}

impl RequestLimitCap {
    /// The rate a request asking for `requests_per_unit` per `unit` is counted at: what it asked
    /// when that is at most the cap (compared per second, exactly), else the cap itself, unit
    /// included.
    pub fn apply(self, requests_per_unit: u32, unit: Unit) -> (u32, Unit) {
        let asked = u128::from(requests_per_unit) * u128::from(self.unit.seconds());
        let allowed = u128::from(self.requests_per_unit) * u128::from(unit.seconds());
        if asked > allowed {
            (self.requests_per_unit, self.unit)
        } else {
            (requests_per_unit, unit)
        }
    }
}

/// One level of the tree: its nodes indexed by composite key, its `value_regex` nodes and its
/// wildcard nodes, each in config order.
#[derive(Debug, Default)]
pub(crate) struct Level {
    /// Composite key (`key`, or `key_value`) → node. Wildcard nodes are in here too, so a request
    /// value equal to the literal pattern matches exactly (a Go quirk kept on purpose).
    pub(crate) by_key: Map<Node>,
    /// Composite keys of the nodes whose composite key contains `*`, in config order, with the
    /// pattern pre-split on `*`.
    pub(crate) wildcards: Vec<(String, Vec<String>)>,
    /// The nodes with a `value_regex`, in config order. Kept out of `by_key`: no request value,
    /// whatever it holds, can select one but by matching its pattern.
    pub(crate) regexes: Vec<Node>,
    /// Every node in config order, so listings (`/rlconfig`) are deterministic.
    pub(crate) order: Vec<Slot>,
}

/// Where one node of a [`Level`] is kept.
#[derive(Debug)]
pub(crate) enum Slot {
    /// In `by_key`, under this composite key.
    Keyed(String),
    /// In `regexes`, at this index.
    Regex(usize),
}

/// The pattern of a `value_regex` entry (ratelimitd extension), compiled once at load.
#[derive(Debug)]
pub struct ValueRegex {
    /// The pattern as written; it must match the whole value.
    pub pattern: String,
    /// `regex_key: shared`: every value the pattern matches counts against one counter;
    /// `false` (`per_value`, the default) gives each distinct value its own, as `*` does.
    pub shared: bool,
    /// `key=~pattern`: how the level is named in the config path, the stats key and (when
    /// `shared`) the counter key.
    pub name: String,
    /// `^(?:pattern)$`, with the compiled-size limits of load.
    pub(crate) compiled: regex::Regex,
}

/// One descriptor node.
#[derive(Debug)]
pub struct Node {
    /// The descriptor key.
    pub key: String,
    /// The descriptor value; empty for a key-only default; contains `*` for a wildcard.
    pub value: String,
    /// The limit on this node, if any.
    pub limit: Option<Arc<Limit>>,
    /// `share_threshold: true`: every value this wildcard matches shares one counter.
    pub share_threshold: bool,
    /// `value_to_metric: true`: the stats key carries the runtime value of this level.
    pub value_to_metric: bool,
    /// `value_regex` (ratelimitd extension): the node matches values by this pattern; its
    /// `value` is then empty.
    pub value_regex: Option<ValueRegex>,
    /// `when` (ratelimitd extension): the node matches only requests this predicate holds for.
    pub when: Option<Predicate>,
    pub(crate) children: Level,
}

/// A configured limit, with everything the limiter needs to apply and report it.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// The stats key / config path, e.g. `test-domain.key1_value1.subkey1`
    /// (`docs/design/contract.md#stats-keys`).
    pub full_key: String,
    /// `full_key` sanitised for stats: the name this limit's counters are reported under unless
    /// `detailed_metric` or `value_to_metric` ask for runtime values. Computed once, at load.
    pub stats_key: String,
    /// `rate_limit.name`; empty when not set.
    pub name: String,
    /// `rate_limit.requests_per_unit` (0 blocks everything).
    pub requests_per_unit: u32,
    /// `rate_limit.unit`; `None` only for unlimited limits.
    pub unit: Option<Unit>,
    /// `rate_limit.unlimited`.
    pub unlimited: bool,
    /// Names of limits this one replaces when both match in one request.
    pub replaces: Vec<String>,
    /// `shadow_mode` of the node carrying this limit.
    pub shadow_mode: bool,
    /// `quota_mode` of the node carrying this limit.
    pub quota_mode: bool,
    /// `quota_group` (ratelimitd extension) of the node carrying this limit: the quota
    /// descriptors of a request naming one group are over when any of them is
    /// (`docs/design/contract.md#overall-code`); `None` when not written.
    pub quota_group: Option<String>,
    /// `detailed_metric` of the node carrying this limit.
    pub detailed_metric: bool,
    /// `metadata` of the node carrying this limit, as a JSON object (returned in dynamic metadata).
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// `rate_limit.failure_mode` (ratelimitd extension): the answer when the store fails;
    /// `None` when not written (the service's `DEFAULT_FAILURE_MODE` applies).
    pub failure_mode: Option<FailureMode>,
    /// `rate_limit.local_share` (ratelimitd extension): the share of the limit this instance
    /// enforces on its own under `failure_mode: local`; `None` = one over the live instances.
    pub local_share: Option<f64>,
    /// `rate_limit.regions` (ratelimitd extension): the limit is worldwide and each region
    /// enforces its share of it on its own store ([`crate::region`]); `None` = not regional.
    pub regions: Option<Arc<crate::region::Regions>>,
    /// `rate_limit.when` (ratelimitd extension): the limit applies only to requests this
    /// predicate holds for; `None` = always.
    pub when: Option<Arc<Predicate>>,
    /// `rate_limit.algorithm` (ratelimitd extension; `fixed_window` by default, as Go).
    pub algorithm: Algorithm,
    /// `rate_limit.burst` (ratelimitd extension): bucket capacity; `None` = `requests_per_unit`.
    pub burst: Option<u32>,
    /// `rate_limit.unit_multiplier` (ratelimitd extension): the window is this many units (≥ 1).
    pub unit_multiplier: u32,
    /// `rate_limit.lease` (ratelimitd extension): how many hits an instance may reserve from the
    /// shared counter at once (`store::lease`); `None` = `LEASE_DEFAULT_SIZE`, `Some(0)` = off.
    pub lease: Option<u32>,
    /// `rate_limit.split` (ratelimitd extension): the counter is `N` sub-keys in different
    /// Redis Cluster slots, each request charging one of them against its share of the limit
    /// ([`crate::limiter::split`]); `None` = one key.
    pub split: Option<u32>,
    /// `rate_limit.usage: report` (ratelimitd extension): every call with hits is usage
    /// reported after the fact ([`crate::algorithm::report`]), counted even past the limit and
    /// never refused; a call of 0 hits is the request-time check.
    pub usage_report: bool,
    /// `rate_limit.usage.estimate` (ratelimitd extension, with `usage: report`): what the
    /// request-time check charges, policed, before the usage is known; the report then trues it
    /// up ([`crate::limiter::hits::true_up`]). `None` = the check charges nothing.
    pub usage_estimate: Option<u32>,
    /// `rate_limit.calendar` with `time_zone` (ratelimitd extensions): the zone whose calendar
    /// the window follows (a real month, a week from Monday); `None` = Go's epoch windows.
    pub calendar: Option<&'static Zone>,
    /// The other limits of `rate_limits` (ratelimitd extension) when this is its first entry: all
    /// apply to the same descriptor, and the most restrictive decision is reported. Empty for
    /// `rate_limit` and for the other entries themselves.
    pub also: Vec<Arc<Limit>>,
    /// The document it was compiled from (`config.basic.yaml`, `policy-db/tenants`), so a listing
    /// can tell an operator's files from stored rules; empty for an override's limit.
    pub file: Arc<str>,
    /// `priorities` and `soft` (ratelimitd extensions, [`super::shedding`]); `None` for a plain
    /// limit and for an override's.
    pub shedding: Option<Arc<Shedding>>,
}

impl Limit {
    /// The window: the unit times `unit_multiplier`, following the calendar of [`Self::calendar`]
    /// when set; `None` for an unlimited limit (no unit).
    pub fn window(&self) -> Option<Window> {
        let unit = self.unit?;
        let window = Window::from_secs(
            unit.seconds()
                .saturating_mul(u64::from(self.unit_multiplier)),
        )?;
        Some(match (self.calendar, unit.calendar()) {
            (Some(zone), Some(unit)) => {
                window.with_calendar(Calendar::new(unit, self.unit_multiplier, zone))
            }
            _ => window,
        })
    }

    /// What the algorithms need of this limit; `None` for an unlimited limit.
    pub fn spec(&self) -> Option<LimitSpec> {
        Some(LimitSpec {
            algorithm: self.algorithm,
            limit: u64::from(self.requests_per_unit),
            window: self.window()?,
            burst: u64::from(self.burst.unwrap_or(self.requests_per_unit)),
        })
    }

    /// This limit followed by the other limits of its descriptor (`rate_limits`).
    pub fn all(self: &Arc<Limit>) -> impl Iterator<Item = &Arc<Limit>> {
        std::iter::once(self).chain(self.also.iter())
    }
}

/// How one request entry was matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    /// `key_value` matched a node exactly.
    Exact,
    /// A wildcard pattern matched.
    Wildcard,
    /// A `value_regex` pattern matched (ratelimitd extension).
    Regex,
    /// The key-only default matched.
    Default,
}

/// One level of a successful match: the node and how it was reached.
#[derive(Debug, Clone, Copy)]
pub struct MatchedLevel<'a> {
    /// The node matched at this level.
    pub node: &'a Node,
    /// How it was matched.
    pub kind: MatchKind,
}

/// The result of matching a descriptor: the limit on the last node, and the path that led to it
/// (one level per request entry), which the cache key (`share_threshold`) and stats keys need.
#[derive(Debug, Clone)]
pub struct Match<'a> {
    /// The limit found.
    pub limit: &'a Arc<Limit>,
    /// The node matched for each request entry, in order.
    pub path: Vec<MatchedLevel<'a>>,
}

impl RateLimitConfig {
    /// The domain called `name`, if configured.
    pub fn domain(&self, name: &str) -> Option<&Domain> {
        self.domains.get(name)
    }

    /// What compiled but looks like a mistake, each naming file and YAML path; the loader logs
    /// them at WARN and `validate` prints them.
    pub fn warnings(&self) -> &[ConfigError] {
        &self.warnings
    }

    /// How many domains are configured.
    pub fn domain_count(&self) -> usize {
        self.domains.len()
    }

    /// Every domain, sorted by name.
    pub fn domains(&self) -> impl Iterator<Item = &Domain> {
        let mut all: Vec<&Domain> = self.domains.values().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all.into_iter()
    }

    /// Every limit in the config: domains by name, then each tree depth-first in config order,
    /// then the domain's `default_limit`.
    pub fn limits(&self) -> Vec<&Limit> {
        let mut out = Vec::new();
        for domain in self.domains() {
            domain.root.collect_limits(&mut out);
            out.extend(domain.default_limit.as_deref());
        }
        out
    }
}

impl Level {
    /// Adds `node` under `composite`, indexing it as a wildcard when the key contains `*`.
    /// The caller has checked that `composite` is new at this level.
    pub(crate) fn insert(&mut self, composite: String, node: Node) {
        if composite.contains('*') {
            let parts = composite.split('*').map(str::to_owned).collect();
            self.wildcards.push((composite.clone(), parts));
        }
        self.order.push(Slot::Keyed(composite.clone()));
        self.by_key.insert(composite, node);
    }

    /// Adds a node that has a `value_regex`, after the regex nodes already here.
    pub(crate) fn insert_regex(&mut self, node: Node) {
        self.order.push(Slot::Regex(self.regexes.len()));
        self.regexes.push(node);
    }

    /// The nodes of this level, in config order.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.order.iter().filter_map(|slot| match slot {
            Slot::Keyed(k) => self.by_key.get(k),
            Slot::Regex(i) => self.regexes.get(*i),
        })
    }

    /// Whether a node or limit at this level or below has a `when:` predicate.
    pub(crate) fn has_predicates(&self) -> bool {
        self.nodes().any(|n| {
            n.when.is_some()
                || n.limit
                    .as_ref()
                    .is_some_and(|l| l.all().any(|l| l.when.is_some()))
                || n.children.has_predicates()
        })
    }

    /// Whether this level has no node at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Appends the limits of this level and below, depth-first in config order.
    pub(crate) fn collect_limits<'a>(&'a self, out: &mut Vec<&'a Limit>) {
        for node in self.nodes() {
            if let Some(limit) = &node.limit {
                out.extend(limit.all().map(|l| &**l));
            }
            node.children.collect_limits(out);
        }
    }
}

impl Node {
    /// The nodes one level below this one, in config order.
    pub fn children(&self) -> impl Iterator<Item = &Node> {
        self.children.nodes()
    }
}

impl Domain {
    /// The top-level nodes of this domain, in config order.
    pub fn descriptors(&self) -> impl Iterator<Item = &Node> {
        self.root.nodes()
    }
}
