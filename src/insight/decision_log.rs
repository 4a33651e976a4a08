//! The sampled decision log: with `DECISION_LOG_SAMPLE_RATE` above 0, that share of decided
//! requests (allowed ones too) is written as one log event per descriptor under the target
//! `ratelimitd::decision` — with `LOG_FORMAT=json`, one JSON line each — carrying the domain, the
//! descriptor's entries, its code, the reported limit (name, value, unit, algorithm), remaining,
//! reset, hits and what decided it: enough to explain a false throttle after the fact.
//!
//! Sampling is one draw of a thread-local fast RNG per request (none at rate 1); nothing is
//! built for a request that is not sampled.

use ratelimitd_core::limiter::{Observed, Observer, Plan, signals};

/// The tracing target of decision lines (let through at info whatever `LOG_LEVEL` says: the
/// log filter that does so owns the name).
pub(crate) const TARGET: &str = crate::telemetry::DECISION_LOG_TARGET;

/// The decision log observer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecisionLog {
    rate: f64,
}

impl DecisionLog {
    /// A log of `rate` (0 to 1) of the decisions; `None` at 0 (nothing to observe).
    pub(crate) fn new(rate: f64) -> Option<DecisionLog> {
        (rate > 0.0).then_some(DecisionLog { rate })
    }

    fn sampled(self) -> bool {
        self.rate >= 1.0 || fastrand::f64() < self.rate
    }
}

impl Observer for DecisionLog {
    fn observe(&self, d: &Observed<'_>) {
        if !self.sampled() {
            return;
        }
        let req = d.request;
        for (i, (s, descriptor)) in d.settled.iter().zip(&req.descriptors).enumerate() {
            let entries: Vec<serde_json::Value> = (descriptor.entries.iter())
                .map(|e| serde_json::json!({ "key": e.key, "value": e.value }))
                .collect();
            let entries = serde_json::Value::from(entries).to_string();
            let (hits, kind) = match s.plan {
                Plan::Limited(l) => (l.hits, if l.refund { "refund" } else { "limited" }),
                Plan::Unlimited => (0, "unlimited"),
                Plan::NoLimit => (0, "no_limit"),
            };
            let Some((limit, source, v)) = s.reported else {
                tracing::info!(
                    target: TARGET,
                    domain = %req.domain,
                    descriptor = i,
                    entries = %entries,
                    code = "OK",
                    plan = kind,
                    hits,
                    "decision"
                );
                continue;
            };
            // As the response: a shadow rule reports OK; global shadow mode only turns the
            // overall code, so it is its own field.
            let code = if v.over_limit && !limit.shadow_mode {
                "OVER_LIMIT"
            } else {
                "OK"
            };
            // A limit with priority classes or a soft zone: the class and how it came out
            // (`shed`, `soft_denied`...); empty for a plain limit.
            let (class, shed) = signals::shed_outcome(s).map_or(("", ""), |(c, o)| (c, o.as_str()));
            tracing::info!(
                target: TARGET,
                domain = %req.domain,
                descriptor = i,
                entries = %entries,
                code,
                over_limit = v.over_limit,
                shadow_mode = limit.shadow_mode || d.shadow_mode,
                limit_name = %limit.name,
                limit_key = %limit.full_key,
                limit_value = limit.requests_per_unit,
                limit_unit = limit.unit.map_or("UNKNOWN", |u| u.as_str()),
                unit_multiplier = limit.unit_multiplier,
                algorithm = limit.algorithm.name(),
                remaining = v.remaining,
                reset_ms = u64::try_from(v.reset_after.as_millis()).unwrap_or(u64::MAX),
                hits,
                source = source.as_str(),
                class,
                shed,
                "decision"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_observes_nothing_and_one_samples_everything() {
        assert!(DecisionLog::new(0.0).is_none());
        let all = DecisionLog::new(1.0).unwrap();
        assert!((0..1_000).all(|_| all.sampled()));
        let tenth = DecisionLog::new(0.1).unwrap();
        let n = (0..100_000).filter(|_| tenth.sampled()).count();
        assert!((8_000..12_000).contains(&n), "{n}");
    }
}
