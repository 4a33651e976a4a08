//! The request path's side of the violation log: an [`Observer`] that turns each reported
//! OVER_LIMIT descriptor into a [`Violation`] and `try_send`s it to the writer's bounded queue.
//! It never waits and takes no contended lock: when the queue is full the record is dropped and
//! counted in `ratelimitd_violations_dropped`.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::Violation;
use crate::limiter::{Observed, Observer};
use crate::metrics::Metrics;
use crate::policy::model::PathEntry;

/// The violation log's observer.
#[derive(Debug)]
pub struct ViolationLog {
    queue: mpsc::Sender<Violation>,
    instance: Arc<str>,
    metrics: Option<Arc<Metrics>>,
}

impl ViolationLog {
    /// An observer feeding `queue` (the writer's), naming `instance` in every record and counting
    /// drops in `metrics`.
    pub fn new(
        queue: mpsc::Sender<Violation>,
        instance: Arc<str>,
        metrics: Option<Arc<Metrics>>,
    ) -> ViolationLog {
        ViolationLog {
            queue,
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
                crate::limiter::plan::Plan::Limited(l) => l.hits,
                _ => 0,
            };
            let entries = &descriptor.entries;
            let client_key = entries
                .iter()
                .find(|e| e.key == "client_key")
                .map(|e| e.value.clone());
            let limit_name = if limit.name.is_empty() {
                limit.full_key.clone()
            } else {
                limit.name.clone()
            };
            let record = Violation {
                domain: d.request.domain.clone(),
                descriptor: entries
                    .iter()
                    .map(|e| PathEntry {
                        key: e.key.clone(),
                        value: e.value.clone(),
                    })
                    .collect(),
                client_key,
                limit_name,
                requests_per_unit: limit.requests_per_unit,
                unit: limit.unit.map_or("", |u| u.as_str()).into(),
                hits,
                usage: verdict.usage.map(|(_, after)| after),
                source: source.as_str().into(),
                shadow: d.shadow_mode || limit.shadow_mode,
                at: d.now,
                instance: self.instance.clone(),
            };
            if self.queue.try_send(record).is_err()
                && let Some(m) = &self.metrics
            {
                m.violations_dropped(1);
            }
        }
    }
}
