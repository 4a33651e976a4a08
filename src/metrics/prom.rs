//! Prometheus exposition with the names and labels of the Go service's default `statsd_exporter`
//! mapping (`docs/design/contract.md#stats`):
//! `ratelimit_service_rate_limit_<stat>{domain,key1,key2}`,
//! `ratelimit_service_should_rate_limit_error{err_type}`, `ratelimit_service_total_requests`,
//! `ratelimit_service_response_time_seconds`, `ratelimit_service_config_load_{success,error}`; plus
//! ratelimitd's own store latency, folded-key count, local-fallback hits per limit and decisions
//! by source; plus every family the features registered (`super::registry`).
//!
//! Per-limit counters are read from [`Metrics`] at scrape time by a [`Collector`], so the request
//! path only bumps atomics and the scrape cost is bounded by `STATS_MAX_KEYS`.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Encoder, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};

use super::Metrics;
use super::families::{
    DECISIONS, DOMAIN_RULE_FAMILIES, FAMILIES, LOCAL_FALLBACK_FAMILY, MAPPED, NEGATIVE_HITS_FAMILY,
    RULES_SHADOWED, SLOTS_IN_USE,
};

/// Reads [`Metrics`] into metric families on every scrape: its own, then every registered
/// feature's (the encoder sorts the families by name).
struct MetricsCollector {
    metrics: Arc<Metrics>,
    descs: Vec<Desc>,
}

impl MetricsCollector {
    fn new(metrics: Arc<Metrics>) -> MetricsCollector {
        let desc = |name: &str, help: &str, labels: &[&str]| {
            let labels = labels.iter().map(|l| (*l).to_string()).collect();
            Desc::new(name.into(), help.into(), labels, Default::default()).ok()
        };
        let mut descs: Vec<Desc> = FAMILIES
            .iter()
            .filter_map(|(name, help, labels)| desc(name, help, labels))
            .collect();
        descs.extend(desc(DECISIONS.0, DECISIONS.1, DECISIONS.2));
        descs.extend(desc(
            SLOTS_IN_USE.0,
            SLOTS_IN_USE.1,
            &["domain", "key1", "key2"],
        ));
        descs.extend(super::reported::ReportedUsage::desc());
        descs.extend(desc(RULES_SHADOWED.0, RULES_SHADOWED.1, &[]));
        MetricsCollector { metrics, descs }
    }
}

/// A fresh counter vec for family `i` of [`FAMILIES`].
fn vec_of(i: usize) -> Option<IntCounterVec> {
    let (name, help, labels) = FAMILIES[i];
    IntCounterVec::new(Opts::new(name, help), labels).ok()
}

/// `domain`, `key1`, `key2` of a stats key: its first three dot-separated levels; deeper levels
/// are dropped (and their counts summed into the shared series), as the Go mapper does.
pub(super) fn labels(key: &str) -> [&str; 3] {
    let mut it = key.splitn(4, '.');
    [
        it.next().unwrap_or(""),
        it.next().unwrap_or(""),
        it.next().unwrap_or(""),
    ]
}

impl Collector for MetricsCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let m = &self.metrics;
        let vecs: Vec<Option<IntCounterVec>> = (0..FAMILIES.len()).map(vec_of).collect();
        let inc = |i: usize, labels: &[&str], v: u64| {
            if let Some(vec) = &vecs[i] {
                vec.with_label_values(labels).inc_by(v);
            }
        };
        for (key, values) in m.limits.snapshot() {
            let l = labels(&key);
            // A counter that never moved has no series, as with statsd_exporter.
            for (family, (stat, _)) in MAPPED.iter().enumerate() {
                if values[*stat] > 0 {
                    inc(family, &l, values[*stat]);
                }
            }
            if values[6] > 0 {
                inc(LOCAL_FALLBACK_FAMILY, &l, values[6]);
            }
            if values[7] > 0 {
                inc(NEGATIVE_HITS_FAMILY, &l, values[7]);
            }
        }
        for (domain, [v]) in m.unknown_domains.snapshot() {
            inc(5, &[&domain], v);
        }
        for (domain, values) in m.domain_rules.snapshot() {
            for (family, v) in DOMAIN_RULE_FAMILIES.into_iter().zip(values) {
                if v > 0 {
                    inc(family, &[&domain], v);
                }
            }
        }
        inc(6, &["redis_error"], m.redis_errors.load(Ordering::Relaxed));
        inc(
            6,
            &["service_error"],
            m.service_errors.load(Ordering::Relaxed),
        );
        inc(6, &["store_full"], m.store_full.load(Ordering::Relaxed));
        let loads = (m.config_loads)();
        inc(7, &[], loads.successes);
        inc(8, &[], loads.failures);
        let mut out: Vec<MetricFamily> = Vec::new();
        if let Ok(g) = IntGauge::with_opts(Opts::new(RULES_SHADOWED.0, RULES_SHADOWED.1)) {
            g.set(i64::try_from(loads.rules_shadowed).unwrap_or(i64::MAX));
            out.extend(g.collect());
        }
        inc(9, &[], m.global_shadow.load(Ordering::Relaxed));
        inc(10, &[], m.store_errors.load(Ordering::Relaxed));
        let folded = m.limits.folded()
            + m.unknown_domains.folded()
            + m.domain_rules.folded()
            + m.slots.dropped()
            + m.shed_usage.dropped();
        inc(11, &[], folded);
        out.extend(
            vecs.iter()
                .flatten()
                .flat_map(prometheus::core::Collector::collect),
        );
        out.extend(m.shedding.families());
        out.extend(m.reported.families());
        out.extend(super::scrape::decisions(m));
        out.extend(super::scrape::slots(m));
        out.extend(m.shed_usage.families(m.clock.now()));
        out.extend(m.parts.families());
        out
    }
}

/// A registry exposing every metric of `metrics`.
pub(crate) fn registry(metrics: Arc<Metrics>) -> Result<Registry, prometheus::Error> {
    let r = Registry::new();
    r.register(Box::new(metrics.total_requests.clone()))?;
    r.register(Box::new(metrics.response_time.clone()))?;
    r.register(Box::new(metrics.store_latency.clone()))?;
    r.register(Box::new(MetricsCollector::new(metrics)))?;
    Ok(r)
}

/// The text exposition of `registry`.
pub(crate) fn render(registry: &Registry) -> String {
    let mut buf = Vec::new();
    if let Err(e) = TextEncoder::new().encode(&registry.gather(), &mut buf) {
        tracing::warn!(error = %e, "cannot encode metrics");
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// Serves `registry` on `path` of `listener`, under its connection cap and timeouts, until `stop`
/// resolves.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    limits: crate::listener::ConnLimits,
    path: String,
    registry: Registry,
    stop: impl Future<Output = ()> + Send + 'static,
) {
    let registry = Arc::new(registry);
    let handler = move || {
        let registry = registry.clone();
        async move {
            let body = render(&registry);
            (
                [(
                    header::CONTENT_TYPE,
                    TextEncoder::new().format_type().to_string(),
                )],
                body,
            )
                .into_response()
        }
    };
    let router = Router::new().route(&path, get(handler));
    let served = crate::listener::http::serve("Prometheus", listener, limits, router, stop);
    if let Err(e) = served.await {
        tracing::error!(error = %e, "metrics server failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_take_three_levels() {
        assert_eq!(labels("d.k1_v1.k2.k3"), ["d", "k1_v1", "k2"]);
        assert_eq!(labels("d.k1"), ["d", "k1", ""]);
    }
}
