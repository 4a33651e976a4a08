//! What priority shedding and soft limits tell the caller and the stats
//! ([`crate::config::shedding`]): the soft-breach signal (a response header, the dynamic metadata
//! and a stat) once a descriptor's usage reaches its breach ratio, and, per limit and class,
//! whether a request was admitted, shed by its class's share, or denied in the soft zone.

use std::sync::Arc;

use super::LimiterOptions;
use super::outcome::{Settled, Verdict};
use super::plan::{Plan, Shed};
use crate::config::Limit;

/// The response header that carries the soft-breach signal (the name Go users asked for).
pub const SOFT_BREACH_HEADER: &str = "x-ratelimit-soft-breach";

/// How one request of a limit that sheds came out, for its per-class counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShedOutcome {
    /// Within its class's share (and, in a soft zone, its draw).
    Admitted,
    /// Refused by its class's share while the limit itself still had room.
    Shed,
    /// Refused by the soft zone's draw (usage between the limit and the top of the zone).
    SoftDenied,
    /// Refused past the limit (or past the top of its soft zone).
    Denied,
}

impl ShedOutcome {
    /// Every outcome, in [`ShedOutcome::index`] order.
    pub const ALL: [ShedOutcome; 4] = [
        ShedOutcome::Admitted,
        ShedOutcome::Shed,
        ShedOutcome::SoftDenied,
        ShedOutcome::Denied,
    ];

    /// The stat name.
    pub fn as_str(self) -> &'static str {
        match self {
            ShedOutcome::Admitted => "admitted",
            ShedOutcome::Shed => "shed",
            ShedOutcome::SoftDenied => "soft_denied",
            ShedOutcome::Denied => "denied",
        }
    }

    /// This outcome's position in [`ShedOutcome::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The outcome of `verdict` for a request that stood as `shed` against a limit of `limit`.
    pub fn of(shed: &Shed, verdict: &Verdict, limit: u64) -> ShedOutcome {
        let after = verdict.usage.map_or(u64::MAX, |(_, after)| after);
        if !verdict.over_limit {
            ShedOutcome::Admitted
        } else if shed.soft_denial(true, after) {
            ShedOutcome::SoftDenied
        } else if shed.shed(true, after, limit) {
            ShedOutcome::Shed
        } else {
            ShedOutcome::Denied
        }
    }
}

/// The reported limit of a settled descriptor, its verdict, and how the request stood against it
/// (`None` for a plain limit).
fn reported<'p>(s: &Settled<'p>) -> Option<(&'p Arc<Limit>, &'p Verdict, Option<&'p Shed>)> {
    let (Plan::Limited(l), Some((limit, _, verdict))) = (s.plan, s.reported) else {
        return None;
    };
    if l.refund {
        return None;
    }
    let index = l.limit.all().position(|x| Arc::ptr_eq(x, limit));
    let shed = index.and_then(|i| l.shed.get(i)).and_then(Option::as_ref);
    Some((limit, verdict, shed))
}

/// How descriptor `s` stood against its reported limit when that limit sheds: `None` for a
/// plain limit, a refund, or a descriptor with no reported limit.
pub(super) fn shed_of<'p>(s: &Settled<'p>) -> Option<&'p Shed> {
    reported(s)?.2
}

/// True when usage `after` has reached `ratio` of `limit`: the signal is raised exactly from the
/// ratio on (`after ≥ ratio × limit`, with room for the product's rounding).
pub fn breached(after: u64, limit: u64, ratio: f64) -> bool {
    after as f64 >= ratio * limit as f64 - 1e-9
}

/// True when descriptor `s` reached the soft-breach ratio of its reported limit (its own
/// `soft.breach_ratio`, else the service's `SOFT_BREACH_RATIO`). Only limits that count usage
/// (not the buckets) have one.
pub(crate) fn soft_breach(options: &LimiterOptions, s: &Settled<'_>) -> bool {
    let Some((limit, verdict, _)) = reported(s) else {
        return false;
    };
    let own = limit.shedding.as_ref().and_then(|x| x.soft?.breach_ratio);
    let Some(ratio) = own.or(options.soft_breach_ratio) else {
        return false;
    };
    let counted = !limit.algorithm.has_burst();
    let after = verdict.usage.map(|(_, after)| after);
    counted && after.is_some_and(|a| breached(a, u64::from(limit.requests_per_unit), ratio))
}

/// The class (empty without classes) and outcome of descriptor `s`, when its reported limit
/// sheds (`priorities` or `soft`); for the stats and the decision log.
pub fn shed_outcome<'p>(s: &Settled<'p>) -> Option<(&'p str, ShedOutcome)> {
    let (limit, verdict, shed) = reported(s)?;
    let shed = shed?;
    let priorities = limit.shedding.as_ref()?.priorities.as_ref();
    let class = match (priorities, shed.class) {
        (Some(p), Some(i)) => p.name(i),
        _ => "",
    };
    let outcome = ShedOutcome::of(shed, verdict, u64::from(limit.requests_per_unit));
    Some((class, outcome))
}

/// [`shed_outcome`] of every descriptor that has one, with its stats key, for the per-class
/// counters.
pub(crate) fn outcomes<'p>(
    settled: &'p [Settled<'p>],
) -> impl Iterator<Item = (&'p str, &'p str, ShedOutcome)> {
    settled.iter().filter_map(|s| {
        let (class, outcome) = shed_outcome(s)?;
        let Plan::Limited(l) = s.plan else {
            return None;
        };
        Some((l.stats_key.as_ref(), class, outcome))
    })
}

/// The usage of every descriptor whose reported limit has priority classes and was decided by
/// the store, for the usage gauge ([`super::StatsSink::shed_usage`]); the window's end is
/// `now` plus the verdict's time to reset.
pub(crate) fn usages<'p>(
    settled: &'p [Settled<'p>],
    now: crate::clock::Timestamp,
) -> impl Iterator<Item = super::stats::ShedUsage<'p>> {
    settled.iter().filter_map(move |s| {
        let (limit, source, verdict) = s.reported?;
        let shedding = limit.shedding.as_ref()?;
        shedding.priorities.as_ref()?;
        let (before, after) = verdict.usage?;
        if source != super::outcome::Source::Store {
            return None;
        }
        Some(super::stats::ShedUsage {
            key: &limit.stats_key,
            // A refused request of a limit that sheds counted nothing.
            usage: if verdict.over_limit { before } else { after },
            limit: u64::from(limit.requests_per_unit),
            shedding,
            until: now.saturating_add(verdict.reset_after),
        })
    })
}
