//! The labelled families [`super::prom`] assembles at scrape time from counters and readers:
//! decisions by code and source (only the pairs that happened) and the slots in use of each
//! concurrency limit.

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, IntGaugeVec, Opts};

use super::families::{DECISIONS, SLOTS_IN_USE};
use super::{CODE_LABELS, Metrics};
use ratelimitd_core::limiter::Source;

/// `ratelimitd_decisions_total{code,source}`: only the pairs that happened have a series.
pub(super) fn decisions(m: &Metrics) -> Vec<MetricFamily> {
    let (name, help, labels) = DECISIONS;
    let Ok(vec) = IntCounterVec::new(Opts::new(name, help), labels) else {
        return Vec::new();
    };
    let counts = m.decisions.values();
    for (row, code) in counts.chunks(Source::ALL.len()).zip(CODE_LABELS) {
        for (&v, source) in row.iter().zip(Source::ALL) {
            if v > 0 {
                vec.with_label_values(&[code, source.as_str()]).inc_by(v);
            }
        }
    }
    vec.collect()
}

/// `ratelimitd_concurrency_slots_in_use{domain,key1,key2}`: one series per concurrency limit
/// decided so far; limits whose labels coincide (deeper config paths) are summed.
pub(super) fn slots(m: &Metrics) -> Vec<MetricFamily> {
    let (name, help) = SLOTS_IN_USE;
    let Ok(g) = IntGaugeVec::new(Opts::new(name, help), &["domain", "key1", "key2"]) else {
        return Vec::new();
    };
    for (key, in_use) in m.slots.snapshot(m.clock.now()) {
        let labels = super::prom::labels(&key);
        g.with_label_values(&labels)
            .add(i64::try_from(in_use).unwrap_or(i64::MAX));
    }
    g.collect()
}
