//! What the parts read from each other that only the composition root can name: the store's
//! breakers, the instance's description and the explainer over the limiter's own store and keys
//! (for the console and explain), the configuration's load counts (for the stats), the
//! configuration in service (for the regions' share gauges), its version (for the leases' release) and whether it falls back locally (for the Redis heartbeat).

use std::sync::Arc;

use crate::explain::Explainer;
use crate::insight::{About, BreakerStates, Insight};
use crate::metrics::{ConfigLoads, LoadCounts};
use crate::policy::violations::instance_name;
use crate::region::{LiveConfig, Regional};
use crate::reload::ConfigHandle;
use crate::settings::{RedisKind, Settings};
use crate::store::leases::ConfigVersion;
use crate::store::redis::RedisStore;
use crate::store::redis::heartbeat::FallbackWanted;
use crate::store::{Backend, Resilience};
use ratelimitd_core::clock::Clock;
use ratelimitd_core::config::FailureMode;
use ratelimitd_core::limiter::LimiterOptions;
use ratelimitd_core::store::Store;

/// Reads the configuration's load counts, for `config_load_success`, `config_load_error` and
/// the shadowed policy rules gauge.
pub(super) fn load_counts(config: &Arc<ConfigHandle>) -> LoadCounts {
    let config = config.clone();
    Arc::new(move || ConfigLoads {
        successes: config.load_successes(),
        failures: config.load_failures(),
        rules_shadowed: config.clashes().len() as u64,
    })
}

/// Hands the configuration in service to the regions' share gauges (nothing before the first
/// load).
pub(super) fn live_config(config: &Arc<ConfigHandle>) -> LiveConfig {
    let config = config.clone();
    Arc::new(move |read| {
        if let Some(s) = config.snapshot() {
            read(&s.config);
        }
    })
}

/// Reads the live configuration's version (0 before the first load).
pub(super) fn config_version(config: &Arc<ConfigHandle>) -> ConfigVersion {
    let config = config.clone();
    Arc::new(move || config.snapshot().map_or(0, |s| s.version))
}

/// Reads whether the local fallback can be used now, for the Redis heartbeat that keeps its
/// instance count: with `DEFAULT_FAILURE_MODE=local`, always; else while some limit of the
/// current configuration names `failure_mode: local`.
pub(super) fn fallback_wanted(
    resilience: &Resilience,
    config: &Arc<ConfigHandle>,
) -> FallbackWanted {
    let default_local = resilience.default_failure_mode == FailureMode::Local;
    let config = config.clone();
    Arc::new(move || default_local || uses_local(&config))
}

/// True when some limit of the current configuration names `failure_mode: local`.
fn uses_local(config: &ConfigHandle) -> bool {
    let Some(snapshot) = config.snapshot() else {
        return false;
    };
    snapshot.config.limits().iter().any(|l| {
        std::iter::once(*l)
            .chain(l.also.iter().map(std::convert::AsRef::as_ref))
            .any(|l| l.failure_mode == Some(FailureMode::Local))
    })
}

/// Reads the Redis store's breakers and the global store's (`None` when there are neither: the
/// memory store without regions).
pub(super) fn breakers(
    redis: Option<&Arc<RedisStore>>,
    regions: &Regional,
) -> Option<BreakerStates> {
    let global = regions.sync.is_some().then(|| regions.clone());
    if redis.is_none() && global.is_none() {
        return None;
    }
    let redis = redis.cloned();
    Some(Arc::new(move || {
        let mut all = redis
            .as_ref()
            .map(|r| r.breaker_reports())
            .unwrap_or_default();
        all.extend(global.iter().flat_map(Regional::breaker_reports));
        all
    }))
}

/// The console's line about this instance: version, name, backend, start time.
pub(super) fn about(settings: &Settings, clock: &Arc<dyn Clock>) -> About {
    About {
        version: env!("CARGO_PKG_VERSION"),
        instance: instance_name(&settings.policy.violations),
        backend: backend(settings),
        started_at: clock.now(),
    }
}

/// Explain over the limiter's store and keys, with the console's configuration, overrides and
/// violation log.
pub(super) fn explainer(
    insight: &Insight,
    store: &Arc<dyn Store>,
    options: &LimiterOptions,
) -> Explainer {
    Explainer {
        config: insight.config.clone(),
        overrides: insight.overrides.clone(),
        store: store.clone(),
        keys: options.keys.clone(),
        clock: insight.clock.clone(),
        violations: insight.violations.clone(),
        default_mode: options.default_failure_mode,
    }
}

/// The backend in words, without credentials: `memory`, or `redis <kind> <address>`.
fn backend(settings: &Settings) -> String {
    if settings.backend == Backend::Dynamodb {
        return format!("dynamodb {}", super::parts::store_target(settings));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimitd_core::clock::Timestamp;
    use ratelimitd_core::config::{self, CompileOptions, ConfigFile};

    fn publish(config: &ConfigHandle, yaml: &str) {
        let files = [ConfigFile {
            name: "c.yaml".into(),
            contents: yaml.into(),
        }];
        let compiled = config::compile(&files, &CompileOptions::default()).unwrap();
        config.publish(compiled, Timestamp::from_secs(1));
    }

    /// The heartbeat writes an instance key only while some limit can fall back locally, and
    /// follows the configuration as it reloads.
    #[test]
    fn the_fallback_is_wanted_while_some_limit_or_the_default_says_local() {
        let config = Arc::new(ConfigHandle::new());
        let by_limits = fallback_wanted(&Resilience::default(), &config);
        assert!(!by_limits(), "nothing loaded yet");
        let plain = "domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: minute, requests_per_unit: 1}}\n";
        publish(&config, plain);
        assert!(!by_limits(), "no limit names failure_mode: local");
        publish(
            &config,
            &format!(
                "{plain}  - {{key: b, rate_limit: {{unit: minute, requests_per_unit: 1, failure_mode: local}}}}\n"
            ),
        );
        assert!(by_limits(), "the reloaded configuration has a local limit");
        publish(&config, plain);
        assert!(!by_limits(), "and no longer after the next reload");

        let local = Resilience {
            default_failure_mode: FailureMode::Local,
            ..Resilience::default()
        };
        assert!(fallback_wanted(&local, &Arc::new(ConfigHandle::new()))());
    }
}
