//! The request path's side of the violation log: an [`Observer`] that notes each reported
//! `OVER_LIMIT` descriptor in the [`Pending`] map the writer drains. It never waits: a repeat of a
//! pending violation only bumps its counters (no allocation), a new one allocates its record
//! once, and one that does not fit is dropped and counted in
//! `ratelimitd_violations_dropped_total`.

use std::sync::Arc;

use super::Violation;
use super::metrics::ViolationMetrics;
use super::pending::{Key, Pending, Repeat};
use crate::policy::model::PathEntry;
use ratelimitd_core::limiter::{Observed, Observer, ShedOutcome, signals};

/// The violation log's observer.
#[derive(Debug)]
pub(crate) struct ViolationLog {
    pending: Arc<Pending>,
    instance: Arc<str>,
    metrics: Option<Arc<ViolationMetrics>>,
}

impl ViolationLog {
    /// An observer feeding `pending` (the writer's), naming `instance` in every record and
    /// counting drops in `metrics`.
    pub(crate) fn new(
        pending: Arc<Pending>,
        instance: Arc<str>,
        metrics: Option<Arc<ViolationMetrics>>,
    ) -> ViolationLog {
        ViolationLog {
            pending,
            instance,
            metrics,
        }
    }
}

impl Observer for ViolationLog {
    fn observe(&self, d: &Observed<'_>) {
        let over = d.settled.iter().zip(&d.request.descriptors);
        for (settled, descriptor) in over {
            let Some((limit, source, verdict)) = settled.reported else {
                continue;
            };
            if !verdict.over_limit {
                continue;
            }
            let hits = match settled.plan {
                ratelimitd_core::limiter::plan::Plan::Limited(l) => l.hits,
                _ => 0,
            };
            let entries = &descriptor.entries;
            let limit_name = if limit.name.is_empty() {
                &limit.full_key
            } else {
                &limit.name
            };
            // A limit with priority classes or a soft zone: the class (from the config) and
            // whether the soft zone's draw refused it.
            let shed = signals::shed_outcome(settled);
            let key = Key {
                domain: &d.request.domain,
                entries,
                limit_name,
                shadow: d.shadow_mode || limit.shadow_mode,
                class: shed.map(|(class, _)| class).filter(|c| !c.is_empty()),
                soft: shed.is_some_and(|(_, o)| o == ShedOutcome::SoftDenied),
            };
            let usage = verdict.usage.map(|(_, after)| after);
            let repeat = Repeat {
                hits,
                usage,
                at: d.now,
            };
            // Only a key not pending yet pays for its record.
            let first = || Violation {
                domain: key.domain.to_string(),
                descriptor: entries
                    .iter()
                    .map(|e| PathEntry {
                        key: e.key.clone(),
                        value: e.value.clone(),
                    })
                    .collect(),
                client_key: entries
                    .iter()
                    .find(|e| e.key == "client_key")
                    .map(|e| e.value.clone()),
                limit_name: limit_name.clone(),
                requests_per_unit: limit.requests_per_unit,
                unit: limit.unit.map_or("", |u| u.as_str()).into(),
                hits,
                usage,
                requests: 1,
                source: source.as_str().into(),
                shadow: key.shadow,
                class: key.class.map(str::to_owned),
                soft: key.soft,
                at: d.now,
                last_at: d.now,
                instance: self.instance.clone(),
            };
            if !self.pending.note(key, repeat, first)
                && let Some(m) = &self.metrics
            {
                m.dropped(1);
            }
        }
    }
}
