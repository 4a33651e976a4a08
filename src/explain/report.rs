//! What explain found, and its JSON form (`POST /v1/explain`, `docs/openapi.json`). The console
//! renders the same values as HTML.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::insight::ViolationView;
use crate::policy::StoredOverride;
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::config::predicate::{Evaluation, Judge, Verdict};
use ratelimitd_core::config::{Domain, FailureMode, Limit, Lookup, Unit};
use ratelimitd_core::limiter::{Entry, Override};
use ratelimitd_core::store::Answer;

/// The answer for one request.
#[derive(Debug, Clone)]
pub(crate) struct Explained {
    /// When (the service clock).
    pub at: Timestamp,
    /// The domain asked about.
    pub domain: String,
    /// False when the configuration in service has no such domain (every descriptor is then
    /// allowed without a limit, as on the request path).
    pub domain_known: bool,
    /// The version of the configuration in service (`None`: none loaded).
    pub config_version: Option<u64>,
    /// One report per descriptor, in order.
    pub descriptors: Vec<DescriptorReport>,
}

/// One descriptor's report.
#[derive(Debug, Clone)]
pub(crate) struct DescriptorReport {
    /// Its entries.
    pub entries: Vec<(String, String)>,
    /// `limited`, `unlimited` or `no_limit` (no match, unknown domain, or replaced).
    pub applies: &'static str,
    /// The limits in force, each with its counter.
    pub limits: Vec<LimitReport>,
    /// Stored overrides on exactly these entries (active or not).
    pub overrides: Vec<OverrideReport>,
    /// The key's newest violations.
    pub violations: Violations,
    /// The request's own limit, when the explain request carried one, and the cap applied.
    pub request_limit: Option<RequestLimitReport>,
    /// Every `when:` met while matching this descriptor, in the order evaluated, with its result.
    pub predicates: Vec<(String, Evaluation)>,
}

/// A descriptor's own limit (Envoy Gateway's per-request limit) and what it is counted at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestLimitReport {
    /// What the request asked: requests per unit, and the unit.
    pub asked: (u32, Unit),
    /// What it is counted at: the ask, or the domain's `max_request_limit` when above it.
    pub applied: (u32, Unit),
    /// The domain's cap, if it has one.
    pub cap: Option<(u32, Unit)>,
}

impl RequestLimitReport {
    /// The report of `asked` in `domain` (`None`: unknown domain, nothing capped); `None` for an
    /// override without a unit (the plan refuses it before this is reached).
    pub(crate) fn new(asked: Override, domain: Option<&Domain>) -> Option<RequestLimitReport> {
        let unit = asked.unit?;
        let asked = (asked.requests_per_unit, unit);
        let cap = domain.and_then(|d| d.max_request_limit);
        Some(RequestLimitReport {
            asked,
            applied: cap.map_or(asked, |c| c.apply(asked.0, asked.1)),
            cap: cap.map(|c| (c.requests_per_unit, c.unit)),
        })
    }

    fn to_json(&self) -> Value {
        let rate =
            |(rpu, unit): (u32, Unit)| json!({"requests_per_unit": rpu, "unit": unit.as_str()});
        json!({
            "asked": rate(self.asked),
            "applied": rate(self.applied),
            "capped": self.applied != self.asked,
            "max_request_limit": self.cap.map(rate),
        })
    }
}

/// The `when:` predicates matching `entries` in `domain` meets, as the limiter evaluates them for
/// a check of 0 hits: the entries' nodes', then the matched limits'. Empty for a domain without
/// any.
pub(crate) fn predicates(
    domain: &Domain,
    entries: &[Entry],
    name: &str,
    default_mode: FailureMode,
) -> Vec<(String, Evaluation)> {
    if !domain.has_predicates {
        return Vec::new();
    }
    let mut judge = Judge::new(entries, name, 0, default_mode).recording();
    if let Lookup::Limit(m) = domain.lookup_gated(entries, &mut judge) {
        for when in m.limit.all().filter_map(|l| l.when.as_ref()) {
            judge.evaluate(when);
        }
    }
    judge.results.unwrap_or_default()
}

fn predicate_json((source, e): &(String, Evaluation)) -> Value {
    let result = match e.verdict {
        Verdict::Holds => "holds",
        Verdict::Fails => "does_not_hold",
        Verdict::Error => "error",
    };
    json!({"when": source, "result": result, "error": e.error})
}

/// One limit in force and its counter.
#[derive(Debug, Clone)]
pub(crate) struct LimitReport {
    /// `rate_limit.name`: the rule's id for unnamed rules, `override:<id>` for a stored override.
    pub name: String,
    /// The configuration path (`domain.key_value…`).
    pub key: String,
    /// Where it comes from: the file, `policy-db/<domain>` for rules, empty for an override.
    pub source: String,
    /// The unit, lower case as in YAML (`minute`).
    pub unit: String,
    /// Units per window.
    pub unit_multiplier: u32,
    /// Requests per window.
    pub requests_per_unit: u32,
    /// The algorithm.
    pub algorithm: &'static str,
    /// The bucket capacity, for bucket algorithms.
    pub burst: Option<u32>,
    /// Shadow mode: counted, never enforced.
    pub shadow: bool,
    /// Where its counter stands; for a split limit, the sum of its sub-keys.
    pub counter: Counter,
    /// `split`: how many sub-keys the counter is (`None`: one key).
    pub split: Option<u32>,
    /// A split limit's sub-keys, each against its share, in sub-key order; empty otherwise.
    pub sub_keys: Vec<Counter>,
}

/// Where a counter stands now.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Counter {
    /// The store read it.
    Read {
        /// Hits counted (for buckets: the capacity in use).
        used: u64,
        /// Hits that still fit now.
        remaining: u64,
        /// True when the next hit would be over the limit.
        over_limit: bool,
        /// Until the window resets or one more hit fits.
        reset_after: Duration,
    },
    /// The local over-limit cache knows the key is over until this time.
    CachedOver(Timestamp),
    /// The store could not be read (down, breaker open, timeout).
    Unavailable(String),
}

impl Counter {
    /// The counter a store answer shows.
    pub(crate) fn from_answer(a: &Answer) -> Counter {
        match a {
            Answer::Decided(d) | Answer::Leased(d) => Counter::Read {
                // Explain checks with no hits, so what is in use is what the counter held. A
                // refused step reports its usage as if its hit had counted (`before + hits`, the
                // number Go's stats take): a concurrency limit refuses a check once every slot is
                // held, and its `after` is one more than the holders there are.
                used: if d.over_limit { d.before } else { d.after },
                remaining: d.remaining,
                // A check of 0 hits is never over: the key is full when nothing remains.
                over_limit: d.over_limit || d.remaining == 0,
                reset_after: d.reset_after,
            },
            Answer::CachedOver { until } => Counter::CachedOver(*until),
            Answer::Unavailable {
                target,
                breaker_open,
            } => Counter::Unavailable(if *breaker_open {
                format!("the circuit breaker of Redis target {target} is open")
            } else {
                format!("Redis target {target} did not answer")
            }),
        }
    }

    /// The counter of a split limit whose sub-keys stand at `parts`: hits used and remaining
    /// add up, it is over when every sub-key is (a request charges one sub-key, so while any
    /// has room some requests are admitted), and it resets when the last sub-key does. A part
    /// the store did not read makes the whole unread (its reason is the first such part's).
    pub(crate) fn sum(parts: &[Counter]) -> Counter {
        let mut total = (0u64, 0u64, true, Duration::ZERO);
        for part in parts {
            match part {
                Counter::Read {
                    used,
                    remaining,
                    over_limit,
                    reset_after,
                } => {
                    total.0 = total.0.saturating_add(*used);
                    total.1 = total.1.saturating_add(*remaining);
                    total.2 &= *over_limit;
                    total.3 = total.3.max(*reset_after);
                }
                Counter::CachedOver(_) => {}
                Counter::Unavailable(_) => return part.clone(),
            }
        }
        Counter::Read {
            used: total.0,
            remaining: total.1,
            over_limit: total.2,
            reset_after: total.3,
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Counter::Read {
                used,
                remaining,
                over_limit,
                reset_after,
            } => json!({
                "used": used,
                "remaining": remaining,
                "over_limit": over_limit,
                "reset_after_seconds": reset_after.as_secs_f64(),
            }),
            Counter::CachedOver(until) => json!({
                "remaining": 0,
                "over_limit": true,
                "cached_until": until.to_rfc3339(),
            }),
            Counter::Unavailable(why) => json!({ "unavailable": why }),
        }
    }
}

impl LimitReport {
    /// A limit in force with its counter.
    pub(crate) fn new(l: &Arc<Limit>, counter: Counter) -> LimitReport {
        LimitReport::split(l, counter, Vec::new())
    }

    /// A limit in force with its counter: the sum of `sub_keys` when it is split.
    pub(crate) fn split(l: &Arc<Limit>, counter: Counter, sub_keys: Vec<Counter>) -> LimitReport {
        LimitReport {
            split: l.split,
            sub_keys,
            name: l.name.clone(),
            key: l.full_key.clone(),
            source: l.file.to_string(),
            unit: l
                .unit
                .map_or(String::new(), |u| u.as_str().to_ascii_lowercase()),
            unit_multiplier: l.unit_multiplier,
            requests_per_unit: l.requests_per_unit,
            algorithm: l.algorithm.name(),
            burst: l
                .algorithm
                .has_burst()
                .then(|| l.burst.unwrap_or(l.requests_per_unit)),
            shadow: l.shadow_mode,
            counter,
        }
    }
}

impl LimitReport {
    /// The counter as JSON; for the window algorithms, whose usage is a count of hits, with its
    /// `debt`: how far reported usage took it past the limit (0 within it), which a check must
    /// see pass before it is admitted again, after `reset_after_seconds` at the latest.
    fn counter_json(&self) -> Value {
        let mut c = self.counter.to_json();
        if let Some(debt) = self.debt() {
            c["debt"] = json!(debt);
        }
        c
    }

    /// How far the counter is past the limit, for the window algorithms (whose usage is a count
    /// of hits) when the store read it; `None` otherwise (the buckets show debt as time).
    pub(crate) fn debt(&self) -> Option<u64> {
        let windows = ["fixed_window", "sliding_window", "sliding_log"];
        match &self.counter {
            Counter::Read { used, .. } if windows.contains(&self.algorithm) => {
                Some(used.saturating_sub(u64::from(self.requests_per_unit)))
            }
            _ => None,
        }
    }
}

/// A stored override on the descriptor.
#[derive(Debug, Clone)]
pub(crate) struct OverrideReport {
    /// Its id.
    pub id: String,
    /// Its rate.
    pub requests_per_unit: u32,
    /// Its unit, lower case.
    pub unit: String,
    /// When it ends.
    pub valid_until: Timestamp,
    /// Why it was made.
    pub reason: String,
    /// Who made it.
    pub created_by: String,
    /// False once `valid_until` passed.
    pub active: bool,
}

impl OverrideReport {
    /// `o` as seen at `now`.
    pub(crate) fn new(o: &StoredOverride, now: Timestamp) -> OverrideReport {
        OverrideReport {
            id: o.id.clone(),
            requests_per_unit: o.spec.requests_per_unit,
            unit: o.spec.unit.as_str().to_ascii_lowercase(),
            valid_until: o.spec.valid_until,
            reason: o.spec.reason.clone(),
            created_by: o.created_by.clone(),
            active: o.active_at(now),
        }
    }
}

/// A descriptor's recent violations.
#[derive(Debug, Clone)]
pub(crate) enum Violations {
    /// The violation log does not write to a database on this instance.
    NotWired,
    /// The newest records, newest first.
    Rows(Vec<ViolationView>),
    /// Reading them failed.
    Failed(String),
}

fn entries_json(e: &[(String, String)]) -> Value {
    Value::Array(
        e.iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect(),
    )
}

impl Explained {
    /// The `POST /v1/explain` answer.
    pub(crate) fn to_json(&self) -> Value {
        let descriptors: Vec<Value> = (self.descriptors.iter())
            .map(|d| {
                let limits: Vec<Value> = (d.limits.iter())
                    .map(|l| {
                        json!({
                            "name": l.name,
                            "key": l.key,
                            "source": l.source,
                            "unit": l.unit,
                            "unit_multiplier": l.unit_multiplier,
                            "requests_per_unit": l.requests_per_unit,
                            "algorithm": l.algorithm,
                            "burst": l.burst,
                            "shadow": l.shadow,
                            "counter": l.counter_json(),
                            "split": l.split,
                            "sub_keys": l.sub_keys.iter().map(Counter::to_json).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                let overrides: Vec<Value> = (d.overrides.iter())
                    .map(|o| {
                        json!({
                            "id": o.id,
                            "requests_per_unit": o.requests_per_unit,
                            "unit": o.unit,
                            "valid_until": o.valid_until.to_rfc3339(),
                            "reason": o.reason,
                            "created_by": o.created_by,
                            "active": o.active,
                        })
                    })
                    .collect();
                let violations = match &d.violations {
                    Violations::NotWired => json!({"available": false, "reason":
                        "the violation log does not write to the policy database on this instance"}),
                    Violations::Failed(e) => json!({"available": false, "reason": e}),
                    Violations::Rows(rows) => json!({"available": true, "recent": rows
                        .iter()
                        .map(|r| json!({
                            "at": r.at.to_rfc3339(),
                            "limit": r.limit,
                            "requests": r.requests,
                            "hits": r.hits,
                            "shadow": r.shadow,
                        }))
                        .collect::<Vec<_>>()}),
                };
                let mut one = json!({
                    "entries": entries_json(&d.entries),
                    "applies": d.applies,
                    "limits": limits,
                    "overrides": overrides,
                    "violations": violations,
                });
                if let Some(r) = &d.request_limit {
                    one["request_limit"] = r.to_json();
                }
                if !d.predicates.is_empty() {
                    one["predicates"] = d.predicates.iter().map(predicate_json).collect();
                }
                one
            })
            .collect();
        json!({
            "at": self.at.to_rfc3339(),
            "domain": self.domain,
            "domain_known": self.domain_known,
            "config_version": self.config_version,
            "descriptors": descriptors,
        })
    }
}
