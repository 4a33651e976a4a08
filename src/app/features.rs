//! The second half of startup, once the configuration and the policy database are in: the
//! features the limiter and the listeners are given — the violation log, insight (hot keys,
//! decision log, the console's readers, explain), RLQS and the regions — each started from its
//! own options and what it shares with the others.

use tokio::sync::watch;

use super::base::Base;
use super::readers;
use crate::background::Background;
use crate::explain::Explainer;
use crate::insight::{Insight, InsightDeps};
use crate::policy::PolicyHandle;
use crate::policy::violations::ViolationDeps;
use crate::region::{RegionDeps, Regional};
use crate::rlqs::{RateLimitQuotaServiceServer, RlqsDeps, RlqsService};
use crate::settings::Settings;
use ratelimitd_core::limiter::{LimiterOptions, Observers};

/// The started features.
pub(super) struct Features {
    /// What the limiter tells about each decision (the violation log, insight).
    pub(super) observers: Observers,
    /// What the console reads.
    pub(super) insight: Insight,
    /// Explain over the limiter's store and keys.
    pub(super) explainer: Explainer,
    /// The Rate Limit Quota Service (`None` with `RLQS_ENABLED=false`).
    pub(super) rlqs: Option<RateLimitQuotaServiceServer<RlqsService>>,
    /// The regional shares and their sync.
    pub(super) regions: Regional,
}

/// What the features are started with besides their options.
pub(super) struct Shared<'a> {
    /// The base parts.
    pub(super) base: &'a Base,
    /// The started policy database.
    pub(super) policy: &'a PolicyHandle,
    /// The limiter's switches and keys.
    pub(super) limiter: &'a LimiterOptions,
    /// The shutdown flag, which ends RLQS streams.
    pub(super) stop: &'a watch::Receiver<bool>,
}

/// Starts the features, their tasks in `bg`.
pub(super) async fn start(
    settings: &Settings,
    shared: Shared<'_>,
    mut bg: Background<'_>,
) -> Features {
    let Shared {
        base,
        policy,
        limiter,
        stop,
    } = shared;
    let (clock, config, metrics) = (&base.clock, &base.config, &base.metrics);
    let redis = base.stores.redis.as_ref();
    let region_deps = RegionDeps {
        clock,
        redis: &settings.redis,
        resilience: &settings.resilience,
        manual: base.manual_clock.is_some(),
        background: bg.reborrow(),
        metrics: metrics.as_ref(),
        config: readers::live_config(config),
    };
    let regions = crate::region::start(&settings.region, region_deps).await;
    // The regional store's breakers and the global store's, for the console.
    let breakers = readers::breakers(redis, &regions);
    let db = policy.policy.as_ref().ok();
    let violations = &settings.policy.violations;
    let violation_deps = ViolationDeps {
        policy: db,
        metrics,
        clock,
        background: bg.reborrow(),
    };
    let mut observers = crate::policy::violations::start(violations, violation_deps);
    let insight_deps = InsightDeps {
        clock,
        metrics: metrics.as_ref(),
        breakers,
        fleet: base
            .fleet
            .as_ref()
            .map(super::super::fleet::wiring::FleetHandle::status_line),
        store_nodes: base
            .vitals
            .clone()
            .map(|v| -> crate::insight::StatusLines { std::sync::Arc::new(move || v.summary()) }),
        config,
        overrides: &policy.overrides,
        violations_in: db.filter(|_| violations.sinks.db()),
        about: readers::about(settings, clock),
        background: bg.reborrow(),
    };
    let insight = crate::insight::start(&settings.insight, insight_deps);
    observers.extend(insight.observers);
    let explainer = readers::explainer(&insight.insight, &base.stores.store, limiter);
    let rlqs_deps = RlqsDeps {
        redis,
        config,
        overrides: &policy.overrides,
        clock,
        keys: &limiter.keys,
        prefix: &settings.cache_key_prefix,
        metrics,
        max_recv_message_bytes: settings.grpc.max_recv_message_bytes,
        stop,
    };
    let rlqs = crate::rlqs::start(&settings.rlqs, rlqs_deps);
    Features {
        observers,
        insight: insight.insight,
        explainer,
        rlqs,
        regions,
    }
}
