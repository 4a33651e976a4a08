//! Step 2 of a decision: resolve every descriptor once into a [`Plan`] — the limits that apply (the
//! request's override, else a stored override from the policy database, else the config match; then
//! `replaces` and `unlimited` across the whole request: `docs/design/contract.md#matching`,
//! `#request-overrides`, `#replaces` and `#unlimited`), the hits it adds (normalised and clamped
//! here and nowhere else, by the rule of [`super::hits`]), the stats key it reports under, and one
//! store [`Op`] per limit with its cache key. Nothing later rewrites a plan: the outcomes of its
//! ops are folded next to it.

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use super::OverrideIndex;
use super::RequestError;
use super::hits;
use super::key::KeyBuilder;
use super::request::{Descriptor, Entry, Request};
use super::split::{Marker, SubKey};
use super::stats_key;
use crate::algorithm::{Algorithm, LimitSpec};
use crate::clock::Timestamp;
use crate::config::predicate::{Gate, Judge};
use crate::config::{Domain, EntryRef, FailureMode, Limit, Lookup};
use crate::random::Random;
use crate::store::Op;

mod overrides;
mod shed;

use overrides::{OverrideRate, override_limit};
pub use shed::Shed;

/// What applies to one descriptor.
#[derive(Debug, Clone)]
pub enum Plan<'a> {
    /// No limit: none configured, unknown domain, or replaced by another limit of the request.
    NoLimit,
    /// `unlimited: true`: always OK, never counted.
    Unlimited,
    /// Limits to apply.
    Limited(Limited<'a>),
}

/// A descriptor with limits: the first (configured or the override) and, for `rate_limits`, its
/// siblings ([`Limit::all`]), each with one op in the request's batch.
#[derive(Debug, Clone)]
pub struct Limited<'a> {
    /// The descriptor's limit; [`Limit::all`] lists every limit that applies.
    pub limit: Arc<Limit>,
    /// The hits this descriptor adds: its own `hits_addend` when set (0 checks only), else the
    /// request's, where 0 means 1; clamped per limit ([`super::hits::clamp`]), this is the most
    /// that reached any of its limits.
    pub hits: u64,
    /// `is_negative_hits`: the hits are given back (a refund) instead of added.
    pub refund: bool,
    /// The hits are usage reported after the fact ([`crate::algorithm::report`]): counted even
    /// past the limit, never over it.
    pub report: bool,
    /// The ops charge the limit's usage estimate (a check of `usage: {mode: report, estimate}`,
    /// [`super::hits::Charge::Estimate`]): a refused request gives it back, as it releases its
    /// concurrency slots.
    pub estimate: bool,
    /// The usage a report brought (clamped, before any true-up), which
    /// `ratelimitd_usage_reported_total` counts; `None` for every other call.
    pub usage: Option<u64>,
    /// The (sanitised) stats key its counters are reported under (`stats_key`).
    pub stats_key: Cow<'a, str>,
    /// Where this descriptor's ops (and so its outcomes) sit in the request's batch.
    pub ops: Range<usize>,
    /// How the request stands against each of its limits that sheds (`priorities`, `soft`), in
    /// [`Limit::all`] order; `None` for a plain limit.
    pub shed: Vec<Option<Shed>>,
    /// The share each split limit's op was judged against (its sub-key's, [`super::split`]), in
    /// [`Limit::all`] order; `None` for a limit of one key, empty when none is split.
    pub shares: Vec<Option<u64>>,
}

impl Limited<'_> {
    /// The share `limit` (one of [`Limit::all`]) was judged against when it is split: Go's
    /// stats of the descriptor count against it, as the sub-key's counter was.
    pub fn share_of(&self, limit: &Arc<Limit>) -> Option<u64> {
        // No limit of the descriptor is split (the usual case): nothing to look up.
        if self.shares.is_empty() {
            return None;
        }
        let index = self.limit.all().position(|x| Arc::ptr_eq(x, limit))?;
        self.shares.get(index).copied().flatten()
    }
}

/// Every descriptor's plan, and the one batch of store ops they need.
#[derive(Debug, Clone)]
pub struct Plans<'a> {
    /// One plan per request descriptor, in order.
    pub descriptors: Vec<Plan<'a>>,
    /// One op per applicable limit, in descriptor order; [`Limited::ops`] indexes it.
    pub ops: Vec<Op>,
    /// Per op, the length of its key's counter identity across windows
    /// ([`KeyBuilder::build_split`]), which a limit with `regions` keeps its share under; set up
    /// to the last such op (empty when the request has none: plain limits allocate nothing).
    pub identities: Vec<usize>,
    /// Per op of a split limit, which sub-key it charges and where its marker sits
    /// ([`super::split`]); set up to the last such op (empty when the request has none).
    pub splits: Vec<Option<Marker>>,
    /// What the domain's own rules did to the request's descriptors, for the per-domain metrics.
    pub tally: Tally,
}

/// Counts of one request's descriptors that the per-domain rules touched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Descriptors without an override that matched no node of the tree: limited by the
    /// domain's `default_limit` when it has one, else not limited (Go).
    pub unmatched: u32,
    /// Request overrides (`limit` on the descriptor) above the domain's `max_request_limit`,
    /// counted at that cap instead.
    pub capped: u32,
    /// `when:` predicates that failed at run time (answered by their `failure_mode`).
    pub predicate_errors: u32,
    /// Descriptors looked up in a non-empty index of stored overrides (the policy database's
    /// in-memory view).
    pub stored_lookups: u32,
    /// Of those, the ones a stored override was found for.
    pub stored_found: u32,
}

/// Plans every descriptor of `req` against its `domain` of the config (`None`: not configured)
/// and the `stored` overrides active at `now`, keying counters with `keys`; soft limits draw
/// from `random`. A `when:` predicate that fails at run time without a `failure_mode` of its own
/// answers by `default_mode` (the service's `DEFAULT_FAILURE_MODE`).
pub fn plan<'a>(
    domain: Option<&'a Domain>,
    stored: &OverrideIndex,
    req: &'a Request,
    keys: &KeyBuilder,
    now: Timestamp,
    random: &dyn Random,
    default_mode: FailureMode,
) -> Result<Plans<'a>, RequestError> {
    let mut plans = Plans {
        descriptors: Vec::with_capacity(req.descriptors.len()),
        ops: Vec::with_capacity(req.descriptors.len()),
        identities: Vec::new(),
        splits: Vec::new(),
        tally: Tally::default(),
    };
    let Some(domain) = domain else {
        // An unknown domain is not an error: every descriptor is OK with no limit.
        plans.descriptors = vec![Plan::NoLimit; req.descriptors.len()];
        return Ok(plans);
    };
    let matched = match_all(domain, stored, req, now, default_mode, &mut plans.tally)?;
    let replaced = replaced_names(&matched);
    for (d, m) in req.descriptors.iter().zip(matched) {
        let plan = match m {
            None => Plan::NoLimit,
            // Unlimited wins over replaced, as in the Go service (it marks unlimited first).
            Some(Matched { limit, .. }) if limit.unlimited || limit.unit.is_none() => {
                Plan::Unlimited
            }
            Some(Matched { limit, .. })
                if limit
                    .all()
                    .any(|l| !l.name.is_empty() && replaced.contains(&l.name)) =>
            {
                Plan::NoLimit
            }
            Some(m) => plans.add(req, d, m, keys, now, random),
        };
        plans.descriptors.push(plan);
    }
    Ok(plans)
}

/// A descriptor's match before `replaces` and `unlimited` are settled.
struct Matched<'a> {
    limit: Arc<Limit>,
    /// (key, value) per entry, as counted: the wildcard pattern on `share_threshold` levels,
    /// (`key=~pattern`, empty) on `regex_key: shared` levels.
    key_entries: Vec<(&'a str, &'a str)>,
    stats_key: Cow<'a, str>,
    /// The entry naming the request's class, taken out of the match ([`shed::class_entry`]).
    class: Option<&'a Entry>,
}

impl<'a> Plans<'a> {
    /// Adds the ops of a matched descriptor and returns its plan.
    fn add(
        &mut self,
        req: &Request,
        d: &Descriptor,
        m: Matched<'a>,
        keys: &KeyBuilder,
        now: Timestamp,
        random: &dyn Random,
    ) -> Plan<'a> {
        let ask = Ask {
            req,
            d,
            m: &m,
            keys,
            now,
            random,
            charging: Charging::of(req, d, &m),
        };
        let (start, mut most) = (self.ops.len(), 0);
        let (mut sheds, mut shares) = (Vec::new(), Vec::new());
        for (i, l) in m.limit.all().enumerate() {
            // Limits with a unit always have a spec; `unit_multiplier` 0 is refused at load.
            let Some(spec) = l.spec() else { continue };
            let (hits, shed, share) = self.add_limit(&ask, i, l, spec);
            most = most.max(hits);
            from_first_some(&mut sheds, i, shed);
            from_first_some(&mut shares, i, share);
        }
        let c = ask.charging;
        Plan::Limited(Limited {
            limit: m.limit,
            hits: most,
            refund: c.refund,
            report: c.report,
            estimate: matches!(c.charge, hits::Charge::Estimate(_)),
            usage: c.reported,
            stats_key: m.stats_key,
            ops: start..self.ops.len(),
            shed: sheds,
            shares,
        })
    }

    /// Adds the op of limit `l` (the `i`-th of the descriptor's limits, whose spec is `spec`):
    /// its class's share when it sheds, its sub-key when it is split, its key and what the op
    /// asks of the store. Returns the op's hits, its shedding verdict and its split share.
    fn add_limit(
        &mut self,
        ask: &Ask<'_, '_>,
        i: usize,
        l: &Limit,
        spec: LimitSpec,
    ) -> (u64, Option<Shed>, Option<u64>) {
        let (req, d, m, random) = (ask.req, ask.d, ask.m, ask.random);
        let Charging {
            asked,
            charge,
            reported,
            refund,
            report,
        } = ask.charging;
        let (spec, shed) = match shed::judge(l, spec, m.class, d.priority.as_deref(), random) {
            Some((spec, shed)) => (spec, Some(shed)),
            None => (spec, None),
        };
        let holder = (spec.algorithm == Algorithm::Concurrency)
            .then(|| d.holder.clone().unwrap_or_else(anonymous_holder));
        // A split limit charges one sub-key against its share (`split` refuses shedding, so
        // `spec` is the limit's own here).
        let whole = spec;
        let sub = (l.split).map(|n| SubKey::choose(n, holder.as_deref(), random));
        let spec = sub.map_or(spec, |sub| sub.spec(&whole));
        let entries = m.key_entries.iter().copied();
        let (key, identity, marker) =
            (ask.keys).build_sub(i > 0, sub, &req.domain, entries, &spec, ask.now);
        if let (Some(sub), Some(at)) = (sub, marker) {
            self.splits.resize(self.ops.len(), None);
            self.splits.push(Some(Marker { sub, whole, at }));
        }
        if l.regions.is_some() {
            self.identities.resize(self.ops.len(), 0);
            self.identities.push(identity);
        }
        let estimated = matches!(charge, hits::Charge::Estimate(_));
        // Only a leaky bucket can shape; every other op polices, whatever the request asked.
        let shapes = spec.algorithm == Algorithm::LeakyBucket && !refund && !report && !estimated;
        // A concurrency limit has no usage to report: its op takes a slot as any request.
        let reports = report && spec.algorithm != Algorithm::Concurrency;
        let hits = op_hits(charge, &spec, asked, reported, reports, d.refund);
        self.ops.push(Op {
            key,
            spec,
            hits,
            refund,
            max_wait: if shapes { req.max_wait } else { Duration::ZERO },
            // A lease reserves hits against one limit; a shedding op's limit is per request.
            // An estimate reaches the counter, so that its true-up corrects what it took.
            // A split limit never leases (not even `LEASE_DEFAULT_SIZE`): `split` says why.
            lease: if shed.is_none() && !estimated && sub.is_none() {
                l.lease
            } else {
                Some(0)
            },
            holder: holder.unwrap_or_default(),
            // An estimate refused counts nothing: no report will come to true it up.
            only_admitted: (shed.is_some() && !reports) || estimated,
            report: reports,
        });
        (hits, shed, sub.map(|_| spec.limit))
    }
}

/// What one matched descriptor asks of each of its limits ([`Plans::add_limit`]).
struct Ask<'r, 'a> {
    req: &'r Request,
    d: &'r Descriptor,
    m: &'r Matched<'a>,
    keys: &'r KeyBuilder,
    now: Timestamp,
    random: &'r dyn Random,
    charging: Charging,
}

impl Plans<'_> {
    /// Every sub-key's op of op `at` when its limit is split ([`super::split`]), in sub-key
    /// order, each against its own share and otherwise as `at`; `None` for an op of one key.
    /// Explain reads them all, and a descriptor's reset forgets them all.
    pub fn sub_ops(&self, at: usize) -> Option<Vec<Op>> {
        let marker = self.splits.get(at)?.as_ref()?;
        let op = self.ops.get(at)?;
        let (head, tail) = (&op.key[..marker.at.start], &op.key[marker.at.end..]);
        let ops = (0..marker.sub.n).map(|i| {
            let sub = SubKey { n: marker.sub.n, i };
            let mut key = String::with_capacity(op.key.len() + 4);
            key.push_str(head);
            super::split::push_marker(&mut key, sub);
            key.push_str(tail);
            Op {
                key,
                spec: sub.spec(&marker.whole),
                ..op.clone()
            }
        });
        Some(ops.collect())
    }
}

/// A holder id no other request of any instance uses: a random per-process prefix and a counter.
/// A request without a holder takes its slot under it, so the slot frees at its lease timeout.
fn anonymous_holder() -> String {
    use std::sync::LazyLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static PREFIX: LazyLock<(u64, u64)> = LazyLock::new(|| {
        let seed = ahash::RandomState::new();
        (seed.hash_one(1u8), seed.hash_one(2u8))
    });
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("anon-{:016x}{:016x}-{n}", PREFIX.0, PREFIX.1)
}

/// Each descriptor's limit (request override, stored override or config match), in request order.
fn match_all<'a>(
    domain: &'a Domain,
    stored: &OverrideIndex,
    req: &'a Request,
    now: Timestamp,
    default_mode: FailureMode,
    tally: &mut Tally,
) -> Result<Vec<Option<Matched<'a>>>, RequestError> {
    let mut found = Vec::with_capacity(req.descriptors.len());
    for (i, d) in req.descriptors.iter().enumerate() {
        // The class entry is not part of what is matched, overridden or counted: every class of a
        // descriptor shares one limit, one override and one counter.
        let class = shed::class_entry(domain, d);
        let at = At { now, default_mode };
        found.push(
            match class {
                None => match_one(domain, stored, req, d, &d.entries, None, at, tally),
                Some(_) => {
                    let entries: Vec<&Entry> = shed::matched_entries(d, class).collect();
                    match_one(domain, stored, req, d, &entries, class, at, tally)
                }
            }
            .map_err(|e| match e {
                Refused::OverrideUnit => RequestError::InvalidOverrideUnit { descriptor: i },
                Refused::Predicate(reason) => RequestError::PredicateFailed {
                    descriptor: i,
                    reason,
                },
            })?,
        );
    }
    Ok(found)
}

/// The limit of descriptor `d`, matched on `entries` (its entries but the class entry `class`):
/// its request override, else a stored override of those entries, else the config match. An
/// override changes the rate and keeps the matched limit's algorithm, classes and soft zone
/// ([`overrides::override_limit`]); a request override above the domain's `max_request_limit`
/// is counted at that cap. `Err` for a request override without a unit.
#[allow(clippy::too_many_arguments)]
fn match_one<'a, E: EntryRef>(
    domain: &'a Domain,
    stored: &OverrideIndex,
    req: &'a Request,
    d: &'a Descriptor,
    entries: &[E],
    class: Option<&'a Entry>,
    at: At,
    tally: &mut Tally,
) -> Result<Option<Matched<'a>>, Refused> {
    let now = at.now;
    // The empty index (no policy database, or no overrides) costs one branch per descriptor.
    let stored = if stored.is_empty() {
        None
    } else {
        let found = stored.find(&req.domain, entries, now);
        tally.stored_lookups += 1;
        tally.stored_found += u32::from(found.is_some());
        found
    };
    let (rate, stored) = match (&d.limit, stored) {
        (Some(o), _) => {
            let asked = (o.requests_per_unit, o.unit.ok_or(Refused::OverrideUnit)?);
            let rate = (domain.max_request_limit).map_or(asked, |cap| cap.apply(asked.0, asked.1));
            if rate != asked {
                tally.capped += 1;
            }
            (rate, None)
        }
        (None, Some(o)) => ((o.spec.requests_per_unit, o.spec.unit), Some(o)),
        (None, None) => {
            return config_match(domain, req, d, entries, class, at.default_mode, tally);
        }
    };
    let configured = domain
        .get_limit(entries)
        .map(|m| &**m.limit)
        .filter(|l| !l.unlimited);
    let key_entries: Vec<(&str, &str)> = shed::matched_entries(d, class)
        .map(|e| (e.key.as_str(), e.value.as_str()))
        .collect();
    let rate = OverrideRate {
        requests_per_unit: rate.0,
        unit: rate.1,
        configured,
    };
    let limit = Arc::new(override_limit(&req.domain, &key_entries, rate, stored));
    Ok(Some(Matched {
        stats_key: Cow::Owned(limit.stats_key.clone()),
        limit,
        key_entries,
        class,
    }))
}

/// The config's limit for `entries` of `d`, keyed by the values it counts; for entries that
/// match no node, the domain's `default_limit` (if any), counted per distinct descriptor.
fn config_match<'a, E: EntryRef>(
    domain: &'a Domain,
    req: &'a Request,
    d: &'a Descriptor,
    entries: &[E],
    class: Option<&'a Entry>,
    default_mode: FailureMode,
    tally: &mut Tally,
) -> Result<Option<Matched<'a>>, Refused> {
    // A domain without `when:` takes the lookup that evaluates nothing.
    let (found, limit) = if domain.has_predicates {
        let hits = hits::requested(req, d);
        let mut judge = Judge::new(&d.entries, &req.domain, hits, default_mode);
        let found = domain.lookup_gated(entries, &mut judge);
        let limit = match &found {
            Lookup::Limit(m) => gated_limit(m.limit, &mut judge),
            _ => None,
        };
        tally.predicate_errors += judge.errors;
        if let Some(reason) = judge.fatal {
            return Err(Refused::Predicate(reason));
        }
        (found, limit)
    } else {
        (domain.lookup(entries), None)
    };
    let m = match found {
        Lookup::Limit(m) => m,
        Lookup::NoLimit => return Ok(None),
        Lookup::Unmatched => {
            tally.unmatched += 1;
            let Some(limit) = domain.default_limit.as_ref() else {
                return Ok(None);
            };
            // Every entry with its value: "each tenant gets 100/s unless a rule says
            // otherwise" means one counter per tenant, not one all unmatched traffic shares.
            let key_entries = shed::matched_entries(d, class)
                .map(|e| (e.key.as_str(), e.value.as_str()))
                .collect();
            return Ok(Some(Matched {
                limit: Arc::clone(limit),
                key_entries,
                stats_key: Cow::Borrowed(limit.stats_key.as_str()),
                class,
            }));
        }
    };
    // The limits whose `when:` held: all of them (the matched limit itself), some (a new
    // limit of those), or none (the descriptor is not limited).
    let limit = match limit {
        None => Arc::clone(m.limit),
        Some(Gated::None) => return Ok(None),
        Some(Gated::Some(limit)) => limit,
    };
    let key_entries = shed::matched_entries(d, class)
        .zip(&m.path)
        .map(|(e, level)| match &level.node.value_regex {
            // The key part names the pattern: every entry at this level has the node's key, so
            // no request's (key, value) can spell `key=~pattern`, and the shared counter is the
            // pattern's alone.
            Some(regex) if stats_key::shares_counter(level) => (regex.name.as_str(), ""),
            _ if stats_key::shares_counter(level) => (e.key.as_str(), level.node.value.as_str()),
            _ => (e.key.as_str(), e.value.as_str()),
        })
        .collect();
    // Every limit of a node has the node's stats key, whichever of them held.
    let stats_key = stats_key::for_match(
        &req.domain,
        m.limit,
        shed::matched_entries(d, class),
        &m.path,
    );
    Ok(Some(Matched {
        limit,
        key_entries,
        stats_key,
        class,
    }))
}

/// When a request is planned: its time, and the failure mode of predicates that name none.
#[derive(Clone, Copy)]
struct At {
    now: Timestamp,
    default_mode: FailureMode,
}

/// Why a descriptor cannot be planned.
enum Refused {
    /// Its override has no valid unit.
    OverrideUnit,
    /// A `when:` failed under `failure_mode: error`.
    Predicate(String),
}

/// The limits of `limit` ([`Limit::all`]) whose `when:` holds for the judged descriptor.
enum Gated {
    /// None of them: the descriptor is not limited.
    None,
    /// These, as one limit (the first carrying the others).
    Some(Arc<Limit>),
}

/// `None` when every limit applies (no `when:`, or all held): the matched limit is used as is.
fn gated_limit<E: EntryRef>(limit: &Arc<Limit>, judge: &mut Judge<'_, E>) -> Option<Gated> {
    if limit.all().all(|l| l.when.is_none()) {
        return None;
    }
    let held: Vec<&Arc<Limit>> = limit
        .all()
        .filter(|l| l.when.as_ref().is_none_or(|p| judge.admits(p)))
        .collect();
    if held.len() == 1 + limit.also.len() {
        return None;
    }
    let Some((first, rest)) = held.split_first() else {
        return Some(Gated::None);
    };
    let mut first = Limit::clone(first);
    first.also = rest.iter().map(|l| Arc::clone(l)).collect();
    Some(Gated::Some(Arc::new(first)))
}

/// Names any matched limit (unlimited ones included) replaces, across the whole request.
fn replaced_names(matched: &[Option<Matched<'_>>]) -> HashSet<String> {
    // A loop rather than collecting the flattened iterator: most requests replace nothing, and
    // for them the loop costs a third of the instructions the collect did.
    let mut names = HashSet::new();
    for m in matched.iter().flatten() {
        names.extend(m.limit.replaces.iter().cloned());
    }
    names
}

/// How a descriptor's hits reach its limits: what is charged, the usage reported, and whether the
/// call gives hits back (a refund, or an estimate trued down) or reports usage.
#[derive(Clone, Copy)]
struct Charging {
    /// The hits the descriptor asks for ([`hits::requested`]).
    asked: u64,
    charge: hits::Charge,
    reported: Option<u64>,
    refund: bool,
    report: bool,
}

impl Charging {
    /// The charging of descriptor `d` of `req` under the limit it matched.
    fn of(req: &Request, d: &Descriptor, m: &Matched<'_>) -> Charging {
        let asked = hits::requested(req, d);
        // A report is usage after the fact: asked for by the caller (`POST /check`'s `report`) or
        // by the limit (`usage: report`, where every call with hits reports and a call of 0 hits
        // is the request-time check). A refund stays a refund; a concurrency limit has no usage.
        // With a usage estimate (the same on every limit of the descriptor: validated at load),
        // the check charges it and the report trues it up (`hits::true_up`); an explicit report
        // of 0 (Envoy's `ratelimitd.usage: report` entry, `/check`'s `report`) then gives the
        // whole estimate back, where without an estimate it stays a check.
        let estimate = m.limit.usage_estimate;
        let report = !d.refund
            && (asked > 0 || (d.report && estimate.is_some()))
            && (d.report || m.limit.all().any(|l| l.usage_report))
            && m.limit.all().any(|l| l.algorithm != Algorithm::Concurrency);
        let reported = report.then(|| hits::clamp_report(&req.domain, asked));
        let charge = hits::true_up(estimate, asked, reported, d.refund);
        let refund = d.refund || matches!(charge, hits::Charge::GiveBack(_));
        let report = report && !refund;
        Charging {
            asked,
            charge,
            reported,
            refund,
            report,
        }
    }
}

/// The hits one op takes: what was asked (clamped to the limit's bounds), the usage reported, an
/// estimate, or the difference a report trues an estimate up or down by.
fn op_hits(
    charge: hits::Charge,
    spec: &LimitSpec,
    asked: u64,
    reported: Option<u64>,
    reports: bool,
    refund: bool,
) -> u64 {
    match charge {
        hits::Charge::Asked if reports => reported.unwrap_or(0),
        hits::Charge::Asked => hits::clamp(spec, asked, refund),
        hits::Charge::Estimate(e) => hits::clamp(spec, e, false),
        hits::Charge::TopUp(more) => more,
        hits::Charge::GiveBack(less) => hits::clamp(spec, less, true),
    }
}

/// Records `value` as limit `i`'s entry of `list`, which holds one entry per limit from the first
/// `Some` on: a descriptor whose limits never set one allocates nothing.
fn from_first_some<T: Clone>(list: &mut Vec<Option<T>>, i: usize, value: Option<T>) {
    if value.is_some() || !list.is_empty() {
        list.resize(i, None);
        list.push(value);
    }
}
