//! Usage reported after the response, per limit: `ratelimitd_usage_reported_total{domain, key1,
//! key2}`, the hits of every usage report (`usage: report`, `POST /check`'s `report`) the store
//! counted, debt included. Labelled like the Go per-limit stats (the limit's stats key), and bounded
//! by `STATS_MAX_KEYS` like them (past it, reports fold into the overflow key). StatsD gets the
//! same numbers as `ratelimitd.<stats key>.usage_reported`.

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, Opts};

use super::prom::labels;
use super::table::KeyTable;

/// Name and help of the counter.
const REPORTED: (&str, &str) = (
    "ratelimitd_usage_reported_total",
    "Usage reported after the response (usage: report, /check report), counted by the store, debt included",
);

/// The label names: a stats key's first three levels.
const LABELS: [&str; 3] = ["domain", "key1", "key2"];

/// Reported usage per limit stats key.
pub(crate) struct ReportedUsage {
    table: KeyTable<1>,
}

impl ReportedUsage {
    /// A table of at most `max_keys` limits.
    pub(crate) fn new(max_keys: usize) -> ReportedUsage {
        ReportedUsage {
            table: KeyTable::new(max_keys),
        }
    }

    /// Adds `hits` reported on the limit of stats key `key`.
    pub(crate) fn add(&self, key: &str, hits: u64) {
        self.table.add(key, [hits]);
    }

    /// Every limit's reported usage so far, by stats key (for StatsD's
    /// `ratelimitd.<key>.usage_reported`).
    pub(crate) fn snapshot(&self) -> Vec<(String, u64)> {
        (self.table.snapshot().into_iter())
            .map(|(key, [hits])| (key, hits))
            .collect()
    }

    /// The counter's description, for the collector.
    pub(crate) fn desc() -> Option<Desc> {
        let labels = LABELS.iter().map(|l| (*l).to_owned()).collect();
        Desc::new(
            REPORTED.0.into(),
            REPORTED.1.into(),
            labels,
            Default::default(),
        )
        .ok()
    }

    /// The counter family; none until a report was counted.
    pub(crate) fn families(&self) -> Vec<MetricFamily> {
        let snapshot = self.table.snapshot();
        if snapshot.is_empty() {
            return Vec::new();
        }
        let Ok(vec) = IntCounterVec::new(Opts::new(REPORTED.0, REPORTED.1), &LABELS) else {
            return Vec::new();
        };
        for (key, [hits]) in snapshot {
            vec.with_label_values(&labels(&key)).inc_by(hits);
        }
        vec.collect()
    }
}
