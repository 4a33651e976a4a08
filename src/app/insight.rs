//! The insight features' part of startup: the limiter's insight observers (hot keys, the sampled
//! decision log), the hot-key gauges, and what the status page reads.

use std::sync::Arc;

use crate::clock::Clock;
use crate::insight::hotkeys::{By, HotKeys};
use crate::insight::{BreakerStates, Insight, RecentViolations, ViolationView, ViolationsFuture};
use crate::limiter::Observers;
use crate::metrics::{HOT_KEY_RANKS, HotKeyCounts, Metrics};
use crate::policy::violations::ViolationQuery;
use crate::policy::{Overrides, Policy};
use crate::reload::ConfigHandle;
use crate::settings::Settings;
use crate::store::redis::RedisStore;

/// Reads the Redis store's breakers, for the status page (`None` on the memory store).
pub(super) fn breakers(redis: Option<&Arc<RedisStore>>) -> Option<BreakerStates> {
    let redis = redis?.clone();
    Some(Arc::new(move || redis.breaker_reports()))
}

/// The observers to give the limiter, and the status page's views. `metrics` (when stats are on)
/// starts exporting the hot-key gauges.
pub(super) fn wire(
    settings: &Settings,
    clock: &Arc<dyn Clock>,
    metrics: Option<&Metrics>,
    breakers: Option<BreakerStates>,
    (config, overrides): (&Arc<ConfigHandle>, &Arc<Overrides>),
) -> (Observers, Insight) {
    let mut observers = Observers::default();
    let hot_keys = crate::insight::observers(&settings.insight, clock, &mut observers);
    if let Some(m) = metrics {
        m.set_hot_keys(gauges(hot_keys.clone()));
    }
    let insight = Insight {
        hot_keys,
        violations: None, // set by `with_violations` when the violation log writes to a database
        breakers,
        config: config.clone(),
        overrides: overrides.clone(),
        clock: clock.clone(),
    };
    (observers, insight)
}

fn gauges(hot_keys: Arc<HotKeys>) -> HotKeyCounts {
    Arc::new(move || {
        By::ALL
            .into_iter()
            .map(|by| {
                let top = hot_keys.top(by, HOT_KEY_RANKS);
                (by.as_str(), top.iter().map(|r| r.count).collect())
            })
            .collect()
    })
}

/// The status page's recent violations, read from the policy database the violation log writes.
#[derive(Debug)]
struct FromDatabase(Arc<Policy>);

impl RecentViolations for FromDatabase {
    fn recent(&self, limit: usize) -> ViolationsFuture<'_> {
        Box::pin(async move {
            let q = ViolationQuery {
                limit: u32::try_from(limit).unwrap_or(u32::MAX),
                ..ViolationQuery::default()
            };
            let rows = self
                .0
                .store()
                .violations(&q)
                .await
                .map_err(|e| e.to_string())?;
            let rows = rows.into_iter().take(limit).map(|r| {
                let v = r.violation;
                ViolationView {
                    at: v.at,
                    domain: v.domain,
                    entries: v.descriptor.into_iter().map(|e| (e.key, e.value)).collect(),
                    limit: v.limit_name,
                    requests: v.requests,
                    hits: v.hits,
                    shadow: v.shadow,
                }
            });
            Ok(rows.collect())
        })
    }
}

/// Shows the violation log's newest records on the status page, when it writes to `policy`'s
/// database (`logged`: the log has an observer and a database sink).
pub(super) fn with_violations(insight: &mut Insight, policy: Option<&Arc<Policy>>, logged: bool) {
    if let Some(p) = policy.filter(|_| logged) {
        insight.violations = Some(Arc::new(FromDatabase(p.clone())));
    }
}
