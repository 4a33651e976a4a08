//! Steps 3 and 4 of a decision: one [`Outcome`] per limit of every plan, saying what decided it and what
//! it came to. Each source of a decision is one [`Source`] variant with one producer:
//! [`Outcome::from_answer`] for the store, its local over-limit cache and its leases,
//! `failure::resolve` for the failure policy (with or without the breaker), and
//! [`super::fallback::LocalFallback::outcome`] for the local fallback. Statuses, headers, metadata and stats are
//! folded from outcomes ([`settle`]); nothing rewrites a plan or fakes an algorithm's decision.

use std::sync::Arc;
use std::time::Duration;

use super::plan::{Plan, Plans};
use crate::algorithm::Decision;
use crate::clock::Timestamp;
use crate::config::Limit;
use crate::store::Answer;

/// What decided a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The store ran the limit's algorithm on its counter.
    Store,
    /// The local over-limit cache knew the key was over; the store was not asked.
    LocalCache,
    /// The store failed and the limit's `failure_mode` answered.
    FailurePolicy,
    /// The circuit breaker of the limit's Redis target was open (no call was made) and the
    /// limit's `failure_mode` answered.
    Breaker,
    /// The store did not answer and this process's memory store decided, on its share of the
    /// limit (`failure_mode: local`).
    LocalFallback,
    /// This instance's lease on the key: hits reserved from the shared counter earlier
    /// (`lease`), spent without asking the store.
    Lease,
}

impl Source {
    /// The name used in dynamic metadata and tracing.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Store => "store",
            Source::LocalCache => "local_cache",
            Source::FailurePolicy => "failure_policy",
            Source::Breaker => "breaker",
            Source::LocalFallback => "local_fallback",
            Source::Lease => "lease",
        }
    }

    /// Every source, in [`Source::index`] order (for per-source counters).
    pub const ALL: [Source; 6] = [
        Source::Store,
        Source::LocalCache,
        Source::FailurePolicy,
        Source::Breaker,
        Source::LocalFallback,
        Source::Lease,
    ];

    /// This source's position in [`Source::ALL`].
    pub fn index(self) -> usize {
        match self {
            Source::Store => 0,
            Source::LocalCache => 1,
            Source::FailurePolicy => 2,
            Source::Breaker => 3,
            Source::LocalFallback => 4,
            Source::Lease => 5,
        }
    }

    /// True when the store did not decide: the failure policy, with or without the breaker.
    pub fn is_failure_policy(self) -> bool {
        matches!(self, Source::FailurePolicy | Source::Breaker)
    }
}

/// What a limit came to, when it was enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// True when the hits are over the limit.
    pub over_limit: bool,
    /// How many more hits fit now (0 when over).
    pub remaining: u64,
    /// Time until the window resets (windows) or one more hit fits (buckets).
    pub reset_after: Duration,
    /// The delay that would make the hits conform (leaky bucket shaping); zero otherwise.
    pub wait: Duration,
    /// The usage before and after the hits, when a counter was read (for near-limit stats);
    /// `None` when the verdict was reached without one.
    pub usage: Option<(u64, u64)>,
}

/// The outcome of one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// What decided it.
    pub source: Source,
    /// What it came to; `None` when the limit was not enforced (failure policy `allow`).
    pub verdict: Option<Verdict>,
}

impl Outcome {
    /// The outcome of a store's answer at `now`; `None` for an op the store did not answer (the
    /// failure policy decides it: `failure::resolve`).
    pub fn from_answer(answer: Answer, now: Timestamp) -> Option<Outcome> {
        Some(match answer {
            Answer::Unavailable { .. } => return None,
            Answer::Decided(d) => Outcome {
                source: Source::Store,
                verdict: Some(Verdict::from(d)),
            },
            Answer::Leased(d) => Outcome {
                source: Source::Lease,
                verdict: Some(Verdict::from(d)),
            },
            // The window ends at a whole second, so this is the fixed window's own reset.
            Answer::CachedOver { until } => Outcome {
                source: Source::LocalCache,
                verdict: Some(Verdict::over(Duration::from_secs(
                    until.as_secs().saturating_sub(now.as_secs()),
                ))),
            },
        })
    }
}

impl Verdict {
    /// Over the limit until `reset_after`, without a counter.
    pub fn over(reset_after: Duration) -> Verdict {
        Verdict {
            over_limit: true,
            remaining: 0,
            reset_after,
            wait: Duration::ZERO,
            usage: None,
        }
    }
}

impl From<Decision> for Verdict {
    fn from(d: Decision) -> Verdict {
        Verdict {
            over_limit: d.over_limit,
            remaining: d.remaining,
            reset_after: d.reset_after,
            wait: d.wait,
            usage: Some((d.before, d.after)),
        }
    }
}

/// What one descriptor came to: its plan, and the limit it reports with that limit's outcome.
#[derive(Debug, Clone, Copy)]
pub struct Settled<'p> {
    /// The descriptor's plan.
    pub plan: &'p Plan<'p>,
    /// The reported limit, what decided it and its verdict; `None` when no limit applied or
    /// none was enforced.
    pub reported: Option<(&'p Arc<Limit>, Source, &'p Verdict)>,
    /// The longest `wait` of the descriptor's limits that agree with the reported one (over the
    /// limit or not): its shaping delay when admitted, the time until its hits fit every
    /// over-limit limit when denied, whichever limit is reported.
    pub wait: Duration,
    /// The outcome of each limit of the descriptor, in list order (`rate_limits`; empty when no
    /// limit applied).
    pub outcomes: &'p [Outcome],
}

/// Pairs every plan with the outcome it reports (`outcomes` holds one per op of `plans`): the
/// most restrictive of its limits — the first over the limit, else the one with the least
/// remaining (the first of equals), as Envoy's headers pick among descriptors.
pub fn settle<'p>(plans: &'p Plans<'p>, outcomes: &'p [Outcome]) -> Vec<Settled<'p>> {
    plans
        .descriptors
        .iter()
        .map(|plan| {
            // The enforced limits of the descriptor, each with its source and verdict.
            let (ops, limit) = match plan {
                Plan::Limited(l) => (outcomes.get(l.ops.clone()), Some(&l.limit)),
                _ => (None, None),
            };
            let ops = ops.unwrap_or_default();
            let verdicts = || {
                ops.iter()
                    .zip(
                        limit
                            .into_iter()
                            .flat_map(super::super::config::compiled::Limit::all),
                    )
                    .filter_map(|(o, limit)| o.verdict.as_ref().map(|v| (limit, o.source, v)))
            };
            let reported = verdicts().min_by_key(|(_, _, v)| (!v.over_limit, v.remaining));
            let wait = reported.map_or(Duration::ZERO, |(_, _, r)| {
                let alike = verdicts().filter(|(_, _, v)| v.over_limit == r.over_limit);
                alike.map(|(_, _, v)| v.wait).max().unwrap_or_default()
            });
            Settled {
                plan,
                reported,
                wait,
                outcomes: ops,
            }
        })
        .collect()
}
