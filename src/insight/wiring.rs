//! The insight features' part of startup: the limiter's insight observers (hot keys, the sampled
//! decision log), the hot-key gauges, the decision rates, and the views the console reads
//! (with the violation log's newest records when it writes to the policy database).

use std::sync::Arc;

use super::metrics::HotKeyGauges;
use super::rates::{RateHistory, Totals};
use super::usage::{LimitUsageGauges, LimitUsageTracker};
use super::{
    About, BreakerStates, Insight, InsightOptions, RecentViolations, StatusLine, StatusLines,
    ViolationView, ViolationsFuture,
};
use crate::background::{Background, every_second};
use crate::metrics::Metrics;
use crate::policy::violations::ViolationQuery;
use crate::policy::{Overrides, Policy};
use crate::reload::ConfigHandle;
use ratelimitd_core::clock::Clock;
use ratelimitd_core::limiter::Observers;

/// What the insight features share with the rest of the process.
pub(crate) struct InsightDeps<'a> {
    /// The service clock.
    pub clock: &'a Arc<dyn Clock>,
    /// Counters (`None` with `DISABLE_STATS`): with them, the hot-key gauges are exported and the
    /// decision rates sampled once a second.
    pub metrics: Option<&'a Arc<Metrics>>,
    /// The Redis store's breakers (`None` on the memory store).
    pub breakers: Option<BreakerStates>,
    /// The fleet mode's status line, when it runs.
    pub fleet: Option<StatusLine>,
    /// The store nodes' health lines (Redis, memcached).
    pub store_nodes: Option<StatusLines>,
    /// The live configuration.
    pub config: &'a Arc<ConfigHandle>,
    /// The stored overrides in service.
    pub overrides: &'a Arc<Overrides>,
    /// The policy database the violation log writes to, if it does.
    pub violations_in: Option<&'a Arc<Policy>>,
    /// The console's "about" line.
    pub about: About,
    /// Where the rate sampler runs.
    pub background: Background<'a>,
}

impl std::fmt::Debug for InsightDeps<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InsightDeps")
            .field("about", &self.about)
            .finish_non_exhaustive()
    }
}

/// The started insight features.
#[derive(Debug)]
pub(crate) struct InsightHandle {
    /// The observers to give the limiter.
    pub observers: Observers,
    /// What the console reads.
    pub insight: Insight,
}

/// Starts the insight features.
pub(crate) fn start(options: &InsightOptions, deps: InsightDeps<'_>) -> InsightHandle {
    let InsightDeps {
        clock,
        metrics,
        breakers,
        fleet,
        store_nodes,
        config,
        overrides,
        violations_in,
        about,
        background: mut bg,
    } = deps;
    let mut observers = Observers::default();
    let hot_keys = super::observers(options, clock, &mut observers);
    let rates = metrics.map(|m| {
        m.register(Arc::new(HotKeyGauges(hot_keys.clone())));
        let usage = Arc::new(LimitUsageTracker::new(clock.clone()));
        observers.push(usage.clone());
        m.register(Arc::new(LimitUsageGauges(usage.clone())));
        bg.spawn(every_second(bg.stopped(), move || {
            usage.sample();
            std::future::ready(())
        }));
        let m = m.clone();
        let history = Arc::new(RateHistory::new(
            Arc::new(move || Totals::from_metrics(&m)),
            clock.clone(),
        ));
        let sampled = history.clone();
        bg.spawn(every_second(bg.stopped(), move || {
            sampled.sample();
            std::future::ready(())
        }));
        history
    });
    let violations =
        violations_in.map(|p| -> Arc<dyn RecentViolations> { Arc::new(FromDatabase(p.clone())) });
    let insight = Insight {
        hot_keys,
        violations,
        breakers,
        fleet,
        store_nodes,
        config: config.clone(),
        overrides: overrides.clone(),
        clock: clock.clone(),
        rates,
        shed_usage: metrics.map(|m| m.shed_usage.clone()),
        about,
    };
    InsightHandle { observers, insight }
}

/// The console's and explain's recent violations, read from the policy database the violation log writes.
#[derive(Debug)]
struct FromDatabase(Arc<Policy>);

impl RecentViolations for FromDatabase {
    fn recent_of(
        &self,
        domain: Option<String>,
        client_key: Option<String>,
        limit: usize,
    ) -> ViolationsFuture<'_> {
        Box::pin(async move {
            let q = ViolationQuery {
                domain,
                client_key,
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
