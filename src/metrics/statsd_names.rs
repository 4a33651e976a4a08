//! Every counter of [`Metrics`] under its Go StatsD name (`ratelimit.service.rate_limit.<KEY>.<stat>`,
//! `ratelimit.service.<name>`, `ratelimit_server.<method>.total_requests`) and ratelimitd's own
//! (`ratelimitd.stats_keys_folded`), read for each StatsD flush. The registered features'
//! counters (the breakers' `ratelimitd.redis_breaker.*`) come after the Go service's and before
//! the shedding counters and the folded keys, in registration order.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{LIMIT_STATS, Metrics};

impl Metrics {
    /// Every counter under its StatsD name, with its cumulative value: the Go service's, the
    /// registered features', then the shedding counters and the folded keys.
    pub fn statsd_counters(&self) -> Vec<(String, u64)> {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut out = Vec::new();
        for (key, values) in self.limits.snapshot() {
            for (stat, v) in LIMIT_STATS.iter().zip(values) {
                out.push((format!("ratelimit.service.rate_limit.{key}.{stat}"), v));
            }
        }
        for (domain, [v]) in self.unknown_domains.snapshot() {
            out.push((
                format!("ratelimit.service.rate_limit.{domain}.domain_not_found"),
                v,
            ));
        }
        for (domain, [unmatched, capped, predicate_errors, hits, misses]) in
            self.domain_rules.snapshot()
        {
            out.push((
                format!("ratelimitd.{domain}.unmatched_descriptors"),
                unmatched,
            ));
            out.push((format!("ratelimitd.{domain}.request_limit_capped"), capped));
            out.push((
                format!("ratelimitd.{domain}.predicate_errors"),
                predicate_errors,
            ));
            out.push((format!("ratelimitd.{domain}.stored_override_hits"), hits));
            out.push((
                format!("ratelimitd.{domain}.stored_override_misses"),
                misses,
            ));
        }
        for (key, v) in self.reported.snapshot() {
            out.push((format!("ratelimitd.{key}.usage_reported"), v));
        }
        let loads = (self.config_loads)();
        let service = [
            ("config_load_success", loads.successes),
            ("config_load_error", loads.failures),
            ("global_shadow_mode", load(&self.global_shadow)),
            (
                "call.should_rate_limit.redis_error",
                load(&self.redis_errors),
            ),
            (
                "call.should_rate_limit.service_error",
                load(&self.service_errors),
            ),
            ("call.should_rate_limit.store_full", load(&self.store_full)),
        ];
        for (name, v) in service {
            out.push((format!("ratelimit.service.{name}"), v));
        }
        // Every method seen so far, read back from the Prometheus counter vec.
        for family in prometheus::core::Collector::collect(&self.total_requests) {
            for m in family.get_metric() {
                let method = m.get_label().first().map_or("", |l| l.value());
                let v = m.get_counter().get_value() as u64;
                out.push((format!("ratelimit_server.{method}.total_requests"), v));
            }
        }
        self.parts.statsd(&mut out);
        out.extend(self.shedding.statsd());
        out.push((
            "ratelimitd.stats_keys_folded".into(),
            self.limits.folded() + self.unknown_domains.folded() + self.domain_rules.folded(),
        ));
        out
    }
}
