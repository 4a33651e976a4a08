//! The insight features' part of startup: the limiter's insight observers (hot keys, the sampled
//! decision log), the hot-key gauges, the decision rates, and what the console and explain read.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::tasks::{every_second, stopped};
use crate::clock::Clock;
use crate::explain::Explainer;
use crate::insight::hotkeys::{By, HotKeys};
use crate::insight::rates::{RateHistory, Totals};
use crate::insight::{
    About, BreakerStates, Insight, RecentViolations, ViolationView, ViolationsFuture,
};
use crate::limiter::Observers;
use crate::metrics::{HOT_KEY_RANKS, HotKeyCounts, Metrics};
use crate::policy::violations::ViolationQuery;
use crate::policy::{Overrides, Policy};
use crate::reload::ConfigHandle;
use crate::settings::{Backend, RedisKind, Settings};
use crate::store::Store;
use crate::store::redis::RedisStore;

/// Reads the Redis store's breakers, for the console (`None` on the memory store).
pub(super) fn breakers(redis: Option<&Arc<RedisStore>>) -> Option<BreakerStates> {
    let redis = redis?.clone();
    Some(Arc::new(move || redis.breaker_reports()))
}

/// The observers to give the limiter, the console's views and explain. `metrics` (when stats are on)
/// starts exporting the hot-key gauges and feeds the decision rates, sampled once a second by a
/// task in `tasks` until `stop`.
pub(super) fn wire(
    settings: &Settings,
    (clock, store): (&Arc<dyn Clock>, &Arc<dyn Store>),
    metrics: Option<&Arc<Metrics>>,
    breakers: Option<BreakerStates>,
    (config, overrides): (&Arc<ConfigHandle>, &Arc<Overrides>),
    (tasks, stop): (&mut JoinSet<()>, &watch::Receiver<bool>),
) -> (Observers, Insight, Explainer) {
    let mut observers = Observers::default();
    let hot_keys = crate::insight::observers(&settings.insight, clock, &mut observers);
    let rates = metrics.map(|m| {
        m.set_hot_keys(gauges(hot_keys.clone()));
        let m = m.clone();
        let history = Arc::new(RateHistory::new(
            Arc::new(move || Totals::from_metrics(&m)),
            clock.clone(),
        ));
        let sampled = history.clone();
        tasks.spawn(every_second(stopped(stop.clone()), move || {
            sampled.sample();
            std::future::ready(())
        }));
        history
    });
    let explainer = Explainer {
        config: config.clone(),
        overrides: overrides.clone(),
        store: store.clone(),
        keys: super::parts::limiter_options(settings).keys,
        clock: clock.clone(),
        violations: None,
    };
    let insight = Insight {
        hot_keys,
        violations: None, // set by `with_violations` when the violation log writes to a database
        breakers,
        config: config.clone(),
        overrides: overrides.clone(),
        clock: clock.clone(),
        rates,
        about: About {
            version: env!("CARGO_PKG_VERSION"),
            instance: (settings.policy.violations.instance_id.clone())
                .unwrap_or_else(super::policy::host_name),
            backend: backend(settings),
            started_at: clock.now(),
        },
    };
    (observers, insight, explainer)
}

/// The backend in words, without credentials: `memory`, or `redis <kind> <address>`.
fn backend(settings: &Settings) -> String {
    if settings.backend != Backend::Redis {
        return "memory (embedded)".to_string();
    }
    let main = &settings.redis.main;
    // A URL may carry `user:password@`: only what follows the last '@' of each address is shown.
    let addresses: Vec<&str> = (main.url.split(','))
        .map(|a| a.rsplit('@').next().unwrap_or(a))
        .collect();
    let kind = match main.kind {
        RedisKind::Single => "single",
        RedisKind::Sentinel => "sentinel",
        RedisKind::Cluster => "cluster",
    };
    let tls = if main.tls { " (TLS)" } else { "" };
    format!("redis {kind} {}{tls}", addresses.join(","))
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

/// Shows the violation log's newest records on the console and in explain, when it writes to
/// `policy`'s database (`logged`: the log has an observer and a database sink).
pub(super) fn with_violations(
    (insight, explainer): (&mut Insight, &mut Explainer),
    policy: Option<&Arc<Policy>>,
    logged: bool,
) {
    if let Some(p) = policy.filter(|_| logged) {
        let log: Arc<dyn RecentViolations> = Arc::new(FromDatabase(p.clone()));
        explainer.violations = Some(log.clone());
        insight.violations = Some(log);
    }
}
