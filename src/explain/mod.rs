//! Explain: for the descriptors of one request, which limits apply (from the configuration, a
//! rule of the policy database, or a stored override), which stored overrides match, where each
//! counter stands and the key's recent violations — **without counting a hit**.
//!
//! It plans the request exactly as the limiter does ([`ratelimitd_core::limiter::plan`], the same matching,
//! overrides, `replaces` and keys) with every descriptor's `hits_addend` at 0, the limiter's own
//! "check without consuming": each algorithm judges the state and adds nothing. Two things the
//! request path would do are left out on purpose: no lease is taken (a reservation would move
//! the shared counter), and nothing reaches the stats, the hot keys or the violation log.
//! Served by `POST /v1/explain`, the console's key search and `ratelimitd explain` ([`client`]).

pub(crate) mod client;
mod report;
pub(crate) mod reset;
pub(crate) mod reset_client;

use std::sync::Arc;
use std::time::Duration;

pub(crate) use report::{
    Counter, DescriptorReport, Explained, LimitReport, OverrideReport, RequestLimitReport,
    Violations,
};

use crate::insight::RecentViolations;
use crate::policy::Overrides;
use crate::reload::ConfigHandle;
use ratelimitd_core::clock::Clock;
use ratelimitd_core::config::FailureMode;
use ratelimitd_core::limiter::plan::{self, Plan, Plans};
use ratelimitd_core::limiter::{Descriptor, Entry, KeyBuilder, Override, Request};
use ratelimitd_core::store::{Answer, Op, Store};

/// Most descriptors one explain request may carry.
pub(crate) const MAX_DESCRIPTORS: usize = 16;
/// Most entries per descriptor.
pub(crate) const MAX_ENTRIES: usize = 32;
/// Longest key or value, in bytes.
pub(crate) const MAX_TEXT: usize = 1024;
/// Recent violations listed per descriptor.
pub(crate) const VIOLATION_ROWS: usize = 10;
/// How long the store and the violation log may take before their part says "unavailable".
const WAIT: Duration = Duration::from_secs(2);

/// Why an explain request was refused (400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ExplainError {
    /// A field is missing, empty or too large; `.0` names it, `.1` says what is accepted.
    #[error("{0}: {1}")]
    Invalid(String, String),
}

/// What explain reads: everything is shared with the service.
#[derive(Clone)]
pub(crate) struct Explainer {
    /// The configuration in service.
    pub config: Arc<ConfigHandle>,
    /// The stored overrides in service.
    pub overrides: Arc<Overrides>,
    /// The limiter's store (the same counters, behind the same breakers).
    pub store: Arc<dyn Store>,
    /// The limiter's cache key builder (`CACHE_KEY_PREFIX`, `CACHE_KEY_FORMAT`).
    pub keys: KeyBuilder,
    /// The service clock.
    pub clock: Arc<dyn Clock>,
    /// The violation log's reader, when it writes to the policy database.
    pub violations: Option<Arc<dyn RecentViolations>>,
    /// The service's `DEFAULT_FAILURE_MODE`, which a failing `when:` without its own answers by.
    pub default_mode: FailureMode,
}

impl std::fmt::Debug for Explainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Explainer").finish_non_exhaustive()
    }
}

/// Checks an explain request's domain and descriptors (each a list of `(key, value)`).
pub(crate) fn check(
    domain: &str,
    descriptors: &[Vec<(String, String)>],
) -> Result<(), ExplainError> {
    let bad = |what: String, why: String| Err(ExplainError::Invalid(what, why));
    if domain.is_empty() || domain.len() > MAX_TEXT {
        return bad("domain".into(), format!("expected 1 to {MAX_TEXT} bytes"));
    }
    if descriptors.is_empty() || descriptors.len() > MAX_DESCRIPTORS {
        let why = format!("expected 1 to {MAX_DESCRIPTORS} descriptors");
        return bad("descriptors".into(), why);
    }
    for (i, d) in descriptors.iter().enumerate() {
        if d.is_empty() || d.len() > MAX_ENTRIES {
            let why = format!("expected 1 to {MAX_ENTRIES} entries");
            return bad(format!("descriptors[{i}].entries"), why);
        }
        for (j, (k, v)) in d.iter().enumerate() {
            let at = format!("descriptors[{i}].entries[{j}]");
            if k.is_empty() || k.len() > MAX_TEXT {
                return bad(
                    format!("{at}.key"),
                    format!("expected 1 to {MAX_TEXT} bytes"),
                );
            }
            if v.len() > MAX_TEXT {
                return bad(
                    format!("{at}.value"),
                    format!("expected at most {MAX_TEXT} bytes"),
                );
            }
        }
    }
    Ok(())
}

impl Explainer {
    /// Explains `descriptors` of `domain` now (checked with [`check`] first).
    pub(crate) async fn explain(
        &self,
        domain: &str,
        descriptors: &[Vec<(String, String)>],
    ) -> Result<Explained, ExplainError> {
        self.explain_with(domain, descriptors, true).await
    }

    /// As [`Explainer::explain`]; the violation log is read only when `violations` is set (the
    /// console's "nearest their thresholds" needs the counters alone).
    pub(crate) async fn explain_with(
        &self,
        domain: &str,
        descriptors: &[Vec<(String, String)>],
        violations: bool,
    ) -> Result<Explained, ExplainError> {
        self.explain_limited(domain, descriptors, &[], violations)
            .await
    }

    /// As [`Explainer::explain_with`], descriptor `i` carrying the request's own limit
    /// `limits[i]` (Envoy Gateway's per-request limit; none past the slice's end), capped by the
    /// domain's `max_request_limit` as on the request path.
    pub(crate) async fn explain_limited(
        &self,
        domain: &str,
        descriptors: &[Vec<(String, String)>],
        limits: &[Option<Override>],
        violations: bool,
    ) -> Result<Explained, ExplainError> {
        let snapshot = self.config.snapshot();
        let config = snapshot.as_ref().map(|s| &s.config);
        let version = snapshot.as_ref().map(|s| s.version);
        let stored = self.overrides.load();
        (self.explain_in(
            (config, version),
            &stored,
            domain,
            descriptors,
            limits,
            violations,
        ))
        .await
    }

    /// As [`Explainer::explain`], judged by `config` (and its version: `None` for one not in
    /// service) and the overrides of `stored` instead of those in service: what a change would
    /// make of a request (the policy API's dry runs). The live counters and violations are the
    /// same.
    pub(crate) async fn explain_in(
        &self,
        (config, version): (
            Option<&ratelimitd_core::config::RateLimitConfig>,
            Option<u64>,
        ),
        stored: &ratelimitd_core::limiter::OverrideIndex,
        domain: &str,
        descriptors: &[Vec<(String, String)>],
        limits: &[Option<Override>],
        violations: bool,
    ) -> Result<Explained, ExplainError> {
        check(domain, descriptors)?;
        let now = self.clock.now();
        let req = dry_request(domain, descriptors, limits);
        let found = config.and_then(|c| c.domain(domain));
        // A dry run draws nothing: a soft zone is judged at its hard limit.
        let still = ratelimitd_core::random::Fixed(0.0);
        let plans = plan::plan(
            found,
            stored,
            &req,
            &self.keys,
            now,
            &still,
            self.default_mode,
        )
        .map_err(|e| ExplainError::Invalid("descriptors".into(), e.to_string()))?;
        // A split limit is read on every sub-key: `groups[i]` are op i's answers.
        let (ops, groups) = every_sub_key(&plans);
        let answers = self.read(ops, now).await;
        let mut out = Vec::with_capacity(descriptors.len());
        for (i, entries) in descriptors.iter().enumerate() {
            let (applies, limits) = limits_of(&plans.descriptors[i], &answers, &groups);
            let overrides = (stored.all().into_iter())
                .filter(|o| o.spec.domain == domain && same_path(&o.spec.descriptor, entries))
                .map(|o| OverrideReport::new(o, now))
                .collect();
            let violations = if violations {
                self.violations_of(domain, entries).await
            } else {
                Violations::NotWired
            };
            let d = &req.descriptors[i];
            let request_limit = d
                .limit
                .and_then(|asked| RequestLimitReport::new(asked, found));
            let predicates = found.map_or_else(Vec::new, |f| {
                report::predicates(f, &d.entries, domain, self.default_mode)
            });
            out.push(DescriptorReport {
                request_limit,
                predicates,
                entries: entries.clone(),
                applies,
                limits,
                overrides,
                violations,
            });
        }
        Ok(Explained {
            at: now,
            domain: domain.to_string(),
            domain_known: found.is_some(),
            config_version: version,
            descriptors: out,
        })
    }

    /// Reads the counters `ops` plan without moving them: no hit added, no lease taken (a
    /// reservation would move the shared counter); a failing or slow store is the reason every
    /// counter is unavailable.
    async fn read(
        &self,
        mut ops: Vec<Op>,
        now: ratelimitd_core::clock::Timestamp,
    ) -> Result<Vec<Answer>, String> {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        for op in &mut ops {
            op.hits = 0;
            op.lease = Some(0);
        }
        match tokio::time::timeout(WAIT, self.store.apply(&ops, now)).await {
            Ok(Ok(a)) if a.len() == ops.len() => Ok(a),
            Ok(Ok(_)) => Err("the store answered a different number of counters".into()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("the store did not answer within {WAIT:?}")),
        }
    }

    /// The newest violations recorded for exactly these entries of `domain`.
    async fn violations_of(&self, domain: &str, entries: &[(String, String)]) -> Violations {
        let Some(log) = &self.violations else {
            return Violations::NotWired;
        };
        let client_key = (entries.iter())
            .find(|(k, _)| k == "client_key")
            .map(|(_, v)| v.clone());
        // Read a page of the domain's (or the client's) newest records and keep this key's.
        let query = log.recent_of(Some(domain.to_string()), client_key, 200);
        match tokio::time::timeout(WAIT, query).await {
            Ok(Ok(rows)) => Violations::Rows(
                rows.into_iter()
                    .filter(|r| r.entries == entries)
                    .take(VIOLATION_ROWS)
                    .collect(),
            ),
            Ok(Err(e)) => Violations::Failed(e),
            Err(_) => Violations::Failed("the violation log did not answer in time".into()),
        }
    }
}

/// The request explain plans: the descriptors with their request limits, each at the limiter's
/// check (`hits_addend` 0: judged, nothing added).
fn dry_request(
    domain: &str,
    descriptors: &[Vec<(String, String)>],
    limits: &[Option<Override>],
) -> Request {
    Request::new(
        domain,
        (descriptors.iter().enumerate())
            .map(|(i, d)| Descriptor {
                entries: d.iter().map(|(k, v)| Entry::new(k, v)).collect(),
                limit: limits.get(i).copied().flatten(),
                hits_addend: Some(0),
                ..Descriptor::default()
            })
            .collect(),
    )
}

/// What applies to one descriptor by its plan (`no_limit`, `unlimited` or `limited`), and each
/// limit with its counter from the store's `answers`.
fn limits_of(
    plan: &Plan<'_>,
    answers: &Result<Vec<Answer>, String>,
    groups: &[std::ops::Range<usize>],
) -> (&'static str, Vec<LimitReport>) {
    match plan {
        Plan::NoLimit => ("no_limit", Vec::new()),
        Plan::Unlimited => ("unlimited", Vec::new()),
        Plan::Limited(l) => {
            // One counter per op, or per sub-key of a split limit, summed.
            let counters = l.ops.clone().map(|at| match answers {
                Ok(a) => (a[groups[at].clone()].iter())
                    .map(Counter::from_answer)
                    .collect(),
                Err(e) => vec![Counter::Unavailable(e.clone())],
            });
            let limits = (l.limit.all().filter(|x| x.spec().is_some()))
                .zip(counters)
                .map(
                    |(limit, mut parts): (_, Vec<Counter>)| match (limit.split, parts.len()) {
                        (Some(_), n) if n > 1 => {
                            LimitReport::split(limit, Counter::sum(&parts), parts)
                        }
                        _ => LimitReport::new(limit, parts.remove(0)),
                    },
                )
                .collect();
            ("limited", limits)
        }
    }
}

/// The ops explain reads for `plans`: each op, or all sub-keys of a split one
/// ([`Plans::sub_ops`]); and per op of the plan, where its ops sit in that list.
pub(super) fn every_sub_key(plans: &Plans<'_>) -> (Vec<Op>, Vec<std::ops::Range<usize>>) {
    let mut ops = Vec::with_capacity(plans.ops.len());
    let mut groups = Vec::with_capacity(plans.ops.len());
    for (at, op) in plans.ops.iter().enumerate() {
        let start = ops.len();
        match plans.sub_ops(at) {
            Some(subs) => ops.extend(subs),
            None => ops.push(op.clone()),
        }
        groups.push(start..ops.len());
    }
    (ops, groups)
}

fn same_path(path: &[crate::policy::model::PathEntry], entries: &[(String, String)]) -> bool {
    path.len() == entries.len()
        && path
            .iter()
            .zip(entries)
            .all(|(p, (k, v))| p.key == *k && p.value == *v)
}
